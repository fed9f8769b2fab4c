"""Metrics of a placement: the single source of truth for summaries, solvers' objectives and the verifier.

A placement is an int array ``assign`` (T,) of host indices into a
:class:`~packer.model.problem.PlacementProblem`. Formulas (colocation paper):

* occupied hosts: hosts with at least one task; **TCO** = Σ cost of occupied hosts (cost units).
* **fragmentation** per dimension (Eq. 2): Σ over occupied hosts of (capacity − load),
  in the dimension's unit (cpu reference cores, mem GiB, ...).
* **interference** per sensitivity dimension (Eq. 4): Σ over hosts of
  max(0, Σ_t normalized sensitivity − 1), dimensionless; **tasks at risk**: tasks on a
  host where that sum exceeds 1 in any dimension.
* **moves**: tasks whose host differs from their current one.
* **fragmentation share** per dimension: Eq. 2's fragmentation divided by the summed
  capacity of the occupied hosts (a fraction, 0-1; the paper's Fig. 9 "percentage of
  unoccupied cores within occupied hosts").
* **colocation factor** (Fig. 11): tasks per occupied host (tasks/host), overall and per architecture.
* **hosts freed / newly occupied** per architecture and umbrella type (Fig. 8), relative
  to the current placement; **WSL** (Eq. 3, Fig. 10) and **moves by source and
  destination architecture** (Fig. 7): see :func:`weighted_score_loss`,
  :func:`fleet_breakdown` and :func:`moves_by_arch`.
* **relative performance distribution**: computed from relative performance
  functions (:mod:`packer.model.rpf`), not from the placement alone.

Validity (:func:`violations`): every task on an existing host, and every rule of the
problem (:mod:`packer.rules`: capacity, eligibility, pins, the move budget, spread,
guards, ...) holds; the objective (:func:`evaluate`) is the sum of the problem's
weighted goals. The exact models and the heuristics enforce the same rules.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from packer.model.problem import PlacementProblem
from packer.model.rpf import relative_performance

TOLERANCE = 1e-6


def host_loads(problem: PlacementProblem, assign: np.ndarray) -> np.ndarray:
    """(H, D) summed demand per host and dimension."""
    loads = np.zeros((problem.n_hosts, len(problem.dims)))
    np.add.at(loads, assign, problem.demand)
    return loads


def leftover_score(room: np.ndarray) -> np.ndarray:
    """Best fit's score of hosts (lower fits better) from ``room`` (n, D): the room each would have left per
    dimension, as a share of its capacity. The sum of squares: of two hosts left with the same total room, the
    one left with it in a single dimension, where no task may use it, scores higher."""
    return np.einsum("hd,hd->h", room, room)


def fits_within(loads: np.ndarray, demand: np.ndarray, limits: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Bool over ``rows`` (indices into ``loads``; default every row): where ``loads + demand <= limits`` in every
    dimension (``loads``, ``limits`` (n, D), ``demand`` (D,)).

    Column by column, each over the rows the columns before let through: NumPy reduces a short last axis
    slowly (for 4 dimensions over 18,000 hosts, 6× faster than ``.all(axis=1)``), and gathering whole rows
    was most of a construction's time. The engine asks this once per task over thousands of hosts, the
    pattern packing's best fit once per task over every host.
    """
    rows = np.arange(len(loads)) if rows is None else rows
    kept = np.arange(len(rows))
    for d in range(loads.shape[1]):
        at = rows[kept]
        kept = kept[loads[:, d][at] + demand[d] <= limits[:, d][at]]  # a column, then the rows: faster than [at, d]
    ok = np.zeros(len(rows), dtype=bool)
    ok[kept] = True
    return ok


def host_sensitivity(problem: PlacementProblem, assign: np.ndarray) -> np.ndarray:
    """(H, K) summed normalized sensitivity per host on the problem's basis (:mod:`packer.characterization.normalize`); above 1 is at risk."""
    use = np.zeros((problem.n_hosts, len(problem.sens_dims)))
    np.add.at(use, assign, problem.sens_demand)
    return normalized_sensitivity(use, problem.sens_capacity)


