"""Metrics of a placement: the single source of truth for summaries, solvers' objectives and the verifier.

A placement is an int array ``assign`` (T,) of host indices into a
:class:`~packer.problem.PlacementProblem`. Formulas (colocation paper):

* occupied hosts: hosts with at least one task; **TCO** = Σ cost of occupied hosts (cost units).
* **fragmentation** per dimension (Eq. 2): Σ over occupied hosts of (capacity − load),
  in the dimension's unit (cpu reference cores, mem GiB, ...).
* **interference** per sensitivity dimension (Eq. 4): Σ over hosts of
  max(0, Σ_t normalized sensitivity − 1), dimensionless; **tasks at risk**: tasks on a
  host where that sum exceeds 1 in any dimension.
* **moves**: tasks whose host differs from their current one.

Validity rules (checked by :func:`violations`; the exact models and the engine
enforce the same): every task on a host; per host and dimension load ≤ capacity,
except that a host already over capacity in the current placement may stay so as
long as it receives no new task (the plan does not make it worse); a moved task
lands on an eligible architecture (a task that stays is never evicted for being
ineligible where it already runs); pinned tasks stay; at most ``max_moves`` moves;
spread limits per job and host / domain, enforced on hosts and domains that gain
tasks of that job.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packer.problem import PlacementProblem

TOLERANCE = 1e-6


def host_loads(problem: PlacementProblem, assign: np.ndarray) -> np.ndarray:
    """(H, D) summed demand per host and dimension."""
    loads = np.zeros((problem.n_hosts, len(problem.dims)))
    np.add.at(loads, assign, problem.demand)
    return loads


def host_sensitivity(problem: PlacementProblem, assign: np.ndarray) -> np.ndarray:
    """(H, K) summed normalized sensitivity per host: Σ_t s_t,k(A_h) (1.0 = the host's whole share)."""
    use = np.zeros((problem.n_hosts, len(problem.sens_dims)))
    np.add.at(use, assign, problem.sens_demand)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(problem.sens_capacity > 0, use / problem.sens_capacity, np.where(use > 0, np.inf, 0.0))


def occupied(problem: PlacementProblem, assign: np.ndarray) -> np.ndarray:
    """(H,) bool: hosts with at least one task."""
    return np.bincount(assign, minlength=problem.n_hosts) > 0


def initially_overloaded(problem: PlacementProblem) -> np.ndarray:
    """(H,) bool: hosts over capacity in some dimension in the current placement."""
    return (host_loads(problem, problem.current) > problem.capacity + TOLERANCE).any(axis=1)


@dataclass(frozen=True)
class Evaluation:
    """Objective terms and headline metrics of one placement (units in :mod:`packer.metrics`)."""

    hosts: int
    tco: float
    fragmentation: dict[str, float]
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
    sens = host_sensitivity(problem, assign)
    excess = np.clip(sens - 1.0, 0.0, None)
    interference = {d: float(excess[:, k].sum()) for k, d in enumerate(problem.sens_dims)}
    risky_host = (sens > 1.0 + TOLERANCE).any(axis=1) if problem.sens_dims else np.zeros(problem.n_hosts, dtype=bool)
    moves = int((assign != problem.current).sum())
    w = problem.weights
    frag_term = sum(frag[problem.dims[j]] / s for j, s in zip(problem.frag_dims, problem.frag_scale))
    objective = float(problem.primary_cost[occ].sum() + w.fragmentation * frag_term + w.sensitivity * sum(interference.values()) + w.moves * moves)
    return Evaluation(
        hosts=int(occ.sum()),
        tco=float(problem.cost[occ].sum()),
        fragmentation=frag,
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
    moved = assign != problem.current
    gained = np.zeros(problem.n_hosts, dtype=bool)
    gained[assign[moved]] = True
    over = host_loads(problem, assign) > problem.capacity + TOLERANCE
    over_hosts = over.any(axis=1) & (gained | ~initially_overloaded(problem))
    if over_hosts.any():
        h = np.flatnonzero(over_hosts)
        dims = [problem.dims[j] for j in np.flatnonzero(over[h[0]])]
        out.append(f"{len(h)} hosts over capacity, e.g. {problem.host_ids[h[0]]} in {', '.join(dims)}")
    inelig = moved & ~problem.eligible[np.arange(problem.n_tasks), problem.host_arch[assign]]
    if inelig.any():
        out.append(f"{int(inelig.sum())} moved tasks on an ineligible architecture, e.g. {problem.task_ids[inelig][:5].tolist()}")
    pinned_moved = moved & ~problem.movable
    if pinned_moved.any():
        out.append(f"{int(pinned_moved.sum())} pinned tasks moved, e.g. {problem.task_ids[pinned_moved][:5].tolist()}")
    if problem.max_moves is not None and moved.sum() > problem.max_moves:
        out.append(f"{int(moved.sum())} moves exceed the budget of {problem.max_moves}")
    for limit, group, name in ((problem.spread_host, assign, "host"), (problem.spread_domain, problem.domain[assign], "domain")):
        if limit is None:
            continue
        valid = group >= 0
        pairs = problem.job[valid].astype(np.int64) * (int(group.max()) + 1) + group[valid]
        counts = np.bincount(pairs)
        gained_pairs = np.zeros_like(counts, dtype=bool)
        gained_pairs[pairs[moved[valid]]] = True
        broken = (counts > limit) & gained_pairs
        if broken.any():
            out.append(f"{int(broken.sum())} (job, {name}) pairs exceed the spread limit of {limit} tasks")
    return out
