"""One solve: pick the solver a problem's rules allow, run it, attach a bound.

This is the layer the ``packer solve`` command, the sweep and the verifier share
(:func:`packer.plan.context.problem_from_context` builds the problem), so a plan is
verified against exactly the problem it was solved on, rebuilt from the inputs.

Solvers (``--solver``) and the strategy each belongs to
(:data:`packer.rules.base.STRATEGIES`):

* ``engine`` — the scalable engine (:mod:`packer.solvers.engine`), strategy ``engine``;
* ``cpsat`` — the exact CP-SAT model of the whole instance, strategy ``exact``;
* ``cbc`` / ``highs`` — the exact MILP model with that backend, strategy ``exact``;
* ``auto`` — up to :data:`AUTO_EXACT_MAX_TASKS` tasks, when every rule of the problem is
  honoured by both: the engine for :data:`AUTO_ENGINE_SHARE` of the time, then the exact
  MILP with HiGHS started from the engine's plan, returning the better plan and the
  better bound (an exact solver alone, started from the current placement, can end its
  time with no better plan: CBC returned 0 moves on a 180-task trace where the engine
  saved 70%). The engine above.
* ``baseline-random``, ``baseline-least-loaded``, ``baseline-ffd``, ``baseline-paragon``,
  ``baseline-tarcil`` — the comparison policies of :mod:`packer.solvers.baselines`
  (same inputs and move budget; no bound, and they ignore the time limit), strategy
  ``baselines``.

Goal ``fair`` (leximin relative performance, :mod:`packer.solvers.leximin`, strategy
``fair``): ``auto`` is the exact iterated CP-SAT up to :data:`LEXIMIN_EXACT_MAX_TASKS`
tasks and the scalable greedy above; ``cpsat`` / ``engine`` choose one.

Each rule declares the strategies that honour it; :func:`check_support` refuses a
solver whose strategy some rule of the problem lacks (e.g. the tasks-at-risk guard
is honoured by the engine only, the relative-performance guard not by the baselines).

Every result carries a bound on its objective: for the engine one derived from
:mod:`packer.solvers.bounds`, and for the exact models the better of that and their own
dual bound (:func:`_run_exact`) — for move-bounded
repacking the objective can be no lower than the current primary cost minus the
most cost the move budget could free (the LP's bound, capped by today's cost less a full
repack's lower bound: :func:`cap_freeable`); for a full repack no lower than the better of the
MILP lower bound over architectures and the column-generation bound over host patterns
(:mod:`packer.solvers.patterns`, whose packing is also a start for the engine, except
where the engine re-solves the whole instance with CP-SAT,
:func:`~packer.solvers.engine.covers_whole_instance`). Where a goal prices load beyond a
soft capacity (the interference term), either is raised to the bound on the primary cost
plus those terms where that is higher (:func:`objective_bound`): the MILP's over
architectures (any plan, move-bounded or not, is a full repack) and, with a budget, today's
primary cost less the LP bound on what the budget can free less the terms it leaves. All
plus :func:`objective_floor` (below 0 only where hosts are kept over capacity), and CP-SAT's
bound where it proved the engine's plan optimal. The bound's details go into
``result.stats["bound"]``.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time
from concurrent.futures import Executor
from typing import Callable

import numpy as np

from packer import interrupt
from packer.errors import InputError
from packer.model.build import RuleOptions, make_rules
from packer.model.metrics import evaluate, violations
from packer.model.problem import PlacementProblem
from packer.rules.budget import MoveBudget
from packer.rules.pools import Pools
from packer.solvers.baselines import BASELINES, run_baseline
from packer.solvers.bounds import ArchMix, freeable_cost_bound, repack_cost_bound
from packer.solvers.budget_patterns import BudgetPatterns, applies, budget_column_generation, budget_packing
from packer.solvers.clock import SearchClock
from packer.solvers.cpsat import solve_cpsat
from packer.solvers.engine import BUDGETED_START_MOVES, EngineConfig, Progress, covers_whole_instance, solve_engine, wide_budget
from packer.solvers.exact import unplaceable_tasks
from packer.solvers.leximin import solve_leximin_engine, solve_leximin_exact
from packer.solvers.milp import solve_milp
from packer.solvers.patterns import (PACKING_RULES, PatternResult, column_generation, packing_applies, pattern_packing,
                                     perfect_packing, perfect_packing_classes, supported)
from packer.solvers.pools import solve_pools, why_not_split
from packer.solvers.result import SolveResult

log = logging.getLogger(__name__)

SOLVERS = ("auto", "engine", "cpsat", "cbc", "highs", *BASELINES)
AUTO_EXACT_MAX_TASKS = 200
#: Largest whole-instance exact models (task-host pairs) we let users start: beyond these,
#: building the model alone takes minutes and CBC ignores its time limit in the root LP
#: (measured: CBC solved 22k pairs in 10 s, ran 345 s past a 20 s limit at 53k (the sample trace) and 10+
#: minutes past a 60 s limit at 486k; CP-SAT respected a 60 s limit at 486k pairs with 2.6 GiB).
EXACT_MAX_PAIRS = {"cpsat": 1_000_000, "cbc": 30_000, "highs": 100_000}
#: The solvers of the ``fair`` goal.
FAIR_SOLVERS = ("auto", "engine", "cpsat")
#: Largest instance the ``fair`` goal solves exactly under ``--solver auto``.
LEXIMIN_EXACT_MAX_TASKS = 60
#: Share of the time limit ``auto`` gives the engine before HiGHS starts from its plan on small instances.
AUTO_ENGINE_SHARE = 0.85
#: Share of a full repack's time limit that column generation may spend on its bound (and as much again on its packing).
PATTERN_TIME_SHARE = 0.25
#: The share for the bound alone where the engine re-solves the whole instance with CP-SAT
#: (:func:`~packer.solvers.engine.covers_whole_instance`): there CP-SAT packs, and column generation's shares of a short
#: limit were the search's (of 3 s of work on 40 tasks and 10 hosts it was charged 1.5, for a bound below the MILP's).
WHOLE_INSTANCE_PATTERN_SHARE = 0.05
#: Share of the movable tasks from which a wide move budget (:func:`~packer.solvers.engine.wide_budget`) also starts from
#: column generation's packing, trimmed to it: the packing moves most tasks (slack-scarce 1,000: 735 of 988), so below,
#: trimmed, it lost to the constructions (400 / 500 moves: 36 / 42 cost units freed where they freed 50-52) and its
#: time was the search's (paper-shaped 1,000 tasks s8, 400 moves, 30 s: 2.3 s, 122-123 freed against 124-125).
PACKING_BUDGET_SHARE = 0.5
#: Column generation bounds a full repack for a move budget's bound too where today's primary cost less the MILP bound
#: over architectures is at most this many times what the budget's LP says it can free (measured, 400 moves, 60 s:
#: slack-scarce 1,000 tasks 0.97, column generation 0.2 s, the freeable bound 106.8 → 79; paper-shaped 1,000 s8 1.01,
#: 0.6 s, 197.4 → 185; s7 1.08, 1.6 s, no gain; paper-shaped 3,000 1.42, 2.1 s, and slack-scarce 10,000 3.4, 15 s: no gain).
PATTERN_CAP_RATIO = 1.25
#: Share of a move budget's time limit for column generation within the budget (:mod:`packer.solvers.budget_patterns`:
#: its bound, and the columns of its packing), which stops sooner where it converges (measured, 400 moves: slack-scarce
#: 1,000 tasks 2.5 s, paper-shaped 1,000 tasks 7-12 s, 3,000 8 s, ladder 5,000 12 s, slack-scarce 10,000 20 s, its
#: bound 378.3 against the LP's 403; a 60-s solve with it frees 378 against the engine's 353 alone).
BUDGET_PATTERN_SHARE = 0.4
#: Share of a move budget's time limit for that packing (CP-SAT over the columns; it stops sooner where it proves its
#: optimum over them: measured 0.5-9 s).
BUDGET_PACKING_SHARE = 0.15
#: Shares of a full repack's time limit for the default budget's plan by column generation within it, one of its starts
#: (:func:`_default_budget_start`; slack-scarce 1,000 tasks, 60 s: the full repack ended at 674.1 without it, above the
#: 400-move plan's 671.1; column generation there converges in 2.5 s).
DEFAULT_BUDGET_PATTERN_SHARE = 0.2
DEFAULT_BUDGET_PACKING_SHARE = 0.1
#: How bounds from column generation are named (``kind``; :mod:`packer.plan.claims` looks for them): a full repack's, and
#: one within a move budget.
PATTERN_METHOD = "column generation over host patterns"
BUDGET_PATTERN_METHOD = f"{PATTERN_METHOD} within the move budget"
#: Further share of a full repack's time limit for the packing where reaching column generation's rounded-up bound
#: proves it optimal (:attr:`packer.solvers.patterns.PatternResult.provable`; Falkenauer's u1000: a dive and an integer
#: master take 2-5 s).
PATTERN_PROOF_SHARE = 0.2
#: Column generation stops early while its master LP is above this many times the MILP bound over architectures
#: (measured: Falkenauer's triplets stay ~12% above it, and the time is the neighbourhood search's).
PATTERN_GIVE_UP = 1.1
#: Share of a full repack's time limit for a packing of every task into full hosts before column generation
#: (:func:`packer.solvers.patterns.perfect_packing`; only where one could exist).
PERFECT_FIRST_SHARE = 0.2
#: The solvers of each strategy, as messages name them.
STRATEGY_SOLVERS = {"engine": "the engine solver", "exact": "the exact solvers (cpsat, cbc, highs)",
                    "fair": "the fair goal's solvers", "baselines": "the baseline policies"}


def strategy_of(solver: str, fair: bool) -> str:
    """The strategy (:data:`packer.rules.base.STRATEGIES`) that ``solver`` (a name of :data:`SOLVERS` but ``auto``) runs,
    for the ``fair`` goal or another."""
    if fair:
        return "fair"
    if solver in BASELINES:
        return "baselines"
    return "engine" if solver == "engine" else "exact"


def check_support(problem: PlacementProblem, strategy: str, solver: str | None = None) -> None:
    """Raise :class:`InputError` naming every rule of ``problem`` that ``strategy`` does not honour, and the solvers that do.

    ``solver``: the name the user chose, for the message (default: the strategy).
    """
    _refuse_rules(problem.rules, strategy, solver)


def _refuse_rules(rules, strategy: str, solver: str | None) -> None:
    reasons = [f"the rule '{rule.name}' is honoured by {_joined([STRATEGY_SOLVERS[s] for s in rule.strategies])}, "
               f"not by '{solver or strategy}'" for rule in rules if strategy not in rule.strategies]
    if reasons:
        raise InputError("; ".join(reasons))


def check_solver(solver: str, goal: str, options: RuleOptions) -> None:
    """Raise :class:`InputError` before any work when ``solver`` will refuse ``goal`` or a rule ``options`` asks for.

    What :func:`run_solver` refuses once the problem is built, decided from the options
    alone, so that ``packer solve`` fails before profiling rather than after it.
    """
    if goal == "fair" and solver not in FAIR_SOLVERS:
        raise InputError(f"--goal fair is solved by the engine and cpsat solvers, not by '{solver}'")
    if solver == "auto" and goal != "fair":
        return
    # Every strategy honours anti-affinity, the one rule that needs the tasks' services to be built.
    _refuse_rules(make_rules(dataclasses.replace(options, anti_affinity=())), strategy_of(solver, goal == "fair"), solver)


def _joined(names: list[str]) -> str:
    """Names joined as in a sentence: a; a and b; a, b and c."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def candidate_pairs(problem: PlacementProblem) -> int:
    """Task-host pairs an exact whole-instance model has: eligible hosts per task, plus its current host."""
    hosts_per_arch = np.bincount(problem.host_arch, minlength=len(problem.arch_names))
    return int((problem.eligible.astype(np.int64) @ hosts_per_arch).sum()) + problem.n_tasks


