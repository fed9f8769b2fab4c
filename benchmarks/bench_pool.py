"""Statistics of a trace's current placement: is it a pool like the colocation paper's? (issue 10)

    python benchmarks/bench_pool.py TRACE [TRACE ...]

Per trace: hosts in use, tasks per host, single-task hosts, how full hosts are by
requests (in their binding dimension), requested against used CPU (mean and p99 of
usage, from the trace's profiles), the tasks on an architecture their sensitivity
makes ineligible, and the tasks at risk before any move on packer's default
sensitivity basis (p99-sens yardstick, as a sweep measures them). Profiles are
computed if the trace has none under out/.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from packer.model.metrics import evaluate
from packer.plan.context import PlanContext
from packer.io.presets import get_preset
from packer.characterization.profile import profile_tasks
from packer.plan.context import characterize_from_context, problem_from_context
from packer.io.trace import read_trace

DIMS = ("cpu", "mem")


def pool_statistics(path: Path) -> dict[str, float]:
    """The numbers above for the trace folder ``path`` (shares are fractions)."""
    trace = read_trace(path)
    tasks, fleet = trace.tasks, trace.fleet
    arch = tasks["host_id"].map(trace.hosts.set_index("host_id")["arch"]).to_numpy()
    capacity = np.stack([fleet.capacity(d).reindex(trace.hosts["arch"]).to_numpy() for d in DIMS], axis=1)
    host = pd.Index(trace.hosts["host_id"]).get_indexer(tasks["host_id"])
    requested = np.zeros_like(capacity)
    np.add.at(requested, host, tasks[[f"{d}_request" for d in DIMS]].to_numpy(dtype=float))
    count = np.bincount(host, minlength=len(trace.hosts))
    used_hosts = count > 0
    fill = (requested / capacity).max(axis=1)
    profiles = profile_tasks(trace).profiles.set_index("task_id").reindex(tasks["task_id"])
    cores = float(capacity[:, 0].sum())
    context = PlanContext(trace=str(path), config="p99-sens")
    characterization = characterize_from_context(trace, profiles.reset_index(), context)
    problem = problem_from_context(trace, get_preset("p99-sens"), context, profiles.reset_index(), characterization=characterization)
    eligible_here = problem.eligible[np.arange(problem.n_tasks), problem.host_arch[problem.current]]
    risk = evaluate(problem, problem.current).tasks_at_risk
    return {
        "tasks": len(tasks), "hosts": len(trace.hosts), "hosts in use": int(used_hosts.sum()),
        "tasks per host in use": float(count[used_hosts].mean()),
        "single-task hosts (share of hosts in use)": float((count == 1).sum() / used_hosts.sum()),
        "binding-dimension fill of hosts in use, mean": float(fill[used_hosts].mean()),
        "binding-dimension fill of hosts in use, p10": float(np.percentile(fill[used_hosts], 10)),
        "CPU requested / all cores": float(tasks["cpu_request"].sum() / cores),
        "memory requested / all memory": float(requested[:, 1].sum() / capacity[:, 1].sum()),
        "CPU used (mean) / all cores": float(profiles["cpu_mean"].sum() / cores),
        "CPU p99 / request, median": float(np.nanmedian(profiles["cpu_p99"].to_numpy() / tasks["cpu_request"].to_numpy())),
        "tasks on an ineligible architecture": int((~eligible_here).sum()),
        "tasks at risk before any move (need basis)": int(risk),
        "tasks at risk before any move, share": risk / len(tasks),
        "types": ", ".join(f"{t}: {n:,}" for t, n in pd.Series(fleet.archs["type"].reindex(arch).to_numpy()).value_counts().sort_index().items()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", type=Path, nargs="+")
    args = parser.parse_args()
    for path in args.traces:
        start = time.perf_counter()
        stats = pool_statistics(path)
        print(f"\n{path} ({time.perf_counter() - start:.1f} s)")
        for name, value in stats.items():
            shown = f"{value:.1%}" if isinstance(value, float) and ("share" in name or "/" in name or "fill" in name) else (
                f"{value:,.2f}" if isinstance(value, float) else (f"{value:,}" if isinstance(value, int) else value))
            print(f"  {name:<48} {shown}")


if __name__ == "__main__":
    main()
