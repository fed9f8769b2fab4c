"""The scalable engine: construction by emptying hosts, then large-neighbourhood search.

Move-bounded repacking is mostly a choice of which hosts to empty: a host's cost
is saved only when every task leaves it (ARCHITECTURE.md, "What is known"). The
engine therefore works host by host, on one :class:`~packer.model.state.PlacementState`:

1. **Emptying greedy.** Candidate hosts (occupied, no pinned task) are tried one
   by one: a host's tasks are placed, largest first, on the best host that stays
   open (:func:`best_host`); when they do not all fit, the engine tries a *swap*:
   moving them all to one cheaper empty host. A host is committed only if all of its
   tasks found a place, the move budget allows it, the objective improves and every
   rule still holds; otherwise its tentative moves are undone. While the move budget
   binds, the host committed next is the one whose emptying saves the most per move
   on the placement as it is (:func:`_empty_best_first`), and a task that fits on no
   open host goes where moving one other task aside makes room for it, the move aside
   counted in the host's rate (:func:`_place_by_eviction`); otherwise hosts are tried
   in rank order (open cost per task, or in a full repack the least-used, most
   expensive capacity first). Emptying a host that received tasks earlier is allowed
   (its tasks then move again), so the greedy can repeat in passes until nothing
   improves.
   With an interference goal (a positive sensitivity weight), **relief** moves
   (single tasks off hosts over their sensitivity limit, :func:`_relieve_interference`)
   compete with emptying for the move budget: the engine tries several splits of the
   budget between the two (:data:`RELIEF_SHARES`, both orders) and keeps the plan with
   the best objective, so each weight buys its own mixture of cost and risk. Exchanges
   of two tasks between hosts (:mod:`packer.solvers.exchange`) then lower the excess no
   single move can, with the moves that plan left.
2. **Large-neighbourhood search** (when time remains): a few dozen hosts around the
   current frontier (the cheapest-to-free hosts still open, and hosts with
   sensitivity excess) are re-solved with CP-SAT with everything else fixed;
   improvements are kept. In a full repack on a wall clock, every other neighbourhood (the first
   among them) is the hosts of two or more architectures, drawn at random, with the most
   room stranded in each dimension in turn (:func:`stranded_room_hosts`); a stranded-room neighbourhood
   that gains is followed by another.
   After :data:`GROW_AFTER` neighbourhoods in a row without a gain, neighbourhoods
   grow: twice the hosts and twice the seconds, up to :data:`NEIGHBOURHOOD_TASKS`
   movable tasks, and up to the whole instance. Where one neighbourhood holds the whole
   instance (:func:`covers_whole_instance`), the constructions stop in time to leave
   CP-SAT ``lns_time`` for it, half of which (up to 1 s) goes first to local branching
   (plans a few task changes from the best so far). The search runs to its time limit;
   it ends before it only with a proof (the primary cost at its lower bound without an
   interference goal, or CP-SAT's proof that its plan of the whole instance is optimal)
   or when no neighbourhood within the task cap holds a task that may move
   (``stats["search_ended"]``, the status line).

Full repack (``max_moves=None``) runs the same loop with an unlimited budget, after
ordering candidates by how expensive their capacity is, which consolidates load
onto the architectures with the best cost per capacity, and also starts from a
construction that follows the cost bound's LP solution (:func:`construct_repack`),
under an interference goal one that follows the solution of the MILP that also counts
the interference term, taking the hosts it opens as paid for, and today's placement
improved first as under the default move budget (:data:`BUDGETED_START_MOVES`), then
without a cap: the path of the move-bounded plan a full repack should not end above. A
move budget that covers a large share of the movable tasks (:func:`wide_budget`) starts
from a full repack's constructions and packing too, trimmed to the budget
(:func:`~packer.solvers.trim.trim_to_budget`): from today's placement, where slack is
scarce, no host empties without room made first.

Rules and goals are the problem's plugins (:mod:`packer.rules`). A task moves only
to hosts every rule admits (:meth:`~packer.model.state.PlacementState.feasible`:
capacity, eligibility, pins, spread, relative-performance floors, anti-affinity,
...); among them the rules' preferences come first (the tasks-at-risk guard: the
fewest new tasks at risk), then the change of the objective. Every batch (an emptied
host, a swap, a relief move) is scored by the change of the objective, the sum of
its moves' :meth:`~packer.model.state.PlacementState.objective_delta`, and kept only
if the rules that judge the whole placement still hold
(:meth:`~packer.model.state.PlacementState.holds`: the move budget, the tasks-at-risk
count). The neighbourhood search leaves out of its exact model the rules the exact
strategy does not honour and keeps only results that break no rule.

Every intermediate placement is valid (checked incrementally, and the final one
with :func:`packer.model.metrics.violations`), the search is deterministic for a seed on a clock that counts work
(``EngineConfig.deterministic``; on a wall clock, load changes how far it gets),
and it is anytime: at the time limit, or on Ctrl-C, it returns the best placement so far.
"""
from __future__ import annotations

import dataclasses
import heapq
import logging
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import numpy as np

from packer import interrupt
from packer.model.build import RuleOptions
from packer.model.metrics import evaluate, host_loads, leftover_score, violations
from packer.model.problem import PlacementProblem
from packer.model.state import PlacementState
from packer.rules.budget import MoveBudget
from packer.rules.interference import Interference
from packer.solvers.bounds import ArchMix
from packer.solvers.clock import SearchClock
from packer.solvers.cpsat import solve_subproblem
from packer.solvers.dominance import dominance, dominated_open_hosts, move_off_dominated_hosts
from packer.solvers.exchange import relieve_by_exchange
from packer.solvers.ffd import capacity_price, largest_first, relative_demand
from packer.solvers.result import SolveResult
from packer.solvers.trim import trim_to_budget

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


def best_host(state: PlacementState, t: int, allowed: np.ndarray, prepaid: np.ndarray | None = None) -> tuple[int, float]:
    """The host among ``allowed`` (bool (H,)) task ``t`` should move to, and the objective change of that move; (-1, inf) if none.

    ``prepaid`` (bool (H,)): hosts already paid for, whose open cost an empty one is not charged in the ranking (nor in
    the change returned).

    Only hosts every rule admits, never the task's own. Ranked by the rules'
    preference (lower first), then by the objective change without the tie-break
    goals (rounded so that float noise does not decide), then best fit
    (:func:`~packer.model.metrics.leftover_score`), then the tie-break goals (fewer moves).
    """
    p = state.p
    hosts = np.flatnonzero(allowed)
    hosts = state.feasible(t, hosts[hosts != state.assign[t]])
    if len(hosts) == 0:
        return -1, np.inf
    delta = state.objective_delta(t, hosts)
    if prepaid is not None:
        delta = delta - np.where(prepaid[hosts] & (state.count[hosts] == 0), state.open_cost[hosts], 0.0)
    tie = state.tie_break_delta(t, hosts)
    # take() gathers rows about twice as fast as fancy indexing; this runs once per task placed, over thousands of hosts.
    room = (state.cap.take(hosts, axis=0) - state.loads.take(hosts, axis=0) - p.demand[t]) * state.inv_cap.take(hosts, axis=0)
    slack = leftover_score(room)
    preference = state.preference(t, hosts)
    keys = (tie, slack, np.round(delta - tie, 12)) + (() if preference is None else (preference,))
    k = _lexicographic_argmin(keys)
    return int(hosts[k]), float(delta[k])


def _lexicographic_argmin(keys: Sequence[np.ndarray]) -> int:
    """``np.lexsort(keys)[0]`` (the last key first; ties to the lowest index) by narrowing on each key's minimum: linear
    where a sort is not, and this runs once per task placed, over thousands of hosts (a construction at 37,000 tasks
    spent half its time sorting)."""
    if any(np.isnan(key).any() for key in keys):  # a sort puts NaN last; a minimum would not
        return int(np.lexsort(keys)[0])
    index = np.arange(len(keys[0]))
    for key in reversed(keys):
        values = key[index]
        index = index[values == values.min()]
        if len(index) == 1:
            break
    return int(index[0])


@dataclass
class EngineConfig:
    """Knobs of the engine. ``lns_hosts``: hosts per neighbourhood; ``lns_time``: seconds per sub-solve (both double
    each time neighbourhoods grow, :data:`GROW_AFTER`)."""

    time_limit: float = 60.0
    #: Count ``time_limit`` as work, not wall clock (:mod:`packer.solvers.clock`): the same seed gives the same plan under any load.
    deterministic: bool = False
    seed: int = 0
    passes: int = 3
    lns_hosts: int = 24
    lns_time: float = 2.0
    lns: bool = True
    progress: Callable[[Progress], None] | None = None
    bound: float | None = None
    #: Stop searching once the primary cost (TCO or hosts) reaches this proven bound; not with an interference goal
    #: (its term can still fall, so the target proves nothing about the objective). Without one, the rest of the objective
    #: is tie-breaks at the default weights (fragmentation, moves).
    primary_target: float | None = None


