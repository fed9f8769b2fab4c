"""Pattern-based column generation (Gilmore–Gomory) for full repacks: a lower bound, and packings.

The tasks collapse into *classes*: tasks with one eligibility signature and one demand
vector on a grid (``unit_d`` = the largest capacity in dimension d / ``grid``). The
grid is the finest of :data:`GRIDS` that leaves at most ``max_classes`` classes; a
class's demand is its tasks' demand rounded *down* to the grid, so every statement
below about the classes relaxes the real tasks. Where every demand is a whole multiple
of a unit no finer than the finest grid (whole numbers, a few decimals:
:func:`exact_units`) the classes use that unit and nothing is rounded. Hosts collapse into *types*
(architecture, capacity, primary cost). A *pattern* of a type is how many tasks of each
class one host of the type holds. The master LP:

    min  Σ_p c_type(p) λ_p
    s.t. Σ_p a_cp λ_p + Σ_a y_ac ≥ n_c       ∀ class c        (dual π_c ≥ 0)
         Σ_{p of type t} λ_p ≤ N_t          ∀ type t         (dual μ_t ≤ 0)
         Σ_c k_cd y_ac ≤ R_ad               ∀ arch a, dim d  (room left on hosts with pinned tasks)
         λ, y ≥ 0

Hosts that hold a pinned task stay open (their cost is a constant) and offer their
room only in aggregate per architecture (``y``), a further relaxation. Pricing, per
type, is a multi-dimensional knapsack ``max Σ π_c a_c s.t. Σ a_c k_cd ≤ K_d``, solved by
dynamic programming over a table of the room's cells where that is small
(:func:`_price_by_table`: then every iteration prices exactly), else greedily and, when the greedy finds no column, by
CP-SAT. At every iteration, for the duals π of that iteration,

    L(π) = constant + Σ_c π_c n_c + Σ_t N_t · min(0, c_t − v̄_t) − Σ_a w̄_a

is a lower bound on the primary cost of every valid placement (Lagrangian relaxation
of the class rows), with v̄_t an upper bound on type t's knapsack value (CP-SAT's own
bound when a pricing run stops early) and w̄_a one on the pinned room's value (the
smallest single-dimension fractional knapsack). The bound reported is the best L(π)
seen, so a run stopped at any time still reports a valid bound.

Packings (:func:`pattern_packing`): the integer master over the columns found
(CP-SAT), then real tasks into the chosen patterns' slots with exact capacity and
eligibility checks; the few that do not fit (grid rounding) are placed by best fit.
Where costs are whole, classes exact and column generation converged, a master that stays
above the rounded-up bound is followed by a *dive* (:func:`dive`): columns rounded up one at
a time, the master priced again after each, which finds the patterns near the bound the
integer master lacked; then the integer master over them all. Where that stays above the bound,
a second integer program over *full* patterns (:func:`full_patterns`, :func:`full_packing`)
packs as many tasks as pays into hosts they fill (HiGHS), and the rest by best fit.

Supported: capacity, eligibility (a task may also stay on its current host), pins,
any goal whose primary cost is per open host (``tco``, ``hosts``). Not modelled:
sensitivity, spread, anti-affinity, relative-performance and at-risk guards — the
bound relaxes them (it stays valid), the packing does not honour them, so
:func:`pattern_packing` is not used when the problem has such rules. A host over
capacity today may keep its tasks: its room in the bound covers its load, and the
packing puts on it only tasks it holds today.
"""
from __future__ import annotations

import bisect
import functools
import itertools
import logging
import math
from dataclasses import dataclass, field

import numpy as np
from ortools.math_opt.python import mathopt
from ortools.sat.python import cp_model

from packer import interrupt
from packer.model.metrics import TOLERANCE, fits_within, host_loads, initially_overloaded, leftover_score
from packer.model.problem import PlacementProblem
from packer.solvers.bounds import DUALS_ONLY, SolverFailed, minimize, solve_incremental
from packer.solvers.clock import WALL_CAP, SearchClock
from packer.solvers.cpsat import cpsat_solver

log = logging.getLogger(__name__)

#: Grids tried, finest first (units per largest capacity of a dimension).
GRIDS = (1 << 16, 1 << 14, 1 << 12, 2048, 1024, 512, 256, 128, 64, 32)
#: Rules the packing honours (others make :func:`pattern_packing` decline).
PACKING_RULES = frozenset({"capacity", "eligibility", "pins", "move budget"})
_PRICING_SCALE = 1 << 20
#: Work (nominal seconds, :mod:`packer.solvers.clock`) a deterministic run charges per iteration for the master LP and greedy pricing.
ITERATION_WORK = 0.1
#: Work (nominal seconds) per task :attr:`PatternResult.work` adds for what the iterations do not count: classes, host
#: types and first-fit columns (measured: ~0.15 s at 600 tasks, ~3 s at 37,000).
SETUP_WORK_PER_TASK = 1e-4
#: Branch-and-bound nodes of the penalized full-pattern program (HiGHS) in a deterministic run (instead of its time limit).
DETERMINISTIC_MASTER_NODES = 2000
#: How far (in units) a demand may be from a whole multiple of a unit and count as one (:func:`exact_units`).
EXACT_UNIT_TOLERANCE = 1e-7
#: Most work (cells of the table × items) :func:`_price_by_table` takes on; larger knapsacks go to CP-SAT.
TABLE_PRICING_WORK = 4_000_000
#: Nominal seconds a deterministic clock is charged per unit of that work.
TABLE_WORK_SECONDS = 2e-9
#: Most patterns per host type and iteration :func:`_table_patterns` prices.
TABLE_PATTERNS = 20
#: Share of :func:`pattern_packing`'s time for the packing likelier to reach the bound (the other gets the rest).
FIRST_METHOD_SHARE = 0.75
#: Most share of the demand a grid may round away for :func:`pattern_packing` to pack from its classes.
PACKING_ROUNDING = 0.01
#: Share of :func:`pattern_packing`'s time for the integer master where a dive (:func:`_dive_packing`) may follow it.
MASTER_BEFORE_DIVE_SHARE = 0.3
#: Share of :func:`_dive_packing`'s time for the dive (the integer master over its columns gets the rest).
DIVE_SHARE = 0.6
#: Fractional columns :func:`dive` tries to round up at each step, largest first, before it stops.
DIVE_CANDIDATES = 8
#: Most seconds of CP-SAT per host type when :func:`dive` prices a type too large for the table.
DIVE_PRICING_SECONDS = 1.0
#: How far from a whole number a column's value may be and count as one.
DIVE_INTEGRALITY = 1e-6


@dataclass
class Classes:
    """Tasks grouped as the module doc says (or on exact units). ``k`` (C, D) grid units; ``count`` (C,); ``allowed`` (C, A); ``of_task`` (T,), -1 for pinned."""

    unit: np.ndarray
    k: np.ndarray
    count: np.ndarray
    allowed: np.ndarray
    of_task: np.ndarray
    grid: int
    exact: bool = False  # demands are whole multiples of ``unit`` (:func:`exact_units`): ``k`` is not rounded


@dataclass
class HostTypes:
    """Unpinned hosts by (architecture, capacity, cost). ``room`` (Ty, D) grid units; ``hosts`` lists each type's host indices."""

    arch: np.ndarray
    room: np.ndarray
    cost: np.ndarray
    hosts: list[np.ndarray]
    pinned_room: np.ndarray  # (A, D) grid units left on hosts holding pinned tasks
    constant: float  # primary cost of hosts holding pinned tasks

    @property
    def whole_costs(self) -> bool:
        """Whether every type's primary cost is a whole number: then so is a packing's, and a bound on it rounds up."""
        return bool(np.array_equal(self.cost, np.round(self.cost)))

    def fits(self, classes: Classes) -> np.ndarray:
        """(C, Ty) whether a task of each class may go on an empty host of each type (eligible, within its room)."""
        return classes.allowed[:, self.arch] & (classes.k[:, None, :] <= self.room[None, :, :]).all(axis=2)


