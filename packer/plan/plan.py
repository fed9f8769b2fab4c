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
``sensitivity_basis``, ``class_scores`` and ``classes_from``. Plans of earlier formats
are still read and verified on the keys they have, their sensitivity read as it was
then (``host`` basis, class scores by their maximum).
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import math
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from packer.io.atomic import atomic_dir, refuse_to_overwrite_input
from packer.errors import InfeasibleError, InputError, Problem
from packer.io.fleet import DEFAULT_FLEET, Fleet, load_fleet
from packer.model.metrics import evaluate, fleet_breakdown, moves_by_arch, rp_summary, violations, weighted_score_loss
from packer.plan.move_list import move_list, write_move_list
from packer.plan.moves import MOVE_COLUMNS, order_moves
from packer.characterize.normalize import DEFAULT_SENSITIVITY_BASIS
from packer.io.presets import DEFAULT_PRESETS
from packer.model.problem import PlacementProblem, Weights
from packer.characterize.sensitivity import DEFAULT_CLASS_AGGREGATE
from packer.solvers.result import SolveResult
from packer.io.trace import FLEET_FILE, read_json_object, read_parquet_table

log = logging.getLogger(__name__)

PLACEMENT_FILE = "placement.parquet"
MOVES_FILE = "moves.parquet"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.md"
FORMAT = "packer-plan/3"
#: Earlier formats :mod:`packer.plan.verify` still checks (on the summary keys they have).
OLDER_FORMATS = ("packer-plan/1", "packer-plan/2")

#: Solver statuses that come with a placement; any other status is not written as a plan.
PLACEMENT_STATUSES = ("optimal", "feasible")
#: Packages whose versions a plan records.
VERSIONED_PACKAGES = ("packer", "numpy", "pandas", "pyarrow", "ortools", "pulp")


def package_versions() -> dict[str, str | None]:
    """Installed version of each of :data:`VERSIONED_PACKAGES` (``None`` if not installed)."""
    out: dict[str, str | None] = {}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


@dataclass(frozen=True)
class PlanContext:
    """Everything the verifier needs to rebuild the problem from the inputs alone.

    ``trace``: the trace folder. ``fleet``: a catalog path, ``"trace"`` (the trace's
    own ``fleet.toml``) or ``"default"`` (``models/fleet.toml``). ``config``: preset
    name in ``presets`` (a presets TOML path). Profiles: ``percentiles`` (0-100),
    ``window_s`` (seconds), ``skip_invalid_usage``. Characterization (used only when
    the preset has sensitivity dimensions): ``sensitivity`` table path (``None`` =
    ``models/sensitivity.csv``), ``k`` (``None`` = elbow), ``kmax``,
    ``characterize_seed``, ``characterize_percentile``, ``class_scores`` (``mean`` or
    ``max`` of a class's measured services), ``classes_from`` (reference class centres,
    ``None`` = fit K-means), ``sensitivity_basis`` (``need`` or ``host``: what a score is
    a fraction of, :mod:`packer.characterize.normalize`). Constraints: ``max_moves``
    (``None`` = unlimited), ``spread_host``, ``spread_domain``. ``weights``: goal and
    weights. Solver: ``solver`` name, ``time_limit_s``, ``seed``. ``versions``:
    package versions at solve time.
    """

    trace: str
    fleet: str = "default"
    config: str = "p99"
    presets: str = str(DEFAULT_PRESETS)
    percentiles: tuple[float, ...] = (99.0,)
    window_s: int = 60
    skip_invalid_usage: bool = False
    sensitivity: str | None = None
    k: int | None = None
    kmax: int = 8
    characterize_seed: int = 0
    characterize_percentile: float = 99.0
    class_scores: str = DEFAULT_CLASS_AGGREGATE
    classes_from: str | None = None
    sensitivity_basis: str = DEFAULT_SENSITIVITY_BASIS
    max_moves: int | None = 400
    spread_host: int | None = None
    spread_domain: int | None = None
    weights: Weights = Weights()
    solver: str = ""
    time_limit_s: float | None = None
    seed: int = 0
    versions: dict[str, str | None] = field(default_factory=package_versions)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; input paths are made absolute so the plan can be verified from any folder."""
        out = dataclasses.asdict(self)
        out["trace"] = str(Path(self.trace).resolve())
        out["presets"] = str(Path(self.presets).resolve())
        if self.fleet not in ("trace", "default"):
            out["fleet"] = str(Path(self.fleet).resolve())
        for key in ("sensitivity", "classes_from"):
            if out[key] is not None:
                out[key] = str(Path(out[key]).resolve())
        out["percentiles"] = [float(q) for q in self.percentiles]
        return out

    @classmethod
    def from_dict(cls, doc: dict[str, Any], source: str = SUMMARY_FILE) -> "PlanContext":
        """Inverse of :meth:`to_dict`; unknown or missing keys raise :class:`InputError` naming ``source``."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - names)
        if unknown:
            raise InputError([Problem(source, "context", f"unknown key(s) {', '.join(unknown)}", 0)])
        if "trace" not in doc:
            raise InputError([Problem(source, "context.trace", "missing", 0)])
        bad = [f"{key}={value!r}" for key, value in doc.items() if not _has_type(value, _CONTEXT_TYPES[key])]
        weights = doc.get("weights", {})
        if isinstance(weights, dict):
            bad += [f"weights.{key}={value!r}" for key, value in weights.items()
                    if key != "goal" and not _has_type(value, (int, float, _NONE) if key in ("min_rp", "max_new_at_risk") else (int, float))]
        if bad:
            raise InputError([Problem(source, "context", f"value(s) of the wrong type: {', '.join(bad)}", 0)])
        values = dict(doc)
        # Plans written before these options existed read sensitivity on the whole host, classes by their maximum.
        values.setdefault("sensitivity_basis", "host")
        values.setdefault("class_scores", "max")
        try:
            if "weights" in values:
                values["weights"] = Weights(**values["weights"])
            if "percentiles" in values:
                values["percentiles"] = tuple(float(q) for q in values["percentiles"])
        except (TypeError, ValueError) as exc:
            raise InputError([Problem(source, "context", f"unreadable: {exc}", 0)]) from None
        return cls(**values)