def _moves_to_empty(state: PlacementState, h: int) -> int:
    """Moves emptying host ``h`` adds to the plan: its tasks whose original host it is (a task moved here earlier is counted already)."""
    return int(np.count_nonzero(state.p.current[list(state.tasks_on[h])] == h))


class Swaps(NamedTuple):
    """What :func:`_try_swap` may move a host's tasks onto: ``targets`` the empty receiving hosts when a pass
    began, and :func:`~packer.solvers.dominance.dominance`'s ``kind`` (H,) and ``dominates`` (K, K)."""

    targets: np.ndarray
    kind: np.ndarray
    dominates: np.ndarray


class Emptying(NamedTuple):
    """What trying to empty a host gave: the objective ``gain`` (0 if none) and the ``moves`` it added to the plan."""

    gain: float
    moves: int


def _try_empty(state: PlacementState, h: int, budget: float, open_mask: np.ndarray, swaps: Swaps, commit: bool = True,
               evict: bool = False) -> Emptying:
    """Try to move every task off host ``h``, committed only if ``commit``.

    With ``evict``, a task that fits on no open host as they are goes where one other task
    makes room for it by moving to a third host (:func:`_place_by_eviction`), within ``budget``.
    """
    p = state.p
    tasks = sorted(state.tasks_on[h], key=lambda t: -float((p.demand[t] * state.inv_cap[h]).sum()))
    # Each task whose original host this is becomes a move; a task moved here earlier stays
    # moved (or returns home, saving one): counting only the former never exceeds the budget.
    extra_moves = _moves_to_empty(state, h)
    if state.moves + extra_moves > budget:
        return Emptying(0.0, 0)
    allowed = open_mask.copy()
    allowed[h] = False
    moves_before = state.moves
    undo: list[tuple[int, int]] = []  # (task, the host it left), in the order moved
    change = 0.0
    for t in tasks:
        to, delta = best_host(state, t, allowed)
        if to >= 0:
            undo.append((t, h))
            state.move(t, to)
        elif evict and (made := _place_by_eviction(state, t, allowed)) is not None:
            moved, delta = made
            undo += moved
        else:
            break
        change += delta
    else:
        # A move aside may be one more than emptying h alone takes.
        if change < -1e-9 and state.moves <= budget and state.holds():
            emptied = Emptying(-change, state.moves - moves_before)
            if commit:
                open_mask[h] = False
            else:
                _undo(state, undo)
            return emptied
    _undo(state, undo)
    return _try_swap(state, h, budget, open_mask, swaps, tasks, extra_moves, commit)


def _undo(state: PlacementState, moved: list[tuple[int, int]]) -> None:
    """Take back ``moved`` ((task, the host it left), in the order moved), last first."""
    for t, frm in reversed(moved):
        state.move(t, frm)


#: Tasks :func:`_place_by_eviction` tries to move aside, smallest first, for one task that fits nowhere.
EVICTION_CANDIDATES = 8


def _place_by_eviction(state: PlacementState, t: int, allowed: np.ndarray) -> tuple[list[tuple[int, int]], float] | None:
    """Place task ``t``, which fits on no host of ``allowed`` (bool (H,)) as they are, on one of them once one task there
    moves to another host of ``allowed``: the moves made ((task, the host it left), in order) and their objective change;
    None, with nothing moved, where no such pair works.

    An ejection chain of length one. The task moved aside is one that alone frees enough room for ``t`` in every
    dimension, on a host of an architecture ``t`` may use; of those, the :data:`EVICTION_CANDIDATES` smallest (summed
    share of their host's capacity) are tried. Where slack is scarce, the room left on open hosts fits no whole task
    of the hosts still open: on a paper-shaped trace of 1,000 tasks (Baseline, 400 moves) emptying stopped after 80
    moves, and the neighbourhood search then spent its time on what a move aside does at once (benchmarks/RESULTS.md).
    """
    p = state.p
    over = np.clip(state.loads + p.demand[t] - state.cap, 0.0, None)  # (H, D) what t lacks on each host
    near = allowed & p.eligible[t, p.host_arch] & (over > 0).any(axis=1)
    aside = np.flatnonzero(near[state.assign] & p.movable)
    aside = aside[(p.demand[aside] >= over[state.assign[aside]]).all(axis=1)]
    size = (p.demand[aside] * state.inv_cap[state.assign[aside]]).sum(axis=1)
    frm = int(state.assign[t])
    for u in aside[np.argsort(size, kind="stable")][:EVICTION_CANDIDATES].tolist():
        g = int(state.assign[u])
        elsewhere = allowed.copy()
        elsewhere[g] = False
        to, delta = best_host(state, u, elsewhere)
        if to < 0:
            continue
        state.move(u, to)
        if len(state.feasible(t, np.array([g]))):
            delta += float(state.objective_delta(t, np.array([g]))[0])
            state.move(t, g)
            return [(u, g), (t, frm)], delta
        state.move(u, g)
    return None


def _try_swap(state: PlacementState, h: int, budget: float, open_mask: np.ndarray, swaps: Swaps, tasks: list[int],
              extra_moves: int, commit: bool = True) -> Emptying:
    """Move all of ``h``'s tasks onto one cheaper empty host, if that lowers the objective (at most ``extra_moves``
    moves); committed only if ``commit``."""
    p = state.p
    if state.moves + extra_moves > budget or not len(swaps.targets):
        return Emptying(0.0, 0)
    price, targets = state.open_cost, swaps.targets
    # Not onto a host that h dominates: that saves fragmentation only, and takes away room the packing could use (37,000
    # tasks under P99: 202 Skylake16 hosts' tasks swapped onto Broadwell20 hosts, each 17 cores smaller; RESULTS.md).
    cheaper = targets[(price[targets] < price[h] - 1e-9) & (state.count[targets] == 0)
                      & ~swaps.dominates[swaps.kind[h], swaps.kind[targets]]]
    need = p.demand[tasks].sum(axis=0)
    # A quick filter on the tasks' total demand and eligibility; the rules decide move by move below.
    cheaper = cheaper[(need <= state.cap[cheaper]).all(axis=1) & p.eligible[np.ix_(tasks, p.host_arch[cheaper])].all(axis=0)]
    if not len(cheaper):
        return Emptying(0.0, 0)
    g = np.array([cheaper[np.argmin(price[cheaper])]])
    moves_before = state.moves
    change = 0.0
    for k, t in enumerate(tasks):
        if not len(state.feasible(t, g)):  # checked move by move: the tasks already moved count (spread, RP floors, ...)
            for u in tasks[:k]:
                state.move(u, h)
            return Emptying(0.0, 0)
        change += float(state.objective_delta(t, g)[0])
        state.move(t, int(g[0]))
    gain = -change if change < -1e-9 and state.holds() else 0.0
    swapped = Emptying(gain, state.moves - moves_before if gain else 0)
    if gain and commit:
        open_mask[h] = False
        open_mask[g] = True
        return swapped
    for t in tasks:
        state.move(t, h)
    return swapped


def _candidate_order(state: PlacementState, rng: np.random.Generator, full_repack: bool) -> np.ndarray:
    """Occupied hosts without a pinned task, in the order the greedy tries to empty them (ties broken by ``rng``)."""
    p = state.p
    cand = np.flatnonzero((state.count > 0) & ~p.pinned_hosts)
    if full_repack:
        # Least-used, most expensive capacity first: those are the hosts a cheaper packing closes.
        use = (state.loads[cand][:, list(p.frag_dims)] * state.inv_cap[cand][:, list(p.frag_dims)]).max(axis=1)
        key = use - 1e-3 * state.open_cost[cand]
    else:
        key = -state.open_cost[cand] / np.maximum(state.count[cand], 1)
    tie = rng.random(len(cand))
    return cand[np.lexsort((tie, key))]


