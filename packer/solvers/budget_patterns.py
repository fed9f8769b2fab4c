"""What a move budget can free: column generation over host patterns, each host priced with what it holds today.

A full repack's column generation (:mod:`packer.solvers.patterns`) bounds every placement, but
says nothing about which hosts a budget of moves can empty. Here a host keeps what it holds
today: hosts collapse into *groups* of one architecture, room, primary cost and, per task
class (:func:`~packer.solvers.patterns.task_classes`), one count of the movable tasks they hold
today (``held``). A *pattern* of a group is what one of its hosts holds after the plan, per
class as *stays* ``s_c ≤ held_c`` (tasks it holds today that stay: a class's tasks are alike)
and *arrivals* ``r_c`` (tasks from other hosts, each one move). Pinned tasks stay where they
are: they take their room, and their host stays open. The master LP:

    min  Σ_p c_g(p) λ_p
    s.t. Σ_p (s_cp + r_cp) λ_p ≥ n_c      ∀ class c     (dual π_c ≥ 0)
         Σ_{p of group g} λ_p ≤ N_g      ∀ group g     (dual σ_g ≤ 0)
         Σ_p (Σ_c r_cp) λ_p ≤ B          the budget   (dual −μ, μ ≥ 0)

``c_g`` is the group's primary cost (0 where a pinned task keeps the host open: a constant),
and a host left out holds nothing. Every placement within the budget is an integer point of
it, so for any π ≥ 0 and μ ≥ 0

    L(π, μ) = constant + Σ_c π_c n_c − μ B + Σ_g N_g · min(0, c_g − v̄_g)

bounds the primary cost of every placement within the budget, with ``v̄_g`` an upper bound on
``max Σ_c π_c s_c + (π_c − μ) r_c`` over the group's patterns. The bound reported is the best
L seen, so a run stopped at any time still reports a valid one. Pricing a group is a knapsack
of each class twice (stays, at most ``held_c``, and arrivals at a value μ lower): greedily on
each class's demand rounded *up* to the grid (so that its columns fit their real tasks and
serve the packing), from :data:`PARTIAL_GROUPS` groups per iteration on; where the greedy finds
no column, by CP-SAT on demands rounded down (the bound's ``v̄_g``:
:func:`packer.solvers.patterns.price_by_cpsat`), for every group but those whose fractional
knapsack bound (:func:`packer.solvers.patterns.fractional_values`, a valid ``v̄_g``) already
proves that none of its columns prices below 0.

Packing (:func:`budget_packing`): the integer master (CP-SAT, in :data:`PACKING_STAGES`) over the
columns that fit with demands rounded up, those near the LP's optimum first; then each host of
a group takes a pattern chosen for the group, keeps that many of its own tasks, and the tasks
it lets go fill the arrivals elsewhere, each on a host its eligibility admits. The plan is
checked against every rule; None where it breaks one.

On the slack-scarce 1,000-task trace with 400 moves, a full repack's bound says 79 cost units
can be freed and the budget's LP 106.8; this one 78, and its packing frees 78 (the engine alone, 52).
On the 10,000-task one (615 groups) it converges in 20 s (at most 378.3 freeable); its packing frees 378.
"""
from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from ortools.math_opt.python import mathopt
from ortools.sat.python import cp_model

from packer import interrupt
from packer.model.metrics import TOLERANCE, host_loads, initially_overloaded, violations
from packer.model.problem import PlacementProblem
from packer.solvers.bounds import DUALS_ONLY, SolverFailed, solve_incremental, unique_rows
from packer.solvers.clock import SearchClock
from packer.solvers.cpsat import cpsat_solver
from packer.solvers.patterns import (ITERATION_WORK, PACKING_RULES, Classes, fractional_values, greedy_patterns, price_by_cpsat,
                                     task_classes)

log = logging.getLogger(__name__)

