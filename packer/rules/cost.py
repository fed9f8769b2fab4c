"""The primary goal: the summed cost of occupied hosts (``--goal tco``, cost units) or their number (``--goal hosts``)."""
from __future__ import annotations

import numpy as np

from packer.model.metrics import occupied
from packer.rules.base import Goal

#: Primary goals of :class:`Cost`.
COST_KINDS = ("tco", "hosts")


class Cost(Goal):
    """Σ over occupied hosts of their cost (``kind="tco"``, cost units of the fleet catalog) or of 1 (``kind="hosts"``)."""

    name = "cost"
    term = "primary"
    primary = True

    def __init__(self, kind: str = "tco"):
        if kind not in COST_KINDS:
            raise ValueError(f"unknown primary goal {kind!r}; known: {', '.join(COST_KINDS)}")
        super().__init__(1.0)
        self.kind = kind

    def per_host(self, problem) -> np.ndarray:
        """(H,) cost units (tco) or 1 (hosts) per occupied host."""
        return problem.cost if self.kind == "tco" else np.ones(problem.n_hosts)

    def value(self, problem, assign):
        return float(self.per_host(problem)[occupied(problem, assign)].sum())

    def open_cost(self, problem):
        return self.per_host(problem)

    def add_to_model(self, model):
        model.add_open_costs(self.open_cost(model.form.problem))

    def describe(self):
        return {"goal": self.name, "kind": self.kind}

    def __repr__(self) -> str:
        return f"Cost({self.kind!r})"
