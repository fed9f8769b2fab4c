"""Review reports of a plan or a sweep: one self-contained HTML page and a Markdown file with PNG plots.

``packer report PLAN_OR_SWEEP`` renders, from a plan folder (``summary.json``) or a
sweep folder (``sweep.json`` + ``sweep.parquet``, :mod:`packer.report.sweep`), what a capacity
engineer needs to decide and the figures of the colocation paper's Section V-C:

* for a sweep, first the answer: the recommended point (:func:`recommend`, rule
  :data:`RECOMMENDATION_RULE`), one sentence per optimizer point on the TCO-vs-tasks-at-risk
  Pareto front (:func:`front_sentences`: cost freed, moves, tasks at risk today → then), what
  tasks at risk counts on the sweep's sensitivity basis (:func:`risk_definition`) and how
  many tasks have no sensitivity score (:func:`unscored_text`, from ``score_sources``);
* the TCO-vs-SLO Pareto plot (sweep only; points numbered by the sweep table's ``#``);
* hosts freed and tasks moved per architecture (Figs. 7-8);
* fragmentation change vs Baseline (Fig. 9);
* WSL and hosts used (Fig. 10);
* colocation factor per architecture (Fig. 11);
* interference and tasks at risk (Fig. 12);
* the relative-performance distribution (:mod:`packer.model.rpf`);
* for a sweep holding the Baseline, P99 and P99 Sens configurations, the measured
  changes next to the paper's published ones (:data:`PAPER_CHANGES`, every one against
  Baseline, P99 Sens being :func:`paper_sens_point`).

Every number comes from a ``summary.json`` or the sweep table, which
:mod:`packer.model.metrics` computed; this module only selects, subtracts ("frees": today's
TCO − the point's), divides one by another for shares and for "change vs Baseline"
(``(x − x_Baseline) / |x_Baseline|``), formats and plots. Each figure is followed by
the table of the numbers behind it. In a sweep, fragmentation, interference, tasks at
risk and relative performance are the sweep table's (measured on the sweep's yardstick,
see :mod:`packer.report.sweep`); hosts, TCO, moves and the per-architecture figures come from
each point's plan summary. Every figure draws a configuration, a baseline policy and the
current placement in one colour (:data:`COLOURS`, :func:`colour_of`).

The report folder (default ``<input>/report``) is written atomically: ``report.html``
(images embedded as base64 data URIs: one file to mail or attach), ``report.md`` and
the PNGs it links.
"""
from __future__ import annotations

import base64
import html
import io
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from packer.io.atomic import atomic_dir
from packer.errors import InputError, Problem
from packer.plan.context import PlanContext
from packer.plan.plan import FORMAT as PLAN_FORMAT
from packer.plan.plan import SUMMARY_FILE, format_gap
from packer.report.markdown import markdown_table
from packer.report.sweep import BASELINE, OPTIMIZER, SWEEP_FILE, Sweep, read_sweep, weight_label
from packer.io.trace import read_json_object

#: Plan formats a report reads: today's, and packer-plan/3, whose summary has every key the report shows.
REPORTABLE_FORMATS = (PLAN_FORMAT, "packer-plan/3")

REPORT_DIR = "report"
HTML_FILE = "report.html"
MARKDOWN_FILE = "report.md"

#: Reference configuration of "change vs Baseline" (Table IV's Baseline).
REFERENCE_CONFIG = "baseline"
#: The configuration with sensitivity whose points stand for the paper's P99 Sens (:func:`paper_sens_point`).
SENS_CONFIG = "p99-sens"
#: Share of tasks at risk in the current placement from which the count is called saturated in the report.
SATURATED_RISK = 0.9

#: Table IV's configurations as the paper names them.
CONFIG_NAMES = {"baseline": "Baseline", "p99-cpu": "P99 CPU", "p99-mem": "P99 Mem", "p99": "P99", "p99-sens": "P99 Sens"}
#: The one colour of each configuration, baseline policy and the current placement, in every figure (matplotlib's tab10 and tab20b).
COLOURS = {
    "current": "#7f7f7f",
    "baseline": "#1f77b4", "p99-cpu": "#ff7f0e", "p99-mem": "#2ca02c", "p99": "#d62728", "p99-sens": "#9467bd",
    "baseline-random": "#8c564b", "baseline-least-loaded": "#e377c2", "baseline-ffd": "#bcbd22", "baseline-paragon": "#17becf",
    "baseline-tarcil": "#393b79",
}
#: Colours of configurations outside :data:`COLOURS` (custom presets), picked by a stable hash of the name.
SPARE_COLOURS = ("#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d")
#: How the recommended point is drawn in the per-architecture figures (on top of its colour).
HIGHLIGHT = {"hatch": "//", "edgecolor": "black", "linewidth": 1.5}

#: Score sources of ``sweep.json``'s ``score_sources`` (:mod:`packer.characterization.sensitivity`), in order, with what each means.
SCORE_SOURCES = {
    "service": "its service has measured scores (a row of the sensitivity table)",
    "class": "its workload class's scores (a class row of the table, or the class's measured services)",
    "nearest-class": "the scores of the nearest scored class (its own class has none)",
    "none": "no score: no class of the trace has scores to lend",
}

#: The recommendation rule as the report states it (:func:`recommend` implements it).
RECOMMENDATION_RULE = (
    "among the optimizer points on the TCO-vs-tasks-at-risk Pareto front, the one with the lowest TCO whose tasks at risk do not "
    "exceed today's (ties: fewer tasks at risk, then sweep order); if every front point has more tasks at risk than today, the front "
    "point with the fewest tasks at risk (ties: lowest TCO, then sweep order). Baseline policies are compared, never recommended.")


@dataclass(frozen=True)
class PaperChange:
    """One change the colocation paper publishes (Section V-C): ``metric`` of ``config`` vs ``reference``.

    ``paper``: the relative change as a fraction (−0.5 = 50% fewer); ``quote``: the
    paper's words; ``column``: the sweep-table column, or ``tco_type_<T>`` for the TCO of
    umbrella type T (from the plans' ``by_type`` tables); ``unit``: what the two compared
    numbers count.
    """

    metric: str
    config: str
    reference: str
    column: str
    paper: float
    quote: str
    unit: str


