"""The plan folder: write_plan / read_plan round trip, summary contents, refusals."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from packer.errors import InfeasibleError, InputError
from packer.model.metrics import evaluate
from packer.plan.move_list import MOVES_CSV, MOVES_MARKDOWN
from packer.plan.plan import (
    MOVES_FILE,
    PLACEMENT_FILE,
    REPORT_FILE,
    SUMMARY_FILE,
    PlanContext,
    json_safe,
    read_plan,
    write_plan,
)
from packer.io.presets import get_preset
from packer.model.build import GoalWeights, RuleOptions, build_problem
from packer.solvers.result import SolveResult
from packer.io.trace import read_trace
from packer.rules.budget import MoveBudget


WEIGHTS = GoalWeights(moves=1e-3)


@pytest.fixture
def tiny_problem(tiny_trace):
    trace = read_trace(tiny_trace)
    return trace, build_problem(trace, get_preset("baseline"), goal="tco", weights=WEIGHTS, rules=RuleOptions(max_moves=5))


def _result(problem, assign, status="feasible", bound=-math.inf) -> SolveResult:
    return SolveResult(assign=assign, status=status, objective=evaluate(problem, assign).objective, bound=bound, solver="hand", wall_s=0.25)


def _empty_h2(problem):
    """Move the tasks of h2 (a Haswell12, type II) to h0 and h1: tiny tasks, large hosts."""
    assign = problem.current.copy()
    on_h2 = np.flatnonzero(problem.host_ids[assign] == "h2")
    assign[on_h2] = np.arange(len(on_h2)) % 2
    return assign


def test_round_trip(tmp_path, tiny_problem):
    trace, problem = tiny_problem
    assign = _empty_h2(problem)
    context = PlanContext(trace=str(trace.path), fleet="default", config="baseline", rules=RuleOptions(max_moves=5), weights=WEIGHTS, solver="hand", seed=3)
    out = write_plan(tmp_path / "plan", problem, _result(problem, assign), context)
    assert sorted(p.name for p in out.iterdir()) == sorted([PLACEMENT_FILE, MOVES_FILE, MOVES_CSV, MOVES_MARKDOWN, SUMMARY_FILE, REPORT_FILE])

    plan = read_plan(out)
    assert plan.placement["task_id"].tolist() == problem.task_ids.tolist()
    assert plan.placement["host_id"].tolist() == problem.host_ids[assign].tolist()
    moved = problem.task_ids[assign != problem.current]
    assert sorted(plan.moves["task_id"]) == sorted(moved)
    assert plan.moves["step"].tolist() == list(range(1, len(moved) + 1))
    assert plan.context == PlanContext.from_dict(context.to_dict())
    assert plan.context.weights == WEIGHTS and plan.context.seed == 3
    assert set(plan.context.versions) == {"packer", "numpy", "pandas", "pyarrow", "ortools", "pulp"}


def test_summary_contents(tmp_path, tiny_problem):
    trace, problem = tiny_problem
    assign = _empty_h2(problem)
    context = PlanContext(trace=str(trace.path), fleet="default", config="baseline", rules=RuleOptions(max_moves=5), weights=WEIGHTS)
    out = write_plan(tmp_path / "plan", problem, _result(problem, assign, bound=-math.inf), context)
    text = (out / SUMMARY_FILE).read_text()
    summary = json.loads(text, parse_constant=lambda c: pytest.fail(f"summary.json holds {c}"))
    assert summary["status"] == "feasible"
    assert summary["bound"] is None and summary["gap"] is None
    assert any(n.startswith("bound:") for n in summary["notes"])

    before, after = evaluate(problem, problem.current), evaluate(problem, assign)
    assert summary["metrics"]["before"]["hosts"] == 3 and summary["metrics"]["after"]["hosts"] == 2
    assert summary["metrics"]["after"]["tco"] == pytest.approx(after.tco)
    assert summary["objective"]["total"] == pytest.approx(after.objective)
    terms = summary["objective"]
    assert terms["primary"] + terms["fragmentation"] + terms["sensitivity"] + terms["moves"] == pytest.approx(terms["total"])
    assert terms["moves"] == pytest.approx(1e-3 * after.moves)
    # tiny trace: h0 Broadwell20 (II), h1 Skylake14 (I), h2 Haswell12 (II); Type II costs 2, Type I 1.
    # h2's two tasks go one to h0, one to h1: Haswell12 (score 1.79) is freed, nothing is newly occupied.
    assert summary["by_type"] == {
        "I": {"hosts": 1, "hosts_before": 1, "hosts_after": 1, "freed": 0, "newly_occupied": 0, "tco_before": 1.0, "tco_after": 1.0,
              "wsl": 0.0, "tasks_before": 2, "tasks_after": 3, "colocation_before": 2.0, "colocation_after": 3.0, "moved_out": 0, "moved_in": 1},
        "II": {"hosts": 2, "hosts_before": 2, "hosts_after": 1, "freed": 1, "newly_occupied": 0, "tco_before": 4.0, "tco_after": 2.0,
               "wsl": -1.79, "tasks_before": 4, "tasks_after": 3, "colocation_before": 2.0, "colocation_after": 3.0, "moved_out": 2, "moved_in": 1},
    }
    assert summary["by_arch"]["Haswell12"]["hosts_after"] == 0
    assert summary["by_arch"]["Haswell12"]["colocation_after"] is None  # no occupied host: undefined, written as null ...
    assert "by_arch.Haswell12.colocation_after: nan written as null" in summary["notes"]  # ... and said so
    assert summary["fleet_change"] == {"freed": 1, "newly_occupied": 0, "wsl": pytest.approx(-1.79)}
    assert summary["moves_by_arch"] == {"Haswell12": {"Broadwell20": 1, "Skylake14": 1}}
    assert summary["metrics"]["after"]["colocation"] == pytest.approx(6 / 2)
    assert sum(r["tco_before"] for r in summary["by_arch"].values()) == pytest.approx(before.tco)
    assert summary["moves"] == {"count": after.moves, "temporary": 0, "temporary_outside_fleet": 0}
    assert "TCO (cost units) | 5 | 3" in (out / REPORT_FILE).read_text()


def test_readable_move_list_beside_moves_parquet(tmp_path, tiny_problem):
    trace, problem = tiny_problem
    out = write_plan(tmp_path / "plan", problem, _result(problem, _empty_h2(problem)), PlanContext(trace=str(trace.path), rules=RuleOptions(max_moves=5)))
    moves, listed = read_plan(out).moves, pd.read_csv(out / MOVES_CSV)
    assert listed["step"].tolist() == moves["step"].tolist() and listed["task"].tolist() == moves["task_id"].tolist()
    assert listed["to_host"].tolist() == moves["to_host"].tolist() and set(listed["from_arch"]) == {"Haswell12"}
    jobs = trace.tasks.set_index("task_id")["job_id"]
    assert listed["job"].tolist() == jobs[listed["task"]].tolist()
    # Both tasks of h2 (a Haswell12 of Type II, 2 cost units) leave it: together they empty it.
    assert listed["buys"].tolist() == [f"empties h2 (Haswell12, frees 2 cost units; move {i} of 2 off it)" for i in (1, 2)]
    text = (out / MOVES_MARKDOWN).read_text()
    assert "| step | task | job | from host (arch) | to host (arch) | what it buys |" in text
    assert all(f"| {r.step} | {r.task} | {r.job} | h2 (Haswell12) |" in text for r in listed.itertuples())


def test_gap_from_a_finite_bound(tmp_path, tiny_problem):
    trace, problem = tiny_problem
    assign = _empty_h2(problem)
    objective = evaluate(problem, assign).objective
    out = write_plan(tmp_path / "plan", problem, _result(problem, assign, bound=objective / 2), PlanContext(trace=str(trace.path), rules=RuleOptions(max_moves=5)))
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["gap"] == pytest.approx(0.5)


@pytest.mark.parametrize("status, error", [("infeasible", InfeasibleError), ("timeout", ValueError)])
def test_refuses_results_without_a_placement(tmp_path, tiny_problem, status, error):
    trace, problem = tiny_problem
    result = _result(problem, problem.current, status=status)
    result.infeasible_tasks = ["t000"] if status == "infeasible" else []
    with pytest.raises(error) as info:
        write_plan(tmp_path / "plan", problem, result, PlanContext(trace=str(trace.path)))
    if status == "infeasible":
        assert info.value.tasks == ["t000"]
    assert not (tmp_path / "plan").exists()


def test_refuses_an_invalid_placement(tmp_path, tiny_problem):
    trace, problem = tiny_problem
    no_moves = problem.with_rule(MoveBudget(0))
    with pytest.raises(ValueError, match="invalid placement: .*exceed the budget of 0"):
        write_plan(tmp_path / "plan", no_moves, _result(no_moves, _empty_h2(no_moves)), PlanContext(trace=str(trace.path), rules=RuleOptions(max_moves=0)))
    assert not (tmp_path / "plan").exists()


def test_refuses_to_write_into_the_trace(tiny_problem):
    trace, problem = tiny_problem
    with pytest.raises(InputError, match="would overwrite the input"):
        write_plan(trace.path / "plan", problem, _result(problem, problem.current), PlanContext(trace=str(trace.path)))


def test_read_plan_names_what_is_missing(tmp_path, tiny_problem):
    trace, problem = tiny_problem
    out = write_plan(tmp_path / "plan", problem, _result(problem, problem.current), PlanContext(trace=str(trace.path)))
    (out / MOVES_FILE).unlink()
    with pytest.raises(InputError, match="moves.parquet: file not found"):
        read_plan(out)
    pd.DataFrame({"task_id": ["t000"]}).to_parquet(out / MOVES_FILE)
    with pytest.raises(InputError, match="moves.parquet: column 'step, from_host"):
        read_plan(out)


def test_json_safe_replaces_non_finite_numbers():
    notes: list[str] = []
    assert json_safe({"a": np.float64("nan"), "b": [np.int64(2), float("inf")], "c": np.bool_(True)}, notes) == {"a": None, "b": [2, None], "c": True}
    assert notes == ["a: nan written as null", "b[1]: inf written as null"]
