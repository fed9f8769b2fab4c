"""A fleet of pools solved as independent problems, side by side, under one move budget.

On a trace whose hosts have a ``pool`` column, a task never leaves its current host's
pool (:mod:`packer.rules.pools`), so each pool — its hosts and the tasks on them — is a
problem of its own. :func:`solve_pools` solves them on an executor
(:mod:`packer.parallel`: one after the other here, or on worker processes) and merges
the results into one placement of the whole fleet, which every rule of the whole
problem then checks.

**The move budget** is split before the pools are solved (:func:`split_budget`), by
the pools' savings curves: the LP bound on what a budget can free
(:func:`packer.solvers.bounds.freeable_cost_bound`) solved over the whole fleet with
capacity rows per pool and one budget row is exactly "share B moves between the pools
so that their summed LP savings are largest" (each pool's LP saving is concave in its
budget, and the LP's solution gives every pool the same marginal value of a move). Each
pool gets the moves the LP spends there, rounded down; the moves left over go first
to the pools whose LP share was rounded down most (so a host the LP empties is not
left one move short), then to the pools in proportion to their movable tasks (beyond
what frees cost, moves still lower fragmentation and interference). The shares never
sum to more than the budget. Without a budget every pool is unbounded.

**Time.** Each pool's solve gets the time limit times its share of the tasks (at
least :data:`MIN_POOL_TIME_S`): one after the other the pools take about the time
limit, on N workers about 1/N of it; the split does not depend on the workers, so
with ``deterministic`` the plan is the same for any number of them.

**Status and bound.** The merged plan's bound is the whole problem's own
(:func:`packer.solvers.run.engine_bound`: with pools, the LP above with the whole
budget, which bounds every split), so ``packer verify`` recomputes it; the plan is
``optimal`` only when every pool's solve was and its objective meets that bound. The
summary lists each pool (``solver.stats.pools``): its budget, moves, freed cost, the
LP's share, status and time.

Not split (the whole problem is solved at once, the pool rule still holding): the
``fair`` goal (leximin ranks all tasks together), the tasks-at-risk guard (one count
over the fleet), and spread per failure domain when a domain spans pools. A
pool's fragmentation is scaled by the pool's mean host capacity (Eq. 2's scale)
while it is solved; the merged plan is measured on the fleet's.
"""
from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
import logging
import math
import time
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Callable

import numpy as np

from packer import interrupt
from packer.model.metrics import evaluate
from packer.model.problem import PlacementProblem
from packer.parallel import InlineExecutor, capacity, stop_work, wait_some
from packer.rules.anti_affinity import AntiAffinity
from packer.rules.at_risk import MaxNewAtRisk
from packer.rules.budget import MoveBudget
from packer.rules.pools import Pools
from packer.rules.spread import Spread
from packer.solvers.bounds import freeable_cost_bound
from packer.solvers.engine import Progress
from packer.solvers.result import SolveResult

log = logging.getLogger(__name__)

#: Seconds a pool's solve gets at least, however few of the tasks it holds.
MIN_POOL_TIME_S = 1.0


def why_not_split(problem: PlacementProblem) -> str | None:
    """Why ``problem``'s pools cannot be solved apart (module doc), or None when they can (or there is one pool or none)."""
    pools = problem.rule(Pools)
    if pools is None or len(pools.names) < 2:
        return "one pool or none"
    if problem.fair:
        return "the fair goal ranks every task of the fleet together"
    if problem.rule(MaxNewAtRisk) is not None:
        return "the tasks-at-risk guard counts the whole fleet"
    if any(isinstance(rule, Spread) and rule.scope == "domain" for rule in problem.rules):
        known = problem.domain >= 0
        pairs = np.unique(np.stack([problem.domain[known], pools.host_pool[known]]), axis=1)
        if len(np.unique(pairs[0])) < pairs.shape[1]:
            return "a failure domain spans pools (spread per domain)"
    return None


