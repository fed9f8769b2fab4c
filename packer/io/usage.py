"""Stream the usage table in task-complete chunks, validating rows on the way.

The usage table may be far larger than memory. :func:`scan_usage` reads it in
chunks of about ``max_rows`` rows such that **all rows of a task land in the same
chunk**, so per-task statistics can be computed chunk by chunk. Chunks are planned
from the Parquet row-group statistics of ``task_id``:

* row groups whose task ranges overlap are merged into one component (a task can
  only be split across overlapping groups), and consecutive components are packed
  into chunks: data written sorted by ``task_id`` (as ``packer generate`` and the
  importers write it) is read in a single pass;
* a component larger than ``max_rows`` whose groups are still stored by task, only
  sharing the tasks cut at group boundaries, is read in task-id ranges, each range
  reading the groups it meets (one group more than its own, typically) and keeping
  its tasks;
* the other large components (data in another order, e.g. public traces sorted by
  time) are read once, in batches, and hash-partitioned by task into spill files in
  a temporary folder (:mod:`packer.io.partition`), removed afterwards; each
  partition is then one chunk. So any row order costs one pass over the input plus
  one over the spill files.

Each row is checked (unknown task, missing time, negative, NaN, infinite or
implausibly large values) as it is read, with its row number in its file.
Problems are collected over the whole scan and raised together as one
:class:`InputError` with file, column, count and first rows — unless
``skip_invalid`` is set, in which case bad rows are dropped and counted.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import itertools
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from packer.errors import MAX_ROWS_SHOWN, InputError, Problem
from packer.io.partition import Partitions, SpillError
from packer.io.trace import Trace, usage_dims
from packer.io.validate import PLAUSIBLE_MAX, UNITS, plain

DEFAULT_MAX_ROWS = 4_000_000
#: Usage stored by task but with tasks cut across row groups is read in task-id ranges, each re-reading the
#: groups it shares with the previous range; beyond this share of rows re-read, spilling is cheaper.
MAX_REREAD = 0.5
#: Rows per batch when reading usage to spill it (bounds the memory of that pass).
SPILL_BATCH_ROWS = 1 << 20
_FLOAT32 = (pa.float16(), pa.float32())
_INT32 = np.iinfo(np.int32)
_T = TypeVar("_T")
#: How to go on despite invalid usage rows (the last line of the error).
SKIP_HINT = ("to drop invalid usage rows instead (they are counted): packer profile TRACE --skip-invalid, "
             "then packer solve TRACE --profiles PROFILES")


@dataclass
class UsageChunk:
    """Usage rows of a set of tasks: ``task`` indexes ``trace.tasks`` (int32), ``ts`` is Unix seconds (int64; int32
    once spilled where they fit), ``values[dim]`` in the trace's units (cores, GiB, Gbps), float32 where the trace
    stores 32 bits or fewer, else float64: as stored, so that no pass widens what it only moves."""

    task: np.ndarray
    ts: np.ndarray
    values: dict[str, np.ndarray]


@dataclass
class _RowGroup:
    file: str
    index: int
    rows: int
    offset: int  # position of the group's first row in its file
    lo: str | None
    hi: str | None
    nulls: bool  # may hold rows without a task_id


@dataclass
class _Read:
    file: str
    groups: list[int]
    offsets: list[int]
    task_lo: str | None = None  # keep only task_id in [task_lo, task_hi)
    task_hi: str | None = None


@dataclass
class UsagePlan:
    """How :func:`scan_usage` reads the usage table: task-complete ``chunks`` (reads of whole row groups, or of
    groups filtered to a task-id range), and the ``unordered`` row groups, not stored by task, to spill first."""

    chunks: list[list[_Read]]
    unordered: list[_RowGroup]


@dataclass
class ProblemLog:
    """Validation problems accumulated over a scan: counts and the first rows of each."""

    counts: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    examples: dict[tuple[str, str, str], list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, file: str, column: str, message: str, mask: np.ndarray, rows: np.ndarray, describe: Callable[[np.ndarray], list[str]]) -> None:
        count = int(mask.sum())
        if not count:
            return
        key = (file, column, message)
        self.counts[key] += count
        need = MAX_ROWS_SHOWN - len(self.examples[key])
        if need > 0:
            self.examples[key] += describe(np.flatnonzero(mask)[:need])

    def merge(self, other: "ProblemLog") -> None:
        """Add ``other``'s counts and, up to the limit shown, its first rows (logs merged in scan order)."""
        for key, count in other.counts.items():
            self.counts[key] += count
            need = MAX_ROWS_SHOWN - len(self.examples[key])
            if need > 0:
                self.examples[key] += other.examples.get(key, [])[:need]

    @property
    def problems(self) -> list[Problem]:
        return [Problem(f, c, m, n, tuple(self.examples[(f, c, m)])) for (f, c, m), n in self.counts.items()]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


