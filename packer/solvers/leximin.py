"""Max-min relative performance, extended lexicographically (Carrera et al., Section 3.2), within a move budget.

The ``fair`` goal ranks placements by their *sorted* vector of relative performances
(RPs, :mod:`packer.model.rpf`): the placement whose lowest RP is higher wins; on a tie, the
one whose second-lowest is higher, and so on (leximin); among equal vectors, the one
with fewer moves. Every placement obeys the rules of :func:`packer.model.metrics.violations`
(capacities, eligibility, pins, spread, ``max_moves``, and a ``min_rp`` guard if set).

Resolution. RPs are compared at a resolution r (:data:`packer.model.rpf.RP_RESOLUTION` = 0.01
unless given): each RP is rounded to the nearest multiple of r (halves up) before
sorting, so RPs that differ by less than the precision of the models behind them count
as equal and the fewer-moves rule can act. Carrera's Table 1 example is reproduced at
r = 0.05, the precision of the paper's printed RPs (tests/test_leximin.py).

Leximin as counts. For RPs on the grid ``g·r``, one sorted vector beats another exactly
when, for the first level g at which their numbers of tasks *below* g differ, it has
fewer. Because every RP falls as its host's load rises, "task t on host h has RP ≥ X"
is a linear bound on h's load (:func:`packer.model.rpf.rp_thresholds`), so each count is an
integer-linear objective.

* :func:`solve_leximin_exact` (small instances): iterated CP-SAT on the whole instance
  ("maximize the minimum, fix it, continue"): at the lowest level g not yet settled it
  maximizes the number of tasks with RP ≥ g, fixes that count as a constraint, then
  jumps to the next level at which the solution found has a task (the counts in
  between cannot be lower), until the RP cap; finally it minimizes moves with every
  count fixed. Optimal at resolution r when every step is proven optimal (status
  "optimal"); otherwise the best placement so far ("feasible").
* :func:`solve_leximin_engine` (fleets): the same levels, greedily. At the lowest level
  g, each host holding a task below g is *repaired* if it can be: tasks leave it (the
  task below g itself, or others that relieve its load), one at a time, each to the
  eligible host where it fits with the most RP headroom while every task there stays
  at ≥ g (empty hosts included: the goal does not weigh cost); a task that had moved may go back
  home, which gives a move back. A host that cannot be repaired within the budget is
  left as it is and set aside; the next level is the lowest RP among the other hosts'
  tasks plus r. Every accepted step lowers the number of tasks below g and keeps every
  other task at ≥ g, so each step improves the sorted vector. The minimum itself is
  found first by a binary search over levels, each probe repairing from the current
  placement and, when the greedy fails, trying CP-SAT on a neighbourhood of at most
  :data:`NEIGHBOURHOOD_HOSTS` hosts (the low ones plus those with the most CPU headroom).

:func:`add_rp_constraints` states "RP ≥ level" in a CP-SAT placement model; the exact
TCO model (:mod:`packer.solvers.cpsat`) uses it for the ``min_rp`` guard, and
:class:`RPGuard` is the same check for the scalable engine.
"""
from __future__ import annotations

import logging
import math
import time

import numpy as np
from ortools.sat.python import cp_model

from packer.model.metrics import evaluate, rp_floors, violations
from packer.model.problem import PlacementProblem
from packer.model.rpf import RP_CAP, RP_FLOOR, RP_RESOLUTION, relative_performance, rp_capacity, rp_demand, rp_loads, rp_thresholds
from packer.solvers.result import SolveResult

log = logging.getLogger(__name__)

#: Integer units per reference core (column 0) and per unit of sensitivity demand in the CP-SAT RP constraints (at most).
RP_SCALE = 1e7
#: Hosts of the exact (CP-SAT) neighbourhood the engine's first phase tries when its greedy repair fails.
NEIGHBOURHOOD_HOSTS = 8
#: Free tasks at most in that neighbourhood, and its time limit (seconds).
NEIGHBOURHOOD_TASKS = 200
NEIGHBOURHOOD_TIME = 2.0
#: Slack (RP load units, relative to the column's scale) allowed by the engine's float comparisons.
_EPS = 1e-9


