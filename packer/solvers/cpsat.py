"""The exact model (:mod:`packer.solvers.exact`) in OR-Tools CP-SAT, for small instances and as the neighbourhood sub-solver.

Integers. CP-SAT needs integer coefficients; :func:`to_cpsat` rounds so that the model
never accepts an invalid placement and never overstates the objective:

* ``physical`` constraints, per unit, in ``1/scale`` of the unit, ``scale`` =
  min(``MAX_SCALE`` = 1e7, 2^31 / the largest magnitude of the unit's coefficients,
  right-hand sides and variable bounds) (1e-7 cores, GiB, Gbps on the paper's fleet;
  the cap keeps every coefficient below 2^31, see "Presolve" below). A constraint
  ``Σ a·x ≤ b`` over booleans is stated relative to the hint (the base placement)
  ``h``: ``Σ a·(x − h) ≤ b − Σ a·h``, with ``a`` rounded *up* where ``h = 0`` and
  *down* where ``h = 1``, and the right-hand side rounded down, so every integer
  solution satisfies the real constraint; continuous variables of the unit are
  integers of the same scale (coefficient ±1, exact).
* the objective, in units of ``1/OBJECTIVE_SCALE`` (1e-6 objective units): every
  coefficient of a boolean or integer variable is rounded *down*, and ``objective``
  constraints ``v − Σ a·x ≥ b`` round the coefficients of ``x`` up and ``b`` down,
  so the integer objective of any placement is at most ``OBJECTIVE_SCALE`` × its
  true objective (minus :attr:`ExactModel.constant`). The solver's integer bound B
  thus gives the valid lower bound ``B / OBJECTIVE_SCALE + constant`` (lowered by
  1e-9 relative for floating point) on ``evaluate().objective`` over the placements
  the model accepts. The rounding costs at most about 1e-6 per host, per move and per
  task on a host with sensitivity excess, so an "optimal" plan is optimal to that
  resolution; the reported objective is always recomputed with
  :func:`packer.model.metrics.evaluate`.

Presolve. CP-SAT 9.15's inclusion presolve declared feasible models infeasible
when capacity coefficients reached ~3e9 (5 of 120 random instances with a scale of
1e8); it is switched off (``presolve_inclusion_work_limit = 0``) and coefficients
are kept below 2^31. Every model is feasible by construction (``base`` satisfies
it), so should CP-SAT still answer INFEASIBLE the result is ``base`` with status
"feasible", no bound, and an error in the log.

Determinism. With ``deterministic=True`` the search interleaves its workers in one
thread (``interleave_search``) and stops on CP-SAT's deterministic time
(``max_deterministic_time = time_limit``, roughly seconds), so a seed gives the same
plan on every run; the wall-clock limit is then a safety net at
:data:`~packer.solvers.clock.WALL_CAP` times ``time_limit``, or
``wall_limit`` where a caller on a wall clock has less time left (the sub-solves of a
neighbourhood search, :mod:`packer.solvers.engine`: it binds on the last of them).
Otherwise ``num_workers`` threads race and the result may vary between runs.

Probing. Presolve's probing runs in one thread before the search starts. On a
neighbourhood of 400 tasks over 156 hosts (62,500 booleans, a full repack of 37,000
tasks) it took 2.1 s of a 5-s sub-solve, with the second core idle, and added 1.7
million clauses. ``probing=False`` leaves it out: the engine does so for its parallel
neighbourhoods of stranded room, where the same neighbourhoods then gained about 1.5
times as much (benchmarks/RESULTS.md). Every other solve keeps it: the exact solves
and the engine's other neighbourhoods were not measured without it.
"""
from __future__ import annotations

import logging
import math
import time

import numpy as np
import pandas as pd
from ortools.sat.python import cp_model

from packer import interrupt
from packer.model.metrics import evaluate
from packer.model.problem import PlacementProblem
from packer.solvers.clock import WALL_CAP
from packer.solvers.exact import BOOL, CONT, ExactModel, build_exact_model, unplaceable_tasks
from packer.solvers.result import SolveResult

