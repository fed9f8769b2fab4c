"""The tasks-at-risk guard (``--max-new-at-risk N``): at most N more tasks at risk of interference than today.

A task is at risk when its host's summed normalized sensitivity exceeds 1 in some
dimension (the colocation paper's count beside Eq. 4). The guard is a count over the
whole placement, so the heuristics check it after each batch of moves
(:meth:`MaxNewAtRisk.holds`) and prefer hosts where a task adds the fewest tasks at
risk (:meth:`MaxNewAtRisk.preference`). Only the engine honours it; its neighbourhood
search solves without it and keeps only results that hold it.
"""
from __future__ import annotations

import numpy as np

from packer.model.metrics import normalized_sensitivity, over_sensitivity_limit, tasks_at_risk
from packer.rules.base import Rule


class _Risk:
    """Tasks at risk per host and in all, kept up to date on a state."""

    def __init__(self, state, limit: int):
        self.limit = limit
        self.per_host = self.host_risk(state, np.arange(state.p.n_hosts))
        self.total = int(self.per_host.sum())

    @staticmethod
    def host_risk(state, rows: np.ndarray) -> np.ndarray:
        over = over_sensitivity_limit(normalized_sensitivity(state.sens[rows], state.p.sens_capacity[rows]))
        return np.where(over, state.count[rows], 0)


class MaxNewAtRisk(Rule):
    """At most ``allowance`` more tasks at risk than in the current placement (module doc)."""

    name = "tasks-at-risk guard"
    strategies = ("engine",)

    def __init__(self, allowance: int):
        if allowance < 0:
            raise ValueError(f"the tasks-at-risk allowance must be >= 0, got {allowance}")
        self.allowance = int(allowance)

    def limit(self, problem) -> int:
        """Today's tasks at risk plus the allowance."""
        return tasks_at_risk(problem, problem.current) + self.allowance

    def violations(self, problem, assign):
        limit, now = self.limit(problem), tasks_at_risk(problem, assign)
        if now <= limit:
            return []
        return [f"{now} tasks at risk of interference, more than the {limit} the guard allows "
                f"(today's {limit - self.allowance} + {self.allowance})"]

    def attach(self, state):
        return _Risk(state, self.limit(state.p)) if state.p.sens_dims else None

    def on_move(self, state, t, frm, to):
        risk = state.tally.get(self)
        if risk is None:
            return
        rows = np.array([to] if frm < 0 else [frm, to])
        new = risk.host_risk(state, rows)
        risk.total += int(new.sum() - risk.per_host[rows].sum())
        risk.per_host[rows] = new

    def holds(self, state):
        risk = state.tally.get(self)
        return risk is None or risk.total <= risk.limit

    def preference(self, state, t, hosts):
        """Tasks at risk a move of ``t`` adds on each of ``hosts`` (its own host's change aside)."""
        risk = state.tally.get(self)
        if risk is None:
            return None
        p = state.p
        over = over_sensitivity_limit(normalized_sensitivity(state.sens[hosts] + p.sens_demand[t], p.sens_capacity[hosts]))
        return np.where(over, state.count[hosts] + 1, 0) - risk.per_host[hosts]

    def describe(self):
        return {"rule": self.name, "max_new_at_risk": self.allowance}