def construct_repack(problem: PlacementProblem, mix: ArchMix, keep_in_place: bool = True, clock: SearchClock | None = None,
                     largest_by: str = "total") -> np.ndarray | None:
    """A full-repack placement that follows a cost bound's LP solution (LP rounding).

    ``mix`` (from :func:`packer.solvers.bounds.repack_cost_bound`): ``mix.hosts`` (A,) is how
    many hosts of each architecture to open first and ``mix.task_arch`` (T,) the
    architecture each task's LP solution mostly uses (-1: none). Within an architecture the most loaded
    current hosts are opened, and a task already on an open host of its preferred
    architecture stays there, so the plan moves as few tasks as the mix allows. The
    other tasks go, largest first, by best fit into open hosts of their preferred
    architecture, then of any; when none fits, a closed host of the preferred
    architecture is opened, else the closed host with the lowest objective weight
    per capacity. ``keep_in_place=False`` re-places every movable task (better packing,
    more moves). A task's size is its share of the largest host per dimension, summed
    over dimensions (``largest_by="total"``) or the largest of them (``"peak"``).
    With ``mix.prepaid`` the hosts opened first are paid for, so a
    task goes to the one its move raises the objective least, empty or not, instead of
    filling occupied hosts first, or to the cheapest closed host of its architecture where
    opening it raises the objective less (benchmarks/RESULTS.md, issue 11, fifteenth session). Every
    task goes only where the rules admit it; returns ``None`` if some task fits nowhere
    or the result breaks a rule on the whole placement
    (:meth:`~packer.model.state.PlacementState.holds`). Given a ``clock``, each task
    placed is charged :data:`STEP_WORK`, and the construction gives up (``None``) once
    the clock runs out.
    """
    p = problem
    load = host_loads(p, p.current)
    use = (load[:, list(p.frag_dims)] / np.maximum(p.capacity[:, list(p.frag_dims)], 1e-12)).sum(axis=1)
    open_mask = p.pinned_hosts
    for a, n in enumerate(np.ceil(mix.hosts - 1e-6).astype(int)):
        hosts = np.flatnonzero((p.host_arch == a) & ~open_mask)
        need = n - int(open_mask[p.host_arch == a].sum())
        if need > 0:
            open_mask[hosts[np.argsort(-use[hosts], kind="stable")[:need]]] = True
    paid = open_mask.copy() if mix.prepaid else None
    preferred = mix.task_arch
    keep = open_mask[p.current] & ((preferred < 0) | (preferred == p.host_arch[p.current]) | ~p.movable)
    if not keep_in_place:  # pure best fit decreasing: tasks left in place can spoil the packing order
        keep &= ~p.movable
    state = PlacementState(p, np.where(keep, p.current, -1))
    overfull = (state.loads > state.cap).any(axis=1)
    if overfull.any():  # keeping every task of an open host may not fit under new limits; re-place those
        start = state.assign.copy()
        start[(start >= 0) & overfull[start] & p.movable] = -1
        state = PlacementState(p, start)
    todo = np.flatnonzero(state.assign < 0)
    price = capacity_price(p)
    share = relative_demand(p)[todo]
    size = {"total": share.sum(axis=1), "peak": share.max(axis=1)}[largest_by]
    for k, t in enumerate(largest_first(todo, size).tolist()):
        if clock is not None and k % CLOCK_EVERY == 0:
            clock.spend(STEP_WORK * min(CLOCK_EVERY, len(todo) - k))
            if clock.expired():
                return None
        own = p.host_arch == preferred[t]
        to = -1
        if preferred[t] >= 0:
            to, change = best_host(state, t, open_mask & own, paid)
            closed = _cheapest_closed(state, t, ~open_mask & own, price) if to < 0 or paid is not None else -1
            # Beside paid hosts, another is opened where the task's interference on the best paid one would cost more.
            if closed >= 0 and (to < 0 or state.objective_delta(t, np.array([closed]))[0] < change - 1e-9):
                to = closed
        if to < 0:
            to = best_host(state, t, open_mask, paid)[0]
        if to < 0:
            to = _cheapest_closed(state, t, ~open_mask, price)
        if to < 0:
            return None
        open_mask[to] = True
        state.move(t, to)
    return state.assign if state.holds() else None


def _cheapest_closed(state: PlacementState, t: int, closed: np.ndarray, price: np.ndarray) -> int:
    """Among the ``closed`` hosts (bool (H,)) that task ``t`` may move to, the one of lowest ``price``; -1 if none."""
    hosts = state.feasible(t, np.flatnonzero(closed))
    return int(hosts[np.argmin(price[hosts])]) if len(hosts) else -1


def _empty_hosts(state: PlacementState, budget: float, full: bool, config: EngineConfig, rng: np.random.Generator, clock: SearchClock,
                 report, best_first: bool | None = None) -> bool:
    """Emptying passes until no pass improves; returns True if the clock ran out first.

    While the move budget binds (fewer moves than movable tasks), or if ``best_first``, a pass
    empties hosts best gain per move first (:func:`_empty_best_first`, which also moves a task
    aside where that makes room): in rank order, a host whose emptying saves little (a swap
    onto an equally priced empty host) could spend moves that free more elsewhere.
    """
    open_mask = state.count > 0
    swaps = Swaps(np.flatnonzero(state.receiver & (state.count == 0)), *dominance(state.p))
    if best_first is None:
        best_first = budget < int(state.p.movable.sum())
    for sweep in range(config.passes):
        phase = f"empty hosts, pass {sweep + 1}"
        order = _candidate_order(state, rng, full)
        if best_first:
            gained, expired = _empty_best_first(state, budget, open_mask, swaps, order, clock, lambda: report(phase))
            if expired:
                return True
        else:
            gained = 0.0
            for k, h in enumerate(order):
                if state.count[h] == 0:
                    continue
                if state.moves >= budget:
                    break
                gained += _try_empty(state, int(h), budget, open_mask, swaps).gain
                clock.spend(STEP_WORK)
                if k % 256 == 0:
                    if clock.expired():
                        return True
                    report(phase)
        log.info("pass %d: objective gain %.4f, moves %d", sweep + 1, gained, state.moves)
        if gained <= 1e-9:
            break
    return False


def _empty_best_first(state: PlacementState, budget: float, open_mask: np.ndarray, swaps: Swaps, order: np.ndarray,
                      clock: SearchClock, report: Callable[[], None]) -> tuple[float, bool]:
    """Empty hosts in decreasing order of objective gain per added move; returns (gain, whether the clock ran out).

    A lazy greedy: every candidate enters a queue at an optimistic rate, its open cost
    per move; the best is tried on the state as it is, and committed if its real rate
    still beats every other candidate's queued rate, else queued again at its real
    rate. Rates mostly fall as other hosts fill up, so a queued rate is an optimistic
    one and only hosts that could be chosen are tried (a few per emptied host, not
    every host of the fleet). ``order`` breaks ties. A task that fits nowhere goes where a
    task moved aside makes room (:func:`_place_by_eviction`); such a move counts in the host's
    rate, so a host emptied that way ranks behind one its tasks alone empty for the same gain.
    """
    queue = [(-state.open_cost[h] / max(_moves_to_empty(state, h), 1), k, h) for k, h in enumerate(order.tolist())]
    heapq.heapify(queue)
    gained, tries = 0.0, 0
    while queue and state.moves < budget:
        _, k, h = heapq.heappop(queue)
        if not state.count[h]:
            continue
        gain, moves = _try_empty(state, h, budget, open_mask, swaps, commit=False, evict=True)
        clock.spend(STEP_WORK)
        tries += 1
        if tries % 256 == 0:
            if clock.expired():
                return gained, True
            report()
        if gain <= 1e-9:
            continue
        rate = gain / max(moves, 1)
        if queue and rate < -queue[0][0] - 1e-12:
            heapq.heappush(queue, (-rate, k, h))
            continue
        gained += _try_empty(state, h, budget, open_mask, swaps, evict=True).gain
    return gained, False


#: Relief candidates in a row that may fail before a relief pass stops (see :func:`_relieve_interference`).
RELIEF_PATIENCE = 500
#: Work (nominal seconds, :mod:`packer.solvers.clock`) a deterministic run charges per host or task a greedy pass tries.
STEP_WORK = 2e-4
#: Tasks a construction places between two looks at the clock.
CLOCK_EVERY = 256


def _relieve_interference(state: PlacementState, budget: float, config: EngineConfig, clock: SearchClock, report,
                          exchange: bool | None = None) -> bool:
    """Single-task moves off hosts over their sensitivity limit, while each lowers the objective, then batches onto empty
    hosts, then (where the budget cannot bind) exchanges of two tasks.

    Emptying hosts piles their tasks onto others; with a sensitivity weight that
    makes Eq. 4's interference worth more than the cost a host saves, the budget is
    better spent moving the tasks that relieve the most excess to the open host where
    they add the least, or to an empty host when the relief pays for opening it.
    Tasks are tried in order of the excess their departure removes; a move is kept
    when it lowers the objective (hosts closed and opened, excess, moves: every goal)
    and the rules on the whole placement still hold. Each pass ends with the batches of
    :func:`_relieve_by_opening`, for the hosts no single move pays for. If ``exchange`` (by default, where ``budget``
    covers every movable task and so cannot bind), the passes are followed by the exchanges of
    :func:`packer.solvers.exchange.relieve_by_exchange`, for the excess no host has room to take. Returns True if the
    clock ran out first.
    """
    p = state.p
    if exchange is None:
        exchange = budget >= int(p.movable.sum())
    for sweep in range(config.passes):
        gained, misses = 0.0, 0
        relief = state.relief(np.arange(p.n_tasks))
        order = np.flatnonzero((relief > 1e-12) & p.movable & ((state.assign != p.current) | (state.moves < budget)))
        order = order[np.argsort(-relief[order], kind="stable")]
        for k, t in enumerate(order.tolist()):
            if misses >= RELIEF_PATIENCE:
                break  # candidates come in decreasing relief: after this many misses in a row the rest rarely pay
            clock.spend(STEP_WORK)
            if k % 64 == 0:
                if clock.expired():
                    return True
                report(f"relieve interference, pass {sweep + 1}")
            h = int(state.assign[t])
            if h == p.current[t] and state.moves >= budget:
                continue  # leaving home costs a move the budget no longer has
            if state.excess(np.array([h]))[0] <= 1e-12:
                continue  # earlier moves already relieved this host
            best_gain, best_to = 1e-9, -1
            for allowed in (state.count > 0, state.count == 0):
                to, delta = best_host(state, t, allowed)
                extra = int(to != p.current[t]) - int(h != p.current[t])
                if to < 0 or state.moves + extra > budget or -delta <= best_gain:
                    continue
                state.move(t, to)
                holds = state.holds()
                state.move(t, h)
                if holds:
                    best_gain, best_to = -delta, to
            if best_to >= 0:
                state.move(t, best_to)
                gained += best_gain
                misses = 0
            else:
                misses += 1
        opened, timed_out = _relieve_by_opening(state, budget, clock, lambda: report(f"relieve interference, pass {sweep + 1}"))
        gained += opened
        if timed_out:
            return True
        log.info("relief pass %d: objective gain %.4f, moves %d", sweep + 1, gained, state.moves)
        if gained <= 1e-9:
            break
    # Exchanges spend two moves for little: under a binding budget they wait for :func:`_exchange_tasks`.
    return exchange and _exchange_until_stale(state, budget, config, clock, report)[1]


