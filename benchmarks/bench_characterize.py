"""Benchmark `packer characterize` at the colocation paper's scale (37,000 tasks, 18,000 hosts).

    python benchmarks/bench_characterize.py [--tasks 37000] [--hosts 18000] [--seed 0]

The trace's hosts and tasks come from packer.io.generate (jobs, hosts, request-based
placement; no usage is generated). Profiles are synthetic: p99 = request x the
job's mean utilization level from the generator x 1.6 x per-task lognormal noise
(sigma 0.25), clipped to 1.2 x request, with 2% of tasks
unprofiled (NaN) so the request-based fallback runs too. The measured step runs in a
child process that reports wall time per phase and peak RSS (ru_maxrss) before and
after, so the setup does not count:

* characterize, first call in the process (so one-time library warm-up counts):
  K-means per host type for k = 1..8 and the elbow, score assignment, Eq. 1 for
  every task and architecture, eligibility, the per-task table;
* the classes alone, a second time (warm);
* the same with --infer (one cell of the shipped table emptied and inferred);
* write: tasks.parquet, report.md and wcss.png.
Target (issue "Characterization"): under 10 s for 37,000 tasks.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
P99_OVER_MEAN = 1.6

CHILD = """
import json, resource, sys, time
from pathlib import Path
import pandas as pd
from packer.io.trace import read_trace
from packer.characterization.classes import classify_tasks
from packer.characterization.characterize import characterize, write_characterization

trace = read_trace(sys.argv[1])
profiles = pd.read_parquet(sys.argv[2])
partial = sys.argv[3]
out = Path(sys.argv[4])
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
before = rss()
t0 = time.perf_counter()
result = characterize(trace, profiles, seed=0)
t1 = time.perf_counter()
classes = classify_tasks(profiles, trace.tasks, trace.hosts, trace.fleet, seed=0)
t2 = time.perf_counter()
inferred = characterize(trace, profiles, seed=0, sensitivity=partial, infer=True)
t3 = time.perf_counter()
write_characterization(result, out)
t4 = time.perf_counter()
print(json.dumps({
    "tasks": len(trace.tasks), "hosts": len(trace.hosts), "chosen_k": classes.chosen_k,
    "characterize_s": t1 - t0, "classify_s": t2 - t1, "characterize_infer_s": t3 - t2, "write_s": t4 - t3,
    "rss_before_mib": before, "peak_rss_mib": rss(),
    "unprofiled": int((~result.tasks["profiled"]).sum()), "inferred_entries": len(inferred.inferred),
    "score_sources": result.tasks["score_source"].value_counts().to_dict(),
    "eligible_share_per_arch": dict(zip(result.normalized.archs, result.eligible.mean(axis=0).round(3).tolist())),
}))
"""


def build(work: Path, tasks: int, hosts: int, seed: int) -> tuple[Path, Path, Path]:
    """Write the trace (no usage), the synthetic profiles and a sensitivity table with one empty cell."""
    from packer.io.fleet import load_fleet
    from packer.io.generate import make_hosts, make_jobs, place_by_requests
    from packer.io.trace import write_trace

    fleet = load_fleet()
    jobs = make_jobs(tasks, seed)
    host_table = make_hosts(hosts, fleet)
    task_table = place_by_requests(jobs, host_table, fleet, seed)
    job_of = pd.Index(jobs["job_id"]).get_indexer(task_table["job_id"])
    task_table["service"] = jobs["service"].to_numpy()[job_of]
    trace = write_trace(work / "trace", host_table, task_table)

    rng = np.random.default_rng(seed)
    profiles = pd.DataFrame({"task_id": task_table["task_id"].to_numpy()})
    for dim in ("cpu", "mem", "net"):
        # The generator's mean utilization level of the job; the p99 sits above the mean (x P99_OVER_MEAN).
        level = jobs[f"{dim}_level"].to_numpy(dtype=float)[job_of] * P99_OVER_MEAN
        noise = rng.lognormal(0.0, 0.25, len(task_table))
        request = task_table[f"{dim}_request"].to_numpy()
        profiles[f"{dim}_p99"] = np.minimum(request * level * noise, request * 1.2)
    missing = rng.random(len(task_table)) < 0.02
    profiles.loc[missing, ["cpu_p99", "mem_p99", "net_p99"]] = np.nan
    profiles_path = work / "profiles.parquet"
    profiles.to_parquet(profiles_path, index=False)

    partial = work / "sensitivity-partial.csv"
    shipped = (ROOT / "models" / "sensitivity.csv").read_text()
    partial.write_text(shipped.replace("Rank2,high,Broadwell20,0.93,", "Rank2,high,Broadwell20,,"))
    return trace, profiles_path, partial


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=37_000)
    parser.add_argument("--hosts", type=int, default=18_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-characterize-") as tmp:
        work = Path(tmp)
        trace, profiles, partial = build(work, args.tasks, args.hosts, args.seed)
        proc = subprocess.run([sys.executable, "-c", CHILD, str(trace), str(profiles), str(partial), str(work / "out")],
                              capture_output=True, text=True, check=True)
    m = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print(f"{m['tasks']:,} tasks on {m['hosts']:,} hosts; {m['unprofiled']:,} unprofiled; chosen k per type: {m['chosen_k']}")
    print(f"characterize, first call (classes + sensitivity + Eq. 1 + table): {m['characterize_s']:6.2f} s")
    print(f"  classes alone, second call (K-means k=1..8 per type + elbow):    {m['classify_s']:6.2f} s")
    print(f"characterize with --infer ({m['inferred_entries']} entry inferred), warm:          {m['characterize_infer_s']:6.2f} s")
    print(f"write tasks.parquet + report.md + wcss.png:                       {m['write_s']:6.2f} s")
    total = m["characterize_s"] + m["write_s"]
    print(f"total first characterize + write: {total:.2f} s (target < 10 s: {'met' if total < 10 else 'NOT met'})")
    print(f"peak RSS: {m['peak_rss_mib']:.0f} MiB (after loading trace and profiles: {m['rss_before_mib']:.0f} MiB)")
    print(f"score sources: {m['score_sources']}")
    print(f"share of tasks eligible per architecture: {m['eligible_share_per_arch']}")


if __name__ == "__main__":
    main()