#: The paper's published changes (Section V-C, 400 moves, ~37,000 tasks, ~18,000 hosts), every one against its Baseline configuration.
PAPER_CHANGES = (
    PaperChange("hosts used", "p99", "baseline", "hosts", -0.50, "Compared to the baseline, the P99 configuration reduces hosts utilized by ~50%", "hosts"),
    PaperChange("TCO", "p99", "baseline", "tco", -0.3994, "reduce overall TCO cost by 39.94%", "cost units"),
    PaperChange("TCO of Type II hosts", "p99", "baseline", "tco_type_II", -0.3186, "reduce Type II server cost by 31.86%", "cost units"),
    PaperChange("TCO of Type I hosts", "p99", "baseline", "tco_type_I", -0.7142, "Type I cost by 71.42%", "cost units"),
    PaperChange("CPU fragmentation", "p99", "baseline", "frag_cpu", -0.60, "reduction in CPU and memory fragmentation by ~60%", "reference cores unused"),
    PaperChange("memory fragmentation", "p99", "baseline", "frag_mem", -0.60, "reduction in CPU and memory fragmentation by ~60%", "GiB unused"),
    PaperChange("tasks at risk", "p99", "baseline", "tasks_at_risk", +0.25,
                "For P99 configuration, there are ~25% more tasks that experience SLI degradation compared to the baseline", "tasks at risk"),
    PaperChange("tasks at risk", "p99-sens", "baseline", "tasks_at_risk", -0.22,
                "with P99 Sens we are able to reduce up to ~22% of tasks experiencing SLI degradation compared to baseline", "tasks at risk"),
    PaperChange("hosts used", "p99-sens", "baseline", "hosts", +0.30, "Compared to the baseline, ... P99 Sens increase hosts utilized by ~30%", "hosts"),
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
    """A heading, paragraphs, a bulleted list, at most one figure (file name, PNG bytes, alt text) and its tables."""

    title: str
    text: list[str] = field(default_factory=list)
    figure: tuple[str, bytes, str] | None = None
    tables: list[Table] = field(default_factory=list)
    bullets: list[str] = field(default_factory=list)


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


# --- colours and names: one mapping for every figure ---


def colour_of(name: str) -> str:
    """The colour of a configuration, a baseline policy or ``current`` (the single mapping every figure uses)."""
    return COLOURS.get(name) or SPARE_COLOURS[zlib.crc32(name.encode()) % len(SPARE_COLOURS)]


def point_colour(row: pd.Series | dict[str, Any]) -> str:
    """A sweep point's colour: its configuration's for the optimizer, its policy's for a baseline policy."""
    return colour_of(row["point"] if row["kind"] == BASELINE else row["config"])


def point_label(row: pd.Series | dict[str, Any]) -> str:
    """A sweep point as a reader names it: ``P99 Sens w=0.3``, ``P99 Sens, no new risk``, ``P99``, or a baseline policy's name."""
    if row["kind"] == BASELINE:
        return str(row["point"])
    name = CONFIG_NAMES.get(row["config"], row["config"])
    guard = row.get("max_new_at_risk")
    if guard is not None and pd.notna(guard):
        return f"{name}, no new risk" if guard == 0 else f"{name}, at most {fmt_count(guard)} more at risk"
    weight = row.get("weight")
    return f"{name} w={weight_label(weight)}" if weight is not None and pd.notna(weight) else name


# --- tasks at risk: what the count means, on which basis ---


def risk_basis(basis: str | None, measured: bool) -> str:
    """The tag every tasks-at-risk number carries: ``need basis``, ``host basis``, ``basis not recorded`` or ``not measured``."""
    if not measured:
        return "not measured"
    return f"{basis} basis" if basis else "basis not recorded"


def risk_definition(basis: str | None, measured: bool, unmeasured: str = "the sweep's yardstick has no sensitivity scores") -> str:
    """The sentence defining tasks at risk and naming its basis (``unmeasured``: why there is no count, when ``measured`` is false)."""
    if not measured:
        return f"Tasks at risk are not measured: {unmeasured}, so every tasks-at-risk count in this report is 0 and means nothing."
    meaning = {"need": "a score is a fraction of the task's own requested need", "host": "a score is a fraction of the whole host"}
    how = (f"on the `{basis}` basis ({meaning.get(basis, 'see packer.characterization.normalize')})" if basis
           else "on a sensitivity basis this input does not record (written before packer recorded it)")
    return (f"Tasks at risk: tasks on hosts whose summed sensitivity exceeds 1 in some dimension (the colocation paper's count beside "
            f"Eq. 4), {how}.")


def unscored_text(sources: dict[str, int]) -> str | None:
    """How many tasks have no sensitivity score and what that means for tasks at risk; None without ``score_sources``."""
    total = sum(sources.values())
    if not total:
        return None
    none = sources.get("none", 0)
    if not none:
        return f"0 of {total:,} tasks have no sensitivity score: every task adds its own score to its host's summed sensitivity."
    return (f"{none:,} of {total:,} tasks have no sensitivity score ({SCORE_SOURCES['none'].removeprefix('no score: ')}): they add "
            "nothing to any host's summed sensitivity, so they never put a host at risk; like every task, one is counted at risk only "
            "when scored tasks push its host over 1.")


def _score_sources_table(sources: dict[str, int]) -> Table:
    total = sum(sources.values())
    rows = [[name, fmt_count(sources.get(name, 0)), fmt_share(sources.get(name, 0) / total), SCORE_SOURCES[name]] for name in SCORE_SOURCES]
    return Table("score_sources", "Where each task's sensitivity score comes from", ["source", "tasks", "share", "what it means"], rows)


# --- the recommendation ---


@dataclass(frozen=True)
class Recommendation:
    """The recommended sweep point: its name and ``within_today`` (True when its tasks at risk do not exceed today's)."""

    point: str
    within_today: bool


def _front(table: pd.DataFrame) -> pd.DataFrame:
    """The optimizer points on the TCO-vs-tasks-at-risk front, cheapest first."""
    front = table[(table["kind"] == OPTIMIZER) & table["pareto"].astype(bool) & table["tco"].notna()]
    return front.sort_values(["tco", "tasks_at_risk"], kind="stable")


def recommend(table: pd.DataFrame, current_risk: float) -> Recommendation | None:
    """The sweep point to recommend, by :data:`RECOMMENDATION_RULE`; None when no optimizer point is on the front.

    ``table``: the sweep table (``point``, ``kind``, ``tco`` in cost units, ``tasks_at_risk``
    in tasks, ``pareto``: on the TCO-vs-tasks-at-risk front); ``current_risk``: tasks at risk
    in today's placement. Among the optimizer points on the front, the lowest-TCO one whose
    tasks at risk are at most ``current_risk`` (ties: fewer tasks at risk, then table order);
    if there is none, the front point with the fewest tasks at risk (ties: lowest TCO, then
    table order).
    """
    front = _front(table)
    within = front[front["tasks_at_risk"] <= current_risk]
    if not within.empty:
        return Recommendation(str(within.sort_values(["tco", "tasks_at_risk"], kind="stable")["point"].iloc[0]), True)
    if front.empty:
        return None
    return Recommendation(str(front.sort_values(["tasks_at_risk", "tco"], kind="stable")["point"].iloc[0]), False)


def point_sentence(label: str, tco: float, moves: float, tasks_at_risk: float, current: dict[str, Any], basis: str) -> str:
    """One sentence a capacity engineer can act on: cost freed vs today, moves, tasks at risk today → at the point.

    ``tco`` (cost units), ``moves`` and ``tasks_at_risk`` (tasks) are the point's; ``current``
    today's (``tco``, ``tasks_at_risk``); ``basis``: :func:`risk_basis`'s tag. Freed cost is
    today's TCO minus the point's, also as a share of today's TCO.
    """
    freed = current["tco"] - tco
    share = freed / current["tco"] if current["tco"] else float("nan")
    cost = (f"frees {fmt_number(freed)} cost units ({fmt_share(share)} of today's TCO)" if freed >= 0
            else f"costs {fmt_number(-freed)} cost units more than today ({fmt_share(-share)} of today's TCO)")
    risk = ("tasks at risk not measured" if basis == "not measured"
            else f"tasks at risk {fmt_count(current['tasks_at_risk'])} → {fmt_count(tasks_at_risk)} ({basis})")
    return f"{label}: {cost} with {fmt_count(moves)} moves; {risk}."


def front_sentences(table: pd.DataFrame, current: dict[str, Any], basis: str) -> list[str]:
    """:func:`point_sentence` for each optimizer point on the front, cheapest first; points with equal TCO, moves and tasks at risk share one."""
    groups = _front(table).groupby(["tco", "moves", "tasks_at_risk"], sort=False, dropna=False)
    return [point_sentence(_group_label(group), *group[["tco", "moves", "tasks_at_risk"]].iloc[0], current, basis) for _, group in groups]


def _group_label(group: pd.DataFrame) -> str:
    """``P99 Sens w=0.1, 0.3 (`p99-sens-w0.1`, `p99-sens-w0.3`: ...)`` for points that measure alike, or one point's label."""
    if len(group) == 1:
        return f"{point_label(group.iloc[0])} (`{group['point'].iloc[0]}`)"
    config = group["config"].iloc[0]
    if (group["config"] == config).all() and group["weight"].notna().all() and group["max_new_at_risk"].isna().all():
        group = group.sort_values("weight", kind="stable")
        label = f"{CONFIG_NAMES.get(config, config)} w={', '.join(weight_label(w) for w in group['weight'])}"
    else:
        label = " = ".join(point_label(r) for _, r in group.iterrows())
    return f"{label} ({', '.join(f'`{p}`' for p in group['point'])}: the same TCO, moves and tasks at risk)"


def _answer_section(table: pd.DataFrame, meta: dict[str, Any], recommended: Recommendation | None) -> Section:
    """The top of a sweep report: the recommended point, the front in sentences, what tasks at risk means, unscored tasks."""
    current, basis = meta["current"], risk_basis(meta.get("sensitivity_basis"), bool(meta.get("sens_dims")))
    if recommended is None:
        text = ["No recommendation: no optimizer point is on the TCO-vs-tasks-at-risk Pareto front (see the sweep table)."]
    else:
        row = table[table["point"] == recommended.point].iloc[0]
        why = ("the cheapest point on the front that does not put more tasks at risk than today" if recommended.within_today
               else "every optimizer point on the front puts more tasks at risk than today; this one the fewest")
        sentence = point_sentence(f"{point_label(row)} (`{row['point']}`)", row["tco"], row["moves"], row["tasks_at_risk"], current, basis)
        text = [f"Recommended: {sentence} Why: {why}."]
    text.append(f"The rule: {RECOMMENDATION_RULE}")
    text.append(risk_definition(meta.get("sensitivity_basis"), bool(meta.get("sens_dims"))))
    sources = meta.get("score_sources") or {}
    unscored = unscored_text(sources)
    if unscored:
        text.append(unscored)
    text.append(f"Today: TCO {fmt_number(current['tco'])} cost units on {fmt_count(current['hosts'])} occupied hosts. "
                "The optimizer points on the Pareto front, cheapest first:")
    return Section("Recommendation", text, None, [_score_sources_table(sources)] if unscored else [], front_sentences(table, current, basis))


# --- figures ---


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def _grouped_bars(ax, labels: list[str], series: dict[str, list[float]], ylabel: str, title: str,
                  styles: dict[str, dict[str, Any]] | None = None) -> None:
    """Bars of several series side by side per label (NaN bars are left out); ``styles``: ``ax.bar`` keywords per series name."""
    x = np.arange(len(labels))
    width = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, np.nan_to_num(np.asarray(values, dtype=float)), width, label=name,
               **(styles or {}).get(name, {}))
    ax.set_xticks(x, labels, rotation=35, ha="right", fontsize=8)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if len(series) > 1:
        ax.legend(fontsize=7)


