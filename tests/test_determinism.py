"""``--deterministic``: the same seed gives byte-identical plans under any machine load."""
from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import time

from packer.solvers.clock import SearchClock


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _solve(out, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from packer.cli.main import main; main()", "solve", "packer:sample", "--out", str(out), "--time-limit", "2",
                             "--seed", "7", *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_a_deterministic_solve_gives_the_same_plan_alone_and_under_load(tmp_path):
    alone = _solve(tmp_path / "alone", "--deterministic")
    assert alone.wait(timeout=120) == 0, alone.stdout.read().decode()
    # Two more solves at once and a busy process beside them: each gets well under the machine it had alone.
    busy = multiprocessing.get_context("spawn").Process(target=_busy, args=(12.0,))
    busy.start()
    try:
        loaded = [_solve(tmp_path / f"loaded{i}", "--deterministic") for i in range(2)]
        for run in loaded:
            assert run.wait(timeout=180) == 0, run.stdout.read().decode()
    finally:
        busy.terminate()
    for i in range(2):
        for name in ("placement.parquet", "moves.parquet", "moves.csv"):
            assert (tmp_path / f"loaded{i}" / name).read_bytes() == (tmp_path / "alone" / name).read_bytes()
        # The summary too, but for what the clock on the wall says (its bound comes from a search that counted work).
        summary = _untimed(tmp_path / f"loaded{i}")
        assert summary == _untimed(tmp_path / "alone")
        assert summary["context"]["deterministic"] is True
        assert summary["solver"]["stats"]["deterministic"]["wall_capped"] is False


def _untimed(plan) -> dict:
    """``plan``'s summary without wall-clock times."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("created_utc", "runtime_s", "wall_s", "pattern_wall_s")}
        return value
    return strip(json.loads((plan / "summary.json").read_text()))


def test_a_deterministic_clock_counts_work_not_time():
    clock = SearchClock(1.0, deterministic=True)
    time.sleep(0.05)
    assert clock.remaining() == 1.0 and not clock.expired()
    clock.spend(0.6)
    part = clock.part(2.0)
    assert part.limit == 0.4 and part.deterministic
    clock.spend(0.4)
    assert clock.expired()
    wall = SearchClock(0.01)
    wall.spend(100.0)
    assert not wall.expired() or wall.wall() >= 0.01  # spending is only counted by a deterministic clock
    time.sleep(0.02)
    assert wall.expired()