#: Candidates (largest relief first) :func:`_relieve_by_opening` considers for one host's batch.
FILL_CANDIDATES = 2000


def _relieve_by_opening(state: PlacementState, budget: float, clock: SearchClock, report: Callable[[], None]) -> tuple[float, bool]:
    """Batches of tasks off hosts over their sensitivity limit, each batch onto one empty host, while a batch lowers the objective.

    One task rarely relieves enough excess to pay for opening a host, so single moves
    (:func:`_relieve_interference`) leave hosts over their limit where several tasks moved
    together would pay for one. Each round fills, for every architecture, its cheapest empty
    host that may receive: tasks in decreasing order of the excess their departure removes,
    each while it fits and removes more excess than it brings there (an estimate in
    normalized sensitivity, at the interference weight). The batch whose estimate beats the
    host's cost the most is moved, and kept if the objective fell (every goal, counted move by
    move) and the rules hold on the whole placement; else it is undone and that architecture
    is not tried again. On 37,000 tasks under P99 Sens (a 60-s plan) this took the objective from
    29,486 to 26,664 at weight 10 and from 23,663 to 23,449 at weight 3 (benchmarks/RESULTS.md,
    issue 11, seventeenth session). Returns (objective gain, whether the clock ran out first).
    """
    p = state.p
    weight = p.weight(Interference)
    inv = state.inv_sens_cap
    gained, failed = 0.0, set()
    while state.moves < budget:
        over = np.clip(state.sens * inv - 1.0, 0.0, None)  # (H, K) normalized excess per host
        tasks = np.flatnonzero(p.movable & (over.sum(axis=1) > 1e-12)[state.assign])
        tasks = tasks[np.argsort(-state.relief(tasks), kind="stable")]
        empty = np.flatnonzero(state.receiver & (state.count == 0))
        best = (0.0, -1, [])
        for arch in sorted(set(p.host_arch[empty].tolist()) - failed):
            hosts = empty[p.host_arch[empty] == arch]
            g = int(hosts[np.argmin(state.open_cost[hosts])])
            fits = tasks[p.eligible[tasks, arch] & (p.demand[tasks] <= state.cap[g]).all(axis=1)][:FILL_CANDIDATES]
            batch, value = _fill_for_relief(state, g, fits, over, weight, budget, clock)
            if value - state.open_cost[g] > best[0]:
                best = (value - state.open_cost[g], g, batch)
        if clock.expired():
            return gained, True
        _, g, batch = best
        if g < 0:
            break
        change, moved = 0.0, []
        for t in batch:
            if len(state.feasible(t, np.array([g]))):
                change += float(state.objective_delta(t, np.array([g]))[0])
                moved.append((t, int(state.assign[t])))
                state.move(t, g)
        if change < -1e-9 and state.holds():
            gained -= change
            report()
            continue
        for t, frm in reversed(moved):
            state.move(t, frm)
        failed.add(int(p.host_arch[g]))
    return gained, False


def _fill_for_relief(state: PlacementState, g: int, candidates: np.ndarray, over: np.ndarray, weight: float, budget: float,
                     clock: SearchClock) -> tuple[list[int], float]:
    """The tasks of ``candidates`` that :func:`_relieve_by_opening` would move to empty host ``g``: one at a time, the
    first in order that fits what is left of ``g`` and removes more excess than it brings there, and the interference
    cost (objective units) their moves are estimated to save. ``over`` (H, K): normalized excess per host."""
    p, inv = state.p, state.inv_sens_cap
    source = state.assign[candidates]
    own = p.sens_demand[candidates] * inv[source]  # (n, K) what each task's departure removes, up to its host's excess
    extra = (g != p.current[candidates]).astype(int) - (source != p.current[candidates])
    left = over.copy()  # excess still on each host once the batch's earlier tasks left it
    load, sens = np.zeros(len(p.dims)), np.zeros(len(p.sens_dims))
    batch, value, moves = [], 0.0, state.moves
    free = np.ones(len(candidates), dtype=bool)
    while True:
        clock.spend(STEP_WORK)
        removed = np.minimum(own, left[source]).sum(axis=1)
        brought = (np.clip((sens + p.sens_demand[candidates]) * inv[g] - 1.0, 0.0, None).sum(axis=1)
                   - np.clip(sens * inv[g] - 1.0, 0.0, None).sum())
        ok = (free & (removed - brought > 1e-12) & (moves + extra <= budget)
              & (load + p.demand[candidates] <= state.cap[g]).all(axis=1))
        if not ok.any():
            return batch, value
        i = int(np.argmax(ok))
        t, h = int(candidates[i]), int(source[i])
        batch.append(t)
        value += weight * (removed[i] - brought[i])
        left[h] -= np.minimum(own[i], left[h])
        load += p.demand[t]
        sens += p.sens_demand[t]
        moves += int(extra[i])
        free[i] = False


#: Shares of a move budget the engine tries spending on interference relief, the rest on emptying hosts
#: (:func:`_mix_relief_and_emptying`). 0 is "all emptying", 1 "all relief".
RELIEF_SHARES = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)


def _mix_relief_and_emptying(problem: PlacementProblem, start: np.ndarray, budget: float, full: bool, config: EngineConfig,
                             clock: SearchClock, report, keep: Callable[[PlacementState], None], best_first: bool | None = None) -> bool:
    """The best plan over ways of splitting a move budget between relief moves and emptying hosts.

    Relief buys Eq. 4's interference down at the sensitivity weight, emptying buys
    cost; which is worth more per move depends on the weight and on the move. Each
    order (relief first, then emptying, then relief again with any moves left; or
    emptying first, then relief) is run first with its first step free to use the
    whole budget, which shows how many moves that step takes on its own (its extent);
    then with the first step capped at each share of :data:`RELIEF_SHARES` of the
    smaller of the budget and that extent. Shares of the extent rather than of the
    budget: caps above the extent all give the same plan, and a full repack (whose
    budget is every movable task) then tries the same caps as any budget the extent
    fits in. The plan with the lowest objective is kept, so the weight ladder of a
    sweep yields a curve of mixtures rather than two extremes. Every run starts from
    ``start`` with the same seed; ``full``: empty hosts in a full repack's order;
    ``best_first``: as :func:`_empty_hosts`, and a start emptied best first is also relieved
    as under a binding budget (exchanges only on the best mixture, :func:`_exchange_tasks`),
    so that a full repack follows a budget's path too. Each new best state is handed to ``keep``
    as soon as its run ends (so Ctrl-C keeps it); returns whether the clock ran out first.
    """
    best_objective, best = np.inf, None
    exchange = None if best_first is None else not best_first
    for order, first_step, then in (("relief first", _relieve_interference, (_empty_hosts, _relieve_interference)),
                                    ("emptying first", _empty_hosts, (_relieve_interference,))):
        shares = sorted({share if order == "relief first" else 1.0 - share for share in RELIEF_SHARES} - {0.0}, reverse=True)
        already = int(np.count_nonzero(start != problem.current))  # a start may hold moves of its own: caps count the moves added
        extent, capped = budget - already, set()
        for share in shares:
            cap = already + float(np.floor(share * extent + 1e-9))
            if cap in capped:
                continue
            capped.add(cap)
            state = PlacementState(problem, start)
            rng = np.random.default_rng(config.seed)
            progress = lambda phase, s=state, c=cap - already: report(f"{phase} ({order}, at most {c:.0f} moves first)", s)  # noqa: E731
            timed_out = False
            for step, limit in ((first_step, cap), *((step, budget) for step in then)):
                timed_out = (step(state, limit, config, clock, progress, exchange) if step is _relieve_interference
                             else step(state, limit, full, config, rng, clock, progress, best_first))
                if step is first_step and share == 1.0:
                    extent = min(budget, state.moves) - already
                if timed_out:
                    break
            objective = evaluate(problem, state.assign).objective
            log.info("%s, at most %.0f moves first: objective %.4f, %d moves", order, cap - already, objective, state.moves)
            if objective < best_objective - 1e-9:
                best_objective, best = objective, state
                keep(state)
            if timed_out:
                return True
    return best is not None and _exchange_tasks(best, budget, config, clock, report, keep)


