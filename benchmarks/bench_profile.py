"""Benchmark `packer profile` against the naive pandas way on a large generated trace.

    python benchmarks/bench_profile.py [TRACE] [--skip-naive]
    python benchmarks/bench_profile.py TRACE --row-order [--repeat N]
    python benchmarks/bench_profile.py TRACE --engine dask [--workers N] [--skip-naive]

--engine dask profiles TRACE with the local engine and on a local Dask cluster of N
single-threaded workers (default 2; needs packer[dask]), checks that the two are
bitwise identical, and compares both with the pandas groupby-quantile reference. For
Dask it reports the wall time with and without the cluster's start, the driver's peak
RSS and the largest peak RSS of the cluster's processes (reaped when it stops).

--row-order instead profiles TRACE (usage sorted by task, as generated) and a copy
whose usage is sorted by time, as public traces are published (TRACE-by-time,
written first if missing, with row groups of the same size), and checks that the
two profiles are bitwise identical. Each is run N times (default 3), alternating;
the fastest run of each is reported.

TRACE defaults to benchmarks/work/profile-100m, generated first if missing with
`packer generate --tasks 37000 --hosts 18000 --days 7 --interval 180` (~124M usage
rows). Each method runs in its own child process, which reports its wall time and
peak RSS (ru_maxrss), so the two measurements do not disturb each other. Both
compute the p99 of 60-s window means per task and dimension; the script checks that
their results agree.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "benchmarks" / "work"

PACKER = """
import json, resource, sys, time
import packer
from packer.io.trace import read_trace
from packer.characterization.profile import profile_tasks
t0 = time.perf_counter()
r = profile_tasks(read_trace(sys.argv[1]), [99.0], 60)
wall = time.perf_counter() - t0
r.profiles.to_parquet(sys.argv[2])
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall_s": wall, "cpu_s": use.ru_utime + use.ru_stime, "peak_rss_mib": use.ru_maxrss / 1024, "rows": r.rows, "code": packer.__file__}))
"""

DASK = """
import json, resource, sys, time
import packer
from packer.io.trace import read_trace
from packer.characterization.profile_dask import profile_tasks_dask
from packer.distributed import dask_client
if __name__ == "__main__":  # the cluster's worker processes are spawned: they import this module
    t0 = time.perf_counter()
    with dask_client(workers=int(sys.argv[3])) as client:
        t1 = time.perf_counter()
        r = profile_tasks_dask(read_trace(sys.argv[1]), client, [99.0], 60)
        t2 = time.perf_counter()
    r.profiles.to_parquet(sys.argv[2])
    use = resource.getrusage(resource.RUSAGE_SELF)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"wall_s": t2 - t1, "with_start_s": t2 - t0, "peak_rss_mib": use.ru_maxrss / 1024,
                      "cluster_peak_rss_mib": workers.ru_maxrss / 1024, "rows": r.rows, "code": packer.__file__}))
