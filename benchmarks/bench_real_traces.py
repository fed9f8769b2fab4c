"""The sweep and its report on the real traces in ../shared/data (issue 6, item 5).

    python benchmarks/bench_real_traces.py [--time-limit 60] [--max-moves 400] [--verify] [--only bitbrains|openb] [--solver engine]

* Bitbrains Rnd 2013-7 (100 VMs, requests and 5-minute usage): imported with
  ``packer import bitbrains ../shared/data/bitbrains-rnd-2013-7 --drop-unfit`` into
  benchmarks/work/bitbrains, then swept like the paper-scale trace: requests (Baseline)
  against p99 usage (P99 CPU, P99 Mem, P99, P99 Sens with the weight ladder) and the
  baselines. The report has the paper comparison table.
* Alibaba openb (GPU cluster, requests only: no usage series): imported with
  ``packer import openb ../shared/data/alibaba-openb`` into benchmarks/work/openb. Only
  request-based configurations apply (Baseline and the baseline policies); the sweep
  lists the others as skipped and the report says so.

Imports are reused when their folders exist. Sweeps go to benchmarks/work/sweep-<trace>/
with the report in its report/ folder. When ../shared/data is absent the script says so
and exits 0 (a user's checkout has no real data).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "benchmarks" / "work"
SHARED = ROOT.parent / "shared" / "data"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweep import packer_command, run  # noqa: E402  (a sibling script, not a package)

#: name -> (source folder under ../shared/data, import command arguments after the source)
TRACES = {
    "bitbrains": ("bitbrains-rnd-2013-7", ["bitbrains"], ["--drop-unfit"]),
    "openb": ("alibaba-openb", ["openb"], []),
}


def ensure_import(name: str) -> Path | None:
    """The imported trace folder (imported now if missing); None with a message when the source is absent."""
    source_dir, command, extra = TRACES[name]
    source = SHARED / source_dir
    trace = WORK / name
    if trace.exists():
        print(f"{name}: using the imported trace {trace}", flush=True)
        return trace
    if not source.exists():
        print(f"{name}: skipped: {source} is absent (real data lives in ../shared/data beside the repository)", flush=True)
        return None
    cmd = [packer_command(), "import", *command, str(source), "--out", str(trace), *extra]
    print(f"{name}: importing: {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True)
    return trace


def main() -> None:
    from packer.model.build import RuleOptions
    from packer.report.sweep import SweepOptions

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time-limit", type=float, default=60.0, help="Seconds per optimizer solve.")
    parser.add_argument("--max-moves", type=int, default=400)
    parser.add_argument("--verify", action="store_true", help="Also run packer verify on every plan.")
    parser.add_argument("--only", choices=sorted(TRACES), default=None, help="Run one trace only.")
    parser.add_argument("--solver", default="auto", help="The sweep's optimizer (auto picks the exact CBC model up to 200 tasks).")
    args = parser.parse_args()
    if not SHARED.exists():
        print(f"skipped: {SHARED} is absent; the real traces (Bitbrains, openb) are not in a user's checkout")
        return
    failed = 0
    for name in [args.only] if args.only else TRACES:
        trace = ensure_import(name)
        if trace is None:
            continue
        print(f"\n=== {name} ===", flush=True)
        failed += run(trace, WORK / f"sweep-{name}", SweepOptions(rules=RuleOptions(max_moves=args.max_moves), time_limit_s=args.time_limit, solver=args.solver),
                      args.verify,
                      directions_required=False)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
