"""Any import order of pulp, highspy, SciPy and packer works: every HiGHS in the process solves, packer's own among them.

`import pulp` with highspy installed puts highspy's HiGHS in the global symbol scope;
OR-Tools loaded after that used to run that copy and crash (packer.solvers.native).
Each order runs in a fresh interpreter, since only the first import of a library counts.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

SCRIPT = """
import importlib, sys
sys.path.insert(0, {tests!r})
for name in {order!r}:
    importlib.import_module(name)

import highspy
import pulp
from scipy.optimize import linprog

from packer.model.metrics import violations
from packer.solvers.run import run_solver
from problems import random_problem

problem = random_problem(3, 12, 4, sens=True, max_moves=None)
objectives = {{}}
for solver in ("cbc", "highs", "cpsat", "engine"):  # the engine's full-repack bound is a HiGHS MILP
    result = run_solver(problem, solver, 10)
    assert result.status in ("optimal", "feasible") and not violations(problem, result.assign), solver
    objectives[solver] = result.objective
assert abs(objectives["cbc"] - objectives["highs"]) < 1e-6, objectives

h = highspy.Highs()
h.setOptionValue("output_flag", False)
h.addVar(1.0, 5.0)
h.changeColCost(0, 1.0)
h.run()
assert abs(h.getInfo().objective_function_value - 1.0) < 1e-9
assert abs(linprog([1.0], bounds=[(2.0, 5.0)], method="highs").fun - 2.0) < 1e-9
lp = pulp.LpProblem("p", pulp.LpMinimize)
x = pulp.LpVariable("x", 3)
lp += x
lp.solve(pulp.HiGHS(msg=False))
assert abs(x.value() - 3.0) < 1e-9
print("ok")
"""

ORDERS = [
    ("pulp", "highspy", "scipy.optimize", "packer.solvers"),
    ("highspy", "pulp", "packer.solvers", "scipy.optimize"),
    ("scipy.optimize", "packer.solvers", "pulp", "highspy"),
    ("packer.solvers", "highspy", "scipy.optimize", "pulp"),
    ("packer", "pulp", "packer.solvers"),
    ("ortools.math_opt.python.mathopt", "packer.solvers", "pulp"),
]


@pytest.mark.parametrize("order", ORDERS, ids=lambda order: ",".join(order))
def test_every_highs_solves_whatever_was_imported_first(order):
    pytest.importorskip("highspy", reason="highspy is a test dependency: install packer[test]")
    run = subprocess.run([sys.executable, "-c", SCRIPT.format(tests=str(TESTS), order=list(order))],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), (run.returncode, run.stderr[-2000:])
