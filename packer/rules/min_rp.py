"""The minimum-relative-performance guard (``--min-rp``, Carrera et al.'s relative performance, :mod:`packer.model.rpf`).

Every task ends with RP ≥ ``min(level, its RP now)`` (minus :data:`packer.model.rpf.RP_TOLERANCE`):
no task falls below the guard, and a task already below it gets no worse. Because a
task's RP falls as its host's RP load rises, "task t on host h keeps RP ≥ X" is an
upper bound on h's load in each RP-load column (:func:`packer.model.rpf.rp_thresholds`),
so the guard is a per-host load limit for the heuristics (:class:`RPFloors`) and a
linear constraint in the exact model (:func:`add_rp_constraints`).

The guard holds to within :data:`RP_LOAD_TOLERANCE` of each column's scale in load, as
capacity holds to within its tolerance: a task already below the guard sits on its
limit today, and a tolerance in RP alone (1e-6) was as little as 7e-8 load units there,
below CP-SAT's resolution (1e-7), so from any start but today's CP-SAT could not put
its host back to today's load.
"""
from __future__ import annotations

import numpy as np

from packer.model.rpf import RP_TOLERANCE, relative_performance, rp_capacity, rp_demand, rp_loads, rp_thresholds
from packer.rules.base import LoadLimits, Rule

#: Slack (RP load units, relative to the column's scale) allowed by the heuristics' float comparisons.
RP_LOAD_SLACK = 1e-9
#: Most (task, host type) pairs :meth:`MinRP.load_limits` evaluates at once, and :class:`RPFloors` keeps in a table.
PAIRS_PER_CHUNK = 1_000_000
#: Load (relative to the column's scale, :func:`rp_load_scale`) by which a host may pass a task's RP limit: the guard's
#: tolerance, well above CP-SAT's resolution (1e-7 of the unit). The exact model keeps half of it for the MILP solvers.
RP_LOAD_TOLERANCE = 1e-6


def rp_host_types(problem) -> tuple[np.ndarray, np.ndarray]:
    """Hosts by RP capacity, on which alone a task's threshold depends (:func:`packer.model.rpf.rp_thresholds`): a
    representative host per type, and each host's type (H,)."""
    caps, host_type = np.unique(rp_capacity(problem), axis=0, return_inverse=True)
    representative = np.zeros(len(caps), dtype=np.int64)
    representative[host_type] = np.arange(problem.n_hosts)
    return representative, host_type


def thresholds_by_type(problem, tasks: np.ndarray, floors: np.ndarray, representative: np.ndarray) -> np.ndarray:
    """(n, types, 1+K) the RP-load threshold of each of ``tasks`` at its floor (``floors`` (T,)) on each host type."""
    pair_task = np.repeat(tasks, len(representative))
    pair_host = np.tile(representative, len(tasks))
    return rp_thresholds(problem, pair_task, pair_host, floors[pair_task]).reshape(len(tasks), len(representative), -1)


def rp_load_scale(problem) -> np.ndarray:
    """(1+K,) each RP-load column's scale: its largest finite host capacity (load units; 1e-12 where none is finite)."""
    cap = rp_capacity(problem)
    return np.maximum(np.where(np.isfinite(cap), cap, 0.0).max(axis=0, initial=0.0), 1e-12)