# --- comparing RP vectors -----------------------------------------------------------------------


def quantize(rp: np.ndarray, resolution: float = RP_RESOLUTION) -> np.ndarray:
    """RPs as integer grid levels: ``round(rp / resolution)``, halves up (a level g means an RP of g·resolution)."""
    return np.floor(np.asarray(rp, dtype=float) / resolution + 0.5 + 1e-7).astype(np.int64)


def level_rp(level: int | np.ndarray, resolution: float = RP_RESOLUTION) -> np.ndarray:
    """The smallest raw RP that :func:`quantize` puts at ``level`` or above."""
    return (np.asarray(level, dtype=float) - 0.5 - 1e-9) * resolution


def leximin_key(rp: np.ndarray, resolution: float = RP_RESOLUTION) -> tuple[int, ...]:
    """The sorted quantized RP vector; a larger key (Python tuple order) is a better placement."""
    return tuple(np.sort(quantize(rp, resolution)).tolist())


def choose_leximin(candidates: list[np.ndarray], changes: list[int], resolution: float = RP_RESOLUTION) -> int:
    """Index of the best candidate RP vector: leximin at ``resolution``, then fewest placement ``changes``."""
    keys = [(leximin_key(rp, resolution), -c) for rp, c in zip(candidates, changes)]
    return max(range(len(keys)), key=lambda i: keys[i])


# --- CP-SAT: "RP ≥ level" as linear constraints ---------------------------------------------------------


def rp_scale(problem: PlacementProblem) -> np.ndarray:
    """(1+K,) integer units per RP-load unit: at most :data:`RP_SCALE`, and below 2^31 for the largest capacity."""
    cap = rp_capacity(problem)
    largest = np.where(np.isfinite(cap), cap, 0.0).max(axis=0) if len(cap) else np.ones(cap.shape[1])
    return np.minimum(RP_SCALE, 2.0**31 / np.maximum(largest, 1e-300))


def add_rp_constraints(model: cp_model.CpModel, form, xs: list, level: np.ndarray, enforce: list | None = None) -> None:
    """Constrain ``model`` (built on the formulation ``form``) so that every task t has RP ≥ ``level[t]``.

    ``level`` (T,) raw RPs; ``enforce`` (T,) optional booleans: the constraint of task t
    holds only where ``enforce[t]`` is true. Tasks outside the neighbourhood keep their
    RP (their hosts' loads do not change). Per host and RP-load column the model bounds
    the load's change against ``form.base`` by ``m ≤ floor((threshold − base load)·scale)``
    for each task that ends there, with entering loads rounded up and leaving loads
    rounded down, so every accepted placement meets the thresholds exactly.
    """
    p = form.problem
    level = np.asarray(level, dtype=float)
    demand = rp_demand(p)
    base_load = rp_loads(p, form.base)
    scale = rp_scale(p)
    is_free = np.zeros(p.n_tasks, dtype=bool)
    is_free[form.free] = True
    in_model = np.zeros(p.n_hosts, dtype=bool)
    in_model[form.hosts] = True
    fixed = np.flatnonzero(~is_free & in_model[form.base])
    pair_thr = rp_thresholds(p, form.pair_task, form.pair_host, level[form.pair_task])
    fixed_thr = rp_thresholds(p, fixed, form.base[fixed], level[fixed])
    by_host = form.pairs_by_host()
    fixed_by_host: dict[int, list[int]] = {}
    for i, h in enumerate(form.base[fixed].tolist()):
        fixed_by_host.setdefault(h, []).append(i)

    def condition(task: int, pair: int | None) -> list:
        lits = [] if pair is None else [xs[pair]]
        return lits + ([enforce[task]] if enforce is not None else [])

    for h in form.hosts.tolist():
        ids = np.asarray(by_host.get(h, []), dtype=np.int64)
        fixed_here = np.asarray(fixed_by_host.get(h, []), dtype=np.int64)
        for j in range(demand.shape[1]):
            thr_p = pair_thr[ids, j] if len(ids) else np.zeros(0)
            thr_f = fixed_thr[fixed_here, j] if len(fixed_here) else np.zeros(0)
            if not (np.isfinite(thr_p).any() or np.isfinite(thr_f).any()) and not (np.isneginf(thr_p).any() or np.isneginf(thr_f).any()):
                continue
            entering = ids[~form.pair_base[ids]] if len(ids) else ids
            staying = ids[form.pair_base[ids]] if len(ids) else ids
            up = np.ceil(demand[form.pair_task[entering], j] * scale[j]).astype(np.int64)
            down = np.floor(demand[form.pair_task[staying], j] * scale[j]).astype(np.int64)
            most, least = int(up.sum()), -int(down.sum())

            def rhs(thr: np.ndarray) -> np.ndarray:
                room = np.where(np.isfinite(thr), (thr - base_load[h, j]) * scale[j], np.where(thr > 0, np.inf, -np.inf))
                return np.floor(np.clip(room, least - 1, most)).astype(np.int64)

            r_p, r_f = rhs(thr_p), rhs(thr_f)
            binding_p = np.flatnonzero(r_p < most)
            binding_f = np.flatnonzero(r_f < most)
            if not len(binding_p) and not len(binding_f):
                continue
            if len(ids):
                delta = cp_model.LinearExpr.weighted_sum([xs[i] for i in entering] + [xs[i] for i in staying], up.tolist() + down.tolist()) + least
            else:
                delta = 0
            bound = model.new_int_var(least - 1, most, f"rp{h}_{j}")
            model.add(delta <= bound)
            for k in binding_p:
                model.add(bound <= int(r_p[k])).only_enforce_if(condition(int(form.pair_task[ids[k]]), int(ids[k])))
            for k in binding_f:
                lits = condition(int(fixed[fixed_here[k]]), None)
                constraint = model.add(bound <= int(r_f[k]))
                if lits:
                    constraint.only_enforce_if(lits)