def tasks_that_fit_nowhere(problem: PlacementProblem) -> np.ndarray:
    """Indices of tasks whose demand exceeds, in some dimension, every host they may use, even empty.

    A task may use its current host and the hosts of its eligible architectures. Such
    a task makes the configuration infeasible: its own host is overloaded by it alone.
    """
    arch_cap = np.zeros((len(problem.arch_names), len(problem.dims)))
    np.maximum.at(arch_cap, problem.host_arch, problem.capacity)
    fits_arch = (problem.demand[:, None, :] <= arch_cap[None, :, :] + 1e-9).all(axis=2) & problem.eligible
    fits_own = (problem.demand <= problem.capacity[problem.current] + 1e-9).all(axis=1)
    return np.flatnonzero(~fits_arch.any(axis=1) & ~fits_own)


def engine_bound(problem: PlacementProblem) -> tuple[float, dict, list[ArchMix]]:
    """A lower bound on the objective for the engine's result (:func:`objective_bound`), what it rests on (see module doc)
    and, for a full repack, the solutions of the bound's MILPs for the engine's constructions: the primary cost's, then,
    where a goal has a soft capacity, the one that counts it."""
    floor = objective_floor(problem)
    below = {"objective_floor": floor} if floor < 0 else {}
    has_soft = any(goal.soft_capacity(problem) is not None for goal in problem.goals)
    softs: list[tuple[float, bool]] = []  # (value, solved to optimality) of bounds on the primary cost plus the soft terms
    soft_mix = None
    if has_soft:
        with_soft = repack_cost_bound(problem, soft=True)
        softs.append((with_soft.value, with_soft.exact))
        soft_mix = with_soft.mix
    if problem.max_moves is None or problem.max_moves >= int(problem.movable.sum()):
        # A budget that covers every movable task cannot bind: bound it as a full repack.
        lower = repack_cost_bound(problem)
        value = _integral_lower_bound(problem, lower.value)
        method = "MILP over architectures" + (", demands rounded down, and Lagrange's bound" if "demand_grid" in lower.detail else "")
        detail = {"kind": f"lower bound on primary cost (full repack, {method})", "primary_lower_bound": value,
                  **_soft_detail(lower.exact, softs), **below, **lower.detail}
        return objective_bound(detail), detail, [mix for mix in (lower.mix, soft_mix) if mix is not None]
    pools = problem.rule(Pools)
    groups = None if pools is None else pools.host_pool
    freeable = freeable_cost_bound(problem, groups=groups)
    before = float(problem.primary_cost[np.unique(problem.current)].sum())
    if has_soft:
        # What the budget can free less the soft terms it leaves: bounds the objective where packing tighter costs interference.
        budgeted = freeable_cost_bound(problem, groups=groups, soft=True)
        softs.append((before - budgeted.value, budgeted.exact))
    detail = {"kind": "upper bound on primary cost the move budget can free (LP)", "freeable_bound": freeable.value,
              "primary_before": before, **_soft_detail(freeable.exact, softs), **below, **freeable.detail}
    if not has_soft:
        repack = repack_cost_bound(problem)  # the MILP ignores the budget: a bound on every plan, budgeted or not
        if repack.exact:  # solved to optimality, so verify recomputes it
            detail["freeable_lp"] = freeable.value
            cap_freeable(problem, detail, repack.value, "the MILP over architectures")
    return objective_bound(detail), detail, []


