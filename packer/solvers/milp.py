"""The exact placement model as a MILP in PuLP, solved by CBC (bundled) or HiGHS (``highspy``).

Same model as :mod:`packer.solvers.cpsat` (rules and objective:
:mod:`packer.solvers.formulation`), in floating point: binaries ``x[t,h]`` per
candidate pair, ``open[h]``, ``enter[h]`` per host already over capacity, ``gain`` per
spread group (big-M), continuous ``excess[h,k] ≥ Σ_t use·x − 1``.

Tolerances. MILP solvers accept small violations (CBC's primal tolerance is 1e-7),
so capacity is stated with half of :data:`packer.model.metrics.TOLERANCE` as margin:
``load ≤ capacity + TOLERANCE/2``. Every returned plan is re-checked with
:func:`packer.model.metrics.violations` and its objective recomputed with
:func:`packer.model.metrics.evaluate`.

Bound. CBC's final lower bound is read from its log ("Objective value" when
optimal, "Lower bound" when stopped), HiGHS's from ``mip_dual_bound`` (HiGHS runs in a child process: OR-Tools and
highspy cannot share one, see ``_HIGHS_SCRIPT``); both are
lowered by 1e-7 relative to cover the solvers' optimality tolerances. HiGHS is
asked for a zero relative gap so that "optimal" means what it says.

Start. CBC gets the starting placement as a MIP start (``warmStart``); PuLP's
HiGHS interface passes no start. CBC runs single-threaded by default, which with a
fixed seed makes it deterministic unless the time limit cuts it short.
"""
from __future__ import annotations

import json
import logging
import math
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# Load OR-Tools' libhighs before PuLP tries highspy's (see _HIGHS_SCRIPT), so that
# importing this module never breaks CP-SAT.
from ortools.sat.python import cp_model  # noqa: F401
import pulp

from packer.model.metrics import TOLERANCE, evaluate, violations
from packer.model.problem import PlacementProblem
from packer.solvers.formulation import Formulation, build_formulation, unplaceable_tasks
from packer.solvers.result import SolveResult

log = logging.getLogger(__name__)

#: Solver names accepted by :func:`solve_milp`.
MILP_SOLVERS = ("cbc", "highs")

_SOL_STATUS = {
    pulp.LpSolutionOptimal: "optimal",
    pulp.LpSolutionIntegerFeasible: "feasible",
    pulp.LpSolutionInfeasible: "infeasible",
    pulp.LpSolutionUnbounded: "infeasible",
    pulp.LpSolutionNoSolutionFound: "timeout",
}


def solve_milp(
    problem: PlacementProblem,
    *,
    solver: str = "cbc",
    time_limit: float = 10.0,
    seed: int = 0,
    threads: int = 1,
) -> SolveResult:
    """Solve the whole instance with PuLP and ``solver`` ("cbc" or "highs"); ``time_limit`` in seconds.

    Returns status "infeasible" with the tasks named when some task has no host to
    be on (see :func:`packer.solvers.formulation.unplaceable_tasks`).
    """
    if solver not in MILP_SOLVERS:
        raise ValueError(f"unknown MILP solver '{solver}'; known: {', '.join(MILP_SOLVERS)}")
    t0 = time.perf_counter()
    stuck = unplaceable_tasks(problem)
    if len(stuck):
        return SolveResult.infeasible(problem.current, problem.task_ids[stuck].tolist(), solver, time.perf_counter() - t0)
    form = build_formulation(problem)
    lp, x, offset = _build_model(form)
    with tempfile.TemporaryDirectory(prefix="packer-milp-") as tmp:
        run = _run_cbc if solver == "cbc" else _run_highs
        status, model_bound = run(lp, Path(tmp), time_limit, seed, threads)

    bound = -math.inf
    if status in ("optimal", "feasible"):
        chosen = np.array([v.varValue or 0.0 for v in x]) > 0.5
        assign = form.assignment(chosen)
        broken = violations(problem, assign)
        if broken or np.bincount(form.pair_task[chosen], minlength=problem.n_tasks)[form.free].max(initial=1) != 1:
            raise RuntimeError(f"{solver} returned an invalid placement: {'; '.join(broken) or 'a task on several hosts'}")
    else:
        assign = form.base.copy()
    if status == "infeasible":
        log.error("%s declared a model infeasible that the starting placement satisfies; returning the starting placement", solver)
        status = "feasible"
    elif model_bound is not None and math.isfinite(model_bound):
        bound = model_bound + offset + form.constant
        bound -= 1e-7 * max(1.0, abs(bound))
    return SolveResult(
        assign=assign,
        status=status,
        objective=evaluate(problem, assign).objective,
        bound=bound,
        solver=solver,
        wall_s=time.perf_counter() - t0,
        stats={
            "free_tasks": len(form.free),
            "hosts": len(form.hosts),
            "variables": lp.numVariables(),
            "constraints": lp.numConstraints(),
        },
    )


