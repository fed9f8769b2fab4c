"""One solve, end to end: build the problem a configuration describes, pick a solver, attach a bound.

This is the layer the ``packer solve`` command and the verifier share, so a plan is
verified against exactly the problem it was solved on, rebuilt from the inputs.

Solvers (``--solver``):

* ``engine`` — the scalable engine (:mod:`packer.solvers.engine`);
* ``cpsat`` — the exact CP-SAT model of the whole instance;
* ``cbc`` / ``highs`` — the exact PuLP MILP model with that backend;
* ``auto`` — the exact MILP with CBC up to :data:`AUTO_EXACT_MAX_TASKS` tasks (it
  proves optimality there in seconds; CP-SAT finds the same plans but its bound on
  this model stays weak, see benchmarks/RESULTS.md), the engine above;
* ``baseline-random``, ``baseline-least-loaded``, ``baseline-ffd``, ``baseline-paragon``,
  ``baseline-tarcil`` — the comparison policies of :mod:`packer.solvers.baselines` (same
  inputs and move budget; no bound, and they ignore the time limit).

Goal ``fair`` (leximin relative performance, :mod:`packer.solvers.leximin`): ``auto``
is the exact iterated CP-SAT up to :data:`LEXIMIN_EXACT_MAX_TASKS` tasks and the
scalable greedy above; ``cpsat`` / ``engine`` choose one. A ``min_rp`` guard
(``--min-rp``) is honoured by the engine and CP-SAT; ``auto`` then uses CP-SAT for small
instances, and the MILP models and baselines refuse it. A ``max_new_at_risk`` guard
(``--max-new-at-risk``) is honoured by the engine only (``auto`` uses it at every size).

Every result carries a bound on its objective: the exact models' own dual bound,
or for the engine one derived from :mod:`packer.solvers.bounds` — for move-bounded
repacking the objective can be no lower than the current primary cost minus the
most cost the move budget could free; for a full repack no lower than the MILP lower
bound on the primary cost. The bound's details go into ``result.stats["bound"]``.
"""
from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Callable

import numpy as np
import pandas as pd

from packer.solvers.baselines import BASELINES, run_baseline
from packer.solvers.bounds import freeable_cost_bound, repack_cost_bound
from packer.errors import InputError
from packer.model.metrics import evaluate
from packer.plan.plan import PlanContext
from packer.io.presets import Preset
from packer.model.problem import PlacementProblem, build_problem
from packer.solvers.engine import EngineConfig, Progress, solve_engine
from packer.solvers.formulation import unplaceable_tasks
from packer.solvers.result import SolveResult
from packer.io.trace import Trace

if TYPE_CHECKING:
    from packer.characterize.characterization import Characterization

log = logging.getLogger(__name__)

SOLVERS = ("auto", "engine", "cpsat", "cbc", "highs", *BASELINES)
AUTO_EXACT_MAX_TASKS = 200
#: Largest whole-instance exact models (task-host pairs) we let users start: beyond these,
#: building the model alone takes minutes and CBC ignores its time limit in the root LP
#: (measured: CBC solved 22k pairs in 10 s and ran 10+ minutes past a 60 s limit at 486k;
#: CP-SAT respected a 60 s limit at 486k pairs with 2.6 GiB).
EXACT_MAX_PAIRS = {"cpsat": 1_000_000, "cbc": 100_000, "highs": 100_000}
#: Largest instance the ``fair`` goal solves exactly under ``--solver auto``.
LEXIMIN_EXACT_MAX_TASKS = 60


def candidate_pairs(problem: PlacementProblem) -> int:
    """Task-host pairs an exact whole-instance model has: eligible hosts per task, plus its current host."""
    hosts_per_arch = np.bincount(problem.host_arch, minlength=len(problem.arch_names))
    return int((problem.eligible.astype(np.int64) @ hosts_per_arch).sum()) + problem.n_tasks