#: Most host groups column generation takes on: each is priced at every iteration (slack-scarce 10,000 tasks: 615 groups,
#: 0.2 s of greedy pricing a pass, 1.6 s of exact).
MAX_GROUPS = 1000
#: Coarsest grid (units per largest capacity of a dimension) of rounded classes it takes on. Coarser, the patterns on
#: demands rounded down rarely fit the real tasks, and the LP over the many classes converges slowly; there (p99 limits:
#: grids of 32-512) the engine alone comes near the bound (the 400-task sample, 100 moves: 67 of 70.2 freed, where 48 s
#: of this left the LP at 61 freed and its packing at 9). Limits from requests give grids of 65,536.
MIN_GRID = 4096
#: Work (nominal seconds, :mod:`packer.solvers.clock`) a deterministic run charges per group's greedy pricing (measured
#: 0.18-0.27 ms a group on 34-200 candidate classes).
PRICING_WORK_PER_GROUP = 3e-4
#: Work charged per exact pricing of a group besides CP-SAT's own deterministic time: building and starting the model
#: (measured 2.6 ms a group, of which CP-SAT counts little, on slack-scarce 10,000 tasks).
CPSAT_PRICING_WORK = 2e-3
#: Groups the greedy pricing prices at least per iteration before the master is solved again (where it found a column).
PARTIAL_GROUPS = 200
#: The integer master's runs (:func:`budget_packing`), each while the plan so far is above the bound: whether it is
#: strict (:func:`_integer_master`), the largest reduced cost (primary-cost units, at the last master LP) of a column it
#: takes besides today's, and its share of the time left. Few columns first: on slack-scarce 10,000 tasks (9 s, 14,000
#: columns) all of them gave CP-SAT plans freeing 164-376 from one run to the next, those within 0.1 of the LP's
#: optimum 376 every time; on paper-shaped 1,000 tasks s8 180 in 1.1 s against 174 in 9 s within 0.5.
PACKING_STAGES = ((True, 0.1, 0.3), (True, 1.0, 0.6), (False, math.inf, 1.0))
#: Most seconds of CP-SAT per group when the greedy pricing finds no column.
PRICING_SECONDS = 1.0


@dataclass
class HostGroups:
    """Hosts grouped as the module doc says. Rooms in grid units of the classes: ``room`` (G, D) the bound's (a host over
    capacity today may keep its load), ``fit_room`` (G, D) its capacity's (what a pattern with arrivals must fit);
    ``cost`` (G,) primary cost, 0 where a pinned task keeps the hosts open; ``held`` (G, C) movable tasks per class today."""

    arch: np.ndarray
    room: np.ndarray
    fit_room: np.ndarray
    cost: np.ndarray
    held: np.ndarray
    hosts: list[np.ndarray]
    constant: float  # primary cost of the hosts pinned tasks keep open

    @property
    def size(self) -> np.ndarray:
        return np.array([len(h) for h in self.hosts])

    @property
    def whole_costs(self) -> bool:
        """Whether every group's cost is a whole number: then so is a plan's, and a bound on it rounds up."""
        return bool(np.array_equal(self.cost, np.round(self.cost)))


@dataclass
class BudgetPatterns:
    """What :func:`budget_column_generation` found. ``bound``, ``lp``: primary-cost units (``bound`` −inf where none);
    ``columns``: each one's group (P,) and its stays and arrivals per class (P, 2C)."""

    bound: float
    lp: float
    converged: bool
    iterations: int
    classes: Classes
    groups: HostGroups
    column_group: np.ndarray
    columns: np.ndarray
    reduced_cost: np.ndarray  # (P,) at the last master LP's duals (below 0 for columns added after it)
    wall_s: float
    work: float
    capped: bool

    @property
    def detail(self) -> dict:
        return {"budget_pattern_bound": self.bound if math.isfinite(self.bound) else None,
                "budget_pattern_lp": self.lp if math.isfinite(self.lp) else None,
                "budget_pattern_converged": self.converged, "budget_pattern_iterations": self.iterations,
                "budget_pattern_columns": len(self.columns), "budget_pattern_groups": len(self.groups.cost),
                "budget_pattern_wall_s": round(self.wall_s, 2)}


def applies(problem: PlacementProblem) -> bool:
    """Whether :func:`budget_column_generation` applies: a move budget short of the movable tasks (else a full repack's
    column generation does), some movable task."""
    movable = int(problem.movable.sum())
    return problem.max_moves is not None and 0 < problem.max_moves < movable


