"""Import the Google Borg cluster trace 2019 (clusterdata-2019, one cell) as a native trace.

Input folder: the tables ``machine_events``, ``instance_events`` and (optionally)
``instance_usage`` as exported from the public BigQuery dataset
(``google.com:google-cluster-data.clusterdata_2019_<cell>``), in JSON lines
(``.json``/``.jsonl``, nested records as objects, as ``bq extract
--destination_format NEWLINE_DELIMITED_JSON`` writes them) or CSV with a header
(nested fields flattened to ``capacity_cpus`` or ``capacity.cpus``), ``.gz``
allowed, each table in one or more shards named ``<table>*`` (e.g.
``machine_events-000000000000.json.gz``). BigQuery writes 64-bit integers as JSON
strings: that encoding is parsed by Arrow; any other (integers as numbers) falls
back to pandas, about 7x slower. Field names and meanings follow
``clusterdata_trace_format_v3.proto`` in the google/cluster-data repository.

**Units.** All times are microseconds since the trace start. CPU and memory are
Google's normalized units (NCU and normalized bytes: capacity, request and usage
in one scale, where 1.0 is the largest machine's capacity). packer needs cores and
GiB, so both are scaled by documented factors: ``cores_per_unit`` (default 64: a
1.0-CPU machine counts as 64 cores) and ``gib_per_unit`` (default 256). The factors
are illustrative, not Google's hardware: packing depends only on the ratios, which
scaling preserves; they matter only where packer compares with absolute numbers
(plausibility limits, the default catalog's core counts).

Snapshot: the cell's state at ``at`` (default: the end of the latest
instance_usage window; without usage, the latest instance event) is the placement:

* ``machine_events`` (time, machine_id, type 1 ADD / 2 REMOVE / 3 UPDATE, switch_id,
  capacity {cpus, memory}, platform_id): a machine is a host if its latest event
  with time <= at is ADD or UPDATE; its capacity and platform are the latest given
  ones; ``domain`` = switch_id (its top-of-rack switch). A machine with no CPU
  capacity is left out.
* fleet (the trace's own ``fleet.toml``): one architecture per distinct
  (platform_id, capacity) shape, named ``p<k>-cpu<cores>-mem<GiB>`` (k numbers
  the platforms in sorted order; the platform id is kept as the attribute
  ``platform_id``). ``score`` = cores / 32 (a core counts as a Broadwell18 core);
  ``cost`` (assumed, the trace has no prices) = the mean of its CPU and memory
  capacity, i.e. normalized, so the largest machine costs 1.0; ``net``: nominal
  ``net_capacity`` Gbps, ``net_request`` and usage ``net`` 0 (no network data).
* ``instance_events`` (time, type, collection_id, instance_index, machine_id,
  resource_request {cpus, memory}, optional collection_type): an instance
  (collection_id, instance_index) is a task (``task_id`` = ``<collection_id>-<index>``,
  ``job_id`` = collection_id) if its latest event with time <= at (file order
  breaks ties) is SCHEDULE (3) or UPDATE_RUNNING (10): running, on that event's
  machine_id. Requests: the latest resource_request given up to ``at`` (0 when
  none). Alloc instances (collection_type 1) are reservations the tasks inside
  them use, so they are left out (counted as filtered) to avoid counting
  resources twice. A running instance whose machine is not a host at ``at``
  (NO_MACHINE 0, DEDICATED_MACHINE -1, removed or unknown) is dropped with the
  reason, counted in the summary.
* ``instance_usage`` (start_time, end_time, collection_id, instance_index,
  average_usage {cpus, memory}, maximum_usage {cpus, memory}): one usage sample per
  5-minute window of a kept task (all its windows, before and after ``at``), at
  ``ts`` = start_time (seconds, written as a timestamp counted from 1970-01-01 UTC:
  the trace has no dates), valued at the window's **average** usage (``usage_stat =
  "average"``) or its **maximum** (``"maximum"``; a window without a maximum uses its
  average). packer's p99 (of 60-s window means) then is the 99th percentile over the
  task's 5-minute averages (each 60-s window holds at most one sample), which is
  smoother than a per-second p99; with ``maximum`` it is the p99 of 5-minute peaks, a
  conservative bound. Not read: cpu_usage_distribution and tail_cpu_usage_distribution
  (per-window percentiles), random_sample_usage, assigned_memory, page_cache_memory,
  cycles_per_instruction, memory_accesses_per_instruction, the collection_events and
  machine_attributes tables (constraints are not imported).

``machines=N`` keeps the first N hosts by machine_id (numerically) and their tasks
(the others' tasks are counted as filtered). ``cell``: read ``src/<cell>`` (a
folder per cell). A bad file (missing column, unparsable JSON line, wrong number
of CSV fields, a missing or non-numeric value where one is required) fails the
import with an :class:`InputError` naming file, column and lines; nothing is
written. Each shard is read whole (one at a time); the kept tasks' usage is held
in memory, so export a subset (a time range, or ``--machines`` after a cell-wide
export) for a quick look.
"""
from __future__ import annotations