def _run_cbc(lp: pulp.LpProblem, tmp: Path, time_limit: float, seed: int, threads: int) -> tuple[str, float | None]:
    """Solve with PuLP's bundled CBC from the initial values; returns the status and CBC's bound (model units)."""
    log_path = tmp / "cbc.log"
    engine = pulp.PULP_CBC_CMD(
        msg=False,
        timeLimit=time_limit,
        threads=threads,
        warmStart=True,
        logPath=str(log_path),
        options=[f"randomSeed {seed + 1}", f"randomCbcSeed {seed + 1}"],
    )
    lp.solve(engine)
    return _SOL_STATUS.get(lp.sol_status, "timeout"), _cbc_bound(log_path.read_text())


# OR-Tools and highspy ship different builds of the same libhighs.so.1; in one process
# the first one loaded wins and the other package fails to import (with ortools
# first, PuLP's in-process HiGHS reports "Not Available"; with highspy first,
# CP-SAT cannot be imported). HiGHS therefore runs in a child process on an MPS file.
_HIGHS_SCRIPT = """
import json, sys
import highspy
mps, out, time_limit, seed, threads = sys.argv[1:6]
h = highspy.Highs()
h.setOptionValue("output_flag", False)
h.setOptionValue("time_limit", float(time_limit))
h.setOptionValue("random_seed", int(seed))
h.setOptionValue("threads", int(threads))
h.setOptionValue("mip_rel_gap", 0.0)
h.readModel(mps)
h.run()
info = h.getInfo()
found = info.primal_solution_status == 2
with open(out, "w") as f:
    json.dump({"status": h.modelStatusToString(h.getModelStatus()), "found": found, "bound": info.mip_dual_bound,
               "names": list(h.getLp().col_names_), "values": list(h.getSolution().col_value) if found else []}, f)
"""


def _run_highs(lp: pulp.LpProblem, tmp: Path, time_limit: float, seed: int, threads: int) -> tuple[str, float | None]:
    """Solve with HiGHS (``highspy``) in a child process; sets the variables' values; returns the status and HiGHS's bound."""
    mps, out = tmp / "model.mps", tmp / "solution.json"
    lp.writeMPS(str(mps))
    done = subprocess.run(
        [sys.executable, "-c", _HIGHS_SCRIPT, str(mps), str(out), str(time_limit), str(seed), str(threads)],
        capture_output=True,
        text=True,
        timeout=time_limit + 60,
    )
    if done.returncode != 0:
        raise RuntimeError(f"HiGHS failed: {done.stderr.strip()[-2000:]}")
    answer = json.loads(out.read_text())
    variables = lp.variablesDict()
    for name, value in zip(answer["names"], answer["values"]):
        variables[name].varValue = value
    if answer["status"] == "Optimal":
        status = "optimal"
    elif answer["found"]:
        status = "feasible"
    elif answer["status"] == "Infeasible":
        status = "infeasible"
    else:
        status = "timeout"
    return status, answer["bound"]


def _cbc_bound(text: str) -> float | None:
    """CBC's final lower bound from its log: "Lower bound" if it stopped early, else the optimal "Objective value"."""
    for label in ("Lower bound:", "Objective value:"):
        found = re.findall(rf"^{label}\s*([-+0-9.eE]+)", text, flags=re.MULTILINE)
        if found:
            return float(found[-1])
    return None


