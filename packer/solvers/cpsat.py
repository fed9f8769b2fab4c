"""The exact placement model in OR-Tools CP-SAT, for small instances and as the neighbourhood sub-solver.

The model (rules and objective: :mod:`packer.solvers.formulation`) has a boolean
``x[t,h]`` per candidate pair, ``open[h]`` per host the model decides, an
``enter[h]`` flag per host already over capacity, a ``gain`` flag per spread group
and an integer excess per (host, sensitivity dimension).

Integers. CP-SAT needs integer coefficients; they are rounded so that the model
never accepts an invalid placement and never overstates the objective:

* capacity, in units of ``1/scale`` of each dimension's unit, where ``scale`` =
  min(``MAX_DEMAND_SCALE`` = 1e7, 2^31 / the dimension's largest host capacity)
  (1e-7 cores, GiB, Gbps on the paper's fleet; the cap keeps every coefficient below
  2^31, see "Presolve" below): per host and dimension, the change of load against
  ``base`` is bounded by ``floor((capacity + TOLERANCE − base load)·scale − 1)``, with
  demands entering the host rounded *up* and demands leaving it rounded *down*.
  Every placement the model accepts therefore ends within capacity + TOLERANCE
  minus one unit (:func:`packer.model.metrics.violations` allows + TOLERANCE). Conversely
  every placement that respects capacity exactly is accepted as long as fewer than
  ``TOLERANCE·scale − 2`` (8 at 1e7) tasks with demands that are not multiples of
  the unit enter or leave any one host; beyond that the model may reject a
  placement that fills a host to within a few units.
* objective, in units of ``1/OBJECTIVE_SCALE`` (1e-6 objective units): every
  coefficient is rounded *down* (host weights, the per-move weight, each task's
  weighted sensitivity, and the excess's constant term), so the integer objective
  of any placement is at most ``OBJECTIVE_SCALE`` × its true objective (minus the
  constant of :attr:`Formulation.constant`). The solver's integer bound B thus
  gives the valid lower bound ``B / OBJECTIVE_SCALE + constant`` (lowered by 1e-9
  relative for floating point) on ``evaluate().objective`` over the placements the
  model accepts (see the capacity caveat above). The rounding costs at most about
  1e-6 per host, per move and per task on a host with sensitivity excess, so an
  "optimal" plan is optimal to that resolution; the reported objective is always
  recomputed with :func:`packer.model.metrics.evaluate`.

Relative-performance guard. With ``weights.min_rp`` set, every task's RP floor
(:func:`packer.model.metrics.rp_floors`) becomes linear load bounds per host
(:func:`packer.solvers.leximin.add_rp_constraints`, rounded the same safe way).

Presolve. CP-SAT 9.15's inclusion presolve declared feasible models infeasible
when capacity coefficients reached ~3e9 (5 of 120 random instances with a scale of
1e8); it is switched off (``presolve_inclusion_work_limit = 0``) and coefficients
are kept below 2^31. Every model is feasible by construction (``base`` satisfies
it), so should CP-SAT still answer INFEASIBLE the result is ``base`` with status
"feasible", no bound, and an error in the log.

Determinism. With ``deterministic=True`` the search interleaves its workers in one
thread (``interleave_search``) and stops on CP-SAT's deterministic time
(``max_deterministic_time = time_limit``, roughly seconds), so a seed gives the same
plan on every run; the wall-clock limit is then a safety net at 3× ``time_limit``.
Otherwise ``num_workers`` threads race and the result may vary between runs.
"""
from __future__ import annotations

import logging
import math
import time

import numpy as np
import pandas as pd
from ortools.sat.python import cp_model

from packer.model.metrics import evaluate, violations
from packer.model.problem import PlacementProblem
from packer.solvers.formulation import Formulation, build_formulation, unplaceable_tasks
from packer.solvers.result import SolveResult

log = logging.getLogger(__name__)

#: Largest number of integer units per unit of a hard dimension (cores, GiB, Gbps, ...).
MAX_DEMAND_SCALE = 1e7
#: Integer units per objective unit.
OBJECTIVE_SCALE = 1e6

_STATUS = {
    cp_model.OPTIMAL: "optimal",
    cp_model.FEASIBLE: "feasible",
    cp_model.INFEASIBLE: "infeasible",
    cp_model.UNKNOWN: "timeout",
}