log = logging.getLogger(__name__)

#: Largest number of integer units per unit of a physical quantity (cores, GiB, Gbps, ...).
MAX_SCALE = 1e7
#: Integer units per objective unit.
OBJECTIVE_SCALE = 1e6

_STATUS = {
    cp_model.OPTIMAL: "optimal",
    cp_model.FEASIBLE: "feasible",
    cp_model.INFEASIBLE: "infeasible",
    cp_model.UNKNOWN: "timeout",
}


def unit_scales(model: ExactModel) -> dict[str, float]:
    """Integer units per real unit for every unit of ``model`` (module doc); ``objective`` is :data:`OBJECTIVE_SCALE`."""
    largest: dict[str, float] = {}
    for c in model.constraints:
        if c.unit is None or c.unit == "objective":
            continue
        values = np.abs(np.concatenate([c.coefs, [c.rhs]]))
        largest[c.unit] = max(largest.get(c.unit, 0.0), float(values[np.isfinite(values)].max(initial=0.0)))
    for v, unit in enumerate(model.var_unit):
        if unit is not None and unit != "objective":
            bounds = np.abs([model.var_lb[v], model.var_ub[v]])
            largest[unit] = max(largest.get(unit, 0.0), float(bounds[np.isfinite(bounds)].max(initial=0.0)))
    scales = {unit: float(min(MAX_SCALE, 2.0**31 / max(value, 1e-300))) for unit, value in largest.items()}
    scales["objective"] = OBJECTIVE_SCALE
    return scales


def to_cpsat(model: ExactModel, objective: bool = True) -> tuple[cp_model.CpModel, list]:
    """The CP-SAT model of ``model`` (rounded as the module doc says), hinted with the base; returns it and one handle per variable.

    ``objective``: also set the minimization objective (without :attr:`ExactModel.constant`).
    """
    scales = unit_scales(model)
    cp = cp_model.CpModel()
    handles: list = []
    hinted: list[int] = []
    for kind, lb, ub, hint, unit, name in zip(model.var_kind, model.var_lb, model.var_ub, model.var_hint, model.var_unit,
                                               model.var_name):
        if kind == BOOL:
            var = cp.new_bool_var(name)
            hinted.append(int(bool(hint)))
        else:
            s = scales[unit]
            low, high = math.floor(lb * s), math.ceil(ub * s)
            var = cp.new_int_var(low, high, name)
            hinted.append(int(min(max(round(hint * s), low), high)))
        handles.append(var)
    # The hints at once (add_hint one by one was a quarter of building a 400-task neighbourhood's model, 0.06 of 0.26 s).
    cp.proto.solution_hint.vars.extend([var.index for var in handles])
    cp.proto.solution_hint.values.extend(hinted)
    hints = model.hints()
    is_cont = np.asarray([k == CONT for k in model.var_kind], dtype=bool)
    for c in model.constraints:
        sign = -1.0 if c.sense == ">=" else 1.0
        coefs, rhs = sign * c.coefs, sign * c.rhs
        if c.kind == "count":
            ints = np.rint(coefs).astype(np.int64)
            if (ints != coefs).any() or not float(rhs).is_integer():  # counts are exact: no tolerance
                raise ValueError(f"count constraint with non-integral coefficients over {[model.var_name[v] for v in c.vars[:3]]}")
            expr = cp_model.LinearExpr.weighted_sum([handles[v] for v in c.vars], ints.tolist())
            built = cp.add(expr == int(rhs)) if c.sense == "==" else cp.add(expr <= int(rhs))
        else:
            s = scales[c.unit]
            cont = is_cont[c.vars]
            if c.kind == "physical":
                h = hints[c.vars]
                ints = np.where(cont, np.rint(coefs), np.where(h > 0.5, np.floor(coefs * s), np.ceil(coefs * s))).astype(np.int64)
                shift = float((coefs * h)[~cont].sum())
                bound = math.floor((rhs - shift) * s) + int((ints * h)[~cont].sum())
            else:  # objective-defining, stated as ≥ and negated above: round x's coefficients down, the constant up
                ints = np.where(cont, np.rint(coefs), np.floor(coefs * s)).astype(np.int64)
                bound = math.ceil(rhs * s)
            if (np.abs(coefs[cont]) != 1.0).any():
                raise ValueError(f"a continuous variable of unit {c.unit} must have coefficient ±1")
            expr = cp_model.LinearExpr.weighted_sum([handles[v] for v in c.vars], ints.tolist())
            built = cp.add(expr <= bound)
        if c.enforce:
            built.only_enforce_if([handles[e] for e in c.enforce])
    for a, b in model.implications:
        cp.add_implication(handles[a], handles[b])
    if objective:
        coefs = np.asarray(model.obj_coefs, dtype=float)
        variables = np.asarray(model.obj_vars, dtype=np.int64)
        cont = is_cont[variables] if len(variables) else np.zeros(0, dtype=bool)
        ints = np.where(cont, np.rint(coefs), np.floor(coefs * OBJECTIVE_SCALE)).astype(np.int64)
        cp.minimize(cp_model.LinearExpr.weighted_sum([handles[v] for v in variables], ints.tolist()))
    return cp, handles


