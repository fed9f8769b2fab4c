"""What the ``packer`` commands print: summaries of the objects the library returns.

Every number printed here is read from a returned object (a plan's ``summary``, a
sweep's table and meta, an import summary, ...); the only arithmetic is the
differences and shares a reader wants next to them.
"""
from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import click

from packer.io.resources import SAMPLE_NAME, sample_trace
from packer.plan.plan import format_gap
from packer.solvers.engine import PROVED


def echo_skipped_usage(skipped: dict) -> None:
    """Warn about the usage rows --skip-invalid-usage dropped, per file, column and reason."""
    for (file, column, reason), count in skipped.items():
        click.secho(f"skipped {count} usage rows of {file}: column '{column}': {reason}", fg="yellow", err=True)


def echo_profiles(result, tasks: int, out: Path, window_s: int, seconds: float, summary) -> None:
    """``packer profile``'s report: what was profiled and how far the first percentile sits below requests."""
    q = result.percentiles[0]
    click.echo(f"profiled {tasks:,} tasks from {result.rows:,} usage rows ({window_s} s windows) in {seconds:.1f} s -> {out}")
    if result.tasks_without_usage:
        click.secho(f"{result.tasks_without_usage:,} tasks have no usage rows: their statistics are NaN", fg="yellow")
    if not len(summary):
        return
    click.echo(f"\nHow far p{q:g} usage sits below requests (sum over profiled tasks):")
    click.echo(f"  {'dim':<6} {'tasks':>8} {'requested':>14} {f'p{q:g} usage':>14} {'ratio':>7} {'median task':>12} {'over request':>13}")
    for dim, row in summary.iterrows():
        click.echo(
            f"  {dim:<6} {row['tasks']:>8,} {row['sum_request']:>14,.1f} {row[f'sum_p{q:g}']:>14,.1f} "
            f"{row[f'p{q:g}_of_request']:>6.0%} {row['median_ratio']:>12.0%} {row['over_request']:>13,}"
        )


def echo_characterization(result, out: Path, seconds: float) -> None:
    """``packer characterize``'s report: classes per type, the architectures each class may not use, warnings."""
    tasks = result.tasks
    click.echo(f"characterized {len(tasks):,} tasks in {seconds:.1f} s -> {out}")
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


def echo_import(summary, unit: str, seconds: float) -> None:
    """What an importer read, wrote, skipped and dropped."""
    click.echo(f"imported {summary.tasks:,} tasks from {summary.records:,} {unit} in {seconds:.1f} s -> {summary.out}")
    click.echo(f"hosts: {summary.hosts:,} in {len(summary.hosts_per_arch)} architectures")
    for arch, count in summary.hosts_per_arch.items():
        click.echo(f"  {arch:<28} {count:>6,}")
    click.echo(f"usage rows: {summary.usage_rows:,}" if summary.usage_rows else "usage: none (a requests-only trace)")
    if summary.merged_samples:
        click.echo(f"duplicate samples merged (same task and timestamp): {summary.merged_samples:,}")
    if summary.filtered:
        click.echo(f"left out {summary.filtered_reason}: {summary.filtered:,} {unit}")
    for problem in summary.skipped:
        click.secho(f"skipped: {problem}", fg="yellow", err=True)
    if summary.skipped_rows:
        click.secho(f"skipped {summary.skipped_rows:,} invalid rows in all (--skip-invalid)", fg="yellow", err=True)
    if summary.dropped:
        click.secho(f"dropped {len(summary.dropped):,} tasks without a host:", fg="yellow", err=True)
        for task_id, reason in list(summary.dropped.items())[:10]:
            click.secho(f"  {task_id}: {reason}", fg="yellow", err=True)
        if len(summary.dropped) > 10:
            click.secho(f"  ... and {len(summary.dropped) - 10:,} more", fg="yellow", err=True)


def echo_kubernetes_import(result) -> None:
    """What ``packer import kubernetes`` pinned and left out, by reason."""
    for title, counts in (("pinned (movable = false)", result.pinned), ("left out", result.left_out), ("usage left out", result.usage_left_out)):
        for reason, count in counts.items():
            if count:
                click.echo(f"{title}: {count:,} {reason}")


def echo_kubernetes_export(result) -> None:
    """``packer export kubernetes``'s report: moves, waves, nodes to remove, files."""
    click.echo(f"{len(result.moves):,} pod moves in {result.waves:,} waves; {len(result.nodes_to_remove):,} nodes to remove "
               f"(plan id {result.plan_id}) -> {result.out}")
    click.echo("  moves.csv, moves.md, podmigrationjobs.yaml, apply-koordinator.sh, dry-run.txt, nodes-to-remove.txt, drain.sh")


