"""Benchmark `packer generate`: wall time and peak memory at the colocation paper's scale.

    .venv/bin/python benchmarks/bench_generate.py             # paper scale: 37k tasks, 18k hosts, 7 days, 300 s (~74.6M rows)
    .venv/bin/python benchmarks/bench_generate.py --large     # 7 days at 180 s (~124M rows), the profile benchmark's input

The trace goes to benchmarks/work/<name> (gitignored; replaced on every run). Peak
RSS is this process's ru_maxrss: the run does nothing but generate, so it is the
generator's peak. Printed numbers are measured, never estimated.
"""
from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import pyarrow.parquet as pq

from packer.io.generate import generate_trace

WORK = Path(__file__).resolve().parent / "work"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", action="store_true", help="7 days every 180 s (>= 100M usage rows) into benchmarks/work/large")
    parser.add_argument("--tasks", type=int, default=37_000)
    parser.add_argument("--hosts", type=int, default=18_000)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--interval", type=int, default=None, help="seconds between samples (default 300, or 180 with --large)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="default benchmarks/work/paper (or large)")
    args = parser.parse_args()
    interval = args.interval or (180 if args.large else 300)
    out = args.out or WORK / ("large" if args.large else "paper")

    start = time.perf_counter()
    summary = generate_trace(out, args.tasks, args.hosts, args.days, interval, args.seed)
    wall = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    usage_file = out / "usage.parquet"
    meta = pq.ParquetFile(usage_file).metadata

    print(f"generate: {summary.tasks:,} tasks, {summary.jobs:,} jobs, {summary.hosts:,} hosts ({summary.empty_hosts:,} empty), "
          f"{args.days:g} days every {interval} s")
    print(f"  usage rows        {summary.usage_rows:,} ({meta.num_row_groups} row groups)")
    print(f"  wall time         {wall:.1f} s ({summary.usage_rows / wall / 1e6:.2f} M rows/s)")
    print(f"  peak RSS          {peak_mib:,.0f} MiB")
    print(f"  usage.parquet     {usage_file.stat().st_size / 2**20:,.0f} MiB")
    print(f"  CPU requested     {summary.cpu_requested:.1%} of cores; used {summary.cpu_utilization:.1%}")
    print(f"  output            {out}")


if __name__ == "__main__":
    main()