def _exchange_tasks(best: PlacementState, budget: float, config: EngineConfig, clock: SearchClock, report,
                    keep: Callable[[PlacementState], None]) -> bool:
    """Exchanges of two tasks (:func:`packer.solvers.exchange.relieve_by_exchange`) on a copy of ``best`` (Ctrl-C during
    an exchange then leaves ``best`` whole), in up to ``config.passes`` sweeps, handed to ``keep`` if they lowered the
    objective; whether the clock ran out first.

    Under a binding budget, exchanges run here, on the best mixture, rather than inside relief: an exchange spends two
    moves for little (paper 1,000 tasks, 400 moves, weight 10: inside relief, 109 exchanges took 198 of the moves for
    6.8 of objective, and the emptying they crowded out had gained 194 with 270), so they get only the moves the best
    mixture left. Where the budget cannot bind, relief also exchanges after its passes (on 37,000 tasks, weight 10, the
    mixtures of one start take the whole 300 s: exchanges only here never ran).
    """
    state = PlacementState(best.p, best.assign)
    gained, timed_out = _exchange_until_stale(state, budget, config, clock, report)
    if gained > 1e-9:
        keep(state)
    return timed_out


def _exchange_until_stale(state: PlacementState, budget: float, config: EngineConfig, clock: SearchClock, report) -> tuple[float, bool]:
    """Sweeps of :func:`packer.solvers.exchange.relieve_by_exchange` on ``state`` until one gains nothing, at most
    ``config.passes``; (objective gain, whether the clock ran out first)."""
    gained = 0.0
    for _ in range(config.passes):
        gain, timed_out = relieve_by_exchange(state, budget, clock, lambda: report("exchange tasks between hosts", state))
        gained += gain
        if timed_out:
            return gained, True
        if gain <= 1e-9:
            break
    return gained, False


def solve_engine(
    problem: PlacementProblem,
    config: EngineConfig = EngineConfig(),
    start: np.ndarray | None = None,
    mixes: Sequence[ArchMix] = (),
    starts: Sequence[np.ndarray] = (),
) -> SolveResult:
    """Run the scalable engine from ``start`` (default: the current placement).

    ``starts``: further valid placements of the problem without its move budget (e.g.
    :func:`packer.solvers.patterns.pattern_packing`) the engine also starts from; the best
    after the emptying passes is refined.

    In full repack (``problem.max_moves is None``), ``mixes`` (the solutions of
    :func:`packer.solvers.bounds.repack_cost_bound`'s MILPs, the primary cost's first) add
    starts built by :func:`construct_repack` (:func:`_further_starts`); the best after the emptying passes is refined by
    large-neighbourhood search. The starts are taken best first (``start`` among them), so
    that the time goes to the most promising one. Then ``start`` is taken twice more: improved
    first within :data:`BUDGETED_START_MOVES` moves, as a budgeted solve of the same configuration
    improves it, then without a cap; and emptied best gain per move first, as a binding budget
    empties it. A start the time did not reach is still compared as it is. Under a binding budget
    (given for a :func:`wide_budget`), ``starts`` and the constructions on ``mixes``, trimmed to the
    budget (:func:`~packer.solvers.trim.trim_to_budget`), are further starts after ``start``. With
    sensitivity, each start gets the mixtures of relief and emptying (:func:`_mix_relief_and_emptying`);
    a budget that covers every movable task is searched as a full repack.
    """
    t0 = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    budget = np.inf if problem.max_moves is None else problem.max_moves
    full = problem.max_moves is None
    clock = SearchClock(config.time_limit, config.deterministic)
    # Where CP-SAT will re-solve the whole instance, the constructions leave it a neighbourhood's time: a full repack's
    # several starts must not leave it none where a budgeted solve's one start leaves it some.
    construction = clock.limit - config.lns_time - CONSTRUCTION_MARGIN
    whole = config.lns and covers_whole_instance(problem, config.lns_hosts) and construction >= MIN_CONSTRUCTION
    building = clock.part(construction) if whole else clock
    interrupted = timed_out = False
    ended, searched, proof_bound = None, {"count": 0, "largest_hosts": 0}, -np.inf
    first = problem.current if start is None else start
    state = PlacementState(problem, first)
    relief = _prices_interference(problem)
    if relief:
        # At the primary cost's bound the interference term can still fall: the target proves nothing about the objective.
        config = dataclasses.replace(config, primary_target=None)

    def report(phase: str, current: PlacementState | None = None) -> None:
        if config.progress is not None:
            ev = evaluate(problem, (current or state).assign)
            config.progress(Progress(phase, ev.objective, config.bound, ev.moves, ev.hosts, time.perf_counter() - t0))

    def keep(best: PlacementState) -> None:
        nonlocal state
        state = best

    # While a further start, or the plan with dominated hosts moved off, is being improved: the placement kept if it ends no lower.
    best_state = None
    try:
        with interrupt.stoppable():
            # With a budget that covers every movable task, a full repack's construction is allowed too.
            movable = int(problem.movable.sum())
            unbound = full or budget >= movable
            # (a start, best_first as in _empty_hosts, a move budget its first improvement stays within or None)
            others: list[tuple[np.ndarray, bool | None, int | None]] = []
            if unbound:
                # Best first (a stable sort: ``first`` leads on ties).
                origin = first
                first, *rest = sorted([first, *_further_starts(problem, starts, mixes, building)],
                                      key=lambda assign: _objective(problem, assign))
                state = PlacementState(problem, first)
                # Then ``start`` again, as budgets improve it. First within the default budget, as its solve does: under
                # relief the mixtures' caps are shares of the budget, so a budget tries other mixtures than a full repack
                # (on 16 random 600-task instances, 10 s, the full repack ended above the 400-move plan on 3); without, a
                # budget stops emptying where its moves run out, and its tie-breaks draw on a generator of their own
                # (without this path the same 16 constructions ended above the 400-move ones on 4). And emptied best
                # gain per move first, as a binding budget empties it: the path every budgeted plan begins with (without
                # it, 20 of 40 random full repacks ended above their 25-move plan). A start that already makes the
                # default budget's moves (``--start``) has no such path.
                if full and np.count_nonzero(origin != problem.current) < BUDGETED_START_MOVES < movable:
                    others.append((origin, True, BUDGETED_START_MOVES))
                others += [(origin, True, None)] + [(built, None, None) for built in rest]
            elif mixes or starts:
                # A budget wide enough for a full repack's starts (:func:`wide_budget`): they are further starts,
                # trimmed to it. From today's placement, where slack is scarce, the emptying finds no room and the
                # search no neighbourhood that frees a host (slack-scarce 1,000 tasks, 400 moves, 60 s: 43 cost units
                # freed with 131 moves; with these starts 52, and at 900 moves 75 against 43).
                for built in _further_starts(problem.with_rule(None, replaces=MoveBudget), starts, mixes, building):
                    building.spend(STEP_WORK * int(np.count_nonzero(built != problem.current)))  # trimming looks at each move
                    trimmed = trim_to_budget(problem, built, int(budget))
                    if trimmed is not None:
                        others.append((trimmed, None, None))
            # Relief and emptying are mixed from every start within at most every movable task (the most moves a
            # plan has): a full repack then tries what a budget covering every movable task tries, and more.
            mixed = min(budget, movable)

            def improve(best_first: bool | None = None, within: int | None = None) -> bool:
                """Improve ``state``; with ``within``, first as a binding budget of that many moves would."""
                if relief:
                    if within is not None and _mix_relief_and_emptying(problem, state.assign, within, False, config, building,
                                                                       report, keep, best_first):
                        return True
                    return _mix_relief_and_emptying(problem, state.assign, mixed, unbound, config, building, report, keep, best_first)
                # The budget's solve draws its tie-breaks first from a generator of ``config.seed``: so does its path here.
                if within is not None and _empty_hosts(state, within, False, config, np.random.default_rng(config.seed),
                                                       building, report):
                    return True
                return _empty_hosts(state, budget, unbound, config, rng, building, report, best_first)

            timed_out = improve()
            # The paths from today's placement serve budgets; where no plan within the default budget can be as low as the
            # best start, they cannot (37,000 tasks under P99: 27 s of the 300, ending at 15,797 and 14,829 against 13,087).
            beyond_budgets = (unbound and not relief and start is None
                              and _objective(problem, state.assign) < lowest_within(problem, BUDGETED_START_MOVES))
            for built, best_first, within in others:
                if beyond_budgets and built is origin:
                    continue
                best_state = state
                state = PlacementState(problem, built)  # so progress reports follow the construction
                if not timed_out:
                    timed_out = improve(best_first, within)
                if violations(problem, state.assign) or _objective(problem, state.assign) >= _objective(problem, best_state.assign):
                    state = best_state
                best_state = None
            if unbound and not timed_out:
                # The best start once more, its dominated hosts moved off first: room where it costs nothing, which
                # emptying then uses (a 37,000-task P99 plan: TCO 12,916 → 12,852 in 3 s, where emptying alone reached
                # 12,912). The search starts from it, and the plan before stays if that ends no lower, since the larger
                # hosts' spare capacity counts as fragmentation.
                emptied = _empty_dominated(state, config, rng, building)
                timed_out = building.expired()
                if emptied is not None:
                    best_state, state = state, PlacementState(problem, emptied)
                    report("moved to larger hosts")
            report("construction done")
            if building is not clock:
                clock.spend(building.work)
                timed_out = timed_out and clock.expired()  # cut short for the whole-instance solve, not by the time limit
            reached = _at_target(state, config.primary_target)
            if config.lns and not reached and not clock.expired():
                state, ended, searched, proof_bound = _lns(state, config, rng, clock, report)
                if ended:
                    report("search ended early")  # the status line says why
            if best_state is not None and _objective(problem, best_state.assign) < _objective(problem, state.assign):
                state = best_state
            best_state = None
    except KeyboardInterrupt:
        interrupted = True
        if best_state is not None and (violations(problem, state.assign)
                                       or evaluate(problem, state.assign).objective >= evaluate(problem, best_state.assign).objective):
            state = best_state
    assign = state.assign
    problems = violations(problem, assign)
    if problems:  # never hand out an invalid plan: fall back to the current placement
        log.error("engine produced an invalid placement (%s); returning the current placement", "; ".join(problems))
        assign = problem.current.copy()
    ev = evaluate(problem, assign)
    # A proof is stated where every rule is in CP-SAT's model exactly, so that verify can re-prove it (:mod:`packer.plan.claims`).
    proven = (ended == PROVED and not interrupted and not problems
              and all("exact" in rule.strategies for rule in problem.rules))
    return SolveResult(
        assign=assign,
        status="optimal" if proven else "feasible",
        objective=ev.objective,
        bound=proof_bound if proven else -np.inf,
        solver="engine",
        wall_s=time.perf_counter() - t0,
        infeasible_tasks=[],
        stats={"interrupted": interrupted, "timed_out": timed_out, "moves": ev.moves, "invalid_fallback": bool(problems),
               **({"search_ended": ended} if ended and not interrupted else {}),
               **({"neighbourhood_search": searched} if searched["count"] else {}),
               **({"deterministic": {"work_s": clock.work, "wall_capped": clock.capped}} if config.deterministic else {})},
    )