def cap_freeable(problem: PlacementProblem, detail: dict, repack_lower: float, method: str, within_budget: bool = False) -> None:
    """Cap a move budget's ``freeable_bound`` in ``detail`` (:func:`engine_bound`'s) by today's primary cost less
    ``repack_lower`` (primary-cost units), a full repack's lower bound by ``method``: a plan within the budget is a full
    repack too, so it frees no more. Records the first bound given, and a later one where it is tighter, as
    ``repack_lower_bound``; ``kind`` names the method where the cap binds. ``within_budget``: ``repack_lower`` bounds
    only the plans within the budget (:func:`budget_pattern_bound`), recorded as ``budget_lower_bound``.

    Where a budget covers a large share of the tasks and slack is scarce, the LP that splits tasks over pooled room claims
    more than any placement at all frees (`scarce-1k`, 400 of 988 tasks: the LP 106.8, today's less column generation's
    bound 79; the full repack frees 75)."""
    repack_lower = _integral_lower_bound(problem, repack_lower)
    capped = detail["primary_before"] - repack_lower
    key, whose = (("budget_lower_bound", "a bound on every plan within it") if within_budget
                  else ("repack_lower_bound", "a full repack's bound"))
    if key in detail and capped >= detail["freeable_bound"]:
        return
    detail[key] = repack_lower
    if capped < detail["freeable_bound"]:
        detail.update(freeable_bound=capped,
                      kind=f"upper bound on primary cost the move budget can free (today's less {whose}: {method})")


def _soft_detail(exact: bool, softs: list[tuple[float, bool]]) -> dict:
    """``exact`` (every bound used solved to optimality) and ``primary_and_soft_lower_bound``, the best of ``softs`` (value,
    exact) that found one."""
    found = [(value, solved) for value, solved in softs if math.isfinite(value)]  # inf: a MILP that found nothing bounds nothing
    soft = {"primary_and_soft_lower_bound": max(value for value, _ in found)} if found else {}
    return {"exact": exact and all(solved for _, solved in found), **soft}


def _primary_bound(detail: dict) -> float:
    """The bound on the primary cost in :func:`engine_bound`'s ``detail``: ``primary_lower_bound`` (full repack), else
    ``primary_before − freeable_bound`` (move budget)."""
    return detail["primary_lower_bound"] if "primary_lower_bound" in detail else detail["primary_before"] - detail["freeable_bound"]


