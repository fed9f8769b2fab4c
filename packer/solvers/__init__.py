"""Solvers of the placement problem: the exact model (:mod:`~packer.solvers.exact`) in CP-SAT and as a MILP (CBC, HiGHS),
the scalable engine, the leximin ``fair`` solvers, the baselines, the bounds, and the dispatch (:mod:`~packer.solvers.run`)."""
# First: OR-Tools is loaded there, isolated from another HiGHS already in the process.
from packer.solvers.native import ISOLATED_ORTOOLS
from packer.solvers.result import STATUSES, SolveResult
from packer.solvers.cpsat import solve_cpsat, solve_subproblem
from packer.solvers.milp import MILP_SOLVERS, solve_milp

__all__ = ["ISOLATED_ORTOOLS", "MILP_SOLVERS", "STATUSES", "SolveResult", "solve_cpsat", "solve_milp", "solve_subproblem"]