_END = object()


def _ahead(items: Iterator[_T]) -> Iterator[_T]:
    """``items``, each computed in a thread while the caller works on the one before (NumPy and Arrow release the GIL)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(next, items, _END)
        while (item := future.result()) is not _END:
            future = pool.submit(next, items, _END)
            yield item


def _row_groups(dataset: ds.Dataset) -> list[_RowGroup]:
    groups = []
    for path in dataset.files:
        meta = pq.ParquetFile(path).metadata
        col = meta.schema.names.index("task_id")
        offset = 0
        for i in range(meta.num_row_groups):
            rg = meta.row_group(i)
            stats = rg.column(col).statistics
            has = stats is not None and stats.has_min_max
            lo, hi = (stats.min, stats.max) if has else (None, None)
            if isinstance(lo, bytes):
                lo, hi = lo.decode(), hi.decode()
            nulls = stats is None or not stats.has_null_count or stats.null_count > 0
            groups.append(_RowGroup(path, i, rg.num_rows, offset, lo, hi, nulls))
            offset += rg.num_rows
    return groups


def plan_reads(dataset: ds.Dataset, max_rows: int = DEFAULT_MAX_ROWS) -> UsagePlan:
    """Plan the reads: every task's rows fall in exactly one chunk, or all in the unordered row groups."""
    groups = [g for g in _row_groups(dataset) if g.rows > 0]
    if not groups:
        return UsagePlan([], [])
    if any(g.lo is None for g in groups):
        components = [groups]  # no statistics: any group may hold any task
    else:
        groups.sort(key=lambda g: (g.lo, g.hi))
        components, hi = [], None
        for g in groups:
            if hi is not None and g.lo <= hi:
                components[-1].append(g)
                hi = max(hi, g.hi)
            else:
                components.append([g])
                hi = g.hi

    plan = UsagePlan([], [])
    pending: list[_RowGroup] = []
    pending_rows = 0
    for comp in components:
        rows = sum(g.rows for g in comp)
        if rows > max_rows:
            slices = _ranges(comp, max_rows)
            if slices is None:
                plan.unordered += comp
                continue
            if pending:
                plan.chunks.append(_reads(pending))
                pending, pending_rows = [], 0
            plan.chunks += slices
            continue
        if pending_rows + rows > max_rows and pending:
            plan.chunks.append(_reads(pending))
            pending, pending_rows = [], 0
        pending += comp
        pending_rows += rows
    if pending:
        plan.chunks.append(_reads(pending))
    plan.unordered.sort(key=lambda g: (g.file, g.index))
    return plan


def _reads(groups: list[_RowGroup], lo: str | None = None, hi: str | None = None) -> list[_Read]:
    by_file: dict[str, _Read] = {}
    for g in sorted(groups, key=lambda g: (g.file, g.index)):
        r = by_file.setdefault(g.file, _Read(g.file, [], [], lo, hi))
        r.groups.append(g.index)
        r.offsets.append(g.offset)
    return list(by_file.values())


def _ranges(comp: list[_RowGroup], max_rows: int) -> list[list[_Read]] | None:
    """Chunks of task-id ranges of ``comp`` (row groups sorted by task range, overlapping), each of about ``max_rows``
    rows and reading the groups its range meets; None if a range would read over ``max_rows`` plus one group, or all
    together would re-read more than ``MAX_REREAD`` of the rows (the groups are not stored by task)."""
    if comp[0].lo is None or any(g.nulls for g in comp):
        return None  # rows without a task_id belong to no range: spill them to report them
    cuts: list[str] = []  # where each range but the first starts: at a group's first task, after the last cut
    run = 0
    for g in comp:
        if run and run + g.rows > max_rows and g.lo > (cuts[-1] if cuts else comp[0].lo):
            cuts.append(g.lo)
            run = 0
        run += g.rows
    bounds = [None, *cuts, None]
    budget = (1 + MAX_REREAD) * sum(g.rows for g in comp)
    largest = max_rows + max(g.rows for g in comp)
    ranges = []
    for lo, hi in zip(bounds, bounds[1:]):
        meets = [g for g in comp if (hi is None or g.lo < hi) and (lo is None or g.hi >= lo)]
        rows = sum(g.rows for g in meets)
        budget -= rows
        if budget < 0 or rows > largest:
            return None
        ranges.append(_reads(meets, lo, hi))
    return ranges


