"""First-fit-decreasing ingredients shared by the FFD baseline and the engine's LP-guided construction.

Both pack tasks largest first onto the hosts whose capacity is cheapest:

* :func:`capacity_price` — a host's objective weight of being occupied per unit of
  its capacity, the fragmentation dimensions each counted in mean host capacities
  (so an average host offers about one unit per dimension): the cheapest capacity
  is filled first and the dearest emptied first;
* :func:`relative_demand` — a task's demand as a share of the largest host's
  capacity per dimension (dimensionless), from which each packer takes its size;
* :func:`largest_first` — tasks in decreasing order of a size (ties keep their order).
"""
from __future__ import annotations

import numpy as np

from packer.model.problem import PlacementProblem


def capacity_price(problem: PlacementProblem) -> np.ndarray:
    """(H,) objective weight of occupying each host per unit of its capacity (objective units per mean host's capacity)."""
    capacity = (problem.capacity[:, list(problem.frag_dims)] / problem.frag_scale).sum(axis=1)
    return problem.open_weight / np.maximum(capacity, 1e-12)


def relative_demand(problem: PlacementProblem) -> np.ndarray:
    """(T, D) each task's demand over the largest host capacity in each dimension (a fraction; 0 where no host has any)."""
    top = np.maximum(problem.capacity.max(axis=0), 1e-12) if problem.n_hosts else np.ones(len(problem.dims))
    return problem.demand / top


def largest_first(tasks: np.ndarray, size: np.ndarray) -> np.ndarray:
    """``tasks`` ordered by decreasing ``size`` (one per task of ``tasks``); equal sizes keep their order."""
    return tasks[np.argsort(-size, kind="stable")]