# --- exact: iterated CP-SAT -----------------------------------------------------------------------------


def _solver(seed: int, time_limit: float, num_workers: int) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.random_seed = int(seed)
    solver.parameters.num_workers = int(num_workers)
    solver.parameters.presolve_inclusion_work_limit = 0
    solver.parameters.max_time_in_seconds = max(float(time_limit), 0.01)
    return solver


def solve_leximin_exact(
    problem: PlacementProblem,
    time_limit: float = 30.0,
    seed: int = 0,
    resolution: float = RP_RESOLUTION,
    num_workers: int = 2,
    minimum_only: bool = False,
) -> SolveResult:
    """The leximin-optimal placement at ``resolution`` with the fewest moves, by iterated CP-SAT (see the module doc).

    ``time_limit`` in seconds for the whole sequence; status "optimal" only when every
    step was proven optimal. ``minimum_only``: stop once the highest minimum is proven
    (max-min, no further levels, moves not minimized) — a reference for benchmarks.
    """
    from packer.solvers.cpsat import _build_model
    from packer.solvers.formulation import build_formulation, unplaceable_tasks

    t0 = time.perf_counter()
    stuck = unplaceable_tasks(problem)
    if len(stuck):
        return SolveResult.infeasible(problem.current, problem.task_ids[stuck].tolist(), "leximin-exact", 0.0)
    form = build_formulation(problem)
    model, x = _build_model(form)  # the hard rules (and the min_rp guard); its TCO objective is replaced below
    xs = x.to_list()
    n = problem.n_tasks
    best = problem.current.copy()
    proven = True
    levels_fixed = 0
    cap_level = int(quantize(np.array([RP_CAP]), resolution)[0])

    def run(objective, maximize: bool) -> np.ndarray | None:
        nonlocal proven
        left = time_limit - (time.perf_counter() - t0)
        if left <= 0:
            proven = False
            return None
        (model.maximize if maximize else model.minimize)(objective)
        model.clear_hints()
        for var, value in zip(xs, (form.pair_host == best[form.pair_task]).tolist()):
            model.add_hint(var, value)
        solver = _solver(seed, left, num_workers)
        code = solver.solve(model)
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            proven = False
            return None
        proven &= code == cp_model.OPTIMAL
        return form.assignment(solver.boolean_values(x).to_numpy(dtype=bool))

    def at_least(level: int) -> list:
        ok = [model.new_bool_var(f"ok{level}_{t}") for t in range(n)]
        add_rp_constraints(model, form, xs, np.full(n, float(level_rp(level, resolution))), enforce=ok)
        return ok

    q = quantize(relative_performance(problem, best), resolution)
    level = int(q.min()) + 1
    while level <= cap_level:
        ok = at_least(level)
        found = run(sum(ok), maximize=True)
        if found is None:
            break
        best = found
        q = quantize(relative_performance(problem, best), resolution)
        reached = int((q >= level).sum())
        model.add(sum(ok) >= reached)
        levels_fixed += 1
        if reached == 0 or (minimum_only and reached < n):
            break
        nxt = int(q[q >= level].min())
        if nxt > level:  # no solution has fewer tasks below any level up to nxt: fix the count there too
            model.add(sum(at_least(nxt)) >= reached)
        level = nxt + 1
    stays = [xs[i] for i in np.flatnonzero(form.pair_current)]
    if stays and proven and not minimum_only:
        found = run(sum(stays), maximize=True)
        if found is not None:
            best = found
    broken = violations(problem, best)
    if broken:
        raise RuntimeError(f"leximin CP-SAT returned an invalid placement: {'; '.join(broken)}")
    return _result(problem, best, "optimal" if proven else "feasible", "leximin-exact", t0, resolution, {"levels": levels_fixed})


