"""The result every solver returns (exact models, scalable engine, baselines, bounds)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: ``status`` values. "timeout" = no feasible solution was found within the time limit.
STATUSES = ("optimal", "feasible", "infeasible", "timeout")


@dataclass
class SolveResult:
    """One solve of a :class:`~packer.model.problem.PlacementProblem`.

    Attributes:
      assign: (T,) int64 host index per task.
      status: one of :data:`STATUSES`.
      objective: ``packer.model.metrics.evaluate(problem, assign).objective`` (objective units:
        cost units of the primary goal plus the weighted secondary terms).
      bound: a proven lower bound on the objective (same units); ``-inf`` when none.
      solver: the solver's name (e.g. "cpsat", "cbc", "highs", "engine").
      wall_s: wall-clock seconds of the whole call.
      infeasible_tasks: ids of the tasks that fit nowhere when ``status == "infeasible"``, else [].
      stats: free-form numbers (variables, constraints, branches, ...).
    """

    assign: np.ndarray
    status: str
    objective: float
    bound: float
    solver: str
    wall_s: float
    infeasible_tasks: list[str] = field(default_factory=list)
    stats: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status '{self.status}'; known: {', '.join(STATUSES)}")

    @classmethod
    def infeasible(cls, assign: np.ndarray, task_ids: list[str], solver: str, wall_s: float) -> "SolveResult":
        """The result when ``task_ids`` fit nowhere: no plan (``assign`` is returned unchanged), infinite objective and bound."""
        return cls(
            assign=np.asarray(assign, dtype=np.int64).copy(),
            status="infeasible",
            objective=math.inf,
            bound=math.inf,
            solver=solver,
            wall_s=wall_s,
            infeasible_tasks=list(task_ids),
        )

    @property
    def gap(self) -> float | None:
        """Relative gap ``(objective − bound) / max(|objective|, 1e-9)``; None unless both are finite."""
        if not (math.isfinite(self.objective) and math.isfinite(self.bound)):
            return None
        return (self.objective - self.bound) / max(abs(self.objective), 1e-9)
