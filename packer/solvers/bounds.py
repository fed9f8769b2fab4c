"""Bounds that make every solve's gap visible (an LP solved with GLOP, a small MILP with HiGHS, both through OR-Tools MathOpt).

* :func:`freeable_cost_bound` — move-bounded repacking: an **upper bound on the
  primary cost (TCO or hosts) that the move budget can free**. A host's cost is
  saved only when every task leaves it, and the tasks leaving must fit into the
  room left on hosts that stay open or are newly opened. The LP relaxes which hosts
  to empty (``0 ≤ y_h ≤ 1``) and how tasks split across hosts, but not *where* room
  is: room in one dimension on hosts full in another holds nothing. Tasks form
  classes c (pool, eligibility, demand ``d_c``, rounded down on a grid where they
  are many: :data:`MAX_FREEABLE_PAIRS`); hosts that may receive form groups g (pool,
  architecture, capacity, and the room they have left per dimension on
  :data:`ROOM_LEVELS` levels), each with its room ``R_g`` and its largest host
  room ``L_g``; identical empty hosts form groups k that may be opened (``z_k``):

      max  Σ_h c_h y_h − Σ_k c_k z_k
      s.t. Σ_g (F_cg + P_cg) + Σ_k O_ck = Σ_h n_hc y_h + Σ_g M_cg      ∀c  (what leaves arrives)
           Σ_c (F_cg + P_cg) d_c + Σ_{h∈g} y_h room_h ≤ R_g + Σ_c M_cg u_c   ∀g,d
           Σ_c P_cg d_c ≤ Σ_c M_cg (u_c + L_g)                          ∀g,d
           Σ_c O_ck d_c ≤ z_k cap_k                                       ∀k,d
           Σ_h y_h (load_h + room_h) − Σ_k z_k cap_k ≤ Σ_h room_h         ∀pool,d
           Σ_h n_h y_h + Σ_cg M_cg ≤ budget                              (moves)

  over emptiable hosts h (occupied, no pinned task, at most ``budget`` tasks).
  ``F_cg`` places class-c tasks on group g where c fits ``L_g``, ``P_cg`` where it
  does not: such a task lands only on a host that a move off it (``M_cg``, a task
  that leaves a host that stays open, making at most ``u_c`` room, the class's
  largest exact demand) made room on, so at most one such host per move, each with
  at most ``L_g`` room. A class goes only where it is eligible and fits an empty
  host. A host over capacity today may receive once moves off it bring it within
  capacity: its room is what it has left in the dimensions it is not over. Room and
  capacity count :data:`~packer.model.metrics.TOLERANCE` as the rules do. A rule that
  caps a host's load besides capacity (:meth:`~packer.rules.base.Rule.load_limits`: the
  ``--min-rp`` guard, in RP load) adds columns j of room, its limit less its load today,
  grouped with the rest: per receiving group, ``Σ_c (F_cg + P_cg) x_cj + Σ_{h∈g} y_h
  room_hj ≤ R_gj + Σ_c M_cg (v_cj + r_gj)`` with ``x_cj`` the class's load (rounded down with
  its demand), ``v_cj`` its largest exact one and ``r_gj`` the group's largest rise of the
  limit per task leaving (at most all movable tasks' load, which frees the row); per
  opened group, ``Σ_c O_ck x_cj ≤ z_k limit_kj``. Any plan within the budget gives such a
  solution, so the bound is valid; it relaxes item sizes within a group, spread, the
  tasks-at-risk guard, and each task's own limit where it arrives.
  On the slack-scarce 10,000-task trace of issue 11 it is 403 where the room summed
  per dimension over the whole fleet (the last row alone) gave 478.

  With ``soft=True`` the goals' soft-capacity terms (the interference term) are charged
  against what is freed: per soft column j and receiving group g, the load beyond the
  group's summed capacity, ``e_gj ≥ Σ_c (F_cg + P_cg) s_cj + X_gj − Σ_{h∈g} y_h x_hj −
  Σ_c M_cg w_cj`` with ``x_hj`` host h's soft load less its capacity today, ``X_gj`` their sum
  over g, ``s_cj`` the class's soft load (rounded down with its demand) and ``w_cj`` its
  largest exact one; per opened group ``e_kj ≥ Σ_c O_ck s_cj − z_k cap_kj``; each ``e`` priced
  at the least price among the group's hosts in the objective. Valid because a host's term
  ``price_h · max(0, load_h − cap_h)`` is at least that price times ``load_h − cap_h``, and
  every occupied host is in a receiving group. The objective of any plan within the budget
  is then at least today's primary cost less this LP's value. Hosts beyond a soft capacity
  today form receiving groups of their own (37,000 tasks, 400 moves, P99 Sens: 28,776 →
  29,028).

* :func:`repack_cost_bound` — full repack: a **lower bound on the primary cost of
  any valid placement**. ``x[t,a]`` is the fraction of task t placed on architecture
  a (only where t may run) and ``n_a`` the number of hosts of a opened (integer, a
  MILP with few integer variables):

      min  Σ_a c_a n_a
      s.t. Σ_a x[t,a] = 1 ∀t;   Σ_t x[t,a] demand[t,d] ≤ n_a cap[a,d] ∀a,d;   P_a ≤ n_a ≤ N_a

  Identical tasks (same eligibility and demand) share one variable, which loses
  nothing: averaging their fractions keeps every constraint.

  with ``P_a`` the hosts of a that hold pinned tasks (they cannot close) and
  ``N_a`` the hosts of a in the fleet. A rule's load limits besides capacity (as above)
  are further dimensions d, ``cap[a,d]`` the most any host of a may ever carry: its limit
  risen once per task it holds today. A task's signature includes its current
  architecture (it may always stay), and an architecture's capacity is raised to
  cover any host that is over capacity today (it may keep that load), matching the
  validity rules of :mod:`packer.model.metrics`. Valid because any placement gives such
  a (f, n); it relaxes how tasks split across hosts of one architecture.

  With ``soft=True`` it bounds the primary cost plus the goals' soft-capacity terms
  (:meth:`~packer.rules.base.Goal.soft_capacity`: the interference term, sensitivity demand
  priced beyond each host's sensitivity capacity). Each is a further dimension d whose load
  may exceed ``n_a cap[a,d]`` by ``e[a,d] ≥ 0`` at the price ``p[a,d]`` per unit, added to the
  objective; ``cap[a,d]`` is the largest soft capacity and ``p[a,d]`` the least price among the
  hosts of a. Valid: a host's term ``price_h · max(0, L_h − cap_h)`` is at least
  ``p · max(0, L_h − cap)``, and summed over the n_a hosts of a that hold tasks at least
  ``p · (Σ_h L_h − n_a cap)``. On the paper-shaped 1,000-task trace under P99 Sens it is 459.4
  where the primary cost's bound is 300 (the plan: 462.7).

  Profiled demands are nearly all distinct, and the model grows with the distinct
  rows. Above :data:`MAX_REPACK_ROWS` of them, demands are **rounded down** to the
  coarsest grid (a power-of-two fraction of the largest capacity per dimension, at most
  1/:data:`FINEST_REPACK_GRID`) that brings them under it: a relaxation, so the MILP
  stays a valid bound, but a looser one. The LP relaxation of the rounded model gives
  prices λ ≥ 0 of the capacity rows, and Lagrange's bound at λ over the *exact*
  demands, ``Σ_t min_a λ_a·demand_t + Σ_a min(P_a r_a, N_a r_a)`` with
  ``r_a = c_a − λ_a·cap_a``, is valid for any λ and recovers most of the loss; the
  better of the two is the bound. Both are deterministic (solved to optimality).
  Measured on 37,000 profiled tasks: 34,000 distinct rows, 39 s for the LP alone and
  a MILP bound of 12,562; rounded to 1/128, 5,700 rows, 1.9 s in all, the rounded MILP
  12,221 and Lagrange's bound 12,558.1.
"""
from __future__ import annotations