def solve_cpsat(
    problem: PlacementProblem,
    *,
    time_limit: float = 10.0,
    seed: int = 0,
    num_workers: int = 2,
    deterministic: bool = False,
) -> SolveResult:
    """Solve the whole instance with CP-SAT, starting from (and hinted with) the current placement.

    ``time_limit`` in seconds. Returns status "infeasible" with the tasks named when
    some task has no host to be on (see :func:`unplaceable_tasks`).
    """
    t0 = time.perf_counter()
    stuck = unplaceable_tasks(problem)
    if len(stuck):
        return SolveResult.infeasible(problem.current, problem.task_ids[stuck].tolist(), "cpsat", time.perf_counter() - t0)
    return _solve(build_formulation(problem), time_limit, seed, num_workers, deterministic, t0)


def solve_subproblem(
    problem: PlacementProblem,
    assign: np.ndarray,
    tasks_subset: np.ndarray,
    hosts_subset: np.ndarray,
    time_limit: float = 1.0,
    *,
    seed: int = 0,
    num_workers: int = 2,
    deterministic: bool = True,
) -> SolveResult:
    """Re-optimize the placement of ``tasks_subset`` over ``hosts_subset`` with every other task fixed (large-neighbourhood search).

    ``assign`` (T,) must be a valid placement; the free tasks may also stay where it
    puts them. Fixed tasks keep their load on their hosts, their moves count against
    ``max_moves``, and hosts outside the neighbourhood keep their occupancy. The
    result's ``assign`` is the full placement (``assign`` is the hint, so it is at
    least as good up to the objective resolution), ``objective`` the full objective, and ``bound`` a lower bound for this
    neighbourhood only (not for the whole instance). Deterministic for a seed by
    default (see the module doc). ``time_limit`` in seconds.
    """
    t0 = time.perf_counter()
    form = build_formulation(problem, assign, tasks_subset, hosts_subset)
    return _solve(form, time_limit, seed, num_workers, deterministic, t0)


def _solve(form: Formulation, time_limit: float, seed: int, num_workers: int, deterministic: bool, t0: float) -> SolveResult:
    model, x = _build_model(form)
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.random_seed = int(seed)
    params.num_workers = int(num_workers)
    params.presolve_inclusion_work_limit = 0
    if deterministic:
        params.interleave_search = True
        params.max_deterministic_time = float(time_limit)
        params.max_time_in_seconds = 3.0 * float(time_limit)
    else:
        params.max_time_in_seconds = float(time_limit)
    code = solver.solve(model)
    status = _STATUS.get(code)
    if status is None:
        raise RuntimeError(f"CP-SAT rejected the placement model: {solver.status_name(code)}")
    bound = -math.inf
    if status in ("optimal", "feasible"):
        assign = form.assignment(solver.boolean_values(x).to_numpy(dtype=bool))
        broken = violations(form.problem, assign)
        if broken:
            raise RuntimeError(f"CP-SAT returned an invalid placement: {'; '.join(broken)}")
    else:
        assign = form.base.copy()
    if status == "infeasible":
        log.error("CP-SAT declared a model infeasible that its hint satisfies (solver bug); returning the starting placement")
        status = "feasible"
    elif math.isfinite(solver.best_objective_bound):
        bound = solver.best_objective_bound / OBJECTIVE_SCALE + form.constant
        bound -= 1e-9 * max(1.0, abs(bound))
    proto = model.proto
    return SolveResult(
        assign=assign,
        status=status,
        objective=evaluate(form.problem, assign).objective,
        bound=bound,
        solver="cpsat",
        wall_s=time.perf_counter() - t0,
        stats={
            "free_tasks": len(form.free),
            "hosts": len(form.hosts),
            "variables": len(proto.variables),
            "constraints": len(proto.constraints),
            "branches": solver.num_branches,
            "conflicts": solver.num_conflicts,
            "solve_s": solver.wall_time,
        },
    )


