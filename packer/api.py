"""packer's Python API: from a trace to a verifiable plan in a few calls, validated at the boundary.

    import packer

    trace = packer.read_trace("traces/sample")
    plan = packer.solve(trace, goal="tco", config="p99", max_moves=400, time_limit=20)
    plan.placement                     # task_id, host_id: where every task ends
    plan.moves                         # step, task_id, from_host, to_host, ...: in executable order
    plan.summary["metrics"]["after"]   # TCO, hosts, fragmentation, tasks at risk, ...
    plan = plan.write("out/plan")      # the plan folder `packer verify` checks
    assert packer.verify(trace, plan).ok

Each function is one pipeline stage (ARCHITECTURE.md): :func:`profile` (p99 usage
profiles), :func:`characterize` (workload classes and sensitivity), :func:`solve`
(a plan), :func:`verify` (an independent check). They take a trace folder or a
:class:`~packer.io.trace.Trace`, raise :class:`~packer.errors.InputError` for bad
arguments or inputs, and change nothing global (no logging or plotting setup).
"""
from __future__ import annotations

import math
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np
import pandas as pd

from packer import interrupt
from packer.characterization.characterize import Characterization
from packer.characterization.normalize import DEFAULT_SENSITIVITY_BASIS, SENSITIVITY_BASES
from packer.characterization.profile import profile_tasks
from packer.characterization.profile_dask import profile_tasks_dask
from packer.characterization.classes import read_reference_classes
from packer.characterization.sensitivity import CLASS_AGGREGATES, DEFAULT_CLASS_AGGREGATE, DEFAULT_SENSITIVITY, load_sensitivity
from packer.errors import InfeasibleError, InputError, NoPlanError
from packer.io.fleet import DEFAULT_FLEET
from packer.io.presets import DEFAULT_PRESETS, get_preset
from packer.io.trace import FLEET_FILE, Trace, read_trace
from packer.model.build import GOALS, GoalWeights, RuleOptions, check_options, service_pairs
from packer.model.metrics import violations
from packer.model.problem import PlacementProblem
from packer.plan.context import PlanContext, characterize_from_context, problem_from_context
from packer.plan.plan import Plan, make_plan, read_plan
from packer.plan.verify import VerifyReport, check_placement, verify_plan
from packer.solvers.engine import Progress
from packer.solvers.run import SOLVERS, check_solver, run_solver

if TYPE_CHECKING:
    import distributed


def _trace(trace: str | Path | Trace, fleet: str | Path | None = None) -> Trace:
    if isinstance(trace, Trace):
        if fleet is not None:
            raise InputError("fleet= goes with a trace folder; a Trace already has its fleet (packer.read_trace(path, fleet))")
        return trace
    if not isinstance(trace, (str, Path)):
        raise InputError(f"trace must be a trace folder or a packer Trace, got {type(trace).__name__}")
    return read_trace(trace, fleet)


def _fleet_of(trace: Trace) -> str:
    """The context's ``fleet`` for the catalog ``trace`` was read with, so that ``packer verify`` rebuilds the same problem."""
    source = Path(trace.fleet.source)
    if not source.is_file():
        raise InputError(f"the trace's fleet was not read from a file ({trace.fleet.source!r}); a plan must name its fleet "
                         "catalog to be verifiable: read the trace with packer.read_trace(path, fleet_file)")
    if source.resolve() == Path(DEFAULT_FLEET).resolve():
        return "default"
    if source.resolve() == (Path(trace.path) / FLEET_FILE).resolve():
        return "trace"
    return str(source.resolve())


def profile(trace: str | Path | Trace, *, percentile: float = 99.0, window_s: int = 60, skip_invalid_usage: bool = False,
            progress: Callable[[int], None] | None = None, client: "distributed.Client | None" = None,
            usage: str | None = None) -> pd.DataFrame:
    """Per-task usage profiles: the ``percentile``-th of ``window_s``-second means (cores, GiB, Gbps), mean, max, samples.

    See :func:`packer.characterization.profile.profile_tasks`; ``progress`` is called with usage rows as they are
    processed (rows spilled or shuffled count once per pass). With a Dask ``client``
    (:func:`packer.distributed.dask_client`), the cluster computes the same profiles
    (:func:`packer.characterization.profile_dask.profile_tasks_dask`), reading usage from
    ``usage`` (a path or fsspec URL) if given, else from the trace.
    """
    if not (0 <= percentile <= 100):
        raise InputError(f"percentile must be in [0, 100], got {percentile}")
    if not (isinstance(window_s, int) and window_s >= 1):
        raise InputError(f"window_s must be a whole number of seconds >= 1, got {window_s!r}")
    if client is None:
        if usage is not None:
            raise InputError("usage= is read by Dask workers: pass client= too (packer.distributed.dask_client)")
        return profile_tasks(_trace(trace), (float(percentile),), window_s, skip_invalid=skip_invalid_usage, progress=progress).profiles
    return profile_tasks_dask(_trace(trace), client, (float(percentile),), window_s, usage=usage, skip_invalid=skip_invalid_usage,
                              progress=progress).profiles


