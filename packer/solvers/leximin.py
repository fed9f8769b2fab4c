"""Max-min relative performance, extended lexicographically (Carrera et al., Section 3.2), within a move budget.

The ``fair`` goal ranks placements by their *sorted* vector of relative performances
(RPs, :mod:`packer.model.rpf`): the placement whose lowest RP is higher wins; on a tie, the
one whose second-lowest is higher, and so on (leximin); among equal vectors, the one
with fewer moves. Every placement obeys the rules of :func:`packer.model.metrics.violations`
(capacities, eligibility, pins, spread, anti-affinity, ``max_moves``, and a ``min_rp`` guard if set).

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

"RP ≥ level" is stated in the exact model by
:func:`packer.rules.min_rp.add_rp_constraints` and checked on a placement state by
:class:`packer.rules.min_rp.RPFloors`, the same pieces that the ``--min-rp`` guard
(:class:`packer.rules.min_rp.MinRP`) uses.
"""
from __future__ import annotations

import logging
import math
import time

import numpy as np
from ortools.sat.python import cp_model

from packer import interrupt
from packer.model.metrics import evaluate, violations
from packer.model.problem import PlacementProblem
from packer.model.rpf import RP_CAP, RP_FLOOR, RP_RESOLUTION, relative_performance, rp_capacity, rp_loads, rp_thresholds
from packer.model.state import PlacementState
from packer.rules.min_rp import RP_LOAD_SLACK, MinRP, RPFloors, add_rp_constraints
from packer.solvers.cpsat import chosen_pairs, cpsat_solver, to_cpsat
from packer.solvers.exact import ExactModel, build_exact_model, unplaceable_tasks
from packer.solvers.result import SolveResult

log = logging.getLogger(__name__)

#: Hosts of the exact (CP-SAT) neighbourhood the engine's first phase tries when its greedy repair fails.
NEIGHBOURHOOD_HOSTS = 8
#: Free tasks at most in that neighbourhood, and its time limit (seconds).
NEIGHBOURHOOD_TASKS = 200
NEIGHBOURHOOD_TIME = 2.0


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


# --- exact: iterated CP-SAT -----------------------------------------------------------------------------


def _maximize(model: ExactModel, variables: list[int], hint: np.ndarray, seed: int, time_limit: float,
              num_workers: int) -> tuple[np.ndarray | None, bool]:
    """Maximize the count of true ``variables`` of ``model`` with CP-SAT from the placement ``hint`` (T,).

    Returns the placement found (None if none within ``time_limit`` seconds) and whether it is proven optimal.
    """
    form = model.form
    cp, handles = to_cpsat(model, objective=False)
    # Only the placement is hinted: the model's own hints are of its base, not of ``hint``.
    cp.clear_hints()
    for var, value in zip(model.x.tolist(), (form.pair_host == hint[form.pair_task]).tolist()):
        cp.add_hint(handles[var], value)
    cp.maximize(cp_model.LinearExpr.sum([handles[v] for v in variables]))
    solver = cpsat_solver(seed, time_limit, num_workers)
    code = interrupt.run_stoppable(lambda: solver.solve(cp), solver.stop_search)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, False
    return form.assignment(chosen_pairs(model, solver, handles)), code == cp_model.OPTIMAL


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
    t0 = time.perf_counter()
    stuck = unplaceable_tasks(problem)
    if len(stuck):
        return SolveResult.infeasible(problem.current, problem.task_ids[stuck].tolist(), "leximin-exact", 0.0)
    model = build_exact_model(problem)  # the rules (the --min-rp guard too); the objective is set per step below
    form = model.form
    n = problem.n_tasks
    best = problem.current.copy()
    proven = True
    levels_fixed = 0
    cap_level = int(quantize(np.array([RP_CAP]), resolution)[0])

    def run(variables: list[int]) -> np.ndarray | None:
        """Maximize the count of true ``variables`` from ``best`` in the time left; the placement or None."""
        nonlocal proven
        left = time_limit - (time.perf_counter() - t0)
        if left <= 0 or interrupt.stop_requested():
            proven = False
            return None
        found, optimal = _maximize(model, variables, best, seed, left, num_workers)
        proven &= optimal
        return found

    def at_least(level: int) -> list[int]:
        """Literals "task t has RP ≥ level" (one per task), stated in ``model``."""
        ok = [model.bool_var(f"ok{level}_{t}") for t in range(n)]
        add_rp_constraints(model, np.full(n, float(level_rp(level, resolution))), enforce=np.asarray(ok))
        return ok

    q = quantize(relative_performance(problem, best), resolution)
    # Every task keeps at least today's minimum: the leximin order counts the tasks at each level from the lowest up,
    # and the levels up to today's minimum are full today. Without this, maximizing the count at the next level let one
    # task fall from RP 0.85 to 0.45 while the other nine rose (random_problem seed 920, 3 moves), and called it optimal.
    model.add_ge(at_least(int(q.min())), np.ones(n), n)
    level = int(q.min()) + 1
    while level <= cap_level:
        ok = at_least(level)
        found = run(ok)
        if found is None:
            break
        best = found
        q = quantize(relative_performance(problem, best), resolution)
        reached = int((q >= level).sum())
        model.add_ge(ok, np.ones(n), reached)
        levels_fixed += 1
        if reached == 0 or (minimum_only and reached < n):
            break
        nxt = int(q[q >= level].min())
        if nxt > level:  # no solution has fewer tasks below any level up to nxt: fix the count there too
            model.add_ge(at_least(nxt), np.ones(n), reached)
        level = nxt + 1
    stays = model.x[form.pair_current].tolist()
    if stays and proven and not minimum_only:
        found = run(stays)
        if found is not None:
            best = found
    broken = violations(problem, best)
    if broken:
        raise RuntimeError(f"leximin CP-SAT returned an invalid placement: {'; '.join(broken)}")
    return _result(problem, best, "optimal" if proven else "feasible", "leximin-exact", t0, resolution,
                   {"levels": levels_fixed, "interrupted": interrupt.stop_requested()})