def host_groups(problem: PlacementProblem, classes: Classes) -> HostGroups:
    """Every host in its group (module doc)."""
    p = problem
    movable = p.movable
    pinned_load = np.zeros_like(p.capacity)
    np.add.at(pinned_load, p.current[~movable], p.demand[~movable])
    pinned = np.bincount(p.current[~movable], minlength=p.n_hosts) > 0
    loads = host_loads(p, p.current)
    raised = np.maximum(p.capacity, np.where(initially_overloaded(p)[:, None], loads, 0.0))
    # A valid placement may exceed capacity by TOLERANCE: so may the relaxation.
    room = np.floor(np.clip(raised + TOLERANCE - pinned_load, 0.0, None) / classes.unit).astype(np.int64)
    fit_room = np.floor(np.clip(p.capacity + TOLERANCE - pinned_load, 0.0, None) / classes.unit).astype(np.int64)
    held = np.zeros((p.n_hosts, len(classes.count)), dtype=np.int64)
    np.add.at(held, (p.current[movable], classes.of_task[movable]), 1)
    cost = np.where(pinned, 0.0, p.primary_cost)
    _, cost_code = np.unique(cost, return_inverse=True)
    rows, inverse = unique_rows(np.column_stack([p.host_arch, cost_code.ravel(), room, fit_room, held]))
    first = np.unique(inverse, return_index=True)[1]
    order = np.argsort(inverse, kind="stable")
    D = room.shape[1]
    return HostGroups(arch=rows[:, 0], room=rows[:, 2:2 + D], fit_room=rows[:, 2 + D:2 + 2 * D], cost=cost[first],
                      held=rows[:, 2 + 2 * D:], hosts=np.split(order, np.cumsum(np.bincount(inverse))[:-1]),
                      constant=float(p.primary_cost[pinned].sum()))


class _Master:
    """The master LP of the module doc, one variable per column."""

    def __init__(self, classes: Classes, groups: HostGroups, budget: int):
        self.model = mathopt.Model(name="budget patterns")
        self.C = len(classes.count)
        self.cost = groups.cost
        self.cover = [self.model.add_linear_constraint(lb=float(n)) for n in classes.count]
        self.limit = [self.model.add_linear_constraint(ub=float(n)) for n in groups.size]
        self.budget = self.model.add_linear_constraint(ub=float(budget))
        self.column_group: list[int] = []
        self.variables: list = []
        self.columns: list[np.ndarray] = []
        self._seen: set[tuple[int, bytes]] = set()

    def add(self, g: int, pattern: np.ndarray) -> bool:
        """Add ``pattern`` (stays, then arrivals, per class) of group ``g``; False if the master has it already."""
        key = (g, pattern.tobytes())
        if key in self._seen:
            return False
        self._seen.add(key)
        var = self.model.add_variable(lb=0.0)
        self.model.objective.set_linear_coefficient(var, float(self.cost[g]))
        self.limit[g].set_coefficient(var, 1.0)
        total = pattern[:self.C] + pattern[self.C:]
        for c in np.flatnonzero(total):
            self.cover[c].set_coefficient(var, float(total[c]))
        if pattern[self.C:].any():
            self.budget.set_coefficient(var, float(pattern[self.C:].sum()))
        self.column_group.append(g)
        self.columns.append(pattern)
        self.variables.append(var)
        return True