def _to_seconds(ts: pa.ChunkedArray) -> np.ndarray:
    if pa.types.is_timestamp(ts.type):
        return pc.cast(ts, pa.timestamp("s")).cast(pa.int64()).to_numpy(zero_copy_only=False)
    return pc.floor(pc.cast(ts, pa.float64())).cast(pa.int64()).to_numpy(zero_copy_only=False)


def _read(read: _Read, dims: list[str], task_index: pa.Array, log: ProblemLog, skip_invalid: bool) -> UsageChunk:
    pf = pq.ParquetFile(read.file, read_dictionary=["task_id"])
    table = pf.read_row_groups(read.groups, columns=["task_id", "ts", *dims], use_threads=True)
    rows = np.concatenate([np.arange(off, off + pf.metadata.row_group(g).num_rows) for g, off in zip(read.groups, read.offsets)])
    if read.task_lo is not None or read.task_hi is not None:
        ids = table["task_id"].cast(pa.string())
        keep = pa.scalar(True)
        if read.task_lo is not None:
            keep = pc.and_(keep, pc.greater_equal(ids, read.task_lo))
        if read.task_hi is not None:
            keep = pc.and_(keep, pc.less(ids, read.task_hi))
        mask = pc.fill_null(keep, False).to_numpy(zero_copy_only=False)
        table, rows = table.filter(pa.array(mask)), rows[mask]
    return check_rows(read.file, table, rows, dims, task_index, log, skip_invalid)


def _floats(column: pa.ChunkedArray) -> np.ndarray:
    """``column`` as NumPy floats, NaN for nulls: float32 if stored in 32 bits or fewer (exact), else float64."""
    column = column.cast(pa.float32() if column.type in _FLOAT32 else pa.float64())
    return (column.fill_null(np.nan) if column.null_count else column).to_numpy(zero_copy_only=False)


def check_rows(file: str, table: pa.Table, rows: np.ndarray, dims: list[str], task_index: pa.Array, log: ProblemLog, skip_invalid: bool) -> UsageChunk:
    """Convert and validate usage rows read from ``file``; ``rows`` are their row numbers in it."""
    ids = table["task_id"].combine_chunks()
    if pa.types.is_dictionary(ids.type):
        codes_of_dict = pc.index_in(ids.dictionary.cast(pa.string()), value_set=task_index)
        task = pc.take(codes_of_dict, ids.indices)
    else:
        task = pc.index_in(ids.cast(pa.string()), value_set=task_index)
    unknown = task.is_null().to_numpy(zero_copy_only=False)
    task = (task.fill_null(-1) if task.null_count else task).to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    ts_col = table["ts"]
    ts_null = ts_col.is_null().to_numpy(zero_copy_only=False)
    ts = _to_seconds(ts_col.fill_null(0) if ts_null.any() else ts_col)
    values = {d: _floats(table[d]) for d in dims}

    def describe(cols: list[str]) -> Callable[[np.ndarray], list[str]]:
        def rows_text(idx: np.ndarray) -> list[str]:
            ids_text = table["task_id"].take(pa.array(idx)).cast(pa.string()).to_pylist()
            out = []
            for j, i in enumerate(idx):
                extra = "".join(f", {c}={plain(values[c][i])!r}" for c in cols)
                out.append(f"row {int(rows[i])} (task_id={ids_text[j]!r}{extra})")
            return out
        return rows_text

    bad = unknown | ts_null
    log.add(file, "task_id", "usage for a task that tasks.parquet does not list", unknown, rows, describe([]))
    log.add(file, "ts", "missing timestamp", ts_null, rows, describe([]))
    for d in dims:
        v = values[d]
        checks = [("missing or NaN value", np.isnan(v)), ("infinite value", np.isinf(v)), ("negative value", v < 0)]
        if d in PLAUSIBLE_MAX:
            # A NumPy float64 limit compares float32 values in float64 (a Python float would be rounded to float32).
            checks.append((f"implausibly large (over {PLAUSIBLE_MAX[d]:g} {UNITS[d]}: wrong unit?)", np.isfinite(v) & (v > np.float64(PLAUSIBLE_MAX[d]))))
        for message, mask in checks:
            log.add(file, d, message, mask, rows, describe([d]))
            bad |= mask
    if skip_invalid and bad.any():
        keep = ~bad
        return UsageChunk(task[keep], ts[keep], {d: v[keep] for d, v in values.items()})
    return UsageChunk(task, ts, values)