def characterize(trace: str | Path | Trace, profiles: pd.DataFrame | None = None, *, k: int | None = None, seed: int = 0,
                 sensitivity: str | Path | None = None, class_scores: str = DEFAULT_CLASS_AGGREGATE,
                 sensitivity_basis: str = DEFAULT_SENSITIVITY_BASIS, classes_from: str | Path | None = None) -> Characterization:
    """Workload classes (K-means per umbrella host type), sensitivity scores per task and eligibility (:mod:`packer.characterization`).

    ``profiles`` from :func:`profile` (computed when None); the other options as
    ``packer characterize`` documents them.
    """
    _check_choice("class_scores", class_scores, CLASS_AGGREGATES)
    _check_choice("sensitivity_basis", sensitivity_basis, SENSITIVITY_BASES)
    trace = _trace(trace)
    profiles = profile(trace) if profiles is None else profiles
    context = PlanContext(trace=str(trace.path), k=k, characterize_seed=seed, sensitivity=None if sensitivity is None else str(sensitivity),
                          class_scores=class_scores, sensitivity_basis=sensitivity_basis,
                          classes_from=None if classes_from is None else str(classes_from))
    return characterize_from_context(trace, profiles, context)


def solve(trace: str | Path | Trace, *, config: str = "p99", goal: str = "tco", max_moves: int | None = 400, solver: str = "auto",
          time_limit: float = 60.0, seed: int = 0, deterministic: bool = False, weights: GoalWeights = GoalWeights(), spread_host: int | None = None,
          spread_domain: int | None = None, min_rp: float | None = None, max_new_at_risk: int | None = None,
          anti_affinity: Iterable[tuple[str, str]] = (), profiles: pd.DataFrame | None = None, sensitivity: str | Path | None = None,
          sensitivity_basis: str = DEFAULT_SENSITIVITY_BASIS, class_scores: str = DEFAULT_CLASS_AGGREGATE,
          classes_from: str | Path | None = None, presets: str | Path = DEFAULT_PRESETS, fleet: str | Path | None = None,
          skip_invalid_usage: bool = False, window_s: int = 60, start: str | Path | Plan | None = None,
          on_profile: Callable[[int], None] | None = None, on_progress: Callable[[Progress], None] | None = None,
          executor: Executor | None = None) -> Plan:
    """A placement plan for ``trace``: which tasks to move where, in order, with its summary (not yet written).

    ``config``: a Table IV preset (``baseline``, ``p99-cpu``, ``p99-mem``, ``p99``,
    ``p99-sens``); ``goal``: ``tco`` (cost units), ``hosts`` or ``fair`` (leximin
    relative performance); ``max_moves``: the move budget (None = a full repack);
    ``solver``: one of :data:`packer.solvers.run.SOLVERS`; ``time_limit`` in seconds;
    ``start``: a plan (folder or :class:`Plan`) whose placement the search starts from
    instead of the current one; it must keep this solve's rules (the move budget too), and
    the engine and ``auto`` never return a worse plan (e.g. a full repack started from a
    400-move plan); ``seed``: the random seed; ``deterministic``: count ``time_limit`` as work rather than
    wall clock (:mod:`packer.solvers.clock`), so that the same seed gives the same plan
    under any machine load (without it a busy machine may return another plan);
    ``weights``: the secondary goals' weights (:class:`~packer.model.build.GoalWeights`);
    ``spread_host`` / ``spread_domain`` / ``min_rp`` / ``max_new_at_risk`` /
    ``anti_affinity``: the rules :class:`~packer.model.build.RuleOptions` documents;
    ``profiles``: reuse :func:`profile`'s result; the sensitivity options as in
    :func:`characterize`; ``skip_invalid_usage`` and ``window_s`` as in :func:`profile` (pass
    those ``profiles`` were made with: the plan records them so ``packer verify`` can
    recompute the profiles). ``on_profile`` is called with usage rows read, ``on_progress``
    with the engine's :class:`~packer.solvers.engine.Progress`. On a trace whose hosts have a
    ``pool`` column each pool is solved apart, on ``executor`` (a
    :class:`concurrent.futures.Executor`, e.g. :func:`packer.parallel.local_executor`;
    default: one after the other here) and the plans merged (:mod:`packer.solvers.pools`).

    Raises :class:`~packer.errors.InputError` for bad arguments,
    :class:`~packer.errors.InfeasibleError` (naming the tasks) when some task fits no
    host, and :class:`~packer.errors.NoPlanError` when an exact solver finds no
    placement within the time limit. The plan's ``write(dir)`` writes the folder
    ``packer verify`` checks. Under :func:`packer.interrupt.handle_signals` a SIGINT or
    SIGTERM stops the search and returns its best plan (``summary["solver"]["stats"]["interrupted"]``);
    one during profiling raises ``KeyboardInterrupt``.
    """
    _check_choice("goal", goal, GOALS)
    _check_choice("solver", solver, SOLVERS)
    _check_choice("sensitivity_basis", sensitivity_basis, SENSITIVITY_BASES)
    _check_choice("class_scores", class_scores, CLASS_AGGREGATES)
    if not (isinstance(time_limit, (int, float)) and math.isfinite(time_limit) and time_limit > 0):
        raise InputError(f"time_limit must be a finite number of seconds > 0, got {time_limit!r}")
    if not (isinstance(window_s, int) and not isinstance(window_s, bool) and window_s >= 1):
        raise InputError(f"window_s must be a whole number of seconds >= 1, got {window_s!r}")
    if not isinstance(weights, GoalWeights):
        raise InputError(f"weights must be a packer GoalWeights, got {type(weights).__name__}")
    for name, value in (("max_moves", max_moves), ("spread_host", spread_host), ("spread_domain", spread_domain),
                        ("max_new_at_risk", max_new_at_risk)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InputError(f"{name} must be a whole number or None, got {value!r}")
    try:
        pairs = service_pairs(list(anti_affinity))
    except (TypeError, ValueError) as exc:
        raise InputError(f"anti_affinity: {exc}") from None
    trace = _trace(trace, fleet)
    preset = get_preset(config, presets)
    context = PlanContext(
        trace=str(trace.path), fleet=_fleet_of(trace), config=preset.name, presets=str(presets),
        sensitivity=None if sensitivity is None else str(sensitivity), sensitivity_basis=sensitivity_basis, class_scores=class_scores,
        classes_from=None if classes_from is None else str(classes_from), goal=goal, weights=weights,
        rules=RuleOptions(max_moves=max_moves, spread_host=spread_host, spread_domain=spread_domain, min_rp=min_rp,
                          max_new_at_risk=max_new_at_risk, anti_affinity=pairs),
        solver=solver, time_limit_s=float(time_limit), seed=seed, deterministic=bool(deterministic),
        skip_invalid_usage=bool(skip_invalid_usage), window_s=window_s,
        start=str(start.path) if isinstance(start, Plan) and start.path else None if start is None or isinstance(start, Plan) else str(start),
    )
    # Before profiling: a wrong option or table fails before the work.
    check_options(goal, weights, context.rules, preset)
    check_solver(solver, goal, context.rules)
    if start is not None and not isinstance(start, Plan):
        start = read_plan(start)
    if preset.sensitivity:
        load_sensitivity(context.sensitivity or DEFAULT_SENSITIVITY, trace.fleet, services=trace.tasks["service"].dropna().unique())
        if context.classes_from:
            read_reference_classes(context.classes_from)
    with interrupt.stoppable():  # a profile cut short is worthless: a stop request here leaves no plan
        problem = problem_from_context(trace, preset, context, profiles, progress=on_profile)
    first = None if start is None else _start_placement(problem, start)
    result = run_solver(problem, solver, time_limit, seed, progress=on_progress, deterministic=bool(deterministic), start=first,
                        executor=executor)
    if result.status == "infeasible":
        names = ", ".join(result.infeasible_tasks[:10]) + (" ..." if len(result.infeasible_tasks) > 10 else "")
        raise InfeasibleError(f"{len(result.infeasible_tasks)} task(s) fit no host under config {preset.name}: {names}; no plan written",
                              result.infeasible_tasks)
    if result.status == "timeout":
        raise NoPlanError(f"{result.solver} found no valid placement within {time_limit:g} s; no plan written")
    return make_plan(problem, result, context, fleet=trace.fleet)


def _start_placement(problem: PlacementProblem, plan: Plan) -> np.ndarray:
    """The host index per task of ``plan``'s placement on ``problem``; :class:`InputError` unless it is a valid start for it."""
    where = f"start plan {plan.path or ''}".rstrip()
    assign, check = check_placement(problem, plan.placement)
    if assign is None:
        raise InputError(f"{where}: {'; '.join(check.messages)}; was it made from this trace?")
    broken = violations(problem, assign)
    if broken:
        raise InputError(f"{where}: its placement breaks a rule of this solve ({'; '.join(broken)}); "
                         "start from a plan made under the same or looser rules (e.g. a smaller --max-moves)")
    return assign


def verify(trace: str | Path | Trace, plan: str | Path | Plan) -> VerifyReport:
    """Check ``plan`` (a plan folder or a :class:`~packer.plan.plan.Plan`) against ``trace`` from the inputs alone (:mod:`packer.plan.verify`)."""
    path = trace.path if isinstance(trace, Trace) else Path(trace)
    return verify_plan(path, plan)


def _check_choice(name: str, value: object, known: Iterable[str]) -> None:
    known = tuple(known)
    if value not in known:
        raise InputError(f"{name} must be one of {', '.join(known)}; got {value!r}")


__all__ = ["Plan", "characterize", "profile", "read_plan", "read_trace", "solve", "verify"]
