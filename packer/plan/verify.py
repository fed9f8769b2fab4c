"""An independent check of a plan against its trace: is the plan valid, and is its summary true?

:func:`verify_plan` uses nothing a solver computed except the plan's own tables and
summary: it re-reads the trace, recomputes the profiles (and, for a sensitivity
config, the characterization) with the options recorded in ``summary.json``'s
``context``, rebuilds the :class:`~packer.model.problem.PlacementProblem` with
:func:`packer.plan.context.problem_from_context` (its rules and goals included), and checks

1. ``placement``: every task of the trace is placed exactly once, on a host of the trace;
2. ``rules``: :func:`packer.model.metrics.violations` (every rule of the problem: capacity,
   eligibility, pins, move budget, spread, guards, anti-affinity, ...);
3. ``moves``: the move list is exactly the tasks whose host changed, with ``from_host``
   their current host and ``to_host`` their host in the placement;
4. ``move order``: the steps replay without exceeding any capacity (:func:`packer.plan.moves.check_move_order`);
5. ``temporary moves``: the summary's move and temporary-move counts match the move list;
6. ``summary``: objective terms, metrics before/after, the per-architecture and
   per-type tables, the fleet change, moves by architecture and the relative-performance
   distributions recomputed with
   :func:`packer.plan.plan.plan_metrics` (one implementation: :mod:`packer.model.metrics`) equal the
   summary's to a relative tolerance of :data:`RELATIVE_TOLERANCE`, and the gap is
   :func:`packer.plan.plan.relative_gap` of the recomputed objective and the summary's bound;
7. ``status and bound``: the status, the bound, the solver's ``interrupted`` / ``timed_out``
   flags and the engine's bound details, re-derived by :func:`packer.plan.claims.check_claims`
   (``optimal`` only when verify's own lower bound meets the objective; the bound recomputed
   where the solve's method is deterministic).

What verify cannot re-derive (a solver's dual bound above verify's own, the runtime, the
creation time, the flags where nothing contradicts them) is listed in ``claims``: reported,
never silently accepted. The plan is valid when checks 1-4 pass and the summary is true
when 5-7 pass.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from packer.model.metrics import violations
from packer.plan.claims import check_claims
from packer.plan.moves import check_move_order
from packer.plan.plan import OLDER_FORMATS, Plan, plan_metrics, read_plan, relative_gap
from packer.plan.context import PlanContext, problem_from_context, resolve_fleet
from packer.io.presets import Preset, get_preset
from packer.model.problem import PlacementProblem
from packer.io.trace import Trace, read_trace

log = logging.getLogger(__name__)

#: Relative tolerance when comparing the summary's numbers with recomputed ones (absolute 1e-9 near zero).
RELATIVE_TOLERANCE = 1e-6
_ABSOLUTE_TOLERANCE = 1e-9
#: Checks of the plan itself; the others check its summary.
PLAN_CHECKS = ("placement", "rules", "moves", "move order")
#: Mismatches listed per check before the rest are only counted.
_MAX_LISTED = 10


@dataclass(frozen=True)
class Check:
    """One verification check: its name, whether it passed, and what was found."""

    name: str
    passed: bool
    messages: tuple[str, ...] = ()


@dataclass
class VerifyReport:
    """Result of :func:`verify_plan`: ``checks`` in order, ``notes`` that are not failures, ``claims`` of the summary verify could not re-derive."""

    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the plan is valid and its summary true (every check passed)."""
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def plan_valid(self) -> bool:
        """True when every check of :data:`PLAN_CHECKS` passed (whatever the summary says)."""
        return all(c.passed for c in self.checks if c.name in PLAN_CHECKS)


def _listed(items: list[str]) -> tuple[str, ...]:
    if len(items) <= _MAX_LISTED:
        return tuple(items)
    return (*items[:_MAX_LISTED], f"... and {len(items) - _MAX_LISTED} more")


def _examples(values) -> str:
    values = list(values)
    more = ", ..." if len(values) > 5 else ""
    return ", ".join(str(v) for v in values[:5]) + more


def rebuild_problem(trace: Trace, preset: Preset, context: PlanContext) -> PlacementProblem:
    """The problem a plan was solved on, from the trace and the plan's recorded options alone."""
    return problem_from_context(trace, preset, context)


