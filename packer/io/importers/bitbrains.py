"""Import the Bitbrains GWA-T-12 trace (one ``;``-separated CSV per VM) as a native trace.

Input: a folder of CSV files, one per VM, 5-minute samples. Headers carry stray
tabs and spaces (stripped here). Columns used:

=====================================  ==============================================
``Timestamp [ms]``                     sample time; despite the name, Unix **seconds**
``CPU cores``                          provisioned cores (the VM's request)
``CPU capacity provisioned [MHZ]``     provisioned MHz (cores x MHz per core)
``CPU usage [MHZ]``                    used MHz
``Memory capacity provisioned [KB]``   provisioned memory, KiB
``Memory usage [KB]``                  used memory, KiB
``Network received throughput [KB/s]``     KiB/s
``Network transmitted throughput [KB/s]``  KiB/s
=====================================  ==============================================

Conversions (KB is taken as KiB = 1024 bytes throughout, so memory and network agree):

* a VM is a task: ``task_id = job_id = "vm<file stem>"``. The trace says nothing about
  which VMs belong together (neighbouring file numbers share shapes, but that is a
  guess), so every VM is its own job.
* requests: ``cpu_request`` = the largest ``CPU cores`` of the VM's samples (VMs are
  resized, and samples taken while a VM is off provision 0); ``mem_request`` = the
  largest ``Memory capacity provisioned [KB]`` / 2**20 (GiB).
* ``net_request``: the trace provisions no network. Default: the VM's largest observed
  network throughput (received + transmitted), rounded up to the next 0.1 Gbps
  (at least 0.1 Gbps); or one fixed value for every VM (``net_request=``).
* usage per sample: ``cpu`` cores = ``CPU usage [MHZ]`` / (``CPU capacity provisioned
  [MHZ]`` / ``CPU cores``), i.e. MHz over the sample's provisioned MHz per core
  (0 when the VM has no CPU provisioned and uses none); ``mem`` GiB = ``Memory usage
  [KB]`` / 2**20; ``net`` Gbps = (received + transmitted) KiB/s x 1024 x 8 / 1e9.
  ``ts`` is written as a UTC timestamp (seconds).
* duplicate samples (same VM and timestamp; VMs 20 and 54 of the Rnd trace log them,
  mostly all-zero rows while the VM is off) are merged into one sample holding the
  largest value per column, so usage is never underestimated; the count is reported.

Invalid rows (missing or non-numeric value, negative value, CPU cores and
provisioned MHz disagreeing about whether the VM has CPU, CPU used without CPU
provisioned) fail the import with an :class:`InputError` naming file, column,
count and first lines (counted from 1 with the header as line 1, as an editor shows
them), every file's problems at once; with ``skip_invalid`` they are dropped and
counted instead, and a VM left without a valid row is left out.

Hosts: the trace has none, so the importer builds a fleet from a catalog (default
``models/fleet.toml``; architectures ``archs``, default all of the catalog) and an
initial placement by requests: hosts are laid out in rounds of one host per
architecture (so the fleet mixes architectures evenly), VMs are placed by
first-fit decreasing (most requested cores first, then memory, then network), and
every host is filled to at most ``1 - slack`` of its capacity in each dimension,
leaving room to move tasks into. A VM larger than that limit gets an empty host of
its own (full capacity). ``hosts_per_arch`` fixes the number of rounds; by default
it is the smallest number for which every VM is placed, and every host of every
round is kept (some may stay empty: spare capacity). Hosts are grouped into racks
of ``hosts_per_rack`` consecutive hosts (the ``domain`` column).

A VM that fits no architecture of the mix even alone (the Rnd trace's VM 27
provisions 511.5 GiB, more than any Table I host) raises :class:`InfeasibleError`
naming it, unless ``drop_unfit`` is set: then it is left out (with its usage) and
reported. With a catalog other than the default, the catalog is copied into the
trace's ``fleet.toml`` so the trace stays readable on its own.

Each CSV is read twice, one file at a time (first for requests and validation,
then to stream usage), so memory holds one VM's samples, never the whole trace.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from packer.io.atomic import refuse_to_overwrite_input
from packer.errors import MAX_ROWS_SHOWN, InfeasibleError, InputError, Problem
from packer.io.fleet import DEFAULT_FLEET, Fleet, load_fleet
from packer.io.importers.initial_placement import first_fit_decreasing
from packer.io.importers.summary import ImportSummary
from packer.io.trace import write_trace

log = logging.getLogger(__name__)

TS = "Timestamp [ms]"
CORES = "CPU cores"
CPU_CAPACITY = "CPU capacity provisioned [MHZ]"
CPU_USAGE = "CPU usage [MHZ]"
MEM_CAPACITY = "Memory capacity provisioned [KB]"
MEM_USAGE = "Memory usage [KB]"
NET_RX = "Network received throughput [KB/s]"
NET_TX = "Network transmitted throughput [KB/s]"
REQUIRED_COLUMNS = (TS, CORES, CPU_CAPACITY, CPU_USAGE, MEM_CAPACITY, MEM_USAGE, NET_RX, NET_TX)

KIB = 1024
KIB_PER_GIB = 2**20
#: KiB/s to Gbps: 1024 bytes x 8 bits / 1e9.
KIBPS_TO_GBPS = KIB * 8 / 1e9
#: Granularity of the default network request (Gbps).
NET_REQUEST_STEP = 0.1
DIMS = ("cpu", "mem", "net")
USAGE_SCHEMA = pa.schema(
    [("task_id", pa.string()), ("ts", pa.timestamp("s", tz="UTC")), ("cpu", pa.float64()), ("mem", pa.float64()), ("net", pa.float64())]
)

#: Problems listed by a failed import (the rest are counted): the first ones show what to fix.
MAX_PROBLEMS_SHOWN = 20

#: progress(stage, files done, files total)
Progress = Callable[[str, int, int], None]


@dataclass
class _VmSamples:
    """One VM's valid samples, converted (``ts`` Unix s, ``cpu`` cores, ``mem`` GiB, ``net`` Gbps)."""

    samples: pd.DataFrame
    cpu_request: float
    mem_request: float
    net_max: float
    skipped: list[Problem]
    skipped_rows: int
    merged: int


