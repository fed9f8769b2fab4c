"""The plan folder: where every task goes, in which order to move them, and what it buys.

A plan is a folder written atomically (:func:`packer.io.atomic.atomic_dir`):

* ``placement.parquet``: ``task_id``, ``host_id`` — one row per task of the trace, in trace order;
* ``moves.parquet``: ``step``, ``task_id``, ``from_host``, ``to_host``, ``via_temporary``,
  ``temp_host`` — the executable order of :func:`packer.plan.moves.order_moves` (its module
  doc defines what a temporary move means);
* ``moves.csv`` and ``moves.md``: the same moves for a human, with each task's job, the
  hosts' architectures and what the move buys (empties a host, relieves a host over its
  sensitivity limit, via a temporary host, or consolidation: :mod:`packer.plan.move_list`);
  ``moves.md`` lists the first :data:`packer.plan.move_list.MARKDOWN_ROWS` moves;
* ``summary.json``: ``context`` (everything needed to rebuild the problem from the
  inputs alone, see :class:`PlanContext`), ``status``, ``solver``, ``objective``
  terms, ``bound`` and ``gap``, ``runtime_s``, ``n_tasks``, ``n_hosts``, ``metrics`` before/after
  (:func:`packer.model.metrics.evaluate`), ``by_arch`` and ``by_type`` hosts, TCO, WSL,
  colocation and moves before/after (:func:`packer.model.metrics.fleet_breakdown`),
  ``fleet_change`` (hosts freed and newly occupied, WSL), ``moves_by_arch``,
  ``moves`` (count, temporary), ``relative_performance`` (RP distributions before/after:
  overall, per architecture and per workload class, :func:`packer.model.metrics.rp_summary`)
  and ``notes`` (see :func:`plan_metrics`);
* ``report.md``: the same for a human.

Units in the summary: TCO in cost units (the fleet catalog's), fragmentation per
dimension in the dimension's unit (cpu reference cores, mem GiB) and as a fraction
of occupied capacity, WSL in score-weighted hosts, colocation in tasks per host,
interference dimensionless, runtime seconds. JSON has no NaN or infinity: such
values are written as ``null`` and listed in ``notes``.

Format ``packer-plan/2`` added ``fragmentation_share`` and ``colocation`` to the
metrics, the WSL, colocation and move columns of ``by_arch``/``by_type``,
``fleet_change`` and ``moves_by_arch``; ``packer-plan/3`` added the context's
``sensitivity_basis``, ``class_scores`` and ``classes_from``; ``packer-plan/4`` moved the
context's goal out of ``weights`` and its move budget, spread limits and guards into
``rules`` (with ``anti_affinity``), and added the ``rules`` and ``goals`` the problem had.
Plans of earlier formats
are still read and verified on the keys they have, their sensitivity read as it was
then (``host`` basis, class scores by their maximum).
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from packer.io.atomic import atomic_dir, refuse_to_overwrite_input
from packer.errors import InfeasibleError, InputError, Problem
from packer.io.fleet import Fleet
from packer.model.metrics import evaluate, fleet_breakdown, moves_by_arch, rp_summary, violations, weighted_score_loss
from packer.plan.move_list import MOVES_CSV, move_list, write_move_list
from packer.plan.moves import MOVE_COLUMNS, order_moves
from packer.model.problem import PlacementProblem
from packer.plan.context import SUMMARY_FILE, PlanContext, resolve_fleet
from packer.report.markdown import markdown_table
from packer.solvers.result import SolveResult
from packer.io.trace import read_json_object, read_parquet_table

log = logging.getLogger(__name__)

PLACEMENT_FILE = "placement.parquet"
MOVES_FILE = "moves.parquet"
REPORT_FILE = "report.md"
FORMAT = "packer-plan/4"
#: Earlier formats :mod:`packer.plan.verify` still checks (on the summary keys they have).
OLDER_FORMATS = ("packer-plan/1", "packer-plan/2", "packer-plan/3")

#: Solver statuses that come with a placement; any other status is not written as a plan.
PLACEMENT_STATUSES = ("optimal", "feasible")
def objective_terms(problem: PlacementProblem, assign: np.ndarray) -> dict[str, float]:
    """The weighted objective of ``assign`` (``total``, :func:`packer.model.metrics.evaluate`'s) and each goal's weighted term.

    Terms are keyed by the goal's :attr:`~packer.rules.base.Goal.term` (``primary``: TCO in
    cost units or the occupied-host count; ``fragmentation``, ``sensitivity``, ``moves``).
    """
    out = {"total": evaluate(problem, assign).objective}
    out.update({goal.term: goal.value(problem, assign) for goal in problem.goals})
    return out


def plan_metrics(problem: PlacementProblem, assign: np.ndarray, archs: pd.DataFrame) -> dict[str, Any]:
    """The recomputable part of ``summary.json``, all from :mod:`packer.model.metrics` (units there).

    ``objective`` terms; ``metrics`` before/after (:func:`packer.model.metrics.evaluate`);
    ``by_arch`` / ``by_type`` tables (:func:`packer.model.metrics.fleet_breakdown`; ``archs``
    is the fleet's ``Fleet.archs``); ``fleet_change``: hosts ``freed`` and
    ``newly_occupied`` and the plan's ``wsl`` (Eq. 3, score-weighted hosts);
    ``moves_by_arch``: ``{source arch: {destination arch: moved tasks}}`` for the pairs with moves;
    ``relative_performance``: :func:`packer.model.metrics.rp_summary` (dimensionless RPs).
    """
    assign = np.asarray(assign, dtype=np.int64)
    by_arch, by_type = fleet_breakdown(problem, assign, archs)
    moves = moves_by_arch(problem, assign)
    return {
        "objective": objective_terms(problem, assign),
        "rules": [rule.describe() for rule in problem.rules],
        "goals": ([{"goal": "fair", "decides": "placement (leximin relative performance)"}] if problem.fair else [])
                 + [goal.describe() for goal in problem.goals],
        "metrics": {
            "before": dataclasses.asdict(evaluate(problem, problem.current)),
            "after": dataclasses.asdict(evaluate(problem, assign)),
        },
        "by_arch": by_arch.to_dict(orient="index"),
        "by_type": by_type.to_dict(orient="index"),
        "fleet_change": {
            "freed": int(by_arch["freed"].sum()),
            "newly_occupied": int(by_arch["newly_occupied"].sum()),
            "wsl": weighted_score_loss(problem, assign, archs["score"].reindex(problem.arch_names).to_numpy(dtype=float)),
        },
        "moves_by_arch": {src: {dst: int(n) for dst, n in row.items() if n} for src, row in moves.iterrows() if row.any()},
        "relative_performance": rp_summary(problem, assign),
    }


def relative_gap(objective: float, bound: float | None) -> float | None:
    """The gap of a plan: ``(objective - bound) / |objective|`` (dimensionless), ``None`` without a finite bound.

    packer's one definition of "gap", on the weighted objective (objective units) and a
    lower ``bound`` on it: at most this share of the plan's objective can any valid
    placement save. It is ``summary.json``'s ``gap``, what ``report.md``, ``packer report``
    and ``packer solve``'s status line print (with :func:`format_gap`), what ``packer verify``
    recomputes, and :attr:`packer.solvers.result.SolveResult.gap`.
    """
    if bound is None or not math.isfinite(bound) or not math.isfinite(objective):
        return None
    return (objective - bound) / max(abs(objective), 1e-9)


def format_gap(gap: float | None) -> str:
    """A :func:`relative_gap` as every packer output prints it: ``13.44%``, or ``unknown`` without a bound."""
    return "unknown" if gap is None else f"{gap:.2%}"


def json_safe(value: Any, notes: list[str], where: str = "") -> Any:
    """``value`` with NumPy scalars made plain and NaN/±inf replaced by ``None`` (each replacement noted in ``notes``)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v, notes, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [json_safe(v, notes, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        if math.isfinite(value):
            return float(value)
        notes.append(f"{where}: {value} written as null")
        return None
    return value


@dataclass(frozen=True)
class Plan:
    """A placement plan: where every task goes, the moves in executable order, and its summary.

    ``placement``: ``task_id``, ``host_id`` (one row per task, ids of the trace);
    ``moves``: ``step``, ``task_id``, ``from_host``, ``to_host``, ``via_temporary``,
    ``temp_host`` in step order; ``summary``: what ``summary.json`` holds (module doc);
    ``context``: the options that rebuild its problem; ``listing``: the readable move
    list (``moves.csv``; None for a plan read from a folder without one); ``path``: the
    folder it was read from or last written to.
    """

    placement: pd.DataFrame
    moves: pd.DataFrame
    summary: dict[str, Any]
    context: PlanContext
    listing: pd.DataFrame | None = None
    path: Path | None = None

    @property
    def status(self) -> str:
        """``optimal`` or ``feasible`` (see ``summary["gap"]`` and ``summary["bound"]``)."""
        return self.summary["status"]

    @property
    def objective(self) -> float:
        """The plan's weighted objective (objective units: cost units of the primary goal)."""
        return self.summary["objective"]["total"]

    def write(self, out: str | Path) -> "Plan":
        """Write the plan folder ``out`` atomically (an interrupted write leaves the previous folder or nothing); returns the plan with its path.

        Refuses to write into the trace the plan was made from.
        """
        out = Path(out)
        refuse_to_overwrite_input(out, self.context.trace)
        with atomic_dir(out) as tmp:
            pq.write_table(pa.Table.from_pandas(self.placement, preserve_index=False), tmp / PLACEMENT_FILE)
            pq.write_table(pa.Table.from_pandas(self.moves, preserve_index=False, schema=_moves_schema()), tmp / MOVES_FILE)
            (tmp / SUMMARY_FILE).write_text(json.dumps(self.summary, indent=2, allow_nan=False, default=str) + "\n")
            (tmp / REPORT_FILE).write_text(render_report(self.summary))
            if self.listing is not None:
                write_move_list(tmp, self.listing)
        log.info("plan written to %s: %d moves", out, len(self.moves))
        return dataclasses.replace(self, path=out)


def make_plan(problem: PlacementProblem, result: SolveResult, context: PlanContext, *, fleet: Fleet | None = None) -> Plan:
    """The plan of ``result`` on ``problem``, with its summary (:func:`plan_metrics` and the solve's status, bound, runtime).

    Refuses what is not a placement: a result whose status is not one of
    :data:`PLACEMENT_STATUSES` (``"infeasible"`` raises :class:`InfeasibleError` naming
    ``result.infeasible_tasks``; anything else ``ValueError``), and a placement that
    breaks a rule of :func:`packer.model.metrics.violations` (``ValueError``: a solver
    bug, never written). ``fleet`` gives the umbrella types and scores for ``by_type``
    and WSL; by default it is loaded as ``context.fleet`` says.
    """
    status = str(result.status).lower()
    if status == "infeasible":
        raise InfeasibleError("no valid placement exists; no plan written", tasks=list(result.infeasible_tasks or []))
    if status not in PLACEMENT_STATUSES:
        raise ValueError(f"solver status '{result.status}' has no placement; no plan written")
    assign = np.asarray(result.assign, dtype=np.int64)
    broken = violations(problem, assign)
    if broken:
        raise ValueError("refusing to write an invalid placement: " + "; ".join(broken))
    fleet = fleet or resolve_fleet(context.fleet, context.trace)
    schedule = order_moves(problem, assign)
    derived = plan_metrics(problem, assign, fleet.archs)
    bound = None if result.bound is None else float(result.bound)
    notes: list[str] = []
    summary = {
        "format": FORMAT,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "context": context.to_dict(),
        "status": status,
        "solver": {"name": result.solver, "objective": result.objective, "stats": dict(result.stats or {})},
        **derived,
        "bound": bound,
        "gap": relative_gap(derived["objective"]["total"], bound),
        "runtime_s": result.wall_s,
        "n_tasks": problem.n_tasks,
        "n_hosts": problem.n_hosts,
        "moves": {
            "count": len(schedule),
            "temporary": schedule.n_temporary,
            "temporary_outside_fleet": int((schedule.table["via_temporary"] & schedule.table["temp_host"].isna()).sum()),
        },
    }
    summary = json_safe(summary, notes)
    summary["notes"] = notes
    placement = pd.DataFrame({"task_id": problem.task_ids.astype(object), "host_id": problem.host_ids[assign].astype(object)})
    return Plan(placement=placement, moves=schedule.table, summary=summary, context=context,
                listing=move_list(problem, assign, schedule.table))


def write_plan(out: str | Path, problem: PlacementProblem, result: SolveResult, context: PlanContext, *, fleet: Fleet | None = None) -> Path:
    """:func:`make_plan` then :meth:`Plan.write` into ``out``; returns ``out``."""
    return make_plan(problem, result, context, fleet=fleet).write(out).path


def _moves_schema() -> pa.Schema:
    return pa.schema([("step", pa.int64()), ("task_id", pa.string()), ("from_host", pa.string()), ("to_host", pa.string()),
                      ("via_temporary", pa.bool_()), ("temp_host", pa.string())])


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _rp_report(rp: dict[str, Any] | None) -> list[str]:
    """Report lines for the relative-performance distributions (overall, per class and per architecture)."""
    if not rp:
        return []
    groups = [("all", rp["before"]["all"], rp["after"]["all"])]
    for key, label in (("by_class", "class"), ("by_arch", "arch")):
        groups += [(f"{label} {g}", b, rp["after"][key].get(g)) for g, b in rp["before"].get(key, {}).items()]
        groups += [(f"{label} {g}", None, a) for g, a in rp["after"].get(key, {}).items() if g not in rp["before"].get(key, {})]
    stats = {"min": "min", "p5": "p5", "median": "median", "below_zero": "below 0"}
    columns = ["tasks", *(f"{label} {when}" for label in stats.values() for when in ("before", "after"))]
    rows = [[name, *(side.get(k) for k in stats for side in (b or {}, a or {}))] for name, b, a in groups]
    return ["", "Relative performance (0 = at goal; see packer.model.rpf):", "", markdown_table(columns, rows, "l" + "r" * 8, _fmt)]


def _describe(plugin: dict[str, Any]) -> str:
    """``spread (scope host, limit 2)`` or ``anti-affinity (pairs A & B, C & C)`` from a rule's or goal's summary description."""
    def text(value: Any) -> str:
        if isinstance(value, list):
            return ", ".join(" & ".join(map(str, v)) if isinstance(v, list) else str(v) for v in value)
        return str(value)

    name = plugin.get("rule") or plugin.get("goal")
    params = ", ".join(f"{k.replace('_', ' ')} {text(v)}" for k, v in plugin.items() if k not in ("rule", "goal"))
    return f"{name} ({params})" if params else str(name)


def _metric_rows(before: dict[str, Any], after: dict[str, Any]) -> list[list[Any]]:
    """The before/after rows of the report's metric table (``summary["metrics"]``)."""
    dims = list(after["fragmentation"])
    rows = [["occupied hosts", before["hosts"], after["hosts"]], ["TCO (cost units)", before["tco"], after["tco"]]]
    rows += [[f"fragmentation {d}", before["fragmentation"][d], after["fragmentation"][d]] for d in dims]
    rows += [[f"fragmentation {d}, share of occupied capacity", _share(before.get("fragmentation_share", {}).get(d)),
              _share(after.get("fragmentation_share", {}).get(d))] for d in dims]
    rows += [["colocation factor (tasks per occupied host)", before.get("colocation"), after.get("colocation")]]
    rows += [[f"interference {d}", before["interference"][d], after["interference"][d]] for d in after["interference"]]
    rows += [["tasks at risk", before["tasks_at_risk"], after["tasks_at_risk"]]]
    return rows


def render_report(summary: dict[str, Any]) -> str:
    """A short Markdown report of a plan's summary."""
    ctx, before, after = summary["context"], summary["metrics"]["before"], summary["metrics"]["after"]
    lines = [
        f"# Plan for {Path(ctx['trace']).name}",
        "",
        f"- config **{ctx['config']}**, goal **{ctx['goal']}**, solver **{summary['solver']['name']}** "
        f"(status {summary['status']}, {_fmt(summary['runtime_s'])} s)",
        f"- objective {_fmt(summary['objective']['total'])}, lower bound {_fmt(summary['bound'])}, gap {format_gap(summary['gap'])} "
        "((objective − bound) / objective)",
        f"- moves: {summary['moves']['count']:,} (budget {_fmt(ctx['rules']['max_moves']) if ctx['rules']['max_moves'] is not None else 'unlimited'}), "
        f"{summary['moves']['temporary']:,} through a temporary host",
        "- rules: " + "; ".join(_describe(r) for r in summary.get("rules", [])),
        "- goals: " + "; ".join(_describe(g) for g in summary.get("goals", [])),
        "",
        markdown_table(["metric", "before", "after"], _metric_rows(before, after), "lrr", _fmt),
        "",
        markdown_table(["type", "hosts before", "hosts after", "freed", "newly occupied", "TCO before", "TCO after", "WSL"],
                       [[t, r["hosts_before"], r["hosts_after"], r.get("freed"), r.get("newly_occupied"), r["tco_before"], r["tco_after"],
                         r.get("wsl")] for t, r in summary["by_type"].items()], "l" + "r" * 7, _fmt),
    ]
    lines += _rp_report(summary.get("relative_performance"))
    if summary.get("notes"):
        lines += ["", "Notes:", *[f"- {n}" for n in summary["notes"]]]
    lines += ["", "Check this plan with `packer verify TRACE PLAN`.", ""]
    return "\n".join(lines)


def read_plan(path: str | Path) -> Plan:
    """Read a plan folder written by :func:`write_plan`. Missing or unreadable parts raise :class:`InputError`."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: not a plan folder")
    incomplete = "file not found (not a plan folder, or an incomplete one)"
    placement = read_parquet_table(path / PLACEMENT_FILE, ("task_id", "host_id"), incomplete)
    moves = read_parquet_table(path / MOVES_FILE, MOVE_COLUMNS, incomplete)
    summary_file = path / SUMMARY_FILE
    summary = read_json_object(summary_file)
    if not isinstance(summary.get("context"), dict):
        raise InputError([Problem(str(summary_file), "context", "missing: not a packer plan summary", 0)])
    listing = pd.read_csv(path / MOVES_CSV) if (path / MOVES_CSV).exists() else None
    return Plan(placement=placement, moves=moves, summary=summary, context=PlanContext.from_dict(summary["context"], str(summary_file)),
                listing=listing, path=path)