#: Shades (opacity) and fill patterns telling apart several metrics drawn in each point's colour (:func:`_point_bars`).
_METRIC_STYLES = tuple({"alpha": a, "hatch": h} for a, h in zip((1.0, 0.7, 0.5, 0.38, 0.28, 0.2), ("", "//", "..", "xx", "++", "--")))


def _point_bars(ax, points: pd.DataFrame, series: dict[str, list[float]], ylabel: str, title: str, recommended: str | None) -> None:
    """One group of bars per sweep point, each in the point's colour; several metrics (``series``) told apart by shade and hatching.

    The recommended point's tick label is bold.
    """
    labels = points["point"].tolist()
    colours = [point_colour(r) for _, r in points.iterrows()]
    x = np.arange(len(labels))
    width = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, np.nan_to_num(np.asarray(values, dtype=float)), width, color=colours,
               edgecolor="white", linewidth=0.4, **_METRIC_STYLES[i % len(_METRIC_STYLES)])
    ax.set_xticks(x, labels, rotation=35, ha="right", fontsize=8)
    for tick, label in zip(ax.get_xticklabels(), labels):
        if label == recommended:
            tick.set_fontweight("bold")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if len(series) > 1:
        ax.legend(handles=[Patch(facecolor="#555555", edgecolor="white", label=name, **_METRIC_STYLES[i % len(_METRIC_STYLES)])
                           for i, name in enumerate(series)], fontsize=7)


def _figure(n_panels: int = 1, width: float = 10.0, height: float = 4.0) -> tuple[Figure, list]:
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, n_panels, squeeze=False)[0]
    return fig, list(axes)


#: Gaps (points) between a marker and its label tried by :func:`place_labels`, nearest first.
LABEL_RINGS = (3.0, 9.0, 17.0, 27.0, 39.0, 53.0)
#: Directions tried on each ring: the four diagonals, then right, left, up, down.
_LABEL_DIRECTIONS = np.array([(1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1)], dtype=float)


def place_labels(anchors: np.ndarray, sizes: np.ndarray, bounds: tuple[float, float], marker: float = 4.0) -> np.ndarray:
    """Label offsets (N, 2), in points from each anchor to its label's centre, that keep labels apart and inside the axes.

    ``anchors`` (N, 2): the labelled points, in points from the axes' lower-left corner;
    ``sizes`` (N, 2): label widths and heights in points; ``bounds``: the axes' width and
    height in points; ``marker``: half a marker's size in points. Greedy, in input order:
    each label takes the nearest candidate (a gap of :data:`LABEL_RINGS` from its marker, in
    eight directions) that overlaps no label placed before it and no marker, stays inside
    the axes and is nearer its own point than any other (so it cannot be read as another
    point's); when none does, the candidate with the least overlapping area.
    """
    anchors = np.asarray(anchors, dtype=float).reshape(-1, 2)
    sizes = np.asarray(sizes, dtype=float).reshape(-1, 2)
    markers = np.hstack([anchors - marker, anchors + marker])
    placed = np.empty((0, 4))
    offsets = np.zeros_like(anchors)
    for i, (anchor, half) in enumerate(zip(anchors, sizes / 2)):
        candidates = np.concatenate([_LABEL_DIRECTIONS * (half + marker + gap) for gap in LABEL_RINGS])
        boxes = np.hstack([anchor + candidates - half, anchor + candidates + half])
        inside = _overlap(boxes, np.array([[0.0, 0.0, *bounds]]))[:, 0]
        others = np.delete(anchors, i, axis=0)
        nearest_other = np.linalg.norm((anchor + candidates)[:, None, :] - others[None, :, :], axis=2).min(axis=1, initial=np.inf)
        # Ambiguity costs less than any real overlap: it only breaks ties between overlap-free positions.
        ambiguous = nearest_other < np.linalg.norm(candidates, axis=1)
        cost = _overlap(boxes, np.vstack([placed, markers])).sum(axis=1) + (np.prod(2 * half) - inside) + 0.5 * ambiguous
        free = cost <= 1e-9
        best = int(np.argmax(free)) if free.any() else int(np.argmin(cost))
        offsets[i] = candidates[best]
        placed = np.vstack([placed, boxes[best]])
    return offsets


