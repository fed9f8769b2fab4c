"""The scalable engine: construction by emptying hosts, then large-neighbourhood search.

Move-bounded repacking is mostly a choice of which hosts to empty: a host's cost
is saved only when every task leaves it (ARCHITECTURE.md, "What is known"). The
engine therefore works host by host:

1. **Emptying greedy.** Candidate hosts (occupied, no pinned task) are ranked by
   the objective they would save per move (``open_weight / tasks``). For each, its
   tasks are placed, largest first, by best fit into the residual capacity of hosts
   that stay open (eligible architecture, spread limits, never an initially
   overloaded host), preferring placements that add no sensitivity excess; when
   they do not fit, the engine tries a *swap*: moving them all to one cheaper empty
   host. A host is committed only if all of its tasks found a place, the move
   budget allows it and the objective improves; otherwise its tentative moves are
   undone. Emptying a host that received tasks earlier is allowed (its tasks then
   move again), so the greedy can repeat in passes until nothing improves.
   With a sensitivity weight, **relief** moves (single tasks off hosts over their
   sensitivity limit, :func:`_relieve_interference`) compete with emptying for the
   move budget: the engine tries several splits of the budget between the two
   (:data:`RELIEF_SHARES`, both orders) and keeps the plan with the best objective,
   so each weight buys its own mixture of cost and risk.
2. **Large-neighbourhood search** (when an exact sub-solver is available and time
   remains): a few dozen hosts around the current frontier (the cheapest-to-free
   hosts still open, and hosts with sensitivity excess) are re-solved with CP-SAT
   with everything else fixed; improvements are kept.

Full repack (``max_moves=None``) runs the same loop with an unlimited budget, after
ordering candidates by how expensive their capacity is, which consolidates load
onto the architectures with the best cost per capacity.

With a ``min_rp`` guard (``--min-rp``), a host receives a task only if every task
on it, the new one included, keeps its relative-performance floor
(:class:`packer.solvers.leximin.RPGuard`; tasks leaving a host only raise the others').
With a ``max_new_at_risk`` guard (``--max-new-at-risk``), tasks go first where they
add the fewest tasks at risk, and an emptied host, a swap or a relief move is kept
only if the count of tasks at risk stays within the guard.

Every intermediate placement is valid (checked incrementally, and the final one
with :func:`packer.model.metrics.violations`), the search is deterministic for a seed,
and it is anytime: at the time limit, or on Ctrl-C, it returns the best placement so far.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from packer.model.metrics import (TOLERANCE, evaluate, host_loads, initially_overloaded, normalized_sensitivity, over_sensitivity_limit,
                            risk_limit, violations)
from packer.model.problem import PlacementProblem
from packer.solvers.result import SolveResult

log = logging.getLogger(__name__)


@dataclass
class Progress:
    """What the engine reports while it runs (objective units; ``bound`` may be None)."""

    phase: str
    objective: float
    bound: float | None
    moves: int
    hosts: int
    elapsed_s: float


class _State:
    """A valid placement with incrementally maintained loads, counts and spread tallies."""

    def __init__(self, problem: PlacementProblem, assign: np.ndarray):
        p = self.p = problem
        self.assign = assign.astype(np.int64).copy()
        placed = np.flatnonzero(self.assign >= 0)  # -1: not placed yet (during construction)
        self.loads = np.zeros((p.n_hosts, len(p.dims)))
        np.add.at(self.loads, self.assign[placed], p.demand[placed])
        self.sens = np.zeros((p.n_hosts, len(p.sens_dims)))
        np.add.at(self.sens, self.assign[placed], p.sens_demand[placed])
        self.count = np.bincount(self.assign[placed], minlength=p.n_hosts)
        self.moves = int((self.assign[placed] != p.current[placed]).sum())
        self.receiver = ~initially_overloaded(p)
        self.cap = p.capacity + TOLERANCE
        with np.errstate(divide="ignore"):
            self.inv_cap = np.where(p.capacity > 0, 1.0 / np.maximum(p.capacity, 1e-12), 0.0)
            self.inv_sens_cap = np.where(p.sens_capacity > 0, 1.0 / np.maximum(p.sens_capacity, 1e-12), 0.0)
        self.tasks_on: list[set[int]] = [set() for _ in range(p.n_hosts)]
        for t in placed:
            self.tasks_on[self.assign[t]].add(int(t))
        self.job_host: dict[tuple[int, int], int] = {}
        self.job_domain: dict[tuple[int, int], int] = {}
        if p.spread_host is not None or p.spread_domain is not None:
            for t in placed:
                self._tally(int(t), int(self.assign[t]), +1)
        # (job, host) / (job, domain) pairs that gained a task: only these are held to the spread limit.
        self.gained_host: set[tuple[int, int]] = set()
        self.gained_domain: set[tuple[int, int]] = set()
        self.rp_guard = None
        if p.weights.min_rp is not None:  # the --min-rp guard: receivers must keep every task's RP floor
            from packer.model.metrics import rp_floors
            from packer.solvers.leximin import RPGuard

            self.rp_guard = RPGuard(self, rp_floors(p))
        # The --max-new-at-risk guard: tasks at risk (on hosts over their sensitivity limit), kept up to date by move().
        self.risk_limit = risk_limit(p) if len(p.sens_dims) else None
        self.at_risk = int(self.host_risk(np.arange(p.n_hosts)).sum()) if self.risk_limit is not None else 0

    def _tally(self, t: int, h: int, sign: int) -> None:
        j = int(self.p.job[t])
        if self.p.spread_host is not None:
            self.job_host[(j, h)] = self.job_host.get((j, h), 0) + sign
        d = int(self.p.domain[h])
        if self.p.spread_domain is not None and d >= 0:
            self.job_domain[(j, d)] = self.job_domain.get((j, d), 0) + sign

    def move(self, t: int, to: int) -> None:
        """Put task ``t`` on host ``to`` (from its host, or from nowhere if it is not placed yet)."""
        p, frm = self.p, int(self.assign[t])
        if frm == to:
            return
        spread = p.spread_host is not None or p.spread_domain is not None
        guarded = self.risk_limit is not None
        if guarded:
            rows = np.array([frm, to] if frm >= 0 else [to])
            self.at_risk -= int(self.host_risk(rows).sum())
        if frm >= 0:
            self.loads[frm] -= p.demand[t]
            self.count[frm] -= 1
            self.tasks_on[frm].discard(t)
            if len(p.sens_dims):
                self.sens[frm] -= p.sens_demand[t]
            if spread:
                self._tally(t, frm, -1)
        self.loads[to] += p.demand[t]
        if len(p.sens_dims):
            self.sens[to] += p.sens_demand[t]
        self.count[to] += 1
        self.tasks_on[to].add(t)
        if spread:
            self._tally(t, to, +1)
            if to != p.current[t]:
                self.gained_host.add((int(p.job[t]), to))
                if p.domain[to] >= 0:
                    self.gained_domain.add((int(p.job[t]), int(p.domain[to])))
        self.moves += int(to != p.current[t]) - int(frm >= 0 and frm != p.current[t])
        self.assign[t] = to
        if self.rp_guard is not None:
            self.rp_guard.refresh((frm, to))
        if guarded:
            self.at_risk += int(self.host_risk(rows).sum())

    def host_risk(self, rows: np.ndarray) -> np.ndarray:
        """Tasks at risk on each of ``rows`` (its task count if it is over its sensitivity limit, else 0)."""
        over = over_sensitivity_limit(normalized_sensitivity(self.sens[rows], self.p.sens_capacity[rows]))
        return np.where(over, self.count[rows], 0)

    def within_risk(self) -> bool:
        """Whether the placement keeps the --max-new-at-risk guard (always, without one)."""
        return self.risk_limit is None or self.at_risk <= self.risk_limit

    def excess(self, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Summed sensitivity excess over 1 of the given hosts (Eq. 4 per host)."""
        if not len(self.p.sens_dims):
            return np.zeros(self.p.n_hosts)[rows]
        return np.clip(self.sens[rows] * self.inv_sens_cap[rows] - 1.0, 0.0, None).sum(axis=-1)

    def best_host(self, t: int, allowed: np.ndarray) -> tuple[int, float]:
        """Best-fit host for task ``t`` among ``allowed`` (bool mask) and the sensitivity penalty it adds; (-1, inf) if none."""
        p = self.p
        mask = allowed & self.receiver & p.eligible[t][p.host_arch]
        if self.assign[t] >= 0:
            mask[self.assign[t]] = False
        idx = np.flatnonzero(mask)
        if len(idx) == 0:
            return -1, np.inf
        after = self.loads[idx] + p.demand[t]
        fits = (after <= self.cap[idx]).all(axis=1)
        idx, after = idx[fits], after[fits]
        if len(idx) and (p.spread_host is not None or p.spread_domain is not None):
            ok = np.array([self.spread_ok(t, int(h)) for h in idx], dtype=bool)
            idx, after = idx[ok], after[ok]
        if len(idx) and self.rp_guard is not None:
            ok = self.rp_guard.admits(t, idx)
            idx, after = idx[ok], after[ok]
        if len(idx) == 0:
            return -1, np.inf
        penalty = np.zeros(len(idx))
        if len(p.sens_dims) and p.weights.sensitivity > 0 and p.sens_demand[t].any():
            before = self.excess(idx)
            new = np.clip((self.sens[idx] + p.sens_demand[t]) * self.inv_sens_cap[idx] - 1.0, 0.0, None).sum(axis=1)
            penalty = p.weights.sensitivity * (new - before)
        # Best fit: the host left with the least normalized slack, after penalties; under the
        # --max-new-at-risk guard, first the hosts where the task adds the fewest tasks at risk.
        slack = ((self.cap[idx] - after) * self.inv_cap[idx]).sum(axis=1)
        new_risk = np.zeros(len(idx))
        if self.risk_limit is not None:
            over = over_sensitivity_limit(normalized_sensitivity(self.sens[idx] + p.sens_demand[t], p.sens_capacity[idx]))
            new_risk = np.where(over, self.count[idx] + 1, 0) - self.host_risk(idx)
        k = int(np.lexsort((slack, np.round(penalty, 12), new_risk))[0])
        return int(idx[k]), float(penalty[k])

    def spread_ok(self, t: int, h: int) -> bool:
        p, j = self.p, int(self.p.job[t])
        if p.spread_host is not None and self.job_host.get((j, h), 0) + 1 > p.spread_host:
            return False
        d = int(p.domain[h])
        if p.spread_domain is not None and d >= 0 and self.job_domain.get((j, d), 0) + 1 > p.spread_domain:
            return False
        return True