def _build_model(form: Formulation) -> tuple[pulp.LpProblem, list[pulp.LpVariable], float]:
    """The MILP of ``form`` with the base placement as initial values.

    Returns the problem, the x variables and the objective's constant (PuLP passes
    no constant to the solver): the moves' term is ``w.moves·(staying pairs − Σ x_stay)``.
    """
    p = form.problem
    w = p.weights
    lp = pulp.LpProblem("placement", pulp.LpMinimize)
    x = [lp.add_variable(f"x{i}", cat=pulp.LpBinary) for i in range(form.n_pairs)]
    for var, value in zip(x, form.pair_base):
        var.setInitialValue(int(value))
    objective: list = []

    # Each free task on exactly one of its candidate hosts.
    for i in range(len(form.free)):
        lp += pulp.lpSum(x[form.task_start[i] : form.task_start[i + 1]]) == 1

    by_host = form.pairs_by_host()

    # open[h] = the host holds a task; hosts with a fixed task are open anyway (in the constant).
    for h in form.model_hosts:
        ids = by_host.get(int(h), [])
        if not ids:
            continue
        is_open = lp.add_variable(f"open{h}", cat=pulp.LpBinary)
        is_open.setInitialValue(int(form.pair_base[ids].any()))
        for i in ids:
            lp += x[i] <= is_open
        lp += is_open <= pulp.lpSum(x[i] for i in ids)
        objective.append(float(p.open_weight[h]) * is_open)

    # Capacity: the load change against base within the slack; a host already over
    # capacity in base keeps its load unless a task enters it.
    for h in form.hosts:
        ids = np.asarray(by_host.get(int(h), []), dtype=np.int64)
        entering = ids[~form.pair_base[ids]]
        if len(entering) == 0:
            continue
        staying = ids[form.pair_base[ids]]
        enter = None
        for d in range(len(p.dims)):
            slack = form.slack[h, d] - TOLERANCE / 2
            up = p.demand[form.pair_task[entering], d]
            if not math.isfinite(slack) or up.sum() <= slack:
                continue
            down = p.demand[form.pair_task[staying], d]
            load = pulp.lpSum(float(c) * x[i] for c, i in zip(up, entering)) + pulp.lpSum(float(c) * x[i] for c, i in zip(down, staying))
            rhs = slack + float(down.sum())
            if slack < 0:
                if enter is None:
                    enter = lp.add_variable(f"enter{h}", cat=pulp.LpBinary)
                    enter.setInitialValue(0)
                    for i in entering:
                        lp += x[i] <= enter
                rhs = rhs - slack * (1 - enter)
            lp += load <= rhs

    # Move budget: free tasks that leave their current host.
    stays = np.flatnonzero(form.pair_current)
    if form.move_budget is not None and len(stays) > form.move_budget:
        lp += pulp.lpSum(x[i] for i in stays) >= len(stays) - form.move_budget
    objective.append(-w.moves * pulp.lpSum(x[i] for i in stays))

    # Spread: a (job, host/domain) group that gains a task ends with at most the limit.
    for g, group in enumerate(form.spread):
        count = pulp.lpSum(x[i] for i in group.pairs)
        if group.forced:
            lp += count <= group.room
            continue
        gain = lp.add_variable(f"gain{g}", cat=pulp.LpBinary)
        gain.setInitialValue(int(form.pair_base[group.gainers].any()))
        for i in group.gainers:
            lp += x[i] <= gain
        most = len(np.unique(form.pair_task[group.pairs]))
        lp += count <= group.room + max(0, most - group.room) * (1 - gain)

    # Soft sensitivity: excess ≥ Σ normalized use − 1.
    for h, k in zip(*np.nonzero(form.sens_active)):
        ids = by_host.get(int(h), [])
        excess = lp.add_variable(f"excess{h}_{k}", lowBound=0)
        excess.setInitialValue(max(0.0, float(form.sens_fixed[h, k] + form.sens_use[ids, k][form.pair_base[ids]].sum() - 1.0)))
        lp += excess >= pulp.lpSum(float(form.sens_use[i, k]) * x[i] for i in ids) + float(form.sens_fixed[h, k] - 1.0)
        objective.append(w.sensitivity * excess)

    lp += pulp.lpSum(objective)
    return lp, x, w.moves * len(stays)