def _overlap(boxes: np.ndarray, others: np.ndarray) -> np.ndarray:
    """(len(boxes), len(others)) overlapping areas of boxes given as rows (x0, y0, x1, y1)."""
    width = np.minimum(boxes[:, None, 2], others[None, :, 2]) - np.maximum(boxes[:, None, 0], others[None, :, 0])
    height = np.minimum(boxes[:, None, 3], others[None, :, 3]) - np.maximum(boxes[:, None, 1], others[None, :, 1])
    return np.clip(width, 0, None) * np.clip(height, 0, None)


def compact_numbers(numbers: list[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3,5"``: the label of points drawn at one spot."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in runs)


def _label_points(ax, x: np.ndarray, y: np.ndarray, texts: list[str], fontsize: float = 7.0) -> None:
    """Annotate the points (data coordinates) with ``texts`` where :func:`place_labels` puts them, each tied to its point by a thin line.

    The axes' limits must be final and the figure laid out (``draw_without_rendering``): positions are measured in points.
    """
    fig = ax.figure
    to_points = 72.0 / fig.dpi
    box = ax.get_window_extent()
    anchors = (ax.transData.transform(np.column_stack([x, y])) - [box.x0, box.y0]) * to_points
    # Glyphs of the report's sans-serif font average about 0.6 em wide.
    sizes = np.array([[0.6 * fontsize * len(t) + 4.0, fontsize + 2.0] for t in texts])
    offsets = place_labels(anchors, sizes, (box.width * to_points, box.height * to_points))
    for xi, yi, text, offset in zip(x, y, texts, offsets):
        ax.annotate(text, (xi, yi), xytext=tuple(offset), textcoords="offset points", fontsize=fontsize, ha="center", va="center",
                    arrowprops={"arrowstyle": "-", "color": "0.55", "linewidth": 0.5, "shrinkA": 0, "shrinkB": 2})


# --- tables shared by both report kinds ---


def _rp_rows(label: str, rp: dict[str, Any] | None) -> list[str]:
    rp = rp or {}
    return [label, fmt_count(rp.get("tasks")), fmt_number(rp.get("min")), fmt_number(rp.get("p5")), fmt_number(rp.get("median")), fmt_count(rp.get("below_zero"))]


# --- sweep report ---


def _config_row(table: pd.DataFrame, config: str) -> pd.Series | None:
    """The optimizer's first placed row of ``config``."""
    rows = table[(table["kind"] == OPTIMIZER) & (table["config"] == config) & table["tco"].notna()]
    return None if rows.empty else rows.iloc[0]


def paper_sens_point(table: pd.DataFrame) -> pd.Series | None:
    """The P99 Sens point standing for the paper's: the placed ``p99-sens`` optimizer point with the fewest tasks at risk.

    Any weight of the ladder (and its refinements) competes; the no-new-risk point (a
    ``max_new_at_risk`` guard, not a Table IV configuration) does not. Ties: lowest TCO,
    then table order. The paper reports what P99 Sens achieves "up to" (~22% fewer tasks at
    risk than Baseline), i.e. at its best weight. None when no such point was placed.
    """
    rows = table[(table["kind"] == OPTIMIZER) & (table["config"] == SENS_CONFIG) & table["max_new_at_risk"].isna() & table["tco"].notna()]
    return None if rows.empty else rows.sort_values(["tasks_at_risk", "tco"], kind="stable").iloc[0]


def _table_iv_rows(table: pd.DataFrame) -> dict[str, pd.Series]:
    """One placed optimizer row per configuration, in sweep order; P99 Sens is :func:`paper_sens_point`."""
    configs = dict.fromkeys(table.loc[table["kind"] == OPTIMIZER, "config"])
    rows = {c: paper_sens_point(table) if c == SENS_CONFIG else _config_row(table, c) for c in configs}
    return {c: r for c, r in rows.items() if r is not None}


def _figure_points(table: pd.DataFrame, recommended: Recommendation | None) -> pd.DataFrame:
    """The points of the per-architecture figures: one per configuration (:func:`_table_iv_rows`), then the recommended point if it is not one of them."""
    rows = list(_table_iv_rows(table).values())
    if recommended is not None and recommended.point not in {r["point"] for r in rows}:
        rows.append(table[table["point"] == recommended.point].iloc[0])
    return pd.DataFrame(rows)


def _read_summaries(sweep: Sweep, points: pd.DataFrame) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for _, row in points.iterrows():
        path = sweep.path / row["plan"] / SUMMARY_FILE
        out[row["point"]] = read_json_object(path, f"file not found (the plan summary of sweep point {row['point']})")
    return out


def _reference(table: pd.DataFrame, meta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The row "change vs Baseline" divides by: the Baseline configuration's point, else the current placement."""
    row = _config_row(table, REFERENCE_CONFIG)
    if row is not None:
        return row["point"], row.to_dict()
    return "current placement", meta["current"]


def _sweep_basis(meta: dict[str, Any]) -> str:
    return risk_basis(meta.get("sensitivity_basis"), bool(meta.get("sens_dims")))


def _pareto_section(table: pd.DataFrame, meta: dict[str, Any], recommended: Recommendation | None) -> Section:
    placed = table[table["tco"].notna()]
    numbers = dict(zip(table["point"], range(1, len(table) + 1)))
    basis = _sweep_basis(meta)
    current = meta["current"]
    fig = Figure(figsize=(13, 5.5), layout="constrained")
    panels = list(fig.subplots(1, 2))
    spec = ((panels[0], "tasks_at_risk", "pareto", f"tasks at risk ({basis}; on a host with summed sensitivity > 1)"),
            (panels[1], "interference", "pareto_interference", "interference (Eq. 4, summed excess over 1)"))
    for panel, column, flag, xlabel in spec:
        for kind, marker in ((OPTIMIZER, "o"), (BASELINE, "X")):
            part = placed[placed["kind"] == kind]
            panel.scatter(part[column], part["tco"], marker=marker, s=40, c=[point_colour(r) for _, r in part.iterrows()], zorder=3)
        panel.scatter([current[column]], [current["tco"]], marker="*", s=160, color=colour_of("current"), zorder=3)
        if recommended is not None:
            rec = placed[placed["point"] == recommended.point]
            panel.scatter(rec[column], rec["tco"], s=260, facecolors="none", edgecolors="black", linewidths=1.8, zorder=4)
        front = placed[placed[flag]].sort_values([column, "tco"])
        panel.step(front[column], front["tco"], where="post", color="black", linestyle="--", linewidth=0.8, zorder=2)
        panel.set_xlabel(xlabel, fontsize=8)
        panel.set_ylabel("TCO (cost units)")
        panel.margins(0.1)
    panels[0].set_title("TCO vs tasks at risk (lower-left is better)", fontsize=10)
    panels[1].set_title("TCO vs interference", fontsize=10)
    fig.legend(handles=_pareto_legend(placed, recommended), loc="outside right upper", fontsize=7)
    # Labels are placed in points on the final layout: fix the limits, lay out once, then label both panels.
    for panel in panels:
        panel.set_xlim(panel.get_xlim())
        panel.set_ylim(panel.get_ylim())
    fig.draw_without_rendering()
    for panel, column, _, _ in spec:
        spots = placed.assign(n=placed["point"].map(numbers)).groupby([column, "tco"], sort=False)["n"].agg(list)
        _label_points(panel, spots.index.get_level_values(0).to_numpy(dtype=float), spots.index.get_level_values(1).to_numpy(dtype=float),
                      [compact_numbers(n) for n in spots])
    rows = [[str(numbers[r["point"]]), r["point"], r["kind"], r["config"], "-" if pd.isna(r["weight"]) else weight_label(r["weight"]), r["covers"] or "-",
             r["solver"], r["status"], fmt_number(r["tco"]), fmt_count(r["hosts"]), fmt_count(r["tasks_at_risk"]), fmt_number(r["interference"]),
             fmt_count(r["moves"]), fmt_number(r["wall_s"]), format_gap(None if pd.isna(r["gap"]) else r["gap"]), "yes" if r["pareto"] else "", "yes" if r["pareto_interference"] else "",
             "yes" if recommended is not None and r["point"] == recommended.point else ""] for _, r in table.iterrows()]
    rows.append(["-", "current placement", "-", "-", "-", "-", "-", "-", fmt_number(current["tco"]), fmt_count(current["hosts"]),
                 fmt_count(current["tasks_at_risk"]), fmt_number(current["interference"]), fmt_count(0), "-", "-", "", "", ""])
    text = [f"{len(table)} solves. Pareto front on TCO vs tasks at risk (no other point has lower-or-equal TCO and tasks at risk, one strictly "
            f"lower): {', '.join(meta['pareto']) or 'none'}; on TCO vs interference: {', '.join(meta['pareto_interference']) or 'none'}. "
            "`covers` lists the ladder weights a solve stands for (its problem does not depend on the weight).",
            "In the figure each point is numbered by the `#` column of the table below (points drawn at one spot share a label); "
            "circles are optimizer points and crosses baseline policies, in the colour of their configuration or policy; the star is "
            "today's placement, the dashed line the Pareto front"
            + (f", and the black ring the recommended point (`{recommended.point}`)." if recommended is not None else ".")]
    if meta["n_tasks"] and current["tasks_at_risk"] >= SATURATED_RISK * meta["n_tasks"]:
        text.append(f"{fmt_share(current['tasks_at_risk'] / meta['n_tasks'])} of the tasks are at risk ({basis}) already in the current placement: "
                    "the count is saturated (a task is at risk as soon as its host's sensitivity sum passes 1 in one dimension, whatever the "
                    "excess) and barely separates the points; interference (Eq. 4, the excess itself, which the sensitivity weight trades "
                    "against cost) does.")
    return Section("TCO vs SLO risk", text, ("pareto.png", _png(fig), "TCO vs tasks at risk and interference, every sweep point, numbered"), [Table(
        "sweep", f"Sweep table (the numbers behind the Pareto plot; tasks at risk: {basis})",
        ["#", "point", "kind", "config", "weight", "covers", "solver", "status", "TCO", "hosts", "tasks at risk", "interference", "moves", "wall s", "gap",
         "Pareto", "Pareto (interference)", "recommended"], rows)])


def _pareto_legend(placed: pd.DataFrame, recommended: Recommendation | None) -> list:
    """Legend entries: one per configuration or baseline policy drawn (its colour and marker), today, the front, the recommended ring."""
    keys = dict.fromkeys((r["point"] if r["kind"] == BASELINE else r["config"], r["kind"]) for _, r in placed.iterrows())
    handles = [Line2D([], [], linestyle="none", marker="o" if kind == OPTIMIZER else "X", color=colour_of(key),
                      label=CONFIG_NAMES.get(key, key) if kind == OPTIMIZER else key) for key, kind in keys]
    handles += [Line2D([], [], linestyle="none", marker="*", markersize=10, color=colour_of("current"), label="current placement"),
                Line2D([], [], color="black", linestyle="--", linewidth=0.8, label="Pareto front")]
    if recommended is not None:
        handles.append(Line2D([], [], linestyle="none", marker="o", markersize=12, markerfacecolor="none", markeredgecolor="black",
                              markeredgewidth=1.8, label=f"recommended: {recommended.point}"))
    return handles


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
        "dominance", f"Dominance check (tasks at risk: {_sweep_basis(meta)})",
        ["baseline", "TCO", "tasks at risk", "dominated", "by", "its TCO", "its tasks at risk", "interference", "dominated (interference)",
         "by (interference)", "current placement beats it"], rows)])