def _build_model(form: Formulation) -> tuple[cp_model.CpModel, pd.Series]:
    """The CP-SAT model of ``form``, hinted with its base placement; returns the model and the x series."""
    p = form.problem
    w = p.weights
    model = cp_model.CpModel()
    x = model.new_bool_var_series("x", pd.Index(np.arange(form.n_pairs)))
    xs = x.to_list()
    for var, value in zip(xs, form.pair_base.tolist()):
        model.add_hint(var, value)
    terms: list[tuple[cp_model.IntVar, int]] = []
    offset = 0

    # Each free task on exactly one of its candidate hosts.
    for i in range(len(form.free)):
        model.add_exactly_one(xs[form.task_start[i] : form.task_start[i + 1]])

    by_host = form.pairs_by_host()

    # open[h] = the host holds a task; hosts with a fixed task are open anyway (in the constant).
    for h in form.model_hosts:
        ids = by_host.get(int(h), [])
        if not ids:
            continue
        is_open = model.new_bool_var(f"open{h}")
        model.add_hint(is_open, bool(form.pair_base[ids].any()))
        for i in ids:
            model.add_implication(xs[i], is_open)
        model.add_bool_or([xs[i] for i in ids]).only_enforce_if(is_open)
        terms.append((is_open, math.floor(p.open_weight[h] * OBJECTIVE_SCALE)))

    scale = demand_scale(p)
    # Capacity: the load change against base within the slack (rounded safely, see module doc).
    # A host already over capacity in base keeps its load unless a task enters it.
    for h in form.hosts:
        ids = np.asarray(by_host.get(int(h), []), dtype=np.int64)
        if len(ids) == 0:
            continue
        entering = ids[~form.pair_base[ids]]
        if len(entering) == 0:
            continue
        enter = None
        for d in range(len(p.dims)):
            if not math.isfinite(form.slack[h, d]):
                continue
            rhs = math.floor(form.slack[h, d] * scale[d] - 1)
            up = np.ceil(p.demand[form.pair_task[entering], d] * scale[d]).astype(np.int64)
            if int(up.sum()) <= rhs:
                continue
            staying = ids[form.pair_base[ids]]
            down = np.floor(p.demand[form.pair_task[staying], d] * scale[d]).astype(np.int64)
            load = cp_model.LinearExpr.weighted_sum([xs[i] for i in entering] + [xs[i] for i in staying], up.tolist() + down.tolist())
            constraint = model.add(load <= rhs + int(down.sum()))
            if rhs < 0:
                if enter is None:
                    enter = model.new_bool_var(f"enter{h}")
                    model.add_hint(enter, False)
                    for i in entering:
                        model.add_implication(xs[i], enter)
                constraint.only_enforce_if(enter)

    # Move budget: free tasks that leave their current host.
    stays = np.flatnonzero(form.pair_current)
    if form.move_budget is not None and len(stays) > form.move_budget:
        model.add(sum(xs[i] for i in stays) >= len(stays) - form.move_budget)
    move_cost = math.floor(w.moves * OBJECTIVE_SCALE)
    offset += move_cost * len(stays)
    terms += [(xs[i], -move_cost) for i in stays]

    # Spread: a (job, host/domain) group that gains a task ends with at most the limit.
    for g, group in enumerate(form.spread):
        count = sum(xs[i] for i in group.pairs)
        constraint = model.add(count <= group.room)
        if not group.forced:
            gain = model.new_bool_var(f"gain{g}")
            model.add_hint(gain, bool(form.pair_base[group.gainers].any()))
            for i in group.gainers:
                model.add_implication(xs[i], gain)
            constraint.only_enforce_if(gain)

    # Soft sensitivity: excess ≥ w·(Σ normalized use − 1), in objective units.
    for h, k in zip(*np.nonzero(form.sens_active)):
        ids = np.asarray(by_host.get(int(h), []), dtype=np.int64)
        coef = np.floor(w.sensitivity * form.sens_use[ids, k] * OBJECTIVE_SCALE).astype(np.int64)
        const = math.floor(w.sensitivity * (form.sens_fixed[h, k] - 1.0) * OBJECTIVE_SCALE)
        upper = max(0, int(coef.sum()) + const)
        if upper == 0:
            continue
        excess = model.new_int_var(0, upper, f"excess{h}_{k}")
        model.add_hint(excess, max(0, int(coef[form.pair_base[ids]].sum()) + const))
        model.add(excess >= cp_model.LinearExpr.weighted_sum([xs[i] for i in ids], coef.tolist()) + const)
        terms.append((excess, 1))

    if p.weights.min_rp is not None:  # the --min-rp guard (packer.model.metrics.rp_floors)
        from packer.model.metrics import rp_floors
        from packer.solvers.leximin import add_rp_constraints

        add_rp_constraints(model, form, xs, rp_floors(p))

    variables, coefs = zip(*terms) if terms else ((), ())
    model.minimize(cp_model.LinearExpr.weighted_sum(list(variables), list(coefs)) + offset)
    return model, x


def demand_scale(problem: PlacementProblem) -> np.ndarray:
    """(D,) integer units per unit of each hard dimension (see the module doc)."""
    cap = np.where(np.isfinite(problem.capacity), problem.capacity, 0.0)
    largest = cap.max(axis=0) if len(cap) else np.ones(len(problem.dims))
    return np.minimum(MAX_DEMAND_SCALE, 2.0**31 / np.maximum(largest, 1e-300))