def lowest_within(problem: PlacementProblem, moves: int) -> float:
    """A lower bound on the objective of every plan within ``moves`` moves of today's placement, for an objective of open
    hosts' weights and a cost per move (no interference term).

    A host closes only when all its tasks move, one move each; a host holding a pinned task stays open; opening hosts and
    moving tasks among open ones lower nothing. So at most the hosts of highest weight per task close, the last one in
    part (the fractional knapsack's bound on what whole hosts free).
    """
    p = problem
    count = np.bincount(p.current, minlength=p.n_hosts)
    hosts = np.flatnonzero((count > 0) & ~p.pinned_hosts)
    rate = p.open_weight[hosts] / count[hosts]
    order = np.argsort(-rate, kind="stable")
    rate, tasks = rate[order], np.cumsum(count[hosts][order])
    whole = int(np.searchsorted(tasks, moves, side="right"))
    freed = p.open_weight[hosts][order][:whole].sum()
    if whole < len(hosts):
        freed += rate[whole] * (moves - (tasks[whole - 1] if whole else 0))
    return _objective(p, p.current) - freed


def _further_starts(problem: PlacementProblem, starts: Sequence[np.ndarray], mixes: Sequence[ArchMix],
                    clock: SearchClock) -> list[np.ndarray]:
    """``starts`` and :func:`construct_repack`'s constructions on ``mixes`` (those it could build).

    On the first mix (the primary cost's), the one that keeps tasks in place, largest total
    first, is always built: it is the cheaper (fewer tasks to place) and, without other
    starts, the plan. The rest are built on what is left of ``clock``, each given up when it
    runs out (at 37,000 tasks and 18,000 hosts each takes 7-12 s, and a solve with a 15-s
    limit took 42 s with two): first the same on each further mix (the interference MILP's:
    on 37,000 tasks under P99 Sens it led to plans 0.9-6.4% lower at weights 0.3-10), then,
    on the mix whose construction so far is the lowest, the one that re-places every task
    and, with one mix, the one that keeps tasks in place, largest peak first. Neither order
    wins everywhere (total: 37,000 tasks 13,097 against 13,159, the known-optimum family
    1.6-2.0% cheaper; peak: g5k-s7 P99 0.4% cheaper). The lowest mix, because at high
    interference weights the primary cost's constructions are far above the interference
    MILP's (37,000 tasks, P99 Sens, weight 10: ~114,800 against ~31,500); not always better
    after improvement (there, weight 3 at 300 s ended 0.6% higher: the lowest start is
    improved first and keeps the time). With two mixes (a goal prices interference) the
    largest-peak construction is left out: on 37,000 tasks, without it the 300-s plans were
    the same and the 60-s ones 0.2% and 0.5% lower (weights 3 and 10), its time going to
    improving the best start.
    """
    built = list(starts)
    if mixes:
        first, *further = mixes
        in_place = [construct_repack(problem, first, keep_in_place=True)]
        clock.spend(STEP_WORK * int(problem.movable.sum()))  # a deterministic charge that does not depend on the construction
        for mix in further:
            if clock.expired():
                break
            in_place.append(construct_repack(problem, mix, True, clock))
        built += in_place
        objectives = [np.inf if assign is None else _objective(problem, assign) for assign in in_place]
        lowest = mixes[int(np.argmin(objectives))]
        variants = [(False, "total")] + ([(True, "peak")] if len(mixes) == 1 else [])
        for keep_in_place, largest_by in variants:
            if clock.expired():
                break
            built.append(construct_repack(problem, lowest, keep_in_place, clock, largest_by))
    return [b for b in built if b is not None]


def _objective(problem: PlacementProblem, assign: np.ndarray) -> float:
    return evaluate(problem, assign).objective


#: Neighbourhoods in a row without a gain after which neighbourhoods grow (twice the hosts, twice the seconds). Searching
#: on at one size gained nothing on the slack-scarce 10,000-task trace (400 moves, 60 s) after 30 of them.
GROW_AFTER = 30
#: Why a search ended before its time limit, as ``stats["search_ended"]`` and the console say it: a proof (optimal up to
#: the exact model's objective resolution, :mod:`packer.solvers.cpsat`), or nothing to search.
PROVED = "CP-SAT proved the plan optimal"
NOTHING_TO_MOVE = "no neighbourhood within the task cap holds a task that may move"
#: Least work (nominal seconds, :mod:`packer.solvers.clock`) a deterministic clock is charged per neighbourhood: building
#: and checking one takes ~20-30 ms where CP-SAT may report ~1e-5 s of its own work, and a search counting only the
#: latter ran to its wall-clock cap (15 s for 3 s of work, 1,196 neighbourhoods) and was no longer reproducible.
NEIGHBOURHOOD_WORK = 0.02
#: Neighbourhoods between two tries, in a full repack, of moving off dominated hosts and emptying hosts greedily
#: (:func:`_empty_dominated`).
DOMINATED_EVERY = 10
#: A stranded-room sub-solve's time, as a multiple of ``EngineConfig.lns_time``. Per second of the search, shorter ones
#: gain more: from one 37,000-task P99 plan, ~60 s of neighbourhoods of 5 / 2.5 / 1.25 / 0.75 s gained 15-24 / 18-28 /
#: 29-33 / 21-23 cost units (each sub-solve also spends ~0.35 s building its model). One neighbourhood of 5 s freed more
#: than one of 2.5 s (5-7 hosts against 2-4 on the known-optimum family), but not twice as much.
STRANDED_TIME = 0.625
#: Work (nominal seconds) the constructions leave unused before a whole-instance solve's ``lns_time``, for their overrun
#: of their limit (a deterministic clock is looked at every :data:`CLOCK_EVERY` tasks or 256 hosts, at :data:`STEP_WORK` each).
CONSTRUCTION_MARGIN = 0.1
#: Least time (seconds) for the constructions below which they are not cut short for a whole-instance solve.
MIN_CONSTRUCTION = 0.5
#: Least time (seconds) left for which the search still starts a neighbourhood, a shorter one than ``lns_time`` if need be.
LAST_NEIGHBOURHOOD_SECONDS = 0.25
#: Most tasks in one neighbourhood (stranded-room ones of 550 tasks freed 0-7 hosts where ones of 400 freed 5-7).
NEIGHBOURHOOD_TASKS = 400


