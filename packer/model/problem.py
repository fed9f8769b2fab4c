"""The placement problem: one solver-agnostic instance built from a trace.

Every solver (exact CP-SAT and PuLP models, the scalable engine, baselines) and the
verifier consume a :class:`PlacementProblem`: plain arrays, no Parquet, no pandas.

Units (ARCHITECTURE.md, "Units"). CPU is expressed in *reference cores*: cores of
the fleet's reference architecture (score 1.0; Broadwell18 in the paper's catalog).
A task using ``c`` cores on its current host of architecture A needs
``c · (score_A/cores_A) / (score_ref/cores_ref)`` reference cores anywhere, and a
host of architecture B offers ``cores_B · (score_B/cores_B) / (score_ref/cores_ref)``.
Memory (GiB), network (Gbps) and any other dimension do not change with the
architecture. Sensitivity (colocation paper, Eq. 1) is a further set of *soft*
dimensions: on the default ``need`` basis task ``t`` uses ``s_t,k · g_k(M_t) · CU_t``
of a host's ``g_k(A) · score_A`` (``CU_t`` its requested compute units), on the
``host`` basis ``s_t,k · g_k(M_t)`` of ``g_k(A)`` (:mod:`packer.characterize.normalize`), so the
paper's ``Σ_t Sensitivity(t, h) ≤ 1`` is ``Σ_t sens_demand[t,k] ≤ sens_capacity[h,k]``.

Which number is a task's demand in a dimension is the preset's choice (Table IV):
its request, or the p-th percentile of its usage. A task without usage samples
falls back to its request (the only information there is).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from packer.errors import InputError
from packer.io.fleet import Fleet
from packer.characterize.normalize import DEFAULT_SENSITIVITY_BASIS, check_basis, per_core_throughput, reference_arch, sensitivity_capacity, sensitivity_demand
from packer.io.presets import Preset
from packer.characterize.profile import percentile_column
from packer.model.rpf import TaskGoals, task_goals
from packer.io.trace import Trace

#: Goal names accepted by ``--goal``. ``fair``: leximin relative performance (:mod:`packer.solvers.leximin`).
GOALS = ("tco", "hosts", "fair")


@dataclass(frozen=True)
class Weights:
    """Weights of the linear objective (colocation paper, Eq. 2, combined as its packer-solver does).

    ``objective = primary + fragmentation · F + sensitivity · S + moves · M`` where
    *primary* is the summed cost of occupied hosts (``goal="tco"``, cost units) or
    their count (``goal="hosts"``); ``F`` is Eq. 2's fragmentation summed over the
    fragmentation dimensions, each divided by the mean host capacity in that
    dimension (so F counts "empty hosts' worth" of unused capacity); ``S`` is the
    Eq. 4 interference (summed excess of normalized sensitivity over 1, per host and
    dimension); ``M`` is the number of moved tasks. The defaults make fragmentation
    a secondary goal and moves the last tie-break: a whole host of fragmentation is
    worth 1% of a Type I host's cost, a move 0.01%.

    ``min_rp``: a guard (``--min-rp``, dimensionless relative performance, see
    :mod:`packer.model.rpf`): every task ends with RP ≥ min(min_rp, its RP in the current
    placement) — no task falls below the guard, and a task already below it gets no
    worse. ``None``: no guard. The ``fair`` goal ignores the linear weights and
    maximizes the sorted RP vector (leximin), then minimizes moves.

    ``max_new_at_risk``: a guard (``--max-new-at-risk``, a count of tasks): the plan
    has at most this many more tasks at risk of interference — tasks on a host whose
    summed normalized sensitivity exceeds 1 in some dimension, the colocation paper's
    count beside Eq. 4 — than the current placement. 0 frees cost without adding SLO
    risk. ``None``: no guard.
    """

    goal: str = "tco"
    fragmentation: float = 0.01
    sensitivity: float = 1.0
    moves: float = 1e-4
    min_rp: float | None = None
    max_new_at_risk: int | None = None


@dataclass(frozen=True)
class PlacementProblem:
    """A placement instance. ``T`` tasks, ``H`` hosts, ``D`` hard dimensions, ``K`` soft sensitivity dimensions.

    Attributes (arrays are NumPy):
      task_ids (T,), host_ids (H,), arch_names (A,)
      dims (D,) names; demand (T, D) and capacity (H, D): cpu in reference cores,
        mem GiB, net Gbps, others in the trace's unit
      frag_dims: indices of ``dims`` that count toward fragmentation (cpu and mem, as Eq. 2)
      sens_dims (K,) names; sens_demand (T, K), sens_capacity (H, K) (see module doc)
      sens_basis: what a sensitivity score is a fraction of, ``need`` or ``host`` (:mod:`packer.characterize.normalize`)
      host_arch (H,) index into arch_names; cost (H,) cost units per occupied host
      eligible (T, A) bool: task may run on the architecture
      current (T,) index of the task's current host; movable (T,) bool
      job (T,) job code; domain (H,) failure-domain code (-1 if none)
      max_moves: at most this many tasks leave their host (None = unlimited)
      spread_host / spread_domain: at most this many tasks of one job per host /
        per domain (None = no limit)
      weights: the objective's :class:`Weights`
      goals: per-task relative-performance goals (:class:`packer.model.rpf.TaskGoals`; None = all default)
      task_class: (T,) workload class label per task (characterization), or None
      job_ids: (T,) the job id of each task as the trace names it (``job`` holds their codes), or None
    """

    task_ids: np.ndarray
    host_ids: np.ndarray
    arch_names: np.ndarray
    dims: tuple[str, ...]
    demand: np.ndarray
    capacity: np.ndarray
    frag_dims: tuple[int, ...]
    sens_dims: tuple[str, ...]
    sens_demand: np.ndarray
    sens_capacity: np.ndarray
    host_arch: np.ndarray
    cost: np.ndarray
    eligible: np.ndarray
    current: np.ndarray
    movable: np.ndarray
    job: np.ndarray
    domain: np.ndarray
    max_moves: int | None = 400
    spread_host: int | None = None
    spread_domain: int | None = None
    weights: Weights = field(default_factory=Weights)
    config: str = ""
    goals: TaskGoals | None = None
    task_class: np.ndarray | None = None
    sens_basis: str = DEFAULT_SENSITIVITY_BASIS
    job_ids: np.ndarray | None = None

    @property
    def n_tasks(self) -> int:
        return len(self.task_ids)

    @property
    def n_hosts(self) -> int:
        return len(self.host_ids)

    def eligible_hosts(self, task: int) -> np.ndarray:
        """Indices of hosts whose architecture the task may use."""
        return np.flatnonzero(self.eligible[task][self.host_arch])

    def host_eligible(self) -> np.ndarray:
        """(T, H) bool eligibility; only for small instances (it is T·H bytes)."""
        return self.eligible[:, self.host_arch]

    @property
    def primary_cost(self) -> np.ndarray:
        """Per-host weight of the primary goal: cost units (tco) or 1 (hosts)."""
        return self.cost if self.weights.goal == "tco" else np.ones(self.n_hosts)

    @property
    def frag_scale(self) -> np.ndarray:
        """Mean host capacity per fragmentation dimension (divides Eq. 2's F per dimension)."""
        caps = self.capacity[:, list(self.frag_dims)]
        mean = caps.mean(axis=0) if len(caps) else np.ones(len(self.frag_dims))
        return np.where(mean > 0, mean, 1.0)

    @property
    def open_weight(self) -> np.ndarray:
        """Objective weight of occupying each host: primary cost plus its capacity's share of fragmentation.

        Eq. 2's fragmentation is Σ_open (capacity − load); the load of all tasks is a
        constant, so up to that constant it is Σ_open capacity: linear in which hosts are open.
        """
        frag = (self.capacity[:, list(self.frag_dims)] / self.frag_scale).sum(axis=1)
        return self.primary_cost + self.weights.fragmentation * frag

    def with_(self, **changes) -> "PlacementProblem":
        """A copy with some fields replaced (e.g. ``problem.with_(max_moves=None)``)."""
        return replace(self, **changes)


def _codes(values) -> np.ndarray:
    codes, _ = pd.factorize(pd.Series(values), use_na_sentinel=True)
    return codes.astype(np.int64)


def task_limits(trace: Trace, preset: Preset, profiles: pd.DataFrame | None) -> pd.DataFrame:
    """Per task and dimension, the preset's limit in the trace's units (cpu cores on the current host).

    A percentile limit needs ``profiles`` with a ``<dim>_pNN`` column; a task whose
    profile is NaN (no usage) falls back to its request.
    """
    out = pd.DataFrame(index=trace.tasks.index)
    for dim in trace.dims:
        request = trace.tasks[f"{dim}_request"].to_numpy(dtype=float)
        limit = preset.limit(dim)
        if limit == "request":
            out[dim] = request
            continue
        col = percentile_column(dim, float(limit[1:]))
        if profiles is None or col not in profiles.columns:
            have = "no profiles" if profiles is None else f"profiles with {', '.join(c for c in profiles.columns if c.startswith(dim + '_p'))}"
            raise InputError(f"config '{preset.name}' needs {col} for dimension '{dim}' but got {have}; profile with --percentile {limit[1:]}")
        aligned = profiles.set_index("task_id")[col].reindex(trace.tasks["task_id"]).to_numpy(dtype=float)
        out[dim] = np.where(np.isnan(aligned), request, aligned)
    return out


def build_problem(
    trace: Trace,
    preset: Preset,
    profiles: pd.DataFrame | None = None,
    sensitivity: pd.DataFrame | None = None,
    *,
    max_moves: int | None = 400,
    spread_host: int | None = None,
    spread_domain: int | None = None,
    weights: Weights = Weights(),
    sensitivity_basis: str = DEFAULT_SENSITIVITY_BASIS,
) -> PlacementProblem:
    """Build the instance for ``trace`` under ``preset``.

    ``profiles``: from :func:`packer.characterize.profile.profile_tasks` (needed when the preset
    uses percentiles). ``sensitivity``: per task (``trace.tasks`` order) the scores
    of the preset's sensitivity dimensions and ``measured_on`` (as
    :class:`packer.characterize.sensitivity.SensitivityAssignment` ``.tasks``); needed when the
    preset uses sensitivity. Unscored tasks (NaN) use none of the soft capacity.
    ``sensitivity_basis``: what a score is a fraction of (:data:`packer.characterize.normalize.SENSITIVITY_BASES`).
    """
    check_basis(sensitivity_basis)
    if weights.goal not in GOALS:
        raise InputError(f"unknown goal '{weights.goal}'; known: {', '.join(GOALS)}")
    if weights.min_rp is not None and not np.isfinite(weights.min_rp):
        raise InputError(f"--min-rp must be a finite number, got {weights.min_rp}")
    if weights.max_new_at_risk is not None and weights.max_new_at_risk < 0:
        raise InputError(f"--max-new-at-risk must be >= 0, got {weights.max_new_at_risk}")
    if weights.max_new_at_risk is not None and weights.goal == "fair":
        raise InputError("--max-new-at-risk guards the tco and hosts goals; --goal fair raises the lowest relative performance instead")
    if max_moves is not None and max_moves < 0:
        raise InputError(f"--max-moves must be >= 0 or 'unlimited', got {max_moves}")
    for name, value in (("spread per host", spread_host), ("spread per domain", spread_domain)):
        if value is not None and value < 1:
            raise InputError(f"{name} must be at least 1, got {value}")
    fleet: Fleet = trace.fleet
    tasks, hosts = trace.tasks, trace.hosts
    arch_names = fleet.archs.index.to_numpy(dtype=str)
    host_arch = pd.Index(arch_names).get_indexer(hosts["arch"])
    host_pos = pd.Index(hosts["host_id"]).get_indexer(tasks["host_id"])
    current_arch = host_arch[host_pos]

    tput = per_core_throughput(fleet)
    ref = tput[list(arch_names).index(reference_arch(fleet))]
    dims = tuple(d for d in trace.dims)
    limits = task_limits(trace, preset, profiles)
    demand = np.empty((len(tasks), len(dims)))
    capacity = np.empty((len(hosts), len(dims)))
    for j, dim in enumerate(dims):
        cap = fleet.capacity(dim).to_numpy(dtype=float)
        if dim == "cpu":
            demand[:, j] = limits[dim].to_numpy() * tput[current_arch] / ref
            capacity[:, j] = cap[host_arch] * tput[host_arch] / ref
        else:
            demand[:, j] = limits[dim].to_numpy()
            capacity[:, j] = cap[host_arch]
    frag_dims = tuple(j for j, d in enumerate(dims) if d in ("cpu", "mem"))

    eligible = np.ones((len(tasks), len(arch_names)), dtype=bool)
    if "allowed_archs" in tasks.columns:
        allowed = tasks["allowed_archs"]
        constrained = allowed.notna().to_numpy()
        if constrained.any():
            lists = allowed[constrained].str.split("|")
            members = pd.DataFrame({"row": np.repeat(np.flatnonzero(constrained), lists.str.len()), "arch": np.concatenate(lists.to_numpy()).astype(str)})
            members["arch"] = members["arch"].str.strip()
            mask = np.zeros_like(eligible)
            mask[members["row"].to_numpy(), pd.Index(arch_names).get_indexer(members["arch"])] = True
            eligible[constrained] = mask[constrained]
    # A task larger than an empty host of an architecture can never run there.
    arch_cap = np.stack([capacity[np.argmax(host_arch == a)] if (host_arch == a).any() else np.zeros(len(dims)) for a in range(len(arch_names))])
    eligible &= (demand[:, None, :] <= arch_cap[None, :, :] + 1e-9).all(axis=2)

    sens_dims = tuple(preset.sensitivity)
    sens_demand = np.zeros((len(tasks), len(sens_dims)))
    sens_capacity = np.zeros((len(hosts), len(sens_dims)))
    if sens_dims:
        if sensitivity is None:
            raise InputError(f"config '{preset.name}' uses sensitivity ({', '.join(sens_dims)}) but no sensitivity scores were given")
        measured = sensitivity["measured_on"].to_numpy(dtype=object)
        # The need a score is a fraction of: the task's requested CPU in compute units (module doc of packer.characterize.normalize).
        need_cu = tasks["cpu_request"].to_numpy(dtype=float) * tput[current_arch]
        for k, dim in enumerate(sens_dims):
            use = sensitivity_demand(sensitivity[dim].to_numpy(dtype=float), measured, fleet, dim, sensitivity_basis, need_cu)
            sens_demand[:, k] = np.nan_to_num(use)
            cap = sensitivity_capacity(fleet, dim, sensitivity_basis).to_numpy(dtype=float)
            sens_capacity[:, k] = np.nan_to_num(cap[host_arch], nan=np.inf)
            # A task that alone would exceed an architecture's sensitivity capacity may not move there.
            with np.errstate(divide="ignore", invalid="ignore"):
                alone = sens_demand[:, k][:, None] / cap[None, :]
            eligible &= ~(np.nan_to_num(alone, nan=0.0) > 1.0 + 1e-9)

    movable = tasks["movable"].to_numpy(dtype=bool)
    domain = _codes(hosts["domain"]) if "domain" in hosts.columns else np.full(len(hosts), -1)
    return PlacementProblem(
        task_ids=tasks["task_id"].to_numpy(dtype=str),
        host_ids=hosts["host_id"].to_numpy(dtype=str),
        arch_names=arch_names,
        dims=dims,
        demand=demand,
        capacity=capacity,
        frag_dims=frag_dims,
        sens_dims=sens_dims,
        sens_demand=sens_demand,
        sens_capacity=sens_capacity,
        host_arch=host_arch.astype(np.int64),
        cost=fleet.archs["cost"].to_numpy(dtype=float)[host_arch],
        eligible=eligible,
        current=host_pos.astype(np.int64),
        movable=movable,
        job=_codes(tasks["job_id"]),
        job_ids=tasks["job_id"].to_numpy(dtype=str),
        domain=domain,
        max_moves=max_moves,
        spread_host=spread_host,
        spread_domain=spread_domain,
        weights=weights,
        config=preset.name,
        sens_basis=sensitivity_basis,
        # The most CPU a task can use: its request (or its limit if larger), in reference cores.
        goals=task_goals(tasks, tput[current_arch] / ref, np.maximum(demand[:, dims.index("cpu")], tasks["cpu_request"].to_numpy(dtype=float) * tput[current_arch] / ref)),
    )