def split_budget(problem: PlacementProblem, by_pool: list[dict] | None = None) -> tuple[list[int | None], list[dict]]:
    """Each pool's share of the problem's move budget, and the LP's moves and freed cost per pool (module doc).

    ``by_pool``: the LP's solution per pool if already solved (``detail["by_group"]`` of
    :func:`packer.solvers.bounds.freeable_cost_bound` with the pools as groups).
    """
    pools = problem.rule(Pools)
    n_pools = len(pools.names)
    budget = problem.max_moves
    lp = by_pool
    if lp is None and budget is not None:
        lp = freeable_cost_bound(problem, budget, groups=pools.host_pool).detail.get("by_group")
    lp = lp or [{"moves": math.nan, "freed": math.nan}] * n_pools
    if budget is None:
        return [None] * n_pools, lp
    wanted = np.array([share["moves"] for share in lp])
    shares = np.floor(wanted + 1e-9).astype(np.int64)
    left = budget - int(shares.sum())
    # First the pools whose LP share lost most to rounding: the LP may empty a host there that needs that one move.
    for p in np.argsort(-(wanted - shares), kind="stable"):
        if left > 0 and wanted[p] - shares[p] > 1e-6:
            shares[p] += 1
            left -= 1
    movable = np.bincount(pools.host_pool[problem.current[problem.movable]], minlength=n_pools).astype(float)
    if left > 0 and movable.sum() > 0:
        extra = left * movable / movable.sum()
        shares += np.floor(extra).astype(np.int64)
        left = budget - int(shares.sum())
        for p in np.argsort(-(extra - np.floor(extra)), kind="stable")[:left]:
            shares[p] += 1
    return [int(s) for s in shares], lp


def restrict(problem: PlacementProblem, tasks: np.ndarray, hosts: np.ndarray, budget: int | None) -> PlacementProblem:
    """The problem of ``tasks`` on ``hosts`` alone (indices into ``problem``; every task's current host among them), with ``budget``."""
    local = np.full(problem.n_hosts, -1, dtype=np.int64)
    local[hosts] = np.arange(len(hosts))
    rules = []
    for rule in problem.rules:
        if isinstance(rule, Pools):
            continue
        if isinstance(rule, MoveBudget):
            rule = MoveBudget(budget)
        elif isinstance(rule, AntiAffinity):
            rule = copy.copy(rule)
            rule.sides = rule.sides[:, :, tasks]
        rules.append(rule)
    goals = problem.rp_goals
    return problem.with_(
        task_ids=problem.task_ids[tasks], host_ids=problem.host_ids[hosts], demand=problem.demand[tasks], capacity=problem.capacity[hosts],
        sens_demand=problem.sens_demand[tasks], sens_capacity=problem.sens_capacity[hosts], host_arch=problem.host_arch[hosts],
        cost=problem.cost[hosts], eligible=problem.eligible[tasks], current=local[problem.current[tasks]], movable=problem.movable[tasks],
        job=problem.job[tasks], domain=problem.domain[hosts], rules=tuple(rules),
        rp_goals=None if goals is None else type(goals)(*(getattr(goals, f.name)[tasks] for f in dataclasses.fields(goals))),
        task_class=None if problem.task_class is None else problem.task_class[tasks],
        job_ids=None if problem.job_ids is None else problem.job_ids[tasks])


@dataclass
class PoolsOutcome:
    """What :func:`solve_pools` found: the merged placement ``assign`` (T,), each pool's result (None: not run) and summary line."""

    assign: np.ndarray
    results: list[SolveResult | None]
    lines: list[dict]

    @property
    def infeasible_tasks(self) -> list[str]:
        return [name for r in self.results if r is not None and r.status == "infeasible" for name in r.infeasible_tasks]

    @property
    def interrupted(self) -> bool:
        return any(r is not None and r.stats.get("interrupted") for r in self.results)

    @property
    def search_ended(self) -> str | None:
        """Why some pools' searches ended before their share of the time limit (``stats["search_ended"]``), or None."""
        ended = [r.stats["search_ended"] for r in self.results if r is not None and r.stats.get("search_ended")]
        ran = sum(r is not None for r in self.results)
        return f"{ended[0]} (in {len(ended)} of {ran} pools)" if ended else None

    @property
    def all_optimal(self) -> bool:
        """Every pool with tasks was solved to optimality."""
        return all(r is not None and r.status == "optimal" for r, line in zip(self.results, self.lines) if line["tasks"])