def _rows_text(raw: pd.DataFrame, mask: np.ndarray, columns: Sequence[str]) -> tuple[str, ...]:
    """The first flagged rows as the file shows them: ``"line 3 (Timestamp [ms]=1372630104, CPU cores=nan)"``.

    Lines count from 1 with the header as line 1, as an editor shows the file.
    """
    def text(value) -> str:
        return "(empty)" if pd.isna(value) or value == "" else str(value)

    idx = np.flatnonzero(mask)[:MAX_ROWS_SHOWN]
    return tuple(f"line {i + 2} (" + ", ".join(f"{c}={text(raw[c].iloc[i])}" for c in dict.fromkeys(columns)) + ")" for i in idx)


def _problem_if(file: str, column: str, message: str, raw: pd.DataFrame, mask: np.ndarray, show: Sequence[str]) -> list[Problem]:
    count = int(mask.sum())
    return [Problem(file, column, message, count, _rows_text(raw, mask, show))] if count else []


def _read_vm(path: Path, skip_invalid: bool) -> tuple[_VmSamples | None, list[Problem]]:
    """Read, check and convert one VM file. Returns the samples (or ``None``) and the problems that fail the import.

    With ``skip_invalid``, invalid rows are dropped (listed in ``skipped``); a VM left
    without samples has empty ``samples`` and is left out of the trace.
    """
    file = str(path)
    try:
        raw = pd.read_csv(path, sep=";", dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as exc:
        return None, [Problem(file, "", f"not a readable ';'-separated CSV: {exc}", 0)]
    raw.columns = [str(c).strip() for c in raw.columns]
    raw = raw.apply(lambda column: column.str.strip())
    missing = [c for c in REQUIRED_COLUMNS if c not in raw.columns]
    if missing:
        return None, [Problem(file, ", ".join(missing), f"required column missing (the file has: {', '.join(raw.columns)})", 0)]
    if raw.empty:
        return None, [Problem(file, "", "the file has no samples", 0)]

    df = raw[list(REQUIRED_COLUMNS)].apply(pd.to_numeric, errors="coerce").astype(float)
    row_problems: list[Problem] = []
    bad = np.zeros(len(df), dtype=bool)
    for col in REQUIRED_COLUMNS:
        values = df[col].to_numpy()
        checks = (("missing or non-numeric value", ~np.isfinite(values)), ("negative value", values < 0))
        for message, mask in checks:
            row_problems += _problem_if(file, col, message, raw, mask, [TS, col])
            bad |= mask
    cores, capacity, used = (df[c].to_numpy() for c in (CORES, CPU_CAPACITY, CPU_USAGE))
    disagree = (cores == 0) != (capacity == 0)
    row_problems += _problem_if(file, CORES, f"'{CORES}' and '{CPU_CAPACITY}' disagree on whether the VM has CPU (one is 0)", raw, disagree, [TS, CORES, CPU_CAPACITY])
    unconvertible = (capacity == 0) & (used > 0)
    row_problems += _problem_if(file, CPU_USAGE, "CPU used without CPU provisioned: MHz cannot be converted to cores", raw, unconvertible, [TS, CPU_CAPACITY, CPU_USAGE])
    bad |= disagree | unconvertible
    if row_problems and not skip_invalid:
        return None, row_problems

    df = df[~bad]
    if df.empty:
        left_out = Problem(file, "", f"no valid samples (all {len(bad)} rows invalid): the VM is left out", 0)
        return _VmSamples(pd.DataFrame(columns=["ts", *DIMS]), 0.0, 0.0, 0.0, [*row_problems, left_out], int(bad.sum()), 0), []
    cores, capacity, used = (df[c].to_numpy() for c in (CORES, CPU_CAPACITY, CPU_USAGE))
    mhz_per_core = np.divide(capacity, cores, out=np.ones_like(capacity), where=cores > 0)
    samples = pd.DataFrame(
        {
            "ts": df[TS].to_numpy().astype(np.int64),
            "cpu": np.divide(used, mhz_per_core, out=np.zeros_like(used), where=capacity > 0),
            "mem": df[MEM_USAGE].to_numpy() / KIB_PER_GIB,
            "net": (df[NET_RX].to_numpy() + df[NET_TX].to_numpy()) * KIBPS_TO_GBPS,
        }
    )
    n = len(samples)
    if samples["ts"].duplicated().any():
        samples = samples.groupby("ts", sort=True, as_index=False).max()
    elif not samples["ts"].is_monotonic_increasing:
        samples = samples.sort_values("ts", kind="stable", ignore_index=True)
    vm = _VmSamples(
        samples=samples,
        cpu_request=float(cores.max()),
        mem_request=float(df[MEM_CAPACITY].max()) / KIB_PER_GIB,
        net_max=float(samples["net"].max()),
        skipped=row_problems,
        skipped_rows=int(bad.sum()),
        merged=n - len(samples),
    )
    return vm, []


def _with_hint(problems: list[Problem], n_files: int) -> list[Problem]:
    """At most :data:`MAX_PROBLEMS_SHOWN` problems, a count of the rest, and how to import anyway."""
    files = len({p.file for p in problems})
    shown = problems[:MAX_PROBLEMS_SHOWN]
    if len(problems) > len(shown):
        shown.append(Problem("", "", f"... and {len(problems) - len(shown)} more problems", 0))
    shown.append(Problem("", "", f"{files} of {n_files} VM files have problems; fix them, or import with --skip-invalid "
                                 "(skip_invalid=True) to drop the invalid rows and count them", 0))
    return shown


def _vm_files(src: Path) -> list[tuple[str, Path]]:
    """(task_id, path) of every CSV in ``src``, sorted by task_id (the order usage is written in)."""
    if not src.is_dir():
        raise InputError([Problem(str(src), "", "Bitbrains folder not found (expected a folder of per-VM CSV files)", 0)])
    files = [p for p in src.iterdir() if p.suffix.lower() == ".csv" and p.is_file()]
    if not files:
        raise InputError([Problem(str(src), "", "no CSV files in the folder (expected one ';'-separated CSV per VM)", 0)])
    return sorted((f"vm{p.stem}", p) for p in files)


def _host_pool(mix: Sequence[str], rounds: int) -> np.ndarray:
    """Architecture index per host: ``rounds`` rounds of one host per architecture."""
    return np.tile(np.arange(len(mix)), rounds)


def _place(demand: np.ndarray, arch_capacity: np.ndarray, host_arch: np.ndarray, slack: float) -> np.ndarray:
    """Host index per VM (``-1`` if unplaced): first-fit decreasing up to ``1 - slack`` of capacity, then big VMs alone."""
    order = np.lexsort((-demand[:, 2], -demand[:, 1], -demand[:, 0]))
    capacity = arch_capacity[host_arch]
    host_of = first_fit_decreasing(demand, capacity * (1.0 - slack), order)
    left = np.flatnonzero(host_of < 0)
    if len(left):
        # VMs above the slack limit everywhere: each gets a still-empty host at full capacity.
        # An extra "slot" dimension (demand 1, capacity 1 on empty hosts) allows one VM per host.
        empty = np.bincount(host_of[host_of >= 0], minlength=len(capacity)) == 0
        slots = np.column_stack([np.where(empty[:, None], capacity, 0.0), empty.astype(float)])
        left_order = np.argsort(np.argsort(order)[left], kind="stable")
        with_slot = np.column_stack([demand[left], np.ones(len(left))])
        host_of[left] = first_fit_decreasing(with_slot, slots, left_order)
    return host_of


def _build_fleet(
    tasks: pd.DataFrame, fleet: Fleet, mix: list[str], hosts_per_arch: int | None, slack: float, hosts_per_rack: int
) -> tuple[pd.DataFrame, np.ndarray]:
    """Hosts table and host index per task (every task placed) or :class:`InfeasibleError`."""
    demand = tasks[[f"{d}_request" for d in DIMS]].to_numpy(dtype=float)
    arch_capacity = np.column_stack([fleet.capacity(d).loc[mix].to_numpy() for d in DIMS])
    if hosts_per_arch is not None:
        rounds = [hosts_per_arch]
    else:
        per_round = arch_capacity.sum(axis=0) * (1.0 - slack)
        need = np.divide(demand.sum(axis=0), per_round, out=np.zeros(len(DIMS)), where=per_round > 0)
        lower = max(1, math.ceil(float(need.max()) - 1e-9))
        rounds = range(lower, max(lower, len(tasks)) + 1)
    for n in rounds:
        host_arch = _host_pool(mix, n)
        host_of = _place(demand, arch_capacity, host_arch, slack)
        if (host_of >= 0).all():
            break
    else:
        unplaced = tasks["task_id"].to_numpy()[host_of < 0]
        raise InfeasibleError(
            f"{len(unplaced)} VMs do not fit on {hosts_per_arch} hosts per architecture ({', '.join(mix)}) "
            f"filled to {1 - slack:.0%}: {', '.join(unplaced[:10])}; use more --hosts-per-arch, or omit it to size the fleet automatically",
            list(unplaced),
        )
    index = np.arange(len(host_arch))
    width = len(str(max(n - 1, 1)))
    arch_names = np.asarray(mix, dtype=object)[host_arch]
    hosts = pd.DataFrame(
        {
            "host_id": [f"{a}-{r:0{width}d}" for a, r in zip(arch_names, index // len(mix))],
            "arch": arch_names,
            "domain": [f"rack{r:0{len(str(max(len(index) // hosts_per_rack, 1)))}d}" for r in index // hosts_per_rack],
        }
    )
    return hosts, host_of


def import_bitbrains(
    src: str | Path,
    out: str | Path,
    fleet: str | Path | None = None,
    archs: Sequence[str] | None = None,
    hosts_per_arch: int | None = None,
    slack: float = 0.25,
    hosts_per_rack: int = 8,
    net_request: float | None = None,
    skip_invalid: bool = False,
    drop_unfit: bool = False,
    progress: Progress | None = None,
) -> ImportSummary:
    """Convert a Bitbrains GWA-T-12 folder into a native trace folder at ``out`` (see the module docstring).

    ``fleet``: catalog path (default ``models/fleet.toml``); ``archs``: architectures
    of the built fleet (default: all of the catalog); ``hosts_per_arch``: hosts per
    architecture (default: the fewest that place every VM); ``slack``: fraction of
    each host's capacity (every dimension) the initial placement leaves free;
    ``net_request``: a fixed network request in Gbps for every VM (default: each
    VM's observed peak rounded up to 0.1 Gbps). Units written: cores, GiB, Gbps.
    Raises :class:`InputError` (bad folder, file, column or rows) or
    :class:`InfeasibleError` (a VM fits no architecture, unless ``drop_unfit``).
    """
    src, out = Path(src), Path(out)
    if not 0.0 <= slack < 1.0:
        raise InputError(f"slack must be in [0, 1), got {slack}")
    if hosts_per_arch is not None and hosts_per_arch < 1:
        raise InputError(f"hosts per architecture must be at least 1, got {hosts_per_arch}")
    if hosts_per_rack < 1:
        raise InputError(f"hosts per rack must be at least 1, got {hosts_per_rack}")
    if net_request is not None and not (math.isfinite(net_request) and net_request >= 0):
        raise InputError(f"net request must be a finite number of Gbps >= 0, got {net_request}")
    files = _vm_files(src)
    refuse_to_overwrite_input(out, src)
    catalog = Path(fleet) if fleet is not None else DEFAULT_FLEET
    fleet_model = load_fleet(catalog)
    mix = list(archs) if archs else list(fleet_model.archs.index)
    unknown = [a for a in mix if a not in fleet_model.archs.index]
    if unknown:
        raise InputError(f"{catalog}: unknown architecture(s) {', '.join(unknown)} (known: {', '.join(fleet_model.archs.index)})")

    rows, problems, skipped = [], [], []
    skipped_rows = merged = 0
    empty: set[str] = set()
    for k, (task_id, path) in enumerate(files):
        vm, errors = _read_vm(path, skip_invalid)
        problems += errors
        if vm is not None:
            skipped += vm.skipped
            skipped_rows += vm.skipped_rows
            merged += vm.merged
            if vm.samples.empty:
                empty.add(task_id)
            else:
                rows.append((task_id, vm.cpu_request, vm.mem_request, vm.net_max))
        if progress is not None:
            progress("checking VM files", k + 1, len(files))
    tasks = pd.DataFrame(rows, columns=["task_id", "cpu_request", "mem_request", "net_max"])
    tasks.insert(1, "job_id", tasks["task_id"])
    if net_request is None:
        steps = np.ceil(tasks["net_max"].to_numpy() / NET_REQUEST_STEP - 1e-9)
        tasks["net_request"] = np.maximum(steps, 1.0) * NET_REQUEST_STEP
    else:
        tasks["net_request"] = float(net_request)
    tasks = tasks.drop(columns="net_max")

    demand = tasks[[f"{d}_request" for d in DIMS]].to_numpy(dtype=float)
    arch_capacity = np.column_stack([fleet_model.capacity(d).loc[mix].to_numpy() for d in DIMS])
    fits_alone = (demand[:, None, :] <= arch_capacity[None, :, :] + 1e-9).all(axis=2).any(axis=1)
    largest = ", ".join(f"{d} {arch_capacity[:, j].max():g}" for j, d in enumerate(DIMS))
    reasons = {
        t.task_id: f"requests {t.cpu_request:g} cores, {t.mem_request:.1f} GiB, {t.net_request:g} Gbps; no architecture of {', '.join(mix)} in {catalog} has room (largest: {largest})"
        for t in tasks[~fits_alone].itertuples()
    }
    unfit = (f"{len(reasons)} VM(s) fit no host: " + "; ".join(f"{n} {r}" for n, r in list(reasons.items())[:5])
             + ". Use --drop-unfit to import without them, or a catalog/--arch with an architecture that fits.")
    if problems:
        # Every problem at once: a VM too big for the fleet is named now, not after the rows are fixed.
        also = [Problem("", "", unfit, 0)] if reasons and not drop_unfit else []
        raise InputError(_with_hint(problems, len(files)) + also)
    if not rows:
        raise InputError([Problem(str(src), "", "no VM has a valid sample; nothing to import", 0)])

    dropped: dict[str, str] = {}
    if reasons:
        if not drop_unfit:
            raise InfeasibleError(unfit, list(reasons))
        dropped = reasons
        tasks = tasks[fits_alone].reset_index(drop=True)

    hosts, host_of = _build_fleet(tasks, fleet_model, mix, hosts_per_arch, slack, hosts_per_rack)
    tasks.insert(2, "host_id", hosts["host_id"].to_numpy()[host_of])
    tasks["movable"] = True

    kept = [(task_id, path) for task_id, path in files if task_id not in dropped and task_id not in empty]
    usage_rows = 0

    def usage() -> Iterator[pa.Table]:
        nonlocal usage_rows
        for k, (task_id, path) in enumerate(kept):
            vm, errors = _read_vm(path, skip_invalid)
            if vm is None:  # the file changed between the two passes
                raise InputError(errors)
            s = vm.samples
            usage_rows += len(s)
            yield pa.Table.from_arrays(
                [
                    pa.array(np.full(len(s), task_id, dtype=object), pa.string()),
                    pa.array(s["ts"].to_numpy(), pa.timestamp("s", tz="UTC")),
                    pa.array(s["cpu"].to_numpy()),
                    pa.array(s["mem"].to_numpy()),
                    pa.array(s["net"].to_numpy()),
                ],
                schema=USAGE_SCHEMA,
            )
            if progress is not None:
                progress("writing usage", k + 1, len(kept))

    fleet_toml = catalog.read_text() if fleet is not None else None
    write_trace(out, hosts, tasks, usage(), fleet_toml=fleet_toml)
    log.info("bitbrains: %d VMs, %d hosts, %d usage rows -> %s", len(tasks), len(hosts), usage_rows, out)
    return ImportSummary(
        source=src,
        out=out,
        records=len(files),
        tasks=len(tasks),
        hosts_per_arch=hosts["arch"].value_counts().reindex(mix, fill_value=0).astype(int).to_dict(),
        usage_rows=usage_rows,
        skipped_rows=skipped_rows,
        skipped=tuple(skipped),
        dropped=dropped,
        merged_samples=merged,
    )
