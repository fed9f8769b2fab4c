"""Fragmentation (colocation paper, Eq. 2): unused capacity on occupied hosts, a secondary goal.

Per fragmentation dimension (cpu and memory) Σ over occupied hosts of capacity − load,
divided by the mean host capacity in that dimension (``problem.frag_scale``), so the
term counts "empty hosts' worth" of unused capacity. The load of all tasks does not
depend on the placement, so up to a constant the term is Σ over occupied hosts of
their scaled capacity: a cost per occupied host.
"""
from __future__ import annotations

import numpy as np

from packer.model.metrics import host_loads, occupied
from packer.rules.base import Goal


class Fragmentation(Goal):
    """``weight ·`` Σ_dims Σ_occupied (capacity − load) / frag_scale (module doc)."""

    name = "fragmentation"
    term = "fragmentation"

    def value(self, problem, assign):
        occ = occupied(problem, assign)
        dims = list(problem.frag_dims)
        unused = (problem.capacity[occ][:, dims] - host_loads(problem, assign)[occ][:, dims]).sum(axis=0)
        return float(self.weight * (unused / problem.frag_scale).sum())

    def open_cost(self, problem):
        return self.weight * (problem.capacity[:, list(problem.frag_dims)] / problem.frag_scale).sum(axis=1)

    def constant(self, problem) -> float:
        """The placement-independent part, ``−weight · Σ_dims Σ_tasks demand / frag_scale``."""
        demand = problem.demand[:, list(problem.frag_dims)].sum(axis=0)
        return float(-self.weight * (demand / problem.frag_scale).sum())

    def least(self, problem) -> float:
        """``−weight ·`` Σ_dims Σ_hosts (today's load − capacity)⁺ / frag_scale: only a host kept over capacity has less than
        nothing unused, never more over than today (a host within capacity may end up to ``TOLERANCE`` over, not counted)."""
        dims = list(problem.frag_dims)
        over = np.clip(host_loads(problem, problem.current)[:, dims] - problem.capacity[:, dims], 0.0, None)
        return float(-self.weight * (over.sum(axis=0) / problem.frag_scale).sum())

    def add_to_model(self, model):
        model.add_open_costs(self.open_cost(model.form.problem))
        model.constant += self.constant(model.form.problem)