def solve_pools(problem: PlacementProblem, solve: Callable[..., SolveResult], solver: str, time_limit: float, seed: int = 0,
                deterministic: bool = False, executor: Executor | None = None, progress: Callable[[Progress], None] | None = None,
                by_pool: list[dict] | None = None) -> PoolsOutcome:
    """Solve each pool of ``problem`` by ``solve(pool_problem, solver, seconds, seed, deterministic=...)`` on ``executor``; merge.

    ``solve`` must be picklable for a process pool (:func:`packer.solvers.run.run_solver`);
    ``time_limit`` in seconds is shared as the module doc says; ``by_pool`` as in
    :func:`split_budget`. A stop request
    (:mod:`packer.interrupt`) stops the pools under way (each keeps its best plan); the
    pools not started keep their current placement (result None).
    """
    t0 = time.perf_counter()
    pools = problem.rule(Pools)
    executor = executor or InlineExecutor()
    budgets, lp = split_budget(problem, by_pool)
    members = [(np.flatnonzero(pools.host_pool[problem.current] == p), np.flatnonzero(pools.host_pool == p)) for p in range(len(pools.names))]
    queue = [p for p, (tasks, _) in enumerate(members) if len(tasks)]
    log.info("%d pools with tasks; move budget split %s", len(queue), budgets)
    assign = problem.current.copy()
    results: list[SolveResult | None] = [None] * len(members)
    running: dict[Future, int] = {}
    while True:
        if interrupt.stop_requested():
            stop_work(executor, running)
        while queue and len(running) < capacity(executor) and not interrupt.stop_requested():
            p = queue.pop(0)
            tasks, hosts = members[p]
            seconds = min(time_limit, max(MIN_POOL_TIME_S, time_limit * len(tasks) / problem.n_tasks))
            running[executor.submit(solve, restrict(problem, tasks, hosts, budgets[p]), solver, seconds, seed, deterministic=deterministic)] = p
        if not running:
            break
        for future in wait_some(running):
            p = running.pop(future)
            try:
                results[p] = result = future.result()
            except concurrent.futures.CancelledError:  # cancelled, or its worker's call would have started after the stop request
                continue
            tasks, hosts = members[p]
            if result.status in ("optimal", "feasible"):
                assign[tasks] = hosts[result.assign]
            if progress is not None:
                after = evaluate(problem, assign)
                done = sum(r is not None for r in results)
                progress(Progress(f"pool {pools.names[p]} ({done}/{len(members)})", after.objective, None, after.moves, after.hosts,
                                  time.perf_counter() - t0))
    lines = [_pool_line(problem, pools.names[p], members[p], budgets[p], lp[p], results[p]) for p in range(len(members))]
    return PoolsOutcome(assign, results, lines)


def _pool_line(problem: PlacementProblem, name: str, members: tuple[np.ndarray, np.ndarray], budget: int | None, lp: dict,
               result: SolveResult | None) -> dict:
    """What the summary says about one pool: size, budget, the LP's share, what its solve did (primary-cost units, seconds)."""
    tasks, hosts = members
    line = {"pool": name, "tasks": int(len(tasks)), "hosts": int(len(hosts)), "budget": budget,
            "lp_moves": lp["moves"], "lp_freed": lp["freed"]}
    if result is None:
        return {**line, "status": "not run" if len(tasks) else "empty", "moves": 0, "freed": 0.0}
    local = np.full(problem.n_hosts, -1, dtype=np.int64)
    local[hosts] = np.arange(len(hosts))
    cost = problem.primary_cost[hosts]
    placed = result.assign if result.status in ("optimal", "feasible") else local[problem.current[tasks]]
    freed = float(cost[np.unique(local[problem.current[tasks]])].sum() - cost[np.unique(placed)].sum())
    return {**line, "solver": result.solver, "status": result.status, "moves": int((placed != local[problem.current[tasks]]).sum()),
            "freed": freed, "wall_s": result.wall_s, "interrupted": bool(result.stats.get("interrupted"))}