@dataclass
class EngineConfig:
    """Knobs of the engine. ``lns_hosts``: hosts per neighbourhood; ``lns_time``: seconds per sub-solve."""

    time_limit: float = 60.0
    seed: int = 0
    passes: int = 3
    lns_hosts: int = 24
    lns_time: float = 2.0
    lns: bool = True
    progress: Callable[[Progress], None] | None = None
    bound: float | None = None
    #: Stop searching once the primary cost (TCO or hosts) reaches this proven bound.
    primary_target: float | None = None


def _move_counting_excess(state: _State, t: int, to: int) -> float:
    """Move task ``t`` to ``to``; return the change in summed sensitivity excess (only its two hosts change)."""
    if not len(state.p.sens_dims):
        state.move(t, to)
        return 0.0
    rows = np.array([state.assign[t], to])
    before = float(state.excess(rows).sum())
    state.move(t, to)
    return float(state.excess(rows).sum()) - before


def _try_empty(state: _State, h: int, budget: float, open_mask: np.ndarray, swap_targets: np.ndarray) -> float:
    """Try to move every task off host ``h``; commit and return the objective gain, or undo and return 0."""
    p = state.p
    tasks = sorted(state.tasks_on[h], key=lambda t: -float((p.demand[t] * state.inv_cap[h]).sum()))
    # Each task whose original host this is becomes a move; a task moved here earlier stays
    # moved (or returns home, saving one): counting only the former never exceeds the budget.
    extra_moves = sum(1 for t in tasks if p.current[t] == h)
    if state.moves + extra_moves > budget:
        return 0.0
    allowed = open_mask.copy()
    allowed[h] = False
    moved: list[int] = []
    excess = 0.0
    for t in tasks:
        to = state.best_host(t, allowed)[0]
        if to < 0:
            break
        moved.append(t)
        excess += _move_counting_excess(state, t, to)
    else:
        gain = float(p.open_weight[h]) - p.weights.sensitivity * excess - p.weights.moves * extra_moves
        if gain > 1e-9 and state.within_risk():
            open_mask[h] = False
            return gain
    for t in reversed(moved):
        state.move(t, h)
    return _try_swap(state, h, budget, open_mask, swap_targets, tasks, extra_moves)