def problem_from_context(
    trace: Trace,
    preset: Preset,
    context: PlanContext,
    profiles: pd.DataFrame | None = None,
    progress: Callable[[int], None] | None = None,
    characterization: Characterization | None = None,
) -> PlacementProblem:
    """The problem ``context`` describes, computed from the trace (profiles and characterization as recorded).

    ``profiles`` may be passed to reuse a profiling run made with the same options;
    ``progress`` is called with usage rows read while profiling; ``characterization``
    may be passed to reuse a :func:`packer.characterize.characterization.characterize` run made on those
    profiles with the context's options (its scores and class labels are used as they are).
    """
    if profiles is None and (preset.percentiles or preset.sensitivity):
        from packer.characterize.profile import profile_tasks

        profiles = profile_tasks(trace, context.percentiles, context.window_s, skip_invalid=context.skip_invalid_usage, progress=progress).profiles
    scores = task_class = None
    if preset.sensitivity:
        result = characterization if characterization is not None else characterize_from_context(trace, profiles, context)
        scores = result.scores.tasks
        # Workload class labels ("<type>/<class>") for the per-class relative-performance report.
        labels = result.tasks.set_index("task_id")[["type", "class"]].reindex(trace.tasks["task_id"]).astype(str)
        task_class = (labels["type"] + "/" + labels["class"]).to_numpy(dtype=str)
    problem = build_problem(trace, preset, profiles, scores, max_moves=context.max_moves, spread_host=context.spread_host,
                            spread_domain=context.spread_domain, weights=context.weights, sensitivity_basis=context.sensitivity_basis)
    return problem if task_class is None else problem.with_(task_class=task_class)


def characterize_from_context(trace: Trace, profiles: pd.DataFrame, context: PlanContext) -> Characterization:
    """The characterization ``context`` records (classes, class scores, basis), computed from the trace's profiles."""
    from packer.characterize.characterization import characterize
    from packer.characterize.classes import read_reference_classes
    from packer.characterize.sensitivity import DEFAULT_SENSITIVITY

    reference = read_reference_classes(context.classes_from) if context.classes_from else None
    return characterize(trace, profiles, k=context.k, kmax=context.kmax, seed=context.characterize_seed,
                        sensitivity=context.sensitivity or DEFAULT_SENSITIVITY, percentile=context.characterize_percentile,
                        aggregate=context.class_scores, basis=context.sensitivity_basis, reference=reference)


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


def engine_bound(problem: PlacementProblem) -> tuple[float, dict, np.ndarray | None]:
    """A lower bound on the objective for the engine's result, what it rests on (see module doc) and,
    for a full repack, each task's preferred architecture in the bound's LP solution."""
    if problem.max_moves is None or problem.max_moves >= int(problem.movable.sum()):
        # A budget that covers every movable task cannot bind: bound it as a full repack.
        lower = repack_cost_bound(problem)
        return lower.value, {"kind": "lower bound on primary cost (full repack, MILP over architectures)", "primary_lower_bound": lower.value,
                             "exact": lower.exact, **lower.detail}, lower.task_arch
    freeable = freeable_cost_bound(problem)
    before = float(problem.primary_cost[np.unique(problem.current)].sum())
    return before - freeable.value, {"kind": "upper bound on primary cost the move budget can free (LP)", "freeable_bound": freeable.value,
                                     "primary_before": before, "exact": freeable.exact, **freeable.detail}, None