def budget_column_generation(problem: PlacementProblem, time_limit: float, deterministic: bool = False,
                             max_groups: int = MAX_GROUPS, started: Callable[[], None] | None = None) -> BudgetPatterns | None:
    """Run column generation (module doc) for at most ``time_limit`` seconds (of work where ``deterministic``:
    :mod:`packer.solvers.clock`); None where it does not apply (:func:`applies`), the classes' grid is coarser than
    :data:`MIN_GRID` or the hosts form more than ``max_groups`` groups. ``started`` is called once it does apply (a
    caller's progress line)."""
    if not applies(problem):
        return None
    clock = SearchClock(time_limit, deterministic)
    classes = task_classes(problem)
    if not classes.exact and classes.grid < MIN_GRID:
        log.info("move budget's column generation skipped: demands rounded to 1/%d of the largest capacity", classes.grid)
        return None
    groups = host_groups(problem, classes)
    G, C = len(groups.cost), len(classes.count)
    if G > max_groups:
        log.info("move budget's column generation skipped: %d host groups (more than %d)", G, max_groups)
        return None
    if started is not None:
        started()
    master = _Master(classes, groups, int(problem.max_moves))
    for g in np.flatnonzero(groups.held.any(axis=1)):  # today's placement: a feasible master
        master.add(int(g), np.concatenate([groups.held[g], np.zeros(C, dtype=np.int64)]))
    arrivals_fit = classes.allowed[:, groups.arch] & (classes.k[:, None, :] <= groups.room[None, :, :]).all(axis=2)  # (C, G)
    items = dataclasses.replace(classes, k=np.vstack([classes.k, classes.k]))
    # The greedy's columns, on demands rounded up, are the packing's (on a coarse grid, few of those on demands rounded down
    # fit their hosts: the 400-task sample, 100 moves, 137 of 12,416); CP-SAT's, on demands rounded down, keep the bound valid.
    up = _demand_rounded_up(problem, classes)
    items_up = dataclasses.replace(classes, k=np.vstack([up, up]))
    counts = np.hstack([groups.held, np.where(arrivals_fit.T, classes.count - groups.held, 0)])  # (G, 2C): 0 where not a candidate
    candidates = [np.flatnonzero(row) for row in counts]
    last: list[np.ndarray | None] = [None] * G
    start = 0  # the group the greedy pricing starts from
    size, budget = groups.size, int(problem.max_moves)
    whole = groups.whole_costs
    best, lp_value, converged, iterations = -np.inf, np.inf, False, 0
    price = value = None  # at the last master LP: a column's reduced cost is its price less its value
    lp = mathopt.IncrementalSolver(master.model, mathopt.SolverType.GLOP)
    while not clock.expired() and not interrupt.stop_requested():
        iterations += 1
        clock.spend(ITERATION_WORK)
        try:
            result = solve_incremental(lp, DUALS_ONLY)
        except SolverFailed as error:
            log.warning("move budget's pattern master LP failed (%s); column generation stops here", error)
            break
        if result.termination.reason != mathopt.TerminationReason.OPTIMAL:
            break
        lp_value = float(result.objective_value()) + groups.constant
        pi = np.clip(np.asarray(result.dual_values(master.cover), dtype=float), 0.0, None)
        sigma = np.clip(np.asarray(result.dual_values(master.limit), dtype=float), None, 0.0)
        mu = max(0.0, -float(result.dual_values(master.budget)))
        value = np.concatenate([pi, pi - mu])
        upper = fractional_values(value, items.k, counts, groups.room)
        price = groups.cost - sigma

        def add(g: int, found: list[np.ndarray]) -> int:
            return sum(master.add(g, pattern) for pattern in found if price[g] - float(value @ pattern) < -1e-9 * max(1.0, price[g]))

        added, proven = 0, True
        # Greedily, from where the last iteration stopped, until some column is found past PARTIAL_GROUPS groups: the
        # master is solved again sooner.
        for priced, g in enumerate(np.roll(np.arange(G), -start).tolist(), 1):
            clock.spend(PRICING_WORK_PER_GROUP)
            added += add(g, greedy_patterns(value, dataclasses.replace(items_up, count=counts[g]), groups.fit_room[g], candidates[g]))
            if added and priced >= PARTIAL_GROUPS:
                start = (g + 1) % G
                break
        if not added:  # exactly, to find the columns the greedy missed or prove there are none
            for g in np.flatnonzero(price - upper < -1e-9 * np.maximum(1.0, price)).tolist():  # elsewhere none can price below 0
                if clock.expired() or interrupt.stop_requested():
                    proven = False
                    break
                found, ub, solved, work = price_by_cpsat(value, dataclasses.replace(items, count=counts[g]), groups.room[g], candidates[g],
                                                 min(PRICING_SECONDS, clock.remaining()), last[g], deterministic)
                clock.spend(work + CPSAT_PRICING_WORK)
                upper[g] = min(upper[g], ub)
                proven &= solved
                last[g] = found[-1] if found else last[g]
                added += add(g, found)
        best = max(best, groups.constant + float(pi @ classes.count) - mu * budget
                   + float((size * np.minimum(0.0, groups.cost - upper)).sum()))
        if added == 0:
            converged = proven
            break
        if whole and math.ceil(best - 1e-6) >= math.ceil(lp_value - 1e-6):
            break  # integer costs: the rounded bound cannot rise further
    column_group = np.array(master.column_group, dtype=np.int64)
    columns = np.array(master.columns, dtype=np.int64).reshape(-1, 2 * C)
    return BudgetPatterns(bound=best, lp=lp_value, converged=converged, iterations=iterations, classes=classes, groups=groups,
                          column_group=column_group, columns=columns,
                          reduced_cost=np.zeros(len(columns)) if price is None else price[column_group] - columns @ value,
                          wall_s=clock.wall(), work=clock.work, capped=clock.capped)