import gzip
import io
import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.json as pj

from packer.errors import InputError, Problem
from packer.io.atomic import refuse_to_overwrite_input
from packer.io.importers.cluster_trace import (
    CORES_PER_SCORE, DEFAULT_NET_CAPACITY, Progress, as_floats, csv_batches, fleet_toml, missing_columns, numbers, rows_text, usage_tables,
)
from packer.io.importers.summary import ImportSummary
from packer.io.trace import write_trace

log = logging.getLogger(__name__)

DEFAULT_CORES_PER_UNIT = 64.0
DEFAULT_GIB_PER_UNIT = 256.0
MICROSECONDS = 1_000_000
#: machine_events.type
ADD, REMOVE, UPDATE = 1, 2, 3
#: instance_events.type: SUBMIT .. UPDATE_RUNNING
INSTANCE_TYPES = range(0, 11)
RUNNING = (3, 10)  # SCHEDULE, UPDATE_RUNNING
ALLOC_SET = 1
USAGE_STATS = ("average", "maximum")
SUFFIXES = (".json", ".jsonl", ".json.gz", ".jsonl.gz", ".csv", ".csv.gz")

#: Bytes of JSON Arrow parses at a time (a line must fit in one block).
JSON_BLOCK_BYTES = 16 << 20

# The fields read, in BigQuery's JSON encoding: INT64 (times, ids, enums) as strings, FLOAT as numbers.
_INT = pa.string()
_RESOURCES = pa.struct([("cpus", pa.float64()), ("memory", pa.float64())])
MACHINE_SCHEMA = pa.schema([("time", _INT), ("machine_id", _INT), ("type", _INT), ("switch_id", pa.string()), ("capacity", _RESOURCES),
                            ("platform_id", pa.string())])
INSTANCE_SCHEMA = pa.schema([("time", _INT), ("type", _INT), ("collection_id", _INT), ("instance_index", _INT), ("machine_id", _INT),
                             ("resource_request", _RESOURCES), ("collection_type", _INT)])
USAGE_SCHEMA = pa.schema([("start_time", _INT), ("end_time", _INT), ("collection_id", _INT), ("instance_index", _INT),
                          ("average_usage", _RESOURCES), ("maximum_usage", _RESOURCES)])
MACHINE_COLUMNS = ("time", "machine_id", "type", "capacity_cpus", "capacity_memory", "platform_id")
MACHINE_NUMBERS = ("time", "machine_id", "type", "capacity_cpus", "capacity_memory")
INSTANCE_COLUMNS = ("time", "type", "collection_id", "instance_index", "machine_id", "resource_request_cpus", "resource_request_memory")
USAGE_COLUMNS = ("start_time", "end_time", "collection_id", "instance_index", "average_usage_cpus", "average_usage_memory")


def _shards(src: Path, table: str, required: bool = True) -> list[Path]:
    files = sorted(p for p in src.iterdir() if p.is_file() and p.name.startswith(table) and p.name.lower().endswith(SUFFIXES))
    if required and not files:
        raise InputError([Problem(str(src / table), "", f"no {table} shards in the folder (expected {table}*.json[.gz] or {table}*.csv[.gz])", 0)])
    return files


def _flatten(df: pd.DataFrame) -> pd.DataFrame:
    """Nested records ({cpus, memory}) as ``<field>_<key>`` columns; ``a.b`` column names as ``a_b``."""
    for col in [c for c in df.columns if df[c].dtype == object and isinstance(next(iter(df[c].dropna()), None), dict)]:
        records = [v if isinstance(v, dict) else {} for v in df[col]]
        nested = pd.json_normalize(records).add_prefix(f"{col}_")
        nested.index = df.index
        df = pd.concat([df.drop(columns=col), nested], axis=1)
    df.columns = [str(c).strip().replace(".", "_") for c in df.columns]
    return df


