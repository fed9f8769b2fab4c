"""The ``packer`` command line: thin wrappers that read inputs, call the library and print.

Every user mistake (bad flag, bad file, unknown name) ends with a message naming
what is wrong and exit code 2; an infeasible instance exits with 3.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from packer.errors import InfeasibleError, InputError


class _Group(click.Group):
    """Turns :class:`InputError` / :class:`InfeasibleError` into a message and an exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InputError as exc:
            click.secho("error: " + str(exc).replace("\n", "\nerror: "), fg="red", err=True)
            ctx.exit(exc.exit_code)
        except InfeasibleError as exc:
            click.secho(f"infeasible: {exc}", fg="red", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.version_option(package_name="packer")
def cli(verbose: int) -> None:
    """Repack datacenter tasks onto a heterogeneous fleet.

    \b
    Pipeline: generate/import a trace -> profile (p99 usage) -> characterize
    (workload classes, sensitivity) -> solve (a verified placement plan).
    Run `packer COMMAND --help` for each step.
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def default_out(trace: Path, name: str) -> Path:
    """Where a step writes when no --out is given: ``out/<trace name>/<name>`` under the working folder."""
    return Path("out") / Path(trace).resolve().name / name


def _load_trace(path: Path, fleet: Path | None):
    from packer.io.trace import read_trace

    return read_trace(path, fleet)


def _progress_bar(label: str, length: int):
    """A click progress bar on stderr (hidden when stderr is not a terminal)."""
    return click.progressbar(length=length, label=label, file=sys.stderr, show_eta=True, show_percent=True)


_trace_arg = click.argument("trace", type=click.Path(exists=True, file_okay=False, path_type=Path))
_fleet_opt = click.option(
    "--fleet",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Fleet catalog (TOML). Default: the trace's own fleet.toml, else models/fleet.toml.",
)
_skip_opt = click.option(
    "--skip-invalid-usage",
    is_flag=True,
    help="Drop invalid usage rows (unknown task, NaN, negative, implausible) instead of failing; the counts are reported.",
)


def _sensitivity_opts(command):
    """--sensitivity-basis, --class-scores and --classes-from: how sensitivity scores are read and assigned."""
    command = click.option(
        "--classes-from", "classes_from", type=click.Path(exists=True, path_type=Path), default=None,
        help="Keep the workload classes of an earlier characterization (its folder or classes.parquet): each task takes "
             "the nearest of its class centres instead of a new K-means fit, so classes and their scores stay stable.")(command)
    command = click.option(
        "--class-scores", "class_scores", type=click.Choice(["mean", "max"]), default="mean", show_default=True,
        help="A class's scores from its measured services: their mean (the paper: tasks of a class behave alike) "
             "or their maximum (conservative).")(command)
    return click.option(
        "--sensitivity-basis", "sensitivity_basis", type=click.Choice(["need", "host"]), default="need", show_default=True,
        help="What a sensitivity score is a fraction of. need: the task's own requested need, so a host is within its "
             "limit while the summed score x share-of-host stays <= 1 (the paper's Section III-C); host: the whole "
             "host, so the summed scores stay <= 1.")(command)


def _report_skipped(skipped: dict) -> None:
    for (file, column, reason), count in skipped.items():
        click.secho(f"skipped {count} usage rows of {file}: column '{column}': {reason}", fg="yellow", err=True)


@cli.command()
@_trace_arg
@_fleet_opt
@click.option("--usage/--no-usage", "scan_usage_rows", default=True, show_default=True, help="Also check every usage row (a full scan).")
def validate(trace: Path, fleet: Path | None, scan_usage_rows: bool) -> None:
    """Check a trace folder: schema, types, ids, units, references. Exit 0 if valid, 2 if not."""
    from packer.io.usage import scan_usage

    t = _load_trace(trace, fleet)
    rows = 0
    if scan_usage_rows and t.usage_path is not None:
        total = t.usage_dataset().count_rows()
        with _progress_bar("checking usage", total) as bar:
            for chunk in scan_usage(t, progress=bar.update):
                rows += len(chunk.task)
    click.echo(f"{trace}: valid: {len(t.hosts):,} hosts, {len(t.tasks):,} tasks, {rows:,} usage rows checked; dimensions {', '.join(t.dims)}")


@cli.command()
@_trace_arg
@_fleet_opt
@click.option("-p", "--percentile", "percentiles", type=click.FloatRange(0, 100), multiple=True, default=[99.0], show_default=True, help="Percentile of windowed usage to compute; repeat for several (the first is summarized).")
@click.option("--window", "window_s", type=click.IntRange(min=1), default=60, show_default=True, help="Averaging window in seconds before the percentile is taken.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Output Parquet file. Default: out/<trace>/profiles.parquet.")
@_skip_opt
def profile(trace: Path, fleet: Path | None, percentiles: tuple[float, ...], window_s: int, out: Path | None, skip_invalid_usage: bool) -> None:
    """Per-task usage profiles: p-th percentile of windowed usage, mean, max, sample count.

    Streams the usage table (it may be larger than memory) and writes
    profiles.parquet with one row per task: samples, windows, and per dimension
    <dim>_p<NN>, <dim>_mean, <dim>_max and <dim>_request (cpu in cores on the
    task's current host, mem GiB, net and membw Gbps).
    """
    import time

    import pyarrow as pa
    import pyarrow.parquet as pq

    from packer.io.atomic import atomic_file, refuse_to_overwrite_input
    from packer.characterize.profile import profile_tasks, summarize_profiles

    out = out or default_out(trace, "profiles.parquet")
    refuse_to_overwrite_input(out, trace)
    t = _load_trace(trace, fleet)
    start = time.perf_counter()
    total = t.usage_dataset().count_rows()
    with _progress_bar("profiling usage", total) as bar:
        result = profile_tasks(t, percentiles, window_s, skip_invalid=skip_invalid_usage, progress=bar.update)
    with atomic_file(out) as tmp:
        pq.write_table(pa.Table.from_pandas(result.profiles, preserve_index=False), tmp)
    _report_skipped(result.skipped)
    q = result.percentiles[0]
    click.echo(f"profiled {len(t.tasks):,} tasks from {result.rows:,} usage rows ({window_s} s windows) in {time.perf_counter() - start:.1f} s -> {out}")
    if result.tasks_without_usage:
        click.secho(f"{result.tasks_without_usage:,} tasks have no usage rows: their statistics are NaN", fg="yellow")
    summary = summarize_profiles(result)
    if len(summary):
        click.echo(f"\nHow far p{q:g} usage sits below requests (sum over profiled tasks):")
        click.echo(f"  {'dim':<6} {'tasks':>8} {'requested':>14} {f'p{q:g} usage':>14} {'ratio':>7} {'median task':>12} {'over request':>13}")
        for dim, row in summary.iterrows():
            click.echo(
                f"  {dim:<6} {row['tasks']:>8,} {row['sum_request']:>14,.1f} {row[f'sum_p{q:g}']:>14,.1f} "
                f"{row[f'p{q:g}_of_request']:>6.0%} {row['median_ratio']:>12.0%} {row['over_request']:>13,}"
            )


@cli.command()
@_trace_arg
@click.option("--profiles", "profiles_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="profiles.parquet from `packer profile`. Default: out/<trace>/profiles.parquet if it exists, else profile the trace now.")
@click.option("--k", "k", type=click.IntRange(min=1), default=None, help="Number of classes per host type. Default: the elbow of the WCSS curve.")
@click.option("--kmax", type=click.IntRange(min=1), default=8, show_default=True, help="Largest k tried for the elbow.")
@click.option("--seed", type=int, default=0, show_default=True, help="K-means seed (results are deterministic for a seed).")
@click.option("--sensitivity", "sensitivity_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Sensitivity table (CSV). Default: models/sensitivity.csv (the paper's Table III).")
@_fleet_opt
@click.option("--infer", is_flag=True, help="Accept empty score cells in the sensitivity table and fill them by collaborative filtering.")
@_sensitivity_opts
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Output folder. Default: out/<trace>/characterization.")
def characterize(trace: Path, profiles_path: Path | None, k: int | None, kmax: int, seed: int, sensitivity_path: Path | None,
                 fleet: Path | None, infer: bool, out: Path | None, sensitivity_basis: str = "need", class_scores: str = "mean",
                 classes_from: Path | None = None) -> None:
    """Workload classes (K-means per host type), sensitivity per task, eligibility per architecture.

    Writes tasks.parquet (class, features, raw and Eq.-1-normalized sensitivity per
    architecture, eligible architectures), classes.parquet, wcss.parquet,
    report.md and wcss.png.
    """
    import time

    from packer.io.atomic import refuse_to_overwrite_input
    from packer.characterize.characterization import read_profiles, write_characterization
    from packer.characterize.characterization import characterize as run_characterize
    from packer.characterize.classes import read_reference_classes
    from packer.characterize.sensitivity import DEFAULT_SENSITIVITY

    out = out or default_out(trace, "characterization")
    refuse_to_overwrite_input(out, trace)
    t = _load_trace(trace, fleet)
    start = time.perf_counter()
    saved = default_out(trace, "profiles.parquet")
    if profiles_path is None and saved.exists():
        profiles_path = saved
    if profiles_path is not None:
        click.echo(f"using profiles {profiles_path}")
        profiles = read_profiles(profiles_path, t)
    else:
        from packer.characterize.profile import profile_tasks

        with _progress_bar("profiling usage", t.usage_dataset().count_rows()) as bar:
            profiles = profile_tasks(t, progress=bar.update).profiles
    reference = read_reference_classes(classes_from) if classes_from else None
    result = run_characterize(t, profiles, k=k, kmax=kmax, seed=seed, sensitivity=sensitivity_path or DEFAULT_SENSITIVITY,
                              profiles_source=str(profiles_path or "profiled now"), infer=infer, aggregate=class_scores,
                              basis=sensitivity_basis, reference=reference)
    write_characterization(result, out)
    tasks = result.tasks
    click.echo(f"characterized {len(tasks):,} tasks in {time.perf_counter() - start:.1f} s -> {out}")
    for (utype, _, label), group in tasks.groupby(["type", "class_level", "class"]):
        blocked = (~result.eligible[group.index.to_numpy()]).all(axis=0)
        names = [a for a, b in zip(result.normalized.archs, blocked) if b]
        click.echo(f"  type {utype:<3} {label:<12} {len(group):>8,} tasks  ineligible for all: {', '.join(names) or '-'}")
    unprofiled = int((~tasks["profiled"]).sum())
    if unprofiled:
        click.secho(f"{unprofiled:,} tasks had no usage profile: classed by their requests", fg="yellow")
    unscored = int((tasks["score_source"] == "none").sum())
    if unscored:
        click.secho(f"{unscored:,} tasks have no sensitivity scores (the table scores no class of this trace)", fg="yellow")
    if len(result.inferred):
        click.echo(f"inferred {len(result.inferred)} missing sensitivity scores (see the report)")
    click.echo(f"report: {out / 'report.md'}")


@cli.group("import")
def import_group() -> None:
    """Convert a public trace into a native trace folder (see `packer import COMMAND --help`)."""


def _echo_import_summary(summary, unit: str, seconds: float) -> None:
    """Print what an importer read, wrote, skipped and dropped."""
    click.echo(f"imported {summary.tasks:,} tasks from {summary.records:,} {unit} in {seconds:.1f} s -> {summary.out}")
    click.echo(f"hosts: {summary.hosts:,} in {len(summary.hosts_per_arch)} architectures")
    for arch, count in summary.hosts_per_arch.items():
        click.echo(f"  {arch:<28} {count:>6,}")
    click.echo(f"usage rows: {summary.usage_rows:,}" if summary.usage_rows else "usage: none (a requests-only trace)")
    if summary.merged_samples:
        click.echo(f"duplicate samples merged (same task and timestamp): {summary.merged_samples:,}")
    if summary.filtered:
        click.echo(f"left out by --phase: {summary.filtered:,} {unit}")
    for problem in summary.skipped:
        click.secho(f"skipped: {problem}", fg="yellow", err=True)
    if summary.skipped_rows:
        click.secho(f"skipped {summary.skipped_rows:,} invalid rows in all (--skip-invalid)", fg="yellow", err=True)
    if summary.dropped:
        click.secho(f"dropped {len(summary.dropped):,} tasks without a host (--drop-unfit):", fg="yellow", err=True)
        for task_id, reason in list(summary.dropped.items())[:10]:
            click.secho(f"  {task_id}: {reason}", fg="yellow", err=True)
        if len(summary.dropped) > 10:
            click.secho(f"  ... and {len(summary.dropped) - 10:,} more", fg="yellow", err=True)


_import_out = click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Output trace folder (written atomically).")
_import_skip = click.option("--skip-invalid", is_flag=True, help="Drop invalid input rows (NaN, negative, ...) instead of failing; the counts are reported.")
_import_drop = click.option("--drop-unfit", is_flag=True, help="Leave out tasks that get no host in the initial placement instead of failing; they are reported.")


@import_group.command("bitbrains")
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
    import contextlib
    import time

    from packer.io.importers import import_bitbrains

    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        bars: dict = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in bars:
                bars[stage] = stack.enter_context(_progress_bar(stage, total))
            bars[stage].update(done - bars[stage].pos)

        summary = import_bitbrains(src, out, fleet=fleet, archs=archs or None, hosts_per_arch=hosts_per_arch, slack=slack, hosts_per_rack=hosts_per_rack,
                                   net_request=net_request, skip_invalid=skip_invalid, drop_unfit=drop_unfit, progress=progress)
    _echo_import_summary(summary, "VM files", time.perf_counter() - start)


@import_group.command("openb")
@click.argument("src", type=click.Path(path_type=Path))
@_import_out
@click.option("--pods", default="default", show_default=True, help="Pod list: 'default', 'gpuspec33' (files in SRC) or a CSV path.")
@click.option("--phase", "phases", multiple=True, default=["Running"], show_default=True, help="Keep only pods in this pod_phase (Running, Pending, Failed, Succeeded); repeat for several; 'all' keeps every pod.")
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
    import time

    from packer.io.importers import import_openb

    start = time.perf_counter()
    summary = import_openb(src, out, pods=pods, phases=None if "all" in phases else phases, gpu_cost=gpu_cost, net_capacity=net_capacity, skip_invalid=skip_invalid, drop_unfit=drop_unfit)
    _echo_import_summary(summary, "pods", time.perf_counter() - start)


@cli.command()
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
    from packer.io.generate import check_arguments, generate_trace, sample_count

    check_arguments(tasks, hosts, days, interval)
    with _progress_bar("generating usage", tasks * sample_count(days, interval)) as bar:
        summary = generate_trace(out, tasks, hosts, days, interval, seed, fleet, progress=bar.update)
    click.echo(
        f"wrote {summary.path}: {summary.tasks:,} tasks in {summary.jobs:,} jobs on {summary.hosts:,} hosts "
        f"({summary.empty_hosts:,} empty), {summary.usage_rows:,} usage rows; fleet CPU requested {summary.cpu_requested:.1%}, "
        f"used {summary.cpu_utilization:.1%} of cores; {summary.elapsed_s:.1f} s"
    )


@cli.command()
@_trace_arg
@click.argument("plan", type=click.Path(exists=True, file_okay=False, path_type=Path))
def verify(trace: Path, plan: Path) -> None:
    """Check a plan folder against its trace, recomputing everything from the inputs.

    Rebuilds the problem from TRACE and the options recorded in PLAN/summary.json
    (profiles and characterization are recomputed), then checks the placement, the
    rules (capacity, eligibility, pins, spread, move budget), the move list and its
    order, and every number of the summary.

    \b
    Exit codes: 0 the plan is valid and its summary true; 1 a check failed;
    2 an input (trace, plan folder, recorded fleet/presets) cannot be read.
    """
    from packer.plan.verify import verify_plan

    report = verify_plan(trace, plan)
    for note in report.notes:
        click.secho(f"note: {note}", fg="yellow")
    for check in report.checks:
        mark = click.style("PASS", fg="green") if check.passed else click.style("FAIL", fg="red")
        click.echo(f"{mark} {check.name}: {check.messages[0] if check.messages else ''}")
        for message in check.messages[1:]:
            click.echo(f"     {message}")
    failed = sum(not c.passed for c in report.checks)
    if not report.plan_valid:
        click.secho(f"{plan}: INVALID plan ({failed} of {len(report.checks)} checks failed)", fg="red")
    elif failed:
        click.secho(f"{plan}: the plan is valid but its summary is false ({failed} of {len(report.checks)} checks failed)", fg="red")
    else:
        click.echo(f"{plan}: valid; summary verified")
    if failed:
        sys.exit(1)


class _MaxMoves(click.ParamType):
    name = "N|unlimited"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value is None:
            return value
        if str(value).lower() in ("unlimited", "none", "inf"):
            return None
        try:
            n = int(value)
        except ValueError:
            self.fail(f"expected a number of moves or 'unlimited', got {value!r}", param, ctx)
        if n < 0:
            self.fail(f"must be >= 0 or 'unlimited', got {n}", param, ctx)
        return n


def _positive_seconds(ctx, param, value):
    if value is not None and value <= 0:
        raise click.BadParameter(f"must be > 0 seconds, got {value:g}")
    return value


@cli.command()
@_trace_arg
@click.option("--goal", type=click.Choice(["tco", "hosts", "fair"]), default="tco", show_default=True,
              help="Primary goal: summed cost of occupied hosts (tco), their number (hosts), or fair: raise the lowest "
                   "relative performance, then the next (leximin, Carrera et al.), with the fewest moves.")
@click.option("--min-rp", type=float, default=None,
              help="Guard: every task keeps relative performance >= X (0 = at goal; a task already below X gets no worse).")
@click.option("--max-new-at-risk", type=click.IntRange(min=0), default=None,
              help="Guard: at most N more tasks at risk of interference (on hosts whose summed sensitivity exceeds 1, "
                   "Eq. 4) than now; 0 frees cost without adding SLO risk. Needs --config p99-sens; engine solver.")
@click.option("--config", "config", default="p99", show_default=True,
              help="Configuration preset (Table IV): baseline, p99-cpu, p99-mem, p99, p99-sens.")
@click.option("--max-moves", type=_MaxMoves(), default="400", show_default=True,
              help="At most this many tasks leave their host; 'unlimited' for a full repack (capacity planning).")
@click.option("--time-limit", type=float, default=60.0, show_default=True, callback=_positive_seconds, help="Seconds; the best plan found by then is returned.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed; a solve is deterministic for a seed.")
@click.option("--solver", type=click.Choice(["auto", "engine", "cpsat", "cbc", "highs", "baseline-random", "baseline-least-loaded", "baseline-ffd",
                                           "baseline-paragon", "baseline-tarcil"]), default="auto", show_default=True,
              help="auto: the exact MILP (CBC) up to 200 tasks, the scalable engine above; cpsat/cbc/highs: exact model of the whole instance; "
                   "baseline-*: a comparison policy (random, least-loaded, first-fit decreasing, Paragon greedy, Tarcil sampling) under the same move budget.")
@click.option("--sensitivity-weight", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Weight of summed sensitivity excess over 1 (Eq. 4) against cost units: the TCO-vs-SLO knob (p99-sens).")
@click.option("--fragmentation-weight", type=click.FloatRange(min=0), default=0.01, show_default=True,
              help="Weight of fragmentation (Eq. 2), per host's worth of unused cpu and memory.")
@click.option("--move-weight", type=click.FloatRange(min=0), default=1e-4, show_default=True, help="Cost of one move (the last tie-break).")
@click.option("--spread-host", type=click.IntRange(min=1), default=None, help="At most N tasks of one job per host (on hosts that gain tasks).")
@click.option("--spread-domain", type=click.IntRange(min=1), default=None, help="At most N tasks of one job per failure domain (on domains that gain tasks).")
@click.option("--profiles", "profiles_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Reuse a profiles.parquet from `packer profile` (p99, 60 s windows). Default: profile the trace now.")
@click.option("--sensitivity", "sensitivity_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Sensitivity table (default models/sensitivity.csv); used by p99-sens.")
@_sensitivity_opts
@_fleet_opt
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Plan folder. Default: out/<trace>/plan-<config>.")
def solve(trace: Path, goal: str, config: str, max_moves: int | None, time_limit: float, seed: int, solver: str,
          sensitivity_weight: float, fragmentation_weight: float, move_weight: float, spread_host: int | None,
          spread_domain: int | None, profiles_path: Path | None, sensitivity_path: Path | None, fleet: Path | None, out: Path | None,
          min_rp: float | None = None, max_new_at_risk: int | None = None, sensitivity_basis: str = "need", class_scores: str = "mean",
          classes_from: Path | None = None) -> None:
    """Compute a placement plan: free hosts and cost within a move budget.

    \b
    Writes a plan folder (atomically):
      placement.parquet  task_id, host_id
      moves.parquet      step, task_id, from_host, to_host, via_temporary, temp_host
                         (apply in step order: no host ever exceeds its capacity)
      summary.json       configuration, status, objective terms, bound, gap, before/after metrics
      report.md          the same for a person
    Status is optimal, feasible (with the gap to a bound) or infeasible (exit 3,
    tasks named, no plan). Ctrl-C stops the search and keeps the best plan so far.
    Check any plan independently with `packer verify TRACE PLAN`.
    """
    import time

    from packer.io.atomic import refuse_to_overwrite_input
    from packer.characterize.characterization import read_profiles
    from packer.model.metrics import evaluate
    from packer.plan.plan import PlanContext, fleet_choice, write_plan
    from packer.io.presets import get_preset
    from packer.model.problem import Weights
    from packer.solvers.run import problem_from_context, run_solver

    preset = get_preset(config)
    out = out or default_out(trace, f"plan-{preset.name}")
    refuse_to_overwrite_input(out, trace)
    started = time.perf_counter()
    t = _load_trace(trace, fleet)
    context = PlanContext(
        trace=str(trace), fleet=fleet_choice(fleet, trace), config=preset.name, sensitivity=str(sensitivity_path) if sensitivity_path else None,
        max_moves=max_moves, spread_host=spread_host, spread_domain=spread_domain,
        weights=Weights(goal=goal, fragmentation=fragmentation_weight, sensitivity=sensitivity_weight, moves=move_weight, min_rp=min_rp,
                        max_new_at_risk=max_new_at_risk),
        solver=solver, time_limit_s=time_limit, seed=seed,
        sensitivity_basis=sensitivity_basis, class_scores=class_scores, classes_from=str(classes_from) if classes_from else None,
    )
    profiles = read_profiles(profiles_path, t) if profiles_path else None
    if profiles is None and (preset.percentiles or preset.sensitivity) and t.usage_path is not None:
        with _progress_bar("profiling usage", t.usage_dataset().count_rows()) as bar:
            problem = problem_from_context(t, preset, context, progress=bar.update)
    else:
        problem = problem_from_context(t, preset, context, profiles)
    click.echo(f"{preset.title}: {problem.n_tasks:,} tasks, {problem.n_hosts:,} hosts, goal {goal}, "
               f"max moves {'unlimited' if max_moves is None else f'{max_moves:,}'}, solver {solver}, time limit {time_limit:g} s", err=True)

    live = sys.stderr.isatty()

    shown = {"phase": None, "at": -1e9}

    def show(p) -> None:
        # A log (not a terminal) gets a line per phase and at most one every 5 s within a phase.
        if not live and p.phase == shown["phase"] and p.elapsed_s - shown["at"] < 5.0:
            return
        shown.update(phase=p.phase, at=p.elapsed_s)
        bound = "" if p.bound is None else f"  bound {p.bound:,.2f}"
        line = f"  [{p.elapsed_s:6.1f} s] {p.phase:<22} objective {p.objective:,.2f}{bound}  hosts {p.hosts:,}  moves {p.moves:,}"
        click.echo(("\r" + line) if live else line, err=True, nl=not live)

    result = run_solver(problem, solver, time_limit, seed, progress=show)
    if live:
        click.echo("", err=True)
    if result.status == "infeasible":
        names = ", ".join(result.infeasible_tasks[:10]) + (" ..." if len(result.infeasible_tasks) > 10 else "")
        from packer.errors import InfeasibleError

        raise InfeasibleError(f"{len(result.infeasible_tasks)} task(s) fit no host under config {preset.name}: {names}; no plan written",
                              result.infeasible_tasks)
    if result.status == "timeout":
        click.secho(f"timed out after {time_limit:g} s without a feasible placement; no plan written", fg="red", err=True)
        sys.exit(4)
    write_plan(out, problem, result, context, fleet=t.fleet)
    _echo_solve_summary(problem, result, t.fleet, out, evaluate(problem, problem.current), evaluate(problem, result.assign), time.perf_counter() - started)


def _echo_solve_summary(problem, result, fleet, out: Path, before, after, seconds: float) -> None:
    import numpy as np

    archs = problem.arch_names
    occ_before = np.bincount(problem.host_arch[np.unique(problem.current)], minlength=len(archs))
    occ_after = np.bincount(problem.host_arch[np.unique(result.assign)], minlength=len(archs))
    types = fleet.archs["type"].reindex(archs).to_numpy()
    cost = fleet.archs["cost"].reindex(archs).to_numpy()
    click.echo(f"\n{'architecture':<14} {'type':>4} {'hosts before':>13} {'after':>8} {'freed':>8} {'TCO before':>11} {'after':>10}")
    for a, name in enumerate(archs):
        if occ_before[a] or occ_after[a]:
            click.echo(f"{name:<14} {types[a]:>4} {occ_before[a]:>13,} {occ_after[a]:>8,} {occ_before[a] - occ_after[a]:>8,} "
                       f"{occ_before[a] * cost[a]:>11,.1f} {occ_after[a] * cost[a]:>10,.1f}")
    for utype in dict.fromkeys(types):
        sel = types == utype
        click.echo(f"{'Type ' + str(utype):<14} {'':>4} {occ_before[sel].sum():>13,} {occ_after[sel].sum():>8,} "
                   f"{(occ_before[sel] - occ_after[sel]).sum():>8,} {(occ_before[sel] * cost[sel]).sum():>11,.1f} {(occ_after[sel] * cost[sel]).sum():>10,.1f}")
    saved = before.tco - after.tco
    click.echo(f"\nTCO {before.tco:,.1f} -> {after.tco:,.1f} cost units ({saved / before.tco:.1%} saved); hosts {before.hosts:,} -> {after.hosts:,}; "
               f"{after.moves:,} moves")
    if problem.sens_dims:
        click.echo(f"tasks at risk of interference (host sensitivity sum > 1, '{problem.sens_basis}' basis): "
                   f"{before.tasks_at_risk:,} -> {after.tasks_at_risk:,}")
    from packer.model.metrics import rp_distribution
    from packer.model.rpf import relative_performance

    rp = [rp_distribution(relative_performance(problem, a)) for a in (problem.current, result.assign)]
    click.echo(f"relative performance (0 = at goal): min {rp[0]['min']:.3f} -> {rp[1]['min']:.3f}; p5 {rp[0]['p5']:.3f} -> {rp[1]['p5']:.3f}; "
               f"median {rp[0]['median']:.3f} -> {rp[1]['median']:.3f}; tasks below 0 {rp[0]['below_zero']:,} -> {rp[1]['below_zero']:,}")
    detail = result.stats.get("bound", {})
    if result.status == "optimal":
        status = "optimal (proven)"
    elif "freeable_bound" in detail:
        share = detail.get("share_of_bound")
        status = f"feasible: freed {detail['freed']:,.1f} of at most {detail['freeable_bound']:,.1f} freeable ({'n/a' if share is None else f'{share:.1%}'} of the bound)"
    elif "primary_lower_bound" in detail:
        gap = detail.get("primary_gap")
        status = f"feasible: {'TCO' if problem.weights.goal == 'tco' else 'hosts'} within {'n/a' if gap is None else f'{gap:.1%}'} of the lower bound {detail['primary_lower_bound']:,.1f}"
    else:
        gap = result.gap
        status = f"feasible (gap {'unknown' if gap is None else f'{gap:.2%}'} to the solver's bound)"
    if result.stats.get("interrupted"):
        status += "; interrupted (best plan so far)"
    elif result.stats.get("timed_out"):
        status += "; stopped at the time limit"
    click.echo(f"status: {status}")
    click.echo(f"plan: {out} ({seconds:.1f} s); check it with: packer verify {problem_trace_hint(out)} {out}")


def problem_trace_hint(out: Path) -> str:
    import json

    try:
        return json.loads((out / "summary.json").read_text())["context"]["trace"]
    except (OSError, KeyError, ValueError):
        return "TRACE"


@cli.command()
@_trace_arg
@click.option("--config", "configs", multiple=True, default=["baseline", "p99-cpu", "p99-mem", "p99", "p99-sens"], show_default=True,
              help="Configurations (Table IV presets); repeat for several.")
@click.option("--weights", default="0,0.1,0.3,1,3,10", show_default=True,
              help="Comma-separated ladder of sensitivity weights; only configurations with sensitivity (p99-sens) are solved once per weight.")
@click.option("--refine", type=click.IntRange(min=0), default=5, show_default=True,
              help="Extra weights solved per configuration with sensitivity, each between the two ladder points farthest "
                   "apart on TCO vs tasks at risk, so the curve is dense where the trade-off changes.")
@click.option("--baseline", "baselines", multiple=True, default=["baseline-random", "baseline-least-loaded", "baseline-ffd", "baseline-paragon", "baseline-tarcil"],
              show_default=True, help="Baseline policies to compare; repeat for several.")
@click.option("--no-baselines", is_flag=True, help="Run no baseline policy.")
@click.option("--no-new-risk/--no-no-new-risk-point", "no_new_risk", default=True, show_default=True,
              help="Also solve each configuration with sensitivity at weight 0 under --max-new-at-risk 0 (engine): "
                   "the cost the budget frees without putting one more task at risk.")
@click.option("--baseline-config", default="p99-sens", show_default=True,
              help="Configuration the baseline policies run on (baseline on a trace without usage).")
@click.option("--max-moves", type=_MaxMoves(), default="400", show_default=True, help="Move budget of every solve; 'unlimited' for full repacks.")
@click.option("--time-limit", type=float, default=60.0, show_default=True, callback=_positive_seconds, help="Seconds per optimizer solve.")
@click.option("--solver", type=click.Choice(["auto", "engine", "cpsat", "cbc", "highs"]), default="auto", show_default=True, help="The optimizer (see `packer solve`).")
@click.option("--goal", type=click.Choice(["tco", "hosts"]), default="tco", show_default=True, help="Primary goal of the optimizer.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed of every solve.")
@click.option("--sensitivity", "sensitivity_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Sensitivity table (default models/sensitivity.csv).")
@_sensitivity_opts
@_fleet_opt
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Sweep folder. Default: out/<trace>/sweep.")
@click.option("--report/--no-report", "with_report", default=False, show_default=True, help="Also write the sweep's report (`packer report`).")
def sweep(trace: Path, configs: tuple[str, ...], weights: str, baselines: tuple[str, ...], no_baselines: bool, no_new_risk: bool, baseline_config: str,
          max_moves: int | None, time_limit: float, solver: str, goal: str, seed: int, sensitivity_path: Path | None, fleet: Path | None,
          out: Path | None, with_report: bool, sensitivity_basis: str = "need", class_scores: str = "mean",
          classes_from: Path | None = None, refine: int = 5) -> None:
    """TCO vs SLO: Table IV's configurations, a ladder of sensitivity weights and the baselines under one move budget.

    \b
    Profiles and characterizes the trace once, solves each distinct problem once
    (a configuration without sensitivity stands for every weight), and writes a
    sweep folder (atomically):
      plans/<point>/   one plan folder per solve (check with `packer verify`)
      sweep.parquet    the TCO-vs-SLO table (also sweep.csv)
      sweep.json       Pareto fronts, baseline dominance check, timings
    Render it with `packer report SWEEP`. Exit 1 when a solve failed (the sweep is
    still written; the point has status "error").
    """
    import time

    from packer.io.atomic import refuse_to_overwrite_input
    from packer.report.sweep import SweepOptions, run_sweep

    try:
        ladder = tuple(float(w) for w in weights.split(",") if w.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {weights!r}", param_hint="--weights") from None
    out = out or default_out(trace, "sweep")
    refuse_to_overwrite_input(out, trace)
    options = SweepOptions(configs=configs, weights=ladder, baselines=() if no_baselines else baselines, baseline_config=baseline_config,
                           max_moves=max_moves, time_limit_s=time_limit, solver=solver, seed=seed, goal=goal,
                           fleet=str(fleet) if fleet else None, sensitivity=str(sensitivity_path) if sensitivity_path else None,
                           no_new_risk=no_new_risk, sensitivity_basis=sensitivity_basis, class_scores=class_scores,
                           classes_from=str(classes_from) if classes_from else None, refine=refine)
    started = time.perf_counter()
    t = _load_trace(trace, fleet)
    live = sys.stderr.isatty()

    def show(p) -> None:
        label = f"[{p.step:>2}/{p.steps}] {p.point.name:<24}"
        if p.row is None:
            if live:
                click.echo(f"\r{label} {p.point.solver} ...", err=True, nl=False)
            return
        r = p.row
        line = f"{label} {r['status']:<9} {r['wall_s']:7.1f} s"
        if "tco" in r:
            line += f"  TCO {r['tco']:>10,.1f}  hosts {r['hosts']:>7,}  at risk {r['tasks_at_risk']:>7,}  moves {r['moves']:>5,}"
        click.echo(("\r" + line) if live else line, err=True)

    if t.usage_path is not None and any(c != "baseline" for c in configs):
        with _progress_bar("profiling usage", t.usage_dataset().count_rows()) as bar:
            result = run_sweep(trace, out, options, progress=show, usage_progress=bar.update)
    else:
        result = run_sweep(trace, out, options, progress=show)
    _echo_sweep_summary(result, time.perf_counter() - started)
    if with_report:
        from packer.report.report import write_report

        files = write_report(out)
        click.echo(f"report: {files.html} and {files.markdown}")
    if result.meta.get("errors"):
        sys.exit(1)


def _echo_sweep_summary(result, seconds: float) -> None:
    table, meta = result.table, result.meta
    click.echo(f"\n{'point':<24} {'solver':<22} {'status':<9} {'TCO':>10} {'hosts':>7} {'at risk':>8} {'interference':>12} {'moves':>6} {'wall s':>7}  front")
    for _, r in table.iterrows():
        placed = r["tco"] == r["tco"]
        nums = (f"{r['tco']:>10,.1f} {r['hosts']:>7,.0f} {r['tasks_at_risk']:>8,.0f} {r['interference']:>12,.2f} {r['moves']:>6,.0f}" if placed
                else f"{'-':>10} {'-':>7} {'-':>8} {'-':>12} {'-':>6}")
        front = ("risk " if r["pareto"] else "") + ("interf" if r["pareto_interference"] else "")
        click.echo(f"{r['point']:<24} {r['solver']:<22} {r['status']:<9} {nums} {r['wall_s']:>7.1f}  {front}")
    cur = meta["current"]
    if meta.get("sensitivity_basis"):
        click.echo(f"(tasks at risk on the '{meta['sensitivity_basis']}' sensitivity basis, measured on the {meta['yardstick']} yardstick)")
    click.echo(f"{'current placement':<24} {'':<22} {'':<9} {cur['tco']:>10,.1f} {cur['hosts']:>7,} {cur['tasks_at_risk']:>8,} {cur['interference']:>12,.2f} {0:>6}")
    for name, why in meta["skipped"].items():
        click.secho(f"skipped {name}: {why}", fg="yellow")
    for name, message in meta.get("errors", {}).items():
        click.secho(f"FAILED {name}: {message} (traceback with -v)", fg="red", err=True)
    for key, risk in (("dominance", "tasks at risk"), ("dominance_interference", "interference")):
        checks = [d for d in meta[key] if d["dominated"] is not None]
        if not checks:
            continue
        beaten = sum(bool(d["dominated"]) for d in checks)
        click.echo(f"\noptimizer dominates {beaten} of {len(checks)} baselines on TCO and {risk} (lower TCO, no more {risk}):")
        for d in meta[key]:
            verdict = "no plan" if d["dominated"] is None else (f"dominated by {d['by']}" if d["dominated"] else "NOT dominated")
            click.echo(f"  {d['baseline']:<22} {verdict}")
    click.echo(f"\n{meta['grid_points']} grid points, {meta['solves']} solves ({meta['solves_reused']} reused); "
               f"profile {meta['timings'].get('profile_s', 0):.1f} s, characterize {meta['timings'].get('characterize_s', 0):.1f} s, "
               f"solves {meta['timings']['solves_s']:.1f} s; total {seconds:.1f} s")
    click.echo(f"sweep: {result.path}; render it with: packer report {result.path}")


@cli.command()
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Report folder. Default: SOURCE/report.")
def report(source: Path, out: Path | None) -> None:
    """Review report of a plan or sweep folder: report.html (self-contained) and report.md with PNG plots.

    From a sweep: the TCO-vs-SLO Pareto plot, the baseline dominance check, the
    paper comparison (when Baseline, P99 and P99 Sens were swept) and the paper's
    Figs. 7-12 with the tables behind them. From a plan: the same figures for one plan.
    """
    from packer.report.report import write_report

    files = write_report(source, out)
    click.echo(f"{files.kind} report: {files.html} and {files.markdown}")


def main() -> None:
    cli(prog_name="packer")