def _demand_rounded_up(problem: PlacementProblem, classes: Classes) -> np.ndarray:
    """(C, D) grid units: each class's largest task demand rounded up, so a pattern that fits in them fits its real tasks."""
    movable = np.flatnonzero(problem.movable)
    units = np.ceil(problem.demand[movable] / classes.unit - 1e-9).astype(np.int64)
    up = np.zeros_like(classes.k)
    np.maximum.at(up, classes.of_task[movable], units)
    return up


def budget_packing(problem: PlacementProblem, found: BudgetPatterns, clock: SearchClock, seed: int = 0) -> np.ndarray | None:
    """A placement within the budget from ``found``'s columns (module doc), or None: rules the packing does not honour
    (:data:`~packer.solvers.patterns.PACKING_RULES`), no integer solution within what is left of ``clock`` (charged
    CP-SAT's deterministic time), or a plan that breaks a rule.

    The integer master is solved in stages (:data:`PACKING_STAGES`), each from the plan before, while that stays above
    the bound: as the LP is, each class covered exactly and the budget counting arrivals, over the columns near the LP's
    optimum, then over more; last with every slot optional (:func:`_integer_master`), which combines column
    generation's patterns into plans of fewer moves (they are its LP's, often fuller than a binding budget lets a host
    become) but which CP-SAT searches less well (slack-scarce 1,000 tasks, 400 moves, 9 s: 75 cost units freed, against
    78 the strict one proves optimal in 0.5 s).
    """
    if any(rule.name not in PACKING_RULES for rule in problem.rules) or found.iterations == 0:
        return None
    groups, C = found.groups, len(found.classes.count)
    column_group, columns = found.column_group, found.columns
    total, arrivals = columns[:, :C] + columns[:, C:], columns[:, C:].sum(axis=1)
    up = _demand_rounded_up(problem, found.classes)
    # A host that only keeps some of its own tasks needs no room check: it gains nothing (a host over capacity today may).
    fits = (arrivals == 0) | (total @ up <= groups.fit_room[column_group]).all(axis=1)
    size = groups.size
    today = (arrivals == 0) & (columns[:, :C] == groups.held[column_group]).all(axis=1)
    column_group, columns, today, reduced = column_group[fits], columns[fits], today[fits], found.reduced_cost[fits]
    taken = today * size[column_group]  # today's placement: every group's hosts keep what they hold
    cost = groups.cost[column_group] @ taken
    target = math.ceil(found.bound - 1e-6) if groups.whole_costs else found.bound
    for strict, most, share in PACKING_STAGES:
        if cost <= target + 1e-9 or clock.expired():
            break
        use = today | (reduced <= most)
        part = clock.part(share * clock.remaining())
        solved = _integer_master(problem, found, column_group[use], columns[use], strict, taken[use], part, seed)
        clock.spend(part.work)
        if solved is not None and groups.cost[column_group[use]] @ solved < cost:
            taken = np.zeros_like(taken)
            taken[use] = solved
            cost = groups.cost[column_group] @ taken
    assign = _place_patterns(problem, found, column_group, columns, taken)
    if assign is None:
        return None
    broken = violations(problem, assign)
    if broken:
        log.warning("move budget's pattern packing breaks a rule (%s); not used", "; ".join(broken))
        return None
    return assign


