"""Workload classes: K-means over p99 usage profiles, per umbrella host type.

Following the colocation paper (Sections III-A/B, V-A1), tasks are clustered by
their p-th percentile usage of CPU, memory and network, separately for each
umbrella host type (a task's type is the ``type`` of its current host's
architecture).

Features (per task):

* ``cpu``: p99 cores on the current host converted to cores of the fleet's
  reference architecture (Broadwell18 for the paper's catalog) through per-core
  throughput (:mod:`packer.characterization.normalize`), so tasks on different architectures are
  comparable; ``mem`` GiB; ``net`` Gbps.
* each feature is ``log1p``-transformed (usage is heavy-tailed: without it a few
  huge tasks become their own clusters and the rest collapse into one), then
  standardized to zero mean and unit variance within the type (a constant feature
  is only centred).

Number of classes. For k = 1..kmax (default 8, capped by the number of distinct
points) the within-cluster sum of squares (WCSS, in standardized units) is
computed and k is the elbow by Kneedle on log(WCSS): normalize the curve to the
unit square and take the k farthest below the chord from its first to its last
point (:func:`elbow_k`). The log matters: WCSS falls multiplicatively with k, and
on the raw curve Kneedle picks the first large drop (with five blobs, two of them
close, it chose 3), while a 20-fold drop late in the curve is as much an elbow.
The paper found 3. ``k`` overrides the choice for every type.

Labels. Clusters are ordered by centroid magnitude (mean of the standardized
centroid coordinates), so a label means the same level whatever the seed: for
k = 3 ``low``, ``medium``, ``high`` (the paper's names); otherwise
``level-i/k`` (i = 1 lowest). :func:`class_level` maps a label to its position in
[0, 1] so labels from different k can be compared.

Tasks without a complete profile (no usage samples, or NaN in a feature) get the
missing features estimated from their requests times the type's median
p99/request ratio for that dimension, and are assigned to the nearest centroid
(they do not move the centroids); ``profiled`` is False for them. A type with
no profiled task at all is clustered on those estimates.

Stable classes. With a ``reference`` (the ``classes.parquet`` of an earlier
characterization, :func:`read_reference_classes`) no K-means is fitted for a type
the reference has: each task takes the class of the nearest reference centre, in
the reference's own standardized log space (its per-type feature scales are stored
with the centres). A task whose profile barely changed then keeps its class, and
the class labels, the number of classes and the scores tied to them stay as they
were (``packer characterize --classes-from``). Types the reference lacks are
clustered afresh.

K-means is scikit-learn's :class:`~sklearn.cluster.KMeans` (``n_init`` fixed,
``random_state`` = seed, so runs are deterministic for a seed), or
:class:`~sklearn.cluster.MiniBatchKMeans` above :data:`MINIBATCH_ABOVE` tasks in a
type.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from packer.errors import InputError, Problem
from packer.io.fleet import Fleet
from packer.characterization.normalize import reference_arch, to_compute_units, to_reference_cores

log = logging.getLogger(__name__)

#: Usage dimensions clustered (the paper's Fig. 2): CPU, memory, network.
CLASS_DIMS = ("cpu", "mem", "net")
DEFAULT_KMAX = 8
#: Above this many tasks in one type, MiniBatchKMeans replaces KMeans. Measured on the
#: 2-core dev machine for k = 1..8, n_init = 4 on 3-D data: 100k rows KMeans 2.2 s vs
#: MiniBatch 6.0 s; 300k rows 14.6 s vs 10.0 s, so the switch pays off only near 200k.
MINIBATCH_ABOVE = 200_000
N_INIT = 4
PAPER_LABELS = ("low", "medium", "high")
_LEVEL = re.compile(r"^level-(\d+)/(\d+)$")


def class_labels(k: int) -> list[str]:
    """Labels of k classes from lowest to highest usage."""
    return list(PAPER_LABELS) if k == 3 else [f"level-{i}/{k}" for i in range(1, k + 1)]


def class_level(label: str) -> float:
    """Position of a class label in [0, 1] (0 = lowest usage); NaN for labels not of :func:`class_labels` form."""
    if label in PAPER_LABELS:
        return PAPER_LABELS.index(label) / 2
    match = _LEVEL.match(str(label))
    if not match:
        return float("nan")
    i, k = int(match.group(1)), int(match.group(2))
    return 0.5 if k == 1 else (i - 1) / (k - 1)


def elbow_k(wcss) -> int:
    """Kneedle elbow of a decreasing WCSS curve given for k = 1..len(wcss), on a log scale.

    ``log(WCSS)`` (floored at 1e-9 of WCSS(1), since a perfect fit has WCSS 0) is
    scaled to the unit square; the chosen k has the largest vertical distance below
    the chord from its first to its last point. A flat curve gives 1; with two
    points, 2 unless the second does not improve on the first.
    """
    raw = np.asarray(wcss, dtype=float)
    if len(raw) == 0:
        raise ValueError("empty WCSS curve")
    if len(raw) == 1 or raw.max() - raw.min() <= 1e-12 * max(abs(raw.max()), 1.0):
        return 1
    y = np.log(np.maximum(raw, raw[0] * 1e-9))
    span = y.max() - y.min()
    if len(y) == 2:
        return 2
    x = np.linspace(0.0, 1.0, len(y))
    yn = (y - y.min()) / span
    chord = yn[0] + (yn[-1] - yn[0]) * x
    return int(np.argmax(chord - yn)) + 1


def wcss_curve(x: np.ndarray, kmax: int, seed: int) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """K-means for k = 1..kmax on ``x`` (n × d): WCSS per k, labels per k, centroids per k."""
    # Imported here: scikit-learn takes seconds to import, and most commands (profile, solve p99) never cluster.
    from sklearn.cluster import KMeans, MiniBatchKMeans

    wcss, labels, centers = [], [], []
    big = len(x) > MINIBATCH_ABOVE
    for k in range(1, kmax + 1):
        if big:
            model = MiniBatchKMeans(n_clusters=k, n_init=N_INIT, random_state=seed, batch_size=4096)
        else:
            model = KMeans(n_clusters=k, n_init=N_INIT, random_state=seed)
        model.fit(x)
        wcss.append(float(model.inertia_))
        labels.append(model.labels_.astype(np.int64))
        centers.append(model.cluster_centers_)
    return np.asarray(wcss), labels, centers


@dataclass(frozen=True)
class ClassResult:
    """Workload classes.

    ``tasks``: one row per task (input order): ``task_id``, ``arch`` (current
    host), ``type``, ``class``, ``class_level`` (0..1), ``profiled``, and the
    features in real units: ``cpu_cores`` (p99 cores on the current host),
    ``cpu_cu`` (compute units), ``cpu_ref_cores`` (cores of ``reference_arch``),
    ``mem_gib``, ``net_gbps``.
    ``centroids``: per (type, class): ``k``, ``n_tasks``, ``cpu_cu``,
    ``cpu_ref_cores``, ``mem_gib``, ``net_gbps`` (centroids mapped back from the
    standardized log space, i.e. geometric-mean-like centres) and the type's
    feature scales ``scale_cpu``, ``scale_mem``, ``scale_net`` (standard deviations
    of the log1p features: distances to the centres are measured in these units).
    ``wcss``: per (type, k): ``wcss`` (standardized units) and ``chosen``.
    ``chosen_k``: per type.
    """

    tasks: pd.DataFrame
    centroids: pd.DataFrame
    wcss: pd.DataFrame
    chosen_k: dict[str, int]
    reference_arch: str
    seed: int
    percentile: float


_FEATURE_UNITS = {"cpu": "cpu_ref_cores", "mem": "mem_gib", "net": "net_gbps"}
_SCALES = [f"scale_{d}" for d in CLASS_DIMS]
#: Columns a reference ``classes.parquet`` must have (:func:`read_reference_classes`).
REFERENCE_COLUMNS = ("type", "class", "class_level", "k", *_FEATURE_UNITS.values(), *_SCALES)


def read_reference_classes(path) -> pd.DataFrame:
    """The class centres of an earlier characterization: its ``classes.parquet``, or the folder holding it.

    Raises :class:`InputError` naming the file when it is missing, unreadable or
    lacks a column of :data:`REFERENCE_COLUMNS` (characterizations written before
    the scales were stored cannot serve as a reference: characterize again).
    """
    from packer.io.trace import read_parquet_table

    path = Path(path)
    if path.is_dir():
        path = path / "classes.parquet"
    table = read_parquet_table(path, not_found="reference classes not found (give a characterization folder or its classes.parquet)")
    missing = [c for c in REFERENCE_COLUMNS if c not in table.columns]
    if missing:
        raise InputError([Problem(str(path), ", ".join(missing), "required column missing (a characterization written by an "
                                  "older packer has no feature scales: characterize again)", 0)])
    bad = ~np.isfinite(table[[*_FEATURE_UNITS.values(), *_SCALES]].to_numpy(dtype=float)).all(axis=1)
    if bad.any():
        raise InputError([Problem(str(path), "centres, scales", "not finite", int(bad.sum()))])
    return table


def _nearest_reference(logged: np.ndarray, centres: pd.DataFrame) -> np.ndarray:
    """Index (into ``centres``) of the nearest centre for each row of log1p features, in the reference's scaled space."""
    scale = centres[_SCALES].to_numpy(dtype=float)[0]
    scale = np.where(scale > 0, scale, 1.0)
    points = np.log1p(centres[list(_FEATURE_UNITS.values())].to_numpy(dtype=float)) / scale
    return np.argmin(((logged[:, None, :] / scale - points[None, :, :]) ** 2).sum(axis=2), axis=1)