def objective_bound(detail: dict) -> float:
    """The engine's lower bound on the objective from :func:`engine_bound`'s ``detail`` (objective units): the bound on the
    primary cost (:func:`_primary_bound`) or, where higher, ``primary_and_soft_lower_bound`` (the primary cost plus the goals'
    soft-capacity terms, which are otherwise bounded by 0), plus ``objective_floor``."""
    return max(_primary_bound(detail), detail.get("primary_and_soft_lower_bound", -math.inf)) + detail.get("objective_floor", 0.0)


def objective_floor(problem: PlacementProblem) -> float:
    """The least the objective's terms besides the primary cost sum to over valid placements (objective units, ≤ 0).

    A bound on the primary cost plus this bounds the objective. It is below 0 only where a
    term can be: fragmentation on a host kept over capacity (:meth:`packer.rules.base.Goal.least`).
    """
    return float(sum(goal.least(problem) for goal in problem.goals if not goal.primary))


def _pattern_bound_and_start(problem: PlacementProblem, time_limit: float, detail: dict, progress: Callable[[Progress], None] | None,
                             clock: SearchClock) -> np.ndarray | None:
    """Column generation on a full repack (:mod:`packer.solvers.patterns`): the better lower bound, recorded in ``detail``; returns a valid start or None.

    First, where one could exist, a packing of every task into full hosts
    (:func:`~packer.solvers.patterns.perfect_packing`, :data:`PERFECT_FIRST_SHARE` of
    ``time_limit``): if it meets the lower bound it is optimal, and column generation is
    not run. Column generation gets :data:`PATTERN_TIME_SHARE` of ``time_limit`` for the bound
    and as much again, plus what the bound left unused, for the integer packing (and
    :data:`PATTERN_PROOF_SHARE` more where it may prove the optimum), but none where no
    packing would be built from its columns (:func:`~packer.solvers.patterns.packing_applies`,
    e.g. it stopped as useless); the engine gets the rest. Where the engine re-solves the
    whole instance, only the bound, on :data:`WHOLE_INSTANCE_PATTERN_SHARE`. ``clock``: the
    solve's; a deterministic one is charged the bound's work
    (:attr:`~packer.solvers.patterns.PatternResult.work`, at most its share) and each further share that was used, whole.
    """
    deterministic = clock.deterministic
    lower = detail["primary_lower_bound"]
    whole = covers_whole_instance(problem)

    def report(phase: str) -> None:
        _phase(problem, phase, detail, progress, clock)()

    perfect = None
    instance = None if whole else perfect_packing_classes(problem)
    if instance is not None:
        report("packing every task into full hosts")
        perfect = perfect_packing(problem, *instance, PERFECT_FIRST_SHARE * time_limit, deterministic)
        clock.spend(PERFECT_FIRST_SHARE * time_limit)
    if perfect is not None and violations(problem, perfect):
        perfect = None
    if perfect is not None:
        detail["perfect_packing"] = float(problem.primary_cost[np.unique(perfect)].sum())
        if detail["perfect_packing"] <= lower + 1e-6:
            return perfect
    report("column generation")
    share = pattern_share(problem) * time_limit
    lower, found = pattern_lower_bound(problem, time_limit, detail["primary_lower_bound"], deterministic)
    # Where it converged or stopped early, the engine gets the rest (600 tasks, 10 s of work: 0.4 s of its 2.5 used).
    clock.spend(min(share, found.work))
    detail.update(found.detail)
    if lower > detail["primary_lower_bound"]:
        detail.update(primary_lower_bound=lower, kind="lower bound on primary cost (full repack, column generation over host patterns)")
    if interrupt.stop_requested() or whole or not packing_applies(problem, found):
        return perfect
    clock.spend(share)
    # What column generation left of its share goes to the packing too (not when deterministic: a wall time is not reproducible).
    packing_time = share if deterministic else max(share, 2.0 * share - found.wall_s)
    if found.provable:  # its packing can prove the optimum (a dive, then an integer master)
        packing_time += PATTERN_PROOF_SHARE * time_limit
        clock.spend(PATTERN_PROOF_SHARE * time_limit)
    packed = pattern_packing(problem, found, time_limit=packing_time, deterministic=deterministic)
    broken = [] if packed is None else violations(problem, packed)
    if broken:
        log.warning("pattern packing broke a rule (%s); not used", "; ".join(broken))
        packed = None
    if packed is not None:
        detail["pattern_packing"] = float(problem.primary_cost[np.unique(packed)].sum())
    if perfect is not None and (packed is None or detail["perfect_packing"] < detail["pattern_packing"]):
        packed = perfect
    return packed


def pattern_lower_bound(problem: PlacementProblem, time_limit: float, milp_bound: float,
                        deterministic: bool = False) -> tuple[float, PatternResult]:
    """A full repack's column-generation lower bound on the primary cost, as a solve of ``time_limit`` seconds computes it.

    Column generation gets :func:`pattern_share` of ``time_limit``, gives up above
    :data:`PATTERN_GIVE_UP` × ``milp_bound`` (the MILP bound over architectures) and stops as
    useless once, on rounded classes, its LP is at or below ``milp_bound``; its bound is
    rounded up where costs are integral. Returns the bound (primary-cost units) and the run.
    ``deterministic``: time counted as work (:mod:`packer.solvers.clock`), so every run gives the same bound.
    """
    found = column_generation(problem, time_limit=pattern_share(problem) * time_limit, give_up_above=PATTERN_GIVE_UP * milp_bound,
                              useless_below=milp_bound, deterministic=deterministic)
    return _integral_lower_bound(problem, found.bound), found


def pattern_share(problem: PlacementProblem) -> float:
    """Share of a full repack's time limit for column generation's bound: :data:`PATTERN_TIME_SHARE`, or
    :data:`WHOLE_INSTANCE_PATTERN_SHARE` where the engine re-solves the whole instance."""
    return WHOLE_INSTANCE_PATTERN_SHARE if covers_whole_instance(problem) else PATTERN_TIME_SHARE