import bisect
import datetime
import logging
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from ortools.math_opt import model_pb2
from ortools.math_opt.python import errors as mathopt_errors
from ortools.math_opt.python import mathopt
from ortools.util.python import solve_interrupter
from pybind11_abseil.status import StatusNotOk

from packer import interrupt
from packer.model.metrics import TOLERANCE, host_loads, initially_overloaded
from packer.model.problem import PlacementProblem
from packer.rules.base import Goal

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArchMix:
    """A full-repack MILP's solution (:func:`repack_cost_bound`) that :func:`~packer.solvers.engine.construct_repack` follows.

    ``hosts`` (A,): hosts of each architecture it opens. ``task_arch`` (T,): the architecture
    each task's LP share mostly uses (-1: none). ``prepaid``: the MILP weighed those hosts
    against the interference term, so a construction takes them as open and spreads tasks
    over all of them rather than filling the fewest.
    """

    hosts: np.ndarray
    task_arch: np.ndarray
    prepaid: bool = False


@dataclass(frozen=True)
class CostBound:
    """``value`` in cost units (or hosts, for ``goal="hosts"``); ``kind`` says what it bounds; ``exact`` if the LP solved to optimality."""

    value: float
    kind: str
    exact: bool
    detail: dict
    #: Full repack only: the MILP's solution, for a construction to follow.
    mix: ArchMix | None = None


@dataclass(frozen=True)
class _Solution:
    """What :func:`minimize` found: ``x`` (None without a solution), its ``objective``, a proven lower ``bound`` and the termination;
    for an LP solved to optimality, ``duals``: one per row, MathOpt's sign (≤ 0 on a binding ≤ row of a minimization)."""

    optimal: bool
    x: np.ndarray | None
    objective: float
    bound: float
    reason: str
    duals: np.ndarray | None = None
    #: The solver stopped with an error of its own (:class:`SolverFailed`), not at a limit.
    failed: bool = False


def minimize(cost: np.ndarray, matrix: tuple[np.ndarray, np.ndarray, np.ndarray], row_bounds: tuple[np.ndarray, np.ndarray],
             var_bounds: tuple[np.ndarray, np.ndarray], integer: np.ndarray, solver: mathopt.SolverType,
             time_limit: float | None = None, relative_gap: float = 0.0, node_limit: int | None = None,
             presolve: bool = True) -> _Solution:
    """Minimize ``cost·x`` s.t. ``row_lb ≤ A x ≤ row_ub``, ``var_lb ≤ x ≤ var_ub``, ``x`` integer where ``integer``.

    ``matrix`` is ``A`` as (row, column, coefficient) arrays; ``row_bounds`` and
    ``var_bounds`` are (lower, upper) arrays; ``time_limit`` in seconds. The model is
    handed to MathOpt as a proto built from the arrays, so a large LP costs no Python
    loop per variable. A MILP is solved to ``relative_gap`` (default zero, so "optimal"
    is exact), or until ``node_limit`` branch-and-bound nodes. ``presolve=False`` turns the
    solver's presolve off (HiGHS's MIP presolve does not watch the time limit).
    """
    rows, cols, coefs = matrix
    (row_lb, row_ub), (var_lb, var_ub) = row_bounds, var_bounds
    proto = model_pb2.ModelProto()
    n = len(cost)
    proto.variables.ids.extend(range(n))
    proto.variables.lower_bounds.extend(np.asarray(var_lb, dtype=float).tolist())
    proto.variables.upper_bounds.extend(np.asarray(var_ub, dtype=float).tolist())
    proto.variables.integers.extend(np.asarray(integer, dtype=bool).tolist())
    used = np.flatnonzero(cost)
    proto.objective.linear_coefficients.ids.extend(used.tolist())
    proto.objective.linear_coefficients.values.extend(np.asarray(cost, dtype=float)[used].tolist())
    proto.linear_constraints.ids.extend(range(len(row_lb)))
    proto.linear_constraints.lower_bounds.extend(np.asarray(row_lb, dtype=float).tolist())
    proto.linear_constraints.upper_bounds.extend(np.asarray(row_ub, dtype=float).tolist())
    # The proto wants the matrix's non-zeros in row-major order.
    keep = np.flatnonzero(coefs)
    order = keep[np.lexsort((cols[keep], rows[keep]))]
    proto.linear_constraint_matrix.row_ids.extend(rows[order].tolist())
    proto.linear_constraint_matrix.column_ids.extend(cols[order].tolist())
    proto.linear_constraint_matrix.coefficients.extend(coefs[order].tolist())
    params = mathopt.SolveParameters(relative_gap_tolerance=relative_gap if np.any(integer) else None, node_limit=node_limit,
                                     presolve=None if presolve else mathopt.Emphasis.OFF,
                                     time_limit=None if time_limit is None else datetime.timedelta(seconds=time_limit))
    model = mathopt.Model.from_model_proto(proto)
    try:
        result = solve_mathopt(model, solver, params=params)
    except SolverFailed as error:
        log.warning("%s failed (%s): no solution and no bound from it", solver.name, error)
        return _Solution(optimal=False, x=None, objective=np.inf, bound=-np.inf, reason=f"{solver.name} failed: {error}", failed=True)
    reason = result.termination.reason
    optimal = reason == mathopt.TerminationReason.OPTIMAL
    x = np.array(result.variable_values(list(model.variables()))) if result.has_primal_feasible_solution() else None
    duals = np.array(result.dual_values(list(model.linear_constraints()))) if optimal and not np.any(integer) else None
    return _Solution(optimal=optimal, x=x, objective=float(result.objective_value()) if x is not None else np.inf,
                     bound=float(result.termination.objective_bounds.dual_bound), reason=reason.name, duals=duals)


