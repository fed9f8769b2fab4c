"""Work side by side: sweep points on worker processes (the serial sweep's table), pools solved apart under one move budget.

The process pool (`packer.parallel.StoppablePool`) starts in a few seconds on a busy
machine, so one pool serves the in-process tests of this module.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from click.testing import CliRunner

from conftest import crowdable_trace, tiny_tables, write_tables
from packer import api
from packer.cli import cli
from packer.io.generate import generate_trace
from packer.io.pools import combine_pools
from packer.io.presets import get_preset
from packer.io.trace import read_trace
from packer.parallel import InlineExecutor, StoppablePool
from packer.plan.context import PlanContext, problem_from_context
from packer.report.sweep import SweepOptions, run_sweep
from packer.model.build import RuleOptions
from packer.solvers.pools import split_budget

PACKER = [sys.executable, "-c", "from packer.cli.main import main; main()"]


@pytest.fixture(scope="module")
def pool_executor():
    with StoppablePool(2) as executor:
        yield executor


@pytest.fixture(scope="module")
def pooled_trace(tmp_path_factory) -> Path:
    """Three pools of 24 tasks on 8 hosts each (``tiny_tables`` with three seeds), ids prefixed ``pool<i>/``."""
    root = tmp_path_factory.mktemp("pools")
    parts = [write_tables(root / f"part{i}", *tiny_tables(n_tasks=24, n_hosts=8, seed=i)) for i in range(3)]
    return combine_pools(parts, root / "pooled")


def _pool_of(trace: Path) -> pd.Series:
    hosts = pd.read_parquet(trace / "hosts.parquet")
    return hosts.set_index("host_id")["pool"]


# --- sweeps ---


def test_a_parallel_sweep_writes_the_table_of_a_serial_one(tmp_path, pool_executor):
    trace = crowdable_trace(tmp_path / "t")
    options = SweepOptions(configs=("p99", "p99-sens"), weights=(0.0, 100.0), refine=2, baselines=("baseline-ffd", "baseline-paragon"),
                           time_limit_s=2, deterministic=True)
    serial = run_sweep(trace, tmp_path / "serial", options)
    parallel = run_sweep(trace, tmp_path / "parallel", options, executor=pool_executor)
    # The refinements (which depend on the ladder's results) are the serial order's, in its order.
    assert parallel.table["point"].tolist() == serial.table["point"].tolist() == [
        "p99", "p99-sens-w0", "p99-sens-w100", "p99-sens-no-new-risk", "baseline-ffd", "baseline-paragon", "p99-sens-w33", "p99-sens-w11"]
    pd.testing.assert_frame_equal(parallel.table.drop(columns="wall_s"), serial.table.drop(columns="wall_s"))
    a, b = (json.loads((s.path / "sweep.json").read_text()) for s in (serial, parallel))
    assert {key for key in a if a[key] != b[key]} <= {"timings"}
    for point in serial.table["point"]:
        placements = [pd.read_parquet(s.path / "plans" / point / "placement.parquet") for s in (serial, parallel)]
        pd.testing.assert_frame_equal(*placements)


def test_a_parallel_sweep_resumes_like_a_serial_one(tmp_path, pool_executor):
    hosts, tasks, usage = tiny_tables(n_tasks=10, n_hosts=4)
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    options = SweepOptions(configs=("baseline", "p99"), weights=(1.0,), baselines=("baseline-ffd",), time_limit_s=2, refine=0)
    first = run_sweep(trace, tmp_path / "sweep", options, executor=pool_executor)
    solved = []
    again = run_sweep(trace, tmp_path / "sweep", options, resume=True, executor=pool_executor,
                      progress=lambda e: e.row and not e.resumed and solved.append(e.point.name))
    assert solved == [] and sorted(again.meta["resumed"]) == sorted(first.meta["points"])


def test_a_signal_during_a_parallel_sweep_stops_the_running_points_and_writes_them(tmp_path):
    out = tmp_path / "sweep"
    process = subprocess.Popen([*PACKER, "sweep", str(_sample()), "--out", str(out),
                                "--config", "baseline", "--config", "p99", "--config", "p99-cpu", "--config", "p99-mem",
                                "--no-baselines", "--no-risk-free-point", "--refine", "0", "--solver", "engine", "--max-moves", "unlimited",
                                "--time-limit", "60", "--workers", "2"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
    reader.start()
    time.sleep(12.0)  # profiling, the workers' start, then into the first two points' searches
    assert process.poll() is None, "".join(lines)
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    code = process.wait(timeout=60)
    reader.join()
    err = "".join(lines)
    assert code == 130, err
    assert time.monotonic() - sent < 20, err  # far below the points' 60 s
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["interrupted"] is True and meta["not_run"] and meta["points"]
    assert len(meta["points"]) + len(meta["not_run"]) == 4
    for point in meta["points"]:
        assert api.verify(_sample(), out / "plans" / point).ok, point
    assert "Traceback" not in err and "leaked" not in err


def _sample() -> Path:
    from packer.io.resources import sample_trace

    return sample_trace()


# --- pools ---


def test_pools_are_solved_apart_in_parallel_and_the_merged_plan_verifies(tmp_path, pooled_trace):
    out = tmp_path / "plan"
    done = subprocess.run([*PACKER, "solve", str(pooled_trace), "--out", str(out), "--max-moves", "5", "--time-limit", "3",
                           "--workers", "2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("pool pool") == 3, done.stdout
    check = subprocess.run([*PACKER, "verify", str(pooled_trace), str(out)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    summary = json.loads((out / "summary.json").read_text())
    lines = summary["solver"]["stats"]["pools"]
    assert [line["pool"] for line in lines] == ["pool0", "pool1", "pool2"]
    assert sum(line["budget"] for line in lines) <= 5 and sum(line["moves"] for line in lines) == summary["moves"]["count"] <= 5
    assert {"rule": "pools", "pools": ["pool0", "pool1", "pool2"]} in summary["rules"]
    pool = _pool_of(pooled_trace)
    moves = pd.read_parquet(out / "moves.parquet")
    assert (pool[moves["from_host"]].to_numpy() == pool[moves["to_host"]].to_numpy()).all()


def test_a_plan_that_moves_a_task_across_pools_fails_verify(tmp_path, pooled_trace):
    plan = api.solve(pooled_trace, config="baseline", max_moves=3, solver="baseline-ffd").write(tmp_path / "plan")
    placement = pd.read_parquet(plan.path / "placement.parquet")
    placement.loc[0, "host_id"] = "pool1/h0"  # pool0's first task onto a host of pool1
    placement.to_parquet(plan.path / "placement.parquet")
    report = api.verify(pooled_trace, plan.path)
    rules = next(c for c in report.checks if c.name == "rules")
    assert not rules.passed and "another pool" in " ".join(rules.messages)


def _problem(trace: Path, budget: int | None):
    t = read_trace(trace)
    context = PlanContext(trace=str(trace), config="baseline", rules=RuleOptions(max_moves=budget))
    return problem_from_context(t, get_preset("baseline"), context)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=0, max_value=80), solver=st.sampled_from(["engine", "baseline-ffd", "auto"]))
def test_the_budget_split_never_exceeds_the_budget_and_the_merged_plan_verifies(pooled_trace, budget, solver):
    problem = _problem(pooled_trace, budget)
    shares, lp = split_budget(problem)
    assert len(shares) == 3 and all(s >= 0 for s in shares) and sum(shares) <= budget
    assert sum(share["moves"] for share in lp) <= budget + 1e-6
    plan = api.solve(pooled_trace, config="baseline", max_moves=budget, solver=solver, time_limit=1, executor=InlineExecutor())
    assert plan.summary["moves"]["count"] <= budget
    assert [line["budget"] for line in plan.summary["solver"]["stats"]["pools"]] == shares
    report = api.verify(pooled_trace, plan)
    assert report.ok, [c for c in report.checks if not c.passed]


def test_the_split_follows_the_savings_curves(tmp_path):
    # Pool a: hosts that one move each empties; pool b: nothing to free. The LP gives a the moves it can use.
    hosts, tasks, usage = tiny_tables(n_tasks=6, n_hosts=6)
    hosts["arch"] = "Broadwell20"
    a = write_tables(tmp_path / "a", hosts, tasks.assign(cpu_request=1.0, mem_request=1.0), usage)
    b = write_tables(tmp_path / "b", hosts.iloc[:1], tasks.assign(host_id="h0", cpu_request=1.0, mem_request=1.0), usage)
    trace = combine_pools([a, b], tmp_path / "pooled", names=["a", "b"])
    problem = _problem(trace, 4)
    shares, lp = split_budget(problem)
    assert lp[0]["moves"] == pytest.approx(4) and lp[1]["moves"] == pytest.approx(0)
    assert shares == [4, 0]
    plan = api.solve(trace, config="baseline", max_moves=4, time_limit=2)
    assert plan.summary["metrics"]["before"]["hosts"] - plan.summary["metrics"]["after"]["hosts"] == 4


def test_a_trace_without_pools_is_solved_as_before(tiny_trace):
    plan = api.solve(tiny_trace, config="baseline", max_moves=2, time_limit=1)
    assert "pools" not in plan.summary["solver"]["stats"]
    assert all(rule["rule"] != "pools" for rule in plan.summary["rules"])


def test_a_signal_during_a_parallel_pool_solve_writes_the_merged_plan(tmp_path_factory):
    root = tmp_path_factory.mktemp("sig")
    parts = [generate_trace(root / f"g{seed}", tasks=300, hosts=150, days=0.25, seed=seed).path for seed in range(3)]
    trace = combine_pools(parts, root / "pooled")
    out = root / "plan"
    process = subprocess.Popen([*PACKER, "solve", str(trace), "--out", str(out), "--max-moves", "unlimited", "--solver", "engine",
                                "--time-limit", "120", "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(12.0)
    assert process.poll() is None
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert time.monotonic() - sent < 20
    summary = json.loads((out / "summary.json").read_text())
    assert summary["solver"]["stats"]["interrupted"] is True
    assert any(line["status"] == "not run" or line.get("interrupted") for line in summary["solver"]["stats"]["pools"])
    assert api.verify(trace, out).ok
    assert "Traceback" not in stderr and "leaked" not in stderr


@pytest.mark.parametrize("pool, message", [([None, "a", "a"], "missing pool"), ([1, 2, 3], "expected a string column")])
def test_a_bad_pool_column_is_an_input_error(tmp_path, pool, message):
    hosts, tasks, usage = tiny_tables()
    hosts["pool"] = pool
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    done = CliRunner().invoke(cli, ["validate", str(trace)])
    assert done.exit_code == 2 and "hosts.parquet" in done.output and "pool" in done.output and message in done.output, done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)


# --- on a Dask cluster (--scheduler) ---


@pytest.fixture(scope="module")
def scheduler():
    """The address of a local Dask cluster (two single-threaded worker processes) for the module's tests."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        yield cluster.scheduler_address