def echo_generated(summary) -> None:
    """``packer generate``'s one-line report."""
    click.echo(
        f"wrote {summary.path}: {summary.tasks:,} tasks in {summary.jobs:,} jobs on {summary.hosts:,} hosts "
        f"({summary.empty_hosts:,} empty), {summary.usage_rows:,} usage rows; fleet CPU requested {summary.cpu_requested:.1%}, "
        f"used {summary.cpu_utilization:.1%} of cores; {summary.elapsed_s:.1f} s"
    )


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.1%}" if whole else "n/a"


@contextlib.contextmanager
def solve_progress() -> Iterator[Callable[[Any], None]]:
    """The engine's progress callback: one updating line on a terminal; in a log a line per phase and at most one every 5 s."""
    live = sys.stderr.isatty()
    shown = {"phase": None, "at": -1e9}

    def show(p) -> None:
        if not live and p.phase == shown["phase"] and p.elapsed_s - shown["at"] < 5.0:
            return
        shown.update(phase=p.phase, at=p.elapsed_s)
        bound = "" if p.bound is None else f"  bound {p.bound:,.2f}"
        line = f"  [{p.elapsed_s:6.1f} s] {p.phase:<22} objective {p.objective:,.2f}{bound}  hosts {p.hosts:,}  moves {p.moves:,}"
        click.echo(("\r" + line) if live else line, err=True, nl=not live)

    try:
        yield show
    finally:
        if live:  # end the line the callback kept rewriting, before anything else is printed
            click.echo("", err=True)


def echo_plan(plan, seconds: float) -> None:
    """``packer solve``'s report, from the plan's summary: hosts and TCO per architecture and type, headline metrics, status."""
    summary = plan.summary
    before, after = summary["metrics"]["before"], summary["metrics"]["after"]
    click.echo(f"\n{'architecture':<14} {'type':>4} {'hosts before':>13} {'after':>8} {'freed':>8} {'TCO before':>11} {'after':>10}")
    for name, row in summary["by_arch"].items():
        if row["hosts_before"] or row["hosts_after"]:
            click.echo(_fleet_row(name, row["type"], row))
    for utype, row in summary["by_type"].items():
        click.echo(_fleet_row(f"Type {utype}", "", row))
    click.echo(f"\nTCO {before['tco']:,.1f} -> {after['tco']:,.1f} cost units ({_share(before['tco'] - after['tco'], before['tco'])} saved); "
               f"hosts {before['hosts']:,} -> {after['hosts']:,}; {after['moves']:,} moves")
    if after["interference"]:
        click.echo(f"tasks at risk of interference (host sensitivity sum > 1, '{summary['context']['sensitivity_basis']}' basis): "
                   f"{before['tasks_at_risk']:,} -> {after['tasks_at_risk']:,}")
    rp = summary.get("relative_performance")
    if rp:
        b, a = rp["before"]["all"], rp["after"]["all"]
        click.echo(f"relative performance (0 = at goal): min {b['min']:.3f} -> {a['min']:.3f}; p5 {b['p5']:.3f} -> {a['p5']:.3f}; "
                   f"median {b['median']:.3f} -> {a['median']:.3f}; tasks below 0 {b['below_zero']:,} -> {a['below_zero']:,}")
    click.echo(f"status: {_status(summary)}")
    if "auto" in summary["solver"]["stats"]:
        click.echo(f"method: {_methods(summary['solver'])}")
    for pool in summary["solver"]["stats"].get("pools", []):
        click.echo(_pool_line(pool, "TCO" if summary["context"]["goal"] == "tco" else "hosts"))
    trace = summary["context"]["trace"]
    shown = SAMPLE_NAME if Path(trace) == sample_trace().resolve() else trace
    click.echo(f"plan: {plan.path} ({seconds:.1f} s); check it with: packer verify {shown} {plan.path}")


def _pool_line(pool: dict, primary: str) -> str:
    """One pool of a plan solved pool by pool: size, share of the move budget, what it freed next to the LP's share."""
    budget = "unlimited" if pool["budget"] is None else f"{pool['budget']:,}"
    lp = "" if pool.get("lp_freed") is None else f" (LP share: {pool['lp_freed']:,.1f} with {pool['lp_moves']:,.1f} moves)"
    took = f", {pool['solver']} {pool['wall_s']:.1f} s" if "wall_s" in pool else ""
    return (f"pool {pool['pool']}: {pool['tasks']:,} tasks, {pool['hosts']:,} hosts; {pool['moves']:,} of {budget} moves, "
            f"freed {pool['freed']:,.1f} {primary}{lp}; {pool['status']}{' (interrupted)' if pool.get('interrupted') else ''}{took}")


