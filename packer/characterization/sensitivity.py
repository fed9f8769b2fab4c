"""The sensitivity model: measured scores per service or class, assigned to every task.

A sensitivity table is a CSV (``models/sensitivity.csv`` ships Table III of the
colocation paper) with columns:

* ``service`` and/or ``class``: what the row's scores were measured for (a row
  needs at least one of the two);
* ``arch``: the architecture the scores are for (a name in the fleet catalog);
* ``cpu``, ``membw``, ``net``: scores, the fraction of that resource of a host of
  ``arch`` the workload must be guaranteed (dimensionless, 0..5; above 1 means a
  host of ``arch`` is too small). Further columns named after fleet dimensions
  (say ``mem``) are read as extra sensitivity dimensions;
* optional ``measured`` (true/false): when present only measured rows are used as
  inputs; the others (the paper's Eq.-1 derivations) are kept for checks.

Assignment (the paper, Section III-C: "tasks in the same cluster behave
similarly"). Classes are per umbrella type, as the clustering is, so a class is a
(type, label) pair:

1. a task whose service has a measured row takes that row's scores;
2. any other task takes its class's scores. A class row of the table (no
   service) gives them directly, for the class label in the type of the row's
   ``arch``. Otherwise they are formed from the class's measured services: per
   dimension the **mean** (default) or the **maximum** (``aggregate="max"``) over
   the services, after expressing every score on one reference architecture (the
   architecture most measured rows were measured on) with Eq. 1. The mean is the
   paper's assumption that a class's tasks behave like its measured services; the
   maximum is the conservative reading (the paper measured two services per
   class, and a score is a guarantee). A measured service belongs to the class
   most of its tasks in the trace are in (per type); a service absent from the
   trace belongs to the table's ``class`` in the type of its ``arch`` (the paper's
   Table II classes are Type II clusters, Fig. 2);
3. a class with no scores takes those of the nearest scored class: the one whose
   centre is nearest to its own, in the clustering's standardized log space of its
   type (:mod:`packer.characterization.classes`; CPU in reference cores, so centres of different
   umbrella types compare), own type first and the higher (more sensitive) level
   on a tie; without centres, the nearest class level (the same level in another
   type before a neighbouring one). So every task gets scores whatever host it
   sits on today: the paper measured its services on Type II hosts, and a Type I
   class is described by the Type II class it resembles (Eq. 1 then translates the
   scores to each architecture);
4. only when no class at all has scores does a task stay unscored (NaN scores,
   ``score_source`` ``"none"``). Such tasks are reported, and can be filled by
   inference.

Every assigned score carries ``measured_on``, the architecture it is expressed on.

Missing scores. An empty score cell is an error unless the table is loaded with
``allow_missing`` (``packer characterize --infer``); :func:`fill_missing_scores`
then fills the empty cells of the measured rows by collaborative filtering
(:mod:`packer.characterization.infer`) before the assignment above.

Validation: a missing column, an architecture not in the fleet, an empty or
non-numeric score, a score outside [0, 5], a bad ``measured`` value, duplicate
rows, a service measured on several architectures, or a row naming a service the
trace does not have and no class (it would apply to no task) all raise
:class:`~packer.errors.InputError` naming the file, column and rows.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from packer.characterization.classes import class_level
from packer.errors import InputError, Problem
from packer.io.fleet import MODELS_DIR, Fleet
from packer.characterization.normalize import SENSITIVITY_DIMS, translate_sensitivity
from packer.io.validate import problem_if

log = logging.getLogger(__name__)

DEFAULT_SENSITIVITY = MODELS_DIR / "sensitivity.csv"
SCORE_MAX = 5.0
#: How a class's scores are formed from its measured services (module doc, rule 2).
CLASS_AGGREGATES = ("mean", "max")
DEFAULT_CLASS_AGGREGATE = "mean"
_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}


@dataclass(frozen=True)
class SensitivityTable:
    """A validated sensitivity table.

    ``rows``: every row with ``service`` and ``class`` (str or None), ``arch``,
    one float column per dimension in ``dims``, and ``measured`` (bool; all True
    when the file has no such column). ``inputs``: the measured rows.
    """

    rows: pd.DataFrame
    dims: tuple[str, ...]
    source: str

    @property
    def inputs(self) -> pd.DataFrame:
        return self.rows[self.rows["measured"]].reset_index(drop=True)


def _text(series: pd.Series) -> pd.Series:
    """Strings with blanks as None."""
    out = series.astype("string").str.strip()
    return out.where(out.notna() & (out != ""), None).astype(object)


def load_sensitivity(path: str | Path = DEFAULT_SENSITIVITY, fleet: Fleet | None = None, services=None,
                     allow_missing: bool = False) -> SensitivityTable:
    """Read and validate a sensitivity table.

    ``fleet`` checks the architecture names (and names extra dimensions);
    ``services`` (the trace's service names) checks that each service-only row
    applies to some task. ``allow_missing`` accepts empty score cells (to be
    filled by :func:`fill_missing_scores`); a row with no score at all is still an
    error. Raises :class:`InputError` listing every problem.
    """
    path = Path(path)
    name = str(path)
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except FileNotFoundError:
        raise InputError(f"{name}: sensitivity table not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"{name}: not a readable CSV file: {exc}") from None
    raw.columns = [str(c).strip() for c in raw.columns]

    fleet_dims = set(fleet.dims) if fleet is not None else set()
    dims = tuple(SENSITIVITY_DIMS) + tuple(c for c in raw.columns if c in fleet_dims and c not in SENSITIVITY_DIMS)
    missing = [c for c in ("arch", *SENSITIVITY_DIMS) if c not in raw.columns]
    if "service" not in raw.columns and "class" not in raw.columns:
        missing.insert(0, "service or class")
    if missing:
        raise InputError([Problem(name, ", ".join(missing), f"required column missing (the file has: {', '.join(raw.columns)})", 0)])
    if raw.empty:
        raise InputError([Problem(name, "", "the table has no rows", 0)])

    rows = pd.DataFrame({
        "service": _text(raw["service"]) if "service" in raw.columns else None,
        "class": _text(raw["class"]) if "class" in raw.columns else None,
        "arch": _text(raw["arch"]),
    })
    show = [c for c in ("service", "class", "arch") if c in raw.columns]
    problems: list[Problem] = []
    problems += problem_if(name, "service, class", "row names neither a service nor a class", raw, (rows["service"].isna() & rows["class"].isna()).to_numpy(), show)
    if fleet is not None:
        unknown = ~rows["arch"].isin(fleet.archs.index).to_numpy()
        problems += problem_if(name, "arch", f"architecture missing from the fleet catalog {fleet.source} (known: {', '.join(fleet.archs.index)})", raw, unknown, show)
    for dim in dims:
        values = pd.to_numeric(raw[dim], errors="coerce")
        non_numeric = values.isna().to_numpy() & raw[dim].notna().to_numpy()
        empty = raw[dim].isna().to_numpy()
        problems += problem_if(name, dim, "non-numeric score", raw, non_numeric, [*show, dim])
        if not allow_missing:
            problems += problem_if(name, dim, "missing score (pass --infer to fill missing scores by inference)", raw, empty, [*show, dim])
        problems += problem_if(name, dim, f"score outside [0, {SCORE_MAX:g}]", raw, ((values < 0) | (values > SCORE_MAX)).to_numpy(), [*show, dim])
        rows[dim] = values.astype(float)

    if allow_missing:
        blank = rows[list(dims)].isna().all(axis=1).to_numpy()
        problems += problem_if(name, ", ".join(dims), "row has no score at all", raw, blank, show)
    rows["inferred"] = ""

    if "measured" in raw.columns:
        flag = raw["measured"].astype("string").str.strip().str.lower()
        bad = ~flag.isin(_TRUE | _FALSE).fillna(False).to_numpy(dtype=bool)
        problems += problem_if(name, "measured", "expected true or false", raw, bad, [*show, "measured"])
        rows["measured"] = flag.isin(_TRUE).fillna(False).to_numpy(dtype=bool)
    else:
        rows["measured"] = True

    key = rows["service"].fillna("\0class:" + rows["class"].fillna(""))
    dup = pd.DataFrame({"key": key, "arch": rows["arch"]}).duplicated(keep=False).to_numpy()
    problems += problem_if(name, "arch", "duplicate row for the same service (or class) and architecture", raw, dup, show)
    measured_key = key.where(rows["measured"])
    several = (measured_key.notna() & measured_key.map(measured_key.value_counts()).gt(1)).to_numpy() & ~dup
    problems += problem_if(name, "arch", "measured on more than one architecture (mark one row per service as measured with a `measured` column)", raw, several, show)
    if services is not None:
        known = set(pd.Series(list(services), dtype=object).dropna().astype(str))
        orphan = (rows["service"].notna() & ~rows["service"].isin(known) & rows["class"].isna()).to_numpy()
        problems += problem_if(name, "service", "service not in the trace and no class given: the row applies to no task", raw, orphan, show)
    if problems:
        raise InputError(problems)
    return SensitivityTable(rows=rows, dims=dims, source=name)


def _on_reference(rows: pd.DataFrame, dims: tuple[str, ...], ref: str, fleet: Fleet, back: bool = False) -> pd.DataFrame:
    """Scores of ``rows`` expressed on ``ref`` by Eq. 1 (or, with ``back``, from ``ref`` to each row's arch)."""
    same = (rows["arch"] == ref).to_numpy()
    archs, refs = rows["arch"].to_numpy(), np.full(len(rows), ref)
    out = {}
    for dim in dims:
        values = rows[dim].to_numpy(dtype=float)
        # Scores already on the reference keep their printed value (g/g is not exactly 1 in floating point).
        moved = translate_sensitivity(values, dim, refs if back else archs, archs if back else refs, fleet)
        out[dim] = np.where(same, values, moved)
    return pd.DataFrame(out, index=rows.index)


def fill_missing_scores(table: SensitivityTable, fleet: Fleet, seed: int = 0) -> tuple[SensitivityTable, pd.DataFrame]:
    """Fill empty score cells of the measured rows by collaborative filtering (:func:`packer.characterization.infer.infer_scores`).

    The measured rows are expressed on one reference architecture with Eq. 1
    (the architecture most of them were measured on), giving a rows × dimensions
    matrix; rows are grouped by their ``class``. Filled scores are converted back
    to each row's architecture and clipped to [0, 5]; the row's ``inferred``
    column lists the filled dimensions. Returns the new table and one row per
    inferred entry: ``service``, ``class``, ``arch``, ``dim``, ``score``,
    ``confidence`` (1 − expected relative error, from :mod:`packer.characterization.infer`).
    """
    from packer.characterization.infer import infer_scores

    dims = list(table.dims)
    rows = table.rows.copy()
    measured = rows["measured"].to_numpy()
    inputs = rows[measured]
    missing = inputs[dims].isna()
    columns = ["service", "class", "arch", "dim", "score", "confidence"]
    if not missing.to_numpy().any():
        return table, pd.DataFrame(columns=columns)
    ref = _mode_arch(inputs["arch"], fleet)
    on_ref = _on_reference(inputs, table.dims, ref, fleet)
    on_ref.index = inputs["service"].fillna("class " + inputs["class"].fillna("")).to_numpy()
    groups = pd.Series(inputs["class"].fillna("").to_numpy(dtype=object), index=on_ref.index)
    observed = on_ref.to_numpy()[~missing.to_numpy()]
    transform = "log" if (observed > 0).all() else "identity"
    filled, confidence = infer_scores(on_ref, groups, source=table.source, rank=max(1, min(3, len(dims) - 1)), transform=transform, seed=seed)
    back = _on_reference(inputs[["arch"]].assign(**{d: filled[d].to_numpy() for d in dims}), table.dims, ref, fleet, back=True)
    back = back.clip(0.0, SCORE_MAX)
    for dim in dims:
        rows.loc[measured, dim] = np.where(missing[dim].to_numpy(), back[dim].to_numpy(), inputs[dim].to_numpy(dtype=float))
    flags = np.full(len(inputs), "", dtype=object)
    for dim in dims:
        flags = flags + np.where(missing[dim].to_numpy(), dim + "|", "")
    rows.loc[measured, "inferred"] = pd.Series(flags).str.rstrip("|").to_numpy()
    r, c = np.nonzero(missing.to_numpy())
    entries = pd.DataFrame({
        "service": inputs["service"].to_numpy()[r], "class": inputs["class"].to_numpy()[r], "arch": inputs["arch"].to_numpy()[r],
        "dim": np.asarray(dims)[c], "score": back.to_numpy()[r, c], "confidence": confidence.to_numpy()[r, c],
    })
    log.info("inferred %d missing sensitivity scores of %s", len(entries), table.source)
    return SensitivityTable(rows=rows, dims=table.dims, source=table.source), entries


@dataclass(frozen=True)
class SensitivityAssignment:
    """Scores per task and per class.

    ``tasks``: one row per task (input order): a score column per dimension
    (measured on ``measured_on``; NaN when unscored), ``measured_on``,
    ``score_source`` (``service``, ``class``, ``nearest-class`` or ``none``),
    ``score_class`` (the class whose scores were used) and ``scores_inferred``
    (the scores include entries filled by :func:`fill_missing_scores`).
    ``classes``: per (type, class): scores, ``measured_on``, ``source`` (how the
    scores were formed), ``inferred``.
    """

    tasks: pd.DataFrame
    classes: pd.DataFrame
    dims: tuple[str, ...]


def _mode_arch(archs: pd.Series, fleet: Fleet) -> str:
    counts = archs.value_counts()
    top = counts[counts == counts.max()].index
    return next(a for a in fleet.archs.index if a in set(top))


def _service_classes(tasks: pd.DataFrame, services: pd.DataFrame, fleet: Fleet) -> pd.DataFrame:
    """(service, type, class) membership of measured services: majority class in the trace, else the table's."""
    in_trace = tasks[tasks["service"].isin(services["service"])]
    counts = in_trace.groupby(["service", "type", "class", "class_level"], dropna=True).size().rename("n").reset_index()
    # Ties go to the higher level: the more sensitive reading of an ambiguous service.
    majority = counts.sort_values(["service", "type", "n", "class_level"], ascending=[True, True, False, False]).drop_duplicates(["service", "type"])
    absent = services[~services["service"].isin(in_trace["service"]) & services["class"].notna()]
    from_table = pd.DataFrame({"service": absent["service"], "type": absent["arch"].map(fleet.archs["type"]).astype(str), "class": absent["class"]})
    return pd.concat([majority[["service", "type", "class"]], from_table], ignore_index=True)


_CENTRE_COLUMNS = ["cpu_ref_cores", "mem_gib", "net_gbps"]
_SCALE_COLUMNS = ["scale_cpu", "scale_mem", "scale_net"]


def _centre_distance(candidates: pd.DataFrame, centroids: pd.DataFrame | None) -> np.ndarray:
    """Distance from each wanting class's centre to its candidate donor's, in the wanting type's standardized log1p space.

    ``inf`` where either centre is unknown (no centroids, or a donor class the trace does not have).
    """
    if centroids is None or not set(_CENTRE_COLUMNS + _SCALE_COLUMNS) <= set(centroids.columns):
        return np.full(len(candidates), np.inf)
    table = centroids.assign(type=centroids["type"].astype(str)).set_index(["type", "class"])
    logs = np.log1p(table[_CENTRE_COLUMNS].astype(float))
    own = pd.MultiIndex.from_arrays([candidates["type"].astype(str), candidates["class"]])
    donor = pd.MultiIndex.from_arrays([candidates["type_donor"].astype(str), candidates["class_donor"]])
    scale = table[_SCALE_COLUMNS].astype(float).reindex(own).to_numpy()
    diff = (logs.reindex(own).to_numpy() - logs.reindex(donor).to_numpy()) / np.where(scale > 0, scale, 1.0)
    distance = np.sqrt((diff ** 2).sum(axis=1))
    return np.where(np.isnan(distance), np.inf, distance)


def assign_scores(classified: pd.DataFrame, table: SensitivityTable, fleet: Fleet,
                  aggregate: str = DEFAULT_CLASS_AGGREGATE, centroids: pd.DataFrame | None = None) -> SensitivityAssignment:
    """Scores for every task.

    ``classified`` has one row per task with ``task_id``, ``service`` (may be
    null), ``type``, ``class`` and ``class_level`` (as from
    :func:`packer.characterization.classes.classify_tasks` joined with the trace's services).
    ``aggregate``: how a class's scores are formed from its measured services,
    ``mean`` or ``max`` (module doc, rule 2). ``centroids``: the class centres
    (:class:`packer.characterization.classes.ClassResult` ``.centroids``) that rule 3 measures
    distances between; None ranks classes by level only.
    """
    if aggregate not in CLASS_AGGREGATES:
        raise InputError(f"unknown class score aggregate '{aggregate}'; known: {', '.join(CLASS_AGGREGATES)}")
    dims = table.dims
    inputs = table.inputs
    tasks = classified.reset_index(drop=True)
    services = inputs[inputs["service"].notna()].reset_index(drop=True)
    class_rows = inputs[inputs["service"].isna()].reset_index(drop=True)

    ref = _mode_arch(inputs["arch"], fleet) if len(inputs) else None
    members = _service_classes(tasks, services, fleet).merge(services[["service", "arch", *dims, "inferred"]], on="service")
    class_table = []
    if len(members):
        on_ref = members.copy()
        on_ref[list(dims)] = _on_reference(members, dims, ref, fleet)
        on_ref["inferred"] = on_ref["inferred"] != ""
        grouped = on_ref.groupby(["type", "class"])
        derived = grouped[list(dims)].agg(aggregate).join(grouped["inferred"].any()).reset_index()
        derived["measured_on"] = ref
        derived["source"] = grouped["service"].agg(lambda s: f"{aggregate} of " + ", ".join(sorted(s))).to_numpy()
        class_table.append(derived)
    if len(class_rows):
        direct = pd.DataFrame({"type": class_rows["arch"].map(fleet.archs["type"]).astype(str), "class": class_rows["class"],
                               **{d: class_rows[d] for d in dims}, "measured_on": class_rows["arch"], "source": "class row",
                               "inferred": class_rows["inferred"] != ""})
        class_table.insert(0, direct)
    scored = pd.concat(class_table, ignore_index=True).drop_duplicates(["type", "class"]) if class_table else pd.DataFrame(columns=["type", "class", *dims, "measured_on", "source", "inferred"])
    scored["score_class"] = scored["type"].astype(str) + "/" + scored["class"].astype(str)
    scored["class_level"] = scored["class"].map(class_level)

    # Classes present in the trace without scores borrow from the nearest scored level (rule 3).
    present = tasks[["type", "class", "class_level"]].drop_duplicates()
    wanting = present.merge(scored[["type", "class"]], on=["type", "class"], how="left", indicator=True)
    wanting = wanting[wanting["_merge"] == "left_only"].drop(columns="_merge")
    donors = scored[scored["class_level"].notna()]
    candidates = wanting.merge(donors, how="cross", suffixes=("", "_donor"))
    if len(candidates):
        candidates["distance"] = _centre_distance(candidates, centroids)
        candidates["level_distance"] = (candidates["class_level"] - candidates["class_level_donor"]).abs()
        candidates["other_type"] = candidates["type"] != candidates["type_donor"]
        best = candidates.sort_values(["type", "class", "distance", "level_distance", "other_type", "class_level_donor"],
                                      ascending=[True, True, True, True, True, False]).drop_duplicates(["type", "class"])
        donor = "class " + best["class_donor"] + np.where(best["other_type"], " of type " + best["type_donor"].astype(str), "")
        borrowed = best[["type", "class", *dims, "measured_on", "score_class", "inferred"]].assign(source=("nearest " + donor).to_numpy())
        all_classes = pd.concat([scored, borrowed.assign(class_level=borrowed["class"].map(class_level))], ignore_index=True)
    else:
        all_classes = scored

    by_class = tasks[["type", "class"]].merge(all_classes[["type", "class", *dims, "measured_on", "score_class", "source", "inferred"]], on=["type", "class"], how="left")
    by_service = tasks[["service"]].merge(services[["service", *dims, "arch", "inferred"]].rename(columns={"arch": "measured_on"}), on="service", how="left")
    has_service = by_service["measured_on"].notna().to_numpy()
    out = pd.DataFrame({"task_id": tasks["task_id"].to_numpy()})
    for dim in dims:
        out[dim] = np.where(has_service, by_service[dim].to_numpy(dtype=float), by_class[dim].to_numpy(dtype=float))
    out["measured_on"] = np.where(has_service, by_service["measured_on"].to_numpy(dtype=object), by_class["measured_on"].to_numpy(dtype=object))
    class_source = np.where(by_class["source"].fillna("none").str.startswith("nearest ").to_numpy(), "nearest-class", "class")
    out["score_source"] = np.where(has_service, "service", np.where(by_class["measured_on"].notna().to_numpy(), class_source, "none"))
    out["score_class"] = np.where(has_service, None, by_class["score_class"].to_numpy(dtype=object))
    out["scores_inferred"] = np.where(has_service, by_service["inferred"].fillna("").to_numpy(dtype=object) != "",
                                      by_class["inferred"].fillna(False).to_numpy(dtype=bool))
    unscored = int((out["score_source"] == "none").sum())
    if unscored:
        log.info("%d tasks have no sensitivity scores (no class has measured scores)", unscored)
    report_cols = ["type", "class", *dims, "measured_on", "source", "inferred"]
    ordered = all_classes.sort_values(["type", "class_level", "class"])[report_cols].reset_index(drop=True)
    return SensitivityAssignment(tasks=out, classes=ordered, dims=dims)