def _result(problem: PlacementProblem, assign: np.ndarray, status: str, solver: str, t0: float, resolution: float, stats: dict) -> SolveResult:
    before = relative_performance(problem, problem.current)
    after = relative_performance(problem, assign)
    stats = {**stats, "resolution": resolution, "min_rp_before": float(before.min()), "min_rp_after": float(after.min()),
             "below_zero_before": int((before < 0).sum()), "below_zero_after": int((after < 0).sum())}
    return SolveResult(assign=assign, status=status, objective=evaluate(problem, assign).objective, bound=-math.inf,
                       solver=solver, wall_s=time.perf_counter() - t0, stats=stats)


# --- scalable: greedy host repair, level by level -------------------------------------------------------


class RPGuard:
    """Per-task RP floors for the engine's :class:`~packer.solvers.engine._State`: which hosts may receive a task.

    ``floors`` (T,) raw RPs. ``host_cap[h]`` is the largest RP load of host h at which
    every task on it keeps its floor; a host may receive task t when its RP load plus
    t's stays within that and within t's own threshold there.
    """

    def __init__(self, state, floors: np.ndarray):
        p = state.p
        self.state = state
        self.floors = np.asarray(floors, dtype=float)
        self.demand = rp_demand(p)
        self.cpu = p.dims.index("cpu")
        self.scale = np.maximum(np.where(np.isfinite(rp_capacity(p)), rp_capacity(p), 0.0).max(axis=0), 1e-12)
        self.host_cap = np.full((p.n_hosts, self.demand.shape[1]), np.inf)
        placed = np.flatnonzero(state.assign >= 0)
        np.minimum.at(self.host_cap, state.assign[placed], rp_thresholds(p, placed, state.assign[placed], self.floors[placed]))

    def loads(self, hosts: np.ndarray) -> np.ndarray:
        """(n, 1+K) current RP loads of ``hosts``."""
        return np.column_stack([self.state.loads[hosts, self.cpu], self.state.sens[hosts]])

    def limits(self, t: int, hosts: np.ndarray, level: float | None = None) -> np.ndarray:
        """(n, 1+K) the RP load each of ``hosts`` may reach with task ``t`` on it."""
        lvl = self.floors[t] if level is None else max(level, self.floors[t])
        return np.minimum(self.host_cap[hosts], rp_thresholds(self.state.p, np.full(len(hosts), t), hosts, lvl))

    def admits(self, t: int, hosts: np.ndarray) -> np.ndarray:
        """(n,) bool: ``hosts`` that may receive task ``t``."""
        new = self.loads(hosts) + self.demand[t]
        return (new <= self.limits(t, hosts) + _EPS * self.scale).all(axis=1)

    def admits_all(self, tasks: list[int], host: int) -> bool:
        """Whether ``host`` may receive all of ``tasks`` together."""
        h = np.array([host])
        new = self.loads(h)[0] + self.demand[tasks].sum(axis=0)
        thr = rp_thresholds(self.state.p, np.asarray(tasks), np.full(len(tasks), host), self.floors[tasks])
        return bool((new <= np.minimum(self.host_cap[host], thr.min(axis=0)) + _EPS * self.scale).all())

    def refresh(self, hosts) -> None:
        """Recompute ``host_cap`` of ``hosts`` from the tasks now on them."""
        p = self.state.p
        for h in hosts:
            if h < 0:
                continue
            on = np.fromiter(self.state.tasks_on[h], dtype=np.int64)
            self.host_cap[h] = rp_thresholds(p, on, np.full(len(on), h), self.floors[on]).min(axis=0) if len(on) else np.inf