def _read_bytes(path: Path) -> bytes:
    try:
        return gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError) as exc:
        raise InputError([Problem(str(path), "", f"not readable: {exc}", 0)]) from None


def _read_json(path: Path, schema: pa.Schema, numeric: tuple[str, ...]) -> pd.DataFrame | None:
    """A JSON-lines shard, nested records flattened to ``<field>_<key>``; ``None`` if it is empty.

    Fast path: Arrow with the fields of ``schema`` in BigQuery's encoding (64-bit
    integers as strings, floats as numbers). Any other encoding, or a bad line, is
    read by pandas, which names the line that does not parse.
    """
    file = str(path)
    raw = _read_bytes(path)
    if not raw.strip():
        return None
    try:
        table = pj.read_json(pa.BufferReader(raw), read_options=pj.ReadOptions(block_size=JSON_BLOCK_BYTES),
                             parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")).flatten()
        table = table.rename_columns([n.replace(".", "_") for n in table.column_names])
        return as_floats(table, numeric).to_pandas()
    except pa.ArrowInvalid:
        pass
    try:
        df = pd.read_json(io.BytesIO(raw), lines=True, dtype=False, precise_float=True)
    except ValueError as exc:
        found = re.search(r"position (\d+)", str(exc))
        where = ()
        if found:
            line = raw[: int(found.group(1))].count(b"\n") + 1
            text = raw.split(b"\n")[line - 1][:80].decode("utf-8", "replace")
            where = (f"line {line} ({text})",)
        raise InputError([Problem(file, "", f"not valid JSON lines: {exc}", 1, where)]) from None
    return _flatten(df)


def _read_table(files: list[Path], schema: pa.Schema, required: tuple[str, ...], numeric: tuple[str, ...], progress: Progress | None,
                stage: str) -> pd.DataFrame:
    """The columns of ``schema`` (flattened) of every shard of a table, with ``_file`` and ``_line`` (line in its shard,
    from 1, the header counting in a CSV). A column that a JSON shard lacks is null there; a ``required`` one that no
    row of any shard has fails the read, as does one a CSV header lacks."""
    columns = [n.replace(".", "_") for n in pa.table({f.name: pa.array([], f.type) for f in schema}).flatten().column_names]
    frames = []
    for k, path in enumerate(files):
        if path.name.lower().removesuffix(".gz").endswith(".csv"):
            parts = [_flatten(frame).assign(_line=lines) for frame, lines in csv_batches(path, None, numeric=numeric)]
            df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(required))
            problems = missing_columns(str(path), df, required)
            if problems:
                raise InputError(problems)
        else:
            df = _read_json(path, schema, numeric)
            if df is None:  # an empty shard (an export may write some) holds no rows
                continue
            df["_line"] = np.arange(1, len(df) + 1)
        df = df.reindex(columns=[*columns, "_line"])
        frames.append(df.assign(_file=str(path)))
        if progress is not None:
            progress(stage, k + 1, len(files))
    table = stage.removeprefix("reading ")
    if not frames or not sum(len(f) for f in frames):
        raise InputError([Problem(str(files[0]), "", f"no rows in any {table} shard", 0)])
    df = pd.concat(frames, ignore_index=True)
    absent = [c for c in required if df[c].isna().all()]
    if absent:
        where = str(files[0]) if len(files) == 1 else f"{files[0].parent / table}*"
        raise InputError([Problem(where, ", ".join(absent), f"required field missing: no row of any {table} shard has it", 0)])
    return df


def _check(df: pd.DataFrame, id_col: str, amounts: tuple[str, ...], optional: tuple[str, ...] = (), signed: tuple[str, ...] = ()) -> None:
    """Numeric columns to float (per shard, so lines are named in their own file); every problem at once."""
    problems: list[Problem] = []
    converted = {col: np.empty(len(df)) for col in amounts}
    for file, rows in df.groupby("_file", sort=False).indices.items():
        part = df.iloc[rows][list(dict.fromkeys([id_col, *amounts]))].copy()
        problems += numbers(file, part, amounts, id_col, df["_line"].to_numpy()[rows], optional, signed)
        for col in amounts:
            converted[col][rows] = part[col].to_numpy(dtype=float)
    if problems:
        raise InputError(problems)
    for col in amounts:
        df[col] = converted[col]