"""

NAIVE = """
import json, resource, sys, time
import pandas as pd
t0 = time.perf_counter()
u = pd.read_parquet(sys.argv[1] + "/usage.parquet", columns=["task_id", "ts", "cpu", "mem", "net"])
u["win"] = (u["ts"] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=60)
w = u.groupby(["task_id", "win"])[["cpu", "mem", "net"]].mean()
p = w.groupby(level="task_id").quantile(0.99)
wall = time.perf_counter() - t0
p.add_suffix("_p99").reset_index().to_parquet(sys.argv[2])
print(json.dumps({"wall_s": wall, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rows": len(u)}))
"""


def run(code: str, trace: Path, out: Path, *args: str) -> dict:
    # Run as a script file, not -c: the Dask cluster's spawned workers re-import the main module.
    script = WORK / "bench_child.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script), str(trace), str(out), *args], capture_output=True, text=True)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


TIME_SORTED_COPY = """
import shutil, sys
from pathlib import Path
import pyarrow.parquet as pq
trace, out = Path(sys.argv[1]), Path(sys.argv[2])
source = trace / "usage.parquet"
group_rows = pq.ParquetFile(source).metadata.row_group(0).num_rows
shutil.copytree(trace, out, ignore=shutil.ignore_patterns("usage.parquet"))
pq.write_table(pq.read_table(source).sort_by("ts"), out / "usage.parquet", row_group_size=group_rows, compression="zstd")
"""


def time_sorted_copy(trace: Path) -> Path:
    """``trace`` with its usage rows sorted by ``ts`` (stable: by task within a timestamp), same row-group size.
    Written by a child process: Linux keeps a process's peak RSS across fork and exec, so the children that
    measure would report this one's."""
    out = trace.with_name(trace.name + "-by-time")
    if not out.exists():
        tmp = out.with_name(out.name + ".tmp")
        subprocess.run([sys.executable, "-c", TIME_SORTED_COPY, str(trace), str(tmp)], check=True)
        tmp.rename(out)
    return out


def row_order(trace: Path, repeat: int) -> None:
    """Profile ``trace`` and its time-sorted copy ``repeat`` times each, alternating; keep each one's fastest run."""
    import pandas as pd

    by_time = time_sorted_copy(trace)
    results: dict[str, dict] = {}
    for _ in range(repeat):
        for name, path in (("task-sorted", trace), ("time-sorted", by_time)):
            r = run(PACKER, path, WORK / f"profiles-{name}.parquet")
            print(f"{name}:", r, flush=True)
            if "wall_s" in r and r["wall_s"] < results.get(name, {}).get("wall_s", float("inf")):
                results[name] = r
    if len(results) == 2:
        a, b = (pd.read_parquet(WORK / f"profiles-{name}.parquet") for name in results)
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        task, time_ = results["task-sorted"], results["time-sorted"]
        print(f"\nrows: {task['rows']:,}  machine: {platform.machine()} {platform.processor() or ''}, Python {platform.python_version()}")
        for name, r in results.items():
            print(f"{name}: {r['wall_s']:.1f} s ({r['cpu_s']:.1f} s CPU, all of the process), peak RSS {r['peak_rss_mib']:,.0f} MiB (fastest of {repeat})")
        print(f"time-sorted / task-sorted: {time_['wall_s'] / task['wall_s']:.2f}x; profiles bitwise identical")


def dask_engine(trace: Path, workers: int, skip_naive: bool) -> None:
    """Profile ``trace`` with the local engine, on a local Dask cluster of ``workers`` workers and (unless ``skip_naive``) with pandas."""
    import numpy as np
    import pandas as pd

    local = run(PACKER, trace, WORK / "profiles-packer.parquet")
    print("local:", local, flush=True)
    dask = run(DASK, trace, WORK / "profiles-dask.parquet", str(workers))
    print(f"dask ({workers} workers):", dask, flush=True)
    naive = {} if skip_naive else run(NAIVE, trace, WORK / "profiles-naive.parquet")
    if naive:
        print("naive:", naive, flush=True)
    if "wall_s" not in local or "wall_s" not in dask:
        return
    a, b = pd.read_parquet(WORK / "profiles-packer.parquet"), pd.read_parquet(WORK / "profiles-dask.parquet")
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    print(f"\nrows: {local['rows']:,}  machine: {platform.machine()} {platform.processor() or ''}, Python {platform.python_version()}")
    print(f"local engine: {local['wall_s']:.1f} s, peak RSS {local['peak_rss_mib']:,.0f} MiB")
    print(f"dask, {workers} workers: {dask['wall_s']:.1f} s ({dask['with_start_s']:.1f} s with the cluster's start), driver peak RSS "
          f"{dask['peak_rss_mib']:,.0f} MiB, largest cluster process {dask['cluster_peak_rss_mib']:,.0f} MiB; profiles bitwise identical to local")
    if "wall_s" in naive:
        c = pd.read_parquet(WORK / "profiles-naive.parquet").set_index("task_id").reindex(b["task_id"])
        worst = max(float(np.nanmax(np.abs(b[col].to_numpy() - c[col].to_numpy()))) for col in ("cpu_p99", "mem_p99", "net_p99"))
        print(f"pandas groupby-quantile: {naive['wall_s']:.1f} s, peak RSS {naive['peak_rss_mib']:,.0f} MiB; max |p99 difference| {worst:.2e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", nargs="?", type=Path, default=WORK / "profile-100m")
    ap.add_argument("--skip-naive", action="store_true", help="only time packer")
    ap.add_argument("--row-order", action="store_true", help="time packer on TRACE and on a copy of it sorted by time")
    ap.add_argument("--repeat", type=int, default=3, help="with --row-order: runs of each, the fastest reported")
    ap.add_argument("--engine", choices=["local", "dask"], default="local", help="dask: compare the local engine with a local Dask cluster")
    ap.add_argument("--workers", type=int, default=2, help="with --engine dask: worker processes of the cluster")
    args = ap.parse_args()
    if not args.trace.exists():
        cmd = [str(Path(sys.executable).with_name("packer")), "generate", "--tasks", "37000", "--hosts", "18000", "--days", "7", "--interval", "180", "--seed", "0", "--out", str(args.trace)]
        print("generating:", " ".join(cmd), flush=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        print(f"generated in {time.perf_counter() - t0:.0f} s", flush=True)
    WORK.mkdir(parents=True, exist_ok=True)
    if args.row_order:
        row_order(args.trace, args.repeat)
        return
    if args.engine == "dask":
        dask_engine(args.trace, args.workers, args.skip_naive)
        return
    packer = run(PACKER, args.trace, WORK / "profiles-packer.parquet")
    print("packer:", packer, flush=True)
    naive = {} if args.skip_naive else run(NAIVE, args.trace, WORK / "profiles-naive.parquet")
    if naive:
        print("naive: ", naive, flush=True)
    if "wall_s" in packer and "wall_s" in naive:
        import numpy as np
        import pandas as pd

        a = pd.read_parquet(WORK / "profiles-packer.parquet").set_index("task_id")
        b = pd.read_parquet(WORK / "profiles-naive.parquet").set_index("task_id").reindex(a.index)
        worst = max(float(np.nanmax(np.abs(a[c] - b[c]))) for c in ("cpu_p99", "mem_p99", "net_p99"))
        print(f"\nrows: {packer['rows']:,}  machine: {platform.machine()} {platform.processor() or ''}, Python {platform.python_version()}")
        print(f"packer: {packer['wall_s']:.1f} s, peak RSS {packer['peak_rss_mib']:,.0f} MiB")
        print(f"naive:  {naive['wall_s']:.1f} s, peak RSS {naive['peak_rss_mib']:,.0f} MiB")
        print(f"speed-up {naive['wall_s'] / packer['wall_s']:.1f}x, memory {packer['peak_rss_mib'] / naive['peak_rss_mib']:.1%} of naive; max |p99 difference| {worst:.2e}")


if __name__ == "__main__":
    main()
