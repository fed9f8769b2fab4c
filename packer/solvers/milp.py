"""The exact model (:mod:`packer.solvers.exact`) as a MILP: PuLP with its bundled CBC, or OR-Tools MathOpt with HiGHS.

Both backends translate the same :class:`~packer.solvers.exact.ExactModel`, in
floating point: booleans and integers as such, continuous variables as continuous;
a constraint enforced by literals becomes a big-M constraint whose M is the largest
the left-hand side can be above the right-hand side (from the variables' bounds).

Tolerances. MILP solvers accept small violations (CBC's primal tolerance is 1e-7),
so each constraint keeps the margin its rule asks for (capacity: half of
:data:`packer.model.metrics.TOLERANCE`). Every returned plan is re-checked and its objective recomputed with
:func:`packer.model.metrics.evaluate`.

Bound. HiGHS reports its dual bound (MathOpt's ``objective_bounds.dual_bound``). CBC
(run by PuLP's ``COIN_CMD`` on the CBC binary PuLP ships) reports no bound: when it
proves optimality the bound is its objective; when the time limit stops it, the
bound is the model's LP relaxation solved by GLOP — valid, if weaker, and a plan
that meets it is optimal all the same. Both are
lowered by 1e-7 relative to cover the solvers' tolerances. HiGHS is asked for a zero
relative gap so that "optimal" means what it says. It is OR-Tools' HiGHS: packer never
imports ``highspy``, and where PuLP has loaded highspy's, :mod:`packer.solvers.native`
keeps OR-Tools bound to its own.

Start. CBC gets the starting placement (the current one, or the ``start`` given) as a MIP start (``warmStart``), HiGHS as a
solution hint. CBC runs single-threaded by default, which with a fixed seed makes it
deterministic unless the time limit cuts it short.
"""
from __future__ import annotations

import datetime
import logging
import math
import os
import signal
import subprocess
import time

import numpy as np
import pulp
from ortools.math_opt.python import mathopt
from pulp.apis import coin_api

from packer import interrupt
from packer.model.metrics import evaluate
from packer.model.problem import PlacementProblem
from packer.solvers.bounds import SolverFailed, solve_mathopt
from packer.solvers.clock import WALL_CAP
from packer.solvers.exact import BOOL, CONT, ExactModel, build_exact_model, unplaceable_tasks
from packer.solvers.result import SolveResult

log = logging.getLogger(__name__)

#: Branch-and-bound nodes of a deterministic HiGHS solve (instead of its time limit).
DETERMINISTIC_NODES = 1000
#: Seconds CBC gets to stop after a SIGINT before it is killed (measured: ~9 s to finish a round of cuts on a loaded
#: 2-core machine; in its root LP it ignores SIGINT for minutes).
CBC_STOP_GRACE_S = 10.0
#: Solver names accepted by :func:`solve_milp`.
MILP_SOLVERS = ("cbc", "highs")

_PULP_STATUS = {
    pulp.LpSolutionOptimal: "optimal",
    pulp.LpSolutionIntegerFeasible: "feasible",
    pulp.LpSolutionInfeasible: "infeasible",
    pulp.LpSolutionUnbounded: "infeasible",
    pulp.LpSolutionNoSolutionFound: "timeout",
}


def _normalized(model: ExactModel):
    """Each constraint as ``(vars, coefs, sense, rhs, enforce)`` with ≥ turned into ≤ and the physical margin applied."""
    for c in model.constraints:
        if c.sense == "==":
            yield c.vars, c.coefs, "==", c.rhs, c.enforce
            continue
        sign = -1.0 if c.sense == ">=" else 1.0
        rhs = sign * c.rhs - c.margin
        yield c.vars, sign * c.coefs, "<=", rhs, c.enforce
    implication = np.array([1.0, -1.0])
    for a, b in model.implications:
        yield np.array([a, b]), implication, "<=", 0.0, ()


def _big_m(model: ExactModel, variables: np.ndarray, coefs: np.ndarray, rhs: float) -> float:
    """How far ``Σ coefs·variables`` can exceed ``rhs`` given the variables' bounds (0 when it never can)."""
    lb, ub = np.asarray(model.var_lb)[variables], np.asarray(model.var_ub)[variables]
    return max(0.0, float(np.maximum(coefs * lb, coefs * ub).sum()) - rhs)


