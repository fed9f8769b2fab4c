"""Characterization: workload classes, sensitivity per task and its normalization per architecture.

:func:`characterize` ties :mod:`packer.characterization.classes`, :mod:`packer.characterization.sensitivity` and
:mod:`packer.characterization.normalize` together; :func:`write_characterization` writes the
result folder atomically:

* ``tasks.parquet``: one row per task, see :func:`task_table`;
* ``classes.parquet``: class centroids per type (real units);
* ``wcss.parquet``: the WCSS curve per type with the chosen k;
* ``report.md``: class sizes, centroids, WCSS, sensitivity per class and
  architecture, and the architectures each class may not use;
* ``wcss.png``: the WCSS curves (one line per umbrella type, chosen k marked).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from packer.io.atomic import atomic_dir
from packer.characterization.classes import DEFAULT_KMAX, ClassResult, classify_tasks
from packer.errors import InputError, Problem
from packer.io.fleet import Fleet
from packer.characterization.normalize import (
    DEFAULT_SENSITIVITY_BASIS,
    NormalizedSensitivity,
    check_basis,
    host_share,
    normalize_scores,
    sensitivity_capacity,
    sensitivity_demand,
    to_compute_units,
)
from packer.characterization.sensitivity import (
    DEFAULT_CLASS_AGGREGATE,
    DEFAULT_SENSITIVITY,
    SensitivityAssignment,
    SensitivityTable,
    assign_scores,
    fill_missing_scores,
    load_sensitivity,
)
from packer.io.trace import Trace
from packer.io.validate import problem_if
from packer.report.markdown import cell_text, markdown_table

log = logging.getLogger(__name__)

TASKS_FILE = "tasks.parquet"
CLASSES_FILE = "classes.parquet"
WCSS_FILE = "wcss.parquet"
REPORT_FILE = "report.md"
PLOT_FILE = "wcss.png"


@dataclass(frozen=True)
class Characterization:
    """Everything :func:`characterize` computed; ``tasks`` is the per-task table written to ``tasks.parquet``."""

    trace_name: str
    fleet: Fleet
    classes: ClassResult
    table: SensitivityTable
    scores: SensitivityAssignment
    normalized: NormalizedSensitivity
    eligible: np.ndarray
    tasks: pd.DataFrame
    profiles_source: str
    inferred: pd.DataFrame
    basis: str = DEFAULT_SENSITIVITY_BASIS
    aggregate: str = DEFAULT_CLASS_AGGREGATE


def read_profiles(path: str | Path, trace: Trace) -> pd.DataFrame:
    """Read a ``profiles.parquet`` and check that it belongs to ``trace`` (every profiled task exists)."""
    path = Path(path)
    try:
        profiles = pq.read_table(path).to_pandas()
    except FileNotFoundError:
        raise InputError(f"{path}: profiles file not found") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path}: not a readable Parquet file: {exc}") from None
    if "task_id" not in profiles.columns:
        raise InputError([Problem(str(path), "task_id", f"required column missing (the file has: {', '.join(profiles.columns)})", 0)])
    ids = profiles["task_id"].astype(str)
    unknown = ~ids.isin(trace.tasks["task_id"]).to_numpy()
    problems = problem_if(str(path), "task_id", f"task not in the trace {trace.path} (profiles of another trace?)", profiles, unknown, ["task_id"])
    if problems:
        raise InputError(problems)
    return profiles


def task_table(classes: ClassResult, services: pd.Series, scores: SensitivityAssignment, normalized: NormalizedSensitivity,
               eligible: np.ndarray, fleet: Fleet, basis: str = DEFAULT_SENSITIVITY_BASIS, need_cu: np.ndarray | None = None) -> pd.DataFrame:
    """The per-task table, wide layout.

    Columns: ``task_id``, ``service``, ``arch`` (current), ``type``, ``class``,
    ``class_level``, ``profiled``; the clustering features ``cpu_cores`` (p99
    cores on the current host), ``cpu_cu`` (compute units), ``cpu_ref_cores``,
    ``mem_gib``, ``net_gbps``; ``need_cu`` (requested CPU in compute units, what a
    score is a fraction of on the ``need`` basis); per sensitivity dimension d:
    ``d_sens`` (score as measured on ``measured_on``), ``d_sens_demand`` (the linear
    "sensitivity as a resource" demand on ``basis``, :func:`packer.characterization.normalize.sensitivity_demand`)
    and ``d_sens_<arch>`` (Eq. 1 normalized score on each architecture);
    ``measured_on``, ``score_source``, ``score_class``, ``scores_inferred``; ``eligible_archs`` and
    ``ineligible_archs`` (``|``-separated; by sensitivity only: a task's
    ``allowed_archs`` constraint is applied when the problem is built).
    """
    out = classes.tasks[["task_id"]].copy()
    out["service"] = services.to_numpy()
    out = pd.concat([out, classes.tasks.drop(columns="task_id")], axis=1)
    measured_on = scores.tasks["measured_on"].to_numpy(dtype=object)
    out["need_cu"] = need_cu
    for dim in scores.dims:
        out[f"{dim}_sens"] = scores.tasks[dim].to_numpy()
        out[f"{dim}_sens_demand"] = sensitivity_demand(scores.tasks[dim].to_numpy(), measured_on, fleet, dim, basis, need_cu)
    for col in ("measured_on", "score_source", "score_class", "scores_inferred"):
        out[col] = scores.tasks[col].to_numpy()
    wide = {f"{dim}_sens_{arch}": normalized.values[dim][:, j] for dim in scores.dims for j, arch in enumerate(normalized.archs)}
    out = pd.concat([out, pd.DataFrame(wide, index=out.index)], axis=1)
    yes = np.full(len(out), "", dtype=object)
    no = np.full(len(out), "", dtype=object)
    for j, arch in enumerate(normalized.archs):
        yes = yes + np.where(eligible[:, j], arch + "|", "")
        no = no + np.where(eligible[:, j], "", arch + "|")
    out["eligible_archs"] = pd.Series(yes).str.rstrip("|").to_numpy()
    out["ineligible_archs"] = pd.Series(no).str.rstrip("|").to_numpy()
    return out


def characterize(
    trace: Trace,
    profiles: pd.DataFrame,
    k: int | None = None,
    kmax: int = DEFAULT_KMAX,
    seed: int = 0,
    sensitivity: str | Path | SensitivityTable = DEFAULT_SENSITIVITY,
    percentile: float = 99,
    profiles_source: str = "profiles",
    infer: bool = False,
    aggregate: str = DEFAULT_CLASS_AGGREGATE,
    basis: str = DEFAULT_SENSITIVITY_BASIS,
    reference: pd.DataFrame | None = None,
) -> Characterization:
    """Classes, sensitivity scores and per-architecture eligibility for every task of ``trace``.

    ``profiles``: one row per task with ``task_id`` and ``{cpu,mem,net}_pNN``
    (cores on the current host, GiB, Gbps), as :func:`packer.characterization.profile.profile_tasks`
    gives. ``sensitivity``: a table path (validated against the trace's fleet and
    services) or a loaded table. ``infer``: accept empty score cells in the table
    and fill them by collaborative filtering (:func:`packer.characterization.sensitivity.fill_missing_scores`).
    ``aggregate``: how class scores are formed from measured services (``mean`` or
    ``max``, :func:`packer.characterization.sensitivity.assign_scores`); ``basis``: what a score is a
    fraction of (:mod:`packer.characterization.normalize`), which decides eligibility; ``reference``:
    the class centres of an earlier characterization to keep
    (:func:`packer.characterization.classes.read_reference_classes`).
    """
    check_basis(basis)
    fleet = trace.fleet
    if not isinstance(sensitivity, SensitivityTable):
        sensitivity = load_sensitivity(sensitivity, fleet, services=trace.tasks["service"].dropna().unique(), allow_missing=infer)
    table, inferred = fill_missing_scores(sensitivity, fleet, seed=seed) if infer else (sensitivity, pd.DataFrame())
    classes = classify_tasks(profiles, trace.tasks, trace.hosts, fleet, k=k, kmax=kmax, seed=seed, percentile=percentile,
                             source=profiles_source, reference=reference)
    classified = classes.tasks[["task_id", "type", "class", "class_level"]].assign(service=trace.tasks["service"].to_numpy())
    scores = assign_scores(classified, table, fleet, aggregate, classes.centroids)
    normalized = normalize_scores(scores.tasks, fleet, scores.dims)
    need_cu = to_compute_units(trace.tasks["cpu_request"].to_numpy(dtype=float), classes.tasks["arch"].to_numpy(), fleet)
    eligible = normalized.eligibility(host_share(need_cu, fleet) if basis == "need" else None)
    tasks = task_table(classes, trace.tasks["service"], scores, normalized, eligible, fleet, basis, need_cu)
    return Characterization(trace_name=trace.name, fleet=fleet, classes=classes, table=table, scores=scores,
                            normalized=normalized, eligible=eligible, tasks=tasks, profiles_source=profiles_source, inferred=inferred,
                            basis=basis, aggregate=aggregate)


def class_sensitivity(result: Characterization) -> tuple[pd.DataFrame, NormalizedSensitivity]:
    """Per (type, class) scores and their Eq. 1 normalization on every architecture."""
    table = result.scores.classes
    scored = table[table["measured_on"].notna()].reset_index(drop=True)
    return scored, normalize_scores(scored, result.fleet, result.scores.dims)


def _markdown(df: pd.DataFrame, floatfmt: str = "{:.2f}") -> str:
    """``df`` as a Markdown table: floats with ``floatfmt``, NaN and None as empty cells."""
    def cell(v) -> str:
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else floatfmt.format(v)
        return cell_text(v)

    return markdown_table(list(df.columns), df.itertuples(index=False), fmt=cell)


def render_report(result: Characterization) -> str:
    """The human report (Markdown)."""
    c = result.classes
    t = result.tasks
    dims = result.scores.dims
    ref = c.reference_arch
    lines = [
        f"# Characterization of `{result.trace_name}`",
        "",
        f"{len(t)} tasks; profiles: {result.profiles_source} (p{c.percentile:g}); fleet: {result.fleet.source}; "
        f"sensitivity table: {result.table.source}; seed {c.seed}.",
        "",
        "## Workload classes",
        "",
        f"K-means per umbrella host type over p{c.percentile:g} CPU, memory and network usage. CPU is expressed in cores of "
        f"{ref} (the architecture with score 1.0) through per-core throughput, so tasks on different architectures are "
        "comparable; each feature is log1p-transformed and standardized within the type. k is the Kneedle elbow of the "
        "WCSS curve unless given. Tasks without a usage profile are placed by their requests times the type's median "
        "p99/request ratio (column `profiled` = false).",
        "",
    ]
    sizes = c.centroids.copy()
    unprofiled = t[~t["profiled"]].groupby(["type", "class"]).size().rename("unprofiled")
    sizes = sizes.merge(unprofiled.reset_index(), on=["type", "class"], how="left").fillna({"unprofiled": 0})
    sizes["share"] = sizes["n_tasks"] / sizes.groupby("type")["n_tasks"].transform("sum")
    shown = pd.DataFrame({
        "type": sizes["type"], "class": sizes["class"], "tasks": sizes["n_tasks"], "share": sizes["share"].map("{:.1%}".format),
        "unprofiled": sizes["unprofiled"].astype(int), f"CPU ({ref} cores)": sizes["cpu_ref_cores"], "CPU (compute units)": sizes["cpu_cu"],
        "memory (GiB)": sizes["mem_gib"], "network (Gbps)": sizes["net_gbps"],
    })
    lines += ["Class sizes and centroids (real units; centres of the log-space clusters):", "", _markdown(shown, "{:.3g}"), ""]

    curve = c.wcss.pivot(index="k", columns="type", values="wcss")
    curve.columns = [f"type {col} WCSS" for col in curve.columns]
    curve = curve.reset_index()
    chosen = ", ".join(f"type {ty}: k = {kk}" for ty, kk in c.chosen_k.items())
    lines += [f"WCSS (standardized units) for k = 1..kmax; chosen {chosen}. See `wcss.png`.", "", _markdown(curve, "{:.4g}"), "", "![WCSS](wcss.png)", ""]

    sources = t["score_source"].value_counts()
    basis_text = {
        "need": "a score is the share of the task's own requested need it must be guaranteed; on a host the summed "
                "`score (Eq. 1) × task's share of the host` must stay ≤ 1 (basis `need`)",
        "host": "a score is the share of the whole host the task must be guaranteed; on a host the summed Eq. 1 "
                "scores must stay ≤ 1 (basis `host`)",
    }[result.basis]
    lines += [
        "## Sensitivity",
        "",
        f"Basis: {basis_text}. Scores per task: the task's service's measured scores when the table has them, else its "
        f"class's (per dimension the {result.aggregate} over the class's measured services, expressed on one reference "
        "architecture with Eq. 1; a class without any takes the scores of the scored class whose centre is nearest, "
        "of its own type or another). "
        "Score sources: " + ", ".join(f"{name} {sources.get(name, 0)}" for name in ("service", "class", "nearest-class", "none")) + ".",
        "",
    ]
    if sources.get("none", 0):
        lines += [f"**{sources['none']} tasks have no sensitivity scores**: the table scores no class of this trace "
                  "(no measured service in the trace and no class row); they are not constrained by sensitivity.", ""]
    if len(result.inferred):
        lines += ["Scores filled by collaborative filtering (`--infer`; confidence = 1 - expected relative error):", "",
                  _markdown(result.inferred), ""]
    scored, normalized = class_sensitivity(result)
    if len(scored):
        lines += ["Class scores as measured (on `measured_on`):", "",
                  _markdown(scored[["type", "class", *dims, "measured_on", "source", "inferred"]]), ""]
        for dim in dims:
            frame = normalized.frame(dim).map(lambda v: "" if np.isnan(v) else (f"**{v:.2f}**" if v > 1 + 1e-9 else f"{v:.2f}"))
            frame.insert(0, "class", scored["class"].to_numpy())
            frame.insert(0, "type", scored["type"].to_numpy())
            lines += [f"`{dim}` sensitivity normalized to each architecture (Eq. 1; bold = above 1):", "", _markdown(frame), ""]
    caps = pd.DataFrame({f"{d} capacity": sensitivity_capacity(result.fleet, d, result.basis) for d in dims}).reset_index(names="arch")
    unit = ("g_k(A) · score_A: `cpu` score², others Gbps per core × score" if result.basis == "need"
            else "g_k(A): `cpu` throughput score, others Gbps per core")
    lines += [f"Per-host sensitivity capacity ({unit}). A task's demand is `<dim>_sens_demand` in tasks.parquet; "
              "the sum on a host should stay within the capacity, and a task whose demand alone exceeds an "
              "architecture's capacity may not move there.", "", _markdown(caps, "{:.4g}"), ""]
    blocked = pd.DataFrame(~result.eligible, columns=list(result.normalized.archs))
    blocked[["type", "class"]] = t[["type", "class"]].to_numpy()
    per_class = blocked.groupby(["type", "class"])[list(result.normalized.archs)].sum().astype(int).reset_index()
    lines += ["Tasks that may not use each architecture (by sensitivity), per class:", "", _markdown(per_class), ""]
    by_arch = pd.DataFrame({"arch": list(result.normalized.archs), "tasks eligible": result.eligible.sum(axis=0),
                            "tasks ineligible": (~result.eligible).sum(axis=0)})
    lines += ["Tasks eligible per architecture (by sensitivity):", "", _markdown(by_arch), ""]
    return "\n".join(lines) + "\n"


def plot_wcss(result: Characterization, path: Path) -> None:
    """WCSS relative to k = 1 per umbrella type on a log axis, the chosen k marked, as a PNG."""
    # The object API draws without pyplot, so the user's matplotlib backend and open figures stay as they were;
    # imported here because only this plot needs matplotlib.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), dpi=100)
    ax = fig.subplots()
    for utype, curve in result.classes.wcss.groupby("type"):
        first = curve["wcss"].iloc[0]
        # Same floor as the elbow's log scale, so a perfect fit (WCSS 0) stays on the log axis.
        rel = (curve["wcss"] / first).clip(lower=1e-9) if first > 0 else pd.Series(1.0, index=curve.index)
        line, = ax.plot(curve["k"], rel, marker="o", label=f"type {utype}")
        pick = curve["chosen"].to_numpy()
        ax.plot(curve["k"][pick], rel[pick], marker="*", markersize=16, color=line.get_color(), linestyle="none",
                label=f"type {utype}: k = {int(curve['k'][pick].iloc[0])}")
    ax.set_xlabel("number of classes k")
    ax.set_yscale("log")
    ax.set_ylabel("WCSS / WCSS(k = 1)")
    ax.set_title("Within-cluster sum of squares (elbow on the log scale)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, format="png")


def write_characterization(result: Characterization, out: str | Path) -> Path:
    """Write the characterization folder atomically (see the module docstring)."""
    out = Path(out)
    with atomic_dir(out) as tmp:
        result.tasks.to_parquet(tmp / TASKS_FILE, index=False)
        result.classes.centroids.to_parquet(tmp / CLASSES_FILE, index=False)
        result.classes.wcss.to_parquet(tmp / WCSS_FILE, index=False)
        (tmp / REPORT_FILE).write_text(render_report(result))
        plot_wcss(result, tmp / PLOT_FILE)
    return out