def _check_types(df: pd.DataFrame, allowed, table: str) -> None:
    bad = ~df["type"].isin(list(allowed)).to_numpy()
    if bad.any():
        first = df[bad]
        raise InputError([Problem(first["_file"].iloc[0], "type", f"unknown {table} event type (expected {min(allowed)}..{max(allowed)})",
                                  int(bad.sum()), rows_text(first, np.ones(len(first), bool), ["type"], first["_line"].to_numpy()))])


def _hosts(events: pd.DataFrame, at: float, cores_per_unit: float, gib_per_unit: float) -> pd.DataFrame:
    """Machines in the cell at ``at`` with cores, GiB, platform and switch."""
    events = events[events["time"] <= at].sort_values("time", kind="stable")
    by_machine = events.groupby("machine_id", sort=True)
    latest = by_machine.last()  # the latest non-null value per column; type is never null, so it is the latest event's
    present = latest["type"].isin([ADD, UPDATE]) & (latest["capacity_cpus"] > 0)
    latest = latest[present.to_numpy()]
    hosts = pd.DataFrame({
        "host_id": latest.index.astype(np.int64),
        "cores": latest["capacity_cpus"].to_numpy() * cores_per_unit,
        "mem": latest["capacity_memory"].fillna(0.0).to_numpy() * gib_per_unit,
        "platform_id": latest["platform_id"].astype(object).to_numpy(),
    })
    if "switch_id" in latest.columns and latest["switch_id"].notna().any():
        hosts["domain"] = latest["switch_id"].astype(object).where(latest["switch_id"].notna(), None).to_numpy()
    return hosts.sort_values("host_id", kind="stable").reset_index(drop=True)


def _archs(hosts: pd.DataFrame, cores_per_unit: float, gib_per_unit: float, net_capacity: float) -> pd.DataFrame:
    shapes = hosts.groupby(["platform_id", "cores", "mem"], sort=True, dropna=False).size().rename("hosts").reset_index()
    platform = pd.factorize(shapes["platform_id"], sort=True, use_na_sentinel=False)[0]
    names = pd.Series([f"p{k}-cpu{c:.4g}-mem{m:.4g}" for k, c, m in zip(platform, shapes["cores"], shapes["mem"])])
    repeat = names.groupby(names).cumcount()
    shapes.index = np.where(repeat > 0, names + "-" + (repeat + 1).astype(str), names)
    shapes["net"] = net_capacity
    shapes["score"] = shapes["cores"] / CORES_PER_SCORE
    shapes["cost"] = (shapes["cores"] / cores_per_unit + shapes["mem"] / gib_per_unit) / 2
    return shapes


