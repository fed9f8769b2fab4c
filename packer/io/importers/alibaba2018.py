"""Import the Alibaba cluster-trace-v2018 (machines, containers, container usage) as a native trace.

Input folder: ``machine_meta.csv``, ``container_meta.csv`` and optionally
``container_usage.csv`` (each may be ``.csv.gz``), as published: **no header
line**, columns in the order of ``cluster-trace-v2018/schema.txt`` in the
``alibaba/clusterdata`` repository:

* ``machine_meta``: machine_id, time_stamp, failure_domain_1, failure_domain_2,
  cpu_num, mem_size, status
* ``container_meta``: container_id, machine_id, time_stamp, app_du, status,
  cpu_request, cpu_limit, mem_size
* ``container_usage``: container_id, machine_id, time_stamp, cpu_util_percent,
  mem_util_percent, cpi, mem_gps, mpki, net_in, net_out, disk_io_percent

Times are seconds since the start of the 8-day trace (0 also means "before or after
the span"). Both meta tables log a record per change; the cluster's state at the
snapshot time ``at`` (default: the latest ``time_stamp`` of container_meta) is the
**last record per machine, and per container, with time_stamp <= at**.

Units and conversions (memory in the trace is normalized, 100 = the largest
machine's memory; the importer assumes that machine has ``machine_mem_gib`` GiB,
default 512, so GiB = mem_size / 100 x machine_mem_gib):

* hosts: a machine is a host (``host_id`` = machine_id), ``cpu_num`` cores and
  mem_size -> GiB; ``domain`` = failure_domain_1 (the coarser of the two published
  failure-domain levels; failure_domain_2 and status are not read). A machine
  with 0 cores at the snapshot is left out.
* fleet (the trace's own ``fleet.toml``): one architecture per distinct (cores,
  GiB) shape, named ``cpu<cores>-mem<GiB>``; ``score`` = cores / 32 (no CPU
  model is given: a core counts as a Broadwell18 core); ``cost`` (assumed, the
  trace has no prices) = the mean of its cores and memory as fractions of the
  largest shape's; ``net``: nominal ``net_capacity`` Gbps (the trace's network
  columns are normalized counts of packets, not bandwidth), and every task's
  ``net_request`` and usage ``net`` are 0, so the dimension never binds.
* tasks: a container is a task (``task_id`` = container_id, ``job_id`` = app_du, the
  deploy unit), on the machine of its last record; ``cpu_request`` = cpu_request / 100
  cores (100 = 1 core); ``mem_request`` = mem_size -> GiB. cpu_limit is not read.
  ``statuses`` keeps only containers whose last status is listed (default: all).
* usage: every sample of a kept container (all times, before and after ``at``),
  ``ts`` = time_stamp seconds written as a timestamp counted from 1970-01-01 UTC
  (the trace has no dates). ``cpu_util_percent`` and ``mem_util_percent`` are
  percentages **of the container's own request** (the trace's maintainers, in
  alibaba/clusterdata issue 62: "the percentage against the container's requested
  CPU number, not the machine CPU number"; memory is taken the same way):
  ``cpu`` cores = cpu_util_percent / 100 x cpu_request / 100, ``mem`` GiB =
  mem_util_percent / 100 x the container's GiB. Values outside [0, 100] (the
  trace marks invalid samples -1 or 101) leave the sample out, counted in the
  summary. cpi, mem_gps, mpki, net_in, net_out and disk_io_percent are not read.

Placement: the trace's own (the machine of each container's last record). A
container whose machine is unknown (not in machine_meta at the snapshot, or
empty) is dropped with the reason, counted in the summary. ``machines=N`` keeps
the first N machines by id (natural order: m_2 before m_10) and their containers.

A file that cannot be used (missing, wrong number of fields, a missing or
non-numeric value in a column the import reads, a negative amount) fails the
import with an :class:`InputError` naming file, column and lines (counted from 1);
nothing is written. Usage is streamed in blocks; memory holds the kept
containers' samples.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from packer.errors import InputError, Problem
from packer.io.atomic import refuse_to_overwrite_input
from packer.io.importers.cluster_trace import (
    CORES_PER_SCORE, DEFAULT_NET_CAPACITY, Progress, csv_batches, fleet_toml, numbers, rows_text, shape_cost, usage_tables,
)
from packer.io.importers.summary import ImportSummary
from packer.io.trace import write_trace

log = logging.getLogger(__name__)

MACHINE_META = ("machine_id", "time_stamp", "failure_domain_1", "failure_domain_2", "cpu_num", "mem_size", "status")
CONTAINER_META = ("container_id", "machine_id", "time_stamp", "app_du", "status", "cpu_request", "cpu_limit", "mem_size")
CONTAINER_USAGE = ("container_id", "machine_id", "time_stamp", "cpu_util_percent", "mem_util_percent", "cpi", "mem_gps", "mpki",
                   "net_in", "net_out", "disk_io_percent")
#: GiB of the largest machine, whose normalized mem_size is 100 (an assumption: the trace hides it).
DEFAULT_MACHINE_MEM_GIB = 512.0
#: cpu_request units per core.
CPU_REQUEST_PER_CORE = 100
PERCENT = 100.0


def _find(src: Path, stem: str, required: bool = True) -> Path | None:
    for name in (f"{stem}.csv", f"{stem}.csv.gz"):
        if (src / name).is_file():
            return src / name
    if required:
        raise InputError([Problem(str(src / f"{stem}.csv"), "", "file not found (expected the published file, .csv or .csv.gz)", 0)])
    return None


def _read_table(path: Path, names: Sequence[str], ids: Sequence[str], amounts: Sequence[str]) -> pd.DataFrame:
    """The whole (small) meta table, amounts as floats, with a ``_line`` column; every problem at once."""
    frames, problems = [], []
    for frame, lines in csv_batches(path, names, numeric=amounts):
        problems += numbers(str(path), frame, amounts, ids[0], lines)
        for col in ids:
            empty = (frame[col].str.strip() == "").to_numpy()
            if empty.any():
                problems.append(Problem(str(path), col, "missing id", int(empty.sum()), rows_text(frame, empty, [*ids], lines)))
        frames.append(frame.assign(_line=lines))
    if problems:
        raise InputError(problems)
    if not frames or not sum(len(f) for f in frames):
        raise InputError([Problem(str(path), "", "the file has no rows", 0)])
    return pd.concat(frames, ignore_index=True)


def _last_before(df: pd.DataFrame, key: str, at: float) -> pd.DataFrame:
    """The last record per ``key`` with time_stamp <= ``at`` (file order breaks ties)."""
    df = df[df["time_stamp"] <= at]
    return df.sort_values("time_stamp", kind="stable").drop_duplicates(key, keep="last").reset_index(drop=True)


def _natural_order(ids: pd.Series) -> np.ndarray:
    """Positions that sort ``m_2`` before ``m_10``: by length, then text."""
    return np.lexsort((ids.to_numpy(dtype=str), ids.str.len().to_numpy()))


def _archs(hosts: pd.DataFrame, net_capacity: float) -> pd.DataFrame:
    shapes = hosts.groupby(["cores", "mem"], sort=True).size().rename("hosts").reset_index()
    shapes.index = [f"cpu{c:g}-mem{m:g}" for c, m in zip(shapes["cores"], shapes["mem"])]
    shapes["net"] = net_capacity
    shapes["score"] = shapes["cores"] / CORES_PER_SCORE
    shapes["cost"] = shape_cost(shapes["cores"], shapes["mem"])
    return shapes


def import_alibaba2018(
    src: str | Path,
    out: str | Path,
    at: float | None = None,
    machines: int | None = None,
    machine_mem_gib: float = DEFAULT_MACHINE_MEM_GIB,
    statuses: Sequence[str] | None = None,
    net_capacity: float = DEFAULT_NET_CAPACITY,
    progress: Progress | None = None,
) -> ImportSummary:
    """Convert an Alibaba cluster-trace-v2018 folder into a native trace at ``out`` (see the module docstring).

    ``at``: snapshot time, seconds since the trace start (default: the latest
    container_meta time_stamp); ``machines``: keep the first N machines by id and
    their containers; ``machine_mem_gib``: GiB of a machine with mem_size 100;
    ``statuses``: keep containers whose last status is one of these (default: all);
    ``net_capacity``: nominal Gbps per host. Units written: cores, GiB, Gbps.
    Raises :class:`InputError` (bad folder, file, column or rows, bad option).
    """
    src, out = Path(src), Path(out)
    if not src.is_dir():
        raise InputError([Problem(str(src), "", "Alibaba 2018 folder not found (expected machine_meta.csv, container_meta.csv, container_usage.csv)", 0)])
    if not (np.isfinite(machine_mem_gib) and machine_mem_gib > 0):
        raise InputError(f"--machine-mem must be a number of GiB > 0, got {machine_mem_gib}")
    if machines is not None and machines < 1:
        raise InputError(f"--machines must be at least 1, got {machines}")
    machine_path, container_path = _find(src, "machine_meta"), _find(src, "container_meta")
    usage_path = _find(src, "container_usage", required=False)
    refuse_to_overwrite_input(out, src)

    machine_meta = _read_table(machine_path, MACHINE_META, ["machine_id"], ["time_stamp", "cpu_num", "mem_size"])
    container_meta = _read_table(container_path, CONTAINER_META, ["container_id"], ["time_stamp", "cpu_request", "mem_size"])
    if at is None:
        at = float(container_meta["time_stamp"].max())

    hosts = _last_before(machine_meta, "machine_id", at)
    hosts = hosts[hosts["cpu_num"] > 0]
    hosts = hosts.iloc[_natural_order(hosts["machine_id"])].reset_index(drop=True)
    present = set(hosts["machine_id"])
    if machines is not None:
        hosts = hosts.iloc[:machines]
    if hosts.empty:
        raise InputError([Problem(str(machine_path), "time_stamp", f"no machine with cores is listed at or before --at {at:g} s", 0)])
    hosts = pd.DataFrame({
        "host_id": hosts["machine_id"].astype(object),
        "cores": hosts["cpu_num"],
        "mem": hosts["mem_size"] / PERCENT * machine_mem_gib,
        "domain": hosts["failure_domain_1"].astype(object),
    })
    archs = _archs(hosts, net_capacity)
    hosts = hosts.merge(archs.reset_index(names="arch")[["cores", "mem", "arch"]], on=["cores", "mem"], how="left")

    containers = _last_before(container_meta, "container_id", at)
    records = int(container_meta["container_id"].nunique())
    if containers.empty:
        raise InputError([Problem(str(container_path), "time_stamp", f"no container is listed at or before --at {at:g} s", 0)])
    keep = np.ones(len(containers), dtype=bool)
    if statuses:
        keep = containers["status"].isin(list(statuses)).to_numpy()
        if not keep.any():
            known = ", ".join(sorted(containers["status"].unique()))
            raise InputError([Problem(str(container_path), "status", f"no container's last status is {', '.join(statuses)} (statuses: {known})", 0)])
    host_ids = set(hosts["host_id"])
    elsewhere = keep & containers["machine_id"].isin(present - host_ids).to_numpy()  # outside --machines
    filtered = int((~keep).sum() + elsewhere.sum())
    unknown = keep & ~elsewhere & ~containers["machine_id"].isin(host_ids).to_numpy()
    dropped = {
        str(c): (f"machine {m!r} is not in machine_meta at --at {at:g} s" if m else "no machine_id") + f" ({container_path.name} line {line})"
        for c, m, line in containers.loc[unknown, ["container_id", "machine_id", "_line"]].itertuples(index=False)
    }
    containers = containers[keep & ~elsewhere & ~unknown].reset_index(drop=True)
    if containers.empty:
        raise InputError([Problem(str(container_path), "machine_id", "no container is left on a known machine; nothing to import", 0)])

    tasks = pd.DataFrame({
        "task_id": containers["container_id"].astype(object),
        "job_id": containers["app_du"].where(containers["app_du"].str.strip() != "", containers["container_id"]).astype(object),
        "host_id": containers["machine_id"].astype(object),
        "cpu_request": containers["cpu_request"] / CPU_REQUEST_PER_CORE,
        "mem_request": containers["mem_size"] / PERCENT * machine_mem_gib,
        "net_request": 0.0,
        "movable": True,
    })

    usage_rows = merged = 0
    skipped: list[Problem] = []
    usage = None
    if usage_path is not None:
        usage, skipped = _read_usage(usage_path, tasks, progress)
        usage, usage_rows, merged = usage_tables(usage)

    header = [
        "Fleet of the Alibaba cluster-trace-v2018, written by `packer import alibaba2018` from",
        f"{src} at {at:g} s.",
        "One architecture per distinct machine shape; the comment after each name counts its hosts.",
        f"Units: cores = cpu_num; mem GiB = mem_size / 100 x {machine_mem_gib:g} (assumed GiB of the largest machine);",
        f"net Gbps, nominal ({net_capacity:g}): the trace has no network bandwidth.",
        "score = cores / 32: no CPU model is given, so a core counts as a Broadwell18 core.",
        "cost (assumed, the trace has no prices) = mean of cores and mem as fractions of the largest shape's.",
    ]
    write_trace(out, hosts[["host_id", "arch", "domain"]], tasks, usage, fleet_toml=fleet_toml(header, archs))
    log.info("alibaba2018: %d containers on %d machines (%d shapes) at %g s -> %s", len(tasks), len(hosts), len(archs), at, out)
    return ImportSummary(
        source=src,
        out=out,
        records=records,
        tasks=len(tasks),
        hosts_per_arch=archs["hosts"].astype(int).to_dict(),
        usage_rows=usage_rows,
        skipped=tuple(skipped),
        dropped=dropped,
        filtered=filtered,
        filtered_reason="(by --status, or on machines outside --machines)",
        merged_samples=merged,
    )


def _read_usage(path: Path, tasks: pd.DataFrame, progress: Progress | None) -> tuple[pd.DataFrame, list[Problem]]:
    """Samples of the kept containers in cores and GiB, and the invalid samples left out (one problem per column)."""
    file = str(path)
    task_index = pd.Index(tasks["task_id"])
    cpu_request, mem_request = tasks["cpu_request"].to_numpy(), tasks["mem_request"].to_numpy()
    frames, problems = [], []
    invalid = {"cpu_util_percent": 0, "mem_util_percent": 0}
    amounts = ["time_stamp", *invalid]
    for frame, lines in csv_batches(path, CONTAINER_USAGE, progress, "reading container_usage", numeric=amounts):
        problems += numbers(file, frame, amounts, "container_id", lines, signed=list(invalid))
        if problems:
            continue
        task = task_index.get_indexer(frame["container_id"])
        ok = task >= 0
        for col in invalid:
            outside = ok & ~frame[col].between(0, PERCENT).to_numpy()
            invalid[col] += int(outside.sum())
            ok &= ~outside
        task = task[ok]
        frames.append(pd.DataFrame({
            "task_id": task_index.to_numpy()[task],
            "ts": frame["time_stamp"].to_numpy()[ok].astype(np.int64),
            "cpu": frame["cpu_util_percent"].to_numpy()[ok] / PERCENT * cpu_request[task],
            "mem": frame["mem_util_percent"].to_numpy()[ok] / PERCENT * mem_request[task],
        }))
    if problems:
        raise InputError(problems)
    skipped = [Problem(file, col, "outside [0, 100] (the trace marks invalid samples -1 or 101): sample left out", n)
               for col, n in invalid.items() if n]
    usage = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["task_id", "ts", "cpu", "mem"])
    return usage, skipped