@dataclass
class PatternResult:
    """What :func:`column_generation` found. ``bound``: best L(π) (primary-cost units); ``lp``: the last master LP value."""

    bound: float
    lp: float
    converged: bool
    iterations: int
    classes: Classes
    types: HostTypes
    master: "Master"
    wall_s: float = 0.0
    gave_up: bool = False  # stopped early, the LP still far above ``give_up_above``: no packing from these columns
    useless: bool = False  # stopped early, the LP of rounded classes at or below ``useless_below``: no better bound, no packing
    capped: bool = False  # a deterministic run cut by its wall-clock cap (packer.solvers.clock): another run may differ
    work: float = 0.0  # nominal seconds of work (:mod:`packer.solvers.clock`): its iterations' and its setup's

    @property
    def provable(self) -> bool:
        """Whether a packing of these columns may meet the rounded-up bound and so prove itself optimal: column generation
        converged on exact classes (nothing rounded away) with whole costs. Only then is a dive (:func:`dive`) tried."""
        return self.converged and self.classes.exact and self.types.whole_costs and math.isfinite(self.bound)

    @property
    def detail(self) -> dict:
        def finite(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {"pattern_bound": finite(self.bound), "pattern_lp": finite(self.lp), "pattern_converged": self.converged,
                "pattern_iterations": self.iterations, "pattern_columns": len(self.master.columns), "pattern_gave_up": self.gave_up,
                "pattern_useless": self.useless,
                "pattern_classes": len(self.classes.count), "pattern_grid": self.classes.grid, "pattern_wall_s": round(self.wall_s, 2)}


def supported(problem: PlacementProblem) -> bool:
    """Whether :func:`column_generation` applies: a full repack, or a budget covering every movable task."""
    unbound = problem.max_moves is None or problem.max_moves >= int(problem.movable.sum())
    return unbound and int(problem.movable.sum()) > 0


def task_classes(problem: PlacementProblem, max_classes: int = 300) -> Classes:
    """The movable tasks' classes: on exact units (:func:`exact_units`) where the demands have them and
    give at most ``max_classes`` classes, else on the finest grid of :data:`GRIDS` that does (the coarsest
    where none does)."""
    movable = np.flatnonzero(problem.movable)
    signature = problem.eligible[movable].copy()
    signature[np.arange(len(movable)), problem.host_arch[problem.current[movable]]] = True  # it may always stay
    top = np.maximum(problem.capacity.max(axis=0), 1e-300)
    demand = problem.demand[movable]
    exact = exact_units(demand, top)
    units = ([] if exact is None else [exact]) + [top / grid for grid in GRIDS]

    def classes_on(unit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(unit, distinct rows, each task's row, tasks per row)."""
        # Exact units: the nearest whole number (it is one, to within EXACT_UNIT_TOLERANCE); a grid: rounded down.
        k = (np.rint if unit is exact else np.floor)(demand / unit).astype(np.int64)
        return (unit, *_unique_rows(np.hstack([signature, k])))

    found = classes_on(units[0])
    if len(found[1]) > max_classes:
        # Each grid halves the previous one, so a coarser grid never gives more classes: bisect for the finest that
        # gives at most max_classes (at 37,000 tasks, trying all ten took a second); the coarsest where none does.
        on_grid = functools.cache(lambda i: classes_on(units[i]))  # the grid found was tried on the way, most often
        finest = 1 + bisect.bisect_left(range(1, len(units) - 1), True, key=lambda i: len(on_grid(i)[1]) <= max_classes)
        found = on_grid(finest)
    unit, rows, inverse, count = found
    A = signature.shape[1]
    of_task = np.full(problem.n_tasks, -1, dtype=np.int64)
    of_task[movable] = inverse.ravel()
    return Classes(unit=unit, k=rows[:, A:], count=count, allowed=rows[:, :A].astype(bool), of_task=of_task,
                   grid=int(np.round(top / unit).max()), exact=unit is exact)


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_inverse=True, return_counts=True)`` for (n, m) non-negative integers.

    Where the columns' ranges fit in 63 bits, each row is packed into one int64 key, the
    first column highest, so that the keys sort as the rows do: the same result, about
    ten times faster than NumPy's row-wise unique at 37,000 rows.
    """
    widths = [int(top).bit_length() for top in rows.max(axis=0).tolist()] if len(rows) else []
    if not len(rows) or rows.min() < 0 or sum(widths) > 63:
        return np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    shifts = np.cumsum(widths[::-1])[::-1] - widths
    key = (rows << shifts.astype(np.int64)).sum(axis=1)
    _, first, inverse, count = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    return rows[first], inverse, count


def rounded_share(problem: PlacementProblem, classes: Classes) -> float:
    """The largest share of the movable tasks' total demand in a dimension that the classes' grid rounds away (0 on exact units)."""
    movable = np.flatnonzero(problem.movable)
    total = problem.demand[movable].sum(axis=0)
    kept = (classes.k[classes.of_task[movable]] * classes.unit).sum(axis=0)
    return float(np.max(1.0 - kept[total > 0] / total[total > 0], initial=0.0))


def exact_units(demand: np.ndarray, top: np.ndarray) -> np.ndarray | None:
    """Per dimension, the largest unit every demand (T, D) is a whole multiple of, if one is at least ``top`` / GRIDS[0]; else None.

    Demands given in whole numbers or a few decimals (Falkenauer's bins, millicores, MiB)
    then form classes without rounding, on a grid coarse enough for :func:`_price_by_table`.
    A multiple within :data:`EXACT_UNIT_TOLERANCE` of a unit counts as whole: rounding it to
    the nearest unit errs by far less than the capacity check's tolerance over any host.
    """
    units = np.empty(demand.shape[1])
    for d in range(demand.shape[1]):
        values = np.abs(demand[:, d])
        units[d] = top[d]
        if not values.any():
            continue
        for decimals in range(7):
            scaled = values * 10.0 ** decimals
            whole = np.rint(scaled)
            if np.abs(scaled - whole).max() <= EXACT_UNIT_TOLERANCE and whole.max() < 2 ** 53:
                units[d] = np.gcd.reduce(whole[whole > 0].astype(np.int64)) / 10.0 ** decimals
                break
        else:
            return None
    return units if (top / units <= GRIDS[0]).all() else None


def host_types(problem: PlacementProblem, classes: Classes) -> HostTypes:
    """Unpinned hosts grouped into types; the room and cost of the hosts holding pinned tasks."""
    pinned = ~problem.movable
    pinned_host = np.bincount(problem.current[pinned], minlength=problem.n_hosts) > 0
    # A host over capacity today may keep (part of) its load: its room covers that load.
    loads = host_loads(problem, problem.current)
    raised = np.maximum(problem.capacity, np.where(initially_overloaded(problem)[:, None], loads, 0.0))
    # A valid placement may exceed capacity by TOLERANCE: so may the relaxation.
    room = np.floor((raised + TOLERANCE) / classes.unit).astype(np.int64)
    free = np.flatnonzero(~pinned_host)
    key = np.column_stack([problem.host_arch[free], room[free], problem.primary_cost[free]])
    rows, inverse = np.unique(key, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    pinned_load = np.zeros_like(problem.capacity)
    np.add.at(pinned_load, problem.current[pinned], problem.demand[pinned])
    pinned_room = np.zeros((len(problem.arch_names), len(problem.dims)))
    np.add.at(pinned_room, problem.host_arch[pinned_host], np.clip(raised + TOLERANCE - pinned_load, 0, None)[pinned_host])
    return HostTypes(arch=rows[:, 0].astype(np.int64), room=rows[:, 1:-1].astype(np.int64), cost=rows[:, -1].astype(float),
                     hosts=[free[inverse == i] for i in range(len(rows))],
                     pinned_room=np.floor(pinned_room / classes.unit),
                     constant=float(problem.primary_cost[pinned_host].sum()))


def fractional_value(pi: np.ndarray, k: np.ndarray, count: np.ndarray, room: np.ndarray) -> float:
    """An upper bound on ``max Σ π_c a_c`` s.t. ``Σ a_c k_cd ≤ room_d``, ``0 ≤ a_c ≤ count_c``: :func:`fractional_values`
    of one knapsack."""
    return float(fractional_values(pi, k, count[None, :], room[None, :])[0])


def fractional_values(pi: np.ndarray, k: np.ndarray, count: np.ndarray, room: np.ndarray) -> np.ndarray:
    """Per row of ``count`` (H, C) and ``room`` (H, D), an upper bound on ``max Σ π_c a_c`` s.t. ``Σ a_c k_cd ≤ room_d``,
    ``0 ≤ a_c ≤ count_c``: the smallest one-dimension fractional knapsack. A class of negative value is left out."""
    rows = np.arange(len(count))
    count = count.astype(float)
    best = np.full(len(count), np.inf)
    for d in range(k.shape[1]):
        size = k[:, d].astype(float)
        free = size == 0
        total = count[:, free] @ np.clip(pi[free], 0.0, None)
        order = np.flatnonzero(~free & (pi > 0))
        order = order[np.argsort(-pi[order] / size[order], kind="stable")]
        # Greedy by value per unit is the fractional knapsack's optimum: whole items while they fit, then a fraction.
        filled = np.cumsum(np.hstack([np.zeros((len(count), 1)), count[:, order] * size[order]]), axis=1)
        gained = np.cumsum(np.hstack([np.zeros((len(count), 1)), count[:, order] * pi[order]]), axis=1)
        whole = (filled[:, 1:] <= room[:, d:d + 1]).sum(axis=1)
        total += gained[rows, whole]
        if len(order):
            cut = order[np.minimum(whole, len(order) - 1)]  # the item taken in part, where one is
            total += np.where(whole < len(order), (room[:, d] - filled[rows, whole]) / size[cut] * pi[cut], 0.0)
        best = np.minimum(best, total)
    return best


def greedy_patterns(pi: np.ndarray, classes: Classes, room: np.ndarray, candidates: np.ndarray) -> list[np.ndarray]:
    """Patterns built greedily by value per unit of each dimension and of the tightest one (cheap pricing): in that order,
    each class takes as many of its tasks as fit in what is left."""
    candidates = candidates[pi[candidates] > 1e-12]
    if len(candidates) == 0:
        return []
    k = classes.k[candidates].astype(float)
    share = k / np.maximum(room, 1)[None, :]
    keys = [share.max(axis=1)] + [share[:, d] for d in range(k.shape[1]) if share[:, d].any()]
    sized = k > 0
    divisor = np.where(sized, k, 1.0)
    patterns = []
    for key in keys:
        order = np.argsort(-pi[candidates] / np.maximum(key, 1e-12), kind="stable")
        left = room.astype(float).copy()
        counts = np.zeros(len(classes.count), dtype=np.int64)
        first = 0
        # A class that does not fit now never fits later (what is left only shrinks): jump to the next one that does,
        # a few steps a host instead of one per class.
        while first < len(order):
            rest = order[first:]
            fits = np.minimum(classes.count[candidates[rest]],
                              np.where(sized[rest], left // divisor[rest], np.inf).min(axis=1))
            taken = np.flatnonzero(fits >= 1)
            if len(taken) == 0:
                break
            i = rest[taken[0]]
            counts[candidates[i]] = int(fits[taken[0]])
            left -= counts[candidates[i]] * k[i]
            first += int(taken[0]) + 1
        if counts.any():
            patterns.append(counts)
    return patterns


def price_by_cpsat(pi: np.ndarray, classes: Classes, room: np.ndarray, candidates: np.ndarray, time_limit: float,
           hint: np.ndarray | None, deterministic: bool = False) -> tuple[list[np.ndarray], float, bool, float]:
    """Patterns of one host type, best last, an upper bound on a pattern's value (``Σ π_c a_c``), whether the last is proven best,
    and CP-SAT's deterministic time (s).

    ``time_limit``: seconds, of CP-SAT's deterministic time when ``deterministic``.

    Maximizes ``Σ π_c a_c`` s.t. ``Σ a_c k_cd ≤ room_d`` over ``candidates`` with CP-SAT; π is
    rounded up to integers, so the bound (CP-SAT's, divided back) is ≥ the real optimum.
    Every improving solution CP-SAT meets is returned: more columns per master solve.
    """
    candidates, ub, _ = _knapsack_items(classes, room, candidates[pi[candidates] > 1e-12])
    if len(candidates) == 0:
        return [], 0.0, True, 0.0
    k = classes.k[candidates]
    scale = _PRICING_SCALE / float(pi[candidates].max())
    weights = np.ceil(pi[candidates] * scale).astype(np.int64)
    model = cp_model.CpModel()
    a = [model.new_int_var(0, int(u), "") for u in ub]
    for d in np.flatnonzero(k.any(axis=0)):
        model.add(cp_model.LinearExpr.weighted_sum(a, k[:, d].tolist()) <= int(room[d]))
    model.maximize(cp_model.LinearExpr.weighted_sum(a, weights.tolist()))
    if hint is not None:
        for var, c, u in zip(a, candidates, ub):
            model.add_hint(var, int(min(hint[c], u)))
    solver = cp_model.CpSolver()
    solver.parameters.catch_sigint_signal = False  # SIGINT is packer's (packer.interrupt), not CP-SAT's
    if deterministic:
        solver.parameters.max_deterministic_time = max(0.05, time_limit)
        solver.parameters.max_time_in_seconds = WALL_CAP * max(0.05, time_limit)
    else:
        solver.parameters.max_time_in_seconds = max(0.05, time_limit)
    solver.parameters.num_workers = 1
    solver.parameters.cp_model_presolve = False  # small knapsacks: presolve costs more than it saves
    found = _Solutions(a, candidates, len(classes.count))
    # In a worker thread: a signal's handler run inside the callback would see its KeyboardInterrupt swallowed by CP-SAT.
    status = interrupt.run_stoppable(lambda: solver.solve(model, found), solver.stop_search)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return [], float(weights.astype(float) @ ub) / scale, False, solver.deterministic_time
    bound = solver.objective_value if status == cp_model.OPTIMAL else solver.best_objective_bound
    return found.patterns, float(bound) / scale, status == cp_model.OPTIMAL, solver.deterministic_time


def _first_fit_patterns(classes: Classes, types: HostTypes, t: int, most: int) -> np.ndarray:
    """The distinct patterns (rows of counts per class) of first fit decreasing of the classes into at most ``most`` hosts of type ``t``.

    Classes go by decreasing share of the room (their largest dimension); a class's tasks
    fill the hosts in order, as many per host as fit, which is first fit over its tasks.
    """
    room = types.room[t]
    order = np.flatnonzero(types.fits(classes)[:, t])
    order = order[np.argsort(-(classes.k[order] / np.maximum(room, 1)).max(axis=1), kind="stable")]
    hosts = min(len(types.hosts[t]), most)
    left = np.tile(room, (hosts, 1))
    counts = np.zeros((hosts, len(classes.count)), dtype=np.int64)
    for c in order.tolist():
        k = classes.k[c]
        with np.errstate(divide="ignore"):
            room_for = np.where(k > 0, left // np.maximum(k, 1), classes.count[c]).min(axis=1)
        before = np.cumsum(room_for) - room_for
        take = np.clip(classes.count[c] - before, 0, room_for)
        counts[:, c] = take
        left -= take[:, None] * k[None, :]
    return np.unique(counts[counts.any(axis=1)], axis=0)


def _knapsack_items(classes: Classes, room: np.ndarray, candidates: np.ndarray,
                    count: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The classes of ``candidates`` a host of ``room`` holds at least one of, how many at most (of ``count``, default
    every task of the class), and the dimensions they use."""
    k = classes.k[candidates]
    with np.errstate(divide="ignore"):
        per_dim = np.where(k > 0, room[None, :] // np.maximum(k, 1), np.iinfo(np.int64).max)
    most = np.minimum((classes.count if count is None else count)[candidates], per_dim.min(axis=1))
    keep = most > 0
    return candidates[keep], most[keep], np.flatnonzero(k[keep].any(axis=0))


def _pieces(most: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each count of ``most`` split into 1, 2, 4, … and a remainder (any count up to it is a sum of some of them):
    the index into ``most`` of every piece, and its size."""
    bits = np.arange(int(most.max(initial=0)).bit_length())
    piece = np.minimum(1 << bits, most[:, None] - ((1 << bits) - 1))
    which, bit = np.nonzero(piece > 0)
    return which, piece[which, bit]


def _table_work(classes: Classes, room: np.ndarray, candidates: np.ndarray) -> float:
    """Cells × items of :func:`_price_by_table`'s table for one host type."""
    chosen, most, dims = _knapsack_items(classes, room, candidates)
    return float(np.prod(room[dims] + 1.0)) * len(_pieces(most)[0])


def _price_by_table(pi: np.ndarray, classes: Classes, room: np.ndarray, candidates: np.ndarray,
                    count: np.ndarray | None = None) -> tuple[np.ndarray | None, float]:
    """The best pattern of one host type (counts per class, at most ``count``: default every task of the class; None if no
    class has value) and its value ``Σ π_c a_c``, exactly.

    Dynamic programming over a table with one axis per dimension the classes use
    (``room_d + 1`` cells each): cell r holds the best value of tasks whose demand fits in r.
    Each class enters as pieces of 1, 2, 4, … tasks (:func:`_pieces`), each a 0/1 item.
    Work: cells × pieces (:func:`_table_work`).
    """
    chosen, most, dims = _knapsack_items(classes, room, candidates[pi[candidates] > 1e-12], count)
    counts = np.zeros(len(classes.count), dtype=np.int64)
    if len(chosen) == 0:
        return None, 0.0
    size = classes.k[chosen][:, dims]
    free = ~size.any(axis=1)  # no demand in any dimension: all of them, for nothing
    counts[chosen[free]] = most[free]
    which, piece = _pieces(most[~free])
    item_class = chosen[~free][which]
    item_value = (pi[item_class] * piece).tolist()
    item_step = size[~free][which] * piece[:, None]
    shape = tuple((room[dims] + 1).tolist())
    value = np.zeros(shape)
    took = np.zeros((len(piece), *shape), dtype=bool)
    if len(shape) == 1:  # the common case, without building slices per item
        n = shape[0]
        for i, (step, gain_i) in enumerate(zip(item_step[:, 0].tolist(), item_value)):
            gain = value[:n - step] + gain_i
            np.greater(gain, value[step:], out=took[i, step:])
            np.maximum(value[step:], gain, out=value[step:])
    else:
        for i, (step, gain_i) in enumerate(zip(item_step.tolist(), item_value)):
            upper = tuple(slice(x, None) for x in step)
            lower = tuple(slice(0, n - x) for n, x in zip(shape, step))
            gain = value[lower] + gain_i
            np.greater(gain, value[upper], out=took[(i, *upper)])
            np.maximum(value[upper], gain, out=value[upper])
    cell = np.array(shape) - 1
    for i in range(len(piece) - 1, -1, -1):
        if took[(i, *cell)]:
            counts[item_class[i]] += piece[i]
            cell = cell - item_step[i]
    best = float(value[tuple(np.array(shape) - 1)]) + float(pi[chosen[free]] @ most[free])
    return (counts if counts.any() else None), best


def _table_patterns(pi: np.ndarray, price: float, classes: Classes, room: np.ndarray,
                    candidates: np.ndarray) -> tuple[list[np.ndarray], float]:
    """Up to :data:`TABLE_PATTERNS` patterns of one host type, each the best of the tasks the ones before it left
    (:func:`_price_by_table`), while the duals ``pi`` value them above ``price`` (the type's cost less its limit's
    dual); and the first's value, a bound on every pattern's.

    Patterns that share no task: column generation adds a whole packing's worth per iteration
    instead of one host's, and on instances of few tasks per host it needs a fraction of the iterations.
    """
    left = classes.count.copy()
    patterns: list[np.ndarray] = []
    first = None
    while len(patterns) < TABLE_PATTERNS:
        best, value = _price_by_table(pi, classes, room, candidates, left)
        first = value if first is None else first
        if best is None or float(pi @ best) <= price * (1 + 1e-9):
            break
        patterns.append(best)
        left = left - best
    return patterns, first


class _Solutions(cp_model.CpSolverSolutionCallback):
    """Every solution CP-SAT reports, as counts per class."""

    def __init__(self, variables: list, candidates: np.ndarray, n_classes: int):
        super().__init__()
        self.variables, self.candidates, self.n_classes = variables, candidates, n_classes
        self.patterns: list[np.ndarray] = []

    def on_solution_callback(self) -> None:
        counts = np.zeros(self.n_classes, dtype=np.int64)
        counts[self.candidates] = [self.value(v) for v in self.variables]
        self.patterns.append(counts)


def _solve_master(lp: mathopt.IncrementalSolver, model_params: mathopt.ModelSolveParameters | None = None) -> mathopt.SolveResult | None:
    """The master LP solved again (warm-started); None where GLOP stopped with an error of its own: the bound so far stands."""
    try:
        return solve_incremental(lp, model_params)
    except SolverFailed as error:
        log.warning("pattern master LP failed (%s); column generation stops here", error)
        return None


def _lagrangian_bound(pi: np.ndarray, upper: np.ndarray, classes: Classes, types: HostTypes) -> float:
    """The better of L(π) and L(π/θ) (module doc), θ = the largest value per cost of any host type's pattern (``upper``: bounds on those values)."""
    pinned = sum(fractional_value(np.where(classes.allowed[:, a], pi, 0.0), classes.k, classes.count, room)
                 for a, room in enumerate(types.pinned_room))
    counts = np.array([len(h) for h in types.hosts], dtype=float)
    plain = types.constant + float(pi @ classes.count) - pinned + float((counts * np.minimum(0.0, types.cost - upper)).sum())
    # Scaling π by 1/θ makes every pattern price at most its cost, so the host-count terms vanish (Farley's bound).
    theta = max(1.0, float((upper / np.maximum(types.cost, 1e-300)).max(initial=0.0)))
    return max(plain, types.constant + (float(pi @ classes.count) - pinned) / theta)


class Master:
    """The master LP of the module doc: one row per class (cover) and per host type (limit), one variable per column."""

    def __init__(self, classes: Classes, types: HostTypes):
        self.model = mathopt.Model(name="patterns")
        self.cost = types.cost
        self.cover = [self.model.add_linear_constraint(lb=float(n)) for n in classes.count]
        self.limit = [self.model.add_linear_constraint(ub=float(len(h))) for h in types.hosts]
        self.columns: list[tuple[int, np.ndarray]] = []  # (type, counts per class), in the order of ``variables``
        self.variables: list = []
        self.pinned: list[tuple[int, np.ndarray]] = []  # (architecture, classes) with room beside pinned tasks (``y`` of the module doc)
        self._seen: set[tuple[int, bytes]] = set()

    def add_column(self, t: int, counts: np.ndarray) -> bool:
        """Add the pattern ``counts`` of host type ``t``; False if the master has it already."""
        key = (t, counts.tobytes())
        if key in self._seen:
            return False
        self._seen.add(key)
        var = self.model.add_variable(lb=0.0)
        self.model.objective.set_linear_coefficient(var, float(self.cost[t]))
        self.limit[t].set_coefficient(var, 1.0)
        for c in np.flatnonzero(counts):
            self.cover[c].set_coefficient(var, float(counts[c]))
        self.columns.append((t, counts))
        self.variables.append(var)
        return True

    def column_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The columns as arrays: each one's host type (P,) and its counts per class (P, C)."""
        col_type, counts = zip(*self.columns)
        return np.array(col_type), np.stack(counts)


class _Pricing:
    """Pricing (module doc) for one run of column generation: exact by table where a type's knapsack is small, else
    greedy and, when the greedy finds no column, by CP-SAT (``pricing_time`` seconds per type at most)."""

    def __init__(self, classes: Classes, types: HostTypes, pricing_time: float, deterministic: bool):
        self.classes, self.types, self.pricing_time, self.deterministic = classes, types, pricing_time, deterministic
        fits = types.fits(classes)
        self.fits = fits.T  # (T, C)
        self.candidates = [np.flatnonzero(fits[:, t]) for t in range(len(types.cost))]
        self.table_work = np.array([_table_work(classes, types.room[t], c) for t, c in enumerate(self.candidates)])
        self.by_table = self.table_work <= TABLE_PRICING_WORK
        self.last: list[np.ndarray | None] = [None] * len(types.cost)  # each type's last CP-SAT pattern, its next hint

    def price(self, master: "Master", pi: np.ndarray, mu: np.ndarray, clock: SearchClock) -> tuple[int, np.ndarray, bool]:
        """Add to ``master`` the columns of negative reduced cost at the duals ``pi`` (classes) and ``mu`` (types).

        Returns how many were added, per type an upper bound on a pattern's value ``Σ π_c a_c``, and
        whether none added is a proof that none exists (every type priced exactly, within ``clock``).
        """
        classes, types = self.classes, self.types
        upper = fractional_values(pi, classes.k, np.where(self.fits, classes.count, 0), types.room)

        def add(t: int, patterns: list[np.ndarray]) -> int:
            price = types.cost[t] - mu[t]
            return sum(master.add_column(t, counts) for counts in patterns if price - float(pi @ counts) < -1e-9 * max(1.0, types.cost[t]))

        added = 0
        for t in range(len(types.cost)):  # cheap pricing first
            if self.by_table[t]:
                patterns, upper[t] = _table_patterns(pi, types.cost[t] - mu[t], classes, types.room[t], self.candidates[t])
                clock.spend(TABLE_WORK_SECONDS * self.table_work[t] * max(1, len(patterns)))
            else:
                patterns = greedy_patterns(pi, classes, types.room[t], self.candidates[t])
            added += add(t, patterns)
        if added:
            return added, upper, False
        proven = True  # the exact pricing, to find columns the greedy misses or to prove there are none
        for t in np.argsort(types.cost):
            if self.by_table[t]:
                continue
            if clock.expired() or interrupt.stop_requested():
                return added, upper, False
            found, bound_t, exact_t, work = price_by_cpsat(pi, classes, types.room[t], self.candidates[t],
                                                   min(self.pricing_time, clock.remaining()), self.last[t], self.deterministic)
            clock.spend(work)
            upper[t] = min(upper[t], bound_t)
            proven &= exact_t
            if found:
                self.last[t] = found[-1]
            added += add(int(t), found)
        return added, upper, proven


def _duals(result: mathopt.SolveResult, master: "Master") -> tuple[np.ndarray, np.ndarray]:
    """The master LP's duals: π ≥ 0 of the class rows, μ ≤ 0 of the type rows (clipped: GLOP's may stray by rounding)."""
    pi = np.clip(np.asarray(result.dual_values(master.cover), dtype=float), 0.0, None)
    mu = np.clip(np.asarray(result.dual_values(master.limit), dtype=float), None, 0.0)
    return pi, mu


def column_generation(problem: PlacementProblem, time_limit: float = 30.0, max_classes: int = 300,
                      pricing_time: float = 2.0, give_up_above: float = np.inf, useless_below: float = -np.inf,
                      deterministic: bool = False) -> PatternResult | None:
    """Run column generation (module doc) for at most ``time_limit`` seconds; None where it does not apply (:func:`supported`).

    ``deterministic``: count ``time_limit`` as work (:mod:`packer.solvers.clock`), so the result does not depend on load.

    ``give_up_above`` (primary-cost units): stop after 40% of the time while the master LP
    is still above it (e.g. 1.1 × another lower bound): columns that far from a packing
    will not give a useful one, and the time is better spent by the caller.

    ``useless_below`` (primary-cost units, e.g. another lower bound): on rounded classes, stop
    once the master LP is at or below it (:attr:`PatternResult.useless`). The bound can then
    no longer exceed it (it is at most the LP, which only falls), and a packing from classes
    that rounding made unlike the tasks is not worth building.
    """
    if not supported(problem):
        return None
    clock = SearchClock(time_limit, deterministic)
    classes = task_classes(problem, max_classes)
    types = host_types(problem, classes)
    C, Ty = len(classes.count), len(types.cost)
    fits = types.fits(classes)

    master = Master(classes, types)
    model, cover, add_column = master.model, master.cover, master.add_column
    for a in np.flatnonzero((types.pinned_room > 0).any(axis=1)):
        usable = np.flatnonzero(classes.allowed[:, a] & (classes.k <= types.pinned_room[a]).all(axis=1))
        if len(usable) == 0:
            continue
        master.pinned.append((int(a), usable))
        y = [model.add_variable(lb=0.0) for _ in usable]
        for c, var in zip(usable, y):
            cover[c].set_coefficient(var, 1.0)
        for d in range(classes.k.shape[1]):
            room_row = model.add_linear_constraint(ub=float(types.pinned_room[a, d]))
            for c, var in zip(usable, y):
                if classes.k[c, d]:
                    room_row.set_coefficient(var, float(classes.k[c, d]))
    # Start from the current placement's hosts (a feasible master) and one singleton per class.
    type_of_host = np.full(problem.n_hosts, -1, dtype=np.int64)
    for t, hosts in enumerate(types.hosts):
        type_of_host[hosts] = t
    movable = np.flatnonzero(problem.movable & (type_of_host[problem.current] >= 0))
    held = np.zeros((problem.n_hosts, C), dtype=np.int64)
    np.add.at(held, (problem.current[movable], classes.of_task[movable]), 1)
    for h in np.flatnonzero(held.any(axis=1)):
        add_column(int(type_of_host[h]), held[h])
    for c in range(C):
        types_c = np.flatnonzero(fits[c])
        if len(types_c):
            single = np.zeros(C, dtype=np.int64)
            single[c] = 1
            add_column(int(types_c[np.argmin(types.cost[types_c])]), single)
    # And the hosts of a first-fit-decreasing packing into each type: a master LP that starts near a good packing needs
    # far fewer iterations than one that starts from the placement of today (on Falkenauer's triplets: 500 → 170 hosts).
    # Not past the clock: at 37,000 tasks these packings alone took 3.2 s, the whole share of a 15-s solve.
    for t in range(Ty):
        if clock.expired():
            break
        for counts in _first_fit_patterns(classes, types, t, int(classes.count.sum())):
            add_column(t, counts)

    best_bound, lp_value, converged, iterations = -np.inf, np.inf, False, 0
    integral = types.whole_costs
    gave_up = useless = False
    pricing = _Pricing(classes, types, pricing_time, deterministic)
    lp = mathopt.IncrementalSolver(model, mathopt.SolverType.GLOP)  # warm-started after each new column
    # A stop request (packer.interrupt) ends the loop: the bound of the last priced iteration stands.
    while not clock.expired() and not interrupt.stop_requested():
        iterations += 1
        clock.spend(ITERATION_WORK)
        result = _solve_master(lp, DUALS_ONLY)
        if result is None or result.termination.reason != mathopt.TerminationReason.OPTIMAL:
            if result is not None and not interrupt.stop_requested():
                log.warning("pattern master LP: %s", result.termination.reason.name)
            break
        lp_value = float(result.objective_value())
        if not classes.exact and lp_value + types.constant <= useless_below - 1e-6 * max(1.0, abs(useless_below)):
            useless = True
            break
        pi, mu = _duals(result, master)
        added, upper, proven = pricing.price(master, pi, mu, clock)
        best_bound = max(best_bound, _lagrangian_bound(pi, upper, classes, types))
        if added == 0:
            converged = proven
            break
        if integral and math.ceil(best_bound - 1e-6) >= math.ceil(lp_value + types.constant - 1e-6):
            break  # integer costs: the rounded bound cannot rise further
        if lp_value + types.constant > give_up_above and clock.elapsed() > 0.4 * time_limit:
            gave_up = True
            break
    lp_value += types.constant
    return PatternResult(bound=best_bound, lp=lp_value, converged=converged, iterations=iterations, classes=classes, types=types,
                         master=master, wall_s=clock.wall(), gave_up=gave_up, useless=useless, capped=clock.capped,
                         work=clock.work + SETUP_WORK_PER_TASK * problem.n_tasks)


def packing_applies(problem: PlacementProblem, found: PatternResult) -> bool:
    """Whether :func:`pattern_packing` builds a packing from ``found`` rather than returning None at once (its doc says when)."""
    if any(rule.name not in PACKING_RULES for rule in problem.rules) or not found.master.columns or found.iterations == 0 or found.useless:
        return False  # no iteration: no prices, and the columns are today's hosts and a first fit (37,000 tasks: 6 s for nothing)
    return rounded_share(problem, found.classes) <= PACKING_ROUNDING


def _whole(found: PatternResult) -> bool:
    """Whether every packing of ``found``'s host types costs a whole number and its bound is finite."""
    return bool(np.isfinite(found.bound) and found.types.whole_costs)


def _target(found: PatternResult) -> float:
    """The least cost a packing can reach by ``found``'s bound: rounded up where costs are whole (-inf before a first bound)."""
    return math.ceil(found.bound - 1e-6) if _whole(found) else found.bound


def pattern_packing(problem: PlacementProblem, found: PatternResult, time_limit: float = 10.0,
                    deterministic: bool = False) -> np.ndarray | None:
    """A placement from patterns (module doc): an integer master, slots, then best fit for the rest.

    Up to three packings: the integer master over the columns column generation found
    (:func:`_master_packing`; not when it gave up), the same after a dive has added columns
    (:func:`_dive_packing`; where it may prove the packing optimal, :attr:`PatternResult.provable`), and one
    from *full* patterns only (:func:`full_packing`): at the LP optimum many patterns price
    alike and column generation keeps only the few it needed, while a packing that meets the
    bound (every host full) may need others (Falkenauer's triplets: every bin holds exactly
    three items that fill it). The master comes first when column generation converged (with
    :data:`MASTER_BEFORE_DIVE_SHARE` of ``time_limit`` where a dive may follow, else
    :data:`FIRST_METHOD_SHARE`), the full patterns first otherwise; each next one runs only
    while the packings so far stay above the bound, and the cheapest is returned.

    ``deterministic``: the CP-SAT programs stop on CP-SAT's deterministic time, the HiGHS one after
    :data:`DETERMINISTIC_MASTER_NODES` nodes, rather than at their time (then only a cap of
    :data:`~packer.solvers.clock.WALL_CAP` times it).

    None when the problem has rules the packing does not honour (:data:`PACKING_RULES`),
    column generation ran out of time before its first iteration or stopped as useless
    (:attr:`PatternResult.useless`: on every trace measured its classes were then too coarse for a
    packing anywhere near the engine's, e.g. 2,330 against 2,280 on the known-optimum family), its
    classes' grid rounds away more than :data:`PACKING_ROUNDING` of the demand (its packings were
    then far above the engine's plans on every trace measured: Bitbrains 14-16 hosts against 10,
    g5k 2,206 against 1,756, 37,000 tasks 16,220 against 13,158; on random 600-task instances,
    where it converged on a 1/32 grid, none was found in 4 s; and the time went from the
    engine), or no integer master finds a solution in ``time_limit`` seconds. The placement may
    still break a rule the caller checks; the engine only keeps a valid start.
    """
    if not packing_applies(problem, found):
        return None
    target = _target(found)
    clock = SearchClock(time_limit, deterministic)
    if found.gave_up:
        methods, shares = [full_packing], [1.0]
    elif not found.converged:
        methods, shares = [full_packing, _master_packing], [FIRST_METHOD_SHARE, 1.0]
    elif not found.provable:
        methods, shares = [_master_packing, full_packing], [FIRST_METHOD_SHARE, 1.0]
    else:  # columns of a converged run price the LP optimum; a dive from there adds those near the target the master lacks
        methods, shares = [_master_packing, _dive_packing, full_packing], [MASTER_BEFORE_DIVE_SHARE, FIRST_METHOD_SHARE, 1.0]
    best, best_cost = None, np.inf
    for method, share in zip(methods, shares):
        seconds = clock.remaining() * share
        packed = method(problem, found, max(0.1, seconds), deterministic)
        clock.spend(seconds)  # a deterministic clock: the share given, whole (the methods do not report their work)
        cost = np.inf if packed is None else float(problem.primary_cost[np.unique(packed)].sum())
        if cost < best_cost:
            best, best_cost = packed, cost
        if best_cost <= target + 1e-6:
            break
    return best


def _master_packing(problem: PlacementProblem, found: PatternResult, seconds: float, deterministic: bool = False) -> np.ndarray | None:
    """The integer master over column generation's columns (CP-SAT, ``seconds``), filled with the real tasks.

    CP-SAT rather than HiGHS: on Falkenauer's u1000 instances it found packings at the rounded-up
    LP bound in 0.2-1.8 s where HiGHS's branch and bound stayed 1-3 hosts above it after 2 s. Integer
    costs get the rounded-up bound as a constraint, so that reaching it proves the packing optimal.
    """
    master, classes, types = found.master, found.classes, found.types
    col_type, counts = master.column_arrays()
    model, hosts, covering = _pattern_program(classes, types, col_type, counts, master.pinned)
    for c, covered in enumerate(covering):
        model.add(covered >= int(classes.count[c]))
    cost = types.cost[col_type]
    if types.whole_costs:
        objective = cp_model.LinearExpr.weighted_sum(hosts, cost.astype(np.int64).tolist())
        if math.isfinite(found.bound):
            model.add(objective >= math.ceil(found.bound - types.constant - 1e-6))
    else:
        objective = cp_model.LinearExpr.weighted_sum(hosts, cost.tolist())
    model.minimize(objective)
    used = _solve_program(model, hosts, seconds, deterministic)
    if used is None:
        return None
    return _fill(problem, classes, types, col_type, counts, used, SearchClock(seconds, deterministic))


def _dive_packing(problem: PlacementProblem, found: PatternResult, seconds: float, deterministic: bool = False) -> np.ndarray | None:
    """A packing by diving (:func:`dive`) for :data:`DIVE_SHARE` of ``seconds``: its own where it ends on whole
    numbers of hosts, else the integer master (:func:`_master_packing`) over the columns found so far, dive's included."""
    clock = SearchClock(seconds, deterministic)
    diving = clock.part(DIVE_SHARE * seconds)
    used = dive(found, diving)
    clock.spend(diving.work)
    if used is not None:
        return _fill(problem, found.classes, found.types, *found.master.column_arrays(), used, clock)
    return _master_packing(problem, found, max(0.1, clock.remaining()), deterministic)


def dive(found: PatternResult, clock: SearchClock) -> np.ndarray | None:
    """Dive from column generation's LP optimum towards its rounded-up bound; hosts per column of ``found.master`` if it gets there.

    Each step keeps the whole hosts of the LP's solution (lower bounds at ``floor(x)``: the
    solution stays optimal), rounds one fractional column up and prices the master again
    until no column has a negative reduced cost, so the master LP stays a bound on every
    packing that keeps the columns fixed so far. A rounding is kept only if that LP still
    rounds up to the target (``ceil(bound)``); of the fractional columns the
    :data:`DIVE_CANDIDATES` largest are tried in turn; when none keeps the target, the dive
    stops. It stops too at ``clock``. Either way the columns it priced stay in the master:
    they are the patterns near the target the integer master lacked (Falkenauer's u1000_09:
    the integer master over column generation's 257 columns gives 398 bins, over the ~330
    after a dive 397, the optimum). Every lower bound is reset on return.

    Only where ``found.provable``: elsewhere it returns None at once. On classes rounded to a grid
    the target is out of reach of real packings (g5k-s7, P99 Sens: bound 1,562, packing 1,836),
    and the dive's time is the engine's.
    """
    master, classes, types = found.master, found.classes, found.types
    if not found.provable:
        return None
    target = math.ceil(found.bound - types.constant - 1e-6)  # of the movable hosts' cost, the master's objective
    pricing = _Pricing(classes, types, DIVE_PRICING_SECONDS, clock.deterministic)
    lp = mathopt.IncrementalSolver(master.model, mathopt.SolverType.GLOP)

    def priced() -> np.ndarray | None:
        """The master LP's solution once priced to convergence; None if it rounds up above the target or time ran out."""
        while not clock.expired() and not interrupt.stop_requested():
            clock.spend(ITERATION_WORK)
            result = _solve_master(lp)
            if result is None or result.termination.reason != mathopt.TerminationReason.OPTIMAL:
                return None
            pi, mu = _duals(result, master)
            added, _, proven = pricing.price(master, pi, mu, clock)
            if added == 0:
                if not proven or math.ceil(float(result.objective_value()) - 1e-6) > target:
                    return None
                return np.asarray(result.variable_values(master.variables), dtype=float)
        return None

    columns, steps = len(master.columns), 0
    try:
        x = priced()
        while x is not None:
            steps += 1
            frac = x - np.floor(x)
            fractional = np.flatnonzero((frac > DIVE_INTEGRALITY) & (frac < 1 - DIVE_INTEGRALITY))
            if not len(fractional):
                return np.round(x).astype(np.int64)
            node, x = x, None
            for j in np.flatnonzero(node >= 1 - DIVE_INTEGRALITY).tolist():  # the hosts the LP uses wholly, kept: it stays optimal
                master.variables[j].lower_bound = max(master.variables[j].lower_bound, math.floor(node[j] + DIVE_INTEGRALITY))
            for j in fractional[np.argsort(-node[fractional], kind="stable")][:DIVE_CANDIDATES].tolist():
                variable = master.variables[j]
                before = variable.lower_bound
                variable.lower_bound = math.ceil(node[j])
                x = priced()
                if x is not None or clock.expired():
                    break
                variable.lower_bound = before
        return None
    finally:
        log.info("dive: %d steps, %d new columns, %.2f s", steps, len(master.columns) - columns, clock.wall())
        for variable in master.variables:
            variable.lower_bound = 0.0


def _pattern_program(classes: Classes, types: HostTypes, col_type: np.ndarray, counts: np.ndarray,
                     pinned: list[tuple[int, np.ndarray]] = ()) -> tuple[cp_model.CpModel, list, list]:
    """A CP-SAT model of how many hosts take each pattern (``counts`` (P, C), of types ``col_type``): one integer per
    pattern, at most the hosts of each type, and integers for the tasks beside ``pinned`` ones (:class:`Master`),
    within the room left there. Returns the model, the pattern integers (for the caller's objective), and per
    class the sum of tasks it places (for the caller's covering rows)."""
    n_hosts = [len(h) for h in types.hosts]
    model = cp_model.CpModel()
    hosts = [model.new_int_var(0, n_hosts[t], "") for t in col_type.tolist()]
    covering: list[list[tuple]] = [[] for _ in classes.count]
    for j, c in zip(*np.nonzero(counts)):
        covering[c].append((hosts[j], int(counts[j, c])))
    for a, usable in pinned:
        beside = [model.new_int_var(0, int(classes.count[c]), "") for c in usable]
        for c, var in zip(usable.tolist(), beside):
            covering[c].append((var, 1))
        for d in range(classes.k.shape[1]):
            model.add(cp_model.LinearExpr.weighted_sum(beside, classes.k[usable, d].tolist()) <= int(types.pinned_room[a, d]))
    for t in np.unique(col_type).tolist():
        model.add(sum(hosts[j] for j in np.flatnonzero(col_type == t)) <= n_hosts[t])
    return model, hosts, [cp_model.LinearExpr.weighted_sum([v for v, _ in terms], [n for _, n in terms]) for terms in covering]


def _solve_program(model: cp_model.CpModel, hosts: list, seconds: float, deterministic: bool) -> np.ndarray | None:
    """Solve ``model`` with packer's CP-SAT parameters (:func:`packer.solvers.cpsat.cpsat_solver`) for ``seconds``, stoppable
    (:mod:`packer.interrupt`); the values of the pattern integers ``hosts`` if it found a solution, else None."""
    solver = cpsat_solver(0, max(0.1, seconds), deterministic=deterministic)
    status = interrupt.run_stoppable(lambda: solver.solve(model), solver.stop_search)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return np.array([solver.value(v) for v in hosts], dtype=np.int64)


def full_packing(problem: PlacementProblem, found: PatternResult, seconds: float, deterministic: bool = False) -> np.ndarray | None:
    """A packing that puts as many tasks as pays into full hosts (:func:`full_patterns`), the rest by best fit.

    An integer program over the full patterns: ``min Σ_p cost_p λ_p + Σ_c penalty_c s_c``
    s.t. ``Σ_p a_cp λ_p + s_c = n_c`` and at most the hosts of each type, where ``s_c``
    counts the tasks of class c left to the best fit of :func:`_fill` and ``penalty_c``
    is :data:`FULL_PACKING_PENALTY` × the cheapest cost of the share of a host the class
    takes (in its tightest dimension): a full host is worth its cost, leaving its tasks
    out clearly more (a factor close to 1 leaves the LP with near-ties that HiGHS is slow
    to settle). Covering exactly (no surplus) keeps the program small and its LP tight.
    It is tried first with ``s = 0`` (every task in a full host: an exact cover, by CP-SAT), for
    :data:`PERFECT_PACKING_SHARE` of the time; the penalized program by HiGHS without presolve
    (on thousands of patterns it took seconds, past any time limit) for the rest of ``seconds``.
    Listing the patterns takes at most :data:`FULL_PATTERN_SHARE` of ``seconds``.
    None without patterns or a solution.
    """
    classes, types = found.classes, found.types
    clock = SearchClock(seconds, deterministic)
    listed = _listed_full_patterns(classes, types, clock)
    if listed is None:
        return None
    col_type, counts = listed
    fits = types.fits(classes)
    share = (classes.k[:, None, :] / np.maximum(types.room[None, :, :], 1)).max(axis=2)
    penalty = FULL_PACKING_PENALTY * np.where(fits, share * types.cost[None, :], np.inf).min(axis=1)
    penalty[~np.isfinite(penalty)] = FULL_PACKING_PENALTY * types.cost.max()  # fits only beside pinned tasks: always left out
    P, C = counts.shape
    kinds = np.unique(col_type)
    # Columns: λ_p (P), then s_c (C). Rows: one per class (= n_c), then one per host type used (≤ its hosts).
    pat, cls = np.nonzero(counts)
    rows = np.concatenate([cls, np.arange(C), C + np.searchsorted(kinds, col_type)])
    cols = np.concatenate([pat, P + np.arange(C), np.arange(P)])
    coefs = np.concatenate([counts[pat, cls], np.ones(C), np.ones(P)]).astype(float)
    n_hosts = np.array([len(h) for h in types.hosts], dtype=float)
    row_bounds = (np.concatenate([classes.count, np.full(len(kinds), -np.inf)]).astype(float),
                  np.concatenate([classes.count, n_hosts[kinds]]).astype(float))
    cost = np.concatenate([types.cost[col_type], penalty])
    # First every task in a full host: an exact cover, which CP-SAT finds or refutes quickly where HiGHS's branch
    # and bound did not (Falkenauer's t501: 0.2-0.8 s, against none in 5 s); then, if that fails, the penalized program.
    covered = _exact_cover(problem, classes, types, col_type, counts, PERFECT_PACKING_SHARE * clock.remaining(), seconds, deterministic)
    if covered is not None:
        return covered
    var_bounds = (np.zeros(P + C), np.concatenate([n_hosts[col_type], classes.count]).astype(float))
    solution = minimize(cost, (rows, cols, coefs), row_bounds, var_bounds, np.arange(P + C) < P, mathopt.SolverType.HIGHS,
                        time_limit=max(0.1, clock.remaining()) * (WALL_CAP if deterministic else 1.0), relative_gap=1e-4,
                        node_limit=DETERMINISTIC_MASTER_NODES if deterministic else None, presolve=False)
    if solution.x is None:
        return None
    return _fill(problem, classes, types, col_type, counts, np.round(solution.x[:P]).astype(np.int64), SearchClock(seconds, deterministic))


def _exact_cover(problem: PlacementProblem, classes: Classes, types: HostTypes, col_type: np.ndarray, counts: np.ndarray,
                 seconds: float, fill_seconds: float, deterministic: bool) -> np.ndarray | None:
    """Every task in a host of one of the patterns ``counts`` (P, C) of types ``col_type``, cheapest first (CP-SAT, ``seconds``),
    filled with the real tasks (:func:`_fill`, ``fill_seconds``); None if CP-SAT finds none."""
    model, hosts, covering = _pattern_program(classes, types, col_type, counts)
    for c, covered in enumerate(covering):
        model.add(covered == int(classes.count[c]))
    model.minimize(cp_model.LinearExpr.weighted_sum(hosts, types.cost[col_type].tolist()))
    used = _solve_program(model, hosts, seconds, deterministic)
    if used is None:
        return None
    return _fill(problem, classes, types, col_type, counts, used, SearchClock(fill_seconds, deterministic))


def perfect_packing_classes(problem: PlacementProblem) -> tuple[Classes, HostTypes] | None:
    """The classes and host types of ``problem`` if a packing of every task into full hosts could exist
    (:func:`perfect_packing`), else None; vectorized, milliseconds.

    The conditions: demands that are whole multiples of a unit (:func:`exact_units`), hosts
    that all have the same room in the dimension the demands fill most, and a total demand
    there that is a whole number of hosts.
    """
    if not supported(problem) or any(rule.name not in PACKING_RULES for rule in problem.rules):
        return None
    # Demands without a unit (profiled p99s, most real traces) leave at once: classing the tasks costs as much as
    # column generation's own classing, which would follow.
    if exact_units(problem.demand[problem.movable], np.maximum(problem.capacity.max(axis=0), 1e-300)) is None:
        return None
    classes = task_classes(problem)
    types = host_types(problem, classes)
    if not classes.exact or len(types.cost) == 0 or not (types.room == types.room[0]).all():
        return None
    total = (classes.count[:, None] * classes.k).sum(axis=0)
    d = int(np.argmax(total / np.maximum(types.room[0], 1)))
    if types.room[0, d] == 0 or total[d] % types.room[0, d]:
        return None
    return classes, types


def perfect_packing(problem: PlacementProblem, classes: Classes, types: HostTypes, seconds: float,
                    deterministic: bool = False) -> np.ndarray | None:
    """Every task in a full host (:func:`full_patterns`, :func:`_exact_cover`), for ``classes`` and ``types`` from
    :func:`perfect_packing_classes`; None if none is found in ``seconds``.

    Such a packing uses exactly the volume bound's number of hosts, which no packing can beat.
    It is tried before column generation: on Falkenauer's triplet instances CP-SAT finds one for
    501 tasks in about a second, while column generation's bound never rises above the volume
    bound and its master LP takes all of its time.
    """
    clock = SearchClock(seconds, deterministic)
    listed = _listed_full_patterns(classes, types, clock)
    if listed is None:
        return None
    return _exact_cover(problem, classes, types, *listed, clock.remaining(), seconds, deterministic)


def _listed_full_patterns(classes: Classes, types: HostTypes, clock: SearchClock) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`full_patterns` within :data:`FULL_PATTERN_SHARE` of ``clock``'s limit (charged to it) as (types (P,), counts (P, C)); None without any."""
    listing = clock.part(FULL_PATTERN_SHARE * clock.limit)
    patterns = full_patterns(classes, types, FULL_PATTERNS, listing)
    clock.spend(listing.work)
    if not patterns:
        return None
    return np.array([t for t, _ in patterns]), np.stack([c for _, c in patterns])


#: Most full patterns :func:`full_patterns` lists (over all host types), and partial patterns it extends per type
#: (a count, not a time, so that a deterministic run lists the same patterns).
FULL_PATTERNS = 20_000
FULL_PATTERN_VISITS = 300_000
#: Work (nominal seconds) a deterministic clock is charged per extension :func:`full_patterns` visits.
FULL_PATTERN_VISIT_WORK = 3e-6
#: Most of :func:`full_packing`'s time its listing of full patterns may take.
FULL_PATTERN_SHARE = 0.5
#: Most tasks in a full pattern (hosts of many small tasks fill well without them).
FULL_PATTERN_TASKS = 64
#: Share of :func:`full_packing`'s time for a packing of every task into full hosts, before it lets tasks out.
PERFECT_PACKING_SHARE = 0.75
#: What :func:`full_packing` charges per task it leaves to the best fit, as a multiple of the task's cheapest share of a host.
FULL_PACKING_PENALTY = 2.0
#: Work (nominal seconds) :func:`_fill`'s best fit charges a deterministic clock per task and host it scans (measured: 0.5 ms
#: per task over 18,000 hosts).
FILL_WORK_PER_HOST = 3e-8


def full_patterns(classes: Classes, types: HostTypes, limit: int, clock: SearchClock | None = None) -> list[tuple[int, np.ndarray]]:
    """Up to ``limit`` patterns (type, counts) that fill their host type in its binding dimension, cheapest types first.

    The binding dimension of a type is the one whose room the classes' total demand fills
    most. A pattern is *full* when the room it leaves there is smaller than its number of
    tasks: each task's demand is rounded down to the grid by less than one unit, so a
    set of tasks that fills the dimension exactly on the real numbers is full. On exact
    units (:func:`exact_units`) nothing is rounded: a full pattern leaves no room. Depth-first
    over the classes by decreasing size; a partial pattern is extended only by tasks that
    leave room for at least one more, and completed by the tasks that fill it (found by
    binary search), so on instances of few tasks per host the search visits little more
    than the patterns it lists; at most :data:`FULL_PATTERN_VISITS` extensions per type and
    :data:`FULL_PATTERN_TASKS` tasks per pattern. It stops early, with the patterns listed so
    far, when ``clock`` runs out (a deterministic clock is charged :data:`FULL_PATTERN_VISIT_WORK`
    per extension): where full patterns are rare (several dimensions, many classes) the search
    can visit its whole allowance and find few.
    """
    out: list[tuple[int, np.ndarray]] = []
    total = (classes.count[:, None] * classes.k).sum(axis=0)
    # A class of no demand fills nothing: left to the best fit.
    fitting = types.fits(classes) & classes.k.any(axis=1)[:, None]
    for t in np.argsort(types.cost, kind="stable").tolist():
        room = types.room[t]
        fits = fitting[:, t]
        if not fits.any():
            continue
        d = int(np.argmax(total / np.maximum(room, 1)))
        cand = np.flatnonzero(fits & (classes.k[:, d] > 0))
        cand = cand[np.argsort(-classes.k[cand, d], kind="stable")]
        # Plain Python lists in the search: per extension, NumPy's call overhead was most of the time.
        size = classes.k[cand, d]
        most = np.minimum(classes.count[cand], room[d] // size).tolist()
        ascending = size[::-1].tolist()
        demand = classes.k[cand].tolist()
        n, smallest = len(ascending), ascending[0]
        taken = [0] * n
        seen: set[bytes] = set()
        visits = 0

        def fits_in(j: int, left: list[int]) -> bool:
            return taken[j] < most[j] and all(k <= room_left for k, room_left in zip(demand[j], left))

        def emit() -> None:
            counts = np.zeros(len(classes.count), dtype=np.int64)
            counts[cand] = taken
            key = counts.tobytes()
            if key not in seen:
                seen.add(key)
                out.append((t, counts))

        def extend(first: int, left: list[int], items: int) -> bool:
            """List the full patterns that extend ``taken``; False once this type's listing must stop (the
            limit, the visit allowance or the clock)."""
            nonlocal visits
            if len(out) >= limit:
                return False
            # Tasks that complete the pattern: size in (left_d − slack − 1, left_d], from ``first`` on.
            slack = 0 if classes.exact else items
            lo = n - bisect.bisect_right(ascending, left[d])
            hi = n - bisect.bisect_right(ascending, left[d] - slack - 1)
            for j in range(max(first, lo), hi):
                if fits_in(j, left):
                    taken[j] += 1
                    emit()
                    taken[j] -= 1
                    if len(out) >= limit:
                        return False
            if items + 1 >= FULL_PATTERN_TASKS:
                return True
            # Tasks that leave room for at least one more: size ≤ left_d − the smallest size.
            roomy = n - bisect.bisect_right(ascending, left[d] - smallest)
            for j in range(max(first, roomy), n):
                visits += 1
                if visits > FULL_PATTERN_VISITS:
                    return False
                if clock is not None and visits % 256 == 0:
                    clock.spend(256 * FULL_PATTERN_VISIT_WORK)
                    if clock.expired():
                        return False
                if fits_in(j, left):
                    taken[j] += 1
                    going = extend(j, [x - k for x, k in zip(left, demand[j])], items + 1)
                    taken[j] -= 1
                    if not going:
                        return False
            return True

        extend(0, room.tolist(), 0)
        if len(out) >= limit or (clock is not None and clock.expired()):
            break
    return out


def _fill(problem: PlacementProblem, classes: Classes, types: HostTypes, col_type: np.ndarray, counts: np.ndarray,
          used: np.ndarray, clock: SearchClock) -> np.ndarray | None:
    """Real tasks into the chosen patterns' hosts, with exact checks; the rest by best fit (cheapest new host last).

    None when a task fits no host left, or when ``clock`` (the fill's own, as long as the integer program it
    follows was given) runs out during the best fit: it scans every host per task (at 37,000 tasks whose
    patterns left 24,000 out: 13 s), and a packing that costs more than its share is not worth waiting for.
    A deterministic clock is charged :data:`FILL_WORK_PER_HOST` per host scanned.
    """
    assign = problem.current.copy()
    load = np.zeros_like(problem.capacity)
    movable = problem.movable
    np.add.at(load, problem.current[~movable], problem.demand[~movable])
    overloaded = initially_overloaded(problem)
    placed = ~movable.copy()
    size = (problem.demand / problem.capacity.max(axis=0)).sum(axis=1)
    members = np.flatnonzero(classes.of_task >= 0)
    members = members[np.lexsort((-size[members], classes.of_task[members]))]
    starts = np.searchsorted(classes.of_task[members], np.arange(len(classes.count) + 1))
    by_class = [members[starts[c]:starts[c + 1]].tolist() for c in range(len(classes.count))]  # largest first
    first = [0] * len(classes.count)
    here: dict[tuple[int, int], list[int]] = {}
    for x in members.tolist():
        here.setdefault((int(problem.current[x]), int(classes.of_task[x])), []).append(x)

    def fits(t: int, h: int) -> bool:
        if overloaded[h]:
            return problem.current[t] == h
        allowed = problem.eligible[t, problem.host_arch[h]] or problem.current[t] == h
        return bool(allowed and (load[h] + problem.demand[t] <= problem.capacity[h] + TOLERANCE).all())

    def put(t: int, h: int) -> None:
        assign[t] = h
        load[h] += problem.demand[t]
        placed[t] = True

    held = np.bincount(problem.current[movable], minlength=problem.n_hosts)
    for t in range(len(types.cost)):
        hosts = types.hosts[t]
        queue = iter(hosts[np.argsort(-held[hosts], kind="stable")].tolist())  # hosts holding tasks today first: fewer moves
        for j in np.flatnonzero((col_type == t) & (used > 0)):
            for _ in range(used[j]):
                h = next(queue)
                for c in np.flatnonzero(counts[j]).tolist():
                    want = int(counts[j, c])
                    # The class's tasks already on h stay; then the largest that still fit.
                    for x in here.get((h, c), []):
                        if want and not placed[x] and fits(x, h):
                            put(x, h)
                            want -= 1
                    pending, i = by_class[c], first[c]
                    while i < len(pending) and placed[pending[i]]:  # skip the class's placed prefix once
                        i += 1
                    first[c] = i
                    for x in itertools.islice(pending, i, None):
                        if want == 0:
                            break
                        if not placed[x] and fits(x, h):
                            put(x, h)
                            want -= 1
    rest = np.flatnonzero(~placed)
    open_hosts = np.bincount(assign[placed], minlength=problem.n_hosts) > 0
    limit = problem.capacity + TOLERANCE
    for i, t in enumerate(rest[np.argsort(-size[rest], kind="stable")]):
        clock.spend(FILL_WORK_PER_HOST * problem.n_hosts)
        if i % 64 == 63 and clock.expired():
            log.info("pattern packing: out of time after placing %d of the %d tasks outside full patterns; no packing", i, len(rest))
            return None
        ok = fits_within(load, problem.demand[t], limit)
        here = problem.current[t]
        stays = ok[here]  # its own host needs no eligibility and may be over capacity today
        ok &= problem.eligible[t, problem.host_arch] & ~overloaded
        ok[here] = stays
        opened = np.flatnonzero(ok & open_hosts)
        if len(opened):  # best fit, as the engine's
            h = opened[np.argmin(leftover_score((problem.capacity[opened] - load[opened] - problem.demand[t]) / problem.capacity[opened]))]
        else:
            closed = np.flatnonzero(ok)
            if not len(closed):
                return None
            h = closed[np.argmin(problem.primary_cost[closed])]
        put(t, h)
        open_hosts[h] = True
    return assign