def _try_swap(state: _State, h: int, budget: float, open_mask: np.ndarray, swap_targets: np.ndarray, tasks: list[int], extra_moves: int) -> float:
    """Move all of ``h``'s tasks onto one cheaper empty host, if that saves."""
    p = state.p
    if state.moves + extra_moves > budget or not len(swap_targets):
        return 0.0
    need = p.demand[tasks].sum(axis=0)
    cheaper = swap_targets[(p.open_weight[swap_targets] < p.open_weight[h] - 1e-9) & (state.count[swap_targets] == 0)]
    if not len(cheaper):
        return 0.0
    fits = (need <= state.cap[cheaper]).all(axis=1) & p.eligible[np.ix_(tasks, p.host_arch[cheaper])].all(axis=0)
    cheaper = cheaper[fits]
    if not len(cheaper):
        return 0.0
    g = int(cheaper[np.argmin(p.open_weight[cheaper])])
    if state.rp_guard is not None and not state.rp_guard.admits_all(tasks, g):
        return 0.0
    excess = 0.0
    for k, t in enumerate(tasks):
        if not state.spread_ok(t, g):  # checked move by move: earlier tasks of the job count
            for u in tasks[:k]:
                state.move(u, h)
            return 0.0
        excess += _move_counting_excess(state, t, g)
    gain = float(p.open_weight[h] - p.open_weight[g]) - p.weights.sensitivity * excess - p.weights.moves * extra_moves
    if gain > 1e-9 and state.within_risk():
        open_mask[h] = False
        open_mask[g] = True
        return gain
    for t in tasks:
        state.move(t, h)
    return 0.0