def _arch_sections(points: pd.DataFrame, summaries: dict[str, dict[str, Any]], recommended: Recommendation | None) -> list[Section]:
    """Figs. 7-8 (hosts freed, tasks moved per architecture) and Fig. 11 (colocation) for the figure points, the recommended one hatched."""
    archs = list(dict.fromkeys(a for s in summaries.values() for a in s["by_arch"]))
    names = points["point"].tolist()
    by_arch = {p: summaries[p]["by_arch"] for p in names}
    rec = recommended.point if recommended is not None else None
    styles = {r["point"]: {"color": point_colour(r), **(HIGHLIGHT if r["point"] == rec else {})} for _, r in points.iterrows()}
    styles["current"] = {"color": colour_of("current")}
    highlight = (f" The recommended point (`{rec}`) is drawn hatched with a black edge." if rec in names else "")
    fig, (ax1, ax2) = _figure(2, 12, 4.5)
    _grouped_bars(ax1, archs, {p: [by_arch[p].get(a, {}).get("moved_out", 0) for a in archs] for p in names}, "tasks",
                  "Tasks moved out of each architecture (Fig. 7)", styles)
    _grouped_bars(ax2, archs, {p: [by_arch[p].get(a, {}).get("freed", 0) - by_arch[p].get(a, {}).get("newly_occupied", 0) for a in archs] for p in names},
                  "hosts", "Hosts freed minus newly occupied (Fig. 8)", styles)
    rows = [[p, a, by_arch[p][a].get("type", "-"), fmt_count(by_arch[p][a]["freed"]), fmt_count(by_arch[p][a]["newly_occupied"]),
             fmt_count(by_arch[p][a]["moved_out"]), fmt_count(by_arch[p][a]["moved_in"]), fmt_count(by_arch[p][a]["hosts_before"]), fmt_count(by_arch[p][a]["hosts_after"])]
            for p in names for a in archs if a in by_arch[p]]
    moves = Section("Hosts freed and tasks moved per architecture (Figs. 7-8)",
                    ["Table IV's configurations (P99 Sens: its point with the fewest tasks at risk, as in the paper comparison) and the "
                     f"recommended point, each in its configuration's colour. From each plan's summary.json (`by_arch`).{highlight}"],
                    ("arch_moves.png", _png(fig), "tasks moved and hosts freed per architecture"),
                    [Table("arch", "Per architecture", ["point", "arch", "type", "hosts freed", "newly occupied", "tasks moved out", "tasks moved in",
                                                        "occupied before", "occupied after"], rows)])
    fig, (ax,) = _figure(1, 11, 4.5)
    first = by_arch[names[0]]
    series = {"current": [first.get(a, {}).get("colocation_before", np.nan) for a in archs]}
    series.update({p: [by_arch[p].get(a, {}).get("colocation_after", np.nan) for a in archs] for p in names})
    _grouped_bars(ax, archs, {k: [np.nan if v is None else v for v in vals] for k, vals in series.items()}, "tasks per occupied host",
                  "Colocation factor (Fig. 11)", styles)
    rows = [[a] + [fmt_number(series[k][i]) for k in series] for i, a in enumerate(archs)]
    coloc = Section("Colocation factor (Fig. 11)", ["Tasks per occupied host, per architecture, before (current, grey) and after each plan "
                                                    f"(`by_arch`).{highlight}"],
                    ("colocation.png", _png(fig), "colocation factor per architecture"),
                    [Table("colocation", "Colocation factor (tasks per occupied host)", ["arch", *series], rows)])
    return [moves, coloc]