def task_types(tasks: pd.DataFrame, hosts: pd.DataFrame, fleet: Fleet) -> pd.DataFrame:
    """``arch`` (of the current host) and umbrella ``type`` per task, in task order."""
    arch = tasks["host_id"].map(hosts.set_index("host_id")["arch"])
    return pd.DataFrame({"arch": arch.to_numpy(), "type": arch.map(fleet.archs["type"]).to_numpy()}, index=tasks.index)


def _stat_column(dim: str, percentile: float) -> str:
    return f"{dim}_p{percentile:g}"


def _features(profiles: pd.DataFrame, tasks: pd.DataFrame, where: pd.DataFrame, fleet: Fleet, percentile: float, source: str) -> pd.DataFrame:
    """Real-unit features per task (p-th percentile, requests as a fallback), aligned to ``tasks``."""
    cols = [_stat_column(d, percentile) for d in CLASS_DIMS]
    missing = [c for c in ["task_id", *cols] if c not in profiles.columns]
    if missing:
        raise InputError([Problem(source, ", ".join(missing), f"required column missing (the profiles have: {', '.join(map(str, profiles.columns))})", 0)])
    stats = profiles.drop_duplicates("task_id").set_index(profiles["task_id"].drop_duplicates().astype(str))
    aligned = stats.reindex(tasks["task_id"].astype(str).to_numpy())
    raw = pd.DataFrame({d: pd.to_numeric(aligned[c], errors="coerce").to_numpy(dtype=float) for d, c in zip(CLASS_DIMS, cols)}, index=tasks.index)
    bad = (raw < 0).any(axis=1).to_numpy() | np.isinf(raw.to_numpy()).any(axis=1)
    if bad.any():
        raise InputError([Problem(source, ", ".join(cols), "negative or infinite percentile usage", int(bad.sum()),
                                  tuple(f"task_id={t!r}" for t in tasks["task_id"].to_numpy()[bad][:5]))])
    profiled = raw.notna().all(axis=1).to_numpy()
    if not profiled.all():
        log.info("%d of %d tasks lack a complete p%g profile; estimating from requests", int((~profiled).sum()), len(tasks), percentile)
        requests = pd.DataFrame({d: tasks.get(f"{d}_request", pd.Series(np.nan, index=tasks.index)).astype(float) for d in CLASS_DIMS})
        ratio = (raw / requests.where(requests > 0)).groupby(where["type"].to_numpy()).median()
        per_task = ratio.reindex(where["type"].to_numpy()).set_axis(tasks.index).fillna(1.0)
        raw = raw.fillna(requests * per_task).fillna(0.0)
    cu = to_compute_units(raw["cpu"].to_numpy(), where["arch"].to_numpy(), fleet)
    return pd.DataFrame(
        {
            "cpu_cores": raw["cpu"].to_numpy(),
            "cpu_cu": cu,
            "cpu_ref_cores": to_reference_cores(cu, fleet),
            "mem_gib": raw["mem"].to_numpy(),
            "net_gbps": raw["net"].to_numpy(),
            "profiled": profiled,
        },
        index=tasks.index,
    )


