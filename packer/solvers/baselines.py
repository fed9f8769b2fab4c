"""Baseline placement policies, for comparison with the optimizer. None of them is packer's answer.

Every baseline sees the same :class:`~packer.model.problem.PlacementProblem` as the
optimizer (demands, capacities, its rules and move budget) and returns a
:class:`~packer.solvers.result.SolveResult` whose placement passes
:func:`packer.model.metrics.violations`. They honour every rule whose strategies
include ``"baselines"`` (not the relative-performance nor the tasks-at-risk guard:
:func:`packer.solvers.run.check_support` refuses those). They share one procedure
(:func:`_repack`) on a :class:`~packer.model.state.PlacementState`:

1. **Select.** The policy picks which movable tasks to re-place, in its own order, at
   most ``max_moves`` of them (every movable task when the budget is unlimited).
   Selected tasks are lifted off their hosts; everything else stays.
2. **Place.** One selected task at a time, the policy picks a host among the
   *feasible* ones, those every rule admits
   (:meth:`~packer.model.state.PlacementState.feasible`): the task's current host
   (staying is not a move) or a host of an eligible architecture that is not over
   capacity in the current placement, where the task fits in every dimension and no
   spread limit nor anti-affinity pair breaks. Each selected task moves at most
   once, so the budget holds.
3. **Repair.** If a task finds no feasible host (others took the room it left), the
   run restarts with that task kept on its current host, reserved before anything is
   placed. This ends (at worst every task stays) and the result is always valid.

The policies (solver names as ``packer solve --solver``):

* ``baseline-random`` (:func:`random_placement`): selects a uniformly random set of
  movable tasks, puts each on a uniformly random feasible host (Paragon's
  heterogeneity- and interference-agnostic random scheduler).
* ``baseline-least-loaded`` (:func:`least_loaded`): selects the tasks of the most
  loaded hosts (load = the largest share of capacity used in any dimension), largest
  first; puts each on the feasible host with the least load — a load balancer: it
  spreads, it does not consolidate.
* ``baseline-ffd`` (:func:`first_fit_decreasing`): first-fit decreasing by a
  multi-dimensional size (the product of demands normalized by the largest host
  capacity: ARCHITECTURE.md, ~5% above the bound on openb against ~15% for the sum).
  Hosts are ranked by objective weight per unit of capacity (cheapest capacity first,
  the currently most loaded first among equals; :mod:`packer.solvers.ffd`, shared
  with the engine's construction). Selects the tasks of the hosts ranked
  last (the ones a full FFD would fill last), largest first; places them largest first
  on the first feasible host in rank order that already holds tasks, else the first
  feasible one. Unlimited budget: every movable task, i.e. a full FFD repack.
* ``baseline-paragon`` (:func:`paragon_greedy`): Paragon's greedy server selection
  (Delimitrou & Kozyrakis, Section 3.2) with sensitivity and load as the sources of
  interference (SoI). Per SoI, with every quantity a share of the candidate host
  (normalized sensitivity Eq. 1, or demand/capacity): ``D1 = t_server − c_task``
  (the host tolerates the task) and ``D2 = t_task − c_server`` (the task tolerates
  the host's load), where ``c`` is caused interference (a task's share; a host's
  summed share) and ``t`` tolerated interference (``1 − c`` of a task; of a host, the
  least any of its tasks tolerates for sensitivity, its headroom for load). Load SoIs
  are hard (only fitting hosts are feasible). Sensitivity SoIs filter candidates to
  ``min(D1, D2) ≥ 0`` in decreasing order of the task's sensitivity; when a filter
  would leave none, that SoI is relaxed to the best value available (Paragon's
  backtracking, in one step). Among the survivors the best architecture for the task
  is kept — the one where its summed normalized sensitivity is lowest (Eq. 1 makes it
  lowest where per-core throughput and bandwidth are largest) — and the host with the
  smallest slack ``Σ_SoI |D1 + D2|`` wins. Selects the tasks of hosts with sensitivity
  excess over 1 first (most excess first), then those of the least loaded hosts
  (Paragon strives to minimize interference "while also increasing server
  utilization"); places the most sensitive first.
* ``baseline-tarcil`` (:func:`tarcil_sampling`): Tarcil's sampling scheduler
  (Delimitrou, Sanchez & Kozyrakis, Sections 3.2-3.3): sample ``R = ⌈ln p / ln x⌉``
  feasible hosts (:func:`tarcil_sample_size`; defaults x = 0.8, p = 0.2 give R = 8,
  capped at 32) and keep the one of best quality ``Q`` (:func:`tarcil_quality`, Eq. 5,
  with the task's and the host's pressure vectors over the same SoIs as Paragon).
  Selects the tasks with the lowest quality on their current host, worst first
  (Tarcil re-schedules jobs that run below their expected quality, Section 5.2).

Each policy is vectorized over hosts for one task; the loop runs over the tasks being
placed. All are deterministic for a seed.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Callable

import numpy as np

from packer.model.metrics import evaluate, host_loads, host_sensitivity, violations
from packer.model.problem import PlacementProblem
from packer.model.state import PlacementState, inverse
from packer.solvers.ffd import capacity_price, largest_first, relative_demand
from packer.solvers.result import SolveResult

log = logging.getLogger(__name__)

#: Tarcil's defaults: target quality percentile x, miss probability p (R = ⌈ln p / ln x⌉ = 8), and the cap on R.
TARCIL_QUALITY = 0.8
TARCIL_MISS = 0.2
TARCIL_MAX_SAMPLES = 32
#: Pressure levels of Tarcil's encoding: integers 0-99 per source of interference.
_LEVELS = 99

#: A placement rule: (state, task, feasible hosts) -> one of those hosts.
Chooser = Callable[[PlacementState, int, np.ndarray], int]


def _repack(problem: PlacementProblem, selected: np.ndarray, policy: Callable[[PlacementState], Chooser]) -> tuple[np.ndarray, dict]:
    """Lift ``selected`` (ordered task indices) and place them in order (module doc, steps 2-3).

    ``policy`` makes the chooser for each fresh placement (a policy that keeps its own
    tallies, as Paragon's tolerances, starts them from that placement).
    """
    stay = np.zeros(problem.n_tasks, dtype=bool)
    every_host = np.arange(problem.n_hosts)
    restarts = 0
    while True:
        lifted = selected[~stay[selected]]
        start = problem.current.copy()
        start[lifted] = -1
        state = PlacementState(problem, start)
        choose = policy(state)
        failed = []
        for t in lifted.tolist():
            hosts = state.feasible(t, every_host)
            if len(hosts):
                state.move(t, choose(state, t, hosts))
            else:
                failed.append(t)
        if not failed:
            return state.assign, {"selected": len(selected), "kept_by_repair": int(stay.sum()), "restarts": restarts}
        log.info("%d tasks found no host; restarting with them kept in place", len(failed))
        stay[failed] = True
        restarts += 1


def _budget(problem: PlacementProblem) -> int:
    movable = int(problem.movable.sum())
    return movable if problem.max_moves is None else min(problem.max_moves, movable)


def _size(problem: PlacementProblem) -> np.ndarray:
    """(T,) multi-dimensional size: product of demands normalized by the largest host capacity (floored at 1e-9 per dimension)."""
    return np.prod(np.maximum(relative_demand(problem), 1e-9), axis=1)


def _result(problem: PlacementProblem, assign: np.ndarray, name: str, t0: float, stats: dict) -> SolveResult:
    problems = violations(problem, assign)
    if problems:  # a bug in a policy: never hand out an invalid plan
        log.error("%s produced an invalid placement (%s); returning the current placement", name, "; ".join(problems))
        assign = problem.current.copy()
    ev = evaluate(problem, assign)
    return SolveResult(assign=assign, status="feasible", objective=ev.objective, bound=-math.inf, solver=name,
                       wall_s=time.perf_counter() - t0, stats={**stats, "moves": ev.moves, "valid": not problems})


def random_placement(problem: PlacementProblem, seed: int = 0) -> SolveResult:
    """``baseline-random``: a random budget's worth of movable tasks, each to a uniformly random feasible host."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    selected = rng.permutation(np.flatnonzero(problem.movable))[:_budget(problem)]
    assign, stats = _repack(problem, selected, lambda _: lambda state, t, hosts: int(rng.choice(hosts)))
    return _result(problem, assign, "baseline-random", t0, stats)


def least_loaded(problem: PlacementProblem, seed: int = 0) -> SolveResult:
    """``baseline-least-loaded``: the tasks of the most loaded hosts, each to the feasible host with the least load (``seed`` unused: deterministic)."""
    t0 = time.perf_counter()
    p = problem
    share = (host_loads(p, p.current) * inverse(p.capacity)).max(axis=1)
    movable = np.flatnonzero(p.movable)
    selected = movable[np.lexsort((-_size(p)[movable], -share[p.current[movable]]))][:_budget(p)]

    def choose(state: PlacementState, t: int, hosts: np.ndarray) -> int:
        return int(hosts[np.argmin(state.load_share(hosts))])

    assign, stats = _repack(p, selected, lambda _: choose)
    return _result(p, assign, "baseline-least-loaded", t0, stats)


def first_fit_decreasing(problem: PlacementProblem, seed: int = 0) -> SolveResult:
    """``baseline-ffd``: first-fit decreasing within the move budget; a full FFD repack when it is unlimited (``seed`` unused)."""
    t0 = time.perf_counter()
    p = problem
    size = _size(p)
    host_order = np.lexsort((-np.bincount(p.current, minlength=p.n_hosts), capacity_price(p)))
    rank = np.empty(p.n_hosts, dtype=np.int64)
    rank[host_order] = np.arange(p.n_hosts)
    movable = np.flatnonzero(p.movable)
    chosen = movable[np.lexsort((-size[movable], -rank[p.current[movable]]))][:_budget(p)]

    def choose(state: PlacementState, t: int, hosts: np.ndarray) -> int:
        opened = hosts[state.count[hosts] > 0]
        pool = opened if len(opened) else hosts
        return int(pool[np.argmin(rank[pool])])

    assign, stats = _repack(p, largest_first(chosen, size[chosen]), lambda _: choose)
    return _result(p, assign, "baseline-ffd", t0, stats)


def _pressures(state: PlacementState, t: int | np.ndarray, hosts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Interference caused by task(s) ``t`` and by the load of ``hosts``, per SoI (load dims, then sensitivity dims), as shares of the host.

    ``t`` is one task (paired with every host) or one task per host. Returns ``(task,
    host)``, both (len(hosts), D + K): the task's demand / capacity and normalized
    sensitivity (Eq. 1) on the host; the host's load / capacity and summed normalized
    sensitivity. A sensitivity the host has no capacity for counts as 1 (the whole host).
    """
    p = state.p
    task = p.demand[t] * state.inv_cap[hosts]
    host = state.loads[hosts] * state.inv_cap[hosts]
    if len(p.sens_dims):
        demand = p.sens_demand[t]
        sens = np.where(p.sens_capacity[hosts] > 0, demand * state.inv_sens_cap[hosts], np.where(demand > 0, 1.0, 0.0))
        task = np.hstack([task, sens])
        host = np.hstack([host, state.sens[hosts] * state.inv_sens_cap[hosts]])
    return task, host


def paragon_greedy(problem: PlacementProblem, seed: int = 0) -> SolveResult:
    """``baseline-paragon``: Paragon's greedy, interference-aware server selection (module doc; ``seed`` unused)."""
    t0 = time.perf_counter()
    p = problem
    n_load = len(p.dims)
    inv_sens = inverse(p.sens_capacity)
    excess = np.clip(host_sensitivity(p, p.current) - 1.0, 0.0, None).sum(axis=1)
    share = (host_loads(p, p.current) * inverse(p.capacity)).max(axis=1)
    own_sens = (p.sens_demand * inv_sens[p.current]).sum(axis=1)
    movable = np.flatnonzero(p.movable)
    h = p.current[movable]
    chosen = movable[np.lexsort((-own_sens[movable], share[h], -excess[h]))][:_budget(p)]
    selected = chosen[np.lexsort((-_size(p)[chosen], -own_sens[chosen]))]
    # The task's summed normalized sensitivity per architecture: its "best server configuration" is the lowest.
    arch_inv = np.zeros((len(p.arch_names), len(p.sens_dims)))
    arch_inv[p.host_arch] = inv_sens

    def policy(state: PlacementState) -> Chooser:
        # Paragon's tolerated interference of a host: the least any of its tasks tolerates (1 with none).
        tolerance = np.ones((p.n_hosts, len(p.sens_dims)))
        placed = np.flatnonzero(state.assign >= 0)
        np.minimum.at(tolerance, state.assign[placed], 1.0 - p.sens_demand[placed] * inv_sens[state.assign[placed]])

        def choose(state: PlacementState, t: int, hosts: np.ndarray) -> int:
            task, host = _pressures(state, t, hosts)
            d1 = np.hstack([1.0 - host[:, :n_load], tolerance[hosts]]) - task
            d2 = (1.0 - task) - host
            alive = np.ones(len(hosts), dtype=bool)
            worst = np.minimum(d1, d2)
            for k in n_load + np.argsort(-p.sens_demand[t] * inv_sens[p.current[t]], kind="stable"):
                floor = min(0.0, float(worst[alive, k].max()))  # relax this SoI just enough to keep a candidate
                alive &= worst[:, k] >= floor - 1e-12
            if len(p.sens_dims):
                pref = (p.sens_demand[t] * arch_inv[p.host_arch[hosts]]).sum(axis=1)
                alive &= pref <= pref[alive].min() + 1e-12
            slack = np.abs(d1 + d2).sum(axis=1)
            slack[~alive] = np.inf
            h = int(hosts[np.argmin(slack)])
            tolerance[h] = np.minimum(tolerance[h], 1.0 - p.sens_demand[t] * inv_sens[h])
            return h

        return choose

    assign, stats = _repack(p, selected, policy)
    return _result(p, assign, "baseline-paragon", t0, stats)


def tarcil_sample_size(quality: float = TARCIL_QUALITY, miss: float = TARCIL_MISS, cap: int | None = TARCIL_MAX_SAMPLES) -> int:
    """Tarcil's sample size: the least R with ``quality^R ≤ miss``, i.e. ``R = ⌈ln miss / ln quality⌉`` (Eq. 6, F_A(x) = x^R).

    With R hosts sampled, the best one lies in the top ``1 − quality`` of hosts with
    probability at least ``1 − miss``. ``quality`` and ``miss`` are in (0, 1); R is at least 1 and at most ``cap``.
    """
    if not (0.0 < quality < 1.0 and 0.0 < miss < 1.0):
        raise ValueError(f"quality and miss must be in (0, 1), got {quality}, {miss}")
    r = max(1, math.ceil(math.log(miss) / math.log(quality) - 1e-12))
    return r if cap is None else min(r, cap)


def tarcil_encode(levels: np.ndarray) -> np.ndarray:
    """Tarcil's order-preserving encoding (Eq. 1), normalized to [0, 1] (Eq. 2): ``Σ_i v_i·100^(N−1−i) / (100^N − 1)``.

    ``levels`` (..., N): integer pressures 0-99, already in the order to encode (most
    critical SoI first); e.g. [84, 31] encodes to 8431, normalized 8431/9999.
    """
    levels = np.asarray(levels, dtype=float)
    return _concatenate(levels) / (100.0 ** levels.shape[-1] - 1.0)


def _concatenate(levels: np.ndarray) -> np.ndarray:
    """Eq. 1's concatenation of 0-99 levels as one number (an exact integer in float64 up to 7 SoIs)."""
    return (levels * 100.0 ** np.arange(levels.shape[-1] - 1, -1, -1)).sum(axis=-1)


def tarcil_quality(task_share: np.ndarray, host_share: np.ndarray) -> np.ndarray:
    """Tarcil's quality Q of hosts for a task (Eqs. 1-5), per row of the (..., N) share arrays (fractions of the host).

    ``task_share`` is the pressure the task causes per SoI, ``host_share`` the pressure
    already on the host. Both become levels 0-99, are ordered by the task's decreasing
    pressure, and are encoded: ``T_W = enc(task)`` (Eq. 2), ``U_H = 1 − enc(host)``
    (Eq. 4). ``Q = 1 − (U_H − T_W)`` if ``U_H ≥ T_W`` else ``T_W − U_H`` (Eq. 5): 1 is a
    host that tolerates exactly what the task causes; below ``T_W`` the host would
    degrade the task. As printed, Eq. 5 ranks a degrading host higher the larger its
    shortfall; any non-degrading host still outranks every degrading one (Q ≥ T_W ≥ Q').
    """
    task = np.rint(np.clip(np.asarray(task_share, dtype=float), 0.0, 1.0) * _LEVELS)
    host = np.rint(np.clip(np.asarray(host_share, dtype=float), 0.0, 1.0) * _LEVELS)
    order = np.argsort(-task, axis=-1, kind="stable")
    top = 100.0 ** task.shape[-1] - 1.0
    target = _concatenate(np.take_along_axis(task, order, axis=-1))
    free = top - _concatenate(np.take_along_axis(host, order, axis=-1))
    # Compared on the integer encodings, so that a host matching the task exactly is not lost to rounding.
    return np.where(free >= target, 1.0 - (free - target) / top, (target - free) / top)


def tarcil_sampling(problem: PlacementProblem, seed: int = 0, quality: float = TARCIL_QUALITY, miss: float = TARCIL_MISS,
                    max_samples: int = TARCIL_MAX_SAMPLES) -> SolveResult:
    """``baseline-tarcil``: sample R feasible hosts per task and keep the best by Tarcil's quality (module doc)."""
    t0 = time.perf_counter()
    p = problem
    rng = np.random.default_rng(seed)
    r = tarcil_sample_size(quality, miss, max_samples)
    movable = np.flatnonzero(p.movable)
    # Quality of each movable task on its current host, the host's pressure counted without the task's own.
    task_now, host_now = _pressures(PlacementState(p, p.current), movable, p.current[movable])
    selected = movable[np.argsort(tarcil_quality(task_now, host_now - task_now), kind="stable")][:_budget(p)]

    def choose(state: PlacementState, t: int, hosts: np.ndarray) -> int:
        sample = rng.choice(hosts, size=min(r, len(hosts)), replace=False)
        task, host = _pressures(state, t, sample)
        return int(sample[np.argmax(tarcil_quality(task, host))])

    assign, stats = _repack(p, selected, lambda _: choose)
    return _result(p, assign, "baseline-tarcil", t0, {**stats, "samples": r})


#: ``packer solve --solver`` names of the baselines and their functions ``(problem, seed) -> SolveResult``.
BASELINES: dict[str, Callable[[PlacementProblem, int], SolveResult]] = {
    "baseline-random": random_placement,
    "baseline-least-loaded": least_loaded,
    "baseline-ffd": first_fit_decreasing,
    "baseline-paragon": paragon_greedy,
    "baseline-tarcil": tarcil_sampling,
}


def run_baseline(problem: PlacementProblem, name: str, seed: int = 0) -> SolveResult:
    """Run the baseline called ``name`` (a key of :data:`BASELINES`) with ``seed``."""
    if name not in BASELINES:
        raise ValueError(f"unknown baseline '{name}'; known: {', '.join(BASELINES)}")
    return BASELINES[name](problem, seed)
