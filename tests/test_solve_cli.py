"""`packer solve` end to end: every plan it writes passes `packer verify`; bad input exits 2, infeasible 3."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from conftest import crowdable_trace, tiny_tables, write_tables
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
    if solver == "auto":  # the engine, then HiGHS from its plan: the console says whose plan it is
        assert f"method: plan by {summary['solver']['name']} (engine " in output


def test_sensitivity_config_and_full_repack(trace, tmp_path):
    output, summary = solve_and_verify(trace, tmp_path / "plan", "--config", "p99-sens", "--max-moves", "unlimited", "--solver", "engine")
    assert summary["context"]["rules"]["max_moves"] is None
    # No phase of a solve is silent: characterization after profiling, then the bound's LP.
    assert "characterizing workloads" in output and "lower bound (LP)" in output


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
        (["--max-new-at-risk", "-1"], "-1 is not in the range x>=0"),
        (["--max-new-at-risk", "0", "--config", "p99"], "needs a configuration with sensitivity"),
        (["--max-new-at-risk", "0", "--config", "p99-sens", "--solver", "cbc"], "honoured by the engine solver"),
        (["--max-new-at-risk", "0", "--config", "p99-sens", "--goal", "fair"], "guards the tco and hosts goals"),
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
    import packer.solvers.run

    monkeypatch.setitem(packer.solvers.run.EXACT_MAX_PAIRS, "cbc", 10)
    result = run("solve", trace, "--out", tmp_path / "plan", "--solver", "cbc")
    assert result.exit_code == 2
    assert "task-host pairs" in result.output and "--solver engine" in result.output
    assert not (tmp_path / "plan").exists()


def test_the_new_risk_guard_is_kept_and_verified(trace, tmp_path):
    _, summary = solve_and_verify(trace, tmp_path / "plan", "--config", "p99-sens", "--sensitivity-weight", "0",
                                  "--max-new-at-risk", "0", "--max-moves", "unlimited")
    assert summary["context"]["rules"]["max_new_at_risk"] == 0
    assert summary["metrics"]["after"]["tasks_at_risk"] <= summary["metrics"]["before"]["tasks_at_risk"]


def test_verify_rejects_a_plan_that_breaks_the_new_risk_guard(tmp_path):
    trace = crowdable_trace(tmp_path / "t")  # an unguarded repack puts its tasks at risk
    plan = tmp_path / "plan"
    _, summary = solve_and_verify(trace, plan, "--config", "p99-sens", "--sensitivity-weight", "0", "--max-moves", "unlimited")
    assert summary["context"]["sensitivity_basis"] == "need"
    assert summary["metrics"]["after"]["tasks_at_risk"] > summary["metrics"]["before"]["tasks_at_risk"]
    doc = json.loads((plan / "summary.json").read_text())
    doc["context"]["rules"]["max_new_at_risk"] = 0  # claim a guard the unguarded plan does not keep
    (plan / "summary.json").write_text(json.dumps(doc))
    check = run("verify", trace, plan)
    assert check.exit_code == 1 and "tasks at risk of interference, more than" in check.output


def test_sensitivity_options_are_recorded_and_verified(trace, tmp_path):
    """--classes-from, --class-scores and --sensitivity-basis reach the plan's context, and verify rebuilds with them."""
    characterized = CliRunner().invoke(cli, ["characterize", str(trace), "--out", str(tmp_path / "char")])
    assert characterized.exit_code == 0, characterized.output
    _, summary = solve_and_verify(trace, tmp_path / "plan", "--config", "p99-sens", "--classes-from", tmp_path / "char",
                                  "--class-scores", "max", "--sensitivity-basis", "host")
    context = summary["context"]
    assert (context["class_scores"], context["sensitivity_basis"]) == ("max", "host")
    assert context["classes_from"] == str((tmp_path / "char").resolve())
    bad = run("solve", trace, "--out", tmp_path / "p2", "--config", "p99-sens", "--classes-from", tmp_path / "char" / "report.md")
    assert bad.exit_code == 2 and "report.md" in bad.output and not (tmp_path / "p2").exists()


def test_a_full_repack_from_a_budgeted_plan_is_never_worse_and_records_its_start(trace, tmp_path):
    _, budgeted = solve_and_verify(trace, tmp_path / "budgeted", "--max-moves", "2")
    output, full = solve_and_verify(trace, tmp_path / "full", "--max-moves", "unlimited", "--start", tmp_path / "budgeted")
    assert full["objective"]["total"] <= budgeted["objective"]["total"] + 1e-9
    assert full["context"]["start"] == str((tmp_path / "budgeted").resolve())
    tighter = run("solve", trace, "--out", tmp_path / "tight", "--max-moves", "0", "--start", tmp_path / "full")
    assert tighter.exit_code == 2 and "start plan" in tighter.output and "budget" in tighter.output
    assert not (tmp_path / "tight").exists()


@pytest.mark.parametrize("config", ["baseline", "p99", "p99-sens"])
def test_a_wide_budgets_plan_keeps_the_budget_and_its_own_bound(trace, tmp_path, config):
    # Half the movable tasks: the engine also starts from a full repack's constructions, trimmed (without p99-sens's
    # interference term); verify re-derives the budget's bound.
    _, summary = solve_and_verify(trace, tmp_path / "plan", "--max-moves", "6", "--config", config, "--solver", "engine")
    assert summary["moves"]["count"] <= 6 and "freeable_bound" in summary["solver"]["stats"]["bound"]
