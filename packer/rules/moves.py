"""Fewer moves: ``weight`` per task that leaves its current host (the last tie-break by default)."""
from __future__ import annotations

import numpy as np

from packer.rules.base import Goal


class FewerMoves(Goal):
    """``weight ·`` tasks whose host differs from their current one."""

    name = "moves"
    term = "moves"
    tie_break = True

    def value(self, problem, assign):
        return float(self.weight * (np.asarray(assign) != problem.current).sum())

    def delta(self, state, t, hosts):
        p = state.p
        frm = int(state.assign[t])
        was = float(frm >= 0 and frm != p.current[t])
        return self.weight * ((hosts != p.current[t]).astype(float) - was)

    def add_to_model(self, model):
        """``weight · (fixed moves + Σ_free (1 − x_stay))``: staying pairs earn −weight."""
        form = model.form
        stays = np.flatnonzero(form.pair_current)
        model.objective(model.x[stays], np.full(len(stays), -self.weight))
        model.constant += self.weight * (len(stays) + form.fixed_moves)
