"""Commands that make and check a plan: solve, verify."""
from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import click

from packer import api
from packer.characterization.characterize import read_profiles
from packer.characterization.profile import recorded_profiling
from packer.cli.options import (LazyProgressBar, PresetName, default_out, fleet_opt, positive_seconds, rule_options,
                                sensitivity_opts, trace_arg)
from packer.cli.output import echo_plan, echo_stopped, echo_verify, solve_progress
from packer.cli.signals import exit_on_signals
from packer.cli.workers import executor_for, workers_opt
from packer.io.atomic import refuse_to_overwrite_input
from packer.io.output_check import check_output_writable
from packer.io.presets import get_preset
from packer.io.trace import read_trace
from packer.io.usage import usage_work
from packer.model.build import GOALS, GoalWeights, RuleOptions
from packer.solvers.run import SOLVERS


@click.command(short_help="Compute a placement plan within a move budget.")
@trace_arg
@click.option("--goal", type=click.Choice(GOALS), default="tco", show_default=True,
              help="Primary goal: summed cost of occupied hosts (tco), their number (hosts), or fair: raise the lowest "
                   "relative performance, then the next (leximin, Carrera et al.), with the fewest moves.")
@click.option("--config", "config", type=PresetName(), default="p99", show_default=True, help="Configuration preset (Table IV).")
@rule_options
@click.option("--time-limit", type=float, default=60.0, show_default=True, callback=positive_seconds,
              help="Seconds; the best plan found by then is returned. A full repack first needs one complete plan, "
                   "which on a large pool takes longer than a short limit (about 12 s for 37,000 tasks on 2 cores).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Random seed. With --deterministic the same seed gives the same plan on any machine load; without it "
                   "the time limit is wall-clock time and a busy machine may stop the search elsewhere and return another plan.")
@click.option("--deterministic", is_flag=True,
              help="Count --time-limit as work (nominal seconds: CP-SAT's deterministic time, fixed charges per greedy step) "
                   "rather than wall-clock time, so --seed reproduces the plan byte for byte. The run may take longer or "
                   "shorter than the limit in wall-clock time (at most 5x it; a run cut there is marked not reproducible).")
@click.option("--solver", type=click.Choice(SOLVERS), default="auto", show_default=True,
              help="auto: up to 200 tasks the engine, then the exact MILP (HiGHS) started from its plan, keeping the better; the engine "
                   "above; engine: the scalable engine; cpsat/cbc/highs: exact model of the whole instance (cbc up to 30,000 task-host pairs); "
                   "baseline-*: a comparison policy (random, least-loaded, first-fit decreasing, Paragon greedy, Tarcil sampling) under the same move budget.")
@click.option("--sensitivity-weight", type=click.FloatRange(min=0), default=GoalWeights().sensitivity, show_default=True,
              help="Cost units per unit of summed sensitivity excess over 1 (Eq. 4): the TCO-vs-SLO knob (p99-sens).")
@click.option("--fragmentation-weight", type=click.FloatRange(min=0), default=GoalWeights().fragmentation, show_default=True,
              help="Cost units per host's worth of unused cpu and memory (fragmentation, Eq. 2).")
