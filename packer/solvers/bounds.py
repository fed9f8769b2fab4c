"""Bounds that make every solve's gap visible (an LP solved with GLOP, a small MILP with HiGHS, both through OR-Tools MathOpt).

* :func:`freeable_cost_bound` — move-bounded repacking: an **upper bound on the
  primary cost (TCO or hosts) that the move budget can free**. A host's cost is
  saved only when every task leaves it, and the tasks leaving must fit, in total
  per dimension, into the residual capacity of hosts that stay open or are newly
  opened. The LP relaxes which hosts to empty (``0 ≤ y_h ≤ 1``):

      max  Σ_h c_h y_h − Σ_g c_g z_g
      s.t. Σ_h n_h y_h ≤ budget                              (moves)
           Σ_h y_h (load_hd + resid_hd) − Σ_g z_g cap_gd ≤ Σ_h resid_hd   ∀ d
           0 ≤ y, z ≤ 1

  over emptiable hosts h (occupied, no pinned task, at most ``budget`` tasks) and
  empty hosts g (which may be opened). Eligibility, item sizes and the rules
  beyond capacity and the move budget (spread, guards, ...) are relaxed, so the
  bound is valid but may be loose where they bind.

* :func:`repack_cost_bound` — full repack: a **lower bound on the primary cost of
  any valid placement**. ``x[t,a]`` is the fraction of task t placed on architecture
  a (only where t may run) and ``n_a`` the number of hosts of a opened (integer, a
  MILP with few integer variables):

      min  Σ_a c_a n_a
      s.t. Σ_a x[t,a] = 1 ∀t;   Σ_t x[t,a] demand[t,d] ≤ n_a cap[a,d] ∀a,d;   P_a ≤ n_a ≤ N_a

  Identical tasks (same eligibility and demand) share one variable, which loses
  nothing: averaging their fractions keeps every constraint.

  with ``P_a`` the hosts of a that hold pinned tasks (they cannot close) and
  ``N_a`` the hosts of a in the fleet. A task's signature includes its current
  architecture (it may always stay), and an architecture's capacity is raised to
  cover any host that is over capacity today (it may keep that load), matching the
  validity rules of :mod:`packer.model.metrics`. Valid because any placement gives such
  a (f, n); it relaxes how tasks split across hosts of one architecture.

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

import datetime
from dataclasses import dataclass
from typing import Callable

import numpy as np
from ortools.math_opt import model_pb2
from ortools.math_opt.python import mathopt
from ortools.util.python import solve_interrupter

from packer import interrupt
from packer.model.metrics import host_loads, initially_overloaded
from packer.model.problem import PlacementProblem


@dataclass(frozen=True)
class CostBound:
    """``value`` in cost units (or hosts, for ``goal="hosts"``); ``kind`` says what it bounds; ``exact`` if the LP solved to optimality."""

    value: float
    kind: str
    exact: bool
    detail: dict
    #: Full repack only: per task, the architecture its LP solution puts most of it on (-1 if none).
    task_arch: np.ndarray | None = None


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
    result = solve_mathopt(model, solver, params=params)
    reason = result.termination.reason
    optimal = reason == mathopt.TerminationReason.OPTIMAL
    x = np.array(result.variable_values(list(model.variables()))) if result.has_primal_feasible_solution() else None
    duals = np.array(result.dual_values(list(model.linear_constraints()))) if optimal and not np.any(integer) else None
    return _Solution(optimal=optimal, x=x, objective=float(result.objective_value()) if x is not None else np.inf,
                     bound=float(result.termination.objective_bounds.dual_bound), reason=reason.name, duals=duals)


def freeable_cost_bound(problem: PlacementProblem, budget: int | None = None, groups: np.ndarray | None = None) -> CostBound:
    """Upper bound on the primary cost that at most ``budget`` moves (default: the problem's) can free.

    ``groups`` (H,): a group code per host (pools, :mod:`packer.rules.pools`) when tasks
    may not leave their host's group: the capacity rows are then per group and dimension
    (a tighter bound, still valid), and ``detail["by_group"]`` says, per group code, how
    many moves and how much cost the LP's solution spends and frees there (the move budget
    split that maximizes the LP: every group's marginal value of a move is the same).
    """
    budget = problem.max_moves if budget is None else budget
    cost = problem.primary_cost
    current = problem.current
    counts = np.bincount(current, minlength=problem.n_hosts)
    pinned = np.bincount(current[~problem.movable], minlength=problem.n_hosts) > 0
    loads = host_loads(problem, current)
    receiver = ~initially_overloaded(problem)
    resid = np.where(receiver[:, None], np.clip(problem.capacity - loads, 0, None), 0.0)
    limit = np.inf if budget is None else budget
    emptiable = np.flatnonzero((counts > 0) & ~pinned & (counts <= limit))
    empty = np.flatnonzero((counts == 0) & receiver)
    group = np.zeros(problem.n_hosts, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    n_groups = int(group.max(initial=-1)) + 1
    nothing = {"by_group": [{"moves": 0.0, "freed": 0.0} for _ in range(n_groups)]} if groups is not None else {}
    if len(emptiable) == 0 or limit == 0:
        return CostBound(0.0, "freeable", True, {"emptiable_hosts": int(len(emptiable)), **nothing})

    n_y, n_z = len(emptiable), len(empty)
    D = len(problem.dims)
    objective = -np.concatenate([cost[emptiable], -cost[empty]])
    # Row group·D + d: what leaves group's emptied hosts, beyond their own residual, fits in the group's residual and opened hosts.
    column_group = np.concatenate([group[emptiable], group[empty]])
    usage = np.concatenate([loads[emptiable] + resid[emptiable], -problem.capacity[empty]])  # (n, D)
    rows = (column_group[:, None] * D + np.arange(D)[None, :]).ravel()
    cols = np.repeat(np.arange(n_y + n_z), D)
    coefs = usage.ravel()
    rhs = np.zeros(n_groups * D)
    np.add.at(rhs, (group[:, None] * D + np.arange(D)[None, :]).ravel(), resid.ravel())
    if budget is not None:
        rows = np.concatenate([rows, np.full(n_y, n_groups * D)])
        cols = np.concatenate([cols, np.arange(n_y)])
        coefs = np.concatenate([coefs, counts[emptiable].astype(float)])
        rhs = np.concatenate([rhs, [budget]])
    n = n_y + n_z
    lp = minimize(objective, (rows, cols, coefs), (np.full(len(rhs), -np.inf), rhs), (np.zeros(n), np.ones(n)),
                  np.zeros(n, dtype=bool), mathopt.SolverType.GLOP)
    if not lp.optimal:
        # Fall back to the trivial bound: every emptiable host's cost.
        return CostBound(float(cost[emptiable].sum()), "freeable", False, {"lp_status": lp.reason, **nothing})
    detail = {"emptiable_hosts": n_y, "empty_hosts": n_z}
    if groups is not None:
        y, z = lp.x[:n_y], lp.x[n_y:]
        moves = np.bincount(group[emptiable], weights=counts[emptiable] * y, minlength=n_groups)
        freed = (np.bincount(group[emptiable], weights=cost[emptiable] * y, minlength=n_groups)
                 - np.bincount(group[empty], weights=cost[empty] * z, minlength=n_groups))
        detail["by_group"] = [{"moves": float(m), "freed": float(f)} for m, f in zip(moves, freed)]
    return CostBound(-lp.objective, "freeable", True, detail)


#: Distinct (eligibility, demand) rows above which :func:`repack_cost_bound` rounds demands down (module doc).
MAX_REPACK_ROWS = 6000
#: The finest grid :func:`repack_cost_bound` rounds to: 1/this of the largest capacity per dimension.
FINEST_REPACK_GRID = 1024


def repack_cost_bound(problem: PlacementProblem, time_limit: float = 30.0) -> CostBound:
    """Lower bound on the primary cost of any valid placement (full repack; module doc), the MILP given ``time_limit`` seconds."""
    A = len(problem.arch_names)
    cost_per_host = np.zeros(A)
    cap = np.zeros((A, len(problem.dims)))
    available = np.bincount(problem.host_arch, minlength=A)
    # A host over capacity today may keep its load (metrics.violations): relax its architecture's capacity to cover it.
    loads = host_loads(problem, problem.current)
    room = np.maximum(problem.capacity, np.where(initially_overloaded(problem)[:, None], loads, 0.0))
    for a in range(A):
        hosts = np.flatnonzero(problem.host_arch == a)
        if len(hosts):
            cost_per_host[a] = problem.primary_cost[hosts].min()
            cap[a] = room[hosts].max(axis=0)
    pinned_hosts = np.unique(problem.current[~problem.movable])
    must_open = np.bincount(problem.host_arch[pinned_hosts], minlength=A)

    # A task may always stay where it is (even where it is now ineligible); pinned tasks only there.
    signature = problem.eligible.copy()
    pinned = ~problem.movable
    signature[pinned] = False
    signature[np.arange(problem.n_tasks), problem.host_arch[problem.current]] = True
    demand, grid = _rounded_demand(signature, problem.demand, cap)
    # Identical tasks (same signature and demand) can share one fractional assignment without loss.
    rows, inverse, count = np.unique(np.hstack([signature, demand]), axis=0, return_inverse=True, return_counts=True)
    allowed, demand = rows[:, :A].astype(bool), rows[:, A:] * count[:, None]
    U = len(rows)

    pairs = np.argwhere(allowed)  # (u, a): share of row u's tasks placed on architecture a
    n_x = len(pairs)
    c = np.concatenate([np.zeros(n_x), cost_per_host])
    D = len(problem.dims)
    # Rows 0..U-1: Σ_a x[u,a] = 1. Row U + a*D + d: Σ_u x[u,a]·demand[u,d] − n_a·cap[a,d] ≤ 0.
    rows = np.concatenate([pairs[:, 0], U + np.add.outer(np.arange(D), pairs[:, 1] * D).ravel(), U + np.arange(A * D)])
    cols = np.concatenate([np.arange(n_x), np.tile(np.arange(n_x), D), n_x + np.repeat(np.arange(A), D)])
    coefs = np.concatenate([np.ones(n_x), demand[pairs[:, 0]].T.ravel(), -cap.ravel()])
    row_bounds = (np.concatenate([np.ones(U), np.full(A * D, -np.inf)]), np.concatenate([np.ones(U), np.zeros(A * D)]))
    var_bounds = (np.concatenate([np.zeros(n_x), must_open]), np.concatenate([np.ones(n_x), available]))
    integer = np.concatenate([np.zeros(n_x, dtype=bool), np.ones(A, dtype=bool)])
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
            lagrangian = _lagrangian_repack_bound(prices, signature, problem.demand, cap, cost_per_host, must_open, available)
            detail = {"demand_grid": grid, "rounded_bound": value, "lagrangian_bound": lagrangian}
            value = max(value, lagrangian)
    hosts = dict(zip(problem.arch_names.tolist(), np.round(res.x[n_x:]).astype(int).tolist()))
    share = np.zeros((U, A))
    share[pairs[:, 0], pairs[:, 1]] = res.x[:n_x]
    preferred = np.where(share.max(axis=1) > 0, share.argmax(axis=1), -1)[inverse.ravel()]
    return CostBound(value, "repack-lower", res.optimal, {"hosts_per_arch": hosts, **detail}, task_arch=preferred)


def _rounded_demand(signature: np.ndarray, demand: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, int | None]:
    """``demand`` rounded down to the coarsest grid that leaves at most :data:`MAX_REPACK_ROWS` distinct rows, and that
    grid (1/grid of the largest capacity per dimension); ``demand`` itself and None when it has no more rows than that."""
    if len(np.unique(np.hstack([signature, demand]), axis=0)) <= MAX_REPACK_ROWS:
        return demand, None
    top = cap.max(axis=0)
    grid = FINEST_REPACK_GRID
    while True:
        unit = np.where(top > 0, top / grid, 1.0)
        # The minimum guards against a quotient that rounds up to the next integer.
        rounded = np.minimum(np.floor(demand / unit) * unit, demand)
        if grid == 1 or len(np.unique(np.hstack([signature, rounded]), axis=0)) <= MAX_REPACK_ROWS:
            return rounded, grid
        grid //= 2


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


def solve_incremental(solver: mathopt.IncrementalSolver) -> mathopt.SolveResult:
    """``solver.solve()`` (e.g. a warm-started GLOP master), interrupted by a stop request like :func:`solve_mathopt`."""
    return _stoppable(lambda interrupter: solver.solve(interrupter=interrupter))


def _stoppable(solve: Callable[[solve_interrupter.SolveInterrupter], mathopt.SolveResult]) -> mathopt.SolveResult:
    interrupter = solve_interrupter.SolveInterrupter()
    return interrupt.run_stoppable(lambda: solve(interrupter), interrupter.interrupt, grace=MATHOPT_STOP_GRACE_S)
