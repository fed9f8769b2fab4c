"""Review reports of a plan or a sweep: one self-contained HTML page and a Markdown file with PNG plots.

``packer report PLAN_OR_SWEEP`` renders, from a plan folder (``summary.json``) or a
sweep folder (``sweep.json`` + ``sweep.parquet``, :mod:`packer.sweep`), the figures of
the colocation paper's Section V-C a capacity engineer would show:

* the TCO-vs-SLO Pareto plot (sweep only);
* hosts freed and tasks moved per architecture (Figs. 7-8);
* fragmentation change vs Baseline (Fig. 9);
* WSL and hosts used (Fig. 10);
* colocation factor per architecture (Fig. 11);
* interference and tasks at risk (Fig. 12);
* the relative-performance distribution (:mod:`packer.rpf`);
* for a sweep holding the Baseline, P99 and P99 Sens configurations, the measured
  changes next to the paper's published ones (:data:`PAPER_CHANGES`).

Every number comes from a ``summary.json`` or the sweep table, which
:mod:`packer.metrics` computed; this module only selects, divides one by another
for "change vs Baseline" (``(x − x_Baseline) / |x_Baseline|``), formats and plots.
Each figure is followed by the table of the numbers behind it. In a sweep,
fragmentation, interference, tasks at risk and relative performance are the sweep
table's (measured on the sweep's yardstick, see :mod:`packer.sweep`); hosts, TCO,
moves and the per-architecture figures come from each point's plan summary.

The report folder (default ``<input>/report``) is written atomically: ``report.html``
(images embedded as base64 data URIs: one file to mail or attach), ``report.md`` and
the PNGs it links.
"""
from __future__ import annotations

import base64
import html
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from packer.atomic import atomic_dir
from packer.errors import InputError, Problem
from packer.plan import FORMAT as PLAN_FORMAT
from packer.plan import SUMMARY_FILE
from packer.sweep import BASELINE, OPTIMIZER, SWEEP_FILE, Sweep, read_sweep, weight_label
from packer.trace import read_json_object

REPORT_DIR = "report"
HTML_FILE = "report.html"
MARKDOWN_FILE = "report.md"

#: Reference configuration of "change vs Baseline" (Table IV's Baseline).
REFERENCE_CONFIG = "baseline"
#: Share of tasks at risk in the current placement from which the count is called saturated in the report.
SATURATED_RISK = 0.9
#: Sensitivity weight whose P99 Sens point stands for the paper's P99 Sens (``packer solve``'s default weight).
PAPER_SENS_WEIGHT = 1.0


@dataclass(frozen=True)
class PaperChange:
    """One change the colocation paper publishes (Section V-C): ``metric`` of ``config`` vs ``reference``.

    ``paper``: the relative change as a fraction (−0.5 = 50% fewer); ``quote``: the
    paper's words; ``column``: the sweep-table column, or ``tco_type_<T>`` for the TCO of
    umbrella type T (from the plans' ``by_type`` tables).
    """

    metric: str
    config: str
    reference: str
    column: str
    paper: float
    quote: str


#: The paper's published changes (Section V-C text; 400 moves, ~37,000 tasks, ~18,000 hosts).
PAPER_CHANGES = (
    PaperChange("hosts used", "p99", "baseline", "hosts", -0.50, "P99 reduces hosts utilized by ~50%"),
    PaperChange("TCO", "p99", "baseline", "tco", -0.3994, "reduce overall TCO cost by 39.94%"),
    PaperChange("TCO of Type II hosts", "p99", "baseline", "tco_type_II", -0.3186, "reduce Type II server cost by 31.86%"),
    PaperChange("TCO of Type I hosts", "p99", "baseline", "tco_type_I", -0.7142, "Type I cost by 71.42%"),
    PaperChange("CPU fragmentation", "p99", "baseline", "frag_cpu", -0.60, "reduction in CPU and memory fragmentation by ~60%"),
    PaperChange("memory fragmentation", "p99", "baseline", "frag_mem", -0.60, "reduction in CPU and memory fragmentation by ~60%"),
    PaperChange("tasks at risk", "p99", "baseline", "tasks_at_risk", +0.25, "~25% more tasks that experience SLI degradation"),
    PaperChange("tasks at risk", "p99-sens", "baseline", "tasks_at_risk", -0.22, "reduce up to ~22% of tasks experiencing SLI degradation"),
    PaperChange("hosts used", "p99-sens", "p99", "hosts", +0.30, "P99 Sens increase hosts utilized by ~30%"),
)


@dataclass
class Table:
    """A table of the report: ``headers`` and rows of already formatted cells; ``key`` names it (HTML id)."""

    key: str
    caption: str
    headers: list[str]
    rows: list[list[str]]


@dataclass
class Section:
    """A heading, paragraphs, at most one figure (file name, PNG bytes, alt text) and its tables."""

    title: str
    text: list[str] = field(default_factory=list)
    figure: tuple[str, bytes, str] | None = None
    tables: list[Table] = field(default_factory=list)


# --- formatting: every number printed is one of these, so tests can parse them back ---


def fmt_number(value: Any) -> str:
    """A measured number: ``-`` for missing, ``1,234.5`` from 1000 on, else 4 significant digits."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    value = float(value)
    return f"{value:,.1f}" if abs(value) >= 1000 else f"{value:.4g}"


def fmt_count(value: Any) -> str:
    """A count (hosts, tasks, moves): ``12,345``; ``-`` for missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{int(round(float(value))):,}"


