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


#: The known-optimum family's fleet: (cpu cores, memory GiB, cost). Per core the 64-core
#: architecture is cheapest (1.8/64 < 1.0/32 < 2.9/96 < 1.9/48), so its hosts, split exactly
#: into tasks, are the optimum.
KNOWN_OPTIMUM_ARCHS = np.array([[32.0, 128.0, 1.0], [64.0, 192.0, 1.8], [48.0, 384.0, 1.9], [96.0, 256.0, 2.9]])


def known_optimum_problem(seed: int, n_tasks: int, spare: float = 1.2) -> tuple[PlacementProblem, float]:
    """A full repack whose optimum is known, and that optimum (cost units).

    K hosts of the architecture cheapest per core have their capacity vectors split
    exactly into 2-6 tasks each (on a 1/1024 grid, so the sums are exact in floating
    point), and the tasks are scattered at random over a fleet of K·(1 + ``spare``)
    hosts of every architecture. Any valid placement needs K hosts' worth of cores, and
    no host buys a core more cheaply, so it costs at least K × that host's cost, which
    the K original hosts reach.
    """
    rng = np.random.default_rng(seed)
    best = int(np.argmin(KNOWN_OPTIMUM_ARCHS[:, 2] / KNOWN_OPTIMUM_ARCHS[:, 0]))
    k = max(1, round(n_tasks / 4))
    parts = rng.integers(2, 7, k)
    demand = []
    for part in parts:
        units = (KNOWN_OPTIMUM_ARCHS[best, :2] * 1024).astype(np.int64)
        split = [np.diff(np.concatenate([[0], np.sort(rng.choice(np.arange(1, u), part - 1, replace=False)), [u]])) for u in units]
        demand.append(np.column_stack(split) / 1024.0)
    demand = np.vstack(demand)
    n = len(demand)
    n_hosts = int(np.ceil(k * (1 + spare)))
    host_arch = np.concatenate([np.full(k, best), rng.integers(0, len(KNOWN_OPTIMUM_ARCHS), n_hosts - k)])
    capacity = KNOWN_OPTIMUM_ARCHS[host_arch, :2]
    current = np.empty(n, dtype=np.int64)
    free = capacity.copy()
    for t in rng.permutation(n):  # scatter: each task on a random host it fits
        fits = np.flatnonzero((free >= demand[t] - 1e-12).all(axis=1))
        current[t] = rng.choice(fits)
        free[current[t]] -= demand[t]
    problem = PlacementProblem(
        task_ids=np.array([f"t{i}" for i in range(n)]), host_ids=np.array([f"h{i}" for i in range(n_hosts)]),
        arch_names=np.array(["small", "cpu", "mem", "big"]), dims=("cpu", "mem"), demand=demand, capacity=capacity, frag_dims=(0, 1),
        sens_dims=(), sens_demand=np.zeros((n, 0)), sens_capacity=np.zeros((n_hosts, 0)), host_arch=host_arch,
        cost=KNOWN_OPTIMUM_ARCHS[host_arch, 2], eligible=np.ones((n, len(KNOWN_OPTIMUM_ARCHS)), dtype=bool), current=current,
        movable=np.ones(n, dtype=bool), job=np.arange(n), domain=np.full(n_hosts, -1), rules=make_rules(RuleOptions(max_moves=None)),
        goals=make_goals("tco", GoalWeights(fragmentation=0.0, moves=0.0)))
    return problem, float(k * KNOWN_OPTIMUM_ARCHS[best, 2])