#: Levels per dimension of the room left on a host (as a share of its capacity) by which :func:`freeable_cost_bound`
#: groups the hosts that may receive tasks: hosts of one group pool their room in the LP.
ROOM_LEVELS = 4
#: Most (task class, receiving group) pairs in :func:`freeable_cost_bound`'s LP: above, demands are rounded down to a coarser grid.
MAX_FREEABLE_PAIRS = 30_000
#: Seconds :func:`freeable_cost_bound`'s LP may take before the trivial bound stands in (measured with HiGHS: 0.6-2.9 s on the
#: traces, at most 30,000 class-group pairs). Not the solve's --time-limit: verify recomputes the bound without one.
FREEABLE_LP_SECONDS = 60.0


def freeable_cost_bound(problem: PlacementProblem, budget: int | None = None, groups: np.ndarray | None = None,
                        soft: bool = False) -> CostBound:
    """Upper bound on the primary cost that at most ``budget`` moves (default: the problem's) can free (module doc).

    ``soft``: an upper bound on that cost less the goals' soft-capacity terms after the moves (the interference
    term, :meth:`~packer.rules.base.Goal.soft_capacity`; module doc) instead; with none, the same bound.

    ``groups`` (H,): a group code per host (pools, :mod:`packer.rules.pools`) when tasks
    may not leave their host's group: classes, receiving hosts and the total rows are then
    per group (a tighter bound, still valid), and ``detail["by_group"]`` says, per group code, how
    many moves and how much cost the LP's solution spends and frees there (the move budget
    split that maximizes the LP: every group's marginal value of a move is the same).
    """
    budget = problem.max_moves if budget is None else budget
    counts = np.bincount(problem.current, minlength=problem.n_hosts)
    limit = np.inf if budget is None else budget
    emptiable = np.flatnonzero((counts > 0) & ~problem.pinned_hosts & (counts <= limit))
    group = np.zeros(problem.n_hosts, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    n_groups = int(group.max(initial=-1)) + 1
    nothing = {"by_group": [{"moves": 0.0, "freed": 0.0} for _ in range(n_groups)]} if groups is not None else {}
    if len(emptiable) == 0 or limit == 0:
        return CostBound(0.0, "freeable", True, {"emptiable_hosts": int(len(emptiable)), **nothing})
    lp = _FreeableLP(problem, emptiable, counts, group, budget, soft)
    # HiGHS: GLOP cycled without end on a 100-column instance of this LP (found in review); HiGHS solved it in 0.01 s.
    # HiGHS in turn stopped with an error of its own on 1 in ~6,000 random instances (SolverFailed): GLOP then.
    args = (lp.cost, lp.matrix(), (lp.row_lb, lp.row_ub), (np.zeros(len(lp.cost)), lp.var_ub), np.zeros(len(lp.cost), dtype=bool))
    solution = minimize(*args, mathopt.SolverType.HIGHS, time_limit=FREEABLE_LP_SECONDS)
    if solution.failed:
        log.warning("HiGHS failed on the freeable bound's LP (%s); solving it with GLOP", solution.reason)
        solution = minimize(*args, mathopt.SolverType.GLOP, time_limit=FREEABLE_LP_SECONDS)
    if not solution.optimal:
        # Fall back to the trivial bound: every emptiable host's cost.
        return CostBound(float(problem.primary_cost[emptiable].sum()), "freeable", False, {"lp_status": solution.reason, **nothing})
    detail = {"emptiable_hosts": len(emptiable), "empty_hosts": int((counts == 0).sum()), "task_classes": lp.n_classes,
              "receiving_groups": lp.n_receiving, **({"demand_grid": lp.grid} if lp.grid is not None else {})}
    if groups is not None:
        moves, freed = lp.by_group(solution.x, n_groups)
        detail["by_group"] = [{"moves": float(m), "freed": float(f)} for m, f in zip(moves, freed)]
    return CostBound(-solution.objective, "freeable", True, detail)


class _Rows:
    """An LP's rows appended family by family: the non-zeros as (row, column, coefficient) arrays and each row's bounds."""

    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.lb: list[float] = []
        self.ub: list[float] = []

    def add(self, row, col, val) -> None:
        """Coefficients ``val`` at ``(row, col)``, ``row`` counted from the first row of the family not yet closed."""
        self.rows.append(np.asarray(row) + len(self.lb))
        self.cols.append(np.asarray(col))
        self.vals.append(np.broadcast_to(np.asarray(val, dtype=float), np.shape(col)))

    def close(self, upper, lower: float = -np.inf) -> None:
        """Ends a family of ``len(upper)`` rows: ``lower ≤ row ≤ upper`` (an ``inf`` upper bound leaves a row free)."""
        upper = np.asarray(upper, dtype=float)
        self.lb += [lower] * len(upper)
        self.ub += upper.tolist()

    def matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.concatenate(self.rows), np.concatenate(self.cols), np.concatenate(self.vals)


@dataclass(frozen=True)
class _ReceivingGroups:
    """The occupied hosts of :func:`freeable_cost_bound`'s LP in G groups (module doc): per group, the room of its
    hosts summed (``room``, (G, D) capacity units; ``x_room``, (G, J) units of the further limits) and the largest of
    one host (``largest``), the largest rise of a limit per task leaving (``rise``), the soft load beyond capacity today
    (``excess``, (G, S), summed) and the least price of a unit of it (``price``)."""

    of: np.ndarray  #: (H,) each host's group, -1 for a host that holds no task
    pool: np.ndarray
    arch: np.ndarray
    capacity: np.ndarray
    room: np.ndarray
    largest: np.ndarray
    x_room: np.ndarray
    rise: np.ndarray
    excess: np.ndarray
    price: np.ndarray


def _receiving_groups(p: PlacementProblem, occupied: np.ndarray, group: np.ndarray, room: np.ndarray, x_room: np.ndarray,
                      x_scale: np.ndarray, x_rise: np.ndarray, excess: np.ndarray, price: np.ndarray) -> _ReceivingGroups:
    """Occupied hosts grouped by pool, architecture, capacity and the shape of their room (:data:`ROOM_LEVELS` per
    dimension, further limits in units of ``x_scale``); with soft terms, apart where they are beyond a soft capacity
    today (``excess`` > 0), so that the room of the others does not absorb their excess. Arrays per host (H, ·)."""
    D = len(p.dims)
    share = np.divide(room[occupied], p.capacity[occupied], out=np.ones((len(occupied), D)), where=p.capacity[occupied] > 0)
    shape = np.minimum(np.floor(np.hstack([share, x_room[occupied] / x_scale]) * ROOM_LEVELS), ROOM_LEVELS)
    keys, of = unique_rows(np.column_stack([group[occupied], p.host_arch[occupied], p.capacity[occupied], shape,
                                            excess[occupied] > 0]))
    G = len(keys)
    host_group = np.full(p.n_hosts, -1)
    host_group[occupied] = of

    def combined(values: np.ndarray, combine: np.ufunc) -> np.ndarray:
        out = np.zeros((G, values.shape[1]))
        combine.at(out, of, values[occupied])
        return out

    g_excess, g_price = _by_group(excess[occupied], price[occupied], of, G, np.add)
    return _ReceivingGroups(of=host_group, pool=keys[:, 0].astype(np.int64), arch=keys[:, 1].astype(np.int64),
                            capacity=keys[:, 2:2 + D], room=combined(room, np.add), largest=combined(room, np.maximum),
                            x_room=combined(x_room, np.add), rise=combined(x_rise, np.maximum), excess=g_excess, price=g_price)


@dataclass(frozen=True)
class _OpenableGroups:
    """The empty hosts of :func:`freeable_cost_bound`'s LP in K groups of identical hosts: per group its pool,
    architecture, ``capacity`` (with the tolerance), primary ``cost``, ``x_capacity`` (room under the further limits),
    ``count`` of hosts, and its largest soft capacity and least price of a unit beyond it (``soft``, ``price``)."""

    pool: np.ndarray
    arch: np.ndarray
    capacity: np.ndarray
    cost: np.ndarray
    x_capacity: np.ndarray
    count: np.ndarray
    soft: np.ndarray
    price: np.ndarray


def _openable_groups(p: PlacementProblem, empty: np.ndarray, group: np.ndarray, x_room: np.ndarray, soft: np.ndarray,
                     price: np.ndarray) -> _OpenableGroups:
    """Empty hosts grouped by pool, architecture, capacity, cost and room under the further limits (arrays per host)."""
    D = len(p.dims)
    keys, of = unique_rows(np.column_stack([group[empty], p.host_arch[empty], p.capacity[empty], p.primary_cost[empty],
                                            x_room[empty]]))
    K = len(keys)
    k_soft, k_price = _by_group(soft[empty], price[empty], of, K, np.maximum)
    return _OpenableGroups(pool=keys[:, 0].astype(np.int64), arch=keys[:, 1].astype(np.int64), capacity=keys[:, 2:2 + D] + TOLERANCE,
                           cost=keys[:, 2 + D], x_capacity=keys[:, 3 + D:], count=np.bincount(of, minlength=K), soft=k_soft,
                           price=k_price)


@dataclass(frozen=True)
class _TaskClasses:
    """The movable tasks of :func:`freeable_cost_bound`'s LP in C classes (pool, eligibility, demand rounded down on
    ``grid``, None where exact): each class's ``demand`` (C, D), load under the further limits ``x`` (C, J) and soft
    load ``s`` (C, S), rounded with it, and the largest exact ones of a task in it (``largest``, ``x_largest``,
    ``s_largest``: the most room a move of one of its tasks makes)."""

    tasks: np.ndarray  #: the movable tasks
    of: np.ndarray  #: each movable task's class
    pool: np.ndarray
    eligible: np.ndarray  #: (C, A)
    demand: np.ndarray
    x: np.ndarray
    s: np.ndarray
    largest: np.ndarray
    x_largest: np.ndarray
    s_largest: np.ndarray
    grid: int | None

    def may_go(self, pool: np.ndarray, arch: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        """(C, n): where a class may go among n groups of hosts: its pool, an architecture it is eligible for, and it fits
        one of their hosts empty (``capacity`` (n, D))."""
        return ((self.pool[:, None] == pool[None, :]) & self.eligible[:, arch]
                & (self.demand[:, None, :] <= capacity[None, :, :] + TOLERANCE).all(axis=2))


def _task_classes(p: PlacementProblem, group: np.ndarray, x_demand: np.ndarray, s_demand: np.ndarray, scale: np.ndarray,
                  max_classes: int) -> _TaskClasses:
    """Movable tasks by pool (``group`` of their host), eligibility and demand, rounded down (a relaxation) so that at
    most about ``max_classes`` remain; ``scale`` (H, D + J + S): the capacity each column is rounded against."""
    D, A, J = len(p.dims), len(p.arch_names), x_demand.shape[1]
    tasks = np.flatnonzero(p.movable)
    signature = np.column_stack([group[p.current[tasks]], p.eligible[tasks]])
    exact = np.hstack([p.demand[tasks], x_demand[tasks], s_demand[tasks]])
    demand, grid = _rounded_demand(signature, exact, scale, max_classes)
    keys, of = unique_rows(np.column_stack([signature, demand]))
    largest = np.zeros((len(keys), exact.shape[1]))
    np.maximum.at(largest, of, exact)
    return _TaskClasses(tasks=tasks, of=of, pool=keys[:, 0].astype(np.int64), eligible=keys[:, 1:1 + A].astype(bool),
                        demand=keys[:, 1 + A:1 + A + D], x=keys[:, 1 + A + D:1 + A + D + J], s=keys[:, 1 + A + D + J:],
                        largest=largest[:, :D], x_largest=largest[:, D:D + J], s_largest=largest[:, D + J:], grid=grid)


class _FreeableLP:
    """The LP of :func:`freeable_cost_bound` (module doc) as arrays: columns in blocks, rows in families.

    Columns: ``y`` per emptiable host (the share emptied), ``z`` per group of identical
    empty hosts (how many opened), and per task class c: ``F[c,g]`` / ``P[c,g]`` tasks
    placed on occupied receiving group g where c fits / does not fit g's largest room,
    ``O[c,k]`` on opened group k, ``M[c,g]`` tasks moved off hosts of g that stay open;
    ``e`` the soft load beyond capacity per (receiving group, soft column), then per
    (opened group, soft column). ``pairs`` holds the (class, group) of each column of F, P, O and M.
    """

    def __init__(self, problem: PlacementProblem, emptiable: np.ndarray, counts: np.ndarray, group: np.ndarray, budget: int | None,
                 soft: bool = False) -> None:
        p = self.problem = problem
        self.emptiable = emptiable
        loads = host_loads(p, p.current)
        # A host over capacity today may receive once what leaves it brings it within capacity (packer.rules.capacity):
        # its room in a dimension it is over is none, in the others what is left. Capacity holds to within TOLERANCE.
        self.room = np.clip(p.capacity - loads, 0, None) + TOLERANCE
        occupied, empty = np.flatnonzero(counts > 0), np.flatnonzero(counts == 0)
        # Loads the rules cap besides capacity (e.g. the RP guard's): room in further columns, rows of their own.
        self.x_demand, self.x_room, x_rise = _room_beyond_capacity(p)
        x_scale = _column_scale(self.x_room[occupied])
        # Soft capacities (the interference term), priced beyond: rows of their own, per group that may receive or open.
        s_demand, s_cap, s_price = _soft_capacities(p, p.goals if soft else ())
        s_load = np.zeros((p.n_hosts, s_demand.shape[1]))
        np.add.at(s_load, p.current, s_demand)
        with np.errstate(invalid="ignore"):
            self.excess = s_load - s_cap  # soft load beyond capacity today (below: negative); -inf where a host has no term
        self.receiving = _receiving_groups(p, occupied, group, self.room, self.x_room, x_scale, x_rise, self.excess, s_price)
        self.openable = _openable_groups(p, empty, group, self.x_room, s_cap, s_price)
        G, K, S = len(self.receiving.pool), len(self.openable.pool), s_demand.shape[1]
        scale = np.hstack([p.capacity, np.broadcast_to(x_scale, self.x_room.shape), np.broadcast_to(_column_scale(s_cap), s_cap.shape)])
        self.classes = _task_classes(p, group, self.x_demand, s_demand, scale, max(1, MAX_FREEABLE_PAIRS // max(G + K, 1)))
        self.n_classes, self.n_receiving, self.grid = len(self.classes.pool), G, self.classes.grid

        classes, receiving, openable = self.classes, self.receiving, self.openable
        to_receiving = classes.may_go(receiving.pool, receiving.arch, receiving.capacity)
        fits_room = (classes.demand[:, None, :] <= receiving.largest[None, :, :]).all(axis=2)
        present = np.zeros((self.n_classes, G))
        np.add.at(present, (classes.of, receiving.of[p.current[classes.tasks]]), 1)
        self.pairs = {"F": np.nonzero(to_receiving & fits_room), "P": np.nonzero(to_receiving & ~fits_room),
                      "O": np.nonzero(classes.may_go(openable.pool, openable.arch, openable.capacity)), "M": np.nonzero(present)}
        self.blocks = {"y": len(emptiable), "z": K, **{name: len(c) for name, (c, _) in self.pairs.items()}, "e": (G + K) * S}
        y, z, _, _, _, M, e = self._columns()
        self.cost = np.zeros(sum(self.blocks.values()))
        self.cost[y] = -p.primary_cost[emptiable]
        self.cost[z] = openable.cost
        self.cost[e] = np.concatenate([receiving.price.ravel(), openable.price.ravel()])
        self.var_ub = np.full(len(self.cost), np.inf)
        self.var_ub[y] = 1.0
        self.var_ub[z] = openable.count
        self.var_ub[M] = present[self.pairs["M"]]

        rows = self._rows = _Rows()
        self._add_flow_rows(rows)
        self._add_receiving_rows(rows)
        self._add_opened_rows(rows)
        pools = int(group.max(initial=0)) + 1
        pool_room = np.zeros((pools, len(p.dims)))
        np.add.at(pool_room, group[occupied], self.room[occupied])
        for d in range(len(p.dims)):
            # Per pool, exact demands: what leaves the emptied hosts fits the room of occupied hosts and of the empty ones opened.
            rows.add(group[emptiable], y, loads[emptiable, d] + self.room[emptiable, d])
            rows.add(openable.pool, z, -openable.capacity[:, d])
            rows.close(pool_room[:, d])
        if budget is not None:
            rows.add(np.zeros(len(y), dtype=np.int64), y, counts[emptiable])
            rows.add(np.zeros(len(M), dtype=np.int64), M, 1.0)
            rows.close([float(budget)])
        self.row_lb, self.row_ub = np.array(rows.lb), np.array(rows.ub)
        self._host_pool, self._moves = group[emptiable], counts[emptiable].astype(float)

    def _columns(self) -> list[np.ndarray]:
        edges = np.cumsum([0, *self.blocks.values()])
        return [np.arange(a, b) for a, b in zip(edges[:-1], edges[1:])]

    def _add_flow_rows(self, rows: _Rows) -> None:
        """Per class: what arrives = what leaves (the emptied hosts' tasks and the tasks moved off open hosts)."""
        y, _, F, P, O, M, _ = self._columns()
        tasks, of = self.classes.tasks, self.classes.of
        E = len(self.emptiable)
        on_emptiable = np.full(self.problem.n_hosts, -1)
        on_emptiable[self.emptiable] = np.arange(E)
        host_of = on_emptiable[self.problem.current[tasks]]
        here = host_of >= 0
        pair, leaving = np.unique(of[here].astype(np.int64) * E + host_of[here], return_counts=True)
        lc, lh = np.divmod(pair, E)
        for name, cols, sign in (("F", F, 1), ("P", P, 1), ("O", O, 1), ("M", M, -1)):
            rows.add(self.pairs[name][0], cols, sign)
        rows.add(lc, y[lh], -leaving)
        rows.close(np.zeros(self.n_classes), lower=0.0)

    def _add_receiving_rows(self, rows: _Rows) -> None:
        """Per receiving group: its room per dimension and under each further limit, room for the tasks that fit no host's
        room as it is today, and its soft load beyond capacity."""
        y, _, F, P, _, M, e = self._columns()
        c, g, emptiable = self.classes, self.receiving, self.emptiable
        (f_c, f_g), (p_c, p_g), (m_c, m_g) = self.pairs["F"], self.pairs["P"], self.pairs["M"]
        e_group = g.of[emptiable]
        for d in range(c.demand.shape[1]):
            # A receiving group's room: its hosts that stay open, and what moves off them.
            rows.add(f_g, F, c.demand[f_c, d])
            rows.add(p_g, P, c.demand[p_c, d])
            rows.add(e_group, y, self.room[emptiable, d])
            rows.add(m_g, M, -c.largest[m_c, d])
            rows.close(g.room[:, d])
        # A group's limit rises at most by its hosts' largest rise per task leaving, charged on every move off the group. A rise
        # above all the load that may arrive (or unknown: inf) is capped there: one move then frees the row, as it may.
        rise = np.minimum(g.rise, self.x_demand[c.tasks].sum(axis=0))
        for j in range(c.x.shape[1]):
            rows.add(f_g, F, c.x[f_c, j])
            rows.add(p_g, P, c.x[p_c, j])
            rows.add(e_group, y, np.where(np.isfinite(self.x_room[emptiable, j]), self.x_room[emptiable, j], 0.0))
            rows.add(m_g, M, -(c.x_largest[m_c, j] + rise[m_g, j]))
            rows.close(g.x_room[:, j])  # inf where a host has no limit: no row
        for d in range(c.demand.shape[1]):
            # A task that does not fit the largest room of its group lands on a host that a move made room on: at most one such
            # host per move off the group, each with at most the group's largest room.
            rows.add(p_g, P, c.demand[p_c, d])
            rows.add(m_g, M, -(c.largest[m_c, d] + g.largest[m_g, d]))
            rows.close(np.zeros(len(g.pool)))
        S = c.s.shape[1]
        e_g = e[:len(g.pool) * S].reshape(len(g.pool), S)
        for j in range(c.s.shape[1]):
            # Soft load on a receiving group beyond its hosts' capacity, bought at the group's least price: what arrives, plus its
            # hosts' soft load beyond capacity today (negative where below), less that of the hosts emptied and the most a move
            # off takes.
            rows.add(f_g, F, c.s[f_c, j])
            rows.add(p_g, P, c.s[p_c, j])
            rows.add(e_group, y, -np.where(np.isfinite(g.excess[e_group, j]), self.excess[emptiable, j], 0.0))
            rows.add(m_g, M, -c.s_largest[m_c, j])
            rows.add(np.arange(len(g.pool)), e_g[:, j], -1.0)
            rows.close(np.where(np.isfinite(g.excess[:, j]), -g.excess[:, j], np.inf))  # inf where a host has no term: no row

    def _add_opened_rows(self, rows: _Rows) -> None:
        """Per openable group: what lands there fits the hosts opened, per dimension and further limit, and its soft load
        beyond their soft capacity."""
        _, z, _, _, O, _, e = self._columns()
        c, k = self.classes, self.openable
        o_c, o_k = self.pairs["O"]
        K, S = len(k.pool), c.s.shape[1]
        e_k = e[len(e) - K * S:].reshape(K, S)
        for d in range(c.demand.shape[1]):
            rows.add(o_k, O, c.demand[o_c, d])
            rows.add(np.arange(K), z, -k.capacity[:, d])
            rows.close(np.zeros(K))
        for j in range(c.s.shape[1]):
            bounded = np.isfinite(k.soft[:, j])
            rows.add(o_k, O, c.s[o_c, j])
            rows.add(np.arange(K), z, -np.where(bounded, k.soft[:, j], 0.0))
            rows.add(np.arange(K), e_k[:, j], -1.0)
            rows.close(np.where(bounded, 0.0, np.inf))
        for j in range(c.x.shape[1]):
            limited = np.isfinite(k.x_capacity[:, j])
            rows.add(o_k, O, c.x[o_c, j])
            rows.add(np.arange(K), z, np.where(limited, -k.x_capacity[:, j], 0.0))
            rows.close(np.where(limited, 0.0, np.inf))

    def matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._rows.matrix()

    def by_group(self, x: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
        """Moves and primary cost freed per pool in the LP solution ``x``."""
        y, z, _, _, _, M, _ = self._columns()
        moves = (np.bincount(self._host_pool, weights=self._moves * x[y], minlength=n_groups)
                 + np.bincount(self.receiving.pool[self.pairs["M"][1]], weights=x[M], minlength=n_groups))
        freed = (np.bincount(self._host_pool, weights=self.problem.primary_cost[self.emptiable] * x[y], minlength=n_groups)
                 - np.bincount(self.openable.pool, weights=self.openable.cost * x[z], minlength=n_groups))
        return moves, freed


def _column_scale(values: np.ndarray) -> np.ndarray:
    """Per column of ``values`` (n, k), the largest finite value, or 1 where none is positive: the unit rounding works in."""
    largest = np.where(np.isfinite(values), values, 0.0).max(axis=0, initial=0.0)
    return np.where(largest > 0, largest, 1.0)


def _by_group(values: np.ndarray, price: np.ndarray, of: np.ndarray, n: int, combine: np.ufunc) -> tuple[np.ndarray, np.ndarray]:
    """Hosts' soft ``values`` (h, S) combined per group (``of``: each host's group of ``n``) with ``combine`` (``np.add``:
    summed; ``np.maximum``: the largest), ``inf``/``-inf`` kept where a host has no term, and the least ``price`` per group
    (0 where some host has no term: nothing to price)."""
    out = np.zeros((n, values.shape[1])) if combine is np.add else np.full((n, values.shape[1]), -np.inf)
    combine.at(out, of, values)
    least = np.full((n, values.shape[1]), np.inf)
    np.minimum.at(least, of, price)
    termless = np.zeros((n, values.shape[1]), dtype=bool)
    np.logical_or.at(termless, of, ~np.isfinite(values))
    return np.where(termless, np.inf if combine is np.maximum else -np.inf, out), np.where(termless | ~np.isfinite(least), 0.0, least)


#: Distinct (eligibility, demand) rows above which :func:`repack_cost_bound` rounds demands down (module doc).
MAX_REPACK_ROWS = 6000
#: The finest grid :func:`repack_cost_bound` rounds to: 1/this of the largest capacity per dimension.
FINEST_REPACK_GRID = 1024


def repack_cost_bound(problem: PlacementProblem, time_limit: float = 30.0, soft: bool = False) -> CostBound:
    """Lower bound on the primary cost of any valid placement (full repack; module doc), the MILP given ``time_limit`` seconds.

    ``soft``: a lower bound on the primary cost plus the goals' soft-capacity terms (the interference term,
    :meth:`~packer.rules.base.Goal.soft_capacity`) instead; with none, the primary cost's bound.
    """
    A = len(problem.arch_names)
    cost_per_host = np.zeros(A)
    available = np.bincount(problem.host_arch, minlength=A)
    # A host over capacity today may keep its load (metrics.violations): relax its architecture's capacity to cover it.
    loads = host_loads(problem, problem.current)
    room = np.maximum(problem.capacity, np.where(initially_overloaded(problem)[:, None], loads, 0.0))
    # Loads the rules cap besides capacity (e.g. the RP guard's) are further dimensions, at the most a host may ever carry
    # (its limit risen once per task it has; more than every task's load does not bind, and stands in where none is known;
    # a limit below zero, where no task may go at all, counts as zero).
    x_demand, x_limit, x_rise = _limits_beyond_capacity(problem)
    counts = np.bincount(problem.current, minlength=problem.n_hosts)[:, None]
    with np.errstate(invalid="ignore"):
        ceiling = np.where(counts > 0, x_limit + x_rise * counts, x_limit)
    room = np.hstack([room, np.clip(np.fmin(ceiling, x_demand.sum(axis=0)), 0.0, None)])
    s_demand, s_capacity, s_price = _soft_capacities(problem, problem.goals if soft else ())
    task_demand = np.hstack([problem.demand, x_demand, s_demand])
    hard = room.shape[1]
    cap = np.zeros((A, hard + s_demand.shape[1]))
    price = np.zeros((A, s_demand.shape[1]))  # per unit of soft load beyond the architecture's capacity
    for a in range(A):
        hosts = np.flatnonzero(problem.host_arch == a)
        if len(hosts):
            cost_per_host[a] = problem.primary_cost[hosts].min()
            cap[a, :hard] = room[hosts].max(axis=0)
            # The largest soft capacity at the least price undercuts every host's term; none where some host has no term.
            bounded = np.isfinite(s_capacity[hosts]).all(axis=0)
            cap[a, hard:] = np.where(bounded, s_capacity[hosts].max(axis=0), 0.0)
            price[a] = np.where(bounded, s_price[hosts].min(axis=0), 0.0)
    must_open = np.bincount(problem.host_arch[problem.pinned_hosts], minlength=A)

    # A task may always stay where it is (even where it is now ineligible); pinned tasks only there.
    signature = problem.eligible.copy()
    pinned = ~problem.movable
    signature[pinned] = False
    signature[np.arange(problem.n_tasks), problem.host_arch[problem.current]] = True
    demand, grid = _rounded_demand(signature, task_demand, cap)
    # Identical tasks (same signature and demand) can share one fractional assignment without loss.
    rows, inverse, count = np.unique(np.hstack([signature, demand]), axis=0, return_inverse=True, return_counts=True)
    allowed, demand = rows[:, :A].astype(bool), rows[:, A:] * count[:, None]
    U = len(rows)

    pairs = np.argwhere(allowed)  # (u, a): share of row u's tasks placed on architecture a
    n_x = len(pairs)
    D = cap.shape[1]
    soft_rows = U + (np.arange(A)[:, None] * D + np.arange(hard, D)).ravel()  # soft load beyond capacity, priced
    n_e = len(soft_rows)
    c = np.concatenate([np.zeros(n_x), cost_per_host, price.ravel()])
    # Rows 0..U-1: Σ_a x[u,a] = 1. Row U + a*D + d: Σ_u x[u,a]·demand[u,d] − n_a·cap[a,d] (− e[a,d] where d is soft) ≤ 0.
    rows = np.concatenate([pairs[:, 0], U + np.add.outer(np.arange(D), pairs[:, 1] * D).ravel(), U + np.arange(A * D), soft_rows])
    cols = np.concatenate([np.arange(n_x), np.tile(np.arange(n_x), D), n_x + np.repeat(np.arange(A), D), n_x + A + np.arange(n_e)])
    coefs = np.concatenate([np.ones(n_x), demand[pairs[:, 0]].T.ravel(), -cap.ravel(), -np.ones(n_e)])
    row_bounds = (np.concatenate([np.ones(U), np.full(A * D, -np.inf)]), np.concatenate([np.ones(U), np.zeros(A * D)]))
    var_bounds = (np.concatenate([np.zeros(n_x), must_open, np.zeros(n_e)]), np.concatenate([np.ones(n_x), available, np.full(n_e, np.inf)]))
    integer = np.concatenate([np.zeros(n_x, dtype=bool), np.ones(A, dtype=bool), np.zeros(n_e, dtype=bool)])
    res = minimize(c, (rows, cols, coefs), row_bounds, var_bounds, integer, mathopt.SolverType.HIGHS, time_limit)
    if res.x is None:
        return CostBound(np.inf, "repack-lower", False, {"reason": res.reason})
    # A MILP stopped early proves only its dual bound.
    value = res.objective if res.optimal else max(res.bound, 0.0)
    detail = {}
    if grid is not None:
        relaxed = minimize(c, (rows, cols, coefs), row_bounds, var_bounds, np.zeros_like(integer), mathopt.SolverType.GLOP)
        if relaxed.optimal:
            prices = np.clip(-relaxed.duals[U:].reshape(A, D), 0.0, None)
            prices[:, hard:] = np.minimum(prices[:, hard:], price)  # above its price, soft load would be worth buying without end
            lagrangian = _lagrangian_repack_bound(prices, signature, task_demand, cap, cost_per_host, must_open, available)
            detail = {"demand_grid": grid, "rounded_bound": value, "lagrangian_bound": lagrangian}
            value = max(value, lagrangian)
    hosts = np.round(res.x[n_x:n_x + A])
    share = np.zeros((U, A))
    share[pairs[:, 0], pairs[:, 1]] = res.x[:n_x]
    preferred = np.where(share.max(axis=1) > 0, share.argmax(axis=1), -1)[inverse.ravel()]
    per_arch = dict(zip(problem.arch_names.tolist(), hosts.astype(int).tolist()))
    return CostBound(value, "repack-lower", res.optimal, {"hosts_per_arch": per_arch, **detail},
                     mix=ArchMix(hosts, preferred, prepaid=s_demand.shape[1] > 0))


def _soft_capacities(problem: PlacementProblem, goals: Sequence[Goal]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The soft capacities of ``goals`` (:meth:`~packer.rules.base.Goal.soft_capacity`) side by side: each task's demand (T, K),
    each host's capacity (H, K; ``inf``: no term) and price per unit beyond it (H, K)."""
    found = [soft for goal in goals if (soft := goal.soft_capacity(problem)) is not None]
    if not found:
        return np.zeros((problem.n_tasks, 0)), np.zeros((problem.n_hosts, 0)), np.zeros((problem.n_hosts, 0))
    demand, capacity, price = (np.hstack(columns) for columns in zip(*((f.demand, f.capacity, f.price) for f in found)))
    return demand, capacity, price


def _limits_beyond_capacity(problem: PlacementProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rules' load limits besides capacity (:meth:`~packer.rules.base.Rule.load_limits`) side by side, in the columns that
    limit some host: each task's load (T, J), each host's limit (H, J; ``inf``: none) and how far it may rise per task leaving."""
    found = [limits for rule in problem.rules if (limits := rule.load_limits(problem)) is not None]
    if not found:
        return np.zeros((problem.n_tasks, 0)), np.zeros((problem.n_hosts, 0)), np.zeros((problem.n_hosts, 0))
    demand, limit, rise = (np.hstack(columns) for columns in zip(*((f.demand, f.limit, f.rise) for f in found)))
    keep = np.isfinite(limit).any(axis=0)
    return demand[:, keep], limit[:, keep], rise[:, keep]


def _room_beyond_capacity(problem: PlacementProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_limits_beyond_capacity` with each host's room today (limit − load, at least 0) in place of its limit."""
    demand, limit, rise = _limits_beyond_capacity(problem)
    load = np.zeros_like(limit)
    np.add.at(load, problem.current, demand)
    return demand, np.clip(limit - load, 0.0, None), rise


def unique_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``matrix`` (n, k), in order of first appearance, and each row's index among them.

    By hashing (pandas), not by sorting rows as ``np.unique(axis=0)`` does (0.4 s a call on 148,000 tasks' rows).
    """
    codes = pd.DataFrame(matrix).groupby(list(range(matrix.shape[1])), sort=False, dropna=False).ngroup().to_numpy()
    return matrix[np.unique(codes, return_index=True)[1]], codes


def _rounded_demand(signature: np.ndarray, demand: np.ndarray, cap: np.ndarray, max_rows: int | None = None) -> tuple[np.ndarray, int | None]:
    """``demand`` rounded down to the finest grid that leaves at most ``max_rows`` (default :data:`MAX_REPACK_ROWS`) distinct
    rows, and that grid (1/grid of the largest capacity per dimension); ``demand`` itself and None when it has no more rows than that."""
    max_rows = MAX_REPACK_ROWS if max_rows is None else max_rows
    if len(unique_rows(np.hstack([signature, demand]))[0]) <= max_rows:
        return demand, None
    top = cap.max(axis=0)

    def rounded(grid: int) -> np.ndarray:
        unit = np.where(top > 0, top / grid, 1.0)
        # The minimum guards against a quotient that rounds up to the next integer.
        return np.minimum(np.floor(demand / unit) * unit, demand)

    # A grid refines the next coarser one (half its unit), so the distinct rows only grow with the grid: bisect for the finest that
    # fits. Grid 1 (the last) is taken even if it does not fit: max_rows is a target, not a cap.
    grids = [FINEST_REPACK_GRID >> k for k in range(FINEST_REPACK_GRID.bit_length())]
    finest = bisect.bisect_left(range(len(grids) - 1), True,
                                key=lambda i: len(unique_rows(np.hstack([signature, rounded(grids[i])]))[0]) <= max_rows)
    return rounded(grids[finest]), grids[finest]


def _lagrangian_repack_bound(prices: np.ndarray, allowed: np.ndarray, demand: np.ndarray, cap: np.ndarray, cost: np.ndarray,
                             must_open: np.ndarray, available: np.ndarray) -> float:
    """Lagrange's bound on the full-repack MILP at capacity prices ``prices`` (A, D) ≥ 0 (module doc); tasks' ``allowed`` (T, A), ``demand`` (T, D)."""
    per_task = np.where(allowed, demand @ prices.T, np.inf).min(axis=1)
    reduced = cost - (prices * cap).sum(axis=1)
    return float(per_task.sum() + np.minimum(must_open * reduced, available * reduced).sum())


#: Seconds a MathOpt solve gets to return after a stop request before it is abandoned (measured: HiGHS ignores the interrupter).
MATHOPT_STOP_GRACE_S = 2.0

def solve_mathopt(model: mathopt.Model, solver_type: mathopt.SolverType, **kwargs) -> mathopt.SolveResult:
    """``mathopt.solve(model, solver_type, **kwargs)``, interrupted by a stop request (:mod:`packer.interrupt`): the solver returns what it has.

    HiGHS (OR-Tools 9.15) ignores MathOpt's interrupter: :data:`MATHOPT_STOP_GRACE_S` after the
    request, the solve is abandoned and ``KeyboardInterrupt`` raised.
    """
    return _stoppable(lambda interrupter: mathopt.solve(model, solver_type, interrupter=interrupter, **kwargs))


#: A master LP's parameters where only its duals are read: its result carries no primal values or reduced costs, whose
#: conversion to Python took 3 s of 23 in the slack-scarce 10,000-task column generation (19,000 columns).
DUALS_ONLY = mathopt.ModelSolveParameters(variable_values_filter=mathopt.SparseVectorFilter(filtered_items=()),
                                          reduced_costs_filter=mathopt.SparseVectorFilter(filtered_items=()))


def solve_incremental(solver: mathopt.IncrementalSolver, model_params: mathopt.ModelSolveParameters | None = None) -> mathopt.SolveResult:
    """``solver.solve(model_params=model_params)`` (e.g. a warm-started GLOP master; :data:`DUALS_ONLY`), interrupted by a
    stop request like :func:`solve_mathopt`."""
    return _stoppable(lambda interrupter: solver.solve(model_params=model_params, interrupter=interrupter))


class SolverFailed(RuntimeError):
    """A solver behind MathOpt stopped with an error of its own instead of a result (e.g. HiGHS's ``kError [INTERNAL]``)."""


def _stoppable(solve: Callable[[solve_interrupter.SolveInterrupter], mathopt.SolveResult]) -> mathopt.SolveResult:
    interrupter = solve_interrupter.SolveInterrupter()
    try:
        return interrupt.run_stoppable(lambda: solve(interrupter), interrupter.interrupt, grace=MATHOPT_STOP_GRACE_S)
    except (StatusNotOk, AttributeError, mathopt_errors.InternalMathOptError) as error:
        # OR-Tools 9.15 fails to convert a solver's error status into its own exception and raises an AttributeError from it.
        status = error.__context__ if isinstance(error, AttributeError) else error
        if not isinstance(status, (StatusNotOk, mathopt_errors.InternalMathOptError)):
            raise
        raise SolverFailed(str(status)) from error
