"""Per-task usage profiles: the p-th percentile of windowed usage, plus mean, max and counts.

Following the colocation paper (Section III-A), usage is first averaged over fixed
windows (default 60 s; the paper averages 1-s samples over a minute), then the p-th
percentile (default 99) is taken over a task's windows (the paper: over 7 days).
Percentiles interpolate linearly between order statistics (NumPy's default
``"linear"`` method). ``mean`` and ``max`` are over the raw samples.

The usage table is streamed in task-complete chunks (:mod:`packer.io.usage`; usage
not stored by task is first hash-partitioned by task into temporary spill files),
so memory is bounded by the chunk size, not the table size. Within a chunk
everything is vectorized: one sort by (task, window) — skipped when the data is
already in that order — segment reductions for the window means, and one sort of a combined
``task + value`` key for the per-task order statistics. That key orders values
within a task exactly up to about 1e-12 of the chunk's largest value.
"""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from packer.errors import InputError
from packer.io.trace import Trace, usage_dims
from packer.io.usage import DEFAULT_MAX_ROWS, ProblemLog, UsageChunk, scan_usage


@dataclass
class ProfileResult:
    """``profiles``: one row per task (``trace.tasks`` order), see :func:`profile_tasks`.
    ``skipped``: invalid usage rows dropped, per (file, column, reason). ``rows``: usage rows used."""

    profiles: pd.DataFrame
    percentiles: tuple[float, ...]
    window_s: int
    rows: int
    skipped: dict[tuple[str, str, str], int]

    @property
    def tasks_without_usage(self) -> int:
        return int((self.profiles["samples"] == 0).sum())


def percentile_column(dim: str, q: float) -> str:
    """Column name of a percentile statistic: ``percentile_column("cpu", 99) == "cpu_p99"``."""
    return f"{dim}_p{q:g}"


#: One value in this many is sampled to guess, per group, a value below the order statistics that
#: :func:`grouped_percentiles` needs, so that it sorts only the values above the guess.
PERCENTILE_SAMPLE = 16


def grouped_percentiles(values: np.ndarray, group: np.ndarray, starts: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """Percentiles ``qs`` (0-100) of ``values`` within each group, as NumPy's ``"linear"`` method.

    ``group`` holds each value's group number 0..G-1 in non-decreasing order and
    ``starts`` the index where each group begins. Returns a (len(qs), G) array.

    Only each group's values from the lowest order statistic asked for up are needed (for
    the p99 of a week of minutes, 1% of them): a group's values at or above a guess
    (:func:`_guess_below`) are sorted when there are enough of them to hold those order
    statistics, which proves the guess low enough; the group's values are all sorted otherwise.
    """
    n = len(values)
    counts = np.diff(np.append(starts, n))
    h = (counts - 1) * (np.asarray(qs, dtype=np.float64)[:, None] / 100.0)
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, counts - 1)
    lowest = lo.min(axis=0, initial=n)  # the lowest rank (ascending, from 0) asked of each group
    keep = values >= np.repeat(_guess_below(values, starts, counts, lowest), counts)
    kept = np.add.reduceat(keep, starts, dtype=np.int64) if n else counts
    short = kept < counts - lowest
    if short.any():
        keep |= np.repeat(short, counts)
        kept = np.where(short, counts, kept)
    values, group = values[keep], np.repeat(np.arange(len(starts)), kept)
    top = float(values.max()) if len(values) else 0.0
    scale = top * (1 + 2**-40) if top > 0 else 1.0
    ordered = values[np.argsort(group + values / scale, kind="quicksort")]
    # A group's kept values are its largest ones: its value of rank r is at first + r.
    first = np.cumsum(kept) - counts
    a, b = ordered[first + lo], ordered[first + hi]
    return a + (h - lo) * (b - a)