def _integral_lower_bound(problem: PlacementProblem, value: float) -> float:
    """``value`` rounded up when every host's primary cost is an integer (a placement's cost is then one too)."""
    cost = problem.primary_cost
    if np.isfinite(value) and np.array_equal(cost, np.round(cost)):
        return float(math.ceil(value - 1e-6))
    return value


def run_solver(
    problem: PlacementProblem,
    solver: str = "auto",
    time_limit: float = 60.0,
    seed: int = 0,
    progress: Callable[[Progress], None] | None = None,
    deterministic: bool = False,
    start: np.ndarray | None = None,
    executor: Executor | None = None,
) -> SolveResult:
    """Solve ``problem`` with ``solver`` within ``time_limit`` seconds and attach a bound (see module doc).

    ``deterministic``: count ``time_limit`` as work rather than wall clock wherever a
    solver can (:mod:`packer.solvers.clock`: the engine, column generation, CP-SAT;
    HiGHS by nodes), so that ``seed`` gives the same plan under any machine load. CBC is
    deterministic unless its time limit cuts it short; the baselines always are.

    ``start``: a valid placement (T,) to start from instead of the current one: the
    engine (and ``auto``) never returns a worse plan, the exact solvers take it as a
    hint; the baselines and the ``fair`` goal refuse it (:class:`InputError`).

    A problem whose hosts are in pools (:mod:`packer.rules.pools`) is solved pool by pool,
    on ``executor`` (:mod:`packer.parallel`; default: here, one after the other), and the
    plans merged (:mod:`packer.solvers.pools`), unless :func:`packer.solvers.pools.why_not_split`
    says it cannot be or ``start`` is given: then as one problem, the pool rule holding.

    Raises :class:`InputError` when the solver does not honour a rule of the problem (:func:`check_support`).
    A stop request (:mod:`packer.interrupt`) that comes before the solver has a placement of
    its own (while a model or bound is built) returns the starting placement (``start``, else
    the current one), marked interrupted.
    """
    t0 = time.perf_counter()
    try:
        if start is None and why_not_split(problem) is None and not len(tasks_that_fit_nowhere(problem)):
            return _run_pools(problem, solver, time_limit, seed, progress, deterministic, executor)
        return _run_solver(problem, solver, time_limit, seed, progress, deterministic, start)
    except KeyboardInterrupt:
        fallback = problem.current if start is None else start
        if not interrupt.stop_requested() or violations(problem, fallback):
            raise
        log.warning("interrupted before %s had a placement; returning the starting placement", solver)
        ev = evaluate(problem, fallback)
        return SolveResult(assign=np.array(fallback, dtype=np.int64), status="feasible", objective=ev.objective, bound=-math.inf, solver=solver,
                           wall_s=time.perf_counter() - t0, stats={"interrupted": True, "interrupted_before_a_solution": True})


def _run_solver(problem: PlacementProblem, solver: str, time_limit: float, seed: int,
                progress: Callable[[Progress], None] | None, deterministic: bool, start: np.ndarray | None) -> SolveResult:
    """:func:`run_solver` but for a stop request before a placement."""
    oversized = tasks_that_fit_nowhere(problem)
    if len(oversized):
        return SolveResult.infeasible(problem.current, problem.task_ids[oversized].tolist(), solver, 0.0)
    if start is not None and (problem.fair or solver in BASELINES):
        raise InputError("a start plan (--start) is used by the engine, auto and the exact solvers under the tco and hosts goals; "
                         f"{'--goal fair' if problem.fair else solver} starts from the current placement")
    if problem.fair:
        return _run_fair(problem, solver, time_limit, seed)
    if solver == "auto":
        exact = problem.n_tasks <= AUTO_EXACT_MAX_TASKS and all("exact" in rule.strategies for rule in problem.rules)
        if exact and all("engine" in rule.strategies for rule in problem.rules):
            return _run_auto_exact(problem, time_limit, seed, progress, deterministic, start)
        solver = "highs" if exact else "engine"
    check_support(problem, strategy_of(solver, problem.fair), solver)
    if solver in EXACT_MAX_PAIRS and candidate_pairs(problem) > EXACT_MAX_PAIRS[solver]:
        raise InputError(f"the exact {solver} model of this instance would have {candidate_pairs(problem):,} task-host pairs "
                         f"(more than {EXACT_MAX_PAIRS[solver]:,}: it would not stop within the time limit); use --solver engine or auto")
    if solver in BASELINES:
        return run_baseline(problem, solver, seed)
    if solver in EXACT_MAX_PAIRS:
        return _run_exact(problem, solver, time_limit, seed, deterministic, start)
    return _run_engine(problem, time_limit, seed, progress, deterministic, start)


def _run_exact(problem: PlacementProblem, solver: str, time_limit: float, seed: int, deterministic: bool = False,
               start: np.ndarray | None = None) -> SolveResult:
    """The exact model of the whole instance with ``solver`` (cpsat, cbc or highs), bounded by the better of its own dual
    bound and :func:`engine_bound`'s, which holds for every plan (on the 400-task sample, CP-SAT's own after 120 s was
    6.12 where the MILP over architectures proves 86). ``stats["solver_bound"]`` keeps the solver's own where it was
    lower; ``stats["bound"]`` says what the engine's rests on. Its time counts against ``time_limit`` on a wall clock."""
    t0 = time.perf_counter()
    bound, detail = -math.inf, {}
    if len(unplaceable_tasks(problem)) == 0:  # else the solver names the tasks no host can take
        with interrupt.stoppable():
            bound, detail, _ = engine_bound(problem)
    remaining = time_limit if deterministic else max(1.0, time_limit - (time.perf_counter() - t0))
    if solver == "cpsat":
        result = solve_cpsat(problem, time_limit=remaining, seed=seed, deterministic=deterministic, start=start)
    else:
        result = solve_milp(problem, solver=solver, time_limit=remaining, seed=seed, deterministic=deterministic, start=start)
    if result.status in ("optimal", "feasible") and math.isfinite(bound) and bound > result.bound:
        result.stats["solver_bound"] = result.bound if math.isfinite(result.bound) else None
        result.stats["bound"] = bound_detail(problem, result.assign, detail)
        result.bound = bound
    result.wall_s = time.perf_counter() - t0
    return result