#: CP-SAT threads of a solve that names none: 2, or a worker process's share of the cores (:func:`set_default_workers`).
_default_workers = {"threads": 2}


def set_default_workers(threads: int) -> None:
    """Give every later CP-SAT solve of this process that names no ``num_workers`` ``threads`` threads (a worker process's share).

    Deterministic solves keep 2: CP-SAT's deterministic search depends on its thread
    count, and a plan must not depend on how many processes shared the machine.
    """
    _default_workers["threads"] = max(1, int(threads))


def cpsat_solver(seed: int, time_limit: float, num_workers: int | None = None, deterministic: bool = False,
                 wall_limit: float | None = None, probing: bool = True) -> cp_model.CpSolver:
    """A CP-SAT solver with packer's parameters (module doc); ``time_limit`` and ``wall_limit`` in seconds; ``num_workers``
    None: the default above; ``probing``: False leaves out presolve's probing (module doc)."""
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.random_seed = int(seed)
    params.num_workers = int(num_workers or (2 if deterministic else _default_workers["threads"]))
    params.presolve_inclusion_work_limit = 0
    # SIGINT is packer's (packer.interrupt stops the search); CP-SAT's own handler would take it from Python.
    params.catch_sigint_signal = False
    wall = WALL_CAP * float(time_limit) if deterministic else float(time_limit)
    params.max_time_in_seconds = max(min(wall, math.inf if wall_limit is None else float(wall_limit)), 0.01)
    if deterministic:
        params.interleave_search = True
        params.max_deterministic_time = float(time_limit)
    if not probing:
        params.cp_model_probing_level = 0
    return solver


def chosen_pairs(model: ExactModel, solver: cp_model.CpSolver, handles: list) -> np.ndarray:
    """(P,) bool: the candidate pairs the solver's solution picks."""
    return solver.boolean_values(pd.Index([handles[v] for v in model.x])).to_numpy(dtype=bool)


def solve_cpsat(problem: PlacementProblem, *, time_limit: float = 10.0, seed: int = 0, num_workers: int | None = None,
                deterministic: bool = False, start: np.ndarray | None = None) -> SolveResult:
    """Solve the whole instance with CP-SAT, starting from (and hinted with) ``start`` (default: the current placement).

    ``time_limit`` in seconds. Returns status "infeasible" with the tasks named when
    some task has no host to be on (see :func:`unplaceable_tasks`).
    """
    t0 = time.perf_counter()
    stuck = unplaceable_tasks(problem)
    if len(stuck):
        return SolveResult.infeasible(problem.current, problem.task_ids[stuck].tolist(), "cpsat", time.perf_counter() - t0)
    return solve_model(build_exact_model(problem, start), time_limit, seed, num_workers, deterministic, t0)