def _result(problem: PlacementProblem, assign: np.ndarray, status: str, solver: str, t0: float, resolution: float, stats: dict) -> SolveResult:
    before = relative_performance(problem, problem.current)
    after = relative_performance(problem, assign)
    stats = {**stats, "resolution": resolution, "min_rp_before": float(before.min()), "min_rp_after": float(after.min()),
             "below_zero_before": int((before < 0).sum()), "below_zero_after": int((after < 0).sum())}
    return SolveResult(assign=assign, status=status, objective=evaluate(problem, assign).objective, bound=-math.inf,
                       solver=solver, wall_s=time.perf_counter() - t0, stats=stats)


# --- scalable: greedy host repair, level by level -------------------------------------------------------


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
    guard = p.rule(MinRP)
    floors = np.full(p.n_tasks, RP_FLOOR) if guard is None else guard.floors(p)
    budget = math.inf if p.max_moves is None else p.max_moves
    cap_level = int(quantize(np.array([RP_CAP]), resolution)[0])
    stats = {"probes": 0, "levels": 0, "hosts_repaired": 0, "hosts_set_aside": 0, "interrupted": False}
    best = p.current.copy()
    try:
        with interrupt.stoppable():
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
    state = PlacementState(p, start)
    x = float(level_rp(level, resolution))
    rp = relative_performance(p, state.assign)
    q = quantize(rp, resolution)
    guard = RPFloors(state, np.maximum(floors, np.where(q >= level, x, rp - 1e-9)))
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


def _repair(state: PlacementState, guard: RPFloors, h: int, level: float, budget: float, tie: np.ndarray) -> bool:
    """Move tasks off host ``h`` until every task left on it has RP ≥ ``level``; undo and return False if impossible."""
    p = state.p
    done: list[tuple[int, int, int, np.ndarray]] = []
    while True:
        remaining = np.fromiter(state.tasks_on[h], dtype=np.int64)
        thr = rp_thresholds(p, remaining, np.full(len(remaining), h), np.maximum(level, guard.floors[remaining])) if len(remaining) else np.zeros((0, guard.demand.shape[1]))
        load = guard.loads(np.array([h]))[0]
        if len(remaining) == 0 or (load <= thr.min(axis=0) + RP_LOAD_SLACK * guard.scale).all():
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


def _destination(state: PlacementState, guard: RPFloors, e: int, h: int, level: float, tie: np.ndarray) -> tuple[int, float]:
    """Where task ``e`` may go from host ``h`` keeping every task at the destination (``e`` too) at RP ≥ ``level``.

    Its home host if possible, else the host with the most normalized RP headroom left
    (an empty host if one fits: the fair goal does not weigh cost). Returns (host, headroom) or (-1, 0).
    """
    home = int(state.p.current[e])
    idx = state.feasible(e, np.delete(np.arange(state.p.n_hosts), h))
    if not len(idx):
        return -1, 0.0
    new = guard.loads(idx) + guard.demand[e]
    limit = guard.limits(e, idx, level)
    ok = (new <= limit + RP_LOAD_SLACK * guard.scale).all(axis=1)
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
    model = build_exact_model(p, p.current, tasks, hosts)
    add_rp_constraints(model, np.maximum(floors, x))
    stays = model.x[model.form.pair_current].tolist()
    assign, _ = _maximize(model, stays, p.current, seed, min(NEIGHBOURHOOD_TIME, left), 1)
    return assign if assign is not None and not violations(p, assign) else None