class RPFloors:
    """Per-task RP floors on a :class:`~packer.model.state.PlacementState`: which hosts may receive a task.

    ``floors`` (T,) raw RPs. ``host_cap[h]`` is the largest RP load of host h at which
    every task on it keeps its floor; a host may receive task t when its RP load plus
    t's stays within that and within t's own threshold there. The leximin greedy uses
    it with raised floors; :class:`MinRP` with the guard's.
    """

    def __init__(self, state, floors: np.ndarray):
        p = state.p
        self.state = state
        self.floors = np.asarray(floors, dtype=float)
        self.demand = rp_demand(p)
        self.cpu = p.dims.index("cpu")
        self.scale = rp_load_scale(p)
        # Each task's threshold at its floor on each host type, looked up rather than recomputed on every query (half a
        # construction's time under the guard went to recomputing them); beyond PAIRS_PER_CHUNK pairs, computed per query.
        representative, self.host_type = rp_host_types(p)
        small = p.n_tasks * len(representative) <= PAIRS_PER_CHUNK
        self.table = thresholds_by_type(p, np.arange(p.n_tasks), self.floors, representative) if small else None
        self.host_cap = np.full((p.n_hosts, self.demand.shape[1]), np.inf)
        placed = np.flatnonzero(state.assign >= 0)
        np.minimum.at(self.host_cap, state.assign[placed], self.thresholds(placed, state.assign[placed]))

    def thresholds(self, tasks: np.ndarray, hosts: np.ndarray) -> np.ndarray:
        """(n, 1+K) the RP load host ``hosts[i]`` may reach with ``tasks[i]`` on it at the task's floor."""
        if self.table is not None:
            return self.table[tasks, self.host_type[hosts]]
        return rp_thresholds(self.state.p, tasks, hosts, self.floors[tasks])

    def loads(self, hosts: np.ndarray) -> np.ndarray:
        """(n, 1+K) current RP loads of ``hosts``."""
        return np.column_stack([self.state.loads[hosts, self.cpu], self.state.sens[hosts]])

    def limits(self, t: int, hosts: np.ndarray, level: float | None = None) -> np.ndarray:
        """(n, 1+K) the RP load each of ``hosts`` may reach with task ``t`` on it (``level`` raises t's floor)."""
        tasks = np.full(len(hosts), t)
        if level is None or level <= self.floors[t]:
            own = self.thresholds(tasks, hosts)
        else:
            own = rp_thresholds(self.state.p, tasks, hosts, level)
        return np.minimum(self.host_cap[hosts], own)

    def admits(self, t: int, hosts: np.ndarray) -> np.ndarray:
        """(n,) bool: ``hosts`` that may receive task ``t``."""
        new = self.loads(hosts) + self.demand[t]
        return (new <= self.limits(t, hosts) + RP_LOAD_SLACK * self.scale).all(axis=1)

    def refresh(self, hosts) -> None:
        """Recompute ``host_cap`` of ``hosts`` from the tasks now on them."""
        hosts = np.array([h for h in hosts if h >= 0], dtype=np.int64)
        on = [np.fromiter(self.state.tasks_on[h], dtype=np.int64) for h in hosts]
        where = np.repeat(hosts, [len(tasks) for tasks in on])
        self.host_cap[hosts] = np.inf
        if len(where):
            np.minimum.at(self.host_cap, where, self.thresholds(np.concatenate(on), where))