def _candidate_order(state: _State, rng: np.random.Generator, full_repack: bool) -> np.ndarray:
    p = state.p
    pinned = np.bincount(p.current[~p.movable], minlength=p.n_hosts) > 0
    cand = np.flatnonzero((state.count > 0) & ~pinned)
    if full_repack:
        # Least-used, most expensive capacity first: those are the hosts a cheaper packing closes.
        use = (state.loads[cand][:, list(p.frag_dims)] * state.inv_cap[cand][:, list(p.frag_dims)]).max(axis=1)
        key = use - 1e-3 * p.open_weight[cand]
    else:
        key = -p.open_weight[cand] / np.maximum(state.count[cand], 1)
    tie = rng.random(len(cand))
    return cand[np.lexsort((tie, key))]


def construct_repack(problem: PlacementProblem, hosts_per_arch: np.ndarray, task_arch: np.ndarray | None = None,
                     keep_in_place: bool = True) -> np.ndarray | None:
    """A full-repack placement that follows a cost bound's LP solution (LP rounding).

    ``hosts_per_arch`` (A,) is how many hosts of each architecture to open first and
    ``task_arch`` (T,) the architecture each task's LP solution mostly uses (both from
    :func:`packer.solvers.bounds.repack_cost_bound`). Within an architecture the most loaded
    current hosts are opened, and a task already on an open host of its preferred
    architecture stays there, so the plan moves as few tasks as the mix allows. The
    other tasks go, largest first (by their largest share of a host), by best fit
    into open hosts of their preferred architecture, then of any; when none fits, a
    closed host of the preferred architecture is opened, else the closed host with
    the lowest objective weight per capacity. ``keep_in_place=False`` re-places every
    movable task (better packing, more moves). Returns ``None`` if some task fits nowhere.
    """
    p = problem
    load = host_loads(p, p.current)
    use = (load[:, list(p.frag_dims)] / np.maximum(p.capacity[:, list(p.frag_dims)], 1e-12)).sum(axis=1)
    open_mask = np.zeros(p.n_hosts, dtype=bool)
    open_mask[p.current[~p.movable]] = True
    for a, n in enumerate(np.ceil(np.asarray(hosts_per_arch) - 1e-6).astype(int)):
        hosts = np.flatnonzero((p.host_arch == a) & ~open_mask)
        need = n - int(open_mask[p.host_arch == a].sum())
        if need > 0:
            open_mask[hosts[np.argsort(-use[hosts], kind="stable")[:need]]] = True
    preferred = np.full(p.n_tasks, -1) if task_arch is None else np.asarray(task_arch)
    keep = open_mask[p.current] & ((preferred < 0) | (preferred == p.host_arch[p.current]) | ~p.movable)
    if not keep_in_place:  # pure best fit decreasing: tasks left in place can spoil the packing order
        keep &= ~p.movable
    state = _State(p, np.where(keep, p.current, -1))
    overfull = (state.loads > state.cap).any(axis=1)
    if overfull.any():  # keeping every task of an open host may not fit under new limits; re-place those
        for h in np.flatnonzero(overfull):
            for t in list(state.tasks_on[h]):
                if p.movable[t]:
                    state.assign[t] = -1
        state = _State(p, state.assign)
    todo = np.flatnonzero(state.assign < 0)
    size = (p.demand[todo] / np.maximum(p.capacity.max(axis=0), 1e-12)).max(axis=1)
    per_capacity = p.open_weight / np.maximum((p.capacity[:, list(p.frag_dims)] / p.frag_scale).sum(axis=1), 1e-12)
    for t in todo[np.argsort(-size, kind="stable")]:
        own = p.host_arch == preferred[t]
        to = state.best_host(int(t), open_mask & own)[0] if preferred[t] >= 0 else -1
        if to < 0:
            closed = ~open_mask & state.receiver & p.eligible[t][p.host_arch] & (p.demand[t] <= state.cap).all(axis=1)
            if preferred[t] >= 0 and (closed & own).any():
                candidates = np.flatnonzero(closed & own)
                to = int(candidates[np.argmin(per_capacity[candidates])])
                open_mask[to] = True
        if to < 0:
            to = state.best_host(int(t), open_mask)[0]
        if to < 0:
            if not closed.any():
                return None
            candidates = np.flatnonzero(closed)
            to = int(candidates[np.argmin(per_capacity[candidates])])
            open_mask[to] = True
        state.move(int(t), to)
    return state.assign