def test_a_sweep_on_a_dask_cluster_writes_the_table_of_a_serial_one(tmp_path, scheduler):
    trace = crowdable_trace(tmp_path / "t")
    args = [str(trace), "--config", "p99", "--config", "p99-sens", "--weights", "0,100", "--refine", "1", "--no-baselines",
            "--time-limit", "2", "--deterministic", "--no-report"]
    serial = subprocess.run([*PACKER, "sweep", *args, "--out", str(tmp_path / "serial")], capture_output=True, text=True)
    on_dask = subprocess.run([*PACKER, "sweep", *args, "--out", str(tmp_path / "dask"), "--scheduler", scheduler], capture_output=True, text=True)
    assert serial.returncode == 0 and on_dask.returncode == 0, serial.stderr + on_dask.stderr
    tables = [pd.read_parquet(tmp_path / name / "sweep.parquet").drop(columns="wall_s") for name in ("serial", "dask")]
    pd.testing.assert_frame_equal(*tables)


def test_pools_on_a_dask_cluster_merge_into_a_plan_that_verifies(tmp_path, pooled_trace, scheduler):
    out = tmp_path / "plan"
    done = subprocess.run([*PACKER, "solve", str(pooled_trace), "--out", str(out), "--max-moves", "5", "--time-limit", "3",
                           "--scheduler", scheduler], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("pool pool") == 3, done.stdout
    check = subprocess.run([*PACKER, "verify", str(pooled_trace), str(out)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_workers_and_a_scheduler_together_are_refused(tmp_path, pooled_trace):
    done = subprocess.run([*PACKER, "solve", str(pooled_trace), "--out", str(tmp_path / "plan"), "--workers", "2",
                           "--scheduler", "tcp://127.0.0.1:1"], capture_output=True, text=True)
    assert done.returncode == 2 and "give one of them" in done.stderr and not (tmp_path / "plan").exists()
