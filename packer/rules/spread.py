"""Spread: at most ``limit`` tasks of one job per host, or per failure domain (``--spread-host``, ``--spread-domain``).

The limit holds where a job *gains* tasks: a (job, host) or (job, domain) pair that
some moved task of the job lands in ends with at most ``limit`` of the job's tasks;
a pair that gains nothing keeps what it has (the current placement is always valid).
Hosts without a domain (-1) are not held to a domain limit.
"""
from __future__ import annotations

import numpy as np

from packer.rules.base import Rule


class _JobIndex:
    """Tasks grouped by job: ``tasks[start[j]:start[j + 1]]`` are job j's."""

    def __init__(self, job: np.ndarray):
        self.tasks = np.argsort(job, kind="stable")
        self.start = np.searchsorted(job[self.tasks], np.arange(int(job.max(initial=-1)) + 2))

    def of(self, j: int) -> np.ndarray:
        return self.tasks[self.start[j]:self.start[j + 1]]


class Spread(Rule):
    """At most ``limit`` tasks of a job per host (``scope="host"``) or per domain (``scope="domain"``) where it gains tasks."""

    name = "spread"

    def __init__(self, scope: str, limit: int):
        if scope not in ("host", "domain"):
            raise ValueError(f"spread scope must be host or domain, got {scope!r}")
        if limit < 1:
            raise ValueError(f"spread per {scope} must be at least 1, got {limit}")
        self.scope, self.limit = scope, int(limit)

    def _group(self, problem, hosts: np.ndarray) -> np.ndarray:
        """The group (host or domain; -1 for none) of each of ``hosts``."""
        return hosts if self.scope == "host" else problem.domain[hosts]

    def _n_groups(self, problem) -> int:
        return problem.n_hosts if self.scope == "host" else max(int(problem.domain.max(initial=-1)) + 1, 1)

    def violations(self, problem, assign):
        group = self._group(problem, assign)
        valid = group >= 0
        pairs = problem.job[valid].astype(np.int64) * self._n_groups(problem) + group[valid]
        counts = np.bincount(pairs)
        gained = np.zeros_like(counts, dtype=bool)
        gained[pairs[(assign != problem.current)[valid]]] = True
        broken = (counts > self.limit) & gained
        return [f"{int(broken.sum())} (job, {self.scope}) pairs exceed the spread limit of {self.limit} tasks"] if broken.any() else []

    def attach(self, state):
        return _JobIndex(state.p.job)

    def admits(self, state, t, hosts):
        """Placing ``t`` keeps every pair it gains or joins within the limit (a task returning home joins without gaining)."""
        p, jobs = state.p, state.tally[self]
        mates = jobs.of(int(p.job[t]))
        mates = mates[(state.assign[mates] >= 0) & (mates != t)]
        n = self._n_groups(p)
        mate_group = self._group(p, state.assign[mates])
        counted = mate_group >= 0
        count = np.bincount(mate_group[counted], minlength=n)
        gained = np.zeros(n, dtype=bool)
        gained[mate_group[counted & (state.assign[mates] != p.current[mates])]] = True
        group = self._group(p, hosts)
        in_group = group >= 0
        g = np.where(in_group, group, 0)
        gains = (hosts != p.current[t]) | gained[g]
        return ~in_group | ~gains | (count[g] + 1 <= self.limit)

    def add_to_model(self, model):
        """A group that can gain and could end above the limit: count ≤ room where it gains (``gain`` flag)."""
        form, p = model.form, model.form.problem
        for g, group in enumerate(_groups(p, self, form)):
            pairs, gainers, room, forced = group
            count_vars = model.x[pairs]
            ones = np.ones(len(pairs))
            if forced:
                model.add_le(count_vars, ones, room)
                continue
            gain = model.bool_var(f"gain{self.scope}{g}", hint=bool(form.pair_base[gainers].any()))
            for i in gainers:
                model.implies(model.x[i], gain)
            model.add_le(count_vars, ones, room, enforce=(gain,))

    def describe(self):
        return {"rule": self.name, "scope": self.scope, "limit": self.limit}


def _groups(p, rule: Spread, form) -> list[tuple[np.ndarray, np.ndarray, int, bool]]:
    """(job, group) pairs whose limit can bind: (candidate pairs in it, those that gain, room, gained by a fixed task)."""
    base, is_free, pair_task, pair_host = form.base, form.is_free, form.pair_task, form.pair_host
    group_of_host = np.arange(p.n_hosts) if rule.scope == "host" else p.domain
    n_groups = int(group_of_host.max(initial=-1)) + 1
    fixed = np.flatnonzero(~is_free & (group_of_host[base] >= 0))
    fixed_key = p.job[fixed] * n_groups + group_of_host[base[fixed]]
    fixed_keys, fixed_count = np.unique(fixed_key, return_counts=True)
    forced_keys = np.unique(fixed_key[base[fixed] != p.current[fixed]])

    valid = np.flatnonzero(group_of_host[pair_host] >= 0)
    key = p.job[pair_task[valid]] * n_groups + group_of_host[pair_host[valid]]
    order = np.argsort(key, kind="stable")
    keys, starts, sizes = np.unique(key[order], return_index=True, return_counts=True)
    already = np.zeros(len(keys), dtype=np.int64)
    if len(fixed_keys):
        pos = np.clip(np.searchsorted(fixed_keys, keys), 0, len(fixed_keys) - 1)
        hit = fixed_keys[pos] == keys
        already[hit] = fixed_count[pos[hit]]
    forced = np.isin(keys, forced_keys)
    # A group binds only if it can gain and could end above the limit; a free task counts once however many of its hosts it may use.
    task_in_group = np.unique(key * p.n_tasks + pair_task[valid])
    tasks_per_group = np.unique(task_in_group // p.n_tasks, return_counts=True)[1]
    gains = pair_host[valid] != p.current[pair_task[valid]]
    out = []
    for g in np.flatnonzero(already + tasks_per_group > rule.limit):
        members = valid[order[starts[g]:starts[g] + sizes[g]]]
        gainers = members[gains[order[starts[g]:starts[g] + sizes[g]]]]
        if forced[g] or len(gainers):
            out.append((members, gainers, int(rule.limit - already[g]), bool(forced[g])))
    return out