#: Local branching before a whole-instance solve (:func:`_lns`): the share of the time left it takes, at most
#: ``LOCAL_BRANCHING_LIMIT`` seconds (it finds the quick gains: given half of 20 s, it left the whole search a plan
#: 1.3% higher on tiny60 at weight 0.3), the task changes from the incumbent its first sub-solves allow (and half as
#: many more after each proves nothing better that close), and each sub-solve's seconds.
LOCAL_BRANCHING_SHARE = 0.5
LOCAL_BRANCHING_LIMIT = 1.0
LOCAL_BRANCHING_TASKS = 10
LOCAL_BRANCHING_SECONDS = 0.3
#: Moves of the default budget (the paper's): a full repack also improves today's placement
#: first within this many moves, as a budgeted solve of the same configuration does (:func:`solve_engine`).
BUDGETED_START_MOVES = RuleOptions().max_moves


#: Share of the movable tasks from which a move budget is wide enough for a full repack's constructions to be a budgeted
#: solve's starts too (:func:`wide_budget`).
WIDE_BUDGET_SHARE = 0.25


def wide_budget(problem: PlacementProblem) -> bool:
    """True when the move budget binds but covers at least :data:`WIDE_BUDGET_SHARE` of the movable tasks, and no
    interference term is priced: then :func:`solve_engine` also starts from a full repack's constructions and packing,
    trimmed to the budget (given their ``mixes`` and ``starts``, as :mod:`packer.solvers.run` gives them). Under an
    interference goal the budget's mixtures of relief and emptying need the time (600-task random family, 400 moves,
    10 s: 3 plans of 16 higher with those starts, none lower; paper-shaped 1,000 tasks, P99 Sens: the same plan)."""
    movable = int(problem.movable.sum())
    return (problem.max_moves is not None and WIDE_BUDGET_SHARE * movable <= problem.max_moves < movable
            and not _prices_interference(problem))


def _prices_interference(problem: PlacementProblem) -> bool:
    """True where the objective prices interference (sensitivity dimensions and a positive weight): then relief moves
    compete with emptying for the budget (:func:`_mix_relief_and_emptying`)."""
    return bool(problem.sens_dims) and problem.weight(Interference) > 0


def covers_whole_instance(problem: PlacementProblem, hosts: int = EngineConfig.lns_hosts) -> bool:
    """True when a neighbourhood of ``hosts`` hosts takes in the whole instance (:func:`_lns` then re-solves all of it with CP-SAT)."""
    return problem.n_hosts <= 2 * hosts and int(problem.movable.sum()) <= NEIGHBOURHOOD_TASKS


class Search(NamedTuple):
    """What :func:`_lns` ends with."""

    #: The placement.
    state: PlacementState
    #: Why the search ended before its time limit (:data:`PROVED`, :data:`NOTHING_TO_MOVE`), or None.
    ended: str | None
    #: What was searched: ``count`` neighbourhoods, the ``largest_hosts`` of them.
    searched: dict
    #: CP-SAT's lower bound on the whole instance's objective where it proved the plan optimal; -inf otherwise.
    proven_bound: float = -np.inf


