"""Shared hand-made and random PlacementProblem instances for the solver, baseline and metric tests (and benchmarks/bench_solve.py)."""
from __future__ import annotations

import numpy as np

from packer.model.build import GoalWeights, RuleOptions, make_goals, make_rules
from packer.model.problem import PlacementProblem


def random_problem(seed: int, n_tasks: int = 20, n_hosts: int = 6, n_archs: int = 3, spread: bool = False, sens: bool = False, max_moves="random",
                   weights: GoalWeights = GoalWeights(), goal: str = "tco", min_rp: float | None = None,
                   max_new_at_risk: int | None = None) -> PlacementProblem:
    """A random instance: 2-3 architectures, random (sometimes overloaded) current placement, some pinned tasks."""
    rng = np.random.default_rng(seed)
    arch_cap = np.array([[16.0, 64.0], [32.0, 128.0], [24.0, 96.0]])[:n_archs]
    host_arch = rng.integers(0, n_archs, n_hosts)
    host_arch[: min(n_archs, n_hosts)] = np.arange(min(n_archs, n_hosts))
    k = 2 if sens else 0
    if max_moves == "random":
        max_moves = None if rng.random() < 0.3 else int(rng.integers(0, n_tasks // 2 + 1))
    return PlacementProblem(
        task_ids=np.array([f"t{i}" for i in range(n_tasks)]),
        host_ids=np.array([f"h{i}" for i in range(n_hosts)]),
        arch_names=np.array([f"a{i}" for i in range(n_archs)]),
        dims=("cpu", "mem"),
        demand=np.column_stack([rng.uniform(0.5, 8, n_tasks), rng.uniform(1, 30, n_tasks)]),
        capacity=arch_cap[host_arch],
        frag_dims=(0, 1),
        sens_dims=("cpu", "membw")[:k],
        sens_demand=rng.uniform(0, 0.6, (n_tasks, k)),
        sens_capacity=np.array([[1.0, 1.0], [1.5, 2.0], [1.2, np.inf]])[:n_archs, :k][host_arch],
        host_arch=host_arch,
        cost=np.array([1.0, 2.0, 1.5])[:n_archs][host_arch],
        eligible=rng.random((n_tasks, n_archs)) < 0.8,
        current=rng.integers(0, n_hosts, n_tasks),
        movable=rng.random(n_tasks) >= 0.1,
        job=rng.integers(0, max(1, n_tasks // 3), n_tasks),
        domain=np.where(rng.random(n_hosts) < 0.2, -1, np.arange(n_hosts) // 2),
        rules=make_rules(RuleOptions(max_moves=max_moves, spread_host=int(rng.integers(1, 3)) if spread else None,
                                     spread_domain=int(rng.integers(2, 4)) if spread else None, min_rp=min_rp,
                                     max_new_at_risk=max_new_at_risk)),
        goals=make_goals(goal, weights),
        fair=goal == "fair",
    )


def small_problem(demand, capacity, cost, current, *, movable=None, job=None, sens=None, sens_capacity=None, max_moves=None, spread_host=None,
                  weights=GoalWeights(fragmentation=0.0), goal: str = "tco") -> PlacementProblem:
    """A one-dimensional (cpu) instance on one architecture, for golden cases."""
    demand = np.asarray(demand, dtype=float)[:, None]
    t, h = len(demand), len(capacity)
    k = 0 if sens is None else 1
    return PlacementProblem(
        task_ids=np.array([f"t{i}" for i in range(t)]),
        host_ids=np.array([f"h{i}" for i in range(h)]),
        arch_names=np.array(["a"]),
        dims=("cpu",),
        demand=demand,
        capacity=np.asarray(capacity, dtype=float)[:, None],
        frag_dims=(0,),
        sens_dims=("cpu",)[:k],
        sens_demand=np.asarray(sens if k else np.zeros((t, 0)), dtype=float).reshape(t, k),
        sens_capacity=np.asarray(sens_capacity if k else np.zeros((h, 0)), dtype=float).reshape(h, k),
        host_arch=np.zeros(h, dtype=np.int64),
        cost=np.asarray(cost, dtype=float),
        eligible=np.ones((t, 1), dtype=bool),
        current=np.asarray(current, dtype=np.int64),
        movable=np.ones(t, dtype=bool) if movable is None else np.asarray(movable),
        job=np.arange(t) if job is None else np.asarray(job),
        domain=np.full(h, -1),
        rules=make_rules(RuleOptions(max_moves=max_moves, spread_host=spread_host)),
        goals=make_goals(goal, weights),
        fair=goal == "fair",
    )
