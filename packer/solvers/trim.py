"""A plan brought within a move budget by undoing some of its moves (a budgeted solve's start from a full repack's)."""
from __future__ import annotations

import numpy as np

from packer.model.problem import PlacementProblem
from packer.model.state import PlacementState


def trim_to_budget(problem: PlacementProblem, assign: np.ndarray, budget: int) -> np.ndarray | None:
    """``assign`` (T,) with moves undone until at most ``budget`` tasks are off their current host; None where it cannot be.

    First, tasks go back to their current host where that host is still open and the rules admit them (it stays open,
    so the cost freed stays; up to :data:`RETURN_PASSES` passes, as one task's return can make room for another's).
    Then hosts the plan empties are opened again, every task of theirs going back (a move each): most tasks per unit of
    open weight first, and for the moves still over the budget after the last whole such step, the cheapest host of
    enough tasks among the rest. None where a task may not go back (a rule refuses it) or the result breaks a rule on the
    whole placement. Undoes moves only: a plan already within the budget comes back as it is.
    """
    state = PlacementState(problem, assign)
    home = problem.current
    for _ in range(RETURN_PASSES):
        if not _return_to_open_hosts(state, budget):
            break
    over = state.moves - budget
    if over > 0:
        today = np.bincount(home, minlength=problem.n_hosts)
        emptied = np.flatnonzero((today > 0) & (state.count == 0))
        emptied = emptied[np.argsort(-today[emptied] / np.maximum(state.open_cost[emptied], 1e-12), kind="stable")]
        covered = np.cumsum(today[emptied])
        whole = int(np.searchsorted(covered, over))  # hosts before this one leave some moves over the budget
        if whole == len(emptied):
            return None
        left = over - (covered[whole - 1] if whole else 0)
        rest = emptied[whole:][today[emptied[whole:]] >= left]
        last = rest[np.argmin(state.open_cost[rest])]
        for t in np.flatnonzero(np.isin(home, [*emptied[:whole], last])).tolist():
            if not len(state.feasible(t, home[t:t + 1])):
                return None
            state.move(t, int(home[t]))
    return state.assign if state.holds() else None


#: Most passes of returning tasks to hosts that stay open (each looks at every task still moved).
RETURN_PASSES = 3


def _return_to_open_hosts(state: PlacementState, budget: int) -> bool:
    """One pass moving tasks back to their current host where it holds tasks and the rules admit them, until ``state`` is
    within ``budget``; whether a further pass may return more (some returned, and still over the budget)."""
    home = state.p.current
    returned = False
    for t in np.flatnonzero(state.assign != home).tolist():
        if state.moves <= budget:
            return False
        # Checked per task: returns may have emptied a host since the pass began, and a return must not open it again.
        if state.count[home[t]] and len(state.feasible(t, home[t:t + 1])):
            state.move(t, int(home[t]))
            returned = True
    return returned and state.moves > budget