def _run_pools(problem: PlacementProblem, solver: str, time_limit: float, seed: int, progress: Callable[[Progress], None] | None,
               deterministic: bool, executor: Executor | None) -> SolveResult:
    """Each pool solved apart and the plans merged (:mod:`packer.solvers.pools`), with the whole problem's bound and an honest status.

    The bound is :func:`engine_bound`'s (with pools, the LP whose solution splits the move
    budget), computed first so that a stop request cannot cut it short later. The plan is
    ``optimal`` only when every pool's is and its objective meets that bound; its solver is
    ``engine`` or the baseline when every pool used it (the baselines report no bound), else ``pools``.
    """
    t0 = time.perf_counter()
    if solver != "auto":  # before any pool's work
        check_support(problem, strategy_of(solver, problem.fair), solver)
    with interrupt.stoppable():
        bound, detail, _ = engine_bound(problem)
    outcome = solve_pools(problem, run_solver, solver, time_limit, seed, deterministic, executor, progress, detail.get("by_group"))
    if outcome.infeasible_tasks:
        return SolveResult.infeasible(problem.current, outcome.infeasible_tasks, solver, time.perf_counter() - t0)
    assign = outcome.assign
    broken = violations(problem, assign)
    if broken:
        raise RuntimeError("the merged plan of the pools breaks a rule: " + "; ".join(broken))
    objective = evaluate(problem, assign).objective
    interrupted = interrupt.stop_requested() or outcome.interrupted
    stats = {"pools": outcome.lines, "interrupted": bool(interrupted), "moves": int((assign != problem.current).sum()),
             "objective_check": objective}
    if not interrupted and outcome.search_ended:
        stats["search_ended"] = outcome.search_ended
    names = {r.solver for r in outcome.results if r is not None}
    name = names.pop() if len(names) == 1 and (names <= {"engine"} or names <= set(BASELINES)) else "pools"
    if name in BASELINES:
        return SolveResult(assign=assign, status="feasible", objective=objective, bound=-math.inf, solver=name,
                           wall_s=time.perf_counter() - t0, stats=stats)
    stats["bound"] = bound_detail(problem, assign, detail)
    proven = outcome.all_optimal and not interrupted and objective <= bound + 1e-6 * max(1.0, abs(objective))
    return SolveResult(assign=assign, status="optimal" if proven else "feasible", objective=objective,
                       bound=bound if math.isfinite(bound) else -math.inf, solver=name, wall_s=time.perf_counter() - t0, stats=stats)


def _run_engine(problem: PlacementProblem, time_limit: float, seed: int, progress: Callable[[Progress], None] | None,
                deterministic: bool = False, start: np.ndarray | None = None) -> SolveResult:
    """The scalable engine within ``time_limit`` seconds, with the bound of :func:`engine_bound` (and column generation on
    full repacks; on wide move budgets, a full repack's starts: :func:`_full_repack_starts`)."""
    stuck = unplaceable_tasks(problem)
    if len(stuck):
        return SolveResult.infeasible(problem.current, problem.task_ids[stuck].tolist(), "engine", 0.0)
    clock = SearchClock(time_limit, deterministic)
    if progress is not None:  # the bound's LP takes seconds on large fleets: say what is running
        today = evaluate(problem, problem.current if start is None else start)
        progress(Progress("lower bound (LP)", today.objective, None, today.moves, today.hosts, 0.0))
    with interrupt.stoppable():
        bound, detail, mixes = engine_bound(problem)
        starts, repack = [], {}
        if "primary_lower_bound" in detail and supported(problem):
            packed = _pattern_bound_and_start(problem, time_limit, detail, progress, clock)
            bound = objective_bound(detail)
            within = _default_budget_start(problem, detail, time_limit, seed, progress, clock)
            starts += [start for start in (packed, within) if start is not None]
        elif wide_budget(problem):
            mixes, starts, repack = _full_repack_starts(problem, time_limit, bound, progress, clock)
        if "freeable_lp" in detail:
            ran, packed = _budget_patterns(problem, detail, time_limit, seed, progress, clock)
            if packed is not None:
                starts.append(packed)
            if not ran:
                _cap_by_patterns(problem, detail, repack, time_limit, progress, clock)
            bound = objective_bound(detail)
    target = _primary_bound(detail)
    offset = clock.wall()

    def engine_progress(report: Progress) -> None:  # the engine counts from its own start; the user, from the solve's
        progress(dataclasses.replace(report, elapsed_s=report.elapsed_s + offset))

    config = EngineConfig(time_limit=clock.remaining(), deterministic=deterministic, seed=seed,
                          progress=None if progress is None else engine_progress, bound=bound, primary_target=target)
    result = solve_engine(problem, config, start=start, mixes=mixes, starts=starts)
    result.wall_s = clock.wall()
    # The better of this bound and the engine's own: CP-SAT's where it proved the plan optimal, else none.
    result.bound = max(bound, result.bound) if math.isfinite(bound) else result.bound
    result.stats["bound"] = bound_detail(problem, result.assign, detail)
    result.stats["objective_check"] = evaluate(problem, result.assign).objective
    return result


