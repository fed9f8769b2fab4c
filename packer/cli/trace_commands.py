"""Commands that make, check and describe a trace: validate, profile, characterize, generate, import."""
from __future__ import annotations

import contextlib
import time
from pathlib import Path

import click
import pyarrow as pa
import pyarrow.parquet as pq

from packer.characterization.characterize import characterize as run_characterize
from packer.characterization.characterize import read_profiles, write_characterization
from packer.characterization.classes import read_reference_classes
from packer.characterization.profile import profile_tasks, summarize_profiles, with_profiling
from packer.characterization.sensitivity import DEFAULT_SENSITIVITY, load_sensitivity
from packer.characterization.profile_dask import dask_work, profile_tasks_dask
from packer.cli.options import cluster_options, default_out, fleet_opt, progress_bar, quiet_dask_logs, sensitivity_opts, skip_opt, trace_arg
from packer.cli.output import echo_characterization, echo_generated, echo_import, echo_profiles, echo_skipped_usage
from packer.io.atomic import atomic_file, refuse_to_overwrite_input
from packer.io.generate import check_arguments, generate_trace, sample_count
from packer.io.importers import import_alibaba2018, import_bitbrains, import_google2019, import_openb
from packer.io.output_check import check_output_writable
from packer.io.trace import read_trace
from packer.distributed import dask_client, require_dask
from packer.io.usage import scan_usage, usage_work


@click.command()
@trace_arg
@fleet_opt
@click.option("--usage/--no-usage", "scan_usage_rows", default=True, show_default=True, help="Also check every usage row (a full scan).")
def validate(trace: Path, fleet: Path | None, scan_usage_rows: bool) -> None:
    """Check a trace folder: schema, types, ids, units, references. Exit 0 if valid, 2 if not."""
    t = read_trace(trace, fleet)
    rows = 0
    if scan_usage_rows and t.usage_path is not None:
        with progress_bar("checking usage", t.usage_dataset().count_rows()) as bar:
            for chunk in scan_usage(t, progress=bar.update, by_task=False):
                rows += len(chunk.task)
    click.echo(f"{trace}: valid: {len(t.hosts):,} hosts, {len(t.tasks):,} tasks, {rows:,} usage rows checked; dimensions {', '.join(t.dims)}")


@click.command(short_help="Per-task usage profiles (p99 of 60 s means, mean, max).")
@trace_arg
@fleet_opt
@click.option("-p", "--percentile", "percentiles", type=click.FloatRange(0, 100), multiple=True, default=[99.0], show_default=True,
              help="Percentile of windowed usage to compute; repeat for several (the first is summarized).")
@click.option("--window", "window_s", type=click.IntRange(min=1), default=60, show_default=True, help="Averaging window in seconds before the percentile is taken.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Output Parquet file. Default: out/<trace>/profiles.parquet.")
@skip_opt
@cluster_options
@click.option("--usage", "usage_url", metavar="PATH|URL", default=None,
              help="Read usage from this Parquet file or folder, local or an fsspec URL (s3://..., gs://...), instead of "
                   "TRACE/usage.parquet. Needs --workers or --scheduler; the workers read it.")
