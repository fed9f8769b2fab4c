"""Benchmark the packer-solver (issue 4): a ladder of generated instances, small instances against
proven optima, and Falkenauer's 1-D bin packing instances.

    python benchmarks/bench_solve.py ladder [--sizes 1000,5000,37000,100000]
    python benchmarks/bench_solve.py small [--instances 100]
    python benchmarks/bench_solve.py falkenauer [--time-limit 10]
    python benchmarks/bench_solve.py known [--tasks 5000] [--seeds 1001,1002] [--time-limit 60]
    python benchmarks/bench_solve.py pools [--pools 4] [--tasks 2000] [--time-limit 10] [--max-moves 400] [--workers 2]
    python benchmarks/bench_solve.py full-vs-budget [--seeds 0-39] [--budgets 400,25,10] [--no-sens] [--time-limit 1] [--wall-clock]

ladder: traces are generated into benchmarks/work/ if missing (37,000 tasks reuses
benchmarks/work/paper: 7 days at 300 s; the other sizes use 1 day at 300 s, hosts =
tasks × 18/37). Time limits: 60 s, except 300 s for a full repack of 37,000 tasks or
more (the targets' limits). Each run is a child process (`one`) that profiles, builds the problem,
solves, writes the plan, runs `packer verify` on it and reports wall time (solve only),
peak RSS (whole process, profiling included), objective, bound and gaps. Side by side in
the same run: first-fit decreasing (full repack), and the exact CP-SAT and PuLP/CBC
models on the whole instance with the same time limit where the model fits in memory.

known: full repacks with a known optimum (``known_optimum_problem`` in tests/problems.py:
K hosts of the architecture cheapest per core split exactly into 2-6 tasks each, scattered
over 2.2·K hosts). Reports the engine's TCO against the optimum, its lower bound, and FFD.

full-vs-budget: on random instances (``random_problem`` in tests/problems.py, 40 tasks, 10 hosts,
with sensitivity unless --no-sens), engine solves of the full repack and of each budget (deterministic, 1 s of
work unless --time-limit; by the clock with --wall-clock); counts how often the full repack ends above (worse
than), below or at the budgeted plan.

pools: a fleet of ``--pools`` generated traces of ``--tasks`` tasks each (seeds 0, 1, ...;
1 day at 300 s; hosts = tasks × 18/37), combined into one trace with a ``pool`` column
(:func:`packer.io.pools.combine_pools`), solved by ``packer solve`` with ``--workers 1``
and with ``--workers N`` (same time limit and budget); reports each run's wall time
(the whole command), the speed-up, the cost freed by each and whether ``packer verify``
accepts both plans. By default the solves are ``--deterministic`` (same plans, each
pool's limit counted as work, so a worker slowed by a busy machine takes longer);
``--wall-clock`` gives each pool its share of the limit in seconds instead.
"""
from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "benchmarks" / "work"
SHARED = ROOT.parent / "shared" / "data"


