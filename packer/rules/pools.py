"""Pools: a task stays in its current host's pool (``pool`` column of ``hosts.parquet``).

A fleet split into pools (clusters, regions, tenants) is several independent problems:
no task may move to a host of another pool, so each pool can be solved on its own and
side by side (:mod:`packer.solvers.pools`). The rule exists only on a trace whose hosts
have a ``pool`` column.
"""
from __future__ import annotations

import numpy as np

from packer.rules.base import Rule


class Pools(Rule):
    """Tasks end on a host of their current host's pool. ``host_pool`` (H,): each host's pool code into ``names``."""

    name = "pools"

    def __init__(self, host_pool: np.ndarray, names: tuple[str, ...]):
        self.host_pool = np.asarray(host_pool, dtype=np.int64)
        self.names = tuple(str(n) for n in names)

    def violations(self, problem, assign):
        bad = self.host_pool[assign] != self.host_pool[problem.current]
        if not bad.any():
            return []
        return [f"{int(bad.sum())} tasks moved to a host of another pool, e.g. {problem.task_ids[bad][:5].tolist()}"]

    def admits(self, state, t, hosts):
        return self.host_pool[hosts] == self.host_pool[state.p.current[t]]

    def candidates(self, problem, fixed_load, pair_task, pair_host):
        return self.host_pool[pair_host] == self.host_pool[problem.current[pair_task]]

    def describe(self):
        return {"rule": self.name, "pools": list(self.names)}