def _empty_hosts(state: _State, budget: float, full: bool, config: EngineConfig, rng: np.random.Generator, deadline: float, report) -> bool:
    """Emptying passes until no pass improves; returns True if the deadline cut them short."""
    open_mask = state.count > 0
    swap_targets = np.flatnonzero(state.receiver & (state.count == 0))
    for sweep in range(config.passes):
        gained = 0.0
        for k, h in enumerate(_candidate_order(state, rng, full)):
            if state.count[h] == 0:
                continue
            if state.moves >= budget:
                break
            gained += _try_empty(state, int(h), budget, open_mask, swap_targets)
            if k % 256 == 0:
                if time.perf_counter() > deadline:
                    return True
                report(f"empty hosts, pass {sweep + 1}")
        log.info("pass %d: objective gain %.4f, moves %d", sweep + 1, gained, state.moves)
        if gained <= 1e-9:
            break
    return False


#: Relief candidates in a row that may fail before a relief pass stops (see :func:`_relieve_interference`).
RELIEF_PATIENCE = 500


def _relieve_interference(state: _State, budget: float, config: EngineConfig, deadline: float, report) -> bool:
    """Single-task moves off hosts over their sensitivity limit, while each lowers the objective.

    Emptying hosts piles their tasks onto others; with a sensitivity weight that
    makes Eq. 4's interference worth more than the cost a host saves, the budget is
    better spent moving the tasks that relieve the most excess to the open host where
    they add the least, or to an empty host when the relief pays for opening it.
    Tasks are tried in order of the excess their departure removes; a move is kept
    when its gain (cost of hosts closed minus opened, weighted excess removed, moves)
    is positive. Returns True if the deadline cut it short.
    """
    p = state.p
    w = p.weights.sensitivity
    for sweep in range(config.passes):
        gained, misses = 0.0, 0
        norm = state.sens * state.inv_sens_cap
        own = p.sens_demand * state.inv_sens_cap[state.assign]
        here = norm[state.assign]
        relief = (np.clip(here - 1.0, 0.0, None) - np.clip(here - own - 1.0, 0.0, None)).sum(axis=1)
        order = np.flatnonzero((relief > 1e-12) & p.movable & ((state.assign != p.current) | (state.moves < budget)))
        order = order[np.argsort(-relief[order], kind="stable")]
        for k, t in enumerate(order.tolist()):
            if misses >= RELIEF_PATIENCE:
                break  # candidates come in decreasing relief: after this many misses in a row the rest rarely pay
            if k % 64 == 0:
                if time.perf_counter() > deadline:
                    return True
                report(f"relieve interference, pass {sweep + 1}")
            h = int(state.assign[t])
            if h == p.current[t] and state.moves >= budget:
                continue  # leaving home costs a move the budget no longer has
            if state.excess(np.array([h]))[0] <= 1e-12:
                continue  # earlier moves already relieved this host
            best_gain, best_to = 1e-9, -1
            for allowed in (state.count > 0, state.count == 0):
                to = state.best_host(t, allowed)[0]
                extra = int(to != p.current[t]) - int(h != p.current[t])
                if to < 0 or state.moves + extra > budget:
                    continue
                opens, closes = state.count[to] == 0, state.count[h] == 1
                excess = _move_counting_excess(state, t, to)
                gain = (float(p.open_weight[h]) * closes - float(p.open_weight[to]) * opens
                        - w * excess - p.weights.moves * extra)
                within = state.within_risk()
                state.move(t, h)
                if gain > best_gain and within:
                    best_gain, best_to = gain, to
            if best_to >= 0:
                state.move(t, best_to)
                gained += best_gain
                misses = 0
            else:
                misses += 1
        log.info("relief pass %d: objective gain %.4f, moves %d", sweep + 1, gained, state.moves)
        if gained <= 1e-9:
            break
    return False


