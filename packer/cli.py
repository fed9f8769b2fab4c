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
    from packer.trace import read_trace

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


def _report_skipped(skipped: dict) -> None:
    for (file, column, reason), count in skipped.items():
        click.secho(f"skipped {count} usage rows of {file}: column '{column}': {reason}", fg="yellow", err=True)


@cli.command()
@_trace_arg
@_fleet_opt
@click.option("--usage/--no-usage", "scan_usage_rows", default=True, show_default=True, help="Also check every usage row (a full scan).")
def validate(trace: Path, fleet: Path | None, scan_usage_rows: bool) -> None:
    """Check a trace folder: schema, types, ids, units, references. Exit 0 if valid, 2 if not."""
    from packer.usage import scan_usage

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

    from packer.atomic import atomic_file, refuse_to_overwrite_input
    from packer.profile import profile_tasks, summarize_profiles

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


def main() -> None:
    cli(prog_name="packer")