def classify_tasks(
    profiles: pd.DataFrame,
    tasks: pd.DataFrame,
    hosts: pd.DataFrame,
    fleet: Fleet,
    k: int | None = None,
    kmax: int = DEFAULT_KMAX,
    seed: int = 0,
    percentile: float = 99,
    source: str = "profiles",
    reference: pd.DataFrame | None = None,
) -> ClassResult:
    """Cluster tasks into workload classes per umbrella host type.

    ``profiles`` has ``task_id`` and ``cpu_pNN`` (cores on the current host),
    ``mem_pNN`` (GiB), ``net_pNN`` (Gbps) for ``percentile`` NN; ``tasks`` has
    ``task_id``, ``host_id`` and ``<dim>_request``; ``hosts`` maps ``host_id`` to
    ``arch``. ``k`` fixes the number of classes, else the elbow of the WCSS curve
    over 1..``kmax`` is used. ``source`` names the profiles in error messages.
    ``reference``: class centres to keep (:func:`read_reference_classes`; module doc).
    """
    if k is not None and k < 1:
        raise InputError(f"--k must be at least 1, got {k}")
    if kmax < 1:
        raise InputError(f"kmax must be at least 1, got {kmax}")
    tasks = tasks.reset_index(drop=True)
    where = task_types(tasks, hosts, fleet)
    feats = _features(profiles, tasks, where, fleet, percentile, source)
    logged = np.log1p(feats[list(_FEATURE_UNITS.values())].to_numpy())

    label = np.empty(len(tasks), dtype=object)
    level = np.full(len(tasks), np.nan)
    wcss_rows, centroid_rows, chosen = [], [], {}
    for utype in sorted(where["type"].dropna().unique()):
        members = np.flatnonzero(where["type"].to_numpy() == utype)
        fixed = None if reference is None else reference[reference["type"].astype(str) == str(utype)].reset_index(drop=True)
        if fixed is not None and len(fixed):
            nearest = _nearest_reference(logged[members], fixed)
            label[members] = fixed["class"].to_numpy(dtype=object)[nearest]
            level[members] = fixed["class_level"].to_numpy(dtype=float)[nearest]
            chosen[str(utype)] = int(fixed["k"].iloc[0])
            counts = np.bincount(nearest, minlength=len(fixed))
            centroid_rows += [{**row, "n_tasks": int(n)} for row, n in zip(fixed.drop(columns="n_tasks", errors="ignore").to_dict("records"), counts)]
            continue
        if fixed is not None:
            log.warning("type %s is not in the reference classes; clustering it afresh", utype)
        fit_on = members[feats["profiled"].to_numpy()[members]]
        if len(fit_on) == 0:
            log.warning("type %s: no task has a usage profile; clustering on request-based estimates", utype)
            fit_on = members
        mean = logged[fit_on].mean(axis=0)
        std = logged[fit_on].std(axis=0)
        std[std == 0] = 1.0
        z_fit = (logged[fit_on] - mean) / std
        distinct = len(np.unique(z_fit, axis=0))
        top = min(kmax if k is None else max(k, 1), distinct)
        curve, fit_labels, fit_centers = wcss_curve(z_fit, top, seed)
        kk = min(k, top) if k is not None else elbow_k(curve)
        if k is not None and k > top:
            log.warning("type %s: only %d distinct profiles, using k=%d instead of %d", utype, distinct, top, k)
        chosen[str(utype)] = kk
        wcss_rows += [{"type": str(utype), "k": i + 1, "wcss": w, "chosen": i + 1 == kk} for i, w in enumerate(curve)]

        centers = fit_centers[kk - 1]
        # Rank by magnitude so the label of a cluster does not depend on the seed's cluster numbering.
        rank = np.empty(kk, dtype=np.int64)
        rank[np.argsort(centers.mean(axis=1), kind="stable")] = np.arange(kk)
        z_all = (logged[members] - mean) / std
        nearest = np.argmin(((z_all[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2), axis=1)
        assigned = rank[nearest]
        # Profiled tasks keep the K-means assignment (identical except for MiniBatch ties).
        is_fit = np.isin(members, fit_on)
        assigned[is_fit] = rank[fit_labels[kk - 1]]
        names = np.asarray(class_labels(kk), dtype=object)
        label[members] = names[assigned]
        level[members] = np.asarray([class_level(n) for n in names])[assigned]

        real = np.expm1(centers * std + mean)
        ref = fleet.archs.loc[reference_arch(fleet)]
        counts = np.bincount(assigned, minlength=kk)
        for c in range(kk):
            row = real[np.flatnonzero(rank == c)[0]]
            centroid_rows.append({
                "type": str(utype), "class": names[c], "class_level": class_level(names[c]), "k": kk, "n_tasks": int(counts[c]),
                "cpu_cu": float(row[0]) * ref["score"] / ref["cores"],
                "cpu_ref_cores": float(row[0]), "mem_gib": float(row[1]), "net_gbps": float(row[2]),
                **{name: float(v) for name, v in zip(_SCALES, std)},
            })

    out = pd.DataFrame({"task_id": tasks["task_id"].astype(str).to_numpy(), "arch": where["arch"].to_numpy(), "type": where["type"].astype(str).to_numpy(),
                        "class": label, "class_level": level})
    out = pd.concat([out, feats.reset_index(drop=True)], axis=1)
    return ClassResult(
        tasks=out,
        centroids=pd.DataFrame(centroid_rows),
        wcss=pd.DataFrame(wcss_rows, columns=["type", "k", "wcss", "chosen"]),
        chosen_k=chosen,
        reference_arch=reference_arch(fleet),
        seed=seed,
        percentile=percentile,
    )