def _change_section(table: pd.DataFrame, ref_name: str, ref: dict[str, Any], key: str, title: str, columns: list[tuple[str, str]],
                    text: str, value_fmt, recommended: Recommendation | None, extra: tuple[tuple[str, str], ...] = (), caption: str | None = None) -> Section:
    """A bar chart of each point's change vs the reference in ``columns`` ((column, label) pairs) and its table.

    ``extra``: more (column, label) pairs shown in the table only, as shares (fractions).
    ``caption``: the table's caption (default ``title``).
    """
    placed = table[table["tco"].notna()]
    changes = {label: [relative_change(v, ref.get(col)) for v in placed[col]] for col, label in columns}
    fig, (ax,) = _figure(1, 12, 4.5)
    _point_bars(ax, placed, {k: [100 * c for c in v] for k, v in changes.items()}, f"% change vs {ref_name}", title,
                recommended.point if recommended is not None else None)
    headers = ["point"] + [label for _, label in columns] + [f"{label} change" for _, label in columns] + [label for _, label in extra]
    rows = [[r["point"]] + [value_fmt(col, r[col]) for col, _ in columns] + [fmt_change(changes[label][i]) for _, label in columns]
            + [fmt_share(r[col]) for col, _ in extra] for i, (_, r) in enumerate(placed.iterrows())]
    rows.insert(0, [f"{ref_name} (reference)"] + [value_fmt(col, ref.get(col)) for col, _ in columns] + ["-" for _ in columns]
                + [fmt_share(ref.get(col)) for col, _ in extra])
    return Section(title, [text], (f"{key}.png", _png(fig), title), [Table(key, caption or title, headers, rows)])


def _count_or_number(column: str, value: Any) -> str:
    return fmt_count(value) if column in ("hosts", "tasks_at_risk", "moves", "rp_below_zero") else fmt_number(value)


def _wsl_section(table: pd.DataFrame, recommended: Recommendation | None) -> Section:
    placed = table[table["tco"].notna()]
    rec = recommended.point if recommended is not None else None
    fig, (ax1, ax2) = _figure(2, 11, 4)
    _point_bars(ax1, placed, {"WSL": placed["wsl"].tolist()}, "score-weighted hosts", "WSL (Eq. 3; negative = capacity released)", rec)
    _point_bars(ax2, placed, {"hosts used": placed["hosts"].tolist()}, "occupied hosts", "Hosts used after the plan", rec)
    rows = [[r["point"], fmt_number(r["wsl"]), fmt_count(r["hosts"]), fmt_number(r["tco"])] for _, r in placed.iterrows()]
    return Section("WSL and hosts used (Fig. 10)",
                   ["WSL = Σ_arch score · (hosts newly occupied − hosts freed) (Eq. 3, read as the plan's change: see packer.model.metrics.weighted_score_loss)."],
                   ("wsl_hosts.png", _png(fig), "WSL and hosts used"), [Table("wsl", "WSL and hosts used", ["point", "WSL", "hosts used", "TCO"], rows)])


