"""Are workload classes stable? The first and the second half of a real trace, classified apart (issue 10).

    python benchmarks/bench_class_stability.py [TRACE]

TRACE (default benchmarks/work/bitbrains, imported from ../shared/data if missing) is
split at the median timestamp into two traces with the same tasks and hosts; each half
is profiled and characterized. Printed: the share of tasks whose class (type/label) is
the same in both halves and the share whose sensitivity scores changed, for fresh
K-means fits of each half (the elbow's k, and k = 3), and for the second half
classified against the first half's centres (``--classes-from``).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from packer.characterization.characterize import Characterization, characterize
from packer.characterization.normalize import SENSITIVITY_DIMS
from packer.characterization.profile import profile_tasks
from packer.io.trace import FLEET_FILE, read_trace, write_trace

ROOT = Path(__file__).resolve().parent.parent
BITBRAINS = ROOT / "benchmarks" / "work" / "bitbrains"
SOURCE = ROOT.parent / "shared" / "data" / "bitbrains-rnd-2013-7"


def halves(trace_path: Path, work: Path) -> list:
    """The trace's two halves in time as (trace, profiles) pairs, written under ``work``."""
    trace = read_trace(trace_path)
    usage = pq.read_table(trace.usage_path)
    ts = usage.column("ts").cast("int64").to_numpy()
    middle = np.median(ts)
    fleet = trace_path / FLEET_FILE
    out = []
    for name, rows in (("first", ts < middle), ("second", ts >= middle)):
        path = write_trace(work / name, trace.hosts, trace.tasks, [usage.filter(rows)],
                           fleet_toml=fleet.read_text() if fleet.exists() else None)
        part = read_trace(path)
        out.append((part, profile_tasks(part).profiles))
    return out


def same_class(a: Characterization, b: Characterization) -> float:
    return float((a.tasks["type"] + "/" + a.tasks["class"]).eq(b.tasks["type"] + "/" + b.tasks["class"]).mean())


def scores_changed(a: Characterization, b: Characterization) -> float:
    dims = list(SENSITIVITY_DIMS)
    diff = np.abs(a.scores.tasks[dims].to_numpy(dtype=float) - b.scores.tasks[dims].to_numpy(dtype=float))
    return float((np.nan_to_num(diff) > 1e-9).any(axis=1).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", type=Path, nargs="?", default=BITBRAINS)
    args = parser.parse_args()
    if not args.trace.exists():
        if args.trace != BITBRAINS or not SOURCE.exists():
            sys.exit(f"{args.trace} is absent (the Bitbrains month lives in ../shared/data beside the repository)")
        packer = str(Path(sys.executable).with_name("packer"))
        subprocess.run([packer, "import", "bitbrains", str(SOURCE), "--drop-unfit", "--out", str(args.trace)], check=True)
    work = Path(tempfile.mkdtemp(prefix="packer-halves-"))
    try:
        (first, p1), (second, p2) = halves(args.trace, work)
        rows = []
        for label, k in (("fresh K-means fits, elbow k", None), ("fresh K-means fits, k = 3", 3)):
            a, b = characterize(first, p1, k=k), characterize(second, p2, k=k)
            rows.append((f"{label} (k per type: {a.classes.chosen_k} -> {b.classes.chosen_k})", same_class(a, b), scores_changed(a, b)))
        a = characterize(first, p1)
        b = characterize(second, p2, reference=a.classes.centroids)
        rows.append(("second half against the first half's centres (--classes-from)", same_class(a, b), scores_changed(a, b)))
    finally:
        shutil.rmtree(work)
    print(f"{args.trace}: {len(first.tasks)} tasks, first vs second half of the usage")
    for label, same, changed in rows:
        print(f"  {label}: same class {same:.1%}, scores changed {changed:.1%}")


if __name__ == "__main__":
    main()
