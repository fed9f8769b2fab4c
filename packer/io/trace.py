"""The native trace format: a folder with ``hosts.parquet``, ``tasks.parquet`` and ``usage.parquet``.

``usage.parquet`` may be one file or a folder of Parquet files (a partitioned
dataset). A trace folder may also carry its own ``fleet.toml`` (importers write one
when the hosts have their own shapes); it is used unless a fleet is given.

Reading validates the hosts and tasks tables completely and the usage table's
schema; usage rows are validated while they are streamed (see
:mod:`packer.io.usage`), since the usage table may not fit in memory. Inputs are only
ever read.
"""
from __future__ import annotations

import json

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from packer.io.atomic import atomic_dir
from packer.errors import InputError, Problem
from packer.io.fleet import DEFAULT_FLEET, Fleet, load_fleet
from packer.io.validate import USAGE_REQUIRED, check_hosts, check_tasks, request_columns

HOSTS_FILE = "hosts.parquet"
TASKS_FILE = "tasks.parquet"
USAGE_FILE = "usage.parquet"
FLEET_FILE = "fleet.toml"


@dataclass(frozen=True)
class Trace:
    """A validated trace.

    ``hosts``: ``host_id``, ``arch``, optional ``domain`` and ``pool``.
    ``tasks``: ``task_id``, ``job_id``, ``host_id``, ``<dim>_request`` per resource
    dimension (``cpu`` cores on the current host, ``mem`` GiB, ``net`` Gbps, ...),
    ``service`` (may be null), ``movable`` (bool), optional ``allowed_archs``.
    ``usage_path``: the usage file or dataset folder, or ``None`` for a requests-only trace.
    """

    path: Path
    hosts: pd.DataFrame
    tasks: pd.DataFrame
    usage_path: Path | None
    fleet: Fleet

    @property
    def dims(self) -> list[str]:
        """Resource dimensions the tasks request (``cpu``, ``mem``, ``net``, ...)."""
        return [c.removesuffix("_request") for c in request_columns(self.tasks)]

    @property
    def name(self) -> str:
        return self.path.name

    def usage_dataset(self) -> ds.Dataset:
        """The usage table as a PyArrow dataset (nothing is read until scanned)."""
        if self.usage_path is None:
            raise InputError(f"{self.path}: the trace has no {USAGE_FILE}; this step needs usage samples")
        return ds.dataset(self.usage_path, format="parquet")


def read_parquet_table(path: Path, columns: tuple[str, ...] = (), not_found: str = "file not found") -> pd.DataFrame:
    """Read one Parquet file as a DataFrame; a missing or unreadable file, or missing
    ``columns``, raises :class:`InputError` naming the file (``not_found`` is the message for a missing file)."""
    if not path.exists():
        raise InputError([Problem(str(path), "", not_found, 0)])
    try:
        table = pq.read_table(path).to_pandas()
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError([Problem(str(path), "", f"not a readable Parquet file: {exc}", 0)]) from None
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError([Problem(str(path), ", ".join(missing), f"required column missing (the file has: {', '.join(table.columns)})", 0)])
    return table


def read_json_object(path: Path, not_found: str = "file not found") -> dict:
    """Read one JSON file holding an object; a missing, unreadable or non-object file raises
    :class:`InputError` naming the file (``not_found`` is the message for a missing file)."""
    if not path.exists():
        raise InputError([Problem(str(path), "", not_found, 0)])
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError([Problem(str(path), "", f"not valid JSON: {exc}", 0)]) from None
    if not isinstance(doc, dict):
        raise InputError([Problem(str(path), "", f"expected a JSON object, got {type(doc).__name__}", 0)])
    return doc


def check_usage_schema(dataset: ds.Dataset, file: str) -> list[Problem]:
    """Usage has ``task_id``, a time column ``ts`` and numeric ``cpu``, ``mem``, ``net``."""
    schema = dataset.schema
    problems = []
    missing = [c for c in USAGE_REQUIRED if c not in schema.names]
    if missing:
        problems.append(Problem(file, ", ".join(missing), f"required column missing (the file has: {', '.join(schema.names)})", 0))
    if dataset.count_rows() == 0:
        # An empty column may be stored without a type (Arrow's null): say what matters, that there is no data.
        return problems + [Problem(file, "", "the table has no rows", 0)]
    for name in schema.names:
        typ = schema.field(name).type
        if name == "task_id":
            ok = pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_dictionary(typ)
            want = "a string"
        elif name == "ts":
            ok = pa.types.is_timestamp(typ) or pa.types.is_integer(typ) or pa.types.is_floating(typ)
            want = "a timestamp (or Unix seconds)"
        else:
            ok = pa.types.is_integer(typ) or pa.types.is_floating(typ)
            want = "a numeric"
        if not ok:
            problems.append(Problem(file, name, f"expected {want} column, found {typ}", 0))
    return problems


