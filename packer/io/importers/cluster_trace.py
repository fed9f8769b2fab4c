"""Shared by the importers of cluster traces that list machines, tasks and where each task runs (Google 2019, Alibaba 2018).

Such traces log events (a machine added, a task scheduled) over time; an importer
takes the cluster's state at one moment (the *snapshot*) as packer's current
placement. This module reads their CSV files with every bad row located, turns
machine shapes into a trace-local fleet catalog and writes usage sorted by task.
"""
from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from packer.errors import MAX_ROWS_SHOWN, InputError, Problem

#: Cores per 1.0 of throughput score: Broadwell18 (32 cores, score 1.0) in models/fleet.toml.
CORES_PER_SCORE = 32
DEFAULT_NET_CAPACITY = 25.0
USAGE_SCHEMA = pa.schema(
    [("task_id", pa.string()), ("ts", pa.timestamp("s", tz="UTC")), ("cpu", pa.float64()), ("mem", pa.float64()), ("net", pa.float64())]
)
#: Rows read per batch from a CSV file (bounded memory for large usage files).
CSV_BLOCK_BYTES = 32 << 20

#: progress(stage, done, total): bytes of input read so far.
Progress = Callable[[str, int, int], None]


def rows_text(df: pd.DataFrame, mask: np.ndarray, columns: Sequence[str], lines: np.ndarray) -> tuple[str, ...]:
    """The first flagged rows as the file shows them: ``"line 3 (machine_id=m1, cpu_num=x)"`` (lines count from 1)."""
    def text(value) -> str:
        return "(empty)" if value is None or (isinstance(value, float) and np.isnan(value)) or value == "" else str(value)

    idx = np.flatnonzero(mask)[:MAX_ROWS_SHOWN]
    shown = [c for c in dict.fromkeys(columns) if c in df.columns]
    return tuple(f"line {int(lines[i])} (" + ", ".join(f"{c}={text(df[c].iloc[i])}" for c in shown) + ")" for i in idx)


def numbers(file: str, df: pd.DataFrame, columns: Sequence[str], id_col: str, lines: np.ndarray,
            optional: Sequence[str] = (), signed: Sequence[str] = ()) -> list[Problem]:
    """Convert ``columns`` of ``df`` to float in place; problems for missing (unless ``optional``), non-numeric and
    negative (unless ``signed``) values."""
    problems: list[Problem] = []
    for col in columns:
        raw = df[col]
        if pd.api.types.is_float_dtype(raw):  # converted while read (see csv_batches): empty fields are NaN
            values = raw.to_numpy(dtype=float, na_value=np.nan)
            empty = np.isnan(values)
        else:
            empty = raw.isna().to_numpy() | (raw.astype(str).str.strip() == "").to_numpy()
            values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        checks = [("not a number", ~empty & ~np.isfinite(values))]
        if col not in signed:
            checks.append(("negative value", values < 0))
        if col not in optional:
            checks.insert(0, ("missing value", empty))
        for message, mask in checks:
            if mask.any():
                problems.append(Problem(file, col, message, int(mask.sum()), rows_text(df, mask, [id_col, col], lines)))
        df[col] = values
    return problems


def missing_columns(file: str, df: pd.DataFrame, required: Sequence[str]) -> list[Problem]:
    missing = [c for c in required if c not in df.columns]
    return [Problem(file, ", ".join(missing), f"required column missing (the file has: {', '.join(map(str, df.columns))})", 0)] if missing else []


def as_floats(data: pa.RecordBatch | pa.Table, numeric: Sequence[str]) -> pa.RecordBatch | pa.Table:
    """``numeric`` text columns as float64 (empty fields null) where every value parses; a column that does not stays text."""
    columns = list(data.columns)
    for i, name in enumerate(data.schema.names):
        if name in numeric and pa.types.is_string(data.schema.field(i).type):
            text = columns[i]
            try:
                columns[i] = pc.cast(pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text), pa.float64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass  # the caller's check names the rows that do not parse
    return type(data).from_arrays(columns, names=data.schema.names)


