"""Interrupting `packer solve` with real signals keeps the best valid plan; atomic writes survive kills and concurrent writers.

Each solve test starts a real `packer solve` subprocess with a long --time-limit, waits
for a line of its stderr that shows the phase, sends SIGINT/SIGTERM and checks the exit
code, that it stopped long before the time limit, and that what it wrote passes
`packer verify` and is marked interrupted (or that nothing was written).
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from packer import interrupt
from packer.io.atomic import atomic_dir, remove_dead_siblings
from packer.io.resources import sample_trace
from packer.solvers.patterns import column_generation
from problems import known_optimum_problem

TIME_LIMIT = 120
PACKER = [sys.executable, "-c", "from packer.cli.main import main; main()"]


class Solve:
    """A `packer solve` subprocess whose stderr lines are collected as they come."""

    def __init__(self, out: Path, *args: str, trace: Path | None = None) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen([*PACKER, "solve", str(trace or sample_trace()), "--out", str(out), "--time-limit", str(TIME_LIMIT), *args],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.process.stderr), daemon=True)
        self.reader.start()

    def wait_for(self, needle: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(needle in line for line in self.lines):
            assert self.process.poll() is None, f"exited before '{needle}':\n{''.join(self.lines)}"
            assert time.monotonic() < deadline, f"no '{needle}' within {timeout} s:\n{''.join(self.lines)}"
            time.sleep(0.02)

    def stop(self, *signals: int, pause: float = 0.0) -> tuple[int, str, str]:
        """Send ``signals`` (``pause`` s apart); the exit code, stdout and stderr once it has exited.

        ``self.stopping_s``: seconds from the first signal to the exit (the time limit is :data:`TIME_LIMIT`).
        """
        sent = time.monotonic()
        for sig in signals:
            self.process.send_signal(sig)
            time.sleep(pause)
        out = self.process.stdout.read()
        code = self.process.wait(timeout=60)
        self.reader.join()
        self.stopping_s = time.monotonic() - sent
        return code, out, "".join(self.lines)


def verified(out: Path, trace: Path | None = None) -> dict:
    check = subprocess.run([*PACKER, "verify", str(trace or sample_trace()), str(out)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    return json.loads((out / "summary.json").read_text())


def no_debris(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.suffix in (".tmp", ".old")]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_the_engine_search_writes_its_best_plan(tmp_path, sig, code):
    run = Solve(tmp_path / "plan", "--solver", "engine", "--max-moves", "100")
    run.wait_for("construction done")
    exit_code, out, err = run.stop(sig)
    assert exit_code == code, err
    assert run.stopping_s < 10
    summary = verified(tmp_path / "plan")
    assert summary["solver"]["stats"]["interrupted"] is True
    assert summary["metrics"]["after"]["moves"] > 0  # the construction's plan, not the current placement
    assert "interrupted" in out and f"interrupted by {signal.Signals(sig).name}" in err
    no_debris(tmp_path)


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory) -> Path:
    """180 tasks: CBC's model of the sample (53,444 task-host pairs) is above what packer lets CBC try."""
    out = tmp_path_factory.mktemp("small") / "trace"
    subprocess.run([*PACKER, "generate", "--tasks", "180", "--hosts", "87", "--days", "0.25", "--seed", "0", "--out", str(out)],
                   check=True, capture_output=True)
    return out


@pytest.mark.parametrize("solver, phase, after", [("cpsat", "profiling usage", 6.0), ("cbc", "profiling usage", 6.0),
                                                  ("highs", "profiling usage", 6.0)])
def test_a_signal_during_an_exact_search_writes_a_valid_plan(tmp_path, small_trace, solver, phase, after):
    trace = small_trace if solver == "cbc" else None
    moves = "400" if solver == "cbc" else "40"  # CBC proves 40 moves on 180 tasks optimal in seconds; 400, not in minutes
    run = Solve(tmp_path / "plan", "--solver", solver, "--max-moves", moves, trace=trace)
    run.wait_for(phase)
    time.sleep(after)  # into the solver's search (profiling the sample takes ~1 s, building the model a few)
    exit_code, out, err = run.stop(signal.SIGINT)
    assert exit_code == 130, err
    assert run.stopping_s < 20, err  # CBC gets 10 s to stop, HiGHS (which ignores the interrupter) 2 s
    summary = verified(tmp_path / "plan", trace)
    assert summary["solver"]["stats"]["interrupted"] is True
    assert "status:" in out and "interrupted" in out


@pytest.fixture(scope="module")
def long_usage_trace(tmp_path_factory) -> Path:
    """3M usage rows (300 tasks, a week every minute): profiling them takes about a second, the sample's a few hundredths."""
    out = tmp_path_factory.mktemp("long") / "trace"
    subprocess.run([*PACKER, "generate", "--tasks", "300", "--hosts", "150", "--days", "7", "--interval", "60", "--seed", "0",
                    "--out", str(out)], check=True, capture_output=True)
    return out


def test_a_signal_while_profiling_writes_nothing(tmp_path, long_usage_trace):
    run = Solve(tmp_path / "plan", "--solver", "engine", trace=long_usage_trace)
    run.wait_for("profiling usage")
    exit_code, out, err = run.stop(signal.SIGTERM)
    assert exit_code == 143, err
    assert run.stopping_s < 5
    assert "before there was a plan: nothing written" in err
    assert "Traceback" not in err
    assert not (tmp_path / "plan").exists()
    no_debris(tmp_path)