def check_usage_parts(dataset: ds.Dataset) -> list[Problem]:
    """Every file of the usage dataset is readable Parquet whose columns match the dataset's (footers only: cheap).

    A dataset takes its schema from one file, so a corrupt or different part would
    otherwise surface only in the middle of a scan.
    """
    problems = []
    for part in dataset.files:
        unreadable = _unreadable(part)
        if unreadable:
            problems += unreadable
            continue
        schema = pq.read_schema(part)
        for field in dataset.schema:
            if field.name not in schema.names:
                problems.append(Problem(part, field.name, "column missing from this part of the usage dataset", 0))
                continue
            typ = schema.field(field.name).type
            numeric = all(pa.types.is_integer(t) or pa.types.is_floating(t) for t in (typ, field.type))
            if typ != field.type and not numeric and not (pa.types.is_dictionary(typ) or pa.types.is_dictionary(field.type)):
                problems.append(Problem(part, field.name, f"type {typ} differs from the other parts' {field.type}", 0))
    return problems


def _unreadable(part: str) -> list[Problem]:
    """A one-element list naming ``part`` when its Parquet footer cannot be read, else ``[]``."""
    try:
        pq.read_schema(part)
    except (pa.ArrowInvalid, OSError) as exc:
        return [Problem(part, "", f"not a readable Parquet file: {exc}", 0)]
    return []


def usage_dims(dataset: ds.Dataset) -> list[str]:
    """Resource dimensions present in a usage dataset (every column but ``task_id`` and ``ts``)."""
    return [n for n in dataset.schema.names if n not in ("task_id", "ts")]


def read_trace(path: str | Path, fleet: Fleet | str | Path | None = None) -> Trace:
    """Read and validate a trace folder.

    ``fleet`` is a :class:`Fleet`, a catalog path, or ``None`` for the trace's own
    ``fleet.toml`` if it has one, else ``models/fleet.toml``. Raises
    :class:`InputError` listing every problem found.
    """
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: not a trace folder (expected a folder with {HOSTS_FILE}, {TASKS_FILE}, {USAGE_FILE})")
    if not isinstance(fleet, Fleet):
        own = path / FLEET_FILE
        fleet = load_fleet(fleet if fleet is not None else (own if own.exists() else DEFAULT_FLEET))

    hosts_file, tasks_file, usage_file = path / HOSTS_FILE, path / TASKS_FILE, path / USAGE_FILE
    hosts = read_parquet_table(hosts_file)
    tasks = read_parquet_table(tasks_file)
    problems = check_hosts(hosts, fleet, str(hosts_file))
    problems += check_tasks(tasks, hosts if "host_id" in hosts.columns else pd.DataFrame({"host_id": []}), fleet, str(tasks_file))

    usage_path = usage_file if usage_file.exists() else None
    if usage_path is not None:
        try:
            dataset = ds.dataset(usage_path, format="parquet")
        except (pa.ArrowInvalid, OSError) as exc:
            # Discovery reads one part's footer; name the broken part when it is one of a folder's.
            parts = sorted(str(f) for f in usage_path.rglob("*") if f.is_file() and not f.name.startswith((".", "_"))) if usage_path.is_dir() else []
            broken = [problem for part in parts for problem in _unreadable(part)]
            raise InputError(broken or [Problem(str(usage_file), "", f"not a readable Parquet file or dataset: {exc}", 0)]) from None
        problems += check_usage_parts(dataset) or check_usage_schema(dataset, str(usage_file))
    if problems:
        raise InputError(problems)

    tasks = tasks.copy()
    for col in ("task_id", "job_id", "host_id"):
        tasks[col] = tasks[col].astype(str)
    if "service" not in tasks.columns:
        tasks["service"] = pd.Series([None] * len(tasks), dtype="object")
    tasks["movable"] = tasks["movable"].astype(bool) if "movable" in tasks.columns else True
    for col in request_columns(tasks):
        tasks[col] = tasks[col].astype(float)
    hosts = hosts.copy()
    hosts["host_id"] = hosts["host_id"].astype(str)
    return Trace(path=path, hosts=hosts.reset_index(drop=True), tasks=tasks.reset_index(drop=True), usage_path=usage_path, fleet=fleet)


def write_trace(
    path: str | Path,
    hosts: pd.DataFrame,
    tasks: pd.DataFrame,
    usage: Iterable[pa.RecordBatch | pa.Table] | None = None,
    fleet_toml: str | None = None,
    row_group_rows: int = 1 << 20,
    side_files: dict[str, str] | None = None,
) -> Path:
    """Write a trace folder atomically. ``usage`` is streamed batch by batch (it may be huge).

    ``side_files`` maps file names to text written beside the tables (an importer's
    record of its source, e.g. ``kubernetes.json``); readers of the trace ignore them.

    Usage is written in the order given; writing it sorted by ``task_id`` (as the
    generator and importers do) lets :func:`packer.characterization.profile.profile_tasks` read it in one pass
    without first partitioning it by task into temporary files.
    """
    path = Path(path)
    with atomic_dir(path) as tmp:
        pq.write_table(pa.Table.from_pandas(hosts, preserve_index=False), tmp / HOSTS_FILE)
        pq.write_table(pa.Table.from_pandas(tasks, preserve_index=False), tmp / TASKS_FILE)
        if fleet_toml is not None:
            (tmp / FLEET_FILE).write_text(fleet_toml)
        for name, text in (side_files or {}).items():
            (tmp / name).write_text(text)
        if usage is not None:
            writer = None
            try:
                for batch in usage:
                    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
                    if writer is None:
                        writer = pq.ParquetWriter(tmp / USAGE_FILE, table.schema, compression="zstd")
                    writer.write_table(table, row_group_size=row_group_rows)
            finally:
                if writer is not None:
                    writer.close()
    return path