def ensure_trace(tasks: int) -> Path:
    if tasks == 37000 and (WORK / "paper").exists():
        return WORK / "paper"
    path = WORK / f"ladder-{tasks}"
    if not path.exists():
        hosts = max(10, round(tasks * 18 / 37))
        cmd = [str(Path(sys.executable).with_name("packer")), "generate", "--tasks", str(tasks), "--hosts", str(hosts),
               "--days", "1", "--interval", "300", "--seed", "0", "--out", str(path)]
        print("generating:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, capture_output=True)
    return path


def one(trace: str, config: str, budget: str, solver: str, time_limit: float) -> dict:
    """Solve once in this process and report (see module doc)."""
    from packer import get_preset, read_trace
    from packer.errors import InputError
    from packer.model.build import RuleOptions
    from packer.model.metrics import evaluate
    from packer.plan.context import PlanContext, problem_from_context
    from packer.plan.plan import write_plan
    from packer.plan.verify import verify_plan
    from packer.solvers.baselines import first_fit_decreasing
    from packer.solvers.run import engine_bound, run_solver

    max_moves = None if budget == "unlimited" else int(budget)
    t = read_trace(trace)
    preset = get_preset(config)
    context = PlanContext(trace=trace, config=preset.name, rules=RuleOptions(max_moves=max_moves), solver=solver, time_limit_s=time_limit)
    problem = problem_from_context(t, preset, context)
    t0 = time.perf_counter()
    try:
        result = first_fit_decreasing(problem) if solver == "ffd" else run_solver(problem, solver, time_limit)
    except InputError as exc:  # exact models too large to stop within the limit are refused
        return {"skipped": str(exc)}
    wall = time.perf_counter() - t0
    before, after = evaluate(problem, problem.current), evaluate(problem, result.assign)
    out = {"status": result.status, "wall_s": wall, "objective": result.objective, "tco_before": before.tco, "tco_after": after.tco,
           "hosts_before": before.hosts, "hosts_after": after.hosts, "moves": after.moves}
    detail = result.stats.get("bound") or engine_bound(problem)[1]
    if "primary_lower_bound" in detail:
        lower = detail["primary_lower_bound"]
        out.update(bound=lower, tco_gap_to_lower_bound=after.tco / lower - 1 if lower > 0 else None)
    else:
        freed = before.tco - after.tco
        out.update(bound=detail["freeable_bound"], freed=freed, share_of_freeable_bound=freed / detail["freeable_bound"] if detail["freeable_bound"] > 0 else None)
    plan = WORK / "plans" / f"{Path(trace).name}-{config}-{budget}-{solver}"
    write_plan(plan, problem, result, context, fleet=t.fleet)
    out["verified"] = verify_plan(trace, plan).ok
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def child(*args: str) -> dict:
    limit = float(args[-1])
    try:
        # Profiling, verification and model building come on top of the solve's own limit.
        proc = subprocess.run([sys.executable, __file__, "one", *args], capture_output=True, text=True, timeout=3 * limit + 240)
    except subprocess.TimeoutExpired:
        return {"error": f"killed after {3 * limit + 240:.0f} s: the solver did not stop at its {limit:g} s limit"}
    if proc.returncode:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fmt(x, spec: str = ",.1f") -> str:
    return "–" if x is None else format(x, spec) if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x)