def profile(trace: Path, fleet: Path | None, percentiles: tuple[float, ...], window_s: int, out: Path | None, skip_invalid_usage: bool,
            workers: int | None, scheduler: str | None, usage_url: str | None) -> None:
    """Per-task usage profiles: p-th percentile of windowed usage, mean, max, sample count.

    Streams the usage table (it may be larger than memory) and writes
    profiles.parquet with one row per task: samples, windows, and per dimension
    <dim>_p<NN>, <dim>_mean, <dim>_max and <dim>_request (cpu in cores on the
    task's current host, mem GiB, net and membw Gbps). With --workers or
    --scheduler, a Dask cluster computes the same profiles.
    """
    if usage_url is not None and workers is None and scheduler is None:
        raise click.UsageError("--usage is read by Dask workers: add --workers N or --scheduler ADDRESS")
    out = out or default_out(trace, "profiles.parquet")
    refuse_to_overwrite_input(out, trace)
    check_output_writable(out, folder=False)
    t = read_trace(trace, fleet)
    start = time.perf_counter()
    if workers is None and scheduler is None:
        with progress_bar("profiling usage", usage_work(t)) as bar:
            result = profile_tasks(t, percentiles, window_s, skip_invalid=skip_invalid_usage, progress=bar.update)
    else:
        require_dask()  # before quieting its logs: importing distributed sets their levels
        click.echo(f"starting a local Dask cluster of {workers} workers" if workers else f"connecting to the Dask scheduler at {scheduler}", err=True)
        with quiet_dask_logs(), dask_client(scheduler, workers) as client, \
                progress_bar("profiling usage on Dask (read, then profiled)", dask_work(t, usage_url)) as bar:
            result = profile_tasks_dask(t, client, percentiles, window_s, usage=usage_url, skip_invalid=skip_invalid_usage, progress=bar.update)
    with atomic_file(out) as tmp:
        pq.write_table(with_profiling(pa.Table.from_pandas(result.profiles, preserve_index=False), window_s, skip_invalid_usage), tmp)
    echo_skipped_usage(result.skipped)
    echo_profiles(result, len(t.tasks), out, window_s, time.perf_counter() - start, summarize_profiles(result))


