"""packer.model.metrics against hand-computed cases: Eq. 2 fragmentation (absolute and share), Eq. 3 WSL,
Eq. 4 interference, colocation factor, hosts freed/occupied and moves by architecture; and plan
summaries / verify built on them (one implementation)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import tiny_tables, write_tables
from packer.cli import cli
from packer.model.metrics import colocation_factor, evaluate, fits_within, fleet_breakdown, host_changes_by_arch, moves_by_arch, weighted_score_loss
from packer.model.build import GoalWeights, make_goals
from packer.model.problem import PlacementProblem

# Two architectures: A (score 1.0, type I, cost 1) and B (score 2.0, type II, cost 2).
ARCHS = pd.DataFrame({"type": ["I", "II"], "score": [1.0, 2.0]}, index=pd.Index(["A", "B"], name="arch"))
# Broadwell20 CPU sensitivity of Rank2, KeyVal3, Log1 and NN1 (colocation paper, Table III).
CS = [0.93, 0.81, 0.68, 0.63]


@pytest.fixture
def case() -> tuple[PlacementProblem, np.ndarray]:
    """h0, h1 on A (10 cores, 40 GiB); h2, h3 on B (20 cores, 100 GiB). t0, t1 on h0; t2 on h1; t3 on h2; h3 empty.

    The plan moves t2 h1 -> h0 and t3 h2 -> h3: h1 (A) and h2 (B) are freed, h3 (B) newly occupied.
    """
    problem = PlacementProblem(
        task_ids=np.array(["t0", "t1", "t2", "t3"]), host_ids=np.array(["h0", "h1", "h2", "h3"]), arch_names=np.array(["A", "B"]),
        dims=("cpu", "mem"), demand=np.array([[3.0, 10.0], [3.0, 10.0], [4.0, 8.0], [5.0, 30.0]]),
        capacity=np.array([[10.0, 40.0], [10.0, 40.0], [20.0, 100.0], [20.0, 100.0]]), frag_dims=(0, 1),
        sens_dims=("cpu",), sens_demand=np.array(CS)[:, None], sens_capacity=np.ones((4, 1)),
        host_arch=np.array([0, 0, 1, 1]), cost=np.array([1.0, 1.0, 2.0, 2.0]), eligible=np.ones((4, 2), dtype=bool),
        current=np.array([0, 0, 1, 2]), movable=np.ones(4, dtype=bool), job=np.arange(4), domain=np.full(4, -1),
        goals=make_goals("tco", GoalWeights()),
    )
    return problem, np.array([0, 0, 0, 3])


def test_fragmentation_eq2_absolute_and_share(case):
    problem, assign = case
    before, after = evaluate(problem, problem.current), evaluate(problem, assign)
    # Before: h0 (10-6, 40-20), h1 (10-4, 40-8), h2 (20-5, 100-30) of 40 cores and 180 GiB occupied.
    assert before.fragmentation == pytest.approx({"cpu": 4 + 6 + 15, "mem": 20 + 32 + 70})
    assert before.fragmentation_share == pytest.approx({"cpu": 25 / 40, "mem": 122 / 180})
    # After: h0 (10-10, 40-28), h3 (20-5, 100-30) of 30 cores and 140 GiB.
    assert after.fragmentation == pytest.approx({"cpu": 15, "mem": 82})
    assert after.fragmentation_share == pytest.approx({"cpu": 15 / 30, "mem": 82 / 140})


def test_interference_eq4_and_tasks_at_risk_with_table_iii_scores(case):
    problem, assign = case
    before, after = evaluate(problem, problem.current), evaluate(problem, assign)
    # Rank2 + KeyVal3 on h0: 0.93 + 0.81 = 1.74, 0.74 over 1; both at risk. Log1 and NN1 alone: no excess.
    assert before.interference == pytest.approx({"cpu": 0.74})
    assert before.tasks_at_risk == 2
    # Log1 joins them: 0.93 + 0.81 + 0.68 = 2.42, 1.42 over 1; three tasks at risk.
    assert after.interference == pytest.approx({"cpu": 1.42})
    assert after.tasks_at_risk == 3


def test_wsl_eq3_hosts_freed_and_newly_occupied(case):
    problem, assign = case
    freed, newly = host_changes_by_arch(problem, assign)
    assert freed.tolist() == [1, 1] and newly.tolist() == [0, 1]
    # Σ_j score_j (occupied_j − freed_j) = 1.0·(0 − 1) + 2.0·(1 − 1) = −1.0 ...
    assert weighted_score_loss(problem, assign, ARCHS["score"].to_numpy()) == pytest.approx(-1.0)
    # ... which is the change in score-weighted occupied hosts: (1·1 + 2·1) − (1·2 + 2·1).
    assert weighted_score_loss(problem, problem.current, ARCHS["score"].to_numpy()) == 0.0


def test_colocation_factor_and_breakdown(case):
    problem, assign = case
    assert evaluate(problem, problem.current).colocation == pytest.approx(4 / 3)
    assert evaluate(problem, assign).colocation == pytest.approx(2.0)
    by_arch, by_type = fleet_breakdown(problem, assign, ARCHS)
    assert by_arch.loc["A", ["hosts_before", "hosts_after", "freed", "newly_occupied"]].tolist() == [2, 1, 1, 0]
    assert by_arch.loc["A", ["colocation_before", "colocation_after"]].tolist() == [1.5, 3.0]
    assert by_arch.loc["B", ["colocation_before", "colocation_after"]].tolist() == [1.0, 1.0]
    assert by_arch["wsl"].tolist() == [-1.0, 0.0]
    assert by_arch.loc["B", ["tco_before", "tco_after"]].tolist() == [2.0, 2.0]
    assert by_type.loc["I", "tco_after"] == 1.0 and by_type.loc["II", "wsl"] == 0.0
    assert by_arch.loc["A", ["moved_out", "moved_in"]].tolist() == [1, 1]
    assert np.isnan(colocation_factor(3, 0)) and colocation_factor(6, 4) == 1.5


def test_moves_by_source_and_destination_arch(case):
    problem, assign = case
    assert moves_by_arch(problem, assign).to_numpy().tolist() == [[1, 0], [0, 1]]
    cross = np.array([3, 0, 1, 2])  # only t0 moves, from h0 (A) to h3 (B)
    table = moves_by_arch(problem, cross)
    assert table.loc["A", "B"] == 1 and table.to_numpy().sum() == 1
    assert table.index.name == "from" and table.columns.name == "to"


def _format_3_context(context: dict) -> dict:
    """A packer-plan/4 context as formats 1-3 wrote it: budget and spread at the top, guards and goal among the weights."""
    context = dict(context)
    rules, weights = context.pop("rules"), dict(context["weights"])
    assert rules["anti_affinity"] == []
    context.update({key: rules[key] for key in ("max_moves", "spread_host", "spread_domain")})
    weights.update({key: rules[key] for key in ("min_rp", "max_new_at_risk")}, goal=context.pop("goal"))
    context["weights"] = weights
    return context


def test_a_packer_plan_1_summary_still_verifies(tmp_path):
    """Plans written before the WSL/colocation/moves-by-arch keys are checked on the keys they have."""
    hosts, tasks, usage = tiny_tables(n_tasks=8, n_hosts=4)
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    plan = tmp_path / "plan"
    runner = CliRunner()
    assert runner.invoke(cli, ["solve", str(trace), "--out", str(plan), "--config", "baseline", "--solver", "baseline-ffd"]).exit_code == 0
    summary = json.loads((plan / "summary.json").read_text())
    assert summary["format"] == "packer-plan/4"
    summary["format"] = "packer-plan/1"
    summary["context"] = _format_3_context(summary["context"])
    for key in ("rules", "goals"):
        del summary[key]
    for key in ("sensitivity_basis", "class_scores", "classes_from"):
        del summary["context"][key]
    for key in ("fleet_change", "moves_by_arch"):
        del summary[key]
    for when in ("before", "after"):
        del summary["metrics"][when]["fragmentation_share"], summary["metrics"][when]["colocation"]
    (plan / "summary.json").write_text(json.dumps(summary))
    result = runner.invoke(cli, ["verify", str(trace), str(plan)])
    assert result.exit_code == 0, result.output
    summary["metrics"]["after"]["tco"] += 1  # an old-format summary is still checked on what it says
    (plan / "summary.json").write_text(json.dumps(summary))
    assert runner.invoke(cli, ["verify", str(trace), str(plan)]).exit_code == 1


def test_a_packer_plan_2_sensitivity_plan_is_read_as_it_was_written(tmp_path):
    """Before format 3 a plan had no sensitivity basis: it is rebuilt on the whole-host basis with class maxima."""
    hosts, tasks, usage = tiny_tables(n_tasks=8, n_hosts=4)
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    plan = tmp_path / "plan"
    runner = CliRunner()
    solved = runner.invoke(cli, ["solve", str(trace), "--out", str(plan), "--config", "p99-sens", "--sensitivity-basis", "host",
                                 "--class-scores", "max", "--time-limit", "5"])
    assert solved.exit_code == 0, solved.output
    summary = json.loads((plan / "summary.json").read_text())
    summary["format"] = "packer-plan/2"
    summary["context"] = _format_3_context(summary["context"])
    for key in ("rules", "goals"):
        del summary[key]
    for key in ("sensitivity_basis", "class_scores", "classes_from"):
        del summary["context"][key]
    (plan / "summary.json").write_text(json.dumps(summary))
    result = runner.invoke(cli, ["verify", str(trace), str(plan)])
    assert result.exit_code == 0, result.output
    assert "whole-host basis" in result.output


def test_a_packer_plan_3_fair_plan_still_verifies_and_reports(tmp_path):
    """A fair plan of format 3 (objective = the tco goals' terms, context in the old shape) is checked and rendered as written."""
    hosts, tasks, usage = tiny_tables(n_tasks=8, n_hosts=4)
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    plan = tmp_path / "plan"
    runner = CliRunner()
    solved = runner.invoke(cli, ["solve", str(trace), "--out", str(plan), "--goal", "fair", "--max-moves", "3", "--time-limit", "5"])
    assert solved.exit_code == 0, solved.output
    summary = json.loads((plan / "summary.json").read_text())
    assert summary["objective"]["total"] > 0 and summary["objective"]["primary"] > 0
    summary["format"] = "packer-plan/3"
    summary["context"] = _format_3_context(summary["context"])
    for key in ("rules", "goals"):
        del summary[key]
    (plan / "summary.json").write_text(json.dumps(summary))
    result = runner.invoke(cli, ["verify", str(trace), str(plan)])
    assert result.exit_code == 0, result.output
    reported = runner.invoke(cli, ["report", str(plan), "--out", str(tmp_path / "report")])
    assert reported.exit_code == 0, reported.output
    assert "goal fair" in (tmp_path / "report" / "report.md").read_text()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 50), st.integers(0, 5), st.integers(0, 10**6))
def test_fits_within_is_all_dimensions_fitting(n, dims, seed):
    rng = np.random.default_rng(seed)
    loads, limits, demand = rng.integers(0, 4, (n, dims)).astype(float), rng.integers(0, 6, (n, dims)).astype(float), rng.integers(0, 3, dims).astype(float)
    assert np.array_equal(fits_within(loads, demand, limits), (loads + demand <= limits).all(axis=1))