def solve_leximin_engine(problem: PlacementProblem, time_limit: float = 60.0, seed: int = 0, resolution: float = RP_RESOLUTION) -> SolveResult:
    """Greedy host repair for the ``fair`` goal (see the module doc); deterministic for a seed.

    First the minimum: a binary search over levels for the highest level to which
    every host can be repaired within the move budget (each probe starts from the
    current placement). Then, from that placement, the next levels one by one. Honours
    every rule of :func:`packer.model.metrics.violations`, including a ``min_rp`` guard.
    ``time_limit`` in seconds; ``seed`` only breaks ties between equally good hosts.
    A Ctrl-C returns the placement reached so far.
    """
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    p = problem
    tie = np.random.default_rng(seed).random(p.n_hosts) * 1e-12
    floors = rp_floors(p)
    floors = np.full(p.n_tasks, RP_FLOOR) if floors is None else floors
    budget = math.inf if p.max_moves is None else p.max_moves
    cap_level = int(quantize(np.array([RP_CAP]), resolution)[0])
    stats = {"probes": 0, "levels": 0, "hosts_repaired": 0, "hosts_set_aside": 0, "interrupted": False}
    best = p.current.copy()
    try:
        # Phase 1: the highest minimum reachable (binary search; a probe stops at its first unrepairable host).
        lo = int(quantize(relative_performance(p, p.current), resolution).min())
        hi = cap_level
        while lo < hi and time.perf_counter() < deadline:
            mid = (lo + hi + 1) // 2
            stats["probes"] += 1
            state = _raise(p, p.current, floors, mid, resolution, budget, deadline, tie, stop_on_failure=True, stats=stats)
            found = None if state is None else state.assign.copy()
            if found is None:
                found = _probe_neighbourhood(p, floors, mid, resolution, deadline, seed, stats)
            if found is None:
                hi = mid - 1
            else:
                lo, best = mid, found
        floors = np.maximum(floors, level_rp(lo, resolution)) if lo > quantize(relative_performance(p, p.current), resolution).min() else floors
        # Phase 2: the next levels, one at a time; hosts that cannot be repaired are set aside.
        set_aside = np.zeros(p.n_hosts, dtype=bool)
        assign = best
        while time.perf_counter() < deadline:
            q = quantize(relative_performance(p, assign), resolution)
            open_tasks = ~set_aside[assign]
            if not open_tasks.any() or int((assign != p.current).sum()) >= budget:
                break
            level = int(q[open_tasks].min()) + 1
            if level > cap_level:
                break
            stats["levels"] += 1
            state = _raise(p, assign, floors, level, resolution, budget, deadline, tie, stop_on_failure=False, stats=stats, set_aside=set_aside)
            assign = state.assign.copy()
            best = assign
    except KeyboardInterrupt:
        stats["interrupted"] = True
    assign = best
    broken = violations(p, assign)
    if broken:  # never hand out an invalid plan
        log.error("leximin engine produced an invalid placement (%s); returning the current placement", "; ".join(broken))
        assign = p.current.copy()
    if leximin_key(relative_performance(p, assign), resolution) < leximin_key(relative_performance(p, p.current), resolution):
        assign = p.current.copy()
    stats["timed_out"] = time.perf_counter() > deadline
    return _result(p, assign, "feasible", "leximin-engine", t0, resolution, stats)


