"""TCO-vs-SLO sweeps: Table IV's configurations, a ladder of sensitivity weights and the baselines, under one move budget.

A sweep answers "how much cost does each configuration free, and at what SLO risk?"
(colocation paper, Section V-C). It runs, on one trace, with one move budget and one
time limit per solve:

* every configuration of Table IV (``baseline``, ``p99-cpu``, ``p99-mem``, ``p99``,
  ``p99-sens``) with every sensitivity weight of a ladder (default 0, 0.1, 0.3, 1, 3,
  10). The weight multiplies Eq. 4's interference in the objective, so it enters only
  configurations with sensitivity dimensions: a configuration without them is solved
  once and that solve stands for every weight of the ladder (column ``covers``);
* the five baseline policies of :mod:`packer.solvers.baselines` on the ``baseline_config``
  problem (default ``p99-sens``: the same limits and sensitivity-based eligibility the
  optimizer's richest configuration has, so Paragon and Tarcil see sensitivity);
* ``refine`` more weights per configuration with sensitivity, each between the two
  solved ladder points farthest apart on TCO vs tasks at risk
  (:func:`refinement_weight`): the curve gets dense where the trade-off changes;
* with ``no_new_risk`` (the default), every configuration with sensitivity dimensions
  once more at weight 0 under the ``max_new_at_risk = 0`` guard (point
  ``<config>-no-new-risk``, solved by the engine): the cost the budget frees without
  putting one more task at risk. The weight ladder trades cost against Eq. 4's
  interference; this point answers the count the paper reports beside it.

The trace is profiled once and characterized once; every problem is built from those
(:func:`packer.plan.context.problem_from_context` with precomputed profiles and
characterization), and the weight ladder reuses one built problem.

**The yardstick.** Hosts, TCO, WSL, colocation and moves do not depend on the
configuration's limits, but fragmentation, interference, tasks at risk and relative
performance do. To compare points, every placement is also evaluated, with
:mod:`packer.model.metrics`, on one *yardstick* problem: ``p99-sens`` (p99 usage as each
task's load, the sensitivity scores of the characterization on the sweep's
sensitivity basis, recorded in ``sweep.json``). So the table's
fragmentation is capacity left unused by p99 usage on occupied hosts, and the
Baseline configuration's tasks at risk are counted with the same sensitivity scores
(as the paper does for Fig. 12). A requests-only trace (no usage) has no p99 profile
and no characterization: only request-based configurations apply (the others are
listed under ``skipped``), the yardstick is ``baseline`` and tasks at risk are 0 for
every point (nothing measures them).

The sweep folder (written atomically, :func:`packer.io.atomic.atomic_dir`):

* ``plans/<point>/``: one plan folder per solve (:func:`packer.plan.plan.make_plan`, written as it ends), each
  verifiable with ``packer verify TRACE plans/<point>``; its ``summary.json`` is
  measured on the point's own configuration;
* ``sweep.parquet`` and ``sweep.csv``: the TCO-vs-SLO table, one row per solve
  (:data:`TABLE_COLUMNS`; per-dimension columns ``frag_<dim>``,
  ``frag_share_<dim>`` and ``interference_<dim>`` follow the yardstick's dimensions);
* ``sweep.json``: format, options, yardstick, the current placement's metrics, the
  Pareto fronts (TCO vs tasks at risk, the issue's; TCO vs interference), the baseline
  dominance checks on both, reuse counts, skipped configurations, the points whose
  solve failed (``errors``: status ``error`` in the table, no plan) and timings.

Units: TCO cost units; fragmentation in the dimension's unit (cpu reference cores,
mem GiB) and as a fraction of occupied capacity; WSL score-weighted hosts;
interference dimensionless; colocation tasks per host; RP dimensionless (0 = at
goal); times in seconds.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import logging
import math
import shutil
import time
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from packer import interrupt
from packer.io.fleet import Fleet
from packer.parallel import InlineExecutor, capacity, stop_work, wait_some
from packer.io.atomic import atomic_dir, refuse_to_overwrite_input
from packer.solvers.baselines import BASELINES
from packer.errors import InputError, Problem
from packer.model.metrics import evaluate, rp_distribution, violations, weighted_score_loss
from packer.characterization.normalize import DEFAULT_SENSITIVITY_BASIS
from packer.plan.plan import PLACEMENT_FILE, PLACEMENT_STATUSES, SUMMARY_FILE, Plan, json_safe, make_plan
from packer.plan.context import PlanContext, fleet_choice, package_versions
from packer.io.presets import DEFAULT_PRESETS, Preset, load_presets
from packer.model.build import GOALS, GoalWeights, RuleOptions, host_pools, make_goals, make_rules
from packer.model.problem import PlacementProblem
from packer.model.rpf import relative_performance
from packer.characterization.sensitivity import DEFAULT_CLASS_AGGREGATE
from packer.io.trace import Trace, read_json_object, read_parquet_table, read_trace

log = logging.getLogger(__name__)

SWEEP_FORMAT = "packer-sweep/2"
#: Earlier formats read_sweep still reads: /1 kept the move budget in ``options["max_moves"]``, not ``options["rules"]``.
_OLDER_FORMATS = ("packer-sweep/1",)
SWEEP_FILE = "sweep.json"
TABLE_FILE = "sweep.parquet"
CSV_FILE = "sweep.csv"
PLANS_DIR = "plans"

#: Table IV's configurations, in the paper's order.
TABLE_IV_CONFIGS = ("baseline", "p99-cpu", "p99-mem", "p99", "p99-sens")
#: Default ladder of sensitivity weights (weight of Eq. 4's interference against cost units).
DEFAULT_WEIGHTS = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0)
#: Configuration whose problem measures every point (see the module doc), and the one for requests-only traces.
YARDSTICK_CONFIG = "p99-sens"
REQUESTS_YARDSTICK_CONFIG = "baseline"
#: Point kinds: the optimizer on a configuration, or a baseline policy.
OPTIMIZER, BASELINE = "optimizer", "baseline"
#: Columns of the sweep table, before the per-dimension ones (see :func:`table_columns`).
TABLE_COLUMNS = (
    "point", "kind", "config", "weight", "max_new_at_risk", "covers", "solver", "status", "plan",
    "tco", "hosts", "wsl", "colocation", "moves", "tasks_at_risk", "interference",
    "rp_min", "rp_p5", "rp_median", "rp_below_zero",
    "objective", "bound", "gap", "wall_s", "pareto", "pareto_interference",
)


@dataclass(frozen=True)
class SweepOptions:
    """What a sweep runs.

    ``configs``: preset names (Table IV's by default); ``weights``: the ladder of
    sensitivity weights; ``baselines``: baseline solver names (``baseline-*``);
    ``baseline_config``: the configuration the baselines run on (falls back to
    ``baseline`` on a requests-only trace); ``rules``: the move budget, spread limits,
    guards and anti-affinity of every solve (the tasks-at-risk guard binds on the
    configurations with sensitivity, and the ``no-new-risk`` points tighten it to 0);
    ``time_limit_s``: seconds per optimizer solve
    (baselines ignore it); ``solver``: the optimizer (a :data:`packer.solvers.run.SOLVERS`
    name that is not a baseline); ``goal``: ``tco`` or ``hosts``; ``deterministic``: every
    solve counts its time limit as work (``packer solve --deterministic``); the other fields
    as in :class:`packer.plan.context.PlanContext`.
    """

    configs: tuple[str, ...] = TABLE_IV_CONFIGS
    weights: tuple[float, ...] = DEFAULT_WEIGHTS
    baselines: tuple[str, ...] = tuple(BASELINES)
    baseline_config: str = YARDSTICK_CONFIG
    rules: RuleOptions = RuleOptions()
    time_limit_s: float = 60.0
    solver: str = "auto"
    seed: int = 0
    goal: str = "tco"
    fleet: str | None = None
    sensitivity: str | None = None
    presets: str = str(DEFAULT_PRESETS)
    no_new_risk: bool = True
    sensitivity_basis: str = DEFAULT_SENSITIVITY_BASIS
    class_scores: str = DEFAULT_CLASS_AGGREGATE
    classes_from: str | None = None
    refine: int = 5
    deterministic: bool = False


@dataclass(frozen=True)
class SweepPoint:
    """One solve of a sweep.

    ``weight``: the sensitivity weight its problem uses, ``None`` when the
    configuration has no sensitivity dimensions (the weight does not enter);
    ``covers``: the ladder weights this solve stands for; ``max_new_at_risk``: the
    guard of :class:`packer.model.build.RuleOptions` (``None``: none).
    """

    name: str
    kind: str
    config: str
    weight: float | None
    solver: str
    covers: tuple[float, ...]
    max_new_at_risk: int | None = None


@dataclass(frozen=True)
class SweepProgress:
    """Reported before (``row`` is None) and after each solve: ``step`` of ``steps`` (1-based); ``resumed``: the plan of an earlier run."""

    step: int
    steps: int
    point: SweepPoint
    row: dict[str, Any] | None = None
    resumed: bool = False


@dataclass
class Sweep:
    """A sweep folder read back (:func:`read_sweep`) or just written (:func:`run_sweep`)."""

    path: Path
    table: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)


def weight_label(weight: float) -> str:
    """``0.1`` -> ``"0.1"``, ``1.0`` -> ``"1"``: a weight as point names and tables show it."""
    return f"{weight:g}"


def plan_points(options: SweepOptions, presets: dict[str, Preset], has_usage: bool) -> tuple[list[SweepPoint], dict[str, str]]:
    """The solves a sweep runs, and the configurations it skips (name -> reason).

    One point per configuration without sensitivity dimensions (it covers every
    weight), one per weight for a configuration with them, then one per baseline
    policy. On a trace without usage, configurations that need p99 profiles or
    sensitivity are skipped.
    """
    unknown = [c for c in (*options.configs, options.baseline_config) if c not in presets]
    if unknown:
        raise InputError(f"unknown config(s) {', '.join(unknown)}; known: {', '.join(presets)}")
    bad_baselines = [b for b in options.baselines if b not in BASELINES]
    if bad_baselines:
        raise InputError(f"unknown baseline(s) {', '.join(bad_baselines)}; known: {', '.join(BASELINES)}")
    if options.solver in BASELINES:
        raise InputError(f"--solver is the optimizer; '{options.solver}' is a baseline (baselines run anyway)")
    if options.goal not in GOALS or options.goal == "fair":
        raise InputError(f"a sweep trades TCO against SLO risk: --goal must be tco or hosts, got '{options.goal}'")
    # The rules the baseline policies cannot keep, as the rules declare (anti-affinity, which they keep, needs the trace's services).
    unhonoured = [rule.name for rule in make_rules(dataclasses.replace(options.rules, anti_affinity=())) if "baselines" not in rule.strategies]
    if options.baselines and unhonoured:
        raise InputError(f"the baseline policies do not honour the {' or the '.join(unhonoured)}; run the sweep with --no-baselines "
                         "or without those rules")
    if options.refine < 0:
        raise InputError(f"--refine must be >= 0, got {options.refine}")
    bad_weights = [w for w in options.weights if not (math.isfinite(w) and w >= 0)]
    if bad_weights or not options.weights:
        raise InputError(f"sensitivity weights must be finite and >= 0 (at least one), got {list(options.weights)}")
    weights = tuple(dict.fromkeys(float(w) for w in options.weights))
    skipped: dict[str, str] = {}
    points: list[SweepPoint] = []
    for name in dict.fromkeys(options.configs):
        preset = presets[name]
        if not has_usage and _needs_usage(preset):
            skipped[name] = "the trace has no usage: p99 limits and sensitivity need usage profiles (only request-based configurations apply)"
            continue
        if preset.sensitivity:
            points += [SweepPoint(f"{name}-w{weight_label(w)}", OPTIMIZER, name, w, options.solver, (w,)) for w in weights]
            if options.no_new_risk:
                points.append(SweepPoint(f"{name}-no-new-risk", OPTIMIZER, name, 0.0, "engine", (), max_new_at_risk=0))
        else:
            points.append(SweepPoint(name, OPTIMIZER, name, None, options.solver, weights))
    base_config = options.baseline_config if has_usage or not _needs_usage(presets[options.baseline_config]) else REQUESTS_YARDSTICK_CONFIG
    points += [SweepPoint(b, BASELINE, base_config, None, b, ()) for b in dict.fromkeys(options.baselines)]
    return points, skipped


def _needs_usage(preset: Preset) -> bool:
    return bool(preset.percentiles or preset.sensitivity)


def pareto_front(tco: Any, risk: Any) -> np.ndarray:
    """(N,) bool: the points no other point dominates on (TCO, tasks at risk), both to minimize.

    Point j dominates point i when ``tco[j] <= tco[i]`` and ``risk[j] <= risk[i]`` with
    one of them strictly lower. Points with a NaN coordinate (no placement) are never
    on the front and dominate nothing; identical points are all on the front.
    """
    tco, risk = np.asarray(tco, dtype=float), np.asarray(risk, dtype=float)
    valid = ~(np.isnan(tco) | np.isnan(risk))
    le = (tco[None, :] <= tco[:, None]) & (risk[None, :] <= risk[:, None])
    lt = (tco[None, :] < tco[:, None]) | (risk[None, :] < risk[:, None])
    dominated = (le & lt & valid[None, :]).any(axis=1)
    return valid & ~dominated


def baseline_dominance(table: pd.DataFrame, risk: str = "tasks_at_risk") -> pd.DataFrame:
    """For each baseline point, whether some optimizer point has lower TCO and no more risk.

    ``table``: the sweep table (``point``, ``kind``, ``tco`` and the ``risk`` column:
    ``tasks_at_risk``, the issue's check, or ``interference``). Returns one row per
    baseline: ``baseline``, ``tco``, ``<risk>``, ``dominated`` (``<NA>`` when the
    baseline has no placement), and the dominating optimizer point with the lowest TCO
    (ties: least risk) as ``by``, ``by_tco``, ``by_<risk>`` (empty when none dominates).
    """
    opt = table[(table["kind"] == OPTIMIZER) & table["tco"].notna() & table[risk].notna()]
    opt = opt.sort_values(["tco", risk], kind="stable")
    base = table[table["kind"] == BASELINE]
    tco_o, risk_o = opt["tco"].to_numpy(dtype=float), opt[risk].to_numpy(dtype=float)
    tco_b, risk_b = base["tco"].to_numpy(dtype=float), base[risk].to_numpy(dtype=float)
    wins = (tco_o[None, :] < tco_b[:, None]) & (risk_o[None, :] <= risk_b[:, None])
    placed = ~(np.isnan(tco_b) | np.isnan(risk_b))
    first = np.where(wins.any(axis=1), wins.argmax(axis=1), -1)
    names = opt["point"].to_numpy(dtype=object)
    return pd.DataFrame({
        "baseline": base["point"].to_numpy(dtype=object),
        "tco": tco_b,
        risk: risk_b,
        "dominated": pd.Series(first >= 0, dtype="boolean").mask(~placed),
        "by": np.where(first >= 0, names[np.maximum(first, 0)] if len(names) else "", ""),
        "by_tco": np.where(first >= 0, tco_o[np.maximum(first, 0)] if len(tco_o) else np.nan, np.nan),
        f"by_{risk}": np.where(first >= 0, risk_o[np.maximum(first, 0)] if len(risk_o) else np.nan, np.nan),
    })


#: Refinement stops once adjacent ladder points are closer than this on the range-scaled (TCO, tasks at risk) plane.
REFINE_MIN_GAP = 0.05


def refinement_weight(table: pd.DataFrame, config: str) -> float | None:
    """The next sensitivity weight worth solving on ``config``'s ladder, or None.

    Among the solved weight points of ``config`` (optimizer rows with a weight and
    no ``max_new_at_risk`` guard), sorted by weight, the adjacent pair whose points
    lie farthest apart, with TCO and tasks at risk each divided by its range over
    the ladder, gets a weight between them: the geometric mean, or a third of the
    upper weight when the lower is 0, rounded to two significant digits. None when
    every gap is below :data:`REFINE_MIN_GAP` or the new weight is already solved.
    This is the adaptive weighted-sum way of filling a Pareto curve: weights are
    spent where the trade-off changes, not where the plan stays the same.
    """
    if table.empty or "tco" not in table.columns:
        return None
    ladder = table[(table["kind"] == OPTIMIZER) & (table["config"] == config) & table["weight"].notna()
                   & table["max_new_at_risk"].isna() & table["tco"].notna()].sort_values("weight")
    if len(ladder) < 2:
        return None
    scaled = []
    for column in ("tco", "tasks_at_risk"):
        values = ladder[column].to_numpy(dtype=float)
        spread = values.max() - values.min()
        scaled.append(np.diff(values) / spread if spread > 0 else np.zeros(len(values) - 1))
    gaps = np.hypot(*scaled)
    weights = ladder["weight"].to_numpy(dtype=float)
    for i in np.argsort(-gaps, kind="stable"):
        if gaps[i] < REFINE_MIN_GAP:
            return None
        low, high = weights[i], weights[i + 1]
        middle = high / 3 if low == 0 else math.sqrt(low * high)
        middle = float(f"{middle:.2g}")
        if low < middle < high and not np.isclose(weights, middle).any():
            return middle
    return None


def point_metrics(yardstick: PlacementProblem, assign: np.ndarray, arch_score: np.ndarray) -> dict[str, float]:
    """A placement's row metrics measured on the yardstick problem, all with :mod:`packer.model.metrics`.

    ``tco`` (cost units), ``hosts``, ``wsl`` (Eq. 3, score-weighted hosts; ``arch_score``
    in ``yardstick.arch_names`` order), ``colocation`` (tasks/host), ``moves``,
    ``tasks_at_risk``, ``interference`` (Eq. 4 summed over dimensions) and
    ``interference_<dim>``, ``frag_<dim>`` (Eq. 2, the dimension's unit) and
    ``frag_share_<dim>`` (fraction of occupied capacity), ``rp_min``, ``rp_p5``,
    ``rp_median`` (dimensionless) and ``rp_below_zero`` (tasks).
    """
    ev = evaluate(yardstick, assign)
    rp = rp_distribution(relative_performance(yardstick, assign))
    row: dict[str, float] = {
        "tco": ev.tco, "hosts": ev.hosts, "wsl": weighted_score_loss(yardstick, assign, arch_score), "colocation": ev.colocation,
        "moves": ev.moves, "tasks_at_risk": ev.tasks_at_risk, "interference": float(sum(ev.interference.values())),
        "rp_min": rp["min"], "rp_p5": rp["p5"], "rp_median": rp["median"], "rp_below_zero": rp["below_zero"],
    }
    row.update({f"interference_{d}": v for d, v in ev.interference.items()})
    row.update({f"frag_{d}": v for d, v in ev.fragmentation.items()})
    row.update({f"frag_share_{d}": v for d, v in ev.fragmentation_share.items()})
    return row


def table_columns(table: pd.DataFrame) -> list[str]:
    """:data:`TABLE_COLUMNS` then the per-dimension columns present (fragmentation, then interference)."""
    extra = [c for c in table.columns if c.startswith("frag_") and not c.startswith("frag_share_")]
    extra += [c for c in table.columns if c.startswith("frag_share_")]
    extra += [c for c in table.columns if c.startswith("interference_")]
    return [c for c in TABLE_COLUMNS if c in table.columns] + extra


class _Problems:
    """Builds each configuration's problem once, from one profiling run and one characterization."""

    def __init__(self, trace: Trace, trace_path: Path, options: SweepOptions, presets: dict[str, Preset],
                 usage_progress: Callable[[int], None] | None):
        self.trace, self.options, self.presets = trace, options, presets
        self.base_context = PlanContext(
            trace=str(trace_path), fleet=fleet_choice(options.fleet, trace_path), presets=options.presets, sensitivity=options.sensitivity,
            rules=options.rules, time_limit_s=options.time_limit_s, seed=options.seed, goal=options.goal, deterministic=options.deterministic,
            sensitivity_basis=options.sensitivity_basis, class_scores=options.class_scores, classes_from=options.classes_from,
        )
        self.services = trace.tasks["service"].to_numpy(dtype=object)
        self.pools = host_pools(trace.hosts)
        self.timings: dict[str, float] = {}
        self.profiles = self.characterization = None
        if trace.usage_path is not None:
            from packer.characterization.profile import profile_tasks

            start = time.perf_counter()
            ctx = self.base_context
            with interrupt.stoppable():  # a profile cut short is worthless: a stop request here leaves no sweep
                self.profiles = profile_tasks(trace, ctx.percentiles, ctx.window_s, skip_invalid=ctx.skip_invalid_usage,
                                              progress=usage_progress).profiles
            self.timings["profile_s"] = time.perf_counter() - start
        self._built: dict[str, PlacementProblem] = {}

    def context(self, point: SweepPoint) -> PlanContext:
        weight = GoalWeights().sensitivity if point.weight is None else point.weight
        base = self.base_context
        # The user's tasks-at-risk guard binds where there is sensitivity to count risk with; a no-new-risk point tightens it.
        guard = point.max_new_at_risk
        if guard is None and self.presets[point.config].sensitivity:
            guard = base.rules.max_new_at_risk
        return dataclasses.replace(base, config=point.config, solver=point.solver, weights=GoalWeights(sensitivity=weight),
                                   rules=dataclasses.replace(base.rules, max_new_at_risk=guard))

    def problem(self, point: SweepPoint) -> PlacementProblem:
        """The point's problem: its configuration's (built once) with the point's goals and rules."""
        context = self.context(point)
        if point.config not in self._built:
            preset = self.presets[point.config]
            if preset.sensitivity and self.characterization is None:
                self._characterize()
            start = time.perf_counter()
            from packer.plan.context import problem_from_context

            self._built[point.config] = problem_from_context(self.trace, preset, context, self.profiles, characterization=self.characterization)
            self.timings["build_s"] = self.timings.get("build_s", 0.0) + time.perf_counter() - start
        return self._built[point.config].with_(goals=make_goals(context.goal, context.weights), rules=make_rules(context.rules, self.services, self.pools))

    def score_sources(self) -> dict[str, int]:
        """Tasks per sensitivity score source (``service``, ``class``, ``nearest-class``, ``none``); empty without a characterization."""
        if self.characterization is None:
            return {}
        counts = self.characterization.tasks["score_source"].value_counts()
        return {name: int(counts.get(name, 0)) for name in ("service", "class", "nearest-class", "none")}

    def _characterize(self) -> None:
        from packer.plan.context import characterize_from_context

        start = time.perf_counter()
        self.characterization = characterize_from_context(self.trace, self.profiles, self.base_context)
        self.timings["characterize_s"] = time.perf_counter() - start


def _row_head(point: SweepPoint) -> dict[str, Any]:
    """The columns of a point's row that the point itself gives."""
    return {"point": point.name, "kind": point.kind, "config": point.config, "weight": np.nan if point.weight is None else point.weight,
            "max_new_at_risk": np.nan if point.max_new_at_risk is None else point.max_new_at_risk,
            "covers": ",".join(weight_label(w) for w in point.covers), "solver": point.solver, "plan": ""}


def solve_point(point: SweepPoint, problem: PlacementProblem, context: PlanContext, fleet: Fleet, yardstick: PlacementProblem,
                arch_score: np.ndarray) -> tuple[dict[str, Any], Plan | None]:
    """Solve one point (in this process or a worker's): its table row and its plan (None without a placement).

    The row is measured on ``yardstick`` (``arch_score`` per architecture of it, for the
    WSL). A solver error (a bug in one point must not throw away a long sweep) gives a
    row of status ``error`` with the message under ``"error"``, the traceback in the log.
    """
    from packer.solvers.run import run_solver

    if not (np.array_equal(problem.task_ids, yardstick.task_ids) and np.array_equal(problem.host_ids, yardstick.host_ids)):
        raise RuntimeError(f"config {point.config} orders tasks or hosts differently from the yardstick")
    row, plan = _row_head(point), None
    started = time.perf_counter()
    try:
        result = run_solver(problem, point.solver, context.time_limit_s, context.seed, deterministic=context.deterministic)
        row.update(solver=result.solver, status=result.status, wall_s=result.wall_s)
        if result.status in PLACEMENT_STATUSES:
            plan = make_plan(problem, result, context, fleet=fleet)
            summary = plan.summary
            row.update(plan=f"{PLANS_DIR}/{point.name}", objective=summary["objective"]["total"], bound=summary["bound"], gap=summary["gap"])
            row.update(point_metrics(yardstick, result.assign, arch_score))
        else:
            log.warning("%s: solver status %s, no plan (%s)", point.name, result.status, ", ".join(result.infeasible_tasks[:5]))
    except (ValueError, RuntimeError, ArithmeticError, IndexError) as exc:
        log.exception("%s: the solve failed", point.name)
        row.update(status="error", wall_s=time.perf_counter() - started, error=f"{type(exc).__name__}: {exc}")
    return row, plan


def run_sweep(
    trace_path: str | Path,
    out: str | Path,
    options: SweepOptions = SweepOptions(),
    progress: Callable[[SweepProgress], None] | None = None,
    usage_progress: Callable[[int], None] | None = None,
    resume: bool = False,
    executor: Executor | None = None,
) -> Sweep:
    """Run the sweep ``options`` describe on the trace at ``trace_path`` and write the sweep folder ``out`` atomically.

    ``progress`` is called before and after each solve; ``usage_progress`` with usage
    rows read while profiling. Returns the written :class:`Sweep`.

    A stop request (:mod:`packer.interrupt`, ``packer sweep`` under SIGINT/SIGTERM) ends the
    sweep after the solve under way, which keeps its best plan: the points solved are
    written, with ``interrupted`` and the points ``not_run`` in ``sweep.json``. Before the
    first point is solved it raises ``KeyboardInterrupt`` and writes nothing.

    ``resume``: reuse the plans an earlier run of the same sweep (same options) left in
    ``out`` — e.g. an interrupted one — for the points whose plan was solved on the same
    context, and solve only the others; ``sweep.json`` lists them under ``resumed``.
    :class:`InputError` when ``out`` holds a sweep of other options.

    ``executor``: where the points are solved (:mod:`packer.parallel`; default: here, one
    after the other). With a process pool, independent points run side by side and a
    ladder's refinement starts once every point of the ladder is solved, so the weights,
    plans and table are those of the serial order (up to timings; with
    ``deterministic``, identical). A stop request stops the running points (each keeps
    its best plan) and starts no more.
    """
    started = time.perf_counter()
    trace_path, out = Path(trace_path), Path(out)
    refuse_to_overwrite_input(out, trace_path)
    trace = read_trace(trace_path, options.fleet)
    presets = load_presets(options.presets)
    has_usage = trace.usage_path is not None
    earlier = _earlier_sweep(out, options) if resume else None
    points, skipped = plan_points(options, presets, has_usage)
    problems = _Problems(trace, trace_path, options, presets, usage_progress)
    yardstick_config = YARDSTICK_CONFIG if has_usage else REQUESTS_YARDSTICK_CONFIG
    yardstick = problems.problem(SweepPoint("yardstick", OPTIMIZER, yardstick_config, None, "", ()))
    arch_score = trace.fleet.archs["score"].reindex(yardstick.arch_names).to_numpy(dtype=float)
    rows: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    resumed: list[str] = []
    ladders = [name for name in dict.fromkeys(options.configs) if any(p.config == name and p.weight is not None for p in points)]
    refinements: dict[str, list[SweepPoint]] = {config: [] for config in ladders}
    total = len(points) + options.refine * len(ladders)
    executor = executor or InlineExecutor()

    def report(point: SweepPoint, row: dict[str, Any] | None = None, was_resumed: bool = False) -> None:
        if progress:
            progress(SweepProgress(len(rows) + (row is None), total, point, row, resumed=was_resumed))

    def resume_point(point: SweepPoint, tmp: Path) -> bool:
        """Reuse the earlier run's plan of ``point`` if there is a valid one (True), else False."""
        reused = None if earlier is None else _earlier_plan(earlier, point, problems.context(point))
        assign = None if reused is None else _valid_placement(problems.problem(point), reused)
        if assign is None:
            return False
        report(point)
        shutil.copytree(reused, tmp / PLANS_DIR / point.name)
        summary = json.loads((reused / SUMMARY_FILE).read_text())
        row = _row_head(point)
        row.update(solver=summary["solver"]["name"], status=summary["status"], wall_s=summary["runtime_s"], plan=f"{PLANS_DIR}/{point.name}",
                   objective=summary["objective"]["total"], bound=summary["bound"], gap=summary["gap"])
        row.update(point_metrics(yardstick, assign, arch_score))
        resumed.append(point.name)
        rows[point.name] = row
        report(point, row, was_resumed=True)
        return True

    def next_refinement(config: str) -> SweepPoint | None:
        """The next refinement of ``config``'s ladder once every point of it is solved (the serial order's weights), else None."""
        if len(refinements[config]) >= options.refine:
            return None
        weight = refinement_weight(pd.DataFrame(list(rows.values())), config)
        if weight is None:
            return None
        point = SweepPoint(f"{config}-w{weight_label(weight)}", OPTIMIZER, config, weight, options.solver, (weight,))
        refinements[config].append(point)
        return point

    with atomic_dir(out) as tmp:
        queue = list(points)
        running: dict[Future, SweepPoint] = {}
        growing = dict.fromkeys(ladders, True)  # the ladders whose refinements may go on

        def grow() -> bool:
            """Queue the next refinement of each ladder whose points are all solved; True if one was queued."""
            grown = False
            for config in ladders:
                # A ladder's next weight depends on all its points: the serial order's weights, whatever finished first.
                if growing[config] and not any(p.config == config for p in (*queue, *running.values())):
                    point = next_refinement(config)
                    growing[config] = point is not None
                    if point is not None:
                        queue.append(point)
                        grown = True
            return grown

        while True:
            if interrupt.stop_requested():
                stop_work(executor, running)
            else:
                grow()
                while queue and len(running) < capacity(executor) and not interrupt.stop_requested():
                    point = queue.pop(0)
                    if not resume_point(point, tmp):
                        report(point)
                        running[executor.submit(solve_point, point, problems.problem(point), problems.context(point), trace.fleet,
                                                yardstick, arch_score)] = point
            if not running:
                if interrupt.stop_requested() or not (queue or grow()):
                    break
                continue
            for future in wait_some(running):
                point = running.pop(future)
                try:
                    row, plan = future.result()
                except concurrent.futures.CancelledError:  # cancelled, or its worker's call would have started after the stop request
                    continue
                if plan is not None:
                    plan.write(tmp / PLANS_DIR / point.name)
                if "error" in row:
                    errors[point.name] = row.pop("error")
                rows[point.name] = row
                report(point, row)
        if not rows:  # stopped before a point was solved: nothing worth writing
            raise KeyboardInterrupt
        # Rows in the serial order (the points, then each ladder's refinements), whatever order the workers finished in.
        points += [point for config in ladders for point in refinements[config]]
        not_run = [p.name for p in points if p.name not in rows]
        points = [p for p in points if p.name in rows]
        table = _finish_table([rows[p.name] for p in points])
        current = point_metrics(yardstick, yardstick.current, arch_score)
        dominance = {risk: baseline_dominance(table, risk) for risk in ("tasks_at_risk", "interference")}
        # Grid points: (configuration, weight) pairs plus one per guarded point and per baseline; a solve covering several weights stands for several.
        grid = sum(max(len(p.covers), 1) for p in points)
        notes: list[str] = []
        meta = json_safe({
            "format": SWEEP_FORMAT,
            "trace": str(trace_path.resolve()),
            "options": _options_record(options),
            "yardstick": yardstick_config,
            "has_usage": has_usage,
            "n_tasks": yardstick.n_tasks,
            "n_hosts": yardstick.n_hosts,
            "sens_dims": list(yardstick.sens_dims),
            "sensitivity_basis": yardstick.sens_basis if yardstick.sens_dims else None,
            "score_sources": problems.score_sources(),
            "current": current,
            "points": [p.name for p in points],
            "interrupted": interrupt.stop_requested(),
            "not_run": not_run,
            "resumed": resumed,
            "skipped": skipped,
            "errors": errors,
            "pareto": table.loc[table["pareto"], "point"].tolist(),
            "pareto_interference": table.loc[table["pareto_interference"], "point"].tolist(),
            "dominance": _records(dominance["tasks_at_risk"]),
            "dominance_interference": _records(dominance["interference"]),
            "grid_points": grid,
            "solves": len(points),
            "solves_reused": grid - len(points),
            "timings": {**problems.timings, "solves_s": float(table.loc[~table["point"].isin(resumed), "wall_s"].sum()), "total_s": time.perf_counter() - started},
            "versions": package_versions(),
        }, notes)
        meta["notes"] = notes
        pq.write_table(pa.Table.from_pandas(table, preserve_index=False), tmp / TABLE_FILE)
        table.to_csv(tmp / CSV_FILE, index=False)
        (tmp / SWEEP_FILE).write_text(json.dumps(meta, indent=2, allow_nan=False) + "\n")
    log.info("sweep written to %s: %d solves in %.1f s", out, len(points), meta["timings"]["total_s"])
    return Sweep(out, table, meta)


def _options_record(options: SweepOptions) -> dict[str, Any]:
    """``options`` as ``sweep.json`` records them (the presets path made absolute)."""
    return {**dataclasses.asdict(options), "presets": str(Path(options.presets).resolve())}


def _earlier_sweep(out: Path, options: SweepOptions) -> Path | None:
    """``out`` when it holds a sweep of ``options`` to resume (None when there is none); :class:`InputError` for another sweep's."""
    meta_file = out / SWEEP_FILE
    if not meta_file.exists():
        return None
    recorded = read_json_object(meta_file).get("options") or {}
    wanted = json_safe(_options_record(options), [])
    # An option a sweep of an earlier packer did not record had its default then.
    defaults = json_safe(_options_record(SweepOptions()), [])
    differ = sorted(key for key in wanted if recorded.get(key, defaults[key]) != wanted[key])
    if differ:
        raise InputError([Problem(str(meta_file), "options", f"the sweep there was run with other options ({', '.join(differ)}); "
                                  "--resume reuses only the same sweep's plans: drop --resume or choose another --out", 0)])
    return out


def _earlier_plan(earlier: Path, point: SweepPoint, context: PlanContext) -> Path | None:
    """The plan folder an earlier run of the sweep left for ``point``, if it was solved on ``context`` (else None)."""
    folder = earlier / PLANS_DIR / point.name
    if not (folder / SUMMARY_FILE).exists() or not (folder / PLACEMENT_FILE).exists():
        return None
    recorded = dict(read_json_object(folder / SUMMARY_FILE).get("context") or {})
    wanted = context.to_dict()
    recorded.pop("versions", None)
    wanted.pop("versions", None)
    return folder if json.loads(json.dumps(recorded)) == json.loads(json.dumps(wanted, default=str)) else None


def _valid_placement(problem: PlacementProblem, plan: Path) -> np.ndarray | None:
    """The placement of the plan folder ``plan`` on ``problem`` if it is valid there (the trace may have changed since), else None."""
    from packer.plan.verify import check_placement

    assign, _ = check_placement(problem, pd.read_parquet(plan / PLACEMENT_FILE))
    if assign is None or violations(problem, assign):
        log.warning("%s: the earlier plan is not a valid placement of the trace now; solving the point again", plan.name)
        return None
    return assign


def _finish_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The sweep table from the rows: numeric columns as floats, the Pareto flag, columns in order."""
    table = pd.DataFrame(rows)
    for column in TABLE_COLUMNS:
        if column not in table.columns:
            table[column] = np.nan
    table["pareto"] = pareto_front(table["tco"], table["tasks_at_risk"])
    table["pareto_interference"] = pareto_front(table["tco"], table["interference"])
    table = table[table_columns(table)]
    text = ("point", "kind", "config", "covers", "solver", "status", "plan", "pareto", "pareto_interference")
    return table.astype({c: float for c in table.columns if c not in text})


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of ``frame`` as dicts with missing values as None (JSON null)."""
    return frame.astype(object).where(frame.notna(), None).to_dict(orient="records")


@dataclass(frozen=True)
class DirectionCheck:
    """One of the colocation paper's qualitative findings checked on a sweep: ``passed`` and the numbers behind it."""

    name: str
    passed: bool
    detail: str


#: Share of tasks at risk before any move inside which a pool shows the TCO-vs-SLO trade-off (issue 10).
RISK_SHARE_RANGE = (0.05, 0.50)


def paper_directions(sweep: Sweep, min_front: int = 4) -> list[DirectionCheck]:
    """The paper's directions at a move budget (Section V-C), checked on ``sweep``'s table.

    P99 frees more TCO and more hosts than Baseline, with less CPU and memory
    fragmentation (as a share of occupied capacity) and more tasks at risk; some P99
    Sens weight (the ladder's points, not the no-new-risk guard) has fewer tasks at
    risk than Baseline while occupying more hosts than P99; the TCO-vs-tasks-at-risk
    front has at least ``min_front`` distinct points; and before any move the tasks
    at risk are a share of :data:`RISK_SHARE_RANGE` (a pool where the trade-off can
    show). A check whose points are missing from the sweep fails, saying so.
    """
    table, current = sweep.table.set_index("point"), sweep.meta["current"]
    n_tasks = sweep.meta["n_tasks"]
    low, high = RISK_SHARE_RANGE
    share = current["tasks_at_risk"] / n_tasks
    checks = [DirectionCheck("tasks at risk before any move", low <= share <= high,
                             f"{current['tasks_at_risk']:,} of {n_tasks:,} ({share:.1%}; wanted {low:.0%}-{high:.0%})")]
    if not {"baseline", "p99"} <= set(table.index) or table.loc[["baseline", "p99"], "tco"].isna().any():
        return [*checks, DirectionCheck("P99 against Baseline", False, "the sweep has no placed baseline and p99 points")]
    base, p99 = table.loc["baseline"], table.loc["p99"]
    for column, label, fmt in (("tco", "TCO", "{:,.1f}"), ("hosts", "hosts", "{:,.0f}"), ("frag_share_cpu", "CPU fragmentation", "{:.2%}"),
                               ("frag_share_mem", "memory fragmentation", "{:.2%}")):
        if column in table.columns:
            checks.append(DirectionCheck(f"P99 {label} below Baseline's", bool(p99[column] < base[column]),
                                         f"P99 {fmt.format(p99[column])} vs Baseline {fmt.format(base[column])}"))
    checks.append(DirectionCheck("P99 tasks at risk above Baseline's", bool(p99["tasks_at_risk"] > base["tasks_at_risk"]),
                                 f"P99 {p99['tasks_at_risk']:,.0f} vs Baseline {base['tasks_at_risk']:,.0f}"))
    sens = table[(table["kind"] == OPTIMIZER) & (table["config"] == YARDSTICK_CONFIG) & table["max_new_at_risk"].isna() & table["tco"].notna()]
    safer = sens[(sens["tasks_at_risk"] < base["tasks_at_risk"]) & (sens["hosts"] > p99["hosts"])]
    best = sens.sort_values(["tasks_at_risk", "tco"]).head(1)
    detail = (f"{best.index[0]}: tasks at risk {best['tasks_at_risk'].iloc[0]:,.0f} vs Baseline {base['tasks_at_risk']:,.0f}; "
              f"hosts {best['hosts'].iloc[0]:,.0f} vs P99 {p99['hosts']:,.0f}") if len(best) else "no P99 Sens point placed"
    checks.append(DirectionCheck("a P99 Sens weight below Baseline's tasks at risk, above P99's hosts", not safer.empty,
                                 (f"{', '.join(safer.index)}; " if len(safer) else "none; best ") + detail))
    front = table[table["pareto"]].drop_duplicates(["tco", "tasks_at_risk"])
    checks.append(DirectionCheck(f"at least {min_front} distinct points on the TCO-vs-tasks-at-risk front", len(front) >= min_front,
                                 f"{len(front)}: " + ", ".join(f"{name} ({r['tco']:,.0f}, {r['tasks_at_risk']:,.0f})"
                                                                for name, r in front.sort_values("tco").iterrows())))
    return checks


def read_sweep(path: str | Path) -> Sweep:
    """Read a sweep folder written by :func:`run_sweep`; a missing or unreadable part raises :class:`InputError`."""
    path = Path(path)
    meta_file, table_file = path / SWEEP_FILE, path / TABLE_FILE
    incomplete = "file not found (not a sweep folder, or an incomplete one)"
    if not table_file.exists():
        raise InputError([Problem(str(table_file), "", incomplete, 0)])
    meta = read_json_object(meta_file, incomplete)
    if meta.get("format") in _OLDER_FORMATS and isinstance(meta.get("options"), dict):
        options = dict(meta["options"])
        rules = dataclasses.asdict(RuleOptions(max_moves=options.pop("max_moves", RuleOptions().max_moves)))
        meta = {**meta, "format": SWEEP_FORMAT, "options": {**options, "rules": rules}}
    if meta.get("format") != SWEEP_FORMAT:
        raise InputError([Problem(str(meta_file), "format", f"expected {SWEEP_FORMAT}, got {meta.get('format')}", 0)])
    table = read_parquet_table(table_file, TABLE_COLUMNS)
    return Sweep(path, table, meta)