def run_solver(
    problem: PlacementProblem,
    solver: str = "auto",
    time_limit: float = 60.0,
    seed: int = 0,
    progress: Callable[[Progress], None] | None = None,
) -> SolveResult:
    """Solve ``problem`` with ``solver`` within ``time_limit`` seconds and attach a bound (see module doc)."""
    oversized = tasks_that_fit_nowhere(problem)
    if len(oversized):
        return SolveResult.infeasible(problem.current, problem.task_ids[oversized].tolist(), solver, 0.0)
    if problem.weights.goal == "fair":
        return _run_fair(problem, solver, time_limit, seed)
    if problem.weights.max_new_at_risk is not None:
        if not problem.sens_dims:
            raise InputError("--max-new-at-risk counts tasks at risk of interference, which needs a configuration with "
                             "sensitivity (--config p99-sens)")
        if solver not in ("auto", "engine"):
            raise InputError(f"--max-new-at-risk is honoured by the engine solver, not by '{solver}'")
        solver = "engine"
    if problem.weights.min_rp is not None:
        if solver not in ("auto", "engine", "cpsat"):
            raise InputError(f"--min-rp is honoured by the engine and cpsat solvers, not by '{solver}'")
        if solver == "auto":
            solver = "cpsat" if problem.n_tasks <= AUTO_EXACT_MAX_TASKS else "engine"
    if solver == "auto":
        solver = "cbc" if problem.n_tasks <= AUTO_EXACT_MAX_TASKS else "engine"
    if solver in EXACT_MAX_PAIRS and candidate_pairs(problem) > EXACT_MAX_PAIRS[solver]:
        raise InputError(f"the exact {solver} model of this instance would have {candidate_pairs(problem):,} task-host pairs "
                         f"(more than {EXACT_MAX_PAIRS[solver]:,}: it would not stop within the time limit); use --solver engine or auto")
    if solver in BASELINES:
        return run_baseline(problem, solver, seed)
    if solver == "cpsat":
        from packer.solvers.cpsat import solve_cpsat

        return solve_cpsat(problem, time_limit=time_limit, seed=seed)
    if solver in ("cbc", "highs"):
        from packer.solvers.milp import solve_milp

        return solve_milp(problem, solver=solver, time_limit=time_limit, seed=seed)
    stuck = unplaceable_tasks(problem)
    if len(stuck):
        return SolveResult.infeasible(problem.current, problem.task_ids[stuck].tolist(), "engine", 0.0)
    bound, detail, task_arch = engine_bound(problem)
    hosts_per_arch = None
    if "hosts_per_arch" in detail:
        hosts_per_arch = np.array([detail["hosts_per_arch"][a] for a in problem.arch_names.tolist()], dtype=float)
    target = detail["primary_lower_bound"] if "primary_lower_bound" in detail else detail["primary_before"] - detail["freeable_bound"]
    config = EngineConfig(time_limit=time_limit, seed=seed, progress=progress, bound=bound, primary_target=target)
    result = solve_engine(problem, config, hosts_per_arch=hosts_per_arch, task_arch=task_arch)
    result.bound = bound if math.isfinite(bound) else -math.inf
    after = evaluate(problem, result.assign)
    if "freeable_bound" in detail:
        freed = detail["primary_before"] - float(problem.primary_cost[np.unique(result.assign)].sum())
        detail["freed"] = freed
        detail["share_of_bound"] = freed / detail["freeable_bound"] if detail["freeable_bound"] > 0 else None
    else:
        primary = float(problem.primary_cost[np.unique(result.assign)].sum())
        detail["primary_gap"] = (primary - bound) / bound if bound > 0 else None
    result.stats["bound"] = detail
    result.stats["objective_check"] = after.objective
    return result


def _run_fair(problem: PlacementProblem, solver: str, time_limit: float, seed: int) -> SolveResult:
    """The ``fair`` goal: exact leximin (CP-SAT) on small instances, the scalable greedy on fleets."""
    from packer.solvers.leximin import solve_leximin_engine, solve_leximin_exact

    if solver not in ("auto", "engine", "cpsat"):
        raise InputError(f"--goal fair is solved by the engine and cpsat solvers, not by '{solver}'")
    stuck = unplaceable_tasks(problem)
    if len(stuck):
        return SolveResult.infeasible(problem.current, problem.task_ids[stuck].tolist(), solver, 0.0)
    if solver == "cpsat" or (solver == "auto" and problem.n_tasks <= LEXIMIN_EXACT_MAX_TASKS):
        return solve_leximin_exact(problem, time_limit=time_limit, seed=seed)
    return solve_leximin_engine(problem, time_limit=time_limit, seed=seed)