@click.option("--move-weight", type=click.FloatRange(min=0), default=GoalWeights().moves, show_default=True, help="Cost units per moved task (the last tie-break).")
@click.option("--profiles", "profiles_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Reuse a profiles.parquet from `packer profile` (p99, 60 s windows). Default: profile the trace now.")
@click.option("--sensitivity", "sensitivity_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Sensitivity table (default models/sensitivity.csv); used by p99-sens.")
@sensitivity_opts
@fleet_opt
@click.option("--start", "start", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Plan folder to start the search from instead of the current placement (e.g. a 400-move plan before a full "
                   "repack, or yesterday's plan): the engine and auto never return a worse plan. Its placement must keep this "
                   "solve's rules, the move budget included.")
@workers_opt
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Plan folder. Default: out/<trace>/plan-<config>.")
def solve(trace: Path, goal: str, config: str, rules: RuleOptions, time_limit: float, seed: int, deterministic: bool, solver: str,
          sensitivity_weight: float, fragmentation_weight: float, move_weight: float, profiles_path: Path | None,
          sensitivity_path: Path | None, fleet: Path | None, out: Path | None, sensitivity_basis: str, class_scores: str,
          classes_from: Path | None, start: Path | None, workers: int, scheduler: str | None) -> None:
    """Compute a placement plan: free hosts and cost within a move budget.

    \b
    Writes a plan folder (atomically):
      placement.parquet  task_id, host_id
      moves.parquet      step, task_id, from_host, to_host, via_temporary, temp_host
                         (apply in step order: no host ever exceeds its capacity)
      summary.json       configuration, status, objective terms, bound, gap, before/after metrics
      report.md          the same for a person
    Status is optimal, feasible (with the gap to a bound) or infeasible (exit 3,
    tasks named, no plan); an exact solver that finds no placement in time exits 4.
    Ctrl-C (SIGINT) or SIGTERM stops the search and writes the best valid plan so far,
    marked interrupted (at worst the current placement, 0 moves, when the solver had no
    placement yet), then exits 130 (SIGINT) or 143 (SIGTERM); during profiling it writes
    nothing. A second Ctrl-C aborts at once, leaving any previous plan folder as it was.
    Check any plan independently with `packer verify TRACE PLAN`.

    On a trace whose hosts have a `pool` column, tasks stay in their host's pool: each
    pool is solved apart (--workers at a time; --time-limit shared by their task
    counts) under its share of --max-moves, and the plans merged into one.
    """
    preset = get_preset(config)
    out = out or default_out(trace, f"plan-{preset.name}")
    refuse_to_overwrite_input(out, trace)
    check_output_writable(out)
    started = time.perf_counter()
    with exit_on_signals(echo_stopped) as written:
        t = read_trace(trace, fleet)
        budget = "unlimited" if rules.max_moves is None else f"{rules.max_moves:,}"
        click.echo(f"{preset.title}: {len(t.tasks):,} tasks, {len(t.hosts):,} hosts, goal {goal}, max moves {budget}, solver {solver}, "
                   f"time limit {time_limit:g} s", err=True)
        profiles = read_profiles(profiles_path, t) if profiles_path else None
        # Profiling happens only when the configuration needs profiles, so its bar opens on the first rows read.
        characterizing = "characterizing workloads (K-means classes, sensitivity scores)" if preset.sensitivity else None
        with (LazyProgressBar("profiling usage", lambda: usage_work(t), then=characterizing) as on_profile,
              solve_progress() as on_progress, executor_for(workers, scheduler) as executor):
            plan = api.solve(
                t, config=preset.name, goal=goal, solver=solver, time_limit=time_limit, seed=seed, deterministic=deterministic,
                weights=GoalWeights(fragmentation=fragmentation_weight, sensitivity=sensitivity_weight, moves=move_weight),
                **dataclasses.asdict(rules), profiles=profiles, sensitivity=sensitivity_path, sensitivity_basis=sensitivity_basis,
                class_scores=class_scores, classes_from=classes_from, fleet=fleet, on_profile=on_profile, on_progress=on_progress,
                start=start, executor=executor, **recorded_profiling(profiles_path))
        written.value = plan = plan.write(out)
        echo_plan(plan, time.perf_counter() - started)


@click.command(short_help="Check a plan folder against its trace.")
@trace_arg
@click.argument("plan", type=click.Path(exists=True, file_okay=False, path_type=Path))
def verify(trace: Path, plan: Path) -> None:
    """Check a plan folder against its trace, recomputing everything from the inputs.

    Rebuilds the problem from TRACE and the options recorded in PLAN/summary.json
    (profiles and characterization are recomputed), then checks the placement, the
    rules (capacity, eligibility, pins, spread, anti-affinity, move budget, guards),
    the move list and its order, and every number of the summary.

    \b
    Exit codes: 0 the plan is valid and its summary true; 1 a check failed;
    2 an input (trace, plan folder, recorded fleet/presets) cannot be read.
    """
    if echo_verify(api.verify(trace, plan), plan):
        sys.exit(1)