#: Shares of a move budget the engine tries spending on interference relief, the rest on emptying hosts
#: (:func:`_mix_relief_and_emptying`). 0 is "all emptying", 1 "all relief".
RELIEF_SHARES = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)


def _mix_relief_and_emptying(problem: PlacementProblem, start: np.ndarray, budget: float, config: EngineConfig,
                             deadline: float, report, keep: Callable[[_State], None]) -> bool:
    """The best plan over ways of splitting a move budget between relief moves and emptying hosts.

    Relief buys Eq. 4's interference down at the sensitivity weight, emptying buys
    cost; which is worth more per move depends on the weight and on the move. For
    each share of :data:`RELIEF_SHARES` the engine spends that share on relief then
    the rest on emptying (then any moves left on relief), and for shares strictly
    between 0 and 1 also the other order; it keeps the plan with the lowest
    objective, so the weight ladder of a sweep yields a curve of mixtures rather
    than two extremes. Every run starts from ``start`` with the same seed. Each new
    best state is handed to ``keep`` as soon as its run ends (so Ctrl-C keeps it);
    returns whether the deadline cut the runs short.
    """
    runs: list[tuple[str, float]] = [("relief first", share) for share in RELIEF_SHARES if share > 0]
    runs += [("emptying first", 1.0 - share) for share in RELIEF_SHARES if share < 1]
    best_objective = np.inf
    for order, share in runs:
        state = _State(problem, start)
        rng = np.random.default_rng(config.seed)
        progress = lambda phase, s=state: report(f"{phase} ({order}, {share:.0%} of the budget)", s)  # noqa: E731
        if order == "relief first":
            steps = ((_relieve_interference, share * budget), (_empty_hosts, budget), (_relieve_interference, budget))
        else:
            steps = ((_empty_hosts, share * budget), (_relieve_interference, budget))
        timed_out = False
        for step, limit in steps:
            limit = np.floor(limit + 1e-9)
            timed_out = (step(state, limit, config, deadline, progress) if step is _relieve_interference
                         else step(state, limit, False, config, rng, deadline, progress))
            if timed_out:
                break
        objective = evaluate(problem, state.assign).objective
        log.info("%s, %.0f%% of the budget: objective %.4f, %d moves", order, 100 * share, objective, state.moves)
        if objective < best_objective - 1e-9:
            best_objective = objective
            keep(state)
        if timed_out:
            return True
    return False