def normalized_sensitivity(use: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Summed sensitivity demand over the host's sensitivity capacity (``inf`` where a host without any gets some)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(capacity > 0, use / capacity, np.where(use > 0, np.inf, 0.0))


def over_sensitivity_limit(normalized: np.ndarray) -> np.ndarray:
    """Hosts (rows) whose summed normalized sensitivity exceeds 1 in some dimension: their tasks are at risk (Eq. 4)."""
    return (normalized > 1.0 + TOLERANCE).any(axis=-1)


def occupied(problem: PlacementProblem, assign: np.ndarray) -> np.ndarray:
    """(H,) bool: hosts with at least one task."""
    return np.bincount(assign, minlength=problem.n_hosts) > 0


def initially_overloaded(problem: PlacementProblem) -> np.ndarray:
    """(H,) bool: hosts over capacity in some dimension in the current placement."""
    return (host_loads(problem, problem.current) > problem.capacity + TOLERANCE).any(axis=1)


@dataclass(frozen=True)
class Evaluation:
    """Objective terms and headline metrics of one placement (units in :mod:`packer.model.metrics`)."""

    hosts: int
    tco: float
    fragmentation: dict[str, float]
    fragmentation_share: dict[str, float]
    colocation: float
    interference: dict[str, float]
    tasks_at_risk: int
    moves: int
    objective: float


def evaluate(problem: PlacementProblem, assign: np.ndarray) -> Evaluation:
    """Headline metrics and the weighted objective of ``assign`` (lower objective is better)."""
    assign = np.asarray(assign, dtype=np.int64)
    occ = occupied(problem, assign)
    loads = host_loads(problem, assign)
    frag = {problem.dims[j]: float((problem.capacity[occ, j] - loads[occ, j]).sum()) for j in problem.frag_dims}
    frag_share = fragmentation_share(problem, occ, frag)
    sens = host_sensitivity(problem, assign)
    excess = np.clip(sens - 1.0, 0.0, None)
    interference = {d: float(excess[:, k].sum()) for k, d in enumerate(problem.sens_dims)}
    risky_host = over_sensitivity_limit(sens) if problem.sens_dims else np.zeros(problem.n_hosts, dtype=bool)
    moves = int((assign != problem.current).sum())
    objective = float(sum(goal.value(problem, assign) for goal in problem.goals))
    return Evaluation(
        hosts=int(occ.sum()),
        tco=float(problem.cost[occ].sum()),
        fragmentation=frag,
        fragmentation_share=frag_share,
        colocation=colocation_factor(problem.n_tasks, int(occ.sum())),
        interference=interference,
        tasks_at_risk=int(risky_host[assign].sum()),
        moves=moves,
        objective=objective,
    )


def violations(problem: PlacementProblem, assign: np.ndarray) -> list[str]:
    """Every rule ``assign`` breaks, as readable sentences (empty list = valid)."""
    assign = np.asarray(assign)
    out: list[str] = []
    if assign.shape != (problem.n_tasks,):
        return [f"placement has {assign.shape} entries for {problem.n_tasks} tasks"]
    bad_host = (assign < 0) | (assign >= problem.n_hosts)
    if bad_host.any():
        return [f"{int(bad_host.sum())} tasks on no existing host, e.g. {problem.task_ids[bad_host][:5].tolist()}"]
    for rule in problem.rules:
        out += rule.violations(problem, assign)
    return out


# --- Fleet changes: hosts freed and newly occupied, WSL, colocation factor, moves by architecture ---
# (colocation paper, Section V-C: Figs. 7, 8, 10, 11 and Eq. 3). All are relative to
# ``problem.current``, the placement the plan starts from.


def fragmentation_share(problem: PlacementProblem, occupied_hosts: np.ndarray, fragmentation: dict[str, float]) -> dict[str, float]:
    """Eq. 2's fragmentation per dimension as a share of the occupied hosts' capacity.

    ``Σ_{h occupied} (capacity − load) / Σ_{h occupied} capacity`` per fragmentation
    dimension: a fraction 0-1 (Fig. 9 plots it as a percentage of unoccupied cores and
    memory within occupied hosts); NaN when no host is occupied. ``fragmentation`` is
    :class:`Evaluation`'s absolute one for the same ``occupied_hosts`` (H,) mask.
    """
    out: dict[str, float] = {}
    for j in problem.frag_dims:
        total = float(problem.capacity[occupied_hosts, j].sum())
        out[problem.dims[j]] = fragmentation[problem.dims[j]] / total if total > 0 else float("nan")
    return out


def colocation_factor(tasks: float | np.ndarray, hosts: float | np.ndarray) -> float | np.ndarray:
    """Colocation factor (Fig. 11): tasks per occupied host, ``tasks / hosts`` (tasks/host); NaN where ``hosts`` is 0.

    Takes scalars (returns a float) or arrays (elementwise, e.g. per architecture).
    """
    tasks, hosts = np.asarray(tasks, dtype=float), np.asarray(hosts, dtype=float)
    out = np.divide(tasks, hosts, out=np.full(np.broadcast(tasks, hosts).shape, np.nan), where=hosts > 0)
    return float(out) if out.ndim == 0 else out


def host_changes_by_arch(problem: PlacementProblem, assign: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(A,) hosts *freed* and (A,) hosts *newly occupied* per architecture (host counts).

    Freed: occupied in ``problem.current`` and empty after ``assign``. Newly occupied:
    empty in ``problem.current`` and occupied after ``assign``. Per architecture,
    ``hosts_after − hosts_before = newly occupied − freed``.
    """
    assign = np.asarray(assign, dtype=np.int64)
    before, after = occupied(problem, problem.current), occupied(problem, assign)
    n_arch = len(problem.arch_names)
    freed = np.bincount(problem.host_arch[before & ~after], minlength=n_arch)
    newly = np.bincount(problem.host_arch[after & ~before], minlength=n_arch)
    return freed, newly


def weighted_score_loss(problem: PlacementProblem, assign: np.ndarray, arch_score: np.ndarray) -> float:
    """Weighted-Score-Loss (colocation paper, Eq. 3): ``Σ_j Score[j]·Occupied[j] − Score[j]·Freed[j]`` over architectures j.

    Unit: score-weighted hosts (a Broadwell18 host, score 1.0, counts 1; a Skylake16,
    1.63). ``arch_score`` (A,) is each architecture's throughput score (fleet column
    ``score``, in ``problem.arch_names`` order).

    The paper defines Occupied as "No. of hosts occupied/used" and Freed as "No. of
    hosts freed/released" without saying relative to what. packer reads both as the
    *changes* the plan makes, as Figs. 7-8 count them ("hosts in the system are
    occupied or freed due to task movement"): Occupied[j] = hosts of j the plan brings
    into use (empty before, occupied after), Freed[j] = hosts of j it empties. WSL is
    then the change in score-weighted occupied capacity,
    ``Σ_h score·occupied_after − Σ_h score·occupied_before``: negative when the plan
    releases throughput capacity, lower is better. The other literal reading,
    Occupied = all hosts occupied after the plan, would count a freed host twice (it is
    already missing from the occupied count) and has no meaning as a change; its
    ingredients are in :func:`fleet_breakdown` (``hosts_after``, ``score``) for anyone
    who wants it.
    """
    freed, newly = host_changes_by_arch(problem, assign)
    return float((np.asarray(arch_score, dtype=float) * (newly - freed)).sum())


def moves_by_arch(problem: PlacementProblem, assign: np.ndarray) -> pd.DataFrame:
    """Moved tasks by source and destination architecture (Fig. 7): an (A, A) table of task counts.

    Rows (index ``from``) are the architecture of a moved task's current host, columns
    (``to``) that of its host after ``assign``; tasks that stay are not counted.
    """
    assign = np.asarray(assign, dtype=np.int64)
    moved = assign != problem.current
    n_arch = len(problem.arch_names)
    pairs = problem.host_arch[problem.current[moved]] * n_arch + problem.host_arch[assign[moved]]
    counts = np.bincount(pairs, minlength=n_arch * n_arch).reshape(n_arch, n_arch)
    return pd.DataFrame(counts, index=pd.Index(problem.arch_names, name="from"), columns=pd.Index(problem.arch_names, name="to"))


#: Columns of :func:`fleet_breakdown`'s tables that add up across architectures.
SUMMED_COLUMNS = ("hosts", "hosts_before", "hosts_after", "freed", "newly_occupied", "tco_before", "tco_after", "wsl",
                  "tasks_before", "tasks_after", "moved_out", "moved_in")


def fleet_breakdown(problem: PlacementProblem, assign: np.ndarray, archs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Hosts, TCO, WSL, colocation and moves before (``problem.current``) and after ``assign``, per architecture and per umbrella type.

    ``archs``: the fleet catalog's table (``Fleet.archs``: ``type`` and ``score`` per
    architecture name). Only architectures with hosts in the problem are listed.
    Columns (per architecture; per type the sums, with colocation recomputed from them):

    * ``type`` (architecture table only) umbrella type; ``score`` (architecture table
      only) throughput score;
    * ``hosts`` hosts in the fleet; ``hosts_before`` / ``hosts_after`` occupied hosts;
      ``freed`` / ``newly_occupied`` hosts emptied / brought into use by the plan
      (:func:`host_changes_by_arch`);
    * ``tco_before`` / ``tco_after`` cost units of the occupied hosts;
    * ``wsl`` score-weighted hosts, ``score · (newly_occupied − freed)`` (Eq. 3,
      :func:`weighted_score_loss`; the sum over architectures is the plan's WSL);
    * ``tasks_before`` / ``tasks_after`` tasks on the architecture's hosts;
      ``colocation_before`` / ``colocation_after`` tasks per occupied host (NaN with none);
    * ``moved_out`` / ``moved_in`` moved tasks leaving / landing on hosts of the
      architecture (a move within one architecture counts in both).
    """
    assign = np.asarray(assign, dtype=np.int64)
    n_arch = len(problem.arch_names)
    occ = {when: occupied(problem, a).astype(float) for when, a in (("before", problem.current), ("after", assign))}
    freed, newly = host_changes_by_arch(problem, assign)
    score = archs["score"].reindex(problem.arch_names).to_numpy(dtype=float)
    moves = moves_by_arch(problem, assign).to_numpy()
    table = pd.DataFrame(
        {
            "type": archs["type"].reindex(problem.arch_names).astype(str).to_numpy(),
            "score": score,
            "hosts": np.bincount(problem.host_arch, minlength=n_arch),
            "hosts_before": np.bincount(problem.host_arch, weights=occ["before"], minlength=n_arch).astype(np.int64),
            "hosts_after": np.bincount(problem.host_arch, weights=occ["after"], minlength=n_arch).astype(np.int64),
            "freed": freed,
            "newly_occupied": newly,
            "tco_before": np.bincount(problem.host_arch, weights=problem.cost * occ["before"], minlength=n_arch),
            "tco_after": np.bincount(problem.host_arch, weights=problem.cost * occ["after"], minlength=n_arch),
            "wsl": score * (newly - freed),
            "tasks_before": np.bincount(problem.host_arch[problem.current], minlength=n_arch),
            "tasks_after": np.bincount(problem.host_arch[assign], minlength=n_arch),
            "moved_out": moves.sum(axis=1),
            "moved_in": moves.sum(axis=0),
        },
        index=pd.Index(problem.arch_names, name="arch"),
    )
    table = _with_colocation(table[table["hosts"] > 0])
    by_type = _with_colocation(table.groupby("type")[list(SUMMED_COLUMNS)].sum())
    by_type.index.name = "type"
    return table, by_type


def _with_colocation(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with colocation factors before/after inserted after the task counts."""
    out = table.copy()
    at = out.columns.get_loc("tasks_after") + 1
    out.insert(at, "colocation_before", colocation_factor(out["tasks_before"].to_numpy(), out["hosts_before"].to_numpy()))
    out.insert(at + 1, "colocation_after", colocation_factor(out["tasks_after"].to_numpy(), out["hosts_after"].to_numpy()))
    return out


# --- Relative performance (Carrera et al.; packer.model.rpf): distributions ---


def rp_distribution(rp: np.ndarray, groups: np.ndarray | None = None) -> dict:
    """Summary of RPs (dimensionless): ``tasks``, ``min``, ``p5`` (5th percentile), ``median``, ``below_zero`` (count).

    With ``groups`` (one label per task) a dict of such summaries per label.
    """
    frame = pd.DataFrame({"rp": np.asarray(rp, dtype=float), "group": "all" if groups is None else np.asarray(groups).astype(str)})
    grouped = frame.groupby("group", sort=True)["rp"]
    table = pd.DataFrame({
        "tasks": grouped.size(), "min": grouped.min(), "p5": grouped.quantile(0.05), "median": grouped.median(),
        "below_zero": grouped.apply(lambda s: int((s < 0).sum())),
    })
    out = {str(g): {k: (int(v) if k in ("tasks", "below_zero") else float(v)) for k, v in row.items()} for g, row in table.iterrows()}
    return out["all"] if groups is None else out


def rp_summary(problem: PlacementProblem, assign: np.ndarray) -> dict:
    """RP distributions before (``problem.current``) and after ``assign``: overall, per architecture
    of the task's host, and per workload class when the problem has class labels."""
    assign = np.asarray(assign, dtype=np.int64)
    out: dict = {}
    for when, placement in (("before", problem.current), ("after", assign)):
        rp = relative_performance(problem, placement)
        out[when] = {"all": rp_distribution(rp), "by_arch": rp_distribution(rp, problem.arch_names[problem.host_arch[placement]])}
        if problem.task_class is not None:
            out[when]["by_class"] = rp_distribution(rp, problem.task_class)
    return out


def tasks_at_risk(problem: PlacementProblem, assign: np.ndarray) -> int:
    """Tasks on hosts whose summed normalized sensitivity exceeds 1 in some dimension (the paper's count beside Eq. 4)."""
    if not problem.sens_dims:
        return 0
    return int(over_sensitivity_limit(host_sensitivity(problem, assign))[np.asarray(assign, dtype=np.int64)].sum())