def _full_repack_starts(problem: PlacementProblem, time_limit: float, bound: float, progress: Callable[[Progress], None] | None,
                        clock: SearchClock) -> tuple[list[ArchMix], list[np.ndarray], dict]:
    """For a wide move budget (:func:`~packer.solvers.engine.wide_budget`), what a full repack of the same problem starts
    from, for the engine to trim to the budget: the solutions of :func:`engine_bound`'s MILPs and, from
    :data:`PACKING_BUDGET_SHARE` of the movable tasks, column generation's packing (:func:`_pattern_bound_and_start`, on
    its share of ``time_limit``), and the full repack's bound detail (:func:`engine_bound`'s, with column generation's):
    the plan's bound is the budget's own (``bound``, shown in ``progress`` meanwhile), which that detail may only cap
    (:func:`_cap_by_patterns`)."""
    unbudgeted = problem.with_rule(None, replaces=MoveBudget)

    def shown(report: Progress) -> None:  # a budgeted solve: say that this plan is one to trim, and show the budget's bound
        progress(dataclasses.replace(report, phase=f"full repack to trim to the budget: {report.phase}",
                                     bound=bound if math.isfinite(bound) else None))

    _, detail, mixes = engine_bound(unbudgeted)
    packed = None
    wide_enough = problem.max_moves >= PACKING_BUDGET_SHARE * int(problem.movable.sum())
    # Where the engine re-solves the whole instance, column generation builds no packing (:func:`_pattern_bound_and_start`).
    if supported(unbudgeted) and wide_enough and not covers_whole_instance(problem):
        packed = _pattern_bound_and_start(unbudgeted, time_limit, detail, None if progress is None else shown, clock)
    return mixes, [] if packed is None else [packed], detail


def _cap_by_patterns(problem: PlacementProblem, detail: dict, repack: dict, time_limit: float,
                     progress: Callable[[Progress], None] | None, clock: SearchClock) -> None:
    """Let column generation's bound on the full repack cap what a move budget can free (:func:`cap_freeable`; ``detail``:
    :func:`engine_bound`'s): the bound in ``repack`` (the full repack's bound detail) where its column generation ran for
    the budget's starts, else a run of its own (:func:`pattern_lower_bound`, its share of ``time_limit``) where today's
    primary cost less the MILP bound over architectures is within :data:`PATTERN_CAP_RATIO` of the budget's LP."""
    if "pattern_bound" in repack:
        lower = repack["primary_lower_bound"]
    else:
        unbudgeted = problem.with_rule(None, replaces=MoveBudget)
        near = detail["primary_before"] - detail["repack_lower_bound"] <= PATTERN_CAP_RATIO * detail["freeable_lp"]
        # A perfect packing met the MILP's bound: no column generation can raise it.
        if "perfect_packing" in repack or not near or not supported(unbudgeted) or covers_whole_instance(problem):
            return
        _phase(problem, "lower bound: what a full repack can free (column generation)", detail, progress, clock)()
        lower, found = pattern_lower_bound(unbudgeted, time_limit, detail["repack_lower_bound"], clock.deterministic)
        clock.spend(min(pattern_share(unbudgeted) * time_limit, found.work))
    cap_freeable(problem, detail, lower, PATTERN_METHOD)


def _budget_patterns(problem: PlacementProblem, detail: dict, time_limit: float, seed: int,
                     progress: Callable[[Progress], None] | None, clock: SearchClock) -> tuple[bool, np.ndarray | None]:
    """Where column generation within the move budget applies (not where the engine re-solves the whole instance): its
    bound caps what the budget can free (:func:`cap_freeable`), and its packing is returned, a start for the engine. Returns
    whether it ran and the packing (None where there is none)."""
    if covers_whole_instance(problem):
        return False, None
    started = _phase(problem, "lower bound and plan within the move budget (column generation)", detail, progress, clock)
    lower, found = budget_pattern_bound(problem, time_limit, clock.deterministic, started)
    if found is None:
        return False, None
    clock.spend(min(BUDGET_PATTERN_SHARE * time_limit, found.work))
    detail.update(found.detail)
    if math.isfinite(lower):  # no iteration priced: no bound
        cap_freeable(problem, detail, lower, BUDGET_PATTERN_METHOD, within_budget=True)
    return True, _budget_packing(problem, found, BUDGET_PACKING_SHARE * time_limit, seed, clock)


def _default_budget_start(problem: PlacementProblem, detail: dict, time_limit: float, seed: int,
                          progress: Callable[[Progress], None] | None, clock: SearchClock) -> np.ndarray | None:
    """For a full repack (``detail``: its bound's, column generation's included), the default budget's plan by column
    generation within it (:data:`DEFAULT_BUDGET_PATTERN_SHARE` and :data:`DEFAULT_BUDGET_PACKING_SHARE` of ``time_limit``),
    a start: the budgeted solve of the same configuration starts from such a plan. Only where the full repack can free
    at most :data:`PATTERN_CAP_RATIO` times what the budget's LP says it can (else the full repack's own plans free far
    more), the packing rules only, and not where column generation's packing already met the bound; None elsewhere."""
    budgeted = problem.with_rule(MoveBudget(BUDGETED_START_MOVES))
    settled = detail.get("pattern_packing", math.inf) <= detail["primary_lower_bound"] + 1e-6
    if (settled or covers_whole_instance(problem) or not applies(budgeted)
            or any(rule.name not in PACKING_RULES for rule in problem.rules)):
        return None
    before = float(problem.primary_cost[np.unique(problem.current)].sum())
    if before - detail["primary_lower_bound"] > PATTERN_CAP_RATIO * freeable_cost_bound(budgeted).value:
        return None
    found = budget_column_generation(budgeted, DEFAULT_BUDGET_PATTERN_SHARE * time_limit, clock.deterministic,
                                     started=_phase(problem, "plan within the default move budget (column generation)", detail,
                                                    progress, clock))
    if found is None:
        return None
    clock.spend(min(DEFAULT_BUDGET_PATTERN_SHARE * time_limit, found.work))
    return _budget_packing(budgeted, found, DEFAULT_BUDGET_PACKING_SHARE * time_limit, seed, clock)


def _phase(problem: PlacementProblem, phase: str, detail: dict, progress: Callable[[Progress], None] | None,
           clock: SearchClock) -> Callable[[], None]:
    """What reports ``phase`` (today's placement, ``detail``'s bound: none where it is not a number) to ``progress`` once
    called; nothing without ``progress``."""

    def report() -> None:
        if progress is None:
            return
        today, bound = evaluate(problem, problem.current), objective_bound(detail)
        progress(Progress(phase, today.objective, bound if math.isfinite(bound) else None, 0, today.hosts, clock.wall()))

    return report