def _raise(p: PlacementProblem, start: np.ndarray, floors: np.ndarray, level: int, resolution: float, budget: float, deadline: float,
           tie: np.ndarray, *, stop_on_failure: bool, stats: dict, set_aside: np.ndarray | None = None):
    """From ``start``, repair every host holding a task below ``level`` (hardest first); the engine state after.

    Tasks at or above the level stay there and tasks below it get no worse. With
    ``stop_on_failure`` the first host that cannot be repaired ends the attempt
    (returns None); otherwise such hosts are marked in ``set_aside`` and skipped.
    """
    from packer.solvers.engine import _State

    state = _State(p, start)
    x = float(level_rp(level, resolution))
    rp = relative_performance(p, state.assign)
    q = quantize(rp, resolution)
    guard = RPGuard(state, np.maximum(floors, np.where(q >= level, x, rp - 1e-9)))
    skip = np.zeros(p.n_hosts, dtype=bool) if set_aside is None else set_aside
    low = np.flatnonzero((q < level) & ~skip[state.assign])
    hosts = np.unique(state.assign[low])
    # Hardest first: the largest relative overload of the level's load bound.
    thr = rp_thresholds(p, low, state.assign[low], np.maximum(x, floors[low]))
    need = np.full((p.n_hosts, thr.shape[1]), np.inf)
    np.minimum.at(need, state.assign[low], thr)
    over = np.clip((guard.loads(hosts) - need[hosts]) / guard.scale, 0.0, None).max(axis=1)
    for h in hosts[np.argsort(-over, kind="stable")]:
        if time.perf_counter() > deadline or (stop_on_failure is False and state.moves >= budget):
            break
        if _repair(state, guard, int(h), x, budget, tie):
            stats["hosts_repaired"] += 1
        elif stop_on_failure:
            return None
        else:
            skip[h] = True
            stats["hosts_set_aside"] += 1
    if stop_on_failure and time.perf_counter() > deadline:
        return None
    return state


def _repair(state, guard: RPGuard, h: int, level: float, budget: float, tie: np.ndarray) -> bool:
    """Move tasks off host ``h`` until every task left on it has RP ≥ ``level``; undo and return False if impossible."""
    p = state.p
    done: list[tuple[int, int, int, np.ndarray]] = []
    while True:
        remaining = np.fromiter(state.tasks_on[h], dtype=np.int64)
        thr = rp_thresholds(p, remaining, np.full(len(remaining), h), np.maximum(level, guard.floors[remaining])) if len(remaining) else np.zeros((0, guard.demand.shape[1]))
        load = guard.loads(np.array([h]))[0]
        if len(remaining) == 0 or (load <= thr.min(axis=0) + _EPS * guard.scale).all():
            guard.refresh([h])
            return True
        best = None
        for i, e in enumerate(remaining.tolist()):
            if not p.movable[e]:
                continue
            dest, slack = _destination(state, guard, e, h, level, tie)
            if dest < 0:
                continue
            extra = int(dest != p.current[e]) - int(h != p.current[e])
            if state.moves + extra > budget:
                continue
            others = np.delete(thr, i, axis=0)
            cap = others.min(axis=0) if len(others) else np.full(len(load), np.inf)
            deficit = float(np.clip((load - guard.demand[e] - cap) / guard.scale, 0.0, None).max())
            key = (deficit, extra, -slack)
            if best is None or key < best[0]:
                best = (key, e, dest)
        if best is None:
            for e, frm, to, cap_row in reversed(done):
                state.move(e, frm)
                guard.host_cap[to] = cap_row
            guard.refresh([h])
            return False
        _, e, dest = best
        done.append((e, h, dest, guard.host_cap[dest].copy()))
        new_cap = guard.limits(e, np.array([dest]), level)[0]
        state.move(e, dest)
        guard.host_cap[dest] = new_cap