def _fleet_row(label: str, utype: str, row: dict) -> str:
    """One line of the hosts-and-TCO table (freed = net hosts no longer occupied)."""
    return (f"{label:<14} {utype:>4} {row['hosts_before']:>13,} {row['hosts_after']:>8,} {row['hosts_before'] - row['hosts_after']:>8,} "
            f"{row['tco_before']:>11,.1f} {row['tco_after']:>10,.1f}")


def _methods(solver: dict) -> str:
    """Which of ``auto``'s solvers made the plan, and what each found (objective units, seconds)."""
    engine, exact = solver["stats"]["auto"]["engine"], solver["stats"]["auto"]["highs"]
    if exact.get("failed"):
        verdict = "failed (an error of HiGHS's own)"
    elif exact["objective"] < engine["objective"] - 1e-9:
        verdict = f"improved it to {exact['objective']:,.4g}"
    else:
        verdict = "found no better plan"
    if exact["status"] == "optimal":
        verdict += " and proved the plan optimal"
    return (f"plan by {solver['name']} (engine found objective {engine['objective']:,.4g} in {engine['wall_s']:.1f} s; "
            f"HiGHS, started from its plan, {verdict} in {exact['wall_s']:.1f} s)")


def _status(summary: dict) -> str:
    """The status line: optimal or feasible, the plan's gap (:func:`packer.plan.plan.relative_gap`, the one packer prints
    everywhere), what the engine's bound rests on, and whether the search was cut short."""
    stats = summary["solver"]["stats"]
    detail = stats.get("bound") or {}
    bound = summary["bound"]
    ended = stats.get("search_ended")
    if summary["status"] != "optimal":
        status = "feasible"
    elif ended == PROVED:  # the proof is why the search ended early: one clause says both
        status, ended = "optimal (CP-SAT proved it before the time limit)", None
    else:
        status = "optimal (proven)"
    if bound is None:
        reason = detail.get("reason") if "primary_lower_bound" in detail else None
        status += f": gap unknown (no lower bound{f' could be computed: {reason}' if reason else ''})"
    else:
        status += f": gap {format_gap(summary['gap'])} to the lower bound {bound:,.4g} on the objective {summary['objective']['total']:,.4g}"
    primary = "TCO" if summary["context"]["goal"] == "tco" else "hosts"
    if "freeable_bound" in detail:
        status += f"; freed {detail['freed']:,.1f} of at most {detail['freeable_bound']:,.1f} {primary} the move budget can free"
    elif detail.get("primary_gap") is not None and detail["primary_gap"] <= 1e-9:
        status += f"; {primary} equals its lower bound (proven optimal {primary})"
    if stats.get("solver_failed"):
        status += f"; {summary['solver']['name']} failed (an error of its own) before it had a placement: the plan keeps the starting one"
    elif stats.get("interrupted_before_a_solution"):
        status += "; interrupted before the search had a placement: the plan keeps the current one"
    elif stats.get("interrupted"):
        status += "; interrupted (best plan so far)"
    elif stats.get("timed_out"):
        status += "; stopped at the time limit"
    elif ended:
        status += f"; the search ended before its time limit: {ended}"
    return status


def echo_stopped(signum: int, plan, aborted: bool = False) -> None:
    """The line after a SIGINT/SIGTERM stopped ``packer solve`` (:mod:`packer.interrupt`); ``plan``: the plan written, or None."""
    name = signal.Signals(signum).name
    if aborted:
        line = (f"aborted by a second {name}: no plan written (an earlier plan folder is left as it was)" if plan is None
                else f"aborted by a second {name} after the plan was written to {plan.path}")
    elif plan is None:
        line = f"interrupted by {name} before there was a plan: nothing written"
    elif plan.summary["solver"]["stats"].get("interrupted"):
        line = f"interrupted by {name}: the search stopped early; the best valid plan so far is written to {plan.path}"
    else:
        line = f"{name} received after the search had finished: the plan was completed and written to {plan.path}"
    click.secho(f"{line} (exit {128 + signum})", fg="yellow", err=True)