def _spill(groups: list[_RowGroup], dims: list[str], task_index: pa.Array, log: ProblemLog, skip_invalid: bool,
           partitions: Partitions, batch_rows: int, progress: Callable[[int], None] | None) -> None:
    """Read ``groups`` once, in batches, validating each and spilling it into ``partitions`` by task."""

    def checked() -> Iterator[tuple[UsageChunk, pa.RecordBatch]]:
        for file, in_file in itertools.groupby(groups, key=lambda g: g.file):
            pf = pq.ParquetFile(file, read_dictionary=["task_id"])
            for g in in_file:
                offset = g.offset
                for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[g.index], columns=["task_id", "ts", *dims], use_threads=True):
                    rows = np.arange(offset, offset + batch.num_rows)
                    offset += batch.num_rows
                    yield check_rows(file, pa.Table.from_batches([batch]), rows, dims, task_index, log, skip_invalid), batch

    with contextlib.closing(_ahead(checked())) as batches:
        for chunk, batch in batches:
            if skip_invalid or not log.total:  # once a row is invalid, read on only to count every problem
                partitions.write({"task": chunk.task, "ts": _narrow_seconds(chunk.ts), **chunk.values})
            if progress is not None:
                progress(batch.num_rows)


def _unspill(partitions: Partitions, k: int, dims: list[str]) -> UsageChunk:
    """Partition ``k``, its rows grouped by task and in file order within a task: rows read in time order then need
    no sort by (task, time), and this sort runs in :func:`scan_usage`'s reading thread."""
    columns = partitions.read(k)
    order = _grouping_order(columns["task"])
    return UsageChunk(columns["task"][order], columns["ts"][order], {d: columns[d][order] for d in dims})


def _narrow_seconds(ts: np.ndarray) -> np.ndarray:
    """Unix seconds as int32 where they all fit (until 2038, and any trace counting from its start): 4 bytes less
    per spilled row. A partition read back is int64 where its files differ (NumPy promotes)."""
    if len(ts) and _INT32.min <= ts.min() and ts.max() <= _INT32.max:
        return ts.astype(np.int32)
    return ts


def _grouping_order(task: np.ndarray) -> np.ndarray:
    """The stable order that groups the rows of ``task`` (codes ≥ 0) by task, as ``np.argsort(task, kind="stable")``.

    A partition holds a few thousand of the tasks: renumbered densely in 16 bits, NumPy sorts
    them by radix, ~9× faster than int32 codes (4M rows: 0.07 s against 0.62 s).
    """
    present = np.bincount(task) > 0
    if len(task) == 0 or present.sum() > 1 << 16:
        return np.argsort(task, kind="stable")
    dense = (np.cumsum(present) - 1).astype(np.uint16)[task]
    return np.argsort(dense, kind="stable")


def task_ids(trace: Trace) -> pa.Array:
    """``trace``'s task ids as the Arrow string array :func:`check_rows` looks usage rows' ``task_id`` up in."""
    return pa.array(trace.tasks["task_id"].to_numpy(dtype=str), type=pa.string())


def usage_work(trace: Trace, max_rows: int = DEFAULT_MAX_ROWS) -> int:
    """What :func:`scan_usage` (by task) reports through ``progress`` in all: the usage rows, plus those it spills
    (read once to spill, once more from the spill files). Reads Parquet footers only."""
    dataset = trace.usage_dataset()
    return dataset.count_rows() + sum(g.rows for g in plan_reads(dataset, max_rows).unordered)