def _rp_section(table: pd.DataFrame, meta: dict[str, Any]) -> Section:
    placed = table[table["tco"].notna()]
    labels = ["current", *placed["point"]]
    colours = [colour_of("current"), *(point_colour(r) for _, r in placed.iterrows())]
    cur = meta["current"]
    fig, (ax,) = _figure(1, 10, 4)
    x = np.arange(len(labels))
    markers = (("rp_min", "v"), ("rp_p5", "o"), ("rp_median", "^"))
    for column, marker in markers:
        ax.scatter(x, [cur[column], *placed[column]], marker=marker, c=colours)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(x, labels, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("relative performance (0 = at goal)")
    ax.set_title("Relative performance distribution (min, 5th percentile, median)", fontsize=10)
    ax.legend(handles=[Line2D([], [], linestyle="none", marker=m, color="#555555", label=c.removeprefix("rp_")) for c, m in markers], fontsize=7)
    rows = [["current", fmt_number(cur["rp_min"]), fmt_number(cur["rp_p5"]), fmt_number(cur["rp_median"]), fmt_count(cur["rp_below_zero"])]]
    rows += [[r["point"], fmt_number(r["rp_min"]), fmt_number(r["rp_p5"]), fmt_number(r["rp_median"]), fmt_count(r["rp_below_zero"])] for _, r in placed.iterrows()]
    return Section("Relative performance", [f"Per task RP (packer.model.rpf) on the yardstick ({meta['yardstick']}); tasks below 0 miss their goal. "
                                            "Markers in each point's configuration colour."],
                   ("rp.png", _png(fig), "relative performance distribution"),
                   [Table("rp", "Relative performance", ["point", "min", "p5", "median", "tasks below 0"], rows)])


def _comparison_label(row: pd.Series) -> str:
    """``P99``, or ``P99 Sens w=10 (`p99-sens-w10`)`` when the point's name is not its configuration's."""
    return point_label(row) + ("" if row["point"] == row["config"] else f" (`{row['point']}`)")


def paper_comparison(table: pd.DataFrame, meta: dict[str, Any], summaries: dict[str, dict[str, Any]]) -> pd.DataFrame | None:
    """The paper's published changes next to the measured ones; None unless the sweep has Baseline, P99 and P99 Sens.

    P99 Sens is :func:`paper_sens_point`. Columns: ``metric``, ``comparison`` (naming the
    points), ``config`` (the compared configuration), ``subject`` and ``reference`` (point names), ``paper`` and ``measured``
    (relative changes, fractions), ``value`` and ``reference_value`` (the two numbers
    ``measured`` is computed from, in ``unit``), ``unit``, ``same_direction``, ``why``
    (what separates the two: move budget, trace shape, definitions), ``quote``.
    ``summaries``: plan summaries by point name (for the per-type TCO).
    """
    rows = _table_iv_rows(table)
    if any(c not in rows for c in ("baseline", "p99", SENS_CONFIG)):
        return None
    budget = meta["options"]["rules"]["max_moves"]
    basis = _sweep_basis(meta)
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
        records.append({
            "metric": change.metric, "comparison": f"{_comparison_label(subject)} vs {_comparison_label(reference)}",
            "config": change.config, "subject": subject["point"], "reference": reference["point"], "paper": change.paper, "measured": measured,
            "value": value, "reference_value": ref, "unit": f"{change.unit} ({basis})" if change.column == "tasks_at_risk" else change.unit,
            "same_direction": bool(np.sign(measured) == np.sign(change.paper)) if math.isfinite(measured) else None,
            "why": _why(change, meta, rows, budget), "quote": change.quote,
        })
    return pd.DataFrame(records)


def _why(change: PaperChange, meta: dict[str, Any], rows: dict[str, pd.Series], budget: int | None) -> str:
    """What separates the measured change from the published one, with the sweep's numbers."""
    before = meta["current"]
    hosts = before["hosts"]
    budget_text = ("no move budget (a full repack)" if budget is None else
                   f"{budget:,} moves can empty at most {min(budget, hosts):,} of the {hosts:,} occupied hosts ({min(budget, hosts) / hosts:.1%})")
    if change.column in ("hosts", "tco") or change.column.startswith("tco_type_"):
        freed = "; ".join(f"{_comparison_label(r)} {before['hosts'] - r['hosts']:,.0f}" for c, r in rows.items() if c in ("baseline", "p99", SENS_CONFIG))
        return (f"Move budget: {budget_text}; net hosts freed: {freed}. Measured against the whole fleet; the paper does not say what its "
                "percentages are relative to.")
    if change.column.startswith("frag_"):
        return (f"Definition: measured on the {meta['yardstick']} yardstick (capacity unused by p99 usage on occupied hosts) for both "
                f"configurations; the paper measures each under its own limits. Move budget: {budget_text}.")
    share = before["tasks_at_risk"] / meta["n_tasks"] if meta["n_tasks"] else float("nan")
    return (f"Trace shape: {fmt_share(share)} of the tasks are at risk ({_sweep_basis(meta)}) before any move; the paper does not publish "
            f"its pool's share. Move budget: {budget_text}.")


def _paper_section(comparison: pd.DataFrame, meta: dict[str, Any]) -> Section:
    count = ("hosts", "tasks at risk")
    budget = meta["options"]["rules"]["max_moves"]
    rows = [[r["metric"], r["comparison"], fmt_change(r["paper"]), r["quote"], fmt_change(r["measured"]),
             " vs ".join((fmt_count if r["unit"].startswith(count) else fmt_number)(v) for v in (r["value"], r["reference_value"])) + f" {r['unit']}",
             "-" if r["same_direction"] is None else ("yes" if r["same_direction"] else "no"), r["why"]] for _, r in comparison.iterrows()]
    sens = comparison.loc[comparison["config"] == SENS_CONFIG, "subject"].iloc[0]
    text = [f"Paper: the colocation paper's Section V-C (400 moves; ~37,000 tasks, ~18,000 hosts), every change against its Baseline "
            f"configuration. Measured: this sweep ({meta['n_tasks']:,} tasks, {meta['n_hosts']:,} hosts, move budget "
            f"{'unlimited' if budget is None else format(budget, ',')}), each change "
            "(configuration − Baseline) / Baseline on the sweep table (per-type TCO from the plans' by_type), from the two numbers shown.",
            f"P99 Sens is `{sens}`: the paper reports what P99 Sens achieves \"up to\", so its point is the P99 Sens point (any weight; not "
            "the no-new-risk point, which is no Table IV configuration) with the fewest tasks at risk, ties broken by lower TCO.",
            "The paper's ~75% WSL reduction is not compared: packer's WSL (Eq. 3) is the change a plan makes (see Fig. 10 below), "
            "and a ratio of two such changes is not the paper's quantity."]
    return Section("Reproducing the paper", text, None, [Table("paper", "Published vs measured changes", [
        "metric", "comparison", "paper", "paper says", "measured", "computed from", "same direction", "why they differ"], rows)])


def _refined_text(table: pd.DataFrame, options: dict[str, Any]) -> str:
    """``, and weights 4.1, 4.7 added where ...`` for the weights a sweep solved beyond its ``--weights`` ladder; '' without any."""
    ladder = {float(w) for w in options["weights"]}
    solved = table.loc[(table["kind"] == OPTIMIZER) & table["weight"].notna() & table["max_new_at_risk"].isna(), "weight"]
    added = sorted({float(w) for w in solved} - ladder)
    return f", and weights {', '.join(weight_label(w) for w in added)} added where the curve changed most (`--refine`)" if added else ""


def sweep_sections(sweep: Sweep) -> list[Section]:
    """The sections of a sweep report (see the module doc)."""
    table, meta = sweep.table, sweep.meta
    options = meta["options"]
    limit = options["rules"]["max_moves"]
    budget = "unlimited" if limit is None else f"{limit:,}"
    timings = meta.get("timings", {})
    intro = [
        f"Trace `{meta['trace']}`: {meta['n_tasks']:,} tasks on {meta['n_hosts']:,} hosts. Move budget {budget} per solve, "
        f"time limit {options['time_limit_s']:g} s per optimizer solve, optimizer `{options['solver']}`, goal {options['goal']}, seed {options['seed']}.",
        f"{meta['grid_points']} grid points ({len(options['configs'])} configurations × weights {', '.join(weight_label(w) for w in options['weights'])} "
        f"where the weight enters{_refined_text(table, options)}, plus {len(options['baselines'])} baseline policies) took {meta['solves']} solves "
        f"({meta['solves_reused']} reused); total wall time {fmt_number(timings.get('total_s'))} s.",
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
    recommended = recommend(table, meta["current"]["tasks_at_risk"])
    sections = [_answer_section(table, meta, recommended), Section("Sweep", intro), _pareto_section(table, meta, recommended)]
    dominance = _dominance_section(meta)
    if dominance:
        sections.append(dominance)
    points = _figure_points(table, recommended)
    summaries = _read_summaries(sweep, points) if not points.empty else {}
    comparison = paper_comparison(table, meta, summaries)
    if comparison is not None:
        sections.append(_paper_section(comparison, meta))
    if not points.empty:
        sections += _arch_sections(points, summaries, recommended)
    ref_name, ref = _reference(table, meta)
    frag_dims = [c.removeprefix("frag_") for c in table.columns if c.startswith("frag_") and not c.startswith("frag_share_")]
    sections.append(_change_section(
        table, ref_name, ref, "fragmentation", "Fragmentation change vs Baseline (Fig. 9)", [(f"frag_{d}", f"fragmentation {d}") for d in frag_dims],
        f"Eq. 2 fragmentation (capacity unused on occupied hosts; cpu in reference cores, mem GiB) on the yardstick, change vs {ref_name}; "
        "lower is better. The share columns divide it by the occupied hosts' capacity. Bars in each point's configuration colour, one shade per dimension.",
        _count_or_number, recommended, tuple((f"frag_share_{d}", f"share {d}") for d in frag_dims)))
    sections.append(_wsl_section(table, recommended))
    basis = _sweep_basis(meta)
    sections.append(_change_section(
        table, ref_name, ref, "interference", "Interference and tasks at risk vs Baseline (Fig. 12)",
        [("tasks_at_risk", "tasks at risk"), ("interference", "interference")] + [(f"interference_{d}", f"interference {d}") for d in meta.get("sens_dims", [])],
        f"{risk_definition(meta.get('sensitivity_basis'), bool(meta.get('sens_dims')))} Interference: Eq. 4. Change vs {ref_name}; negative is better.",
        _count_or_number, recommended, caption=f"Interference and tasks at risk vs Baseline (Fig. 12; tasks at risk: {basis})"))
    sections.append(_rp_section(table, meta))
    return sections


# --- plan report ---


def plan_sections(summary: dict[str, Any]) -> list[Section]:
    """The sections of a single plan's report, all from its ``summary.json``."""
    if summary.get("format") not in REPORTABLE_FORMATS:
        raise InputError(f"plan summary format {summary.get('format')!r}: reports need {' or '.join(REPORTABLE_FORMATS)} (re-solve the plan)")
    # Read through PlanContext, which brings a packer-plan/3 context (budget at the top, goal among the weights) to today's keys.
    ctx = PlanContext.from_dict(summary["context"]).to_dict()
    before, after = summary["metrics"]["before"], summary["metrics"]["after"]
    limit = ctx["rules"]["max_moves"]
    budget = "unlimited" if limit is None else f"{limit:,}"
    goal = ctx["goal"]
    intro = [f"Trace `{ctx['trace']}`; configuration `{ctx['config']}`, goal {goal}, sensitivity weight "
             f"{weight_label(ctx['weights']['sensitivity'])}, solver `{summary['solver']['name']}` ({summary['status']}, {fmt_number(summary['runtime_s'])} s), "
             f"{summary['moves']['count']:,} moves (budget {budget}). Objective {fmt_number(summary['objective']['total'])}, "
             f"lower bound {fmt_number(summary['bound'])}, gap {format_gap(summary['gap'])} ((objective − bound) / objective).",
             risk_definition(ctx.get("sensitivity_basis"), bool(after["interference"]),
                             f"configuration `{ctx['config']}` has no sensitivity dimensions (a sweep measures every point on one yardstick)"),
             f"Figures draw today's placement in grey and the plan in the colour of `{ctx['config']}`; a lighter shade is a second series."]
    basis = risk_basis(ctx.get("sensitivity_basis"), bool(after["interference"]))
    own = colour_of(ctx["config"])
    before_after = {"before": {"color": colour_of("current")}, "after": {"color": own}}
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
    sections = [Section("Plan", intro, None, [Table("headline", f"Before and after (tasks at risk: {basis})", ["metric", "before", "after", "change"], rows)])]

    by_arch = summary["by_arch"]
    archs = list(by_arch)
    fig, (ax1, ax2) = _figure(2, 11, 4)
    _grouped_bars(ax1, archs, {"moved out": [by_arch[a]["moved_out"] for a in archs], "moved in": [by_arch[a]["moved_in"] for a in archs]}, "tasks",
                  "Tasks moved per architecture (Fig. 7)", {"moved out": {"color": own}, "moved in": {"color": own, "alpha": 0.45}})
    _grouped_bars(ax2, archs, {"freed": [by_arch[a]["freed"] for a in archs], "newly occupied": [by_arch[a]["newly_occupied"] for a in archs]}, "hosts",
                  "Hosts freed and newly occupied (Fig. 8)", {"freed": {"color": own}, "newly occupied": {"color": own, "alpha": 0.45}})
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
                  "% of occupied capacity unused", "Fragmentation (Eq. 2, Fig. 9)", before_after)
    _grouped_bars(ax2, archs, {"WSL": [by_arch[a]["wsl"] for a in archs]}, "score-weighted hosts", "WSL per architecture (Eq. 3, Fig. 10)",
                  {"WSL": {"color": own}})
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
                  "tasks per occupied host", "Colocation factor (Fig. 11)", before_after)
    sections.append(Section("Colocation factor (Fig. 11)", [], ("colocation.png", _png(fig), "colocation factor"), [Table(
        "colocation", "Colocation factor (tasks per occupied host)", ["arch", "before", "after"],
        [[a, fmt_number(by_arch[a]["colocation_before"]), fmt_number(by_arch[a]["colocation_after"])] for a in archs])]))

    sens = list(after["interference"])
    if sens:
        fig, (ax1, ax2) = _figure(2, 10, 4)
        _grouped_bars(ax1, sens, {"before": [before["interference"][d] for d in sens], "after": [after["interference"][d] for d in sens]},
                      "summed excess over 1", "Interference per dimension (Eq. 4, Fig. 12)", before_after)
        _grouped_bars(ax2, ["tasks at risk"], {"before": [before["tasks_at_risk"]], "after": [after["tasks_at_risk"]]}, f"tasks ({basis})",
                      "Tasks at risk (Fig. 12)", before_after)
        sections.append(Section("Interference (Fig. 12)", [], ("interference.png", _png(fig), "interference"), [Table(
            "interference", f"Interference (tasks at risk: {basis})", ["dimension", "before", "after"],
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
                      "relative performance (0 = at goal)", "Relative performance by the task's architecture",
                      {"p5 before": before_after["before"], "p5 after": before_after["after"],
                       "median before": {**before_after["before"], "alpha": 0.45}, "median after": {**before_after["after"], "alpha": 0.45}})
        rows = [_rp_rows(f"{g} before", get[g][0]) for g in groups] + [_rp_rows(f"{g} after", get[g][1]) for g in groups]
        sections.append(Section("Relative performance", ["Per task RP (packer.model.rpf; 0 = at goal), overall and by the architecture of the task's host."],
                                ("rp.png", _png(fig), "relative performance"), [Table("rp", "Relative performance", ["group", "tasks", "min", "p5", "median", "tasks below 0"], rows)]))
    return sections


# --- rendering ---


def render_markdown(title: str, sections: list[Section]) -> str:
    """The Markdown report: headings, paragraphs, bulleted lists, linked PNGs and pipe tables."""
    lines = [f"# {title}", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for paragraph in section.text:
            lines += [paragraph, ""]
        if section.bullets:
            lines += [*(f"- {item}" for item in section.bullets), ""]
        if section.figure:
            name, _, alt = section.figure
            lines += [f"![{alt}]({name})", ""]
        for table in section.tables:
            lines += [f"**{table.caption}**", "", markdown_table(table.headers, table.rows), ""]
    return "\n".join(lines)


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
        if section.bullets:
            parts.append("<ul>" + "".join(f"<li>{_inline_code(item)}</li>" for item in section.bullets) + "</ul>")
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