def to_pulp(model: ExactModel) -> tuple[pulp.LpProblem, list]:
    """The PuLP model of ``model`` with its hints as initial values; returns it and one variable per model variable."""
    lp = pulp.LpProblem("placement", pulp.LpMinimize)
    handles = []
    for i, (kind, lb, ub, hint) in enumerate(zip(model.var_kind, model.var_lb, model.var_ub, model.var_hint)):
        cat = pulp.LpBinary if kind == BOOL else pulp.LpContinuous
        var = lp.add_variable(f"v{i}", lowBound=None if kind == BOOL else lb, upBound=None if kind == BOOL else ub, cat=cat)
        var.setInitialValue(int(round(hint)) if kind == BOOL else hint)
        handles.append(var)
    for variables, coefs, sense, rhs, enforce in _normalized(model):
        expr = pulp.lpSum(float(a) * handles[v] for v, a in zip(variables, coefs))
        if sense == "==":
            lp += expr == rhs
            continue
        if enforce:
            m = _big_m(model, variables, coefs, rhs)
            if m == 0.0:
                continue
            lp += expr <= rhs + m * (len(enforce) - pulp.lpSum(handles[e] for e in enforce))
        else:
            lp += expr <= rhs
    lp += pulp.lpSum(float(a) * handles[v] for v, a in zip(model.obj_vars, model.obj_coefs))
    return lp, handles


def to_mathopt(model: ExactModel, relax: bool = False) -> tuple[mathopt.Model, list]:
    """The MathOpt model of ``model`` (``relax``: every variable continuous, for the LP relaxation)."""
    mo = mathopt.Model(name="placement")
    handles = []
    for kind, lb, ub, name in zip(model.var_kind, model.var_lb, model.var_ub, model.var_name):
        handles.append(mo.add_variable(lb=lb, ub=ub, is_integer=(kind != CONT and not relax), name=name))
    for variables, coefs, sense, rhs, enforce in _normalized(model):
        expr = mathopt.LinearSum(float(a) * handles[v] for v, a in zip(variables, coefs))
        if sense == "==":
            mo.add_linear_constraint(expr == rhs)
            continue
        if enforce:
            m = _big_m(model, variables, coefs, rhs)
            if m == 0.0:
                continue
            mo.add_linear_constraint(expr + mathopt.LinearSum(m * handles[e] for e in enforce) <= rhs + m * len(enforce))
        else:
            mo.add_linear_constraint(expr <= rhs)
    mo.minimize(mathopt.LinearSum(float(a) * handles[v] for v, a in zip(model.obj_vars, model.obj_coefs)))
    return mo, handles


def lp_relaxation_bound(model: ExactModel) -> float | None:
    """The model's LP relaxation optimum (GLOP; objective units, without the constant), None if GLOP does not prove it."""
    mo, _ = to_mathopt(model, relax=True)
    result = solve_mathopt(mo, mathopt.SolverType.GLOP)
    if result.termination.reason != mathopt.TerminationReason.OPTIMAL:
        return None
    return float(result.termination.objective_bounds.dual_bound)


