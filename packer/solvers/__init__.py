"""Solvers of the placement problem: exact models (CP-SAT, PuLP MILP), the scalable engine, their shared result."""
from packer.solvers.result import STATUSES, SolveResult
from packer.solvers.cpsat import solve_cpsat, solve_subproblem
from packer.solvers.milp import MILP_SOLVERS, solve_milp

__all__ = ["MILP_SOLVERS", "STATUSES", "SolveResult", "solve_cpsat", "solve_milp", "solve_subproblem"]