def import_google2019(
    src: str | Path,
    out: str | Path,
    at: int | None = None,
    cell: str | None = None,
    machines: int | None = None,
    cores_per_unit: float = DEFAULT_CORES_PER_UNIT,
    gib_per_unit: float = DEFAULT_GIB_PER_UNIT,
    usage_stat: str = "average",
    net_capacity: float = DEFAULT_NET_CAPACITY,
    progress: Progress | None = None,
) -> ImportSummary:
    """Convert a Google clusterdata-2019 export (one cell) into a native trace at ``out`` (see the module docstring).

    ``at``: snapshot, microseconds since the trace start (default: the end of the
    latest usage window); ``cell``: read ``src/<cell>``; ``machines``: keep the first N
    machines by id and their tasks; ``cores_per_unit`` / ``gib_per_unit``: cores and GiB
    per 1.0 normalized unit; ``usage_stat``: ``"average"`` or ``"maximum"`` per 5-minute
    window; ``net_capacity``: nominal Gbps per host. Units written: cores, GiB, Gbps.
    Raises :class:`InputError` (bad folder, file, column, rows or option).
    """
    src, out = Path(src), Path(out)
    for name, value in (("--cores-per-unit", cores_per_unit), ("--gib-per-unit", gib_per_unit)):
        if not (np.isfinite(value) and value > 0):
            raise InputError(f"{name} must be a number > 0, got {value}")
    if usage_stat not in USAGE_STATS:
        raise InputError(f"--usage must be one of {', '.join(USAGE_STATS)}, got {usage_stat!r}")
    if machines is not None and machines < 1:
        raise InputError(f"--machines must be at least 1, got {machines}")
    if at is not None and at < 0:
        raise InputError(f"--at must be >= 0 microseconds, got {at}")
    if not src.is_dir():
        raise InputError([Problem(str(src), "", "Google 2019 export folder not found (expected machine_events*, instance_events*, instance_usage* shards)", 0)])
    if cell is not None:
        src = src / cell
        if not src.is_dir():
            raise InputError([Problem(str(src), "", f"no folder for cell {cell!r} (--cell reads SRC/<cell>)", 0)])
    machine_files, instance_files = _shards(src, "machine_events"), _shards(src, "instance_events")
    usage_files = _shards(src, "instance_usage", required=False)
    refuse_to_overwrite_input(out, src)

    machine_events = _read_table(machine_files, MACHINE_SCHEMA, MACHINE_COLUMNS, MACHINE_NUMBERS, progress, "reading machine_events")
    _check(machine_events, "machine_id", MACHINE_NUMBERS, optional=("capacity_cpus", "capacity_memory"))
    _check_types(machine_events, (ADD, REMOVE, UPDATE), "machine")
    instance_events = _read_table(instance_files, INSTANCE_SCHEMA, INSTANCE_COLUMNS, INSTANCE_COLUMNS, progress, "reading instance_events")
    _check(instance_events, "collection_id", INSTANCE_COLUMNS, optional=("machine_id", "resource_request_cpus", "resource_request_memory"),
           signed=("machine_id",))
    _check_types(instance_events, INSTANCE_TYPES, "instance")
    usage_columns = USAGE_COLUMNS + (("maximum_usage_cpus", "maximum_usage_memory") if usage_stat == "maximum" else ())
    usage = _read_table(usage_files, USAGE_SCHEMA, usage_columns, usage_columns, progress, "reading instance_usage") if usage_files else None
    if usage is not None:
        _check(usage, "collection_id", usage_columns, optional=usage_columns[6:])
    if at is None:
        at = int(usage["end_time"].max()) if usage is not None else int(instance_events["time"].max())

    hosts = _hosts(machine_events, at, cores_per_unit, gib_per_unit)
    all_hosts = set(hosts["host_id"])
    if machines is not None:
        hosts = hosts.iloc[:machines]
    if hosts.empty:
        raise InputError([Problem(str(machine_files[0]), "time", f"no machine with CPU capacity is in the cell at --at {at} µs", 0)])
    archs = _archs(hosts, cores_per_unit, gib_per_unit, net_capacity)
    hosts = hosts.merge(archs.reset_index(names="arch")[["platform_id", "cores", "mem", "arch"]], on=["platform_id", "cores", "mem"], how="left")

    tasks, filtered, dropped, records = _tasks(instance_events, at, hosts, all_hosts, cores_per_unit, gib_per_unit)
    usage_rows = merged = 0
    samples = None
    if usage is not None:
        samples, usage_rows, merged = usage_tables(_samples(usage, tasks, usage_stat, cores_per_unit, gib_per_unit))

    header = [
        "Fleet of a Google clusterdata-2019 cell, written by `packer import google2019` from",
        f"{src} at {at} microseconds.",
        "One architecture per distinct (platform_id, capacity) shape; the comment after each name counts its hosts.",
        f"Units: cores = normalized CPU x {cores_per_unit:g}; mem GiB = normalized memory x {gib_per_unit:g} (scale factors of the import);",
        f"net Gbps, nominal ({net_capacity:g}): the trace has no network data.",
        "score = cores / 32: a core counts as a Broadwell18 core.",
        "cost (assumed, the trace has no prices) = mean of normalized CPU and memory capacity (the largest machine: 1.0).",
    ]
    host_columns = ["host_id", "arch"] + (["domain"] if "domain" in hosts.columns else [])
    write_trace(out, hosts[host_columns].assign(host_id=hosts["host_id"].astype(str)), tasks, samples,
                fleet_toml=fleet_toml(header, archs, attributes=["platform_id"]))
    log.info("google2019: %d tasks on %d machines (%d shapes) at %d us -> %s", len(tasks), len(hosts), len(archs), at, out)
    return ImportSummary(
        source=src,
        out=out,
        records=records,
        tasks=len(tasks),
        hosts_per_arch=archs["hosts"].astype(int).to_dict(),
        usage_rows=usage_rows,
        dropped=dropped,
        filtered=filtered,
        filtered_reason="(not running at --at, alloc instances, or on machines outside --machines)",
        merged_samples=merged,
    )


