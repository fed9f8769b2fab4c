"""Profiling on a Dask cluster: the profiles of :func:`~packer.characterization.profile.profile_tasks`, bit for bit,
computed by the cluster's workers as a keyed aggregation over the partitioned usage dataset.

1. The usage dataset — the trace's ``usage.parquet`` (file or folder), or any fsspec URL such as
   ``s3://bucket/usage/`` — is cut into pieces of consecutive row groups. Each worker reads its pieces and
   validates every row with the local engine's :func:`~packer.io.usage.check_rows`, so an invalid row is
   reported with its file, column and row number exactly as the local engine reports it.
2. The rows are shuffled by task (``DataFrame.shuffle``): all rows of a task meet in one partition.
3. Each partition is sorted by task and by the rows' places in the dataset — the order in which the local
   engine sums the rows of a window — and profiled by the local engine's NumPy kernel
   (:func:`~packer.characterization.profile.profile_chunk`).

Pieces are read with ``dask.delayed`` over row groups (``dd.from_delayed``) rather than
``dd.read_parquet``, which does not tell which row of which file a row was: the error
messages need that. The trace's hosts and tasks tables are read by the caller, locally.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from packer.characterization.profile import ProfileResult, check_profiling, profile_chunk, profile_result
from packer.distributed import require_dask, worker_threads
from packer.errors import InputError, Problem
from packer.io.trace import Trace, check_usage_schema, usage_dims
from packer.io.usage import DEFAULT_MAX_ROWS, SKIP_HINT, ProblemLog, UsageChunk, check_rows, task_ids

if TYPE_CHECKING:
    import distributed
    import fsspec

#: Rows per piece read by one task (whole row groups, so a piece may hold more).
PIECE_ROWS = 1 << 20


@dataclass(frozen=True)
class _Piece:
    name: str  # the file as messages name it
    path: str  # the file as the filesystem opens it
    groups: tuple[int, ...]  # consecutive row groups
    offset: int  # the first group's first row in the file
    first: int  # that row's place in the whole dataset (files in order)
    rows: int


@dataclass
class UsageSource:
    """A usage dataset and the filesystem its files are read from; ``name`` is how messages name the dataset."""

    name: str
    fs: "fsspec.AbstractFileSystem"
    dataset: ds.Dataset
    local: bool


def usage_source(trace: Trace, usage: str | None = None) -> UsageSource:
    """The trace's own usage (``usage`` None) or the usage dataset at ``usage``, a path or any fsspec URL
    (``s3://``, ``gs://``, ... with the matching fsspec package installed). :class:`InputError` if it cannot be read."""
    import fsspec
    from fsspec.implementations.local import LocalFileSystem
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    if usage is None:
        return UsageSource(str(trace.usage_path), LocalFileSystem(), trace.usage_dataset(), True)
    try:
        fs, root = fsspec.core.url_to_fs(usage)
    except (ImportError, ValueError) as exc:  # fsspec names the package a protocol needs ("Install s3fs to access S3")
        raise InputError([Problem(usage, "", f"cannot open the usage URL: {exc}", 0)]) from None
    try:
        dataset = ds.dataset(root, format="parquet", filesystem=PyFileSystem(FSSpecHandler(fs)))
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError([Problem(usage, "", f"not a readable Parquet file or dataset: {exc}", 0)]) from None
    problems = check_usage_schema(dataset, usage)
    if problems:
        raise InputError(problems)
    return UsageSource(usage, fs, dataset, isinstance(fs, LocalFileSystem))


def _pieces(source: UsageSource) -> list[_Piece]:
    pieces, first = [], 0
    for file in source.dataset.files:
        name = file if source.local else source.fs.unstrip_protocol(file)
        path = os.path.abspath(file) if source.local else file  # workers may run in another folder
        try:
            with source.fs.open(path, "rb") as f:
                meta = pq.ParquetFile(f).metadata
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError([Problem(name, "", f"not a readable Parquet file: {exc}", 0)]) from None
        offset, groups, rows = 0, [], 0
        for g in range(meta.num_row_groups):
            groups.append(g)
            rows += meta.row_group(g).num_rows
            if rows >= PIECE_ROWS or g == meta.num_row_groups - 1:
                pieces.append(_Piece(name, path, tuple(groups), offset, first, rows))
                offset, first, groups, rows = offset + rows, first + rows, [], 0
    return [p for p in pieces if p.rows]


def _read_piece(piece: _Piece, fs: "fsspec.AbstractFileSystem", dims: list[str], index: pa.Array) -> tuple[pd.DataFrame, ProblemLog]:
    """A piece's valid rows (``task``: index in trace.tasks, ``order``: place in the dataset, ``ts``, the dims) and the
    problems of its invalid ones, which are dropped (the driver decides whether they are an error)."""
    with fs.open(piece.path, "rb") as f:
        table = pq.ParquetFile(f, read_dictionary=["task_id"]).read_row_groups(list(piece.groups), columns=["task_id", "ts", *dims])
    log = ProblemLog()
    chunk = check_rows(piece.name, table, np.arange(piece.offset, piece.offset + table.num_rows), dims, index, log, skip_invalid=True)
    # Dropping rows keeps their order, so positions among the kept rows order them as in the dataset.
    order = piece.first + np.arange(len(chunk.task), dtype=np.int64)
    # Widened to the float64 of the frames' declared meta.
    frame = pd.DataFrame({"task": chunk.task, "order": order, "ts": chunk.ts, **{d: v.astype(np.float64, copy=False) for d, v in chunk.values.items()}})
    return frame, ProblemLog(dict(log.counts), dict(log.examples))  # plain dicts: picklable


def _profile_partition(frame: pd.DataFrame, dims: list[str], qs: tuple[float, ...], window_s: int, empty: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return empty
    task, order = frame["task"].to_numpy(), frame["order"].to_numpy()
    rows = np.lexsort((order, task))
    chunk = UsageChunk(task[rows], frame["ts"].to_numpy()[rows], {d: frame[d].to_numpy()[rows] for d in dims})
    return profile_chunk(chunk, dims, qs, window_s)


def dask_work(trace: Trace, usage: str | None = None) -> int:
    """What :func:`profile_tasks_dask` reports through ``progress`` in all: every usage row twice (read, profiled)."""
    return 2 * usage_source(trace, usage).dataset.count_rows()


def profile_tasks_dask(
    trace: Trace,
    client: "distributed.Client",
    percentiles: Sequence[float] = (99.0,),
    window_s: int = 60,
    *,
    usage: str | None = None,
    skip_invalid: bool = False,
    max_rows: int = DEFAULT_MAX_ROWS,
    progress: Callable[[int], None] | None = None,
) -> ProfileResult:
    """:func:`~packer.characterization.profile.profile_tasks` on ``client``'s cluster, with the same result.

    ``usage``: read usage from this path or fsspec URL instead of the trace's
    ``usage.parquet`` (the workers read it; the trace's tables are read here).
    ``max_rows``: about the most rows a worker profiles at once (the shuffle's
    partitions are sized for it). ``progress`` is called with rows as pieces are read
    and again as the partitions holding them are profiled.
    """
    require_dask()
    import dask
    import dask.dataframe as dd
    import distributed

    qs = check_profiling(percentiles, window_s)
    source = usage_source(trace, usage)
    dims = usage_dims(source.dataset)
    pieces = _pieces(source)
    rows = sum(p.rows for p in pieces)
    index = dask.delayed(task_ids(trace))  # one key in the graph, sent once to each worker that needs it
    reads = [dask.delayed(_read_piece, pure=True)(p, source.fs, dims, index) for p in pieces]
    frames = dd.from_delayed([r[0] for r in reads], meta=_frame_meta(dims), verify_meta=False) if reads else None
    empty = profile_chunk(UsageChunk(np.zeros(1, np.int32), np.zeros(1, np.int64), {d: np.zeros(1) for d in dims}), dims, qs, window_s).iloc[:0]
    jobs: dict = {}
    if frames is not None:
        # Hashing tasks leaves partitions uneven: aim at 80% of max_rows each, and at least one per worker thread.
        parts = max(worker_threads(client), -(-rows * 5 // (4 * max_rows)))
        profiled = frames.shuffle("task", npartitions=parts).map_partitions(_profile_partition, dims, qs, window_s, empty, meta=empty)
        tables = profiled.to_delayed()
        # One computation: each piece is read once, for its rows and its problems.
        futures = client.compute([*tables, *(r[1] for r in reads)])
        jobs = dict(zip(futures, [("table", None)] * len(tables) + [("log", p.rows) for p in pieces]))
    results, log = {}, ProblemLog()
    for future in distributed.as_completed(list(jobs)):
        kind, piece_rows = jobs[future]
        results[future] = future.result()
        if progress is not None:
            progress(piece_rows if kind == "log" else int(results[future]["samples"].sum()))
    for future, (kind, _) in jobs.items():  # in piece order, as the local engine lists problems
        if kind == "log":
            log.merge(results[future])
    if log.total and not skip_invalid:
        raise InputError([*log.problems, Problem("", "", SKIP_HINT, 0)])
    tables = [results[f] for f, (kind, _) in jobs.items() if kind == "table" and len(results[f])]
    return profile_result(trace, tables, dims, qs, window_s, dict(log.counts))


def _frame_meta(dims: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"task": np.array([], np.int32), "order": np.array([], np.int64), "ts": np.array([], np.int64),
                         **{d: np.array([], np.float64) for d in dims}})
