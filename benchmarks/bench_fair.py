"""Benchmark the fair goal (issue 5): leximin relative performance within a move budget.

    python benchmarks/bench_fair.py paper [--moves 400] [--time-limit 60]
    python benchmarks/bench_fair.py small [--instances 100]

paper: the generated paper-scale trace (benchmarks/work/paper: 37k tasks, 18k hosts),
config p99-sens. Profiles and characterizes once, then solves `--goal fair` with the
scalable engine and, side by side, `--goal tco` and `--goal tco --min-rp 0` (free cost
but let no task fall below its goal, nor one below it get worse) with the same budget;
writes the plans to benchmarks/work/plans/, runs the independent verifier on each and prints
the relative-performance distribution (minimum, 5th percentile, median, tasks below
0) before and after, TCO, moves and the solve's wall time.

small: seeded random instances (24 tasks, 12 hosts, 2 sensitivity dimensions, 4
moves); the engine's minimum RP against the exact iterated CP-SAT's proven optimum
(`minimum_only`), at the default resolution 0.01. Instances the exact model does not
prove within its time limit are counted separately.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "benchmarks" / "work"


def paper(moves: int, time_limit: float) -> None:
    from dataclasses import replace

    from packer import get_preset, read_trace
    from packer.model.build import RuleOptions, make_goals, make_rules
    from packer.model.metrics import evaluate, rp_distribution
    from packer.model.rpf import relative_performance
    from packer.plan.context import PlanContext, problem_from_context
    from packer.plan.plan import write_plan
    from packer.plan.verify import verify_plan
    from packer.solvers.run import run_solver

    trace_path = WORK / "paper"
    if not trace_path.exists():
        sys.exit(f"{trace_path} is missing: generate it with `packer generate --out {trace_path}`")
    trace = read_trace(trace_path)
    preset = get_preset("p99-sens")
    t0 = time.perf_counter()
    base = PlanContext(trace=str(trace_path), config=preset.name, rules=RuleOptions(max_moves=moves), solver="engine", time_limit_s=time_limit)
    problem = problem_from_context(trace, preset, base)
    print(f"profiled and characterized {problem.n_tasks:,} tasks, {problem.n_hosts:,} hosts in {time.perf_counter() - t0:.1f} s", flush=True)
    rp0 = relative_performance(problem, problem.current)
    before = rp_distribution(rp0)
    print(f"before: RP min {before['min']:.3f} ({int((rp0 <= before['min'] + 0.005).sum()):,} tasks there), p5 {before['p5']:.3f}, "
          f"median {before['median']:.3f}, below 0: {before['below_zero']:,}; "
          f"TCO {evaluate(problem, problem.current).tco:,.1f}", flush=True)
    runs = {"fair": ("fair", base.rules), "tco": ("tco", base.rules), "tco --min-rp 0": ("tco", replace(base.rules, min_rp=0.0))}
    for label, (goal, rules) in runs.items():
        context = replace(base, goal=goal, rules=rules)
        # The profiled, characterized problem with this run's goal and rules (what problem_from_context would build).
        goal_problem = problem.with_(goals=make_goals(goal, context.weights), fair=goal == "fair", rules=make_rules(rules))
        started = time.perf_counter()
        result = run_solver(goal_problem, "engine", time_limit)
        wall = time.perf_counter() - started
        out = WORK / "plans" / ("fair-bench-" + label.replace(" --", "-").replace(" ", ""))
        write_plan(out, goal_problem, result, context, fleet=trace.fleet)
        report = verify_plan(trace_path, out)
        rp1 = relative_performance(goal_problem, result.assign)
        after = rp_distribution(rp1)
        ev = evaluate(goal_problem, result.assign)
        print(f"--goal {label}: {wall:.1f} s solve; moves {ev.moves}; TCO {ev.tco:,.1f}; RP min {after['min']:.3f} "
              f"({int((rp1 <= after['min'] + 0.005).sum()):,} tasks there), p5 {after['p5']:.3f}, "
              f"median {after['median']:.3f}, below 0: {after['below_zero']:,}; verified: {report.ok} "
              f"({', '.join(c.name for c in report.checks if not c.passed) or 'all checks pass'}); stats {result.stats}", flush=True)


def small(instances: int, exact_time: float) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from problems import random_problem

    from packer.model.rpf import relative_performance
    from packer.solvers.leximin import quantize, solve_leximin_engine, solve_leximin_exact

    equal = unproven = 0
    engine_s = exact_s = 0.0
    misses = []
    for seed in range(instances):
        problem = random_problem(seed, n_tasks=24, n_hosts=12, sens=True, max_moves=4, goal="fair")
        t = time.perf_counter()
        exact = solve_leximin_exact(problem, time_limit=exact_time, minimum_only=True)
        exact_s += time.perf_counter() - t
        t = time.perf_counter()
        engine = solve_leximin_engine(problem, time_limit=10)
        engine_s += time.perf_counter() - t
        if exact.status != "optimal":
            unproven += 1
            continue
        best = int(quantize(relative_performance(problem, exact.assign)).min())
        got = int(quantize(relative_performance(problem, engine.assign)).min())
        equal += got == best
        if got != best:
            misses.append((seed, got / 100, best / 100))
    proven = instances - unproven
    print(f"{instances} instances (24 tasks, 12 hosts, 4 moves): engine minimum = exact optimum on {equal} of {proven} proven "
          f"({equal / max(proven, 1):.0%}); {unproven} not proven within {exact_time:g} s; engine {engine_s / instances:.2f} s, "
          f"exact {exact_s / instances:.2f} s per instance; misses (seed, engine, exact): {misses}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("paper")
    p.add_argument("--moves", type=int, default=400)
    p.add_argument("--time-limit", type=float, default=60.0)
    s = sub.add_parser("small")
    s.add_argument("--instances", type=int, default=100)
    s.add_argument("--exact-time", type=float, default=30.0)
    args = parser.parse_args()
    if args.what == "paper":
        paper(args.moves, args.time_limit)
    else:
        small(args.instances, args.exact_time)


if __name__ == "__main__":
    main()