def _budget_packing(problem: PlacementProblem, found: BudgetPatterns, seconds: float, seed: int,
                    clock: SearchClock) -> np.ndarray | None:
    """:func:`~packer.solvers.budget_patterns.budget_packing` on at most ``seconds`` of ``clock``, charged to it."""
    part = clock.part(seconds)
    packed = budget_packing(problem, found, part, seed)
    clock.spend(part.work)
    return packed


def budget_pattern_bound(problem: PlacementProblem, time_limit: float, deterministic: bool = False,
                         started: Callable[[], None] | None = None) -> tuple[float, BudgetPatterns | None]:
    """Column generation within the move budget's lower bound on the primary cost of every plan within it, as a solve of
    ``time_limit`` seconds computes it (:data:`BUDGET_PATTERN_SHARE` of it; rounded up where costs are integral), and the
    run; −inf and None where it does not apply (:func:`packer.solvers.budget_patterns.budget_column_generation`, which
    calls ``started`` where it does)."""
    found = budget_column_generation(problem, BUDGET_PATTERN_SHARE * time_limit, deterministic, started=started)
    if found is None:
        return -math.inf, None
    return _integral_lower_bound(problem, found.bound), found


def bound_detail(problem: PlacementProblem, assign: np.ndarray, detail: dict) -> dict:
    """``detail`` of :func:`engine_bound` with how far the placement ``assign`` gets: cost freed (move budget) or gap (full repack).

    Primary-cost units: ``freed`` = ``primary_before`` − the plan's primary cost, ``share_of_bound`` = ``freed`` /
    ``freeable_bound``; ``primary_gap`` = (primary cost − ``primary_lower_bound``) / ``primary_lower_bound``.
    """
    detail = dict(detail)
    primary = float(problem.primary_cost[np.unique(assign)].sum())
    if "freeable_bound" in detail:
        detail["freed"] = detail["primary_before"] - primary
        detail["share_of_bound"] = detail["freed"] / detail["freeable_bound"] if detail["freeable_bound"] > 0 else None
    else:
        lower = detail["primary_lower_bound"]
        detail["primary_gap"] = (primary - lower) / lower if 0 < lower < math.inf else None
    return detail


def _run_auto_exact(problem: PlacementProblem, time_limit: float, seed: int, progress: Callable[[Progress], None] | None,
                    deterministic: bool = False, start: np.ndarray | None = None) -> SolveResult:
    """``auto`` on a small instance: the engine, then HiGHS on the exact model started from the engine's plan.

    The engine gets :data:`AUTO_ENGINE_SHARE` of ``time_limit``, HiGHS the rest (HiGHS,
    in-process, keeps its time limit; CBC overran a 5 s limit by 12 s on a 180-task model).
    An engine plan proven optimal (CP-SAT over the whole instance) is returned as it is, without HiGHS. Otherwise
    HiGHS's plan is returned when it is better or proven optimal, else the engine's, with
    the better of the two bounds; ``stats["method"]`` names the solver whose plan it is and ``stats["auto"]``
    what each found.
    """
    t0 = time.perf_counter()
    engine = _run_engine(problem, AUTO_ENGINE_SHARE * time_limit, seed, progress, deterministic, start)
    if engine.status != "feasible" or interrupt.stop_requested():  # infeasible, or proven optimal: nothing for HiGHS to do
        return engine
    if progress is not None:
        after = evaluate(problem, engine.assign)
        progress(Progress("exact model (HiGHS), from the engine's plan", after.objective,
                          engine.bound if math.isfinite(engine.bound) else None, engine.stats.get("moves", 0), after.hosts,
                          time.perf_counter() - t0))
    remaining = (1.0 - AUTO_ENGINE_SHARE) * time_limit if deterministic else max(1.0, time_limit - (time.perf_counter() - t0))
    exact = solve_milp(problem, solver="highs", time_limit=remaining, seed=seed, start=engine.assign, deterministic=deterministic)
    improved = exact.status in ("optimal", "feasible") and exact.objective < engine.objective - 1e-9
    proven = exact.status == "optimal" and exact.objective <= engine.objective + 1e-9
    best = exact if improved or proven else engine
    bound = max(engine.bound, exact.bound)
    status = "optimal" if exact.status == "optimal" and best is exact else "feasible"
    stats = dict(best.stats)
    stats["bound"] = bound_detail(problem, best.assign, engine.stats["bound"])
    stats["method"] = best.solver
    stats["interrupted"] = bool(engine.stats.get("interrupted") or exact.stats.get("interrupted"))
    stats["auto"] = {r.solver: {"status": r.status, "objective": r.objective, "bound": r.bound if math.isfinite(r.bound) else None,
                                "wall_s": r.wall_s, **({"failed": True} if r.stats.get("solver_failed") else {})} for r in (engine, exact)}
    return SolveResult(assign=best.assign, status=status, objective=best.objective, bound=bound, solver=best.solver,
                       wall_s=time.perf_counter() - t0, stats=stats)


def _run_fair(problem: PlacementProblem, solver: str, time_limit: float, seed: int) -> SolveResult:
    """The ``fair`` goal: exact leximin (CP-SAT) on small instances, the scalable greedy on fleets."""
    if solver not in FAIR_SOLVERS:
        raise InputError(f"--goal fair is solved by the engine and cpsat solvers, not by '{solver}'")
    check_support(problem, "fair", solver)
    stuck = unplaceable_tasks(problem)
    if len(stuck):
        return SolveResult.infeasible(problem.current, problem.task_ids[stuck].tolist(), solver, 0.0)
    if solver == "cpsat" or (solver == "auto" and problem.n_tasks <= LEXIMIN_EXACT_MAX_TASKS):
        return solve_leximin_exact(problem, time_limit=time_limit, seed=seed)
    return solve_leximin_engine(problem, time_limit=time_limit, seed=seed)
