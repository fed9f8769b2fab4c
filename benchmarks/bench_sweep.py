"""Benchmark the TCO-vs-SLO sweep (issues 6 and 10) on the paper-scale generated trace.

    python benchmarks/bench_sweep.py [--trace benchmarks/work/paper] [--seed 0] [--tasks 37000 --hosts 18000 --days 7]
                                     [--time-limit 60] [--max-moves 400] [--verify]
    python benchmarks/bench_sweep.py --parallel 2 [--configs baseline,p99-cpu,p99-mem,p99,p99-sens] [--weights 0,1]
                                     [--refine 1] [--baselines none] [--deterministic] ...

``--parallel N``: the same sweep twice, serially and on N worker processes
(:mod:`packer.parallel`), with the wall time of each, the speed-up, and whether the two
tables agree (with ``--deterministic`` they must, timings aside); the paper's checks are
not run. ``--configs``, ``--weights``, ``--refine`` and ``--baselines`` choose the points
(e.g. 8 points: the four configurations without sensitivity, p99-sens at 0 and 1, its
no-new-risk point and one refinement, no baselines).

Runs the full sweep — Table IV's 5 configurations × the weight ladder 0, 0.1, 0.3, 1, 3,
10 (only p99-sens depends on the weight, so 4 + 6 optimizer solves) plus the 5 baseline
policies — under one move budget, writes the sweep folder and its report
(benchmarks/work/sweep-<trace>/ and its report/), and prints: the table, total wall time
against the 30-minute target, solves reused, peak RSS, and the issue's check that the
optimizer dominates every baseline (some optimizer point with lower TCO and no more
tasks at risk), plus the same check on interference, and the paper's directions
(:func:`packer.report.sweep.paper_directions`: P99 against Baseline, a P99 Sens weight below
Baseline's risk, at least four Pareto points, a pool with 5-50% of tasks at risk). With
``--verify`` every plan is then checked with ``packer verify`` (each re-profiles the
trace: slow at paper scale; not part of the timed sweep).

The trace is generated if missing: ``packer generate --tasks 37000 --hosts 18000 --days 7
--interval 300 --seed SEED --out TRACE`` (the defaults; see benchmarks/RESULTS.md).
"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "benchmarks" / "work"
TARGET_S = 30 * 60


def packer_command() -> str:
    return str(Path(sys.executable).with_name("packer"))


def ensure_paper_trace(path: Path, seed: int = 0, tasks: int = 37_000, hosts: int = 18_000, days: float = 7) -> Path:
    if not path.exists():
        cmd = [packer_command(), "generate", "--tasks", str(tasks), "--hosts", str(hosts), "--days", f"{days:g}", "--interval", "300",
               "--seed", str(seed), "--out", str(path)]
        print("generating:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    return path


def print_progress(event) -> None:
    if event.row is None:
        print(f"[{event.step:>2}/{event.steps}] {event.point.name} ({event.point.solver}) ...", flush=True)
        return
    r = event.row
    line = f"        {r['point']}: {r['status']} in {r['wall_s']:.1f} s"  # on several workers, points end out of order
    if "tco" in r:
        line += f": TCO {r['tco']:,.1f}, hosts {r['hosts']:,}, tasks at risk {r['tasks_at_risk']:,}, interference {r['interference']:,.1f}, moves {r['moves']:,}"
    print(line, flush=True)


def run(trace: Path, out: Path, options, verify: bool, directions_required: bool = True) -> int:
    """Run the sweep and its report, print the measurements; returns the number of failed checks.

    ``directions_required``: whether a missed paper direction counts as a failed check
    (it does for generated paper-shaped pools; real traces only report them).
    """
    import pandas as pd

    from packer.report.report import write_report
    from packer.report.sweep import run_sweep

    print(f"sweep of {trace} -> {out}", flush=True)
    start = time.perf_counter()
    sweep = run_sweep(trace, out, options, progress=print_progress)
    sweep_s = time.perf_counter() - start
    report_start = time.perf_counter()
    files = write_report(out)
    report_s = time.perf_counter() - report_start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    meta, table = sweep.meta, sweep.table

    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print()
        print(table[["point", "solver", "status", "tco", "hosts", "tasks_at_risk", "interference", "frag_share_cpu", "frag_share_mem",
                     "wsl", "moves", "wall_s", "gap", "pareto"]].to_string(index=False, float_format=lambda v: f"{v:,.4g}"))
    cur = meta["current"]
    print(f"current placement: TCO {cur['tco']:,.1f}, hosts {cur['hosts']:,}, tasks at risk {cur['tasks_at_risk']:,}, interference {cur['interference']:,.1f}")
    timings = meta["timings"]
    print(f"\n{meta['grid_points']} grid points, {meta['solves']} solves ({meta['solves_reused']} reused where inputs match)")
    print(f"profile {timings.get('profile_s', 0):.1f} s, characterize {timings.get('characterize_s', 0):.1f} s, build problems {timings.get('build_s', 0):.1f} s, "
          f"solves {timings['solves_s']:.1f} s; sweep total {sweep_s:.1f} s ({sweep_s / 60:.1f} min), report {report_s:.1f} s; peak RSS {peak_mib:,.0f} MiB")
    failed = 0
    within = sweep_s <= TARGET_S
    failed += not within
    print(f"target: total wall time <= {TARGET_S / 60:.0f} min: {'met' if within else 'NOT met'}")
    for key, risk in (("dominance", "tasks at risk"), ("dominance_interference", "interference")):
        print(f"\nthe optimizer dominates every baseline on TCO and {risk} (lower TCO, no more {risk}):")
        for d in meta[key]:
            risk_value = d["tasks_at_risk"] if key == "dominance" else d["interference"]
            verdict = "no plan" if d["dominated"] is None else (f"yes, by {d['by']} (TCO {d['by_tco']:,.1f})" if d["dominated"] else "NO")
            print(f"  {d['baseline']:<22} TCO {d['tco'] if d['tco'] is None else format(d['tco'], ',.1f'):>10}  {risk} "
                  f"{risk_value if risk_value is None else format(risk_value, ',.4g'):>8}  {verdict}")
        every = all(d["dominated"] for d in meta[key])
        if key == "dominance":
            failed += not every
        print(f"  -> {'every baseline dominated' if every else 'NOT every baseline dominated'}")
    from packer.report.sweep import paper_directions

    print("\nthe paper's directions (Section V-C) at this move budget:")
    for check in paper_directions(sweep):
        failed += directions_required and not check.passed
        print(f"  {'met' if check.passed else 'NOT met':<8} {check.name}: {check.detail}")
    for name, message in meta.get("errors", {}).items():
        print(f"FAILED solve {name}: {message}")
        failed += 1
    if verify:
        from packer.plan.verify import verify_plan

        print("\nverifying every plan (packer verify):", flush=True)
        for _, row in table[table["plan"] != ""].iterrows():
            v_start = time.perf_counter()
            report = verify_plan(trace, out / row["plan"])
            failed += not report.ok
            print(f"  {row['point']:<22} {'valid; summary verified' if report.ok else 'FAILED'} ({time.perf_counter() - v_start:.1f} s)", flush=True)
    print(f"\nreport: {files.html}\n        {files.markdown}")
    return failed


def compare_parallel(trace: Path, out: Path, options, workers: int) -> int:
    """The sweep serially and on ``workers`` processes: wall times, speed-up, and whether the tables agree; the number of failures."""
    import pandas as pd

    from packer.parallel import local_executor
    from packer.report.sweep import run_sweep

    walls, tables = {}, {}
    for n in (1, workers):
        start = time.perf_counter()
        with local_executor(n) as executor:
            sweep = run_sweep(trace, out.with_name(f"{out.name}-w{n}"), options, progress=print_progress, executor=executor)
        walls[n], tables[n] = time.perf_counter() - start, sweep.table
        print(f"workers {n}: {len(sweep.table)} points in {walls[n]:.1f} s (solves {sweep.meta['timings']['solves_s']:.1f} s)", flush=True)
    same = tables[1].drop(columns="wall_s").equals(tables[workers].drop(columns="wall_s"))
    with pd.option_context("display.width", 200):
        print(tables[workers][["point", "status", "tco", "tasks_at_risk", "moves", "wall_s"]].to_string(index=False))
    print(f"speed-up {walls[1] / walls[workers]:.2f}x with {workers} workers; tables {'identical' if same else 'DIFFER'} (timings aside)")
    return int(options.deterministic and not same)


def main() -> None:
    from packer.model.build import RuleOptions
    from packer.report.sweep import TABLE_IV_CONFIGS, DEFAULT_WEIGHTS, SweepOptions
    from packer.solvers.baselines import BASELINES

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, default=WORK / "paper", help="Trace folder; generated if missing (default benchmarks/work/paper).")
    parser.add_argument("--seed", type=int, default=0, help="Seed of a trace generated here.")
    parser.add_argument("--tasks", type=int, default=37_000, help="Tasks of a trace generated here.")
    parser.add_argument("--hosts", type=int, default=18_000, help="Hosts of a trace generated here.")
    parser.add_argument("--days", type=float, default=7, help="Days of usage of a trace generated here.")
    parser.add_argument("--out", type=Path, default=None, help="Sweep folder (default benchmarks/work/sweep-<trace name>).")
    parser.add_argument("--time-limit", type=float, default=60.0, help="Seconds per optimizer solve.")
    parser.add_argument("--max-moves", type=int, default=400)
    parser.add_argument("--verify", action="store_true", help="Also run packer verify on every plan (after the timed sweep).")
    parser.add_argument("--parallel", type=int, default=None, metavar="N", help="Compare a serial sweep with one on N workers.")
    parser.add_argument("--configs", default=",".join(TABLE_IV_CONFIGS))
    parser.add_argument("--weights", default=",".join(f"{w:g}" for w in DEFAULT_WEIGHTS))
    parser.add_argument("--refine", type=int, default=5)
    parser.add_argument("--baselines", default=",".join(BASELINES), help="Comma-separated baseline policies, or 'none'.")
    parser.add_argument("--deterministic", action="store_true")
    args = parser.parse_args()
    trace = ensure_paper_trace(args.trace, args.seed, args.tasks, args.hosts, args.days)
    out = args.out or WORK / f"sweep-{trace.name}"
    options = SweepOptions(rules=RuleOptions(max_moves=args.max_moves), time_limit_s=args.time_limit, configs=tuple(args.configs.split(",")),
                           weights=tuple(float(w) for w in args.weights.split(",")), refine=args.refine, deterministic=args.deterministic,
                           baselines=() if args.baselines == "none" else tuple(args.baselines.split(",")))
    if args.parallel:
        sys.exit(compare_parallel(trace, out, options, args.parallel))
    failed = run(trace, out, options, args.verify)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