def solve_milp(problem: PlacementProblem, *, solver: str = "cbc", time_limit: float = 10.0, seed: int = 0, threads: int = 1,
               start: np.ndarray | None = None, deterministic: bool = False) -> SolveResult:
    """Solve the whole instance with ``solver`` ("cbc": PuLP and CBC; "highs": MathOpt and HiGHS); ``time_limit`` in seconds.

    ``start``: a valid placement the solver starts from (default: the current placement).
    ``deterministic``: HiGHS stops after :data:`DETERMINISTIC_NODES` branch-and-bound nodes
    (and :data:`~packer.solvers.clock.WALL_CAP` times ``time_limit``) instead of at ``time_limit``;
    CBC, single-threaded, is deterministic unless its time limit cuts it short.

    Returns status "infeasible" with the tasks named when some task has no host to be
    on (see :func:`packer.solvers.exact.unplaceable_tasks`).
    """
    if solver not in MILP_SOLVERS:
        raise ValueError(f"unknown MILP solver '{solver}'; known: {', '.join(MILP_SOLVERS)}")
    t0 = time.perf_counter()
    stuck = unplaceable_tasks(problem)
    if len(stuck):
        return SolveResult.infeasible(problem.current, problem.task_ids[stuck].tolist(), solver, time.perf_counter() - t0)
    with interrupt.stoppable():
        model = build_exact_model(problem, start)
    if solver == "cbc":
        status, values, model_bound = _run_cbc(model, time_limit, seed, threads)
    else:
        status, values, model_bound = _run_highs(model, time_limit, seed, threads, deterministic)
    interrupted = interrupt.stop_requested()
    form = model.form
    bound = -math.inf
    found = status in ("optimal", "feasible")
    if found:
        chosen = values[model.x] > 0.5
        assign = form.assignment(chosen)
        broken = [v for rule in problem.rules for v in rule.violations(problem, assign)]
        if broken or np.bincount(form.pair_task[chosen], minlength=problem.n_tasks)[form.free].max(initial=1) != 1:
            if not interrupted:
                raise RuntimeError(f"{solver} returned an invalid placement: {'; '.join(broken) or 'a task on several hosts'}")
            log.warning("%s was stopped before it had a valid placement (%s)", solver, "; ".join(broken) or "a task on several hosts")
            found = False
    failed = status == "failed"
    if not found:
        assign = form.base.copy()
        if interrupted or failed:  # stopped, or failed, before its first solution: the starting placement satisfies the model
            status = "feasible"
    if status == "infeasible":
        log.error("%s declared a model infeasible that the starting placement satisfies; returning the starting placement", solver)
        status = "feasible"
    elif model_bound is not None and math.isfinite(model_bound):
        bound = model_bound + model.constant
        bound -= 1e-7 * max(1.0, abs(bound))
    return SolveResult(assign=assign, status=status, objective=evaluate(problem, assign).objective, bound=bound, solver=solver,
                       wall_s=time.perf_counter() - t0,
                       stats={"free_tasks": len(form.free), "hosts": len(form.hosts), "variables": model.n_vars,
                              "constraints": len(model.constraints) + len(model.implications), "interrupted": interrupted,
                              "interrupted_before_a_solution": interrupted and not found, **({"solver_failed": True} if failed else {})})


def _run_cbc(model: ExactModel, time_limit: float, seed: int, threads: int) -> tuple[str, np.ndarray, float | None]:
    """Solve with CBC from the hints; the status, every variable's value and a bound (objective units, without the constant).

    Status "failed" where CBC ended without writing a solution (an abort, not a limit or a stop request).
    """
    with interrupt.stoppable():
        lp, handles = to_pulp(model)
    # Without probing cuts: with them (and knapsack cuts) CBC 2.10 called 2 of 1,200 random 12-task models "optimal" 11% and
    # 10% above HiGHS's and CP-SAT's optimum (seeds 408 and 994 of the engine's optimality test); without, none, and on 40
    # tasks it proves as many (15 of 20 in 10 s) where turning knapsack cuts off instead proved fewer.
    # "increment 0": CBC otherwise prunes nodes that cannot improve by its cutoff increment, and called a plan two moves'
    # tie-break (0.0002) above HiGHS's optimum optimal (seed 4425 of the engine's optimality test).
    # One thread: no "-threads" at all. With "-threads 1" CBC starts a worker thread, and about 1 run in 80 its main thread
    # waited for it to the time limit ("Thread 0 used 0 times, waiting to start 10.000169"), a 6-task model taking 10 s:
    # 3 of 250 runs of one model's command line; 0 of 150 without the option.
    engine = pulp.COIN_CMD(path=coin_api.pulp_cbc_path, msg=False, timeLimit=time_limit, threads=threads if threads > 1 else None,
                           warmStart=True,
                           options=[f"randomSeed {seed + 1}", f"randomCbcSeed {seed + 1}", "probingCuts off", "increment 0"])
    try:
        _solve_cbc(engine, lp)
    except pulp.PulpSolverError as error:
        # CBC 2.10 aborts (SIGABRT) on some small models, e.g. one-dimensional sizes [10, 8, 9, 10, 4, 3, 3, 5, 4, 4, 9, 6]
        # into twelve bins of 15: the same outcome as HiGHS's own errors, the starting placement, marked.
        log.warning("CBC failed (%s): no plan and no bound from it", error)
        return "failed", np.zeros(len(handles)), None
    status = _PULP_STATUS.get(lp.sol_status, "timeout")
    values = np.array([v.varValue or 0.0 for v in handles])
    objective = float(pulp.value(lp.objective) or 0.0)
    if status == "optimal":
        bound = objective
    elif interrupt.stop_requested():
        bound = None
    else:
        bound = lp_relaxation_bound(model)
        # A plan at the LP relaxation's optimum is optimal, whatever stopped CBC. CBC has run to its limit without saying so
        # (a two-task model, about one pytest run in ten: the wait for a worker thread above, before "-threads 1" was dropped).
        if status == "feasible" and bound is not None and objective <= bound + 1e-9 * max(1.0, abs(bound)):
            status = "optimal"
    return status, values, bound