def solve_engine(
    problem: PlacementProblem,
    config: EngineConfig = EngineConfig(),
    start: np.ndarray | None = None,
    hosts_per_arch: np.ndarray | None = None,
    task_arch: np.ndarray | None = None,
) -> SolveResult:
    """Run the scalable engine from ``start`` (default: the current placement).

    In full repack (``problem.max_moves is None``), ``hosts_per_arch`` (e.g. from
    :func:`packer.solvers.bounds.repack_cost_bound`) adds a second start built by
    :func:`construct_repack`; the better of the two after the emptying passes is
    refined by large-neighbourhood search.
    """
    t0 = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    budget = np.inf if problem.max_moves is None else problem.max_moves
    full = problem.max_moves is None
    deadline = t0 + config.time_limit
    interrupted = timed_out = False
    first = problem.current if start is None else start
    state = _State(problem, first)

    def report(phase: str, current: _State | None = None) -> None:
        if config.progress is not None:
            ev = evaluate(problem, (current or state).assign)
            config.progress(Progress(phase, ev.objective, config.bound, ev.moves, ev.hosts, time.perf_counter() - t0))

    def keep(best: _State) -> None:
        nonlocal state
        state = best

    try:
        if problem.sens_dims and problem.weights.sensitivity > 0 and not full:
            timed_out = _mix_relief_and_emptying(problem, first, budget, config, deadline, report, keep)
        else:
            timed_out = _empty_hosts(state, budget, full, config, rng, deadline, report)
            if problem.sens_dims and problem.weights.sensitivity > 0 and not timed_out:
                timed_out = _relieve_interference(state, budget, config, deadline, report)
        # With a budget that covers every movable task, a full repack's construction is allowed too.
        # A construction ignores the --max-new-at-risk guard, so with one the search starts from the current placement only.
        unbound = (full or budget >= int(problem.movable.sum())) and state.risk_limit is None
        if unbound and hosts_per_arch is not None and not timed_out:
            for keep in (True, False):
                built = construct_repack(problem, hosts_per_arch, task_arch, keep_in_place=keep)
                if built is None or timed_out:
                    continue
                best_state = state
                state = _State(problem, built)  # so progress reports follow the construction
                timed_out = _empty_hosts(state, budget, full, config, rng, deadline, report)
                if evaluate(problem, state.assign).objective >= evaluate(problem, best_state.assign).objective:
                    state = best_state
        report("construction done")
        reached = config.primary_target is not None and problem.primary_cost[np.unique(state.assign)].sum() <= config.primary_target + 1e-9
        if config.lns and not timed_out and not reached and time.perf_counter() < deadline:
            state, _ = _lns(state, config, rng, deadline, budget, report)
    except KeyboardInterrupt:
        interrupted = True
    assign = state.assign
    problems = violations(problem, assign)
    if problems:  # never hand out an invalid plan: fall back to the current placement
        log.error("engine produced an invalid placement (%s); returning the current placement", "; ".join(problems))
        assign = problem.current.copy()
    ev = evaluate(problem, assign)
    return SolveResult(
        assign=assign,
        status="feasible",
        objective=ev.objective,
        bound=-np.inf,
        solver="engine",
        wall_s=time.perf_counter() - t0,
        infeasible_tasks=[],
        stats={"interrupted": interrupted, "timed_out": timed_out, "moves": ev.moves, "invalid_fallback": bool(problems)},
    )