def test_a_second_sigint_aborts_at_once(tmp_path):
    run = Solve(tmp_path / "plan", "--solver", "highs")  # HiGHS ignores the first SIGINT: packer abandons it after 2 s
    run.wait_for("profiling usage")
    # Into HiGHS's search: beside a busy test run, profiling, characterization and the model took more than 6 s.
    time.sleep(12.0)
    exit_code, out, err = run.stop(signal.SIGINT, signal.SIGINT, pause=0.5)
    assert exit_code == 130, err
    assert run.stopping_s < 4, err
    assert "aborted by a second SIGINT" in err
    assert not (tmp_path / "plan").exists()
    no_debris(tmp_path)


def test_a_signal_while_the_plan_is_written_finishes_the_write(tmp_path):
    """The write is held: a SIGTERM there (sent from inside via the plan's summary hook) completes it, then exits 143."""
    script = (
        "import os, signal, sys\n"
        "from packer.plan import plan as plan_module\n"
        "real = plan_module.render_report\n"
        "def render(summary):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return real(summary)\n"
        "plan_module.render_report = render\n"
        "from packer.cli.main import main\n"
        f"sys.argv = ['packer', 'solve', {str(sample_trace())!r}, '--out', {str(tmp_path / 'plan')!r}, '--solver', 'engine',"
        " '--max-moves', '10', '--time-limit', '2']\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 143, done.stderr
    assert "SIGTERM received after the search had finished" in done.stderr
    summary = verified(tmp_path / "plan")
    assert summary["solver"]["stats"]["interrupted"] is False
    no_debris(tmp_path)


def _swap(folder: str, tag: str, times: int) -> None:
    for i in range(times):
        with atomic_dir(folder) as tmp:
            (tmp / "a.txt").write_text(f"{tag} {i}")
            (tmp / "b.txt").write_text(f"{tag} {i}")


def test_concurrent_writers_of_one_folder_never_fail_nor_leave_debris(tmp_path):
    folder = tmp_path / "plan"
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_swap, args=(str(folder), tag, 100)) for tag in ("x", "y")]
    for w in writers:
        w.start()
    for w in writers:
        w.join(60)
    assert [w.exitcode for w in writers] == [0, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan"]
    a, b = (folder / "a.txt").read_text(), (folder / "b.txt").read_text()
    assert a == b and a in ("x 99", "y 99")


def test_temporary_folders_of_dead_runs_are_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    debris = [tmp_path / f".plan.{pid}.abcd1234.tmp", tmp_path / f".plan.{pid}.abcd1234.old"]
    for d in debris:
        d.mkdir()
        (d / "placement.parquet").write_text("half")
    live = tmp_path / f".plan.{os.getpid()}.efgh5678.tmp"  # a writer still running: kept
    live.mkdir()
    with atomic_dir(tmp_path / "plan") as tmp:
        (tmp / "a.txt").write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["plan", live.name])
    assert remove_dead_siblings(tmp_path / "plan") == []


def test_a_stop_request_waits_for_held_work_and_stops_the_next_stoppable_region():
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN where the run was started in the background
    with interrupt.handle_signals():
        finished = []
        with interrupt.held():
            signal.raise_signal(signal.SIGTERM)
            finished.append("held work")
        assert finished == ["held work"] and interrupt.stop_signal() == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt), interrupt.stoppable():
            finished.append("stoppable work")
        assert finished == ["held work"]
        with pytest.raises(interrupt.Abort):
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before and not interrupt.stop_requested()


def test_a_native_solve_that_ignores_the_stop_is_abandoned_after_its_grace():
    release, stops = threading.Event(), []
    with interrupt.handle_signals():
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            interrupt.run_stoppable(lambda: release.wait(30), lambda: stops.append(1), grace=0.5)
        assert time.monotonic() - started < 3 and stops
    release.set()


def test_column_generation_ends_at_a_stop_request_with_a_valid_bound():
    # Unstopped, this run prices for about 7 s (269 iterations) before it converges.
    problem, optimum = known_optimum_problem(5, 1000)
    with interrupt.handle_signals():
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        started = time.monotonic()
        found = column_generation(problem, time_limit=30)
        stopped_after = time.monotonic() - started
        assert interrupt.stop_requested()
    assert stopped_after < 3 and not found.converged
    assert found.bound <= optimum


def test_a_signal_during_a_sweep_writes_the_points_solved(tmp_path):
    out = tmp_path / "sweep"
    process = subprocess.Popen([*PACKER, "sweep", str(sample_trace()), "--out", str(out), "--config", "baseline", "--config", "p99",
                                "--config", "p99-cpu", "--no-baselines", "--no-risk-free-point", "--refine", "0",
                                "--solver", "engine", "--time-limit", "8"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while not any("[ 1/3]" in line for line in lines):  # the first point is solved; the second starts
        assert process.poll() is None and time.monotonic() < deadline, "".join(lines)
        time.sleep(0.05)
    time.sleep(2.0)
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    code = process.wait(timeout=60)
    reader.join()
    err = "".join(lines)
    assert code == 130, err
    assert time.monotonic() - sent < 6, err  # well before the second solve's 8 s
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["interrupted"] is True and len(meta["points"]) == 2 and len(meta["not_run"]) == 1
    assert "interrupted by SIGINT" in err and "Traceback" not in err
    for point in meta["points"]:
        verified(out / "plans" / point)
    no_debris(tmp_path)


def test_a_signal_during_column_generation_stops_the_solve(tmp_path):
    # CP-SAT prices the patterns: its own SIGINT handler must not take the signal from packer.
    run = Solve(tmp_path / "plan", "--solver", "engine", "--max-moves", "unlimited")
    run.wait_for("column generation")
    time.sleep(1.0)
    exit_code, out, err = run.stop(signal.SIGINT)
    assert exit_code == 130, err
    assert run.stopping_s < 10, err
    summary = verified(tmp_path / "plan")
    assert summary["solver"]["stats"]["interrupted"] is True