@click.command(short_help="Workload classes, sensitivity and eligibility per task.")
@trace_arg
@click.option("--profiles", "profiles_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="profiles.parquet from `packer profile`. Default: out/<trace>/profiles.parquet if it exists, else profile the trace now.")
@click.option("--k", "k", type=click.IntRange(min=1), default=None, help="Number of classes per host type. Default: the elbow of the WCSS curve.")
@click.option("--kmax", type=click.IntRange(min=1), default=8, show_default=True, help="Largest k tried for the elbow.")
@click.option("--seed", type=int, default=0, show_default=True, help="K-means seed (results are deterministic for a seed).")
@click.option("--sensitivity", "sensitivity_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Sensitivity table (CSV). Default: models/sensitivity.csv (the paper's Table III).")
@fleet_opt
@click.option("--infer", is_flag=True, help="Accept empty score cells in the sensitivity table and fill them by collaborative filtering.")
@sensitivity_opts
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Output folder. Default: out/<trace>/characterization.")
def characterize(trace: Path, profiles_path: Path | None, k: int | None, kmax: int, seed: int, sensitivity_path: Path | None,
                 fleet: Path | None, infer: bool, out: Path | None, sensitivity_basis: str, class_scores: str,
                 classes_from: Path | None) -> None:
    """Workload classes (K-means per host type), sensitivity per task, eligibility per architecture.

    Writes tasks.parquet (class, features, raw and Eq.-1-normalized sensitivity per
    architecture, eligible architectures), classes.parquet, wcss.parquet,
    report.md and wcss.png.
    """
    out = out or default_out(trace, "characterization")
    refuse_to_overwrite_input(out, trace)
    check_output_writable(out)
    t = read_trace(trace, fleet)
    # The tables characterization needs, checked before the (long) profiling.
    load_sensitivity(sensitivity_path or DEFAULT_SENSITIVITY, t.fleet, services=t.tasks["service"].dropna().unique(), allow_missing=infer)
    reference = read_reference_classes(classes_from) if classes_from else None
    start = time.perf_counter()
    saved = default_out(trace, "profiles.parquet")
    if profiles_path is None and saved.exists():
        profiles_path = saved
    if profiles_path is not None:
        click.echo(f"using profiles {profiles_path}")
        profiles = read_profiles(profiles_path, t)
    else:
        with progress_bar("profiling usage", usage_work(t)) as bar:
            profiles = profile_tasks(t, progress=bar.update).profiles
    result = run_characterize(t, profiles, k=k, kmax=kmax, seed=seed, sensitivity=sensitivity_path or DEFAULT_SENSITIVITY,
                              profiles_source=str(profiles_path or "profiled now"), infer=infer, aggregate=class_scores,
                              basis=sensitivity_basis, reference=reference)
    write_characterization(result, out)
    echo_characterization(result, out, time.perf_counter() - start)


@click.command(short_help="Write a synthetic trace shaped like the paper's pool.")
@click.option("--tasks", type=int, default=37_000, show_default=True, help="Number of tasks.")
@click.option("--hosts", type=int, default=18_000, show_default=True, help="Number of hosts (Table I architectures, mixed as in packer.io.generate.ARCH_MIX).")
@click.option("--days", type=float, default=7.0, show_default=True, help="Days of usage samples.")
@click.option("--interval", type=int, default=300, show_default=True, help="Seconds between usage samples.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed (the same seed writes byte-identical files).")
@click.option("--fleet", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Fleet catalog (TOML). Default: models/fleet.toml; another catalog is copied into the trace.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("out/generated"), show_default=True,
              help="Trace folder to write (replaced if it exists).")
def generate(tasks: int, hosts: int, days: float, interval: int, seed: int, fleet: Path | None, out: Path) -> None:
    """Write a synthetic trace shaped like the colocation paper's pool.

    Defaults: ~37,000 tasks in ~1,000 jobs on 18,000 hosts, 7 days of samples every
    300 s (~74M usage rows, streamed to disk). Usage sits well below requests: three
    behavioural classes, diurnal cycles, noise and spikes (see packer/io/generate.py).
    """
    check_arguments(tasks, hosts, days, interval)
    check_output_writable(out)
    with progress_bar("generating usage", tasks * sample_count(days, interval)) as bar:
        summary = generate_trace(out, tasks, hosts, days, interval, seed, fleet, progress=bar.update)
    echo_generated(summary)


@click.group("import", short_help="Convert a public trace (Bitbrains, openb, Google 2019, Alibaba 2018) into a trace.")
def import_group() -> None:
    """Convert a public trace into a native trace folder (see `packer import COMMAND --help`)."""


_import_out = click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Output trace folder (written atomically).")
_import_skip = click.option("--skip-invalid", is_flag=True,
                            help="Drop invalid input rows (NaN, negative and the like) instead of failing; the counts are reported.")
_import_drop = click.option("--drop-unfit", is_flag=True, help="Leave out tasks that get no host in the initial placement instead of failing; they are reported.")


def _stage_bars(stack: contextlib.ExitStack):
    """An importer's progress callback: one bar per stage, each with its own total (files or bytes)."""
    bars: dict = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in bars:
            bars[stage] = stack.enter_context(progress_bar(stage, total))
        bars[stage].update(done - bars[stage].pos)

    return progress


@import_group.command("bitbrains", short_help="Import a Bitbrains GWA-T-12 folder (a CSV per VM).")
@click.argument("src", type=click.Path(path_type=Path))
@_import_out
@click.option("--fleet", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Fleet catalog to build hosts from. Default: models/fleet.toml.")
@click.option("--arch", "archs", multiple=True, help="Architecture of the built fleet; repeat for a mix. Default: every architecture of the catalog.")
@click.option("--hosts-per-arch", type=click.IntRange(min=1), default=None, help="Hosts per architecture. Default: the fewest that place every VM.")
@click.option("--slack", type=click.FloatRange(0, 1, max_open=True), default=0.25, show_default=True, help="Fraction of each host's capacity the initial placement leaves free.")
@click.option("--hosts-per-rack", type=click.IntRange(min=1), default=8, show_default=True, help="Consecutive hosts per rack (the domain column).")
@click.option("--net-request", type=click.FloatRange(min=0), default=None, help="Network request (Gbps) for every VM. Default: each VM's peak usage rounded up to 0.1 Gbps.")
@_import_skip
@_import_drop
def import_bitbrains_cmd(src: Path, out: Path, fleet: Path | None, archs: tuple[str, ...], hosts_per_arch: int | None, slack: float,
                         hosts_per_rack: int, net_request: float | None, skip_invalid: bool, drop_unfit: bool) -> None:
    """Import a Bitbrains GWA-T-12 folder (one ';'-separated CSV per VM).

    VMs become tasks with their provisioned cores and memory as requests and their
    5-minute CPU (cores), memory (GiB) and network (Gbps) usage; hosts are built
    from the catalog and VMs placed on them by first-fit decreasing.
    """
    check_output_writable(out)
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        summary = import_bitbrains(src, out, fleet=fleet, archs=archs or None, hosts_per_arch=hosts_per_arch, slack=slack, hosts_per_rack=hosts_per_rack,
                                   net_request=net_request, skip_invalid=skip_invalid, drop_unfit=drop_unfit, progress=_stage_bars(stack))
    echo_import(summary, "VM files", time.perf_counter() - start)


@import_group.command("openb", short_help="Import the Alibaba openb GPU cluster (requests only).")
@click.argument("src", type=click.Path(path_type=Path))
@_import_out
@click.option("--pods", default="default", show_default=True, help="Pod list: 'default', 'gpuspec33' (files in SRC) or a CSV path.")
@click.option("--phase", "phases", multiple=True, default=["Running"], show_default=True,
              help="Keep only pods in this pod_phase (Running, Pending, Failed, Succeeded); repeat for several; 'all' keeps every pod.")
@click.option("--gpu-cost", type=click.FloatRange(min=0), default=1.0, show_default=True, help="Cost units per GPU in the written fleet.toml (a 32-core CPU node costs 1.0).")
@click.option("--net-capacity", type=click.FloatRange(min=0), default=25.0, show_default=True, help="Nominal network capacity per node, Gbps (the trace has none).")
@_import_skip
@_import_drop
def import_openb_cmd(src: Path, out: Path, pods: str, phases: tuple[str, ...], gpu_cost: float, net_capacity: float, skip_invalid: bool, drop_unfit: bool) -> None:
    """Import the Alibaba openb GPU cluster (node list + pod list; requests only).

    Node shapes become the trace's own fleet.toml, pods become tasks with cpu,
    mem and (fractional) gpu requests and allowed_archs from gpu_spec; pods are
    placed on nodes by first-fit decreasing.
    """
    check_output_writable(out)
    start = time.perf_counter()
    summary = import_openb(src, out, pods=pods, phases=None if "all" in phases else phases, gpu_cost=gpu_cost, net_capacity=net_capacity,
                           skip_invalid=skip_invalid, drop_unfit=drop_unfit)
    echo_import(summary, "pods", time.perf_counter() - start)


_net_capacity = click.option("--net-capacity", type=click.FloatRange(min=0), default=25.0, show_default=True,
                             help="Nominal network capacity per host, Gbps (the trace has no network bandwidth; tasks request 0).")
_machines = click.option("--machines", type=click.IntRange(min=1), default=None,
                         help="Keep only the first N machines by id (numeric order: 2 before 10) and the tasks on them, for a quick look. Default: all.")


@import_group.command("google2019", short_help="Import a Google Borg 2019 cell exported from BigQuery.")
@click.argument("src", type=click.Path(path_type=Path))
@_import_out
@click.option("--at", type=click.IntRange(min=0), default=None,
              help="Snapshot time, microseconds since the trace start: the placement is each instance's latest state at or before it. "
                   "Default: the end of the latest instance_usage window (without usage: the latest instance event).")
@click.option("--cell", default=None, help="Read SRC/CELL (one folder per cell, e.g. 'a' for clusterdata_2019_a). Default: SRC itself.")
@_machines
@click.option("--cores-per-unit", type=click.FloatRange(min=0, min_open=True), default=64.0, show_default=True,
              help="Cores per 1.0 normalized CPU unit (NCU; 1.0 = the largest machine's CPU). Scales capacity, requests and usage alike.")
@click.option("--gib-per-unit", type=click.FloatRange(min=0, min_open=True), default=256.0, show_default=True,
              help="GiB per 1.0 normalized memory unit (1.0 = the largest machine's memory). Scales capacity, requests and usage alike.")
@click.option("--usage", "usage_stat", type=click.Choice(["average", "maximum"]), default="average", show_default=True,
              help="Value of each 5-minute usage window: its average, or its maximum (the p99 then bounds 5-minute peaks).")
@_net_capacity
def import_google2019_cmd(src: Path, out: Path, at: int | None, cell: str | None, machines: int | None, cores_per_unit: float,
                          gib_per_unit: float, usage_stat: str, net_capacity: float) -> None:
    """Import one cell of the Google cluster trace 2019 (machine_events, instance_events, instance_usage).

    SRC holds the tables as exported from BigQuery: JSON lines or CSV with a header,
    .gz allowed, one or more shards per table named <table>*. Machines in the cell
    at --at become hosts (one architecture per platform and capacity, in the
    trace's own fleet.toml); instances running at --at become tasks on their
    machines; each 5-minute usage window becomes one sample. CPU and memory are
    Google's normalized units, scaled to cores and GiB by --cores-per-unit and
    --gib-per-unit. Tasks on unknown machines are dropped and counted.
    """
    check_output_writable(out)
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        summary = import_google2019(src, out, at=at, cell=cell, machines=machines, cores_per_unit=cores_per_unit, gib_per_unit=gib_per_unit,
                                    usage_stat=usage_stat, net_capacity=net_capacity, progress=_stage_bars(stack))
    echo_import(summary, "instances", time.perf_counter() - start)


@import_group.command("alibaba2018", short_help="Import the Alibaba cluster-trace-v2018 (containers on machines).")
@click.argument("src", type=click.Path(path_type=Path))
@_import_out
@click.option("--at", type=click.FloatRange(min=0), default=None,
              help="Snapshot time, seconds since the trace start: each machine's and container's last record at or before it counts. "
                   "Default: the latest time_stamp of container_meta.")
@_machines
@click.option("--machine-mem", "machine_mem_gib", type=click.FloatRange(min=0, min_open=True), default=512.0, show_default=True,
              help="GiB of the largest machine (normalized mem_size 100); the trace publishes memory only normalized.")
@click.option("--status", "statuses", multiple=True,
              help="Keep only containers whose last status is this (as in container_meta); repeat for several. Default: every status.")
@_net_capacity
def import_alibaba2018_cmd(src: Path, out: Path, at: float | None, machines: int | None, machine_mem_gib: float, statuses: tuple[str, ...],
                           net_capacity: float) -> None:
    """Import the Alibaba cluster-trace-v2018 (machine_meta, container_meta, container_usage; headerless CSVs).

    SRC holds machine_meta.csv, container_meta.csv and optionally container_usage.csv
    (.csv.gz allowed), as published (columns in the order of the trace's schema.txt).
    Machines at --at become hosts (one architecture per cores/memory shape, in the
    trace's own fleet.toml; domain = failure_domain_1), containers become tasks on
    their machines (cpu_request / 100 cores, memory scaled by --machine-mem), and
    container_usage percentages (of the container's request) become cores and GiB.
    Containers on unknown machines are dropped and counted.
    """
    check_output_writable(out)
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        summary = import_alibaba2018(src, out, at=at, machines=machines, machine_mem_gib=machine_mem_gib, statuses=statuses or None,
                                     net_capacity=net_capacity, progress=_stage_bars(stack))
    echo_import(summary, "containers", time.perf_counter() - start)