def _guess_below(values: np.ndarray, starts: np.ndarray, counts: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Per group (``starts``, ``counts``: as :func:`grouped_percentiles`), a value likely at or below its order statistic of
    ``rank`` (ascending, from 0), from every :data:`PERCENTILE_SAMPLE`-th value; -inf where the sample is too thin to tell."""
    sample = np.arange(0, len(values), PERCENTILE_SAMPLE)
    s_group = np.searchsorted(starts, sample, side="right") - 1
    s_values = values[sample]
    top = float(s_values.max()) if len(sample) else 0.0
    # A guess need not be exact: sorted by group and value in one float key, as close values' order does not matter.
    ordered = s_values[np.argsort(s_group + s_values / (top * 2.0 if top > 0 else 1.0), kind="quicksort")]
    s_counts = np.bincount(s_group, minlength=len(starts))
    share = rank / np.maximum(counts, 1)
    # Three standard deviations of the sample's rank below its expected rank, and one more.
    margin = np.ceil(3.0 * np.sqrt(s_counts * share * (1.0 - share))) + 1
    s_rank = np.floor(share * s_counts - margin).astype(np.int64)
    usable = (s_rank >= 0) & (s_counts > 0)
    guess = np.full(len(starts), -np.inf)
    guess[usable] = ordered[(np.cumsum(s_counts) - s_counts)[usable] + s_rank[usable]]
    return guess


def profile_chunk(chunk: UsageChunk, dims: list[str], qs: Sequence[float], window_s: int) -> pd.DataFrame:
    """Statistics of the tasks of a task-complete, non-empty ``chunk``: one row per task (``task``: its index in
    ``trace.tasks``, ascending), ``samples``, ``windows`` and per dimension the percentiles ``qs``, mean and max.
    Rows of a window are summed in ``chunk`` order (stable sort), so the same rows in the same order give the same bits,
    and in float64 whether values are float32 or float64 (the same bits as values widened first)."""
    task, win = chunk.task, chunk.ts // window_s
    span = int(win.max() - win.min()) + 1
    key = task.astype(np.int64) * span + (win - win.min())
    if not np.all(key[1:] >= key[:-1]):
        order = np.argsort(key, kind="stable")
        key, task = key[order], task[order]
        values = {d: chunk.values[d][order] for d in dims}
    else:
        values = chunk.values
    wstart = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    wcount = np.diff(np.append(wstart, len(key)))
    wtask = task[wstart]
    tstart = np.flatnonzero(np.r_[True, wtask[1:] != wtask[:-1]])
    out = {
        "task": wtask[tstart],
        "samples": np.add.reduceat(wcount, tstart),
        "windows": np.diff(np.append(tstart, len(wstart))),
    }
    wgroup = np.repeat(np.arange(len(tstart)), out["windows"])
    for d in dims:
        wsum = np.add.reduceat(values[d], wstart, dtype=np.float64)
        pct = grouped_percentiles(wsum / wcount, wgroup, tstart, qs)
        for k, q in enumerate(qs):
            out[percentile_column(d, q)] = pct[k]
        out[f"{d}_mean"] = np.add.reduceat(wsum, tstart) / out["samples"]
        out[f"{d}_max"] = np.maximum.reduceat(values[d], wstart[tstart]).astype(np.float64, copy=False)
    return pd.DataFrame(out)


def profile_tasks(
    trace: Trace,
    percentiles: Sequence[float] = (99.0,),
    window_s: int = 60,
    *,
    skip_invalid: bool = False,
    max_rows: int = DEFAULT_MAX_ROWS,
    progress: Callable[[int], None] | None = None,
) -> ProfileResult:
    """Profile every task of ``trace`` from its usage table.

    Returns a :class:`ProfileResult` whose ``profiles`` frame has, per task (in
    ``trace.tasks`` order): ``task_id``; ``samples`` (usage rows); ``windows``
    (windows with at least one sample); and per usage dimension ``d`` (``cpu`` cores
    on the task's current host, ``mem`` GiB, ``net``/``membw`` Gbps):
    ``d_pNN`` for each percentile, ``d_mean``, ``d_max`` and, where the task has a
    request for ``d``, ``d_request``. Tasks without usage get ``samples == 0`` and NaN
    statistics. Raises :class:`InputError` on invalid usage rows unless
    ``skip_invalid``.
    """
    qs = check_profiling(percentiles, window_s)
    dims = usage_dims(trace.usage_dataset())
    log = ProblemLog()
    # Closed at once on any exception (KeyboardInterrupt too), so the scan's spill folder goes with it.
    with contextlib.closing(scan_usage(trace, dims, skip_invalid=skip_invalid, max_rows=max_rows, progress=progress, log=log)) as chunks:
        parts = [profile_chunk(c, dims, qs, window_s) for c in chunks if len(c.task)]
    return profile_result(trace, parts, dims, qs, window_s, dict(log.counts))


def check_profiling(percentiles: Sequence[float], window_s: int) -> tuple[float, ...]:
    """The percentiles as floats; :class:`InputError` for a bad percentile or window."""
    qs = tuple(float(q) for q in percentiles)
    if not qs or any(not 0 <= q <= 100 for q in qs):
        raise InputError(f"percentiles must be between 0 and 100, got {list(percentiles)}")
    if window_s <= 0:
        raise InputError(f"the window must be a positive number of seconds, got {window_s}")
    return qs


def profile_result(trace: Trace, parts: list[pd.DataFrame], dims: list[str], qs: tuple[float, ...], window_s: int,
                   skipped: dict[tuple[str, str, str], int]) -> ProfileResult:
    """The :class:`ProfileResult` of :func:`profile_chunk` results ``parts`` (each task in one of them)."""
    n = len(trace.tasks)
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({"task": np.array([], dtype=np.int32)})
    profiles = pd.DataFrame({"task_id": trace.tasks["task_id"].to_numpy()})
    for col in table.columns.drop("task"):
        full = np.zeros(n, dtype=np.int64) if col in ("samples", "windows") else np.full(n, np.nan)
        full[table["task"].to_numpy()] = table[col].to_numpy()
        profiles[col] = full
    for col in ("samples", "windows"):
        if col not in profiles:
            profiles[col] = np.zeros(n, dtype=np.int64)
    for d in dims:
        if f"{d}_request" in trace.tasks.columns:
            profiles[f"{d}_request"] = trace.tasks[f"{d}_request"].to_numpy()
    return ProfileResult(profiles, qs, window_s, int(profiles["samples"].sum()), skipped)


def summarize_profiles(result: ProfileResult) -> pd.DataFrame:
    """Per dimension: how far the first percentile sits below requests.

    Columns: ``tasks`` (profiled tasks with a positive request), ``sum_request`` and
    ``sum_pNN`` (fleet totals, trace units), ``pNN_of_request`` (ratio of the totals),
    ``median_ratio`` (median per-task pNN / request) and ``over_request`` (tasks
    whose pNN exceeds their request).
    """
    q = result.percentiles[0]
    p = result.profiles[result.profiles["samples"] > 0]
    rows = []
    for col in [c for c in p.columns if c.endswith("_request")]:
        d = col.removesuffix("_request")
        pc_col = percentile_column(d, q)
        if pc_col not in p:
            continue
        has = p[col] > 0
        req, use = p.loc[has, col], p.loc[has, pc_col]
        ratio = use / req
        rows.append(
            {
                "dim": d,
                "tasks": int(has.sum()),
                "sum_request": float(req.sum()),
                f"sum_p{q:g}": float(use.sum()),
                f"p{q:g}_of_request": float(use.sum() / req.sum()) if req.sum() else np.nan,
                "median_ratio": float(ratio.median()) if len(ratio) else np.nan,
                "over_request": int((ratio > 1).sum()),
            }
        )
    return pd.DataFrame(rows).set_index("dim") if rows else pd.DataFrame()


#: Parquet metadata key of profiles.parquet recording how `packer profile` made it (window, skipped rows).
PROFILING_KEY = b"packer.profiling"


def with_profiling(table: pa.Table, window_s: int, skip_invalid_usage: bool) -> pa.Table:
    """``table`` (profiles) carrying how it was made, so a plan solved on it records what ``packer verify`` must redo."""
    record = json.dumps({"window_s": window_s, "skip_invalid_usage": skip_invalid_usage}).encode()
    return table.replace_schema_metadata({**(table.schema.metadata or {}), PROFILING_KEY: record})


def recorded_profiling(profiles: Path | None) -> dict:
    """The ``window_s`` and ``skip_invalid_usage`` a profiles.parquet was made with ({} if unrecorded), as ``api.solve`` keywords."""
    if profiles is None:
        return {}
    try:
        record = (pq.read_schema(profiles).metadata or {}).get(PROFILING_KEY)
        values = json.loads(record) if record else {}
    except (pa.ArrowInvalid, OSError, ValueError) as exc:
        raise InputError(f"{profiles}: not a readable profiles file: {exc}") from None
    return {key: values[key] for key in ("window_s", "skip_invalid_usage") if key in values}