def check_placement(problem: PlacementProblem, placement: pd.DataFrame) -> tuple[np.ndarray | None, Check]:
    """Every task of the problem once in ``placement`` (``task_id``, ``host_id``), on a known host.

    Returns the host index per task (``None`` when the placement is unusable) and the check.
    """
    task_ids = placement["task_id"].astype("string")
    host_ids = placement["host_id"].astype("string")
    found: list[str] = []
    nulls = (task_ids.isna() | host_ids.isna()).to_numpy()
    if nulls.any():
        found.append(f"{int(nulls.sum())} rows with an empty task_id or host_id")
    task = pd.Index(problem.task_ids).get_indexer(task_ids.fillna(""))
    host = pd.Index(problem.host_ids).get_indexer(host_ids.fillna(""))
    unknown_task = (task < 0) & ~nulls
    if unknown_task.any():
        found.append(f"{int(unknown_task.sum())} tasks not in the trace: {_examples(task_ids[unknown_task])}")
    duplicated = task_ids.duplicated(keep="first").to_numpy() & ~nulls
    if duplicated.any():
        found.append(f"{int(duplicated.sum())} tasks placed more than once: {_examples(task_ids[duplicated].unique())}")
    seen = np.zeros(problem.n_tasks, dtype=bool)
    seen[task[task >= 0]] = True
    if not seen.all():
        found.append(f"{int((~seen).sum())} tasks of the trace missing from the placement: {_examples(problem.task_ids[~seen])}")
    unknown_host = (host < 0) & ~nulls
    if unknown_host.any():
        found.append(f"{int(unknown_host.sum())} tasks on hosts not in the trace: {_examples(host_ids[unknown_host].unique())}")
    if found:
        return None, Check("placement", False, tuple(found))
    assign = np.empty(problem.n_tasks, dtype=np.int64)
    assign[task] = host
    return assign, Check("placement", True, (f"{problem.n_tasks:,} tasks placed exactly once on hosts of the trace",))


def check_move_list(problem: PlacementProblem, assign: np.ndarray, moves: pd.DataFrame) -> Check:
    """The move list names exactly the tasks whose host changed, each once, from its current host to its placed host."""
    found: list[str] = []
    task_ids = moves["task_id"].astype("string").fillna("")
    task = pd.Index(problem.task_ids).get_indexer(task_ids)
    unknown = task < 0
    if unknown.any():
        found.append(f"{int(unknown.sum())} moves of tasks not in the trace: {_examples(task_ids[unknown])}")
    repeated = task_ids.duplicated().to_numpy() & ~unknown
    if repeated.any():
        found.append(f"{int(repeated.sum())} tasks listed more than once: {_examples(task_ids[repeated].unique())}")
    moved = assign != problem.current
    listed = np.zeros(problem.n_tasks, dtype=bool)
    listed[task[~unknown]] = True
    if (moved & ~listed).any():
        found.append(f"{int((moved & ~listed).sum())} tasks change host in the placement but have no move: {_examples(problem.task_ids[moved & ~listed])}")
    if (listed & ~moved).any():
        found.append(f"{int((listed & ~moved).sum())} moves of tasks that keep their host in the placement: {_examples(problem.task_ids[listed & ~moved])}")
    known = ~unknown
    t = task[known]
    wrong_from = moves["from_host"].astype("string").fillna("").to_numpy()[known] != problem.host_ids[problem.current[t]]
    if wrong_from.any():
        found.append(f"{int(wrong_from.sum())} moves whose from_host is not the task's current host: {_examples(problem.task_ids[t[wrong_from]])}")
    wrong_to = moves["to_host"].astype("string").fillna("").to_numpy()[known] != problem.host_ids[assign[t]]
    if wrong_to.any():
        found.append(f"{int(wrong_to.sum())} moves whose to_host is not the task's host in the placement: {_examples(problem.task_ids[t[wrong_to]])}")
    if found:
        return Check("moves", False, tuple(found))
    return Check("moves", True, (f"{int(moved.sum()):,} moves, exactly the tasks whose host changed",))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def compare_summary(expected: Any, claimed: Any, where: str = "") -> list[str]:
    """Where ``claimed`` (the summary) differs from ``expected`` (recomputed); numbers within :data:`RELATIVE_TOLERANCE`."""
    if isinstance(expected, dict):
        if not isinstance(claimed, dict):
            return [f"{where}: summary has {claimed!r}, expected a table"]
        out = []
        for key, value in expected.items():
            path = f"{where}.{key}" if where else str(key)
            if key not in claimed:
                out.append(f"{path}: missing from the summary")
            else:
                out += compare_summary(value, claimed[key], path)
        out += [f"{where}.{key}: in the summary but not in the recomputed one" for key in claimed if key not in expected]
        return out
    if _is_number(expected) and not math.isfinite(expected):
        expected = None
    if expected is None or claimed is None:
        return [] if expected is None and claimed is None else [f"{where}: summary says {claimed!r}, recomputed {expected!r}"]
    if _is_number(expected):
        if _is_number(claimed) and math.isclose(claimed, expected, rel_tol=RELATIVE_TOLERANCE, abs_tol=_ABSOLUTE_TOLERANCE):
            return []
        return [f"{where}: summary says {claimed!r}, recomputed {expected!r}"]
    return [] if claimed == expected else [f"{where}: summary says {claimed!r}, recomputed {expected!r}"]