def echo_sweep_stopped(signum: int, result, aborted: bool = False) -> None:
    """The line after a SIGINT/SIGTERM stopped ``packer sweep``; ``result``: the sweep written, or None."""
    name = signal.Signals(signum).name
    if aborted:
        line = (f"aborted by a second {name}: no sweep written (an earlier sweep folder is left as it was)" if result is None
                else f"aborted by a second {name} after the sweep was written to {result.path}")
    elif result is None:
        line = f"interrupted by {name} before a point was solved: nothing written"
    else:
        not_run = result.meta.get("not_run", [])
        line = (f"interrupted by {name}: the sweep written to {result.path} holds the {len(result.table)} points solved "
                f"(the solve under way kept its best plan so far); not run: {', '.join(not_run) or 'none'}")
    click.secho(f"{line} (exit {128 + signum})", fg="yellow", err=True)


def echo_verify(report, plan: Path) -> int:
    """``packer verify``'s report: each check with its messages, then the verdict. Returns the number of failed checks."""
    for note in report.notes:
        click.secho(f"note: {note}", fg="yellow")
    for check in report.checks:
        mark = click.style("PASS", fg="green") if check.passed else click.style("FAIL", fg="red")
        click.echo(f"{mark} {check.name}: {check.messages[0] if check.messages else ''}")
        for message in check.messages[1:]:
            click.echo(f"     {message}")
    for claim in report.claims:
        click.echo(f"claim, not verified: {claim}")
    failed = sum(not c.passed for c in report.checks)
    if not report.plan_valid:
        click.secho(f"{plan}: INVALID plan ({failed} of {len(report.checks)} checks failed)", fg="red")
    elif failed:
        click.secho(f"{plan}: the plan is valid but its summary is false ({failed} of {len(report.checks)} checks failed)", fg="red")
    else:
        click.echo(f"{plan}: valid; summary verified")
    return failed


def sweep_progress() -> Callable[[Any], None]:
    """The sweep's progress callback: a line per finished solve; on a terminal also the solve under way."""
    live = sys.stderr.isatty()

    def show(p) -> None:
        label = f"[{p.step:>2}/{p.steps}] {p.point.name:<24}"
        if p.row is None:
            if live:
                click.echo(f"\r{label} {p.point.solver} ...", err=True, nl=False)
            return
        r = p.row
        took = "earlier run" if p.resumed else f"{r['wall_s']:.1f} s"
        line = f"{label} {r['status']:<9} {took:>11}"
        if "tco" in r:
            line += f"  TCO {r['tco']:>10,.1f}  hosts {r['hosts']:>7,}  at risk {r['tasks_at_risk']:>7,}  moves {r['moves']:>5,}"
        click.echo(("\r" + line) if live else line, err=True)

    return show


def echo_sweep(result, seconds: float) -> None:
    """``packer sweep``'s report: the table, the current placement, skipped and failed points, the dominance checks."""
    table, meta = result.table, result.meta
    click.echo(f"\n{'point':<24} {'solver':<22} {'status':<9} {'TCO':>10} {'hosts':>7} {'at risk':>8} {'interference':>12} {'moves':>6} {'wall s':>7}  front")
    for _, r in table.iterrows():
        placed = r["tco"] == r["tco"]  # NaN (no placement) is the only value unequal to itself
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
    _echo_dominance(meta)
    resumed = f", {len(meta['resumed'])} of them from an earlier run (--resume)" if meta.get("resumed") else ""
    click.echo(f"\n{meta['grid_points']} grid points, {meta['solves']} solves ({meta['solves_reused']} reused{resumed}); "
               f"profile {meta['timings'].get('profile_s', 0):.1f} s, characterize {meta['timings'].get('characterize_s', 0):.1f} s, "
               f"solves {meta['timings']['solves_s']:.1f} s; total {seconds:.1f} s")
    click.echo(f"sweep: {result.path}; render it with: packer report {result.path}")


def _echo_dominance(meta: dict) -> None:
    """Whether the optimizer dominates each baseline, on tasks at risk and on interference."""
    for key, risk in (("dominance", "tasks at risk"), ("dominance_interference", "interference")):
        checks = [d for d in meta[key] if d["dominated"] is not None]
        if not checks:
            continue
        beaten = sum(bool(d["dominated"]) for d in checks)
        click.echo(f"\noptimizer dominates {beaten} of {len(checks)} baselines on TCO and {risk} (lower TCO, no more {risk}):")
        for d in meta[key]:
            verdict = "no plan" if d["dominated"] is None else (f"dominated by {d['by']}" if d["dominated"] else "NOT dominated")
            click.echo(f"  {d['baseline']:<22} {verdict}")
