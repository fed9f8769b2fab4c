"""Eligibility: a task that moves lands on an architecture it may use.

A task may use an architecture unless its ``allowed_archs`` exclude it, it is larger
than an empty host of it, or its sensitivity alone exceeds such a host's
(:func:`packer.model.build.build_problem` computes ``problem.eligible``). A task that
stays is never evicted for being ineligible where it already runs.
"""
from __future__ import annotations

import numpy as np

from packer.rules.base import Rule


class Eligibility(Rule):
    """Moved tasks only onto eligible architectures (module doc)."""

    name = "eligibility"

    def violations(self, problem, assign):
        moved = assign != problem.current
        bad = moved & ~problem.eligible[np.arange(problem.n_tasks), problem.host_arch[assign]]
        if not bad.any():
            return []
        return [f"{int(bad.sum())} moved tasks on an ineligible architecture, e.g. {problem.task_ids[bad][:5].tolist()}"]

    def admits(self, state, t, hosts):
        p = state.p
        return p.eligible[t][p.host_arch[hosts]] | (hosts == p.current[t])

    def candidates(self, problem, fixed_load, pair_task, pair_host):
        return problem.eligible[pair_task, problem.host_arch[pair_host]] | (pair_host == problem.current[pair_task])


class Pins(Rule):
    """Pinned tasks (``movable`` false) stay on their current host."""

    name = "pins"

    def violations(self, problem, assign):
        bad = (assign != problem.current) & ~problem.movable
        if not bad.any():
            return []
        return [f"{int(bad.sum())} pinned tasks moved, e.g. {problem.task_ids[bad][:5].tolist()}"]

    def admits(self, state, t, hosts):
        p = state.p
        return np.full(len(hosts), bool(p.movable[t])) | (hosts == p.current[t])

    def candidates(self, problem, fixed_load, pair_task, pair_host):
        return problem.movable[pair_task] | (pair_host == problem.current[pair_task])