def ladder(sizes: list[int], configs: list[str], budgets: list[str], exact: bool) -> None:
    print("| tasks | config | budget | solver | status | wall s | peak RSS MiB | TCO before → after | bound | result vs bound | moves | verified |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size in sizes:
        trace = str(ensure_trace(size))
        for config in configs:
            for budget in budgets:
                if size >= 100_000 and budget == "unlimited":
                    continue
                limit = 300.0 if budget == "unlimited" and size >= 37000 else 60.0
                solvers = ["engine"] + (["ffd"] if budget == "unlimited" else []) + (["cpsat", "cbc"] if exact and size <= 5000 else [])
                for solver in solvers:
                    r = child(trace, config, budget, solver, str(limit))
                    if "skipped" in r or "error" in r:
                        print(f"| {size:,} | {config} | {budget} | {solver} | {r.get('skipped') or 'error: ' + r['error']} |||||||||", flush=True)
                        continue
                    vs = (f"{r['share_of_freeable_bound']:.1%} of freeable" if r.get("share_of_freeable_bound") is not None
                          else f"+{r['tco_gap_to_lower_bound']:.2%} over lower bound" if r.get("tco_gap_to_lower_bound") is not None else "–")
                    print(f"| {size:,} | {config} | {budget} | {solver} | {r['status']} | {r['wall_s']:.1f} | {r['peak_rss_mib']:,.0f} | "
                          f"{r['tco_before']:,.0f} → {r['tco_after']:,.0f} | {fmt(r['bound'])} | {vs} | {r['moves']:,} | {r['verified']} |", flush=True)


def small(instances: int, time_limit: float, engine_limit: float) -> None:
    """Scalable engine (``engine_limit`` s) vs the proven optimum (CBC, ``time_limit`` s) on seeded random instances of 20-200 tasks."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "tests"))
    from problems import random_problem  # the tests' random instance family

    from packer.model.build import GoalWeights
    from packer.solvers.run import run_solver

    equal = proven = 0
    worst = 0.0
    for seed in range(instances):
        rng = np.random.default_rng(seed)
        n_tasks = int(rng.integers(20, 201))
        problem = random_problem(seed, n_tasks, max(3, n_tasks // 5), weights=GoalWeights(fragmentation=0.0, moves=0.0))
        exact = run_solver(problem, "cbc", time_limit=time_limit)
        if exact.status != "optimal":
            continue
        proven += 1
        engine = run_solver(problem, "engine", time_limit=engine_limit)
        same = engine.objective <= exact.objective + 1e-6 * max(1.0, abs(exact.objective))
        equal += same
        worst = max(worst, (engine.objective - exact.objective) / max(abs(exact.objective), 1e-9))
    print(f"{instances} seeded instances (20-200 tasks, hosts = tasks/5, random budgets, pinned tasks, 2-3 architectures; "
          f"CBC {time_limit:g} s, engine {engine_limit:g} s): "
          f"CBC proved optimality on {proven}; the engine matched the optimum on {equal} of them ({equal / max(proven, 1):.0%}); "
          f"worst relative excess {worst:.2%}")


def falkenauer(time_limit: float) -> None:
    """Full repack of Falkenauer's 1-D instances: bins used against the best known count."""
    import numpy as np

    from packer.model.build import GoalWeights, RuleOptions, make_goals, make_rules
    from packer.model.problem import PlacementProblem
    from packer.solvers.run import run_solver

    folder = SHARED / "falkenauer"
    if not folder.exists():
        print(f"skipped: {folder} is absent")
        return
    solved = proven = total = 0
    rows = []
    for path in sorted(folder.glob("binpack[0-9]*.txt")):  # binpackinfo.txt describes the format
        lines = [ln.split() for ln in path.read_text().split("\n") if ln.strip()]
        n_inst, k = int(lines[0][0]), 1
        for _ in range(n_inst):
            name = lines[k][0]
            cap, n, best = float(lines[k + 1][0]), int(lines[k + 1][1]), int(lines[k + 1][2])
            sizes = np.array([float(x[0]) for x in lines[k + 2: k + 2 + n]])
            k += 2 + n
            problem = PlacementProblem(
                task_ids=np.array([f"i{i}" for i in range(n)]), host_ids=np.array([f"b{i}" for i in range(n)]), arch_names=np.array(["bin"]),
                dims=("size",), demand=sizes[:, None], capacity=np.full((n, 1), cap), frag_dims=(0,), sens_dims=(),
                sens_demand=np.zeros((n, 0)), sens_capacity=np.zeros((n, 0)), host_arch=np.zeros(n, dtype=np.int64), cost=np.ones(n),
                eligible=np.ones((n, 1), dtype=bool), current=np.arange(n), movable=np.ones(n, dtype=bool), job=np.arange(n),
                domain=np.full(n, -1), rules=make_rules(RuleOptions(max_moves=None)),
                goals=make_goals("hosts", GoalWeights(fragmentation=0.0, moves=0.0)))
            result = run_solver(problem, "engine", time_limit=time_limit)
            bins = len(np.unique(result.assign))
            lower = result.stats["bound"]["primary_lower_bound"]
            solved += bins <= best
            proven += bins <= lower
            total += 1
            rows.append((path.stem, name, n, best, bins, lower, result.wall_s))
        file_rows = [r for r in rows if r[0] == path.stem]
        print(f"  {path.stem}: {len(file_rows)} instances of {file_rows[0][2]} items; at best known {sum(r[4] <= r[3] for r in file_rows)}, "
              f"proven optimal (= lower bound) {sum(r[4] <= r[5] for r in file_rows)}, "
              f"mean excess {np.mean([r[4] - r[3] for r in file_rows]):.2f} bins, max {max(r[4] - r[3] for r in file_rows)}, "
              f"lower bound below best known on {sum(r[5] < r[3] for r in file_rows)}, mean wall {np.mean([r[6] for r in file_rows]):.1f} s", flush=True)
    print(f"Falkenauer: {solved}/{total} instances solved to the best known bin count within {time_limit:g} s each; "
          f"{proven} proven optimal by packer's own lower bound")


def known(tasks: int, seeds: list[int], time_limit: float) -> None:
    """The engine on known-optimum full repacks (module doc); every plan checked with the independent rule check."""
    sys.path.insert(0, str(ROOT / "tests"))
    from problems import known_optimum_problem

    from packer.model.metrics import evaluate, violations
    from packer.solvers.baselines import first_fit_decreasing
    from packer.solvers.run import run_solver

    print("| seed | tasks | hosts | optimum | TCO before | FFD | engine | engine / optimum | lower bound | bound / optimum | wall s | valid |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for seed in seeds:
        problem, optimum = known_optimum_problem(seed, tasks)
        ffd = evaluate(problem, first_fit_decreasing(problem).assign).tco
        result = run_solver(problem, "engine", time_limit, seed=seed)
        tco = evaluate(problem, result.assign).tco
        lower = result.stats["bound"]["primary_lower_bound"]
        print(f"| {seed} | {problem.n_tasks:,} | {problem.n_hosts:,} | {optimum:,.1f} | {evaluate(problem, problem.current).tco:,.1f} | "
              f"{ffd:,.1f} | {tco:,.1f} | {tco / optimum:.4f} | {lower:,.1f} | {lower / optimum:.4f} | {result.wall_s:.1f} | "
              f"{not violations(problem, result.assign)} |", flush=True)


def full_vs_budget(seeds: range, budgets: list[int], sens: bool, time_limit: float = 1.0, wall_clock: bool = False) -> None:
    """How often a full repack ends above the budgeted plan of the same instance (module doc)."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "tests"))
    from problems import random_problem

    from packer.solvers.run import run_solver

    def objective(max_moves: int | None, seed: int) -> float:
        problem = random_problem(seed, 40, 10, sens=sens, max_moves=max_moves)
        return run_solver(problem, "engine", time_limit, seed=0, deterministic=not wall_clock).objective

    full = {seed: objective(None, seed) for seed in seeds}
    print("| budget | full repack worse | better | same | mean excess where worse |")
    print("|---|---|---|---|---|")
    for budget in budgets:
        excess = np.array([full[seed] - objective(budget, seed) for seed in seeds])
        worse = excess > 1e-9
        print(f"| {budget} | {worse.sum()} of {len(excess)} | {(excess < -1e-9).sum()} | {(np.abs(excess) <= 1e-9).sum()} | "
              f"{excess[worse].mean() if worse.any() else 0:.3f} |", flush=True)


def pools(n_pools: int, tasks: int, time_limit: float, max_moves: str, workers: int, wall_clock: bool = False) -> None:
    from packer.io.pools import combine_pools

    parts = [WORK / f"pool-{tasks}-s{seed}" for seed in range(n_pools)]
    hosts = max(10, round(tasks * 18 / 37))
    for seed, part in enumerate(parts):
        if not part.exists():
            subprocess.run([str(Path(sys.executable).with_name("packer")), "generate", "--tasks", str(tasks), "--hosts", str(hosts),
                            "--days", "1", "--interval", "300", "--seed", str(seed), "--out", str(part)], check=True, capture_output=True)
    trace = WORK / f"pools-{n_pools}x{tasks}"
    if not trace.exists():
        combine_pools(parts, trace)
    packer = str(Path(sys.executable).with_name("packer"))
    freed = {}
    for n in (1, workers):
        out = WORK / f"plan-pools-{n_pools}x{tasks}-w{n}"
        cmd = [packer, "solve", str(trace), "--config", "p99", "--max-moves", max_moves, "--time-limit", f"{time_limit:g}",
               *([] if wall_clock else ["--deterministic"]), "--workers", str(n), "--out", str(out)]
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode:
            print(done.stderr)
            raise SystemExit(done.returncode)
        summary = json.loads((out / "summary.json").read_text())
        detail = summary["solver"]["stats"]["bound"]
        freed[n] = summary["metrics"]["before"]["tco"] - summary["metrics"]["after"]["tco"]
        ok = subprocess.run([packer, "verify", str(trace), str(out)], capture_output=True).returncode == 0
        print(" ".join(cmd))
        print(f"  workers {n}: {wall:.1f} s wall (command), freed {freed[n]:,.1f} TCO (bound: {detail.get('freeable_bound') or detail.get('primary_lower_bound')}), "
              f"moves {summary['moves']['count']}, status {summary['status']}, verify {'passed' if ok else 'FAILED'}", flush=True)
        for line in summary["solver"]["stats"]["pools"]:
            print(f"    {line['pool']}: budget {line['budget']}, moves {line['moves']}, freed {line['freed']:,.1f} "
                  f"(LP {line['lp_freed']}), {line['status']}, {line.get('wall_s', 0):.1f} s")
        freed[f"wall{n}"] = wall
    print(f"speed-up {freed['wall1'] / freed[f'wall{workers}']:.2f}x with {workers} workers; freed cost differs by "
          f"{abs(freed[1] - freed[workers]) / max(abs(freed[1]), 1e-9):.2%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    lad = sub.add_parser("ladder")
    lad.add_argument("--sizes", default="1000,5000,37000,100000")
    lad.add_argument("--configs", default="baseline,p99")
    lad.add_argument("--budgets", default="400,unlimited")
    lad.add_argument("--no-exact", action="store_true")
    sm = sub.add_parser("small")
    sm.add_argument("--instances", type=int, default=100)
    sm.add_argument("--time-limit", type=float, default=30.0, help="CBC's limit (only proven optima count)")
    sm.add_argument("--engine-time-limit", type=float, default=5.0)
    fk = sub.add_parser("falkenauer")
    fk.add_argument("--time-limit", type=float, default=10.0)
    kn = sub.add_parser("known")
    kn.add_argument("--tasks", type=int, default=5000)
    kn.add_argument("--seeds", default="1001,1002")
    kn.add_argument("--time-limit", type=float, default=60.0)
    po = sub.add_parser("pools")
    po.add_argument("--pools", type=int, default=4)
    po.add_argument("--tasks", type=int, default=2000, help="tasks per pool")
    po.add_argument("--time-limit", type=float, default=10.0)
    po.add_argument("--max-moves", default="400")
    po.add_argument("--workers", type=int, default=2)
    po.add_argument("--wall-clock", action="store_true", help="time limits by the clock (default: --deterministic, limits as work)")
    fb = sub.add_parser("full-vs-budget")
    fb.add_argument("--seeds", default="0-39", help="FIRST-LAST")
    fb.add_argument("--budgets", default="400,25,10")
    fb.add_argument("--no-sens", action="store_true")
    fb.add_argument("--time-limit", type=float, default=1.0)
    fb.add_argument("--wall-clock", action="store_true", help="time limits by the clock (default: deterministic, limits as work)")
    o = sub.add_parser("one")
    o.add_argument("args", nargs=5)
    args = ap.parse_args()
    if args.cmd == "ladder":
        ladder([int(s) for s in args.sizes.split(",")], args.configs.split(","), args.budgets.split(","), not args.no_exact)
    elif args.cmd == "small":
        small(args.instances, args.time_limit, args.engine_time_limit)
    elif args.cmd == "falkenauer":
        falkenauer(args.time_limit)
    elif args.cmd == "pools":
        pools(args.pools, args.tasks, args.time_limit, args.max_moves, args.workers, args.wall_clock)
    elif args.cmd == "full-vs-budget":
        first, last = (int(x) for x in args.seeds.split("-"))
        full_vs_budget(range(first, last + 1), [int(b) for b in args.budgets.split(",")], not args.no_sens, args.time_limit, args.wall_clock)
    elif args.cmd == "known":
        known(args.tasks, [int(s) for s in args.seeds.split(",")], args.time_limit)
    else:
        trace, config, budget, solver, limit = args.args
        print(json.dumps(one(trace, config, budget, solver, float(limit)), default=lambda x: None if isinstance(x, float) and math.isnan(x) else float(x)))


if __name__ == "__main__":
    main()