def _tasks(events: pd.DataFrame, at: int, hosts: pd.DataFrame, all_hosts: set, cores_per_unit: float,
           gib_per_unit: float) -> tuple[pd.DataFrame, int, dict[str, str], int]:
    """Running instances on kept hosts as tasks; the count filtered, the dropped with reasons, and the instances seen."""
    key = ["collection_id", "instance_index"]
    records = len(events.drop_duplicates(key))
    events = events[events["time"] <= at].sort_values("time", kind="stable")
    grouped = events.groupby(key, sort=True)
    last = grouped.nth(-1).set_index(key)
    requests = grouped[["resource_request_cpus", "resource_request_memory"]].last().reindex(last.index).fillna(0.0)
    running = last["type"].isin(RUNNING).to_numpy()
    if "collection_type" in last.columns:
        running = running & (pd.to_numeric(last["collection_type"], errors="coerce").to_numpy() != ALLOC_SET)
    # A running instance's machine: its latest event's, or the latest one given before (an update may omit it).
    machine = last["machine_id"].fillna(grouped["machine_id"].last().reindex(last.index)).fillna(0).astype(np.int64).to_numpy()
    kept_hosts = hosts["host_id"].to_numpy()
    on_kept = np.isin(machine, kept_hosts)
    elsewhere = running & ~on_kept & np.isin(machine, list(all_hosts))  # outside --machines
    unknown = running & ~on_kept & ~elsewhere
    job = pd.Series(last.index.get_level_values(0).astype(np.int64).astype(str))
    task_id = (job + "-" + pd.Series(last.index.get_level_values(1).astype(np.int64).astype(str))).to_numpy()
    lost = pd.Series(machine[unknown])
    why = ("machine " + lost.astype(str) + " is not in the cell").mask(lost == 0, "NO_MACHINE (0)").mask(lost == -1, "DEDICATED_MACHINE (-1)")
    where = pd.Series(last["_file"].to_numpy()[unknown]).map(lambda f: Path(f).name) + " line " + pd.Series(last["_line"].to_numpy()[unknown]).astype(str)
    dropped = dict(zip(task_id[unknown], why + f" at --at {at} µs; latest event: " + where))
    keep = running & on_kept
    tasks = pd.DataFrame({
        "task_id": task_id[keep].astype(object),
        "job_id": job.to_numpy()[keep].astype(object),
        "host_id": machine[keep].astype(str).astype(object),
        "cpu_request": requests["resource_request_cpus"].to_numpy()[keep] * cores_per_unit,
        "mem_request": requests["resource_request_memory"].to_numpy()[keep] * gib_per_unit,
        "net_request": 0.0,
        "movable": True,
    })
    if tasks.empty:
        raise InputError([Problem(str(events["_file"].iloc[0]) if len(events) else "instance_events", "type",
                                  f"no instance is running on a machine of the cell at --at {at} µs; nothing to import", 0)])
    filtered = records - int(keep.sum()) - len(dropped)
    return tasks, filtered, dropped, records


def _samples(usage: pd.DataFrame, tasks: pd.DataFrame, stat: str, cores_per_unit: float, gib_per_unit: float) -> pd.DataFrame:
    """One sample per 5-minute window of a kept task: ``ts`` Unix seconds from start_time, ``cpu`` cores, ``mem`` GiB."""
    task_id = usage["collection_id"].astype(np.int64).astype(str) + "-" + usage["instance_index"].astype(np.int64).astype(str)
    kept = task_id.isin(tasks["task_id"]).to_numpy()
    usage = usage[kept]
    cpu, mem = usage["average_usage_cpus"], usage["average_usage_memory"]
    if stat == "maximum":
        cpu = usage["maximum_usage_cpus"].fillna(cpu)
        mem = usage["maximum_usage_memory"].fillna(mem)
    return pd.DataFrame({
        "task_id": task_id[kept].to_numpy(),
        "ts": (usage["start_time"].to_numpy() // MICROSECONDS).astype(np.int64),
        "cpu": cpu.to_numpy() * cores_per_unit,
        "mem": mem.to_numpy() * gib_per_unit,
    })