def fmt_share(value: Any) -> str:
    """A fraction as a percentage, ``30.5%``; ``-`` for missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{float(value):.1%}"


def fmt_change(value: Any) -> str:
    """A relative change as a signed percentage, ``-12.3%``; ``-`` for missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{float(value):+.1%}"


def relative_change(value: Any, reference: Any) -> float:
    """``(value − reference) / |reference|``: NaN when either is missing or the reference is 0."""
    if value is None or reference is None:
        return float("nan")
    value, reference = float(value), float(reference)
    if not (math.isfinite(value) and math.isfinite(reference)) or reference == 0:
        return float("nan")
    return (value - reference) / abs(reference)


# --- figures ---


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def _grouped_bars(ax, labels: list[str], series: dict[str, list[float]], ylabel: str, title: str) -> None:
    """Bars of several series side by side per label (NaN bars are left out)."""
    x = np.arange(len(labels))
    width = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, np.nan_to_num(np.asarray(values, dtype=float)), width, label=name)
    ax.set_xticks(x, labels, rotation=35, ha="right", fontsize=8)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if len(series) > 1:
        ax.legend(fontsize=7)


def _figure(n_panels: int = 1, width: float = 10.0, height: float = 4.0) -> tuple[Figure, list]:
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, n_panels, squeeze=False)[0]
    return fig, list(axes)


# --- tables shared by both report kinds ---


def _rp_rows(label: str, rp: dict[str, Any] | None) -> list[str]:
    rp = rp or {}
    return [label, fmt_count(rp.get("tasks")), fmt_number(rp.get("min")), fmt_number(rp.get("p5")), fmt_number(rp.get("median")), fmt_count(rp.get("below_zero"))]


# --- sweep report ---


def _representative_sens_weight(table: pd.DataFrame) -> float | None:
    """The P99 Sens weight standing for the paper's (``PAPER_SENS_WEIGHT`` if swept, else the nearest on a log scale)."""
    weights = table.loc[(table["config"] == "p99-sens") & (table["kind"] == OPTIMIZER) & table["tco"].notna(), "weight"].dropna().tolist()
    if not weights:
        return None
    return min(weights, key=lambda w: abs(math.log10(w / PAPER_SENS_WEIGHT)) if w > 0 else math.inf)


def _config_row(table: pd.DataFrame, config: str, sens_weight: float | None) -> pd.Series | None:
    """The optimizer's placed row of ``config`` (for p99-sens, the one with ``sens_weight``)."""
    rows = table[(table["kind"] == OPTIMIZER) & (table["config"] == config) & table["tco"].notna()]
    if config == "p99-sens":
        rows = rows[rows["weight"] == sens_weight]
    return None if rows.empty else rows.iloc[0]


def _figure_points(table: pd.DataFrame, sens_weight: float | None) -> pd.DataFrame:
    """Table IV's configurations in order (P99 Sens at ``sens_weight``): the points of the per-architecture figures."""
    rows = [r for c in dict.fromkeys(table.loc[table["kind"] == OPTIMIZER, "config"]) if (r := _config_row(table, c, sens_weight)) is not None]
    return pd.DataFrame(rows)


def _read_summaries(sweep: Sweep, points: pd.DataFrame) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for _, row in points.iterrows():
        path = sweep.path / row["plan"] / SUMMARY_FILE
        out[row["point"]] = read_json_object(path, f"file not found (the plan summary of sweep point {row['point']})")
    return out