_NONE = type(None)
#: JSON types of the context's keys (bool is not accepted where a number is meant).
_CONTEXT_TYPES: dict[str, tuple[type, ...]] = {
    "trace": (str,), "fleet": (str,), "config": (str,), "presets": (str,), "solver": (str,), "sensitivity": (str, _NONE),
    "percentiles": (list,), "window_s": (int,), "skip_invalid_usage": (bool,), "k": (int, _NONE), "kmax": (int,),
    "characterize_seed": (int,), "characterize_percentile": (int, float), "class_scores": (str,), "classes_from": (str, _NONE),
    "sensitivity_basis": (str,), "max_moves": (int, _NONE),
    "spread_host": (int, _NONE), "spread_domain": (int, _NONE), "weights": (dict,), "time_limit_s": (int, float, _NONE),
    "seed": (int,), "versions": (dict,),
}


def _has_type(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def fleet_choice(fleet: str | Path | None, trace: str | Path) -> str:
    """The context's ``fleet`` for a ``--fleet`` option: the path, else ``"trace"`` or ``"default"`` as read_trace chooses."""
    if fleet is not None:
        return str(Path(fleet).resolve())
    return "trace" if (Path(trace) / FLEET_FILE).exists() else "default"


def resolve_fleet(choice: str, trace: str | Path) -> Fleet:
    """Load the fleet a context names (see :class:`PlanContext`); ``"trace"`` means ``trace``'s own ``fleet.toml``."""
    if choice == "trace":
        return load_fleet(Path(trace) / FLEET_FILE)
    if choice == "default":
        return load_fleet(DEFAULT_FLEET)
    return load_fleet(choice)


def objective_terms(problem: PlacementProblem, assign: np.ndarray) -> dict[str, float]:
    """The weighted objective of ``assign`` and its four terms (see :class:`packer.model.problem.Weights`).

    ``primary`` is TCO (cost units) or the occupied-host count; the other terms are
    already multiplied by their weights; ``total`` is :func:`packer.model.metrics.evaluate`'s objective.
    """
    ev = evaluate(problem, assign)
    w = problem.weights
    frag = sum(ev.fragmentation[problem.dims[j]] / s for j, s in zip(problem.frag_dims, problem.frag_scale))
    return {
        "total": ev.objective,
        "primary": ev.tco if w.goal == "tco" else float(ev.hosts),
        "fragmentation": w.fragmentation * float(frag),
        "sensitivity": w.sensitivity * float(sum(ev.interference.values())),
        "moves": w.moves * ev.moves,
    }


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
    """``(objective - bound) / |objective|`` for a lower ``bound`` on the objective; ``None`` without a finite bound."""
    if bound is None or not math.isfinite(bound) or not math.isfinite(objective):
        return None
    return (objective - bound) / max(abs(objective), 1e-9)


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
    """A plan read back by :func:`read_plan`: the two tables, the summary and its context."""

    path: Path
    placement: pd.DataFrame
    moves: pd.DataFrame
    summary: dict[str, Any]
    context: PlanContext


def write_plan(out: str | Path, problem: PlacementProblem, result: SolveResult, context: PlanContext, *, fleet: Fleet | None = None) -> Path:
    """Write the plan folder for ``result`` atomically; returns ``out``.

    Refuses what is not a placement: a result whose status is not one of
    :data:`PLACEMENT_STATUSES` (``"infeasible"`` raises
    :class:`InfeasibleError` naming ``result.infeasible_tasks``; anything else
    ``ValueError``), and a placement that breaks a rule of
    :func:`packer.model.metrics.violations` (``ValueError``: a solver bug, never written).
    ``fleet`` gives the umbrella types and scores for ``by_type`` and WSL; by default it is loaded as
    ``context.fleet`` says.
    """
    out = Path(out)
    status = str(result.status).lower()
    if status == "infeasible":
        raise InfeasibleError("no valid placement exists; no plan written", tasks=list(result.infeasible_tasks or []))
    if status not in PLACEMENT_STATUSES:
        raise ValueError(f"solver status '{result.status}' has no placement; no plan written")
    assign = np.asarray(result.assign, dtype=np.int64)
    broken = violations(problem, assign)
    if broken:
        raise ValueError("refusing to write an invalid placement: " + "; ".join(broken))
    refuse_to_overwrite_input(out, context.trace)
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
    with atomic_dir(out) as tmp:
        pq.write_table(pa.Table.from_pandas(placement, preserve_index=False), tmp / PLACEMENT_FILE)
        pq.write_table(pa.Table.from_pandas(schedule.table, preserve_index=False, schema=_moves_schema()), tmp / MOVES_FILE)
        (tmp / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, allow_nan=False, default=str) + "\n")
        (tmp / REPORT_FILE).write_text(render_report(summary))
        write_move_list(tmp, move_list(problem, assign, schedule.table))
    log.info("plan written to %s: %d moves (%d temporary)", out, len(schedule), schedule.n_temporary)
    return out


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
    lines = ["", "Relative performance (0 = at goal; see packer.model.rpf):", "",
             "| tasks | min before | min after | p5 before | p5 after | median before | median after | below 0 before | below 0 after |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows = [("all", rp["before"]["all"], rp["after"]["all"])]
    for key, label in (("by_class", "class"), ("by_arch", "arch")):
        rows += [(f"{label} {g}", b, rp["after"][key].get(g)) for g, b in rp["before"].get(key, {}).items()]
        rows += [(f"{label} {g}", None, a) for g, a in rp["after"].get(key, {}).items() if g not in rp["before"].get(key, {})]
    for name, b, a in rows:
        b, a = b or {}, a or {}
        lines.append(f"| {name} | " + " | ".join(f"{_fmt(b.get(k))} | {_fmt(a.get(k))}" for k in ("min", "p5", "median", "below_zero")) + " |")
    return lines


def render_report(summary: dict[str, Any]) -> str:
    """A short Markdown report of a plan's summary."""
    ctx, before, after = summary["context"], summary["metrics"]["before"], summary["metrics"]["after"]
    lines = [
        f"# Plan for {Path(ctx['trace']).name}",
        "",
        f"- config **{ctx['config']}**, goal **{ctx['weights']['goal']}**, solver **{summary['solver']['name']}** "
        f"(status {summary['status']}, {_fmt(summary['runtime_s'])} s)",
        f"- objective {_fmt(summary['objective']['total'])}, bound {_fmt(summary['bound'])}, gap {_fmt(summary['gap'])}",
        f"- moves: {summary['moves']['count']:,} (budget {_fmt(ctx['max_moves']) if ctx['max_moves'] is not None else 'unlimited'}), "
        f"{summary['moves']['temporary']:,} through a temporary host",
        "",
        "| metric | before | after |",
        "|---|---:|---:|",
        f"| occupied hosts | {_fmt(before['hosts'])} | {_fmt(after['hosts'])} |",
        f"| TCO (cost units) | {_fmt(before['tco'])} | {_fmt(after['tco'])} |",
    ]
    lines += [f"| fragmentation {d} | {_fmt(before['fragmentation'][d])} | {_fmt(after['fragmentation'][d])} |" for d in after["fragmentation"]]
    lines += [f"| fragmentation {d}, share of occupied capacity | {_share(before.get('fragmentation_share', {}).get(d))} | "
              f"{_share(after.get('fragmentation_share', {}).get(d))} |" for d in after["fragmentation"]]
    lines += [f"| colocation factor (tasks per occupied host) | {_fmt(before.get('colocation'))} | {_fmt(after.get('colocation'))} |"]
    lines += [f"| interference {d} | {_fmt(before['interference'][d])} | {_fmt(after['interference'][d])} |" for d in after["interference"]]
    lines += [f"| tasks at risk | {_fmt(before['tasks_at_risk'])} | {_fmt(after['tasks_at_risk'])} |", ""]
    lines += ["| type | hosts before | hosts after | freed | newly occupied | TCO before | TCO after | WSL |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {t} | {_fmt(r['hosts_before'])} | {_fmt(r['hosts_after'])} | {_fmt(r.get('freed'))} | {_fmt(r.get('newly_occupied'))} | "
              f"{_fmt(r['tco_before'])} | {_fmt(r['tco_after'])} | {_fmt(r.get('wsl'))} |" for t, r in summary["by_type"].items()]
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
    return Plan(path=path, placement=placement, moves=moves, summary=summary, context=PlanContext.from_dict(summary["context"], str(summary_file)))
