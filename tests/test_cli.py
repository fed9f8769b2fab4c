"""The command line's rule options (--anti-affinity, --constraints) end to end, and how errors become exit codes."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

import packer.api
from conftest import tiny_tables, write_tables
from packer.cli import cli
from packer.errors import NoPlanError



def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def trace(tmp_path):
    """Six small tasks on three big hosts, two of service A (on h0 and h1) and one of B (on h2): an unconstrained repack packs them together."""
    hosts, tasks, usage = tiny_tables(n_tasks=6, n_hosts=3)
    tasks["service"] = ["A", "A", "B", None, None, None]
    return write_tables(tmp_path / "t", hosts, tasks, usage)


def hosts_of(plan, trace) -> dict[str, set[str]]:
    """Service -> the hosts its tasks end on in ``plan``."""
    services = pd.read_parquet(trace / "tasks.parquet").set_index("task_id")["service"]
    placement = pd.read_parquet(plan / "placement.parquet")
    placement["service"] = placement["task_id"].map(services)
    return placement.dropna(subset=["service"]).groupby("service")["host_id"].agg(set).to_dict()


def solve(trace, out, *args):
    """Solve and verify; the plan's summary."""
    solved = run("solve", trace, "--out", out, "--config", "baseline", "--max-moves", "unlimited", "--time-limit", "10", *args)
    assert solved.exit_code == 0, solved.output
    checked = run("verify", trace, out)
    assert checked.exit_code == 0, checked.output
    return json.loads((out / "summary.json").read_text())


def test_anti_affinity_keeps_two_services_apart(trace, tmp_path):
    free = solve(trace, tmp_path / "free")
    together = hosts_of(tmp_path / "free", trace)
    assert together["A"] & together["B"], "without the rule the repack should put A and B together"
    apart = solve(trace, tmp_path / "apart", "--anti-affinity", "A,B")
    assert apart["context"]["rules"]["anti_affinity"] == [["A", "B"]]
    assert {"rule": "anti-affinity", "pairs": [["A", "B"]]} in apart["rules"]
    placed = hosts_of(tmp_path / "apart", trace)
    assert not placed["A"] & placed["B"]
    assert apart["metrics"]["after"]["hosts"] > free["metrics"]["after"]["hosts"]


@pytest.mark.parametrize("value", ["A", "A,", ",B", "A,B,C"])
def test_a_bad_anti_affinity_pair_exits_2(trace, tmp_path, value):
    result = run("solve", trace, "--out", tmp_path / "plan", "--anti-affinity", value)
    assert result.exit_code == 2
    assert "--anti-affinity" in result.output and "two service names separated by a comma" in result.output
    assert not (tmp_path / "plan").exists()


def test_an_anti_affinity_pair_naming_no_task_s_service_exits_2(trace, tmp_path):
    result = run("solve", trace, "--out", tmp_path / "plan", "--anti-affinity", "A,Bee")
    assert result.exit_code == 2
    assert "tasks.parquet: column 'service'" in result.output and "no task has: Bee" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "plan").exists()


def test_a_constraints_file_is_applied_and_flags_override_it(trace, tmp_path):
    constraints = tmp_path / "rules.toml"
    constraints.write_text('max_moves = 3\nspread_host = 2\nanti_affinity = [["A", "A"]]\n')
    summary = solve(trace, tmp_path / "plan", "--constraints", constraints, "--max-moves", "4", "--anti-affinity", "A,B")
    rules = summary["context"]["rules"]
    assert rules["max_moves"] == 4  # the flag wins over the file's 3 (--max-moves unlimited is solve()'s, overridden here)
    assert rules["spread_host"] == 2
    assert sorted(map(tuple, rules["anti_affinity"])) == [("A", "A"), ("A", "B")]
    assert summary["moves"]["count"] <= 4
    placed = hosts_of(tmp_path / "plan", trace)
    assert len(placed["A"]) == 2 and not placed["A"] & placed["B"]


def test_a_constraints_file_fills_in_flags_not_given(trace, tmp_path):
    constraints = tmp_path / "rules.toml"
    constraints.write_text("max_moves = 1\nspread_domain = 3\n")
    result = run("solve", trace, "--out", tmp_path / "plan", "--config", "baseline", "--constraints", constraints)
    assert result.exit_code == 0, result.output
    rules = json.loads((tmp_path / "plan" / "summary.json").read_text())["context"]["rules"]
    assert (rules["max_moves"], rules["spread_domain"], rules["spread_host"]) == (1, 3, None)


@pytest.mark.parametrize("text, key", [
    ("max_moves = 3\nspread = 2\n", "spread"),
    ("spread_host = 0\n", "spread_host"),
    ('max_moves = "lots"\n', "max_moves"),
    ('anti_affinity = [["A"]]\n', "anti_affinity"),
])
def test_a_bad_constraints_file_exits_2_naming_file_and_key(trace, tmp_path, text, key):
    constraints = tmp_path / "rules.toml"
    constraints.write_text(text)
    result = run("solve", trace, "--out", tmp_path / "plan", "--constraints", constraints)
    assert result.exit_code == 2
    assert str(constraints) in result.output and f"'{key}'" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "plan").exists()


def test_the_sweep_applies_the_rules_to_every_point(trace, tmp_path):
    constraints = tmp_path / "rules.toml"
    constraints.write_text("spread_host = 2\n")
    out = tmp_path / "sweep"
    result = run("sweep", trace, "--out", out, "--config", "baseline", "--config", "p99", "--baseline", "baseline-ffd",
                 "--max-moves", "unlimited", "--anti-affinity", "A,B", "--constraints", constraints, "--time-limit", "5")
    assert result.exit_code == 0, result.output
    plans = sorted(p for p in (out / "plans").iterdir())
    assert [p.name for p in plans] == ["baseline", "baseline-ffd", "p99"]
    for plan in plans:
        rules = json.loads((plan / "summary.json").read_text())["context"]["rules"]
        assert rules["anti_affinity"] == [["A", "B"]] and rules["spread_host"] == 2, plan.name
        placed = hosts_of(plan, trace)
        assert not placed["A"] & placed["B"], plan.name


@pytest.mark.parametrize("guard, name", [(("--min-rp", "-0.5"), "minimum relative performance"), (("--max-new-at-risk", "0"), "tasks-at-risk guard")])
def test_the_sweep_refuses_guards_its_baselines_cannot_honour(trace, tmp_path, guard, name):
    result = run("sweep", trace, "--out", tmp_path / "sweep", *guard)
    assert result.exit_code == 2 and f"the baseline policies do not honour the {name}" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "sweep").exists()


def test_no_plan_in_time_exits_4(trace, tmp_path, monkeypatch):
    def no_plan(*args, **kwargs):
        raise NoPlanError("cbc found no valid placement within 1 s; no plan written")

    monkeypatch.setattr(packer.api, "solve", no_plan)
    result = run("solve", trace, "--out", tmp_path / "plan")
    assert result.exit_code == 4 and "no plan: cbc found no valid placement" in result.output
    assert not (tmp_path / "plan").exists()


def test_the_root_shim_runs_the_console_script():
    import runpy
    from pathlib import Path

    import packer.cli

    shim = runpy.run_path(str(Path(__file__).resolve().parents[1] / "cli.py"))
    assert shim["main"] is packer.cli.main
    assert set(cli.commands) == {"validate", "profile", "characterize", "generate", "import", "export", "solve", "verify", "sweep", "report"}