def _lns(state: _State, config: EngineConfig, rng: np.random.Generator, deadline: float, budget: float, report) -> tuple[_State, float]:
    """Large-neighbourhood search with the exact CP-SAT sub-solver around the current frontier."""
    try:
        from packer.solvers.cpsat import solve_subproblem
    except ImportError:  # the exact models are optional for the engine
        return state, evaluate(state.p, state.assign).objective
    p = state.p
    best = evaluate(p, state.assign).objective
    stale = 0
    # CP-SAT does not model the --max-new-at-risk count: sub-solve without it, keep only results that respect it.
    sub_p = p.with_(weights=replace(p.weights, max_new_at_risk=None)) if p.weights.max_new_at_risk is not None else p
    # Empty hosts with the cheapest capacity join every neighbourhood, so the search can move
    # load onto better architectures, not only among hosts already open.
    per_capacity = p.open_weight / np.maximum((p.capacity[:, list(p.frag_dims)] / p.frag_scale).sum(axis=1), 1e-12)
    n_empty = max(2, config.lns_hosts // 4)
    # A small instance is one neighbourhood: re-solve all of it with the remaining time.
    whole = p.n_hosts <= 2 * config.lns_hosts and int(p.movable.sum()) <= 400
    while time.perf_counter() + config.lns_time < deadline and stale < 30:
        open_hosts = np.flatnonzero(state.count > 0)
        if whole:
            tasks, hosts = np.flatnonzero(p.movable), np.arange(p.n_hosts)
            result = solve_subproblem(sub_p, state.assign, tasks, hosts, time_limit=max(config.lns_time, deadline - time.perf_counter() - 0.1),
                                      seed=int(rng.integers(1 << 30)))
            if result.objective < best - 1e-9 and not violations(p, result.assign):
                for t in np.flatnonzero(result.assign != state.assign):
                    state.move(int(t), int(result.assign[t]))
                best = result.objective
                report("neighbourhood search")
            break
        if len(open_hosts) < 2:
            break
        # Seed hosts: cheap-to-free open hosts (few tasks, high cost) and hosts with sensitivity excess.
        weight = p.open_weight[open_hosts] / np.maximum(state.count[open_hosts], 1)
        weight = weight + 10.0 * state.excess(open_hosts)
        prob = weight / weight.sum()
        n_seed = min(len(open_hosts), max(2, config.lns_hosts // 3))
        seeds = rng.choice(open_hosts, size=n_seed, replace=False, p=prob)
        # Receivers: hosts with the most slack that the seeds' tasks could use.
        slack = ((state.cap[open_hosts] - state.loads[open_hosts]) * state.inv_cap[open_hosts]).sum(axis=1)
        room = open_hosts[np.argsort(-slack)][: config.lns_hosts]
        empty = np.flatnonzero((state.count == 0) & state.receiver)
        cheap = empty[np.argsort(per_capacity[empty], kind="stable")][:n_empty]
        hosts = np.unique(np.concatenate([seeds, room, cheap]))
        tasks = np.flatnonzero(np.isin(state.assign, hosts) & p.movable)
        if len(tasks) == 0 or len(tasks) > 400:
            stale += 1
            continue
        result = solve_subproblem(sub_p, state.assign, tasks, hosts, time_limit=config.lns_time, seed=int(rng.integers(1 << 30)))
        if result.objective < best - 1e-9 and not violations(p, result.assign):
            changed = np.flatnonzero(result.assign != state.assign)
            for t in changed:
                state.move(int(t), int(result.assign[t]))
            best = result.objective
            stale = 0
            report("neighbourhood search")
            if config.primary_target is not None and p.primary_cost[np.unique(state.assign)].sum() <= config.primary_target + 1e-9:
                break
        else:
            stale += 1
    return state, best