class MinRP(Rule):
    """Every task ends with RP ≥ min(``level``, its RP now) (module doc). Not honoured by the baseline policies."""

    name = "minimum relative performance"
    strategies = ("engine", "exact", "fair")

    def __init__(self, level: float):
        if not np.isfinite(level):
            raise ValueError(f"the relative-performance guard must be a finite number, got {level}")
        self.level = float(level)

    def floors(self, problem) -> np.ndarray:
        """(T,) the RP each task must keep: ``min(level, RP now) − RP_TOLERANCE``."""
        return np.minimum(self.level, relative_performance(problem, problem.current)) - RP_TOLERANCE

    def violations(self, problem, assign):
        assign = np.asarray(assign, dtype=np.int64)
        limit = rp_thresholds(problem, np.arange(problem.n_tasks), assign, self.floors(problem))
        low = (rp_loads(problem, assign)[assign] > limit + RP_LOAD_TOLERANCE * rp_load_scale(problem)).any(axis=1)
        if not low.any():
            return []
        return [f"{int(low.sum())} tasks below the relative-performance guard {self.level:g} "
                f"(or below their current one), e.g. {problem.task_ids[low][:5].tolist()}"]

    def attach(self, state):
        return RPFloors(state, self.floors(state.p))

    def on_move(self, state, t, frm, to):
        state.tally[self].refresh((frm, to))

    def admits(self, state, t, hosts):
        return state.tally[self].admits(t, hosts)

    def add_to_model(self, model):
        add_rp_constraints(model, self.floors(model.form.problem), tolerance=RP_LOAD_TOLERANCE)

    def load_limits(self, problem):
        """RP loads (:func:`packer.model.rpf.rp_loads`): an occupied host's limit is the least threshold of its tasks today, an
        empty host's the largest any movable task has there (:meth:`_largest_arriving`). Once m of an occupied host's n tasks
        leave, its limit is at most the largest threshold of those left (m < n, and at most its pinned tasks' least), or that
        of an empty host (m = n): per task leaving, at most the larger of the first rise and 1/n of the second."""
        T, H = problem.n_tasks, problem.n_hosts
        floors = self.floors(problem)
        slack = RP_LOAD_TOLERANCE * rp_load_scale(problem)
        today = rp_thresholds(problem, np.arange(T), problem.current, floors) + slack
        arriving = self._largest_arriving(problem, floors, slack)
        counts = np.bincount(problem.current, minlength=H)
        limit = np.full((H, today.shape[1]), np.inf)
        np.minimum.at(limit, problem.current, today)
        limit[counts == 0] = arriving[counts == 0]
        most = np.full_like(limit, -np.inf)
        np.maximum.at(most, problem.current, today)
        pinned = ~problem.movable
        np.minimum.at(most, problem.current[pinned], today[pinned])
        has_pinned = np.bincount(problem.current[pinned], minlength=H) > 0
        with np.errstate(invalid="ignore"):
            vacated = np.where(has_pinned[:, None], -np.inf, (arriving - limit) / np.maximum(counts, 1)[:, None])
            rise = np.maximum(np.maximum(most - limit, vacated), 0.0)
        rise[np.isnan(rise)] = np.inf  # a column without a limit (inf − inf): it binds nowhere, so no bound on its rise is needed
        return LoadLimits(demand=rp_demand(problem), limit=limit, rise=rise)

    @staticmethod
    def _largest_arriving(problem, floors: np.ndarray, slack: np.ndarray) -> np.ndarray:
        """(H, 1+K) per host, the largest RP-load threshold any movable task would have there (per host type,
        :func:`rp_host_types`, in chunks of :data:`PAIRS_PER_CHUNK` pairs)."""
        movable = np.flatnonzero(problem.movable)
        representative, host_type = rp_host_types(problem)
        largest = np.full((len(representative), rp_demand(problem).shape[1]), -np.inf)
        per_chunk = max(1, PAIRS_PER_CHUNK // max(len(movable), 1))
        for first in range(0, len(representative) if len(movable) else 0, per_chunk):
            types = np.arange(first, min(first + per_chunk, len(representative)))
            largest[types] = thresholds_by_type(problem, movable, floors, representative[types]).max(axis=0) + slack
        return largest[host_type]

    def describe(self):
        return {"rule": self.name, "min_rp": self.level}


def add_rp_constraints(model, level: np.ndarray, enforce: np.ndarray | None = None, tolerance: float = 0.0) -> None:
    """Constrain the exact ``model`` so that every task t has RP ≥ ``level[t]`` (T,) raw RPs.

    ``tolerance``: load (relative to each column's scale, :func:`rp_load_scale`) a host may
    exceed a task's limit by; the MILP backends keep half of it (:data:`RP_LOAD_TOLERANCE`).

    ``enforce`` (T,): optional boolean variables of ``model``; the constraint of task t
    holds only where ``enforce[t]`` is true. Tasks outside the neighbourhood keep their RP
    (their hosts' loads do not change). Per host and RP-load column j the load's change
    against the base is bounded by a variable ``bound`` (unit ``rp<j>``), and each task
    that ends on the host bounds ``bound`` by its threshold minus the base load.
    """
    form = model.form
    p = form.problem
    level = np.asarray(level, dtype=float)
    demand = rp_demand(p)
    base_load = rp_loads(p, form.base)
    in_model = form.in_model
    fixed = np.flatnonzero(~form.is_free & in_model[form.base])
    slack = tolerance * rp_load_scale(p)
    pair_thr = rp_thresholds(p, form.pair_task, form.pair_host, level[form.pair_task]) + slack
    fixed_thr = rp_thresholds(p, fixed, form.base[fixed], level[fixed]) + slack
    by_host = form.pairs_by_host()
    fixed_by_host: dict[int, list[int]] = {}
    for i, h in enumerate(form.base[fixed].tolist()):
        fixed_by_host.setdefault(h, []).append(i)

    def literals(task: int, pair: int | None) -> tuple:
        lits = () if pair is None else (model.x[pair],)
        return lits + ((enforce[task],) if enforce is not None else ())

    for h in form.hosts.tolist():
        ids = np.asarray(by_host.get(h, []), dtype=np.int64)
        fixed_here = np.asarray(fixed_by_host.get(h, []), dtype=np.int64)
        for j in range(demand.shape[1]):
            room_p = pair_thr[ids, j] - base_load[h, j] if len(ids) else np.zeros(0)
            room_f = fixed_thr[fixed_here, j] - base_load[h, j] if len(fixed_here) else np.zeros(0)
            entering = ids[~form.pair_base[ids]] if len(ids) else ids
            staying = ids[form.pair_base[ids]] if len(ids) else ids
            most = float(demand[form.pair_task[entering], j].sum())
            least = -float(demand[form.pair_task[staying], j].sum())
            binding_p = np.flatnonzero(room_p < most)
            binding_f = np.flatnonzero(room_f < most)
            if not len(binding_p) and not len(binding_f):
                continue
            unit = f"rp{j}"
            bound = model.cont_var(least - 1.0, most, f"rp{h}_{j}", hint=0.0, unit=unit)
            if len(ids):
                # Σ demand·x over the host's pairs − staying load ≤ bound.
                model.add_le(np.concatenate([model.x[ids], [bound]]), np.concatenate([demand[form.pair_task[ids], j], [-1.0]]),
                             -least, kind="physical", unit=unit)
            for k in binding_p:
                task, pair = int(form.pair_task[ids[k]]), int(ids[k])
                model.add_le([bound], [1.0], max(float(room_p[k]), least - 1.0), enforce=literals(task, pair), kind="physical", unit=unit,
                             margin=slack[j] / 2)
            for k in binding_f:
                model.add_le([bound], [1.0], max(float(room_f[k]), least - 1.0), enforce=literals(int(fixed[fixed_here[k]]), None),
                             kind="physical", unit=unit, margin=slack[j] / 2)