def solve_subproblem(problem: PlacementProblem, assign: np.ndarray, tasks_subset: np.ndarray, hosts_subset: np.ndarray,
                     time_limit: float = 1.0, *, seed: int = 0, num_workers: int | None = None, deterministic: bool = True,
                     wall_limit: float | None = None, max_changes: int | None = None, probing: bool = True) -> SolveResult:
    """Re-optimize the placement of ``tasks_subset`` over ``hosts_subset`` with every other task fixed (large-neighbourhood search).

    ``assign`` (T,) must be a valid placement; the free tasks may also stay where it
    puts them. Fixed tasks keep their load on their hosts, their moves count against
    the move budget, and hosts outside the neighbourhood keep their occupancy. The
    result's ``assign`` is the full placement (``assign`` is the hint, so it is at
    least as good up to the objective resolution), ``objective`` the full objective,
    and ``bound`` a lower bound for this neighbourhood only (not for the whole
    instance). Rules the exact model cannot state are left out (the caller checks
    them on the result). Deterministic for a seed by default (see the module doc). ``time_limit`` in seconds; ``wall_limit``
    (seconds) caps a deterministic search's wall clock below its safety net (module doc); ``max_changes``: at most that
    many free tasks leave their host in ``assign`` (:func:`~packer.solvers.exact.build_exact_model`); ``probing``: as in
    :func:`cpsat_solver`.
    """
    t0 = time.perf_counter()
    model = build_exact_model(problem, assign, tasks_subset, hosts_subset, max_changes)
    return solve_model(model, time_limit, seed, num_workers, deterministic, t0, wall_limit, probing)


def solve_model(model: ExactModel, time_limit: float, seed: int, num_workers: int | None, deterministic: bool, t0: float,
                wall_limit: float | None = None, probing: bool = True) -> SolveResult:
    """Solve ``model`` with CP-SAT; the result's placement is re-checked and its objective recomputed."""
    form = model.form
    with interrupt.stoppable():
        cp, handles = to_cpsat(model)
    solver = cpsat_solver(seed, time_limit, num_workers, deterministic, wall_limit, probing)
    code = interrupt.run_stoppable(lambda: solver.solve(cp), solver.stop_search)
    interrupted = interrupt.stop_requested()
    stopped_early = False
    status = _STATUS.get(code)
    if status is None:
        raise RuntimeError(f"CP-SAT rejected the placement model: {solver.status_name(code)}")
    bound = -math.inf
    if status in ("optimal", "feasible"):
        assign = form.assignment(chosen_pairs(model, solver, handles))
        broken = [v for rule in form.problem.rules if "exact" in rule.strategies for v in rule.violations(form.problem, assign)]
        if broken:
            raise RuntimeError(f"CP-SAT returned an invalid placement: {'; '.join(broken)}")
    else:
        assign = form.base.copy()
        if interrupted:  # stopped before its first solution: the base is valid by construction
            status = "feasible"
            stopped_early = True
    if status == "infeasible":
        log.error("CP-SAT declared a model infeasible that its hint satisfies (solver bug); returning the starting placement")
        status = "feasible"
    elif math.isfinite(solver.best_objective_bound):
        bound = solver.best_objective_bound / OBJECTIVE_SCALE + model.constant
        bound -= 1e-9 * max(1.0, abs(bound))
    proto = cp.proto
    return SolveResult(
        assign=assign, status=status, objective=evaluate(form.problem, assign).objective, bound=bound, solver="cpsat",
        wall_s=time.perf_counter() - t0,
        stats={"free_tasks": len(form.free), "hosts": len(form.hosts), "variables": len(proto.variables),
               "constraints": len(proto.constraints), "branches": solver.num_branches, "conflicts": solver.num_conflicts,
               "solve_s": solver.wall_time, "deterministic_s": solver.deterministic_time, "interrupted": interrupted,
               "interrupted_before_a_solution": stopped_early},
    )