def keys_claimed(expected: Any, claimed: Any) -> Any:
    """``expected`` restricted to the keys ``claimed`` has (recursively): what a summary of an older format can be checked on."""
    if not isinstance(expected, dict) or not isinstance(claimed, dict):
        return expected
    return {key: keys_claimed(value, claimed[key]) for key, value in expected.items() if key in claimed}


def verify_plan(trace_path: str | Path, plan: str | Path | Plan) -> VerifyReport:
    """Verify a plan (a plan folder, or a :class:`~packer.plan.plan.Plan` in memory) against the trace folder ``trace_path`` (module doc).

    Raises :class:`~packer.errors.InputError` when the trace, the plan or a recorded
    input (fleet, presets, sensitivity table) cannot be read; every other finding is
    a failed :class:`Check` in the report.
    """
    if not isinstance(plan, Plan):
        plan = read_plan(plan)
    context = plan.context
    report = VerifyReport()
    if Path(context.trace).resolve() != Path(trace_path).resolve():
        report.notes.append(f"the plan was made from {context.trace}; checking it against {trace_path}")
    fleet = resolve_fleet(context.fleet, trace_path)
    trace = read_trace(trace_path, fleet)
    preset = get_preset(context.config, context.presets)
    problem = rebuild_problem(trace, preset, context)
    log.info("rebuilt %s: %d tasks, %d hosts, config %s", trace.name, problem.n_tasks, problem.n_hosts, preset.name)

    assign, placed = check_placement(problem, plan.placement)
    report.checks.append(placed)
    unusable = ("not checked: the placement does not place every task exactly once",)
    if assign is None:
        report.checks.append(Check("rules", False, unusable))
        report.checks.append(Check("moves", False, unusable))
    else:
        broken = violations(problem, assign)
        held = ", ".join(rule.name for rule in problem.rules)
        report.checks.append(Check("rules", not broken, tuple(broken) or (f"every rule holds: {held}",)))
        report.checks.append(check_move_list(problem, assign, plan.moves))

    order_problems = check_move_order(problem, plan.moves)
    n_temp = int(plan.moves["via_temporary"].fillna(False).astype(bool).sum())
    report.checks.append(Check("move order", not order_problems, tuple(order_problems) or (f"{len(plan.moves):,} steps replay within capacity ({n_temp:,} via a temporary host)",)))

    claimed_moves = plan.summary.get("moves", {})
    counts = compare_summary({"count": len(plan.moves), "temporary": n_temp},
                             {k: claimed_moves.get(k) for k in ("count", "temporary")} if isinstance(claimed_moves, dict) else claimed_moves, "moves")
    report.checks.append(Check("temporary moves", not counts, tuple(counts) or (f"summary counts {len(plan.moves):,} moves, {n_temp:,} temporary",)))

    if assign is None:
        report.checks.append(Check("summary", False, unusable))
        report.checks.append(Check("status and bound", False, unusable))
        return report
    expected = plan_metrics(problem, assign, fleet.archs)
    bound = plan.summary.get("bound")
    expected["gap"] = relative_gap(expected["objective"]["total"], bound if _is_number(bound) else None)
    if plan.summary.get("format") in OLDER_FORMATS:
        expected = keys_claimed(expected, plan.summary)
        report.notes.append(f"plan format {plan.summary['format']}: only the summary keys that format has are checked")
        if preset.sensitivity:
            report.notes.append("sensitivity is read as that format did (the whole-host basis, class scores by their maximum), "
                                "but every class now gets scores: a mismatch in sensitivity numbers means re-solving the plan")
    claimed = {key: plan.summary.get(key) for key in expected}
    wrong = compare_summary(expected, claimed)
    report.checks.append(Check("summary", not wrong, _listed(wrong) or (f"objective, gap, metrics before/after and per-arch/type tables match (relative tolerance {RELATIVE_TOLERANCE:g})",)))
    found = check_claims(problem, context, plan.summary, assign)
    report.checks.append(Check("status and bound", not found.wrong, _listed(found.wrong) or tuple(found.proven) or ("nothing to prove",)))
    report.claims += found.claims
    return report
