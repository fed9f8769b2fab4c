"""The move budget: at most ``limit`` tasks leave their current host (``--max-moves``)."""
from __future__ import annotations

import numpy as np

from packer.rules.base import Rule


class MoveBudget(Rule):
    """At most ``limit`` tasks end on a host other than their current one (``limit`` ≥ 0)."""

    name = "move budget"

    def __init__(self, limit: int):
        if limit < 0:
            raise ValueError(f"the move budget must be >= 0, got {limit}")
        self.limit = self.move_limit = int(limit)

    def violations(self, problem, assign):
        moved = int((assign != problem.current).sum())
        return [f"{moved} moves exceed the budget of {self.limit}"] if moved > self.limit else []

    def holds(self, state):
        return state.moves <= self.limit

    def add_to_model(self, model):
        """Free tasks that leave their current host, within what the fixed ones left of the budget."""
        form = model.form
        stays = np.flatnonzero(form.pair_current)
        budget = self.limit - form.fixed_moves
        if len(stays) > budget:
            model.add_ge(model.x[stays], np.ones(len(stays)), len(stays) - budget)

    def describe(self):
        return {"rule": self.name, "max_moves": self.limit}
