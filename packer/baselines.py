"""Baseline placement policies, for comparison with the optimizer. None of them is packer's answer.

* :func:`first_fit_decreasing` — full repack by multi-dimensional first-fit
  decreasing: tasks sorted by the product of their demands normalized by the
  largest host capacity (ARCHITECTURE.md: ~5% above the bound on openb, against ~15%
  for the sum), hosts opened in order of objective weight per unit of capacity
  (cheapest capacity first, the currently most loaded first among equals). Pinned
  tasks stay; a task may always return to its current host.
"""
from __future__ import annotations

import time

import numpy as np

from packer.metrics import TOLERANCE, evaluate, initially_overloaded, violations
from packer.problem import PlacementProblem
from packer.solvers.result import SolveResult


def first_fit_decreasing(problem: PlacementProblem) -> SolveResult:
    """Full repack by first-fit decreasing (ignores the move budget: a capacity-planning baseline)."""
    t0 = time.perf_counter()
    p = problem
    top = np.maximum(p.capacity.max(axis=0), 1e-12)
    size = np.prod(np.maximum(p.demand / top, 1e-9), axis=1)
    per_capacity = p.open_weight / np.maximum((p.capacity[:, list(p.frag_dims)] / p.frag_scale).sum(axis=1), 1e-12)
    host_order = np.lexsort((-np.bincount(p.current, minlength=p.n_hosts), per_capacity))
    rank = np.empty(p.n_hosts, dtype=np.int64)
    rank[host_order] = np.arange(p.n_hosts)
    receiver = ~initially_overloaded(p)
    loads = np.zeros_like(p.capacity)
    assign = np.full(p.n_tasks, -1)
    pinned = ~p.movable
    np.add.at(loads, p.current[pinned], p.demand[pinned])
    assign[pinned] = p.current[pinned]
    count = np.bincount(p.current[pinned], minlength=p.n_hosts)
    for t in np.flatnonzero(p.movable)[np.argsort(-size[p.movable], kind="stable")]:
        allowed = receiver & p.eligible[t][p.host_arch]
        allowed[p.current[t]] = True
        fits = allowed & (loads + p.demand[t] <= p.capacity + TOLERANCE).all(axis=1)
        if not fits.any():
            assign[t] = p.current[t]  # nothing else fits: it keeps its host (always valid)
        else:
            candidates = np.flatnonzero(fits)
            opened = candidates[count[candidates] > 0]
            pool = opened if len(opened) else candidates
            assign[t] = pool[np.argmin(rank[pool])]
        loads[assign[t]] += p.demand[t]
        count[assign[t]] += 1
    ok = not violations(p, assign)
    if not ok:
        assign = p.current.copy()
    return SolveResult(assign=assign, status="feasible", objective=evaluate(p, assign).objective, bound=-np.inf,
                       solver="ffd", wall_s=time.perf_counter() - t0, stats={"valid_first_try": ok})