def csv_batches(path: Path, names: Sequence[str] | None, progress: Progress | None = None,
                stage: str = "", numeric: Sequence[str] = ()) -> Iterator[tuple[pd.DataFrame, np.ndarray]]:
    """A CSV file (``.gz`` allowed) as frames with each row's line number (from 1, as an editor counts).

    Columns are text, except those in ``numeric``, which come as floats where every
    value of the batch parses (fast; :func:`numbers` then only checks them).

    ``names``: the column order of a file without a header; ``None``: the first line
    is the header. A row with the wrong number of fields fails the read with an
    :class:`InputError` naming its lines (after the whole file was read, so all of
    them are listed); any other problem is the caller's to check.
    """
    file = str(path)
    bad: list = []

    def on_bad_row(row) -> str:
        bad.append(row)
        return "skip"

    def convert(column_names: Sequence[str]) -> pcsv.ConvertOptions:
        return pcsv.ConvertOptions(column_types={c: pa.string() for c in column_names}, strings_can_be_null=False)

    size = path.stat().st_size
    skip = 0
    if names is None:
        try:
            with (gzip.open(path, "rt") if path.suffix == ".gz" else open(path)) as f:
                names = next(csv.reader([f.readline()]), [])
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError([Problem(file, "", f"not a readable CSV file: {exc}", 0)]) from None
        names = [n.strip() for n in names]
        skip = 1
    options = pcsv.ReadOptions(column_names=list(names), skip_rows=skip, use_threads=False, block_size=CSV_BLOCK_BYTES)
    convert = pcsv.ConvertOptions(column_types={c: pa.string() for c in names}, strings_can_be_null=False)
    with open(path, "rb") as raw:
        source = pa.CompressedInputStream(raw, "gzip") if path.suffix == ".gz" else raw
        try:
            reader = pcsv.open_csv(source, read_options=options, parse_options=pcsv.ParseOptions(invalid_row_handler=on_bad_row),
                                   convert_options=convert)
            last = skip  # line number of the last row read
            for batch in reader:
                frame = as_floats(batch, numeric).to_pandas()
                lines = last + 1 + np.arange(len(frame))
                last = int(lines[-1]) if len(frame) else last
                if not bad:
                    yield frame, lines
                if progress is not None:
                    progress(stage, min(raw.tell(), size), size)
        except (pa.ArrowInvalid, OSError, UnicodeDecodeError) as exc:
            raise InputError([Problem(file, "", f"not a readable CSV file: {exc}", 0)]) from None
    if bad:
        shown = tuple(f"line {row.number} ({row.actual_columns} fields: {row.text[:80]})" for row in bad[:MAX_ROWS_SHOWN])
        expected = bad[0].expected_columns
        raise InputError([Problem(file, "", f"wrong number of fields (expected {expected})", len(bad), shown)])


def toml_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def shape_cost(cores: pd.Series, mem: pd.Series) -> pd.Series:
    """Assumed price per host (the traces have none): the mean of its cores and memory as fractions of the largest shape's.

    The largest machine costs 1.0; a machine with half its cores and half its memory 0.5.
    """
    return (cores / cores.max() + mem / mem.max()) / 2


def fleet_toml(header: Sequence[str], archs: pd.DataFrame, attributes: Sequence[str] = ()) -> str:
    """A catalog with one ``[arch.NAME]`` per row of ``archs`` (index: name; columns ``cores``, ``mem``, ``net``, ``score``, ``cost``, ``hosts``).

    The umbrella type is the ``type`` column where ``archs`` has one, else ``"I"`` (the
    public traces do not say which machines are "large"); ``cost`` is set per
    architecture. ``attributes``: string columns written as attributes (e.g. the
    trace's platform id).
    """
    lines = [f"# {line}" for line in header]
    for name, a in archs.iterrows():
        count = int(a["hosts"])
        kind = str(a["type"]) if "type" in archs.columns else "I"
        lines += ["", f"[arch.{json.dumps(str(name))}]  # {count} host{'s' if count != 1 else ''}", f"type = {json.dumps(kind)}"]
        lines += [f"{key} = {toml_number(a[key])}" for key in ("cores", "mem", "net", "score", "cost")]
        lines += [f"{key} = {json.dumps(str(a[key]))}" for key in attributes if pd.notna(a[key])]
    return "\n".join(lines) + "\n"


def usage_tables(usage: pd.DataFrame) -> tuple[Iterator[pa.Table], int, int]:
    """Usage (``task_id``, ``ts`` Unix s, ``cpu``, ``mem``) as tables sorted by task and time, ``net`` 0; rows and merged duplicates.

    Duplicate samples (same task and second) merge into one holding the largest value
    per column, so usage is never underestimated.
    """
    n = len(usage)
    usage = usage.groupby(["task_id", "ts"], sort=True, as_index=False)[["cpu", "mem"]].max()
    table = pa.Table.from_arrays(
        [
            pa.array(usage["task_id"].to_numpy(dtype=object), pa.string()),
            pa.array(usage["ts"].to_numpy(dtype=np.int64), pa.timestamp("s", tz="UTC")),
            pa.array(usage["cpu"].to_numpy(dtype=float)),
            pa.array(usage["mem"].to_numpy(dtype=float)),
            pa.array(np.zeros(len(usage))),
        ],
        schema=USAGE_SCHEMA,
    )
    return iter([table] if len(usage) else []), len(usage), n - len(usage)