def _solve_cbc(engine: pulp.COIN_CMD, lp: pulp.LpProblem) -> None:
    """``engine.solve_CBC(lp)`` with the same command line, but a stop request (:mod:`packer.interrupt`) reaches CBC.

    PuLP keeps the CBC process to itself; here it is ours. CBC runs in its own session,
    so a terminal's Ctrl-C or a scheduler's SIGTERM to the process group does not kill it;
    a stop request sends it SIGINT, on which CBC stops its search as at its time limit and
    writes its best solution, which is read as usual. CBC does not hear SIGINT in its root
    LP: :class:`_CbcStop` kills it after :data:`CBC_STOP_GRACE_S`, and ``lp`` is then left
    with no solution found.
    """
    was_none, dummy = lp.fixObjective()  # as LpProblem.solve does
    mps, sol, mst = engine.create_tmp_files(lp.name, "mps", "sol", "mst")
    try:
        variables, var_names, con_names, _ = lp.writeMPS(mps, rename=1)
        engine.writesol(mst, lp, variables, var_names, con_names)
        args = [engine.path, mps, "-mips", mst, "-sec", str(engine.timeLimit)]
        for option in engine.options + engine.getOptions():
            args += ["-" + option.split()[0], *option.split()[1:]]
        args += ["-solve", "-printingOptions", "all", "-solution", sol]
        with subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True) as cbc:
            try:
                code = interrupt.run_stoppable(cbc.wait, _CbcStop(cbc))
            except BaseException:
                cbc.kill()
                raise
        if code == 0 and os.path.exists(sol):
            status, values, _, _, _, sol_status = engine.readsol_MPS(sol, lp, variables, var_names, con_names)
            lp.assignVarsVals(values)
            lp.assignStatus(status, sol_status)
        elif interrupt.stop_requested():
            lp.assignStatus(pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound)
        else:
            raise pulp.PulpSolverError(f"CBC exited with code {code} and wrote no solution")
    finally:
        engine.delete_tmp_files(mps, sol, mst)
        lp.restoreObjective(was_none, dummy)


class _CbcStop:
    """How a stop request stops a CBC process: SIGINT at once, SIGKILL if it still runs :data:`CBC_STOP_GRACE_S` later (idempotent)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.first: float | None = None

    def __call__(self) -> None:
        if self.process.poll() is not None:
            return
        if self.first is None:
            self.first = time.monotonic()
            self.process.send_signal(signal.SIGINT)
        elif time.monotonic() - self.first > CBC_STOP_GRACE_S:
            self.process.kill()


def _run_highs(model: ExactModel, time_limit: float, seed: int, threads: int, deterministic: bool = False) -> tuple[str, np.ndarray, float | None]:
    """Solve with HiGHS through MathOpt from a hint; the status, every variable's value and HiGHS's dual bound.

    Status "failed" where HiGHS stopped with an error of its own (:class:`~packer.solvers.bounds.SolverFailed`).
    """
    with interrupt.stoppable():
        mo, handles = to_mathopt(model)
    hint = mathopt.SolutionHint(variable_values={var: float(value) for var, value in zip(handles, model.var_hint)})
    seconds = float(time_limit) * (WALL_CAP if deterministic else 1.0)
    params = mathopt.SolveParameters(time_limit=datetime.timedelta(seconds=seconds), random_seed=int(seed), relative_gap_tolerance=0.0,
                                     node_limit=DETERMINISTIC_NODES if deterministic else None)
    try:
        result = solve_mathopt(mo, mathopt.SolverType.HIGHS, params=params, model_params=mathopt.ModelSolveParameters(solution_hints=[hint]))
    except SolverFailed as error:
        log.warning("HiGHS failed (%s): no plan and no bound from it", error)
        return "failed", np.zeros(len(handles)), None
    reason = result.termination.reason
    found = result.has_primal_feasible_solution()
    if reason == mathopt.TerminationReason.OPTIMAL:
        status = "optimal"
    elif found:
        status = "feasible"
    elif reason in (mathopt.TerminationReason.INFEASIBLE, mathopt.TerminationReason.INFEASIBLE_OR_UNBOUNDED):
        status = "infeasible"
    else:
        status = "timeout"
    values = np.array(list(result.variable_values(handles))) if found else np.zeros(len(handles))
    bound = result.termination.objective_bounds.dual_bound
    return status, values, float(bound) if math.isfinite(bound) else None