def _lns(state: PlacementState, config: EngineConfig, rng: np.random.Generator, clock: SearchClock, report) -> Search:
    """Large-neighbourhood search with the exact CP-SAT sub-solver around the current frontier, to the time limit."""
    p = state.p
    best = evaluate(p, state.assign).objective
    searched = {"count": 0, "largest_hosts": 0}
    broken = violations(p, state.assign)
    if broken:  # every sub-solve starts from a valid placement; the caller falls back on the current one
        log.error("the construction broke a rule (%s); no neighbourhood search", "; ".join(broken))
        return Search(state, None, searched)
    stale = empties = 0
    # Neighbourhoods grow by this factor (hosts and seconds) after GROW_AFTER in a row gain nothing, until the task cap
    # trims one or one holds every host; the whole instance (within the cap) is re-solved once.
    scale, fully_grown, whole_tried = 1, False, False
    # Empty hosts with the cheapest capacity join every neighbourhood, so the search can move
    # load onto better architectures, not only among hosts already open.
    price = capacity_price(p)
    # Stranded room pays where hosts may be emptied freely, and only with CP-SAT's parallel portfolio: on the
    # known-optimum family its neighbourhoods freed 5 and 7 hosts in 5 s, where the interleaved (reproducible) search
    # and a single worker freed none (with hosts of one architecture, 3 of 1,545 cost units on a P99 fleet of 5,000 tasks
    # in 60 s of work); on the slack-scarce move budget they freed nothing. With the portfolio, a try of the same hosts
    # is another search (550 tasks, three tries: 0, 3 and 0 hosts).
    use_stranded = p.max_moves is None and not config.deterministic
    overhead = 0.0  # wall seconds the last sub-solve took outside CP-SAT's search (building and checking its model)

    def left() -> float:
        """Seconds a next sub-solve's search may have: on a wall clock, less the time the last one took outside it."""
        return clock.remaining() - (0.0 if config.deterministic else overhead)

    def sub_solve(tasks: np.ndarray, hosts: np.ndarray, seconds: float, **options) -> tuple[SolveResult, bool]:
        """Re-solve ``tasks`` over ``hosts`` and keep the plan if it is better and keeps every rule; returns it and whether
        it was kept. ``options``: further arguments of :func:`~packer.solvers.cpsat.solve_subproblem`."""
        nonlocal best, overhead
        # CP-SAT's reproducible search may run past its work limit by the clock (up to its safety net, WALL_CAP times): on a
        # wall clock, not past the solve's. Counted as work, a wall limit would make the plan depend on the machine.
        wall = None if config.deterministic else left()
        result = solve_subproblem(p, state.assign, tasks, hosts, time_limit=seconds, seed=int(rng.integers(1 << 30)),
                                  wall_limit=wall, **options)
        overhead = result.wall_s - result.stats["solve_s"]
        clock.spend(max(result.stats["deterministic_s"], NEIGHBOURHOOD_WORK))
        _tally(searched, len(hosts))
        # The exact model cannot state some rules (the tasks-at-risk count): it leaves them out, and only plans that keep
        # them are taken.
        kept = result.objective < best - 1e-9 and not violations(p, result.assign)
        if kept:
            adopt(result.assign, result.objective, "neighbourhood search")
        return result, kept

    def adopt(assign: np.ndarray, objective: float, phase: str) -> None:
        """Make ``state`` the better placement ``assign`` of ``objective``."""
        nonlocal best
        with interrupt.held():  # all of the improvement or none of it
            for t in np.flatnonzero(assign != state.assign):
                state.move(int(t), int(assign[t]))
        best = objective
        report(phase)

    last_dominated = 0  # neighbourhoods searched at the last try of _empty_dominated

    while left() > min(config.lns_time, LAST_NEIGHBOURHOOD_SECONDS) and not clock.expired():
        if stale >= GROW_AFTER:
            stale = 0
            if not fully_grown:
                scale *= 2
        size = config.lns_hosts * scale
        open_hosts = np.flatnonzero(state.count > 0)
        # A small instance (or neighbourhoods grown to its size) is one neighbourhood: re-solve all of it with the time left.
        # Without a proof (CP-SAT's work ran out first, or its plan broke a rule it cannot state) the search goes on.
        if not whole_tried and covers_whole_instance(p, size):
            if clock.remaining() < config.lns_time:
                # Shorter whole-instance solves served binding budgets more than full repacks: at 1 s of work, 3 of 4
                # full repacks of 40 tasks (test_a_full_repack_ends_no_higher_than_a_binding_budget) ended above their 25-move plan.
                break
            whole_tried = True
            tasks, hosts = np.flatnonzero(p.movable), np.arange(p.n_hosts)
            # Local branching first (Fischetti and Lodi, 2003): CP-SAT improves a plan faster among the plans a few task
            # changes from it than among all of them (40 tasks, 3 s of work, seeds 100-139: full repacks 13.256 → 13.201
            # and 25-move plans 13.240 → 13.182 on average); the rest of the time searches all plans, which alone can
            # prove one optimal.
            whole_search = clock.remaining() - min(LOCAL_BRANCHING_SHARE * clock.remaining(), LOCAL_BRANCHING_LIMIT)
            changes = LOCAL_BRANCHING_TASKS
            while changes < len(tasks) and left() - whole_search > LAST_NEIGHBOURHOOD_SECONDS and not clock.expired():
                result, kept = sub_solve(tasks, hosts, min(LOCAL_BRANCHING_SECONDS, left() - whole_search), max_changes=changes)
                if not kept and result.status == "optimal":
                    changes += LOCAL_BRANCHING_TASKS // 2  # nothing better that close: look further
            result, _ = sub_solve(tasks, hosts, max(LAST_NEIGHBOURHOOD_SECONDS, clock.remaining() - 0.1))
            # CP-SAT's optimum leaves out the rules it cannot state (a relaxation): met by the plan kept (the incumbent, or
            # CP-SAT's plan just taken), it proves it optimal; a better plan that breaks such a rule proves nothing.
            if result.status == "optimal" and result.objective >= best - 1e-9:
                return Search(state, PROVED, searched, result.bound)
            continue
        if len(open_hosts) == 0 or (empties >= GROW_AFTER and fully_grown):
            return Search(state, NOTHING_TO_MOVE, searched)
        if p.max_moves is None and searched["count"] - last_dominated >= DOMINATED_EVERY:
            last_dominated = searched["count"]
            emptied = _empty_dominated(state, config, rng, clock)
            if emptied is not None and (objective := evaluate(p, emptied).objective) < best - 1e-9:
                adopt(emptied, objective, "moved to larger hosts")
                stale = 0
        empty = np.flatnonzero((state.count == 0) & state.receiver)
        cheap = empty[np.argsort(price[empty], kind="stable")][:max(2, size // 4)]
        seconds = min(config.lns_time * scale, clock.remaining())
        # Every other neighbourhood is of stranded room, the first among them and the one after any gain (``stale`` is 0
        # then), so one that gains is followed by another: on the paper-scale P99 fleet of 37,000 tasks only they gained.
        # From the first rather than after two others without a gain: on 5,000-task P99 fleets (seeds 0-4, 60 s) a summed
        # objective of 8,783.9 against 8,796.0.
        stranded = use_stranded and stale % 2 == 0
        if stranded:
            hosts = np.union1d(stranded_room_hosts(state, open_hosts, NEIGHBOURHOOD_TASKS, rng), cheap)
            # Shorter, and leaving the loop's one lns_time for a last ordinary neighbourhood rather than past the limit.
            seconds = min(STRANDED_TIME * seconds, max(config.lns_time, clock.remaining() - config.lns_time), clock.remaining())
        else:
            # Seed hosts: cheap-to-free open hosts (few tasks, high cost) and hosts with sensitivity excess.
            weight = state.open_cost[open_hosts] / np.maximum(state.count[open_hosts], 1)
            weight = weight + 10.0 * state.excess(open_hosts)
            prob = weight / weight.sum()
            n_seed = min(len(open_hosts), max(2, size // 3))
            seeds = rng.choice(open_hosts, size=n_seed, replace=False, p=prob)
            # Receivers: hosts with the most slack that the seeds' tasks could use.
            slack = state.room_share(open_hosts).sum(axis=1)
            room = open_hosts[np.argsort(-slack)][:size]
            hosts, trimmed = _within_task_cap(p, state.assign, np.concatenate([seeds, room, cheap]), NEIGHBOURHOOD_TASKS)
            # Larger ones would be trimmed as much, or hold no more hosts.
            fully_grown = fully_grown or trimmed or size >= p.n_hosts
        tasks = np.flatnonzero(np.isin(state.assign, hosts) & p.movable)
        if len(tasks) == 0:
            stale += 1
            empties += 1
            clock.spend(NEIGHBOURHOOD_WORK)
            continue
        empties = 0
        # Without presolve's probing, which runs in one thread: 2.1 s of a 5-s stranded sub-solve at 37,000 tasks.
        portfolio = {"deterministic": False, "num_workers": 2, "probing": False} if stranded else {}
        if sub_solve(tasks, hosts, seconds, **portfolio)[1]:
            stale = 0
            if _at_target(state, config.primary_target):
                break
        else:
            stale += 1
    return Search(state, None, searched)


def _empty_dominated(state: PlacementState, config: EngineConfig, rng: np.random.Generator, clock: SearchClock) -> np.ndarray | None:
    """A copy of ``state`` with its dominated hosts moved off (:func:`~packer.solvers.dominance.move_off_dominated_hosts`)
    and hosts emptied greedily into the room that leaves, without a move budget; None where no host could be moved off.

    The neighbourhood search leaves room on hosts of a dominating architecture where it empties some: on the
    37,000-task P99 plan after 300 s, moving 56 Broadwell18 hosts' tasks onto empty Skylake14 hosts and emptying
    lowered TCO from 12,888 to 12,864 in 3 s, where emptying alone reached 12,882.
    """
    if not len(dominated_open_hosts(state)):
        return None
    trial = PlacementState(state.p, state.assign)
    move_off_dominated_hosts(trial, capacity_price(state.p))
    _empty_hosts(trial, np.inf, True, config, rng, clock, lambda *_: None)
    return trial.assign if not violations(state.p, trial.assign) else None


def _at_target(state: PlacementState, target: float | None) -> bool:
    """True when the placement's primary cost (its open hosts' cost or count) is at most ``target`` (None: no target)."""
    return target is not None and state.p.primary_cost[np.unique(state.assign)].sum() <= target + 1e-9


def _tally(searched: dict, hosts: int) -> None:
    """Count a neighbourhood of ``hosts`` hosts in :func:`_lns`'s ``searched``."""
    searched["count"] += 1
    searched["largest_hosts"] = max(searched["largest_hosts"], hosts)


def _within_task_cap(problem: PlacementProblem, assign: np.ndarray, hosts: np.ndarray, max_tasks: int) -> tuple[np.ndarray, bool]:
    """``hosts`` (in order, repeats dropped) each taken while the movable tasks of those taken stay at most ``max_tasks``
    (a host that would pass it is left out, and later ones are still tried), sorted; and whether any were left out."""
    movable = np.bincount(assign[problem.movable], minlength=problem.n_hosts)
    ordered = hosts[np.sort(np.unique(hosts, return_index=True)[1])]
    taken, total = [], 0
    for h in ordered.tolist():  # a neighbourhood's hosts: a few hundred at most
        if total + movable[h] <= max_tasks:
            taken.append(h)
            total += movable[h]
    return np.sort(np.array(taken, dtype=np.int64)), len(taken) < len(ordered)


def stranded_room_hosts(state: PlacementState, open_hosts: np.ndarray, max_tasks: int, rng: np.random.Generator) -> np.ndarray:
    """Open hosts of two or more architectures drawn at random among those of ``open_hosts`` (two to all of them; one
    where only one is open), each taken by :func:`most_stranded_room` within an equal share of ``max_tasks`` tasks.

    Room left in one dimension only is stranded: no task fits it while the host is full in
    another. Hosts with CPU to spare and hosts with memory to spare, re-solved together, can
    trade tasks until some of them empty: on the known-optimum family (5,000 tasks, 16 hosts of
    room left, 3 of it usable where it lies) one such neighbourhood of ~50 hosts freed 5-7 hosts,
    where the neighbourhoods of seeds and the most summed room had stopped gaining. Hosts of several
    architectures can also trade tasks across architectures. On the paper-scale P99 plan of 37,000
    tasks, 16 such neighbourhoods of 5 s, each from the same plan, gained 19 and 30 cost units with one
    architecture, 68 and 86 with two, 95 and 107 with three, 127 with four and 147 with all six; the
    300-s full repack ended at TCO 12,915 and 12,911 where one architecture's had ended at 12,946-12,967
    (benchmarks/RESULTS.md). Two or more at random, not always all: from one plan, 30 neighbourhoods of all
    six gained 64.5 cost units, of two to six at random 72.6 (all six draw the same hosts each time, but for
    what earlier ones changed).
    """
    arch = state.p.host_arch[open_hosts]
    present = np.unique(arch)
    how_many = int(rng.integers(2, len(present) + 1)) if len(present) > 1 else 1
    drawn = rng.choice(present, size=how_many, replace=False)
    share = max_tasks // how_many
    return np.concatenate([most_stranded_room(state, open_hosts[arch == a], share) for a in drawn])


def most_stranded_room(state: PlacementState, hosts: np.ndarray, max_tasks: int) -> np.ndarray:
    """``hosts`` taken in turn by the most room in each dimension (a share of capacity), as many as hold at most
    ``max_tasks`` tasks (but at least two, where there are two).

    The most room in any one dimension picked, on a P99 fleet of 5,000 tasks, the same Skylake14
    hosts every time, for network no task needs, and freed nothing; ten neighbourhoods of one
    architecture each, taken in turn by dimension, freed 22 of 1,546 cost units (benchmarks/RESULTS.md).
    """
    room = state.room_share(hosts)
    dims = room.shape[1]
    # The k-th most room in dimension d comes at turn k·D + d; a host is taken at its first turn.
    rank = np.argsort(np.argsort(-room, axis=0, kind="stable"), axis=0, kind="stable")
    order = hosts[np.argsort((rank * dims + np.arange(dims)).min(axis=1), kind="stable")]
    within = np.cumsum(state.count[order]) <= max_tasks
    return order[: max(int(within.sum()), 2)]
