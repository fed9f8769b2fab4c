"""`packer solve` end to end: every plan it writes passes `packer verify`; bad input exits 2, infeasible 3."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from conftest import tiny_tables, write_tables
from packer.cli import cli


def run(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def solve_and_verify(trace, out, *args):
    result = run("solve", trace, "--out", out, "--time-limit", "10", *args)
    assert result.exit_code == 0, result.output
    check = run("verify", trace, out)
    assert check.exit_code == 0, check.output
    return result.output, json.loads((out / "summary.json").read_text())


@pytest.fixture
def trace(tmp_path):
    hosts, tasks, usage = tiny_tables(n_tasks=12, n_hosts=6)
    return write_tables(tmp_path / "t", hosts, tasks, usage)


@pytest.mark.parametrize("solver", ["engine", "cpsat", "cbc", "auto"])
@pytest.mark.parametrize("config", ["baseline", "p99"])
def test_every_solver_writes_a_verified_plan(trace, tmp_path, solver, config):
    output, summary = solve_and_verify(trace, tmp_path / "plan", "--solver", solver, "--config", config)
    assert summary["status"] in ("optimal", "feasible")
    assert "TCO" in output and "status:" in output and "packer verify" in output
    assert summary["metrics"]["after"]["tco"] <= summary["metrics"]["before"]["tco"]


def test_sensitivity_config_and_full_repack(trace, tmp_path):
    _, summary = solve_and_verify(trace, tmp_path / "plan", "--config", "p99-sens", "--max-moves", "unlimited", "--solver", "engine")
    assert summary["context"]["max_moves"] is None


def test_zero_budget_returns_the_current_placement(trace, tmp_path):
    _, summary = solve_and_verify(trace, tmp_path / "plan", "--max-moves", "0")
    assert summary["moves"]["count"] == 0
    assert summary["metrics"]["after"]["tco"] == summary["metrics"]["before"]["tco"]


def test_spread_limits_hold(trace, tmp_path):
    _, summary = solve_and_verify(trace, tmp_path / "plan", "--spread-host", "1", "--spread-domain", "1", "--max-moves", "unlimited")
    placement = pd.read_parquet(tmp_path / "plan" / "placement.parquet")
    assert len(placement) == 12


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--max-moves", "-1"], "must be >= 0"),
        (["--max-moves", "lots"], "'unlimited'"),
        (["--time-limit", "0"], "must be > 0"),
        (["--goal", "profit"], "'profit' is not one of"),
        (["--config", "p42"], "unknown config 'p42'"),
    ],
)
def test_bad_flags_exit_2(trace, tmp_path, args, needle):
    result = run("solve", trace, "--out", tmp_path / "plan", *args)
    assert result.exit_code == 2
    assert needle in result.output
    assert not (tmp_path / "plan").exists()


def test_a_task_that_fits_nowhere_is_infeasible(tmp_path):
    hosts, tasks, usage = tiny_tables()
    tasks.loc[2, "mem_request"] = 300.0  # more than any Table I host (256 GiB)
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    result = run("solve", trace, "--out", tmp_path / "plan", "--config", "baseline")
    assert result.exit_code == 3
    assert "t002" in result.output and "fit no host" in result.output
    assert not (tmp_path / "plan").exists()


def test_exact_models_too_large_to_finish_are_refused(trace, tmp_path, monkeypatch):
    import packer.solve

    monkeypatch.setitem(packer.solve.EXACT_MAX_PAIRS, "cbc", 10)
    result = run("solve", trace, "--out", tmp_path / "plan", "--solver", "cbc")
    assert result.exit_code == 2
    assert "task-host pairs" in result.output and "--solver engine" in result.output
    assert not (tmp_path / "plan").exists()
