"""Commands that compare many plans: sweep (TCO vs SLO over configurations, weights and baselines), report."""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import click
from click.core import ParameterSource

from packer.cli.options import (LazyProgressBar, PresetName, default_out, fleet_opt, positive_seconds, rule_options, sensitivity_opts,
                                trace_arg)
from packer.cli.output import echo_sweep, echo_sweep_stopped, sweep_progress
from packer.cli.signals import exit_on_signals
from packer.cli.workers import executor_for, workers_opt
from packer.io.atomic import refuse_to_overwrite_input
from packer.io.output_check import check_output_writable
from packer.io.trace import read_trace
from packer.io.usage import usage_work
from packer.model.build import RuleOptions
from packer.report.report import REPORT_DIR, write_report
from packer.report.sweep import DEFAULT_WEIGHTS, TABLE_IV_CONFIGS, SweepOptions, run_sweep, weight_label
from packer.solvers.baselines import BASELINES
from packer.solvers.run import SOLVERS


def _ladder(weights: str) -> tuple[float, ...]:
    """``--weights 0,0.1,1`` as numbers."""
    try:
        ladder = tuple(float(w) for w in weights.split(",") if w.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {weights!r}", param_hint="--weights") from None
    if not all(math.isfinite(w) and w >= 0 for w in ladder):
        raise click.BadParameter(f"weights must be finite numbers >= 0, got {weights!r}", param_hint="--weights")
    return ladder


@click.command(short_help="TCO vs SLO over configurations, weights and baselines.")
@trace_arg
@click.option("--config", "configs", type=PresetName(), multiple=True, default=list(TABLE_IV_CONFIGS), show_default=True,
              help="Configurations (Table IV presets); repeat for several.")
@click.option("--weights", default=",".join(weight_label(w) for w in DEFAULT_WEIGHTS), show_default=True,
              help="Comma-separated ladder of sensitivity weights (cost units per unit of Eq. 4 excess, as solve's "
                   "--sensitivity-weight); only configurations with sensitivity (p99-sens) are solved once per weight.")
@click.option("--refine", type=click.IntRange(min=0), default=5, show_default=True,
              help="Extra weights solved per configuration with sensitivity, each between the two ladder points farthest "
                   "apart on TCO vs tasks at risk, so the curve is dense where the trade-off changes.")
@click.option("--baseline", "baselines", type=click.Choice(BASELINES), multiple=True, default=list(BASELINES), show_default=True,
              help="Baseline policies to compare; repeat for several.")
@click.option("--no-baselines", is_flag=True, help="Run no baseline policy.")
@click.option("--no-new-risk", "old_no_new_risk", is_flag=True, hidden=True)  # the old spellings, still accepted
@click.option("--no-no-new-risk-point", "old_no_point", is_flag=True, hidden=True)
@click.option("--risk-free-point/--no-risk-free-point", "no_new_risk", default=True, show_default=True,
              help="Also solve each configuration with sensitivity at weight 0 under --max-new-at-risk 0 (engine): "
                   "the cost the budget frees without putting one more task at risk.")
@click.option("--baseline-config", type=PresetName(), default="p99-sens", show_default=True,
              help="Configuration the baseline policies run on (baseline on a trace without usage).")
@rule_options
@click.option("--time-limit", type=float, default=60.0, show_default=True, callback=positive_seconds, help="Seconds per optimizer solve.")
@click.option("--solver", type=click.Choice([s for s in SOLVERS if s not in BASELINES]), default="auto", show_default=True,
              help="The optimizer (see `packer solve`).")
@click.option("--goal", type=click.Choice(["tco", "hosts"]), default="tco", show_default=True, help="Primary goal of the optimizer.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed of every solve.")
@click.option("--deterministic", is_flag=True,
              help="Count --time-limit as work in every solve (as `packer solve --deterministic`): the same seed gives the same sweep.")
@workers_opt
@click.option("--sensitivity", "sensitivity_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Sensitivity table (default models/sensitivity.csv).")
@sensitivity_opts
@fleet_opt
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Sweep folder. Default: out/<trace>/sweep.")
@click.option("--report/--no-report", "with_report", default=False, show_default=True, help="Also write the sweep's report (`packer report`).")
@click.option("--resume", is_flag=True,
              help="Reuse the plans an earlier run of this same sweep (e.g. an interrupted one) left in --out, and solve only the "
                   "points it did not finish. Refused when --out holds a sweep run with other options.")
def sweep(trace: Path, configs: tuple[str, ...], weights: str, refine: int, baselines: tuple[str, ...], no_baselines: bool, no_new_risk: bool,
          old_no_new_risk: bool, old_no_point: bool,
          baseline_config: str, rules: RuleOptions, time_limit: float, solver: str, goal: str, seed: int, deterministic: bool, workers: int,
          scheduler: str | None, sensitivity_path: Path | None,
          sensitivity_basis: str, class_scores: str, classes_from: Path | None, fleet: Path | None, out: Path | None, with_report: bool,
          resume: bool) -> None:
    """TCO vs SLO: Table IV's configurations, a ladder of sensitivity weights and the baselines under one move budget.

    \b
    Profiles and characterizes the trace once, solves each distinct problem once
    (a configuration without sensitivity stands for every weight), and writes a
    sweep folder (atomically):
      plans/<point>/   one plan folder per solve (check with `packer verify`)
      sweep.parquet    the TCO-vs-SLO table (also sweep.csv)
      sweep.json       Pareto fronts, baseline dominance check, timings
    Render it with `packer report SWEEP`. The rules (move budget, spread, guards,
    anti-affinity, --constraints) hold in every solve. Exit 1 when a solve failed
    (the sweep is still written; the point has status "error"). With --workers N,
    N points are solved at once (a ladder's refinements once its points are done);
    the table is the one a serial sweep writes.
    """
    ladder = _ladder(weights)
    if no_baselines and click.get_current_context().get_parameter_source("baselines") is not ParameterSource.DEFAULT:
        raise click.UsageError("--baseline and --no-baselines contradict each other; give one")
    no_new_risk = (no_new_risk or old_no_new_risk) and not old_no_point
    out = out or default_out(trace, "sweep")
    refuse_to_overwrite_input(out, trace)
    check_output_writable(out)
    options = SweepOptions(
        rules=rules, configs=configs, weights=ladder, baselines=() if no_baselines else baselines, baseline_config=baseline_config,
        time_limit_s=time_limit, solver=solver, seed=seed, goal=goal, fleet=str(fleet) if fleet else None,
        sensitivity=str(sensitivity_path) if sensitivity_path else None, no_new_risk=no_new_risk, sensitivity_basis=sensitivity_basis,
        class_scores=class_scores, classes_from=str(classes_from) if classes_from else None, refine=refine, deterministic=deterministic)
    started = time.perf_counter()
    with exit_on_signals(echo_sweep_stopped) as written:
        t = read_trace(trace, fleet)
        # The sweep profiles usage only when a configuration needs profiles, so the bar opens on the first rows read.
        with LazyProgressBar("profiling usage", lambda: usage_work(t)) as on_usage, executor_for(workers, scheduler) as executor:
            written.value = result = run_sweep(trace, out, options, progress=sweep_progress(), usage_progress=on_usage, resume=resume,
                                               executor=executor)
        echo_sweep(result, time.perf_counter() - started)
    if with_report:
        files = write_report(out)
        click.echo(f"report: {files.html} and {files.markdown}")
    if result.meta.get("errors"):
        sys.exit(1)


@click.command(short_help="Review report (HTML, Markdown, plots) of a plan or sweep.")
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Report folder. Default: SOURCE/report.")
def report(source: Path, out: Path | None) -> None:
    """Review report of a plan or sweep folder: report.html (self-contained) and report.md with PNG plots.

    From a sweep: the TCO-vs-SLO Pareto plot, the baseline dominance check, the
    paper comparison (when Baseline, P99 and P99 Sens were swept) and the paper's
    Figs. 7-12 with the tables behind them. From a plan: the same figures for one plan.
    """
    check_output_writable(out or source / REPORT_DIR)
    files = write_report(source, out)
    click.echo(f"{files.kind} report: {files.html} and {files.markdown}")