def _reference(table: pd.DataFrame, meta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The row "change vs Baseline" divides by: the Baseline configuration's point, else the current placement."""
    row = _config_row(table, REFERENCE_CONFIG, None)
    if row is not None:
        return row["point"], row.to_dict()
    return "current placement", meta["current"]


def _pareto_section(table: pd.DataFrame, meta: dict[str, Any]) -> Section:
    placed = table[table["tco"].notna()]
    fig, (ax, ax2) = _figure(2, 11, 4.5)
    for panel, column, xlabel in ((ax, "tasks_at_risk", "tasks at risk (on a host with summed sensitivity > 1)"),
                                  (ax2, "interference", "interference (Eq. 4, summed excess over 1)")):
        for kind, marker in ((OPTIMIZER, "o"), (BASELINE, "x")):
            part = placed[placed["kind"] == kind]
            panel.scatter(part[column], part["tco"], marker=marker, label="optimizer" if kind == OPTIMIZER else "baseline policy", zorder=3)
            for _, r in part.iterrows():
                panel.annotate(r["point"], (r[column], r["tco"]), fontsize=6, xytext=(3, 3), textcoords="offset points")
        cur = meta["current"]
        panel.scatter([cur[column]], [cur["tco"]], marker="*", s=120, color="grey", label="current placement", zorder=3)
        panel.set_xlabel(xlabel, fontsize=8)
        panel.set_ylabel("TCO (cost units)")
    for panel, column, flag in ((ax, "tasks_at_risk", "pareto"), (ax2, "interference", "pareto_interference")):
        front = placed[placed[flag]].sort_values([column, "tco"])
        panel.step(front[column], front["tco"], where="post", color="red", linewidth=1, label="Pareto front")
    ax.legend(fontsize=7)
    ax.set_title("TCO vs tasks at risk (lower-left is better)", fontsize=10)
    ax2.set_title("TCO vs interference", fontsize=10)
    rows = [[r["point"], r["kind"], r["config"], "-" if pd.isna(r["weight"]) else weight_label(r["weight"]), r["covers"] or "-", r["solver"], r["status"],
             fmt_number(r["tco"]), fmt_count(r["hosts"]), fmt_count(r["tasks_at_risk"]), fmt_number(r["interference"]), fmt_count(r["moves"]),
             fmt_number(r["wall_s"]), fmt_share(r["gap"]), "yes" if r["pareto"] else "", "yes" if r["pareto_interference"] else ""] for _, r in table.iterrows()]
    cur = meta["current"]
    rows.append(["current placement", "-", "-", "-", "-", "-", "-", fmt_number(cur["tco"]), fmt_count(cur["hosts"]), fmt_count(cur["tasks_at_risk"]),
                 fmt_number(cur["interference"]), fmt_count(0), "-", "-", "", ""])
    text = [f"{len(table)} solves. Pareto front on TCO vs tasks at risk (no other point has lower-or-equal TCO and tasks at risk, one strictly "
            f"lower): {', '.join(meta['pareto']) or 'none'}; on TCO vs interference: {', '.join(meta['pareto_interference']) or 'none'}. "
            "`covers` lists the ladder weights a solve stands for (its problem does not depend on the weight)."]
    if meta["n_tasks"] and cur["tasks_at_risk"] >= SATURATED_RISK * meta["n_tasks"]:
        text.append(f"{fmt_share(cur['tasks_at_risk'] / meta['n_tasks'])} of the tasks are at risk already in the current placement: the count "
                    "is saturated (a task is at risk as soon as its host's sensitivity sum passes 1 in one dimension, whatever the excess) and "
                    "barely separates the points; interference (Eq. 4, the excess itself, which the sensitivity weight trades against cost) does.")
    return Section("TCO vs SLO risk", text, ("pareto.png", _png(fig), "TCO vs tasks at risk and interference, every sweep point"), [Table(
        "sweep", "Sweep table (the numbers behind the Pareto plot)",
        ["point", "kind", "config", "weight", "covers", "solver", "status", "TCO", "hosts", "tasks at risk", "interference", "moves", "wall s", "gap",
         "Pareto", "Pareto (interference)"], rows)])


def _verdict(dominated: bool | None) -> str:
    return "no plan" if dominated is None else ("yes" if dominated else "NO")


def _dominance_section(meta: dict[str, Any]) -> Section | None:
    records, by_interference = meta.get("dominance") or [], meta.get("dominance_interference") or []
    if not records:
        return None
    cur = meta["current"]
    # Context for the reader, not part of the check: a policy the unchanged placement beats costs more for more risk.
    rows = [[d["baseline"], fmt_number(d["tco"]), fmt_count(d["tasks_at_risk"]), _verdict(d["dominated"]), d["by"] or "-",
             fmt_number(d["by_tco"]), fmt_count(d["by_tasks_at_risk"]), fmt_number(i["interference"]), _verdict(i["dominated"]), i["by"] or "-",
             "-" if d["tco"] is None else ("yes" if cur["tco"] < d["tco"] and cur["tasks_at_risk"] <= d["tasks_at_risk"] else "no")]
            for d, i in zip(records, by_interference)]
    text = []
    for name, checks in (("tasks at risk", records), ("interference", by_interference)):
        placed = [d for d in checks if d["dominated"] is not None]
        text.append(f"On {name}: the optimizer dominates {sum(bool(d['dominated']) for d in placed)} of {len(placed)} baseline policies with a plan "
                    f"(some optimizer point has lower TCO and no more {name}).")
    return Section("Optimizer vs baseline policies", text, None, [Table(
        "dominance", "Dominance check", ["baseline", "TCO", "tasks at risk", "dominated", "by", "its TCO", "its tasks at risk",
                                         "interference", "dominated (interference)", "by (interference)",
                                         "current placement beats it"], rows)])


def _arch_sections(points: pd.DataFrame, summaries: dict[str, dict[str, Any]]) -> list[Section]:
    """Figs. 7-8 (hosts freed, tasks moved per architecture) and Fig. 11 (colocation) for the Table IV points."""
    archs = list(dict.fromkeys(a for s in summaries.values() for a in s["by_arch"]))
    names = points["point"].tolist()
    by_arch = {p: summaries[p]["by_arch"] for p in names}
    fig, (ax1, ax2) = _figure(2, 11, 4)
    _grouped_bars(ax1, archs, {p: [by_arch[p].get(a, {}).get("moved_out", 0) for a in archs] for p in names}, "tasks", "Tasks moved out of each architecture (Fig. 7)")
    _grouped_bars(ax2, archs, {p: [by_arch[p].get(a, {}).get("freed", 0) - by_arch[p].get(a, {}).get("newly_occupied", 0) for a in archs] for p in names},
                  "hosts", "Hosts freed minus newly occupied (Fig. 8)")
    rows = [[p, a, by_arch[p][a].get("type", "-"), fmt_count(by_arch[p][a]["freed"]), fmt_count(by_arch[p][a]["newly_occupied"]),
             fmt_count(by_arch[p][a]["moved_out"]), fmt_count(by_arch[p][a]["moved_in"]), fmt_count(by_arch[p][a]["hosts_before"]), fmt_count(by_arch[p][a]["hosts_after"])]
            for p in names for a in archs if a in by_arch[p]]
    moves = Section("Hosts freed and tasks moved per architecture (Figs. 7-8)",
                    ["Table IV's configurations (P99 Sens at the weight named in its point). From each plan's summary.json (`by_arch`)."],
                    ("arch_moves.png", _png(fig), "tasks moved and hosts freed per architecture"),
                    [Table("arch", "Per architecture", ["point", "arch", "type", "hosts freed", "newly occupied", "tasks moved out", "tasks moved in",
                                                        "occupied before", "occupied after"], rows)])
    fig, (ax,) = _figure(1, 10, 4)
    first = by_arch[names[0]]
    series = {"current": [first.get(a, {}).get("colocation_before", np.nan) for a in archs]}
    series.update({p: [by_arch[p].get(a, {}).get("colocation_after", np.nan) for a in archs] for p in names})
    _grouped_bars(ax, archs, {k: [np.nan if v is None else v for v in vals] for k, vals in series.items()}, "tasks per occupied host", "Colocation factor (Fig. 11)")
    rows = [[a] + [fmt_number(series[k][i]) for k in series] for i, a in enumerate(archs)]
    coloc = Section("Colocation factor (Fig. 11)", ["Tasks per occupied host, per architecture, before (current) and after each plan (`by_arch`)."],
                    ("colocation.png", _png(fig), "colocation factor per architecture"),
                    [Table("colocation", "Colocation factor (tasks per occupied host)", ["arch", *series], rows)])
    return [moves, coloc]


def _change_section(table: pd.DataFrame, ref_name: str, ref: dict[str, Any], key: str, title: str, columns: list[tuple[str, str]],
                    text: str, value_fmt, extra: tuple[tuple[str, str], ...] = ()) -> Section:
    """A bar chart of each point's change vs the reference in ``columns`` ((column, label) pairs) and its table.

    ``extra``: more (column, label) pairs shown in the table only, as shares (fractions).
    """
    placed = table[table["tco"].notna()]
    labels = placed["point"].tolist()
    changes = {label: [relative_change(v, ref.get(col)) for v in placed[col]] for col, label in columns}
    fig, (ax,) = _figure(1, 10, 4)
    _grouped_bars(ax, labels, {k: [100 * c for c in v] for k, v in changes.items()}, f"% change vs {ref_name}", title)
    headers = ["point"] + [label for _, label in columns] + [f"{label} change" for _, label in columns] + [label for _, label in extra]
    rows = [[r["point"]] + [value_fmt(col, r[col]) for col, _ in columns] + [fmt_change(changes[label][i]) for _, label in columns]
            + [fmt_share(r[col]) for col, _ in extra] for i, (_, r) in enumerate(placed.iterrows())]
    rows.insert(0, [f"{ref_name} (reference)"] + [value_fmt(col, ref.get(col)) for col, _ in columns] + ["-" for _ in columns]
                + [fmt_share(ref.get(col)) for col, _ in extra])
    return Section(title, [text], (f"{key}.png", _png(fig), title), [Table(key, title, headers, rows)])


def _count_or_number(column: str, value: Any) -> str:
    return fmt_count(value) if column in ("hosts", "tasks_at_risk", "moves", "rp_below_zero") else fmt_number(value)


def _wsl_section(table: pd.DataFrame) -> Section:
    placed = table[table["tco"].notna()]
    fig, (ax1, ax2) = _figure(2, 11, 4)
    labels = placed["point"].tolist()
    _grouped_bars(ax1, labels, {"WSL": placed["wsl"].tolist()}, "score-weighted hosts", "WSL (Eq. 3; negative = capacity released)")
    _grouped_bars(ax2, labels, {"hosts used": placed["hosts"].tolist()}, "occupied hosts", "Hosts used after the plan")
    rows = [[r["point"], fmt_number(r["wsl"]), fmt_count(r["hosts"]), fmt_number(r["tco"])] for _, r in placed.iterrows()]
    return Section("WSL and hosts used (Fig. 10)",
                   ["WSL = Σ_arch score · (hosts newly occupied − hosts freed) (Eq. 3, read as the plan's change: see packer.metrics.weighted_score_loss)."],
                   ("wsl_hosts.png", _png(fig), "WSL and hosts used"), [Table("wsl", "WSL and hosts used", ["point", "WSL", "hosts used", "TCO"], rows)])


def _rp_section(table: pd.DataFrame, meta: dict[str, Any]) -> Section:
    placed = table[table["tco"].notna()]
    labels = ["current", *placed["point"]]
    cur = meta["current"]
    fig, (ax,) = _figure(1, 10, 4)
    x = np.arange(len(labels))
    for column, marker in (("rp_min", "v"), ("rp_p5", "o"), ("rp_median", "^")):
        ax.scatter(x, [cur[column], *placed[column]], marker=marker, label=column.removeprefix("rp_"))
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(x, labels, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("relative performance (0 = at goal)")
    ax.set_title("Relative performance distribution (min, 5th percentile, median)", fontsize=10)
    ax.legend(fontsize=7)
    rows = [["current", fmt_number(cur["rp_min"]), fmt_number(cur["rp_p5"]), fmt_number(cur["rp_median"]), fmt_count(cur["rp_below_zero"])]]
    rows += [[r["point"], fmt_number(r["rp_min"]), fmt_number(r["rp_p5"]), fmt_number(r["rp_median"]), fmt_count(r["rp_below_zero"])] for _, r in placed.iterrows()]
    return Section("Relative performance", [f"Per task RP (packer.rpf) on the yardstick ({meta['yardstick']}); tasks below 0 miss their goal."],
                   ("rp.png", _png(fig), "relative performance distribution"),
                   [Table("rp", "Relative performance", ["point", "min", "p5", "median", "tasks below 0"], rows)])


def paper_comparison(table: pd.DataFrame, meta: dict[str, Any], summaries: dict[str, dict[str, Any]]) -> pd.DataFrame | None:
    """The paper's published changes next to the measured ones; None unless the sweep has Baseline, P99 and P99 Sens.

    Columns: ``metric``, ``comparison``, ``paper`` and ``measured`` (relative changes,
    fractions), ``same_direction``, ``why`` (what separates the two: move budget,
    trace shape, definitions), ``quote``. ``summaries``: plan summaries by point name
    (for the per-type TCO).
    """
    weight = _representative_sens_weight(table)
    rows = {c: _config_row(table, c, weight) for c in ("baseline", "p99", "p99-sens")}
    if any(r is None for r in rows.values()):
        return None
    budget = meta["options"]["max_moves"]
    records = []
    for change in PAPER_CHANGES:
        subject, reference = rows[change.config], rows[change.reference]
        if change.column.startswith("tco_type_"):
            utype = change.column.removeprefix("tco_type_")
            value = summaries[subject["point"]]["by_type"].get(utype, {}).get("tco_after")
            ref = summaries[reference["point"]]["by_type"].get(utype, {}).get("tco_after")
        else:
            value, ref = subject[change.column], reference[change.column]
        measured = relative_change(value, ref)
        label = {"baseline": "Baseline", "p99": "P99", "p99-sens": f"P99 Sens (w={weight_label(weight)})"}
        records.append({
            "metric": change.metric, "comparison": f"{label[change.config]} vs {label[change.reference]}", "paper": change.paper, "measured": measured,
            "same_direction": bool(np.sign(measured) == np.sign(change.paper)) if math.isfinite(measured) else None,
            "why": _why(change, meta, rows, budget), "quote": change.quote,
        })
    return pd.DataFrame(records)


def _why(change: PaperChange, meta: dict[str, Any], rows: dict[str, pd.Series], budget: int | None) -> str:
    """What separates the measured change from the published one, with the sweep's numbers."""
    before = meta["current"]
    hosts = before["hosts"]
    freed = {c: before["hosts"] - r["hosts"] for c, r in rows.items()}
    budget_text = ("no move budget (a full repack)" if budget is None else
                   f"{budget:,} moves can empty at most {min(budget, hosts):,} of the {hosts:,} occupied hosts ({min(budget, hosts) / hosts:.1%})")
    if change.column in ("hosts", "tco") or change.column.startswith("tco_type_"):
        return (f"Move budget: {budget_text}; net hosts freed: Baseline {freed['baseline']:,.0f}, P99 {freed['p99']:,.0f}, P99 Sens "
                f"{freed['p99-sens']:,.0f}. Measured against the whole fleet; the paper does not say what its percentages are relative to.")
    if change.column.startswith("frag_"):
        return (f"Definition: measured on the {meta['yardstick']} yardstick (capacity unused by p99 usage on occupied hosts) for both "
                f"configurations; the paper measures each under its own limits. Move budget: {budget_text}.")
    share = before["tasks_at_risk"] / meta["n_tasks"] if meta["n_tasks"] else float("nan")
    return (f"Trace shape: {fmt_share(share)} of the tasks are at risk before any move (each task has its workload class's "
            f"Table III scores, as in the paper's Section III-C, and those are 0.6 or more per dimension even on the largest host: "
            f"two scored tasks on one host sum above 1). Move budget: {budget_text}.")


def _paper_section(comparison: pd.DataFrame, meta: dict[str, Any]) -> Section:
    rows = [[r["metric"], r["comparison"], fmt_change(r["paper"]), fmt_change(r["measured"]),
             "-" if r["same_direction"] is None else ("yes" if r["same_direction"] else "no"), r["why"]] for _, r in comparison.iterrows()]
    text = [f"Paper: the colocation paper's Section V-C (400 moves; ~37,000 tasks, ~18,000 hosts). Measured: this sweep "
            f"({meta['n_tasks']:,} tasks, {meta['n_hosts']:,} hosts, move budget "
            f"{'unlimited' if meta['options']['max_moves'] is None else format(meta['options']['max_moves'], ',')}). Changes are "
            "(configuration − reference) / reference on the sweep table (per-type TCO from the plans' by_type). "
            "The paper's ~75% WSL reduction is not compared: packer's WSL (Eq. 3) is the change a plan makes (see Fig. 10 below), "
            "and a ratio of two such changes is not the paper's quantity."]
    return Section("Reproducing the paper", text, None, [Table("paper", "Published vs measured changes",
                                                                ["metric", "comparison", "paper", "measured", "same direction", "why they differ"], rows)])


def sweep_sections(sweep: Sweep) -> list[Section]:
    """The sections of a sweep report (see the module doc)."""
    table, meta = sweep.table, sweep.meta
    options = meta["options"]
    budget = "unlimited" if options["max_moves"] is None else f"{options['max_moves']:,}"
    timings = meta.get("timings", {})
    intro = [
        f"Trace `{meta['trace']}`: {meta['n_tasks']:,} tasks on {meta['n_hosts']:,} hosts. Move budget {budget} per solve, "
        f"time limit {options['time_limit_s']:g} s per optimizer solve, optimizer `{options['solver']}`, goal {options['goal']}, seed {options['seed']}.",
        f"{meta['grid_points']} grid points ({len(options['configs'])} configurations × weights {', '.join(weight_label(w) for w in options['weights'])} "
        f"where the weight enters, plus {len(options['baselines'])} baseline policies) took {meta['solves']} solves ({meta['solves_reused']} reused); "
        f"total wall time {fmt_number(timings.get('total_s'))} s.",
        f"Yardstick: fragmentation, interference, tasks at risk and relative performance of every point are measured on the "
        f"`{meta['yardstick']}` problem, so points compare on one scale; baseline policies ran on `{table.loc[table['kind'] == BASELINE, 'config'].iloc[0] if (table['kind'] == BASELINE).any() else '-'}`.",
    ]
    if meta.get("errors"):
        intro.append("Failed solves (status error, no plan): " + "; ".join(f"`{c}`: {why}" for c, why in meta["errors"].items()) + ".")
    if meta.get("skipped"):
        intro.append("Skipped configurations: " + "; ".join(f"`{c}`: {why}" for c, why in meta["skipped"].items()) + ".")
    if not meta.get("has_usage", True):
        intro.append("This trace has requests only (no usage samples): only request-based configurations apply, and tasks at risk "
                     "cannot be measured (no sensitivity characterization), so the SLO axis is 0 for every point.")
    sections = [Section("Sweep", intro), _pareto_section(table, meta)]
    dominance = _dominance_section(meta)
    if dominance:
        sections.append(dominance)
    weight = _representative_sens_weight(table)
    points = _figure_points(table, weight)
    summaries = _read_summaries(sweep, points) if not points.empty else {}
    comparison = paper_comparison(table, meta, summaries)
    if comparison is not None:
        sections.append(_paper_section(comparison, meta))
    if not points.empty:
        sections += _arch_sections(points, summaries)
    ref_name, ref = _reference(table, meta)
    frag_dims = [c.removeprefix("frag_") for c in table.columns if c.startswith("frag_") and not c.startswith("frag_share_")]
    sections.append(_change_section(
        table, ref_name, ref, "fragmentation", "Fragmentation change vs Baseline (Fig. 9)", [(f"frag_{d}", f"fragmentation {d}") for d in frag_dims],
        f"Eq. 2 fragmentation (capacity unused on occupied hosts; cpu in reference cores, mem GiB) on the yardstick, change vs {ref_name}; "
        "lower is better. The share columns divide it by the occupied hosts' capacity.",
        _count_or_number, tuple((f"frag_share_{d}", f"share {d}") for d in frag_dims)))
    sections.append(_wsl_section(table))
    sections.append(_change_section(
        table, ref_name, ref, "interference", "Interference and tasks at risk vs Baseline (Fig. 12)",
        [("tasks_at_risk", "tasks at risk"), ("interference", "interference")] + [(f"interference_{d}", f"interference {d}") for d in meta.get("sens_dims", [])],
        f"Tasks at risk: tasks on a host whose summed normalized sensitivity exceeds 1 in some dimension; interference: Eq. 4. "
        f"Change vs {ref_name}; negative is better.", _count_or_number))
    sections.append(_rp_section(table, meta))
    return sections


# --- plan report ---


def plan_sections(summary: dict[str, Any]) -> list[Section]:
    """The sections of a single plan's report, all from its ``summary.json``."""
    if summary.get("format") != PLAN_FORMAT:
        raise InputError(f"plan summary format {summary.get('format')!r}: reports need {PLAN_FORMAT} (re-solve the plan)")
    ctx, before, after = summary["context"], summary["metrics"]["before"], summary["metrics"]["after"]
    budget = "unlimited" if ctx["max_moves"] is None else f"{ctx['max_moves']:,}"
    intro = [f"Trace `{ctx['trace']}`; configuration `{ctx['config']}`, goal {ctx['weights']['goal']}, sensitivity weight "
             f"{weight_label(ctx['weights']['sensitivity'])}, solver `{summary['solver']['name']}` ({summary['status']}, {fmt_number(summary['runtime_s'])} s), "
             f"{summary['moves']['count']:,} moves (budget {budget}). Objective {fmt_number(summary['objective']['total'])}, "
             f"bound {fmt_number(summary['bound'])}, gap {fmt_share(summary['gap'])}."]
    rows = [["occupied hosts", fmt_count(before["hosts"]), fmt_count(after["hosts"]), fmt_change(relative_change(after["hosts"], before["hosts"]))],
            ["TCO (cost units)", fmt_number(before["tco"]), fmt_number(after["tco"]), fmt_change(relative_change(after["tco"], before["tco"]))],
            ["WSL (score-weighted hosts)", "-", fmt_number(summary["fleet_change"]["wsl"]), "-"],
            ["colocation factor", fmt_number(before["colocation"]), fmt_number(after["colocation"]), fmt_change(relative_change(after["colocation"], before["colocation"]))]]
    rows += [[f"fragmentation {d}", fmt_number(before["fragmentation"][d]), fmt_number(after["fragmentation"][d]),
              fmt_change(relative_change(after["fragmentation"][d], before["fragmentation"][d]))] for d in after["fragmentation"]]
    rows += [[f"interference {d}", fmt_number(before["interference"][d]), fmt_number(after["interference"][d]),
              fmt_change(relative_change(after["interference"][d], before["interference"][d]))] for d in after["interference"]]
    rows += [["tasks at risk", fmt_count(before["tasks_at_risk"]), fmt_count(after["tasks_at_risk"]),
              fmt_change(relative_change(after["tasks_at_risk"], before["tasks_at_risk"]))]]
    sections = [Section("Plan", intro, None, [Table("headline", "Before and after", ["metric", "before", "after", "change"], rows)])]

    by_arch = summary["by_arch"]
    archs = list(by_arch)
    fig, (ax1, ax2) = _figure(2, 11, 4)
    _grouped_bars(ax1, archs, {"moved out": [by_arch[a]["moved_out"] for a in archs], "moved in": [by_arch[a]["moved_in"] for a in archs]}, "tasks",
                  "Tasks moved per architecture (Fig. 7)")
    _grouped_bars(ax2, archs, {"freed": [by_arch[a]["freed"] for a in archs], "newly occupied": [by_arch[a]["newly_occupied"] for a in archs]}, "hosts",
                  "Hosts freed and newly occupied (Fig. 8)")
    arch_rows = [[a, str(by_arch[a]["type"]), fmt_count(by_arch[a]["hosts"]), fmt_count(by_arch[a]["hosts_before"]), fmt_count(by_arch[a]["hosts_after"]),
                  fmt_count(by_arch[a]["freed"]), fmt_count(by_arch[a]["newly_occupied"]), fmt_count(by_arch[a]["moved_out"]), fmt_count(by_arch[a]["moved_in"]),
                  fmt_number(by_arch[a]["tco_before"]), fmt_number(by_arch[a]["tco_after"]), fmt_number(by_arch[a]["wsl"])] for a in archs]
    moves = summary.get("moves_by_arch", {})
    matrix = [[src] + [fmt_count(moves.get(src, {}).get(dst, 0)) for dst in archs] for src in archs]
    sections.append(Section("Hosts freed and tasks moved per architecture (Figs. 7-8)", [], ("arch_moves.png", _png(fig), "tasks moved and hosts freed per architecture"), [
        Table("arch", "Per architecture", ["arch", "type", "hosts", "occupied before", "occupied after", "hosts freed", "newly occupied", "tasks moved out",
                                           "tasks moved in", "TCO before", "TCO after", "WSL"], arch_rows),
        Table("moves", "Moved tasks by source (rows) and destination (columns) architecture", ["from \\ to", *archs], matrix)]))

    dims = list(after["fragmentation"])
    fig, (ax1, ax2) = _figure(2, 10, 4)
    _grouped_bars(ax1, dims, {"before": [100 * (before["fragmentation_share"][d] or 0) for d in dims], "after": [100 * (after["fragmentation_share"][d] or 0) for d in dims]},
                  "% of occupied capacity unused", "Fragmentation (Eq. 2, Fig. 9)")
    _grouped_bars(ax2, archs, {"WSL": [by_arch[a]["wsl"] for a in archs]}, "score-weighted hosts", "WSL per architecture (Eq. 3, Fig. 10)")
    frag_rows = [[d, fmt_number(before["fragmentation"][d]), fmt_number(after["fragmentation"][d]), fmt_share(before["fragmentation_share"][d]),
                  fmt_share(after["fragmentation_share"][d])] for d in dims]
    type_rows = [[t, fmt_count(r["hosts_before"]), fmt_count(r["hosts_after"]), fmt_number(r["tco_before"]), fmt_number(r["tco_after"]), fmt_number(r["wsl"])]
                 for t, r in summary["by_type"].items()]
    sections.append(Section("Fragmentation, WSL and hosts used (Figs. 9-10)", ["Measured under the plan's own configuration (its limits are the load)."],
                            ("fragmentation_wsl.png", _png(fig), "fragmentation and WSL"), [
        Table("fragmentation", "Fragmentation", ["dimension", "before", "after", "share before", "share after"], frag_rows),
        Table("types", "Per umbrella type", ["type", "occupied before", "occupied after", "TCO before", "TCO after", "WSL"], type_rows)]))

    fig, (ax,) = _figure(1, 9, 4)
    _grouped_bars(ax, archs, {"before": [by_arch[a]["colocation_before"] or np.nan for a in archs], "after": [by_arch[a]["colocation_after"] or np.nan for a in archs]},
                  "tasks per occupied host", "Colocation factor (Fig. 11)")
    sections.append(Section("Colocation factor (Fig. 11)", [], ("colocation.png", _png(fig), "colocation factor"), [Table(
        "colocation", "Colocation factor (tasks per occupied host)", ["arch", "before", "after"],
        [[a, fmt_number(by_arch[a]["colocation_before"]), fmt_number(by_arch[a]["colocation_after"])] for a in archs])]))

    sens = list(after["interference"])
    if sens:
        fig, (ax1, ax2) = _figure(2, 10, 4)
        _grouped_bars(ax1, sens, {"before": [before["interference"][d] for d in sens], "after": [after["interference"][d] for d in sens]},
                      "summed excess over 1", "Interference per dimension (Eq. 4, Fig. 12)")
        _grouped_bars(ax2, ["tasks at risk"], {"before": [before["tasks_at_risk"]], "after": [after["tasks_at_risk"]]}, "tasks", "Tasks at risk (Fig. 12)")
        sections.append(Section("Interference (Fig. 12)", [], ("interference.png", _png(fig), "interference"), [Table(
            "interference", "Interference", ["dimension", "before", "after"],
            [[d, fmt_number(before["interference"][d]), fmt_number(after["interference"][d])] for d in sens]
            + [["tasks at risk", fmt_count(before["tasks_at_risk"]), fmt_count(after["tasks_at_risk"])]])]))
    else:
        sections.append(Section("Interference (Fig. 12)", [f"Configuration `{ctx['config']}` has no sensitivity dimensions: interference is not measured "
                                                           "in this plan (a sweep measures every point on one yardstick)."]))

    rp = summary.get("relative_performance")
    if rp:
        groups = ["all", *rp["after"].get("by_arch", {})]
        fig, (ax,) = _figure(1, 10, 4)
        get = {g: (rp["before"]["all"] if g == "all" else rp["before"]["by_arch"].get(g), rp["after"]["all"] if g == "all" else rp["after"]["by_arch"].get(g))
               for g in groups}
        _grouped_bars(ax, groups, {f"{stat} {when}": [((get[g][i] or {}).get(stat) if (get[g][i] or {}).get(stat) is not None else np.nan) for g in groups]
                                   for stat in ("p5", "median") for i, when in enumerate(("before", "after"))},
                      "relative performance (0 = at goal)", "Relative performance by the task's architecture")
        rows = [_rp_rows(f"{g} before", get[g][0]) for g in groups] + [_rp_rows(f"{g} after", get[g][1]) for g in groups]
        sections.append(Section("Relative performance", ["Per task RP (packer.rpf; 0 = at goal), overall and by the architecture of the task's host."],
                                ("rp.png", _png(fig), "relative performance"), [Table("rp", "Relative performance", ["group", "tasks", "min", "p5", "median", "tasks below 0"], rows)]))
    return sections


# --- rendering ---


def render_markdown(title: str, sections: list[Section]) -> str:
    """The Markdown report: headings, paragraphs, linked PNGs and pipe tables."""
    lines = [f"# {title}", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for paragraph in section.text:
            lines += [paragraph, ""]
        if section.figure:
            name, _, alt = section.figure
            lines += [f"![{alt}]({name})", ""]
        for table in section.tables:
            lines += [f"**{table.caption}**", ""]
            lines.append("| " + " | ".join(_md_cell(h) for h in table.headers) + " |")
            lines.append("|" + "|".join("---" for _ in table.headers) + "|")
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
            lines.append("")
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


_CSS = """body{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}img{max-width:100%}caption{font-weight:bold;text-align:left;padding:4px 0}"""


def render_html(title: str, sections: list[Section]) -> str:
    """One self-contained HTML page: figures embedded as ``data:image/png;base64`` URIs."""
    parts = [f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts += [f"<p>{_inline_code(paragraph)}</p>" for paragraph in section.text]
        if section.figure:
            name, png, alt = section.figure
            parts.append(f"<img alt=\"{html.escape(alt)}\" data-file=\"{html.escape(name)}\" src=\"data:image/png;base64,{base64.b64encode(png).decode('ascii')}\">")
        for table in section.tables:
            parts.append(f"<table id=\"{html.escape(table.key)}\"><caption>{html.escape(table.caption)}</caption>")
            parts.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in table.headers) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in table.rows]
            parts.append("</table>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _inline_code(text: str) -> str:
    """Escape ``text`` and turn Markdown `code` spans into <code>."""
    pieces = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(pieces))


@dataclass(frozen=True)
class ReportFiles:
    """Where a report was written: the folder, its HTML page and Markdown file, and which kind of input it came from."""

    folder: Path
    html: Path
    markdown: Path
    kind: str


def report_sections(source: str | Path) -> tuple[str, str, list[Section]]:
    """Kind (``"sweep"`` or ``"plan"``), title and sections of the report of ``source`` (a sweep or plan folder)."""
    source = Path(source)
    if (source / SWEEP_FILE).exists():
        sweep = read_sweep(source)
        return "sweep", f"Sweep report: {Path(sweep.meta['trace']).name}", sweep_sections(sweep)
    summary_file = source / SUMMARY_FILE
    if summary_file.exists():
        summary = read_json_object(summary_file)
        if "context" not in summary:
            raise InputError([Problem(str(summary_file), "context", "missing: not a packer plan summary", 0)])
        return "plan", f"Plan report: {Path(summary['context']['trace']).name}, {summary['context']['config']}", plan_sections(summary)
    raise InputError(f"{source}: neither a sweep folder ({SWEEP_FILE}) nor a plan folder ({SUMMARY_FILE})")


def write_report(source: str | Path, out: str | Path | None = None) -> ReportFiles:
    """Render the report of ``source`` (a plan or sweep folder) into ``out`` (default ``<source>/report``) atomically."""
    source = Path(source)
    out = Path(out) if out is not None else source / REPORT_DIR
    if out.resolve() == source.resolve() or out.resolve() in source.resolve().parents:
        raise InputError(f"report folder {out} would replace its input {source}; choose another --out")
    kind, title, sections = report_sections(source)
    with atomic_dir(out) as tmp:
        for section in sections:
            if section.figure:
                name, png, _ = section.figure
                (tmp / name).write_bytes(png)
        (tmp / MARKDOWN_FILE).write_text(render_markdown(title, sections))
        (tmp / HTML_FILE).write_text(render_html(title, sections))
    return ReportFiles(out, out / HTML_FILE, out / MARKDOWN_FILE, kind)