def _integer_master(problem: PlacementProblem, found: BudgetPatterns, column_group: np.ndarray, columns: np.ndarray,
                    strict: bool, hint: np.ndarray, clock: SearchClock, seed: int) -> np.ndarray | None:
    """How many hosts of its group take each column (CP-SAT, hinted with ``hint``, for what is left of ``clock``, charged
    its deterministic time), or None where it found no solution.

    ``strict``: as the LP, each class covered exactly, the budget counting arrivals. Else a column's slots need not all
    be filled (a host holding fewer tasks fits too), so each class is covered at least, and the budget counts the tasks
    that leave: all but the budget's must stay.
    """
    groups, classes, C = found.groups, found.classes, len(found.classes.count)
    size = groups.size
    model = cp_model.CpModel()
    x = [model.new_int_var(0, int(size[g]), "") for g in column_group.tolist()]
    for g in np.unique(column_group).tolist():
        model.add(sum(x[j] for j in np.flatnonzero(column_group == g)) <= int(size[g]))
    total = columns[:, :C] + columns[:, C:]
    for c in range(C):
        users = np.flatnonzero(total[:, c])
        covered = cp_model.LinearExpr.weighted_sum([x[j] for j in users], total[users, c].tolist())
        model.add(covered == int(classes.count[c]) if strict else covered >= int(classes.count[c]))
    if strict:
        arrivals = columns[:, C:].sum(axis=1)
        moving = np.flatnonzero(arrivals)
        model.add(cp_model.LinearExpr.weighted_sum([x[j] for j in moving], arrivals[moving].tolist()) <= int(problem.max_moves))
    else:
        staying = columns[:, :C].sum(axis=1)
        keep = np.flatnonzero(staying)
        model.add(cp_model.LinearExpr.weighted_sum([x[j] for j in keep], staying[keep].tolist())
                  >= int(classes.count.sum()) - int(problem.max_moves))
    scale = 1 if groups.whole_costs else 1000
    model.minimize(cp_model.LinearExpr.weighted_sum(x, np.round(groups.cost[column_group] * scale).astype(np.int64).tolist()))
    for var, value in zip(x, hint.tolist()):
        model.add_hint(var, value)
    solver = cpsat_solver(seed, max(0.1, clock.remaining()), deterministic=clock.deterministic)
    status = interrupt.run_stoppable(lambda: solver.solve(model), solver.stop_search)
    clock.spend(solver.deterministic_time)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return np.array([solver.value(v) for v in x], dtype=np.int64)


def _place_patterns(problem: PlacementProblem, found: BudgetPatterns, column_group: np.ndarray, columns: np.ndarray,
                    taken: np.ndarray) -> np.ndarray | None:
    """The placement in which the hosts of each group take ``taken`` of each of its ``columns`` (the rest hold nothing
    movable): stays are tasks the host holds today, the others go to arrival slots (as many as they need), each to a
    host it is eligible for. None where a task finds no slot."""
    p, groups, classes = problem, found.groups, found.classes
    C = len(classes.count)
    stays, arrive = np.zeros((p.n_hosts, C), dtype=np.int64), np.zeros((p.n_hosts, C), dtype=np.int64)
    for g in range(len(groups.cost)):
        chosen = np.flatnonzero((column_group == g) & (taken > 0))
        hosts = groups.hosts[g][:int(taken[chosen].sum())]
        pattern = columns[np.repeat(chosen, taken[chosen])]
        stays[hosts], arrive[hosts] = pattern[:, :C], pattern[:, C:]
    movable = np.flatnonzero(p.movable)
    host, cls = p.current[movable], classes.of_task[movable]
    # Of a host's tasks of a class, those eligible on fewest architectures stay: the others find arrivals more easily.
    reach = p.eligible[movable].sum(axis=1)
    order = np.lexsort((reach, cls, host))
    key = host[order] * C + cls[order]
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - np.searchsorted(key, key)
    leaving = movable[rank >= stays[host, cls]]
    assign = p.current.copy()
    # Slots on hosts that keep a task of their own first: a host whose slots stay empty closes, and is left one.
    hosts = np.argsort(~stays.any(axis=1), kind="stable")
    for c in np.unique(classes.of_task[leaving]).tolist():
        tasks = leaving[classes.of_task[leaving] == c]
        slots = np.repeat(hosts, arrive[hosts, c])
        free = np.ones(len(tasks), dtype=bool)
        by_reach = np.argsort(p.eligible[tasks].sum(axis=1), kind="stable")
        slot_arch = p.host_arch[slots]
        # Architectures with the fewest eligible tasks first, each taking the tasks eligible on fewest architectures.
        archs = np.unique(slot_arch)
        for a in archs[np.argsort([p.eligible[tasks, a].sum() for a in archs], kind="stable")].tolist():
            on_a = slots[slot_arch == a]
            able = by_reach[free[by_reach] & p.eligible[tasks[by_reach], a]][:len(on_a)]
            assign[tasks[able]] = on_a[:len(able)]
            free[able] = False
        if free.any():
            return None
    return assign