def _destination(state, guard: RPGuard, e: int, h: int, level: float, tie: np.ndarray) -> tuple[int, float]:
    """Where task ``e`` may go from host ``h`` keeping every task at the destination (``e`` too) at RP ≥ ``level``.

    Its home host if possible, else the host with the most normalized RP headroom left
    (an empty host if one fits: the fair goal does not weigh cost). Returns (host, headroom) or (-1, 0).
    """
    p = state.p
    home = int(p.current[e])
    mask = state.receiver & p.eligible[e][p.host_arch]
    mask[home] = True
    mask[h] = False
    idx = np.flatnonzero(mask)
    if not len(idx):
        return -1, 0.0
    fits = (state.loads[idx] + p.demand[e] <= state.cap[idx]).all(axis=1)
    idx = idx[fits]
    if len(idx) and (p.spread_host is not None or p.spread_domain is not None):
        idx = idx[np.array([int(g) == home or state.spread_ok(e, int(g)) for g in idx], dtype=bool)]
    if not len(idx):
        return -1, 0.0
    new = guard.loads(idx) + guard.demand[e]
    limit = guard.limits(e, idx, level)
    ok = (new <= limit + _EPS * guard.scale).all(axis=1)
    idx, new, limit = idx[ok], new[ok], limit[ok]
    if not len(idx):
        return -1, 0.0
    if home in idx.tolist():
        return home, math.inf
    slack = np.where(np.isfinite(limit), (limit - new) / guard.scale, 1e6).min(axis=1) + tie[idx]
    k = int(np.argmax(slack))
    return int(idx[k]), float(slack[k])


def _probe_neighbourhood(p: PlacementProblem, floors: np.ndarray, level: int, resolution: float, deadline: float, seed: int, stats: dict) -> np.ndarray | None:
    """Reach ``level`` for every task by CP-SAT on a neighbourhood of the current placement; the placement or None.

    The neighbourhood is every host holding a task below the level plus the hosts with
    the most CPU headroom, :data:`NEIGHBOURHOOD_HOSTS` in all (none is tried when the
    low hosts alone exceed half of that), with their movable tasks free; the model
    minimizes moves. Used when the greedy repair cannot reach a level.
    """
    from packer.solvers.cpsat import _build_model
    from packer.solvers.formulation import build_formulation

    left = deadline - time.perf_counter()
    if left <= 0.1:
        return None
    x = float(level_rp(level, resolution))
    rp = relative_performance(p, p.current)
    low_hosts = np.unique(p.current[rp < x])
    if len(low_hosts) > NEIGHBOURHOOD_HOSTS // 2:
        return None
    loads = rp_loads(p, p.current)
    headroom = 1.0 - loads[:, 0] / np.maximum(rp_capacity(p)[:, 0], 1e-12)
    headroom[low_hosts] = -np.inf
    others = np.argsort(-headroom, kind="stable")[: NEIGHBOURHOOD_HOSTS - len(low_hosts)]
    hosts = np.union1d(low_hosts, others[np.isfinite(headroom[others])])
    tasks = np.flatnonzero(np.isin(p.current, hosts))
    if len(tasks) > NEIGHBOURHOOD_TASKS:
        return None
    stats["neighbourhoods"] = stats.get("neighbourhoods", 0) + 1
    form = build_formulation(p, p.current, tasks, hosts)
    model, xvar = _build_model(form)
    xs = xvar.to_list()
    add_rp_constraints(model, form, xs, np.maximum(floors, x))
    stays = [xs[i] for i in np.flatnonzero(form.pair_current)]
    if stays:
        model.maximize(sum(stays))
    solver = _solver(seed, min(NEIGHBOURHOOD_TIME, left), 1)
    if solver.solve(model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    assign = form.assignment(solver.boolean_values(xvar).to_numpy(dtype=bool))
    return assign if not violations(p, assign) else None