def _no_room(trace: Trace, rows: int, dims: list[str], exc: OSError) -> InputError:
    need = -(-rows * (12 + 8 * len(dims)) // 2**20)  # MiB at most: task, ts and float64 values
    return InputError([Problem(str(trace.usage_path), "task_id", f"usage not stored by task is partitioned by task into temporary "
                               f"files first, and writing them in {tempfile.gettempdir()} failed: {exc}", 0),
                       Problem("", "", f"set TMPDIR to a folder with {need:,} MiB free, or write usage sorted by task_id", 0)])


def scan_usage(
    trace: Trace,
    dims: list[str] | None = None,
    *,
    skip_invalid: bool = False,
    max_rows: int = DEFAULT_MAX_ROWS,
    progress: Callable[[int], None] | None = None,
    log: ProblemLog | None = None,
    by_task: bool = True,
) -> Iterator[UsageChunk]:
    """Yield task-complete :class:`UsageChunk` s of about ``max_rows`` rows (at most that plus one row group
    when the table is stored by task). With ``by_task=False`` (to check rows only), usage not stored by task
    is yielded a row group at a time as stored, with no spill.

    ``dims`` defaults to every resource column of the usage table. ``progress`` is
    called with 0 as the scan starts (so that a bar shows while the first chunk loads), then
    with numbers of rows as the scan goes through them, once per pass: usage that is spilled counts
    when spilled and again once the caller is done with its partition (:func:`usage_work` is the total), rows read
    by task once the caller is done with their chunk. Without ``skip_invalid``,
    any invalid row makes the scan end with an :class:`InputError` after all rows
    were checked (so the counts are complete); callers must not write output before
    the scan ends. With it, invalid rows are dropped and counted in ``log``. Close
    the generator (``contextlib.closing``) when stopping early, so that the spill
    folder of unordered usage is removed at once.
    """
    dataset = trace.usage_dataset()
    dims = usage_dims(dataset) if dims is None else dims
    missing = [d for d in dims if d not in dataset.schema.names]
    if missing:
        raise InputError([Problem(str(trace.usage_path), ", ".join(missing), "column missing from usage", 0)])
    log = ProblemLog() if log is None else log
    task_index = task_ids(trace)
    plan = plan_reads(dataset, max_rows)
    if not by_task:
        plan.chunks += [_reads([g]) for g in plan.unordered]
        plan.unordered = []

    def load(chunk: list[_Read]) -> UsageChunk:
        parts = [_read(r, dims, task_index, log, skip_invalid) for r in chunk]
        if len(parts) == 1:
            return parts[0]
        return UsageChunk(
            np.concatenate([p.task for p in parts]),
            np.concatenate([p.ts for p in parts]),
            {d: np.concatenate([p.values[d] for p in parts]) for d in dims},
        )

    jobs = [functools.partial(load, c) for c in plan.chunks]
    if progress is not None:
        progress(0)
    with contextlib.ExitStack() as stack:
        if plan.unordered:
            rows = sum(g.rows for g in plan.unordered)
            try:
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="packer-usage-")))
            except OSError as exc:
                raise _no_room(trace, rows, dims, exc) from None
            # Hashing tasks leaves partitions uneven: aim at 80% of max_rows each.
            partitions = Partitions(folder, min(1 << 16, -(-rows * 5 // (4 * max_rows))), "task", len(task_index))
            try:
                _spill(plan.unordered, dims, task_index, log, skip_invalid, partitions, min(max_rows, SPILL_BATCH_ROWS), progress)
            except SpillError as exc:
                raise _no_room(trace, rows, dims, exc.args[0]) from None
            if partitions.files and (skip_invalid or not log.total):
                jobs += [functools.partial(_unspill, partitions, k, dims) for k in range(partitions.parts)]
        # The next chunk loads while the caller computes on this one.
        chunks = stack.enter_context(contextlib.closing(_ahead(job() for job in jobs)))
        for chunk in chunks:
            if skip_invalid or not log.total:
                yield chunk  # once a row is invalid, scan on only to count every problem
            if progress is not None:  # after the caller's work on the chunk, so that a bar follows that work
                progress(len(chunk.task))
    if log.total and not skip_invalid:
        raise InputError([*log.problems, Problem("", "", SKIP_HINT, 0)])
