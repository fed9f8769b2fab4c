"""`packer sweep`: the points it plans, the Pareto front, the baseline dominance check, and a real sweep whose plans all verify."""
from __future__ import annotations

import dataclasses
import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import crowdable_trace, tiny_tables, write_tables
from packer.cli import cli
from packer.errors import InputError
from packer.io.presets import load_presets
from packer.report.sweep import (BASELINE, OPTIMIZER, Sweep, SweepOptions, baseline_dominance, paper_directions, pareto_front, plan_points,
                          read_sweep, run_sweep)
from packer.plan.verify import verify_plan

WEIGHTS = (0.0, 1.0)


# --- pure functions on hand-made points ---


def test_pareto_front_on_hand_made_points():
    #            a    b    c    d    e (duplicate of b)  f (NaN)  g
    tco = [10.0, 8.0, 5.0, 9.0, 8.0, np.nan, 5.0]
    risk = [1.0, 3.0, 7.0, 4.0, 3.0, 0.0, 8.0]
    # d is dominated by b (8 <= 9, 3 <= 4); g by c (same TCO, more risk); f has no placement.
    assert pareto_front(tco, risk).tolist() == [True, True, True, False, True, False, False]


def test_pareto_front_of_nothing_and_of_one_point():
    assert pareto_front([], []).tolist() == []
    assert pareto_front([3.0], [2.0]).tolist() == [True]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=25))
def test_pareto_front_is_exactly_the_non_dominated_points(points):
    tco, risk = np.array(points, dtype=float).T
    front = pareto_front(tco, risk)
    for i in range(len(points)):
        dominated = any(tco[j] <= tco[i] and risk[j] <= risk[i] and (tco[j] < tco[i] or risk[j] < risk[i]) for j in range(len(points)))
        assert front[i] == (not dominated)
    # The lowest-TCO point with the least risk among them is always on the front.
    best = min(range(len(points)), key=lambda i: (tco[i], risk[i]))
    assert front[best]


def _table(rows):
    return pd.DataFrame(rows, columns=["point", "kind", "tco", "tasks_at_risk"])


def test_dominance_check_on_hand_made_points():
    table = _table([
        ("p99", OPTIMIZER, 50.0, 30.0),
        ("p99-sens-w1", OPTIMIZER, 70.0, 10.0),
        ("p99-sens-w3", OPTIMIZER, 65.0, 10.0),
        ("baseline-ffd", BASELINE, 60.0, 30.0),      # p99: lower TCO, equal risk -> dominated
        ("baseline-paragon", BASELINE, 80.0, 10.0),  # both sens points qualify; the cheaper (w3) is named
        ("baseline-tarcil", BASELINE, 50.0, 5.0),    # nobody has lower TCO -> not dominated
        ("baseline-random", BASELINE, 100.0, 9.0),   # lower TCO everywhere, but more risk -> not dominated
        ("baseline-least-loaded", BASELINE, np.nan, np.nan),  # no plan
    ])
    check = baseline_dominance(table).set_index("baseline")
    assert check.loc["baseline-ffd", "dominated"] and check.loc["baseline-ffd", "by"] == "p99"
    assert check.loc["baseline-paragon", "dominated"] and check.loc["baseline-paragon", "by"] == "p99-sens-w3"
    assert check.loc["baseline-paragon", "by_tco"] == 65.0 and check.loc["baseline-paragon", "by_tasks_at_risk"] == 10.0
    assert not check.loc["baseline-tarcil", "dominated"] and check.loc["baseline-tarcil", "by"] == ""
    assert not check.loc["baseline-random", "dominated"]
    assert pd.isna(check.loc["baseline-least-loaded", "dominated"])


def test_dominance_check_needs_strictly_lower_tco():
    check = baseline_dominance(_table([("p99", OPTIMIZER, 60.0, 0.0), ("baseline-ffd", BASELINE, 60.0, 30.0)]))
    assert not check["dominated"].iloc[0]


def test_dominance_on_interference():
    table = pd.DataFrame({"point": ["p99", "baseline-ffd"], "kind": [OPTIMIZER, BASELINE], "tco": [5.0, 6.0],
                          "tasks_at_risk": [9.0, 1.0], "interference": [0.5, 0.7]})
    assert not baseline_dominance(table)["dominated"].iloc[0]
    by_interference = baseline_dominance(table, "interference")
    assert by_interference["dominated"].iloc[0] and by_interference["by_interference"].iloc[0] == 0.5


# --- which solves a sweep runs ---


def _direction_table(rows):
    table = pd.DataFrame(rows, columns=["point", "kind", "config", "max_new_at_risk", "tco", "hosts", "tasks_at_risk", "frag_share_cpu", "frag_share_mem"])
    table["pareto"] = pareto_front(table["tco"], table["tasks_at_risk"])
    return Sweep(path=None, table=table, meta={"current": {"tasks_at_risk": 200}, "n_tasks": 1000})


def test_paper_directions_on_hand_made_points():
    rows = [
        ("baseline", OPTIMIZER, "baseline", np.nan, 95.0, 60, 220, 0.40, 0.50),
        ("p99", OPTIMIZER, "p99", np.nan, 90.0, 55, 260, 0.35, 0.45),
        ("p99-sens-w0", OPTIMIZER, "p99-sens", np.nan, 90.0, 55, 250, 0.35, 0.45),
        ("p99-sens-w1", OPTIMIZER, "p99-sens", np.nan, 92.0, 57, 190, 0.36, 0.46),
        ("p99-sens-w10", OPTIMIZER, "p99-sens", np.nan, 99.0, 62, 150, 0.40, 0.50),
        ("p99-sens-no-new-risk", OPTIMIZER, "p99-sens", 0.0, 91.0, 56, 200, 0.36, 0.46),
    ]
    checks = {c.name: c for c in paper_directions(_direction_table(rows))}
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]
    assert "p99-sens-w1, p99-sens-w10" in checks["a P99 Sens weight below Baseline's tasks at risk, above P99's hosts"].detail
    assert checks["at least 4 distinct points on the TCO-vs-tasks-at-risk front"].detail.startswith("4:")
    # The no-new-risk guard point does not stand for a weight; a flat pool misses the directions.
    rows[3] = ("p99-sens-w1", OPTIMIZER, "p99-sens", np.nan, 90.0, 55, 250, 0.35, 0.45)
    rows[4] = ("p99-sens-w10", OPTIMIZER, "p99-sens", np.nan, 90.0, 55, 250, 0.35, 0.45)
    rows[5] = ("p99-sens-no-new-risk", OPTIMIZER, "p99-sens", 0.0, 99.0, 62, 150, 0.40, 0.50)
    missed = {c.name for c in paper_directions(_direction_table(rows)) if not c.passed}
    assert missed == {"a P99 Sens weight below Baseline's tasks at risk, above P99's hosts",
                      "at least 4 distinct points on the TCO-vs-tasks-at-risk front"}
    saturated = _direction_table(rows)
    saturated.meta["current"]["tasks_at_risk"] = 930
    assert not next(c for c in paper_directions(saturated) if c.name == "tasks at risk before any move").passed


def test_refinement_weight_fills_the_widest_gap_of_the_ladder():
    from packer.report.sweep import refinement_weight

    def ladder(points):
        return pd.DataFrame([{"kind": OPTIMIZER, "config": "p99-sens", "weight": w, "max_new_at_risk": np.nan, "tco": tco,
                              "tasks_at_risk": risk} for w, tco, risk in points])

    # 0 -> 1 changes little, 3 -> 10 everything: the next weight is sqrt(30) = 5.5.
    assert refinement_weight(ladder([(0, 100, 50), (1, 100, 49), (3, 101, 48), (10, 140, 10)]), "p99-sens") == 5.5
    # A gap starting at weight 0 gets a third of the upper weight.
    assert refinement_weight(ladder([(0, 100, 90), (0.3, 140, 10)]), "p99-sens") == 0.1
    # Flat ladders, or gaps already split to two digits, need nothing more.
    assert refinement_weight(ladder([(0, 100, 50), (10, 100, 50)]), "p99-sens") is None
    assert refinement_weight(ladder([(1, 100, 50), (1.1, 150, 10)]), "p99-sens") is None
    assert refinement_weight(ladder([(1, 100, 50)]), "p99-sens") is None
    assert refinement_weight(ladder([(0, 100, 50), (10, 140, 10)]), "p99") is None


def test_points_reuse_solves_whose_problem_does_not_depend_on_the_weight():
    options = SweepOptions(weights=(0, 0.1, 0.3, 1, 3, 10))
    points, skipped = plan_points(options, load_presets(), has_usage=True)
    optimizer = [p for p in points if p.kind == OPTIMIZER]
    assert [p.name for p in optimizer[:4]] == ["baseline", "p99-cpu", "p99-mem", "p99"]
    assert all(p.weight is None and p.covers == (0, 0.1, 0.3, 1, 3, 10) for p in optimizer[:4])
    assert [p.name for p in optimizer[4:]] == ["p99-sens-w0", "p99-sens-w0.1", "p99-sens-w0.3", "p99-sens-w1", "p99-sens-w3", "p99-sens-w10",
                                               "p99-sens-no-new-risk"]
    baselines = [p for p in points if p.kind == BASELINE]
    assert len(baselines) == 5 and all(p.config == "p99-sens" and p.solver == p.name for p in baselines)
    # The grid: 5 configs x 6 weights + 5 baselines = 35 points from 15 solves, plus the guarded point.
    guarded = [p for p in points if p.max_new_at_risk is not None]
    assert [(p.name, p.config, p.weight, p.solver, p.max_new_at_risk) for p in guarded] == [("p99-sens-no-new-risk", "p99-sens", 0.0, "engine", 0)]
    assert sum(max(len(p.covers), 1) for p in points) == 36 and len(points) == 16 and skipped == {}
    plain, _ = plan_points(SweepOptions(no_new_risk=False), load_presets(), has_usage=True)
    assert len(plain) == 15 and all(p.max_new_at_risk is None for p in plain)


def test_points_on_a_requests_only_trace_keep_only_request_based_configs():
    points, skipped = plan_points(SweepOptions(), load_presets(), has_usage=False)
    assert [p.name for p in points if p.kind == OPTIMIZER] == ["baseline"]
    assert set(skipped) == {"p99-cpu", "p99-mem", "p99", "p99-sens"} and all("no usage" in why for why in skipped.values())
    assert {p.config for p in points if p.kind == BASELINE} == {"baseline"}


@pytest.mark.parametrize("options, message", [
    (SweepOptions(configs=("p98",)), "unknown config"),
    (SweepOptions(weights=(-1.0,)), "weights"),
    (SweepOptions(weights=()), "weights"),
    (SweepOptions(baselines=("baseline-magic",)), "unknown baseline"),
    (SweepOptions(solver="baseline-ffd"), "optimizer"),
    (SweepOptions(goal="fair"), "goal"),
    (SweepOptions(refine=-1), "--refine"),
])
def test_bad_options_are_input_errors(options, message):
    with pytest.raises(InputError, match=message):
        plan_points(options, load_presets(), has_usage=True)


# --- a real sweep on a tiny trace ---


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    hosts, tasks, usage = tiny_tables(n_tasks=24, n_hosts=8, seed=1)
    trace = write_tables(root / "trace", hosts, tasks, usage)
    events = []
    sweep = run_sweep(trace, root / "sweep", SweepOptions(weights=WEIGHTS, time_limit_s=5, refine=0), progress=events.append)
    return trace, sweep, events


def test_sweep_writes_the_table_and_its_meta(tiny_sweep):
    trace, sweep, events = tiny_sweep
    table = read_sweep(sweep.path).table
    assert table["point"].tolist() == ["baseline", "p99-cpu", "p99-mem", "p99", "p99-sens-w0", "p99-sens-w1", "p99-sens-no-new-risk",
                                       "baseline-random", "baseline-least-loaded", "baseline-ffd", "baseline-paragon", "baseline-tarcil"]
    assert set(table["status"]) <= {"optimal", "feasible"}
    for column in ("tco", "hosts", "frag_cpu", "frag_mem", "frag_share_cpu", "wsl", "tasks_at_risk", "interference", "interference_cpu",
                   "moves", "wall_s", "gap", "rp_min"):
        assert table[column].notna().all() or column == "gap", column
    assert (table["moves"] <= 400).all()
    csv = pd.read_csv(sweep.path / "sweep.csv")
    assert csv["point"].tolist() == table["point"].tolist() and np.allclose(csv["tco"], table["tco"])
    meta = json.loads((sweep.path / "sweep.json").read_text())
    assert meta["grid_points"] == 4 * len(WEIGHTS) + len(WEIGHTS) + 1 + 5 and meta["solves"] == len(table)
    assert meta["solves_reused"] == meta["grid_points"] - meta["solves"] == 4
    assert meta["pareto"] == table.loc[table["pareto"], "point"].tolist()
    assert table["pareto"].tolist() == pareto_front(table["tco"], table["tasks_at_risk"]).tolist()
    assert [d["baseline"] for d in meta["dominance"]] == table.loc[table["kind"] == BASELINE, "point"].tolist()
    assert meta["yardstick"] == "p99-sens" and meta["timings"]["total_s"] > 0
    assert meta["sensitivity_basis"] == "need" and sum(meta["score_sources"].values()) == meta["n_tasks"]
    # Progress: a start and a done event per solve, in order.
    assert [(e.step, e.row is None) for e in events] == [(i, first) for i in range(1, len(table) + 1) for first in (True, False)]
    # Nothing but the sweep folder is left beside it (atomic write: no temporary folders).
    assert sorted(p.name for p in sweep.path.parent.iterdir()) == ["sweep", "trace"]


def test_every_plan_of_the_sweep_verifies_and_matches_its_row(tiny_sweep):
    trace, sweep, _ = tiny_sweep
    for _, row in sweep.table.iterrows():
        plan = sweep.path / row["plan"]
        report = verify_plan(trace, plan)
        assert report.ok, (row["point"], [c for c in report.checks if not c.passed])
        summary = json.loads((plan / "summary.json").read_text())
        after = summary["metrics"]["after"]
        # Limit-independent metrics: the table's (measured on the yardstick) equal the plan's own.
        assert row["tco"] == pytest.approx(after["tco"]) and row["hosts"] == after["hosts"] and row["moves"] == after["moves"]
        assert row["wsl"] == pytest.approx(summary["fleet_change"]["wsl"], abs=1e-9)
        assert summary["context"]["config"] == row["config"] and summary["context"]["rules"]["max_moves"] == 400
        if not math.isnan(row["weight"]):
            assert summary["context"]["weights"]["sensitivity"] == row["weight"]
        if row["config"] == "p99-sens":
            # On its own configuration's problem the yardstick is the problem: the risk numbers agree too.
            assert row["tasks_at_risk"] == after["tasks_at_risk"]
            assert row["interference"] == pytest.approx(sum(after["interference"].values()))


def test_the_no_new_risk_point_adds_no_task_at_risk(tiny_sweep):
    sweep = tiny_sweep[1]
    row = sweep.table.set_index("point").loc["p99-sens-no-new-risk"]
    assert row["max_new_at_risk"] == 0 and row["weight"] == 0 and row["solver"] == "engine"
    assert row["tasks_at_risk"] <= sweep.meta["current"]["tasks_at_risk"]


def test_higher_sensitivity_weight_never_raises_interference_for_the_exact_solver(tiny_sweep):
    # The tiny trace is solved exactly (CBC): a larger weight cannot end with more interference.
    table = tiny_sweep[1].table.set_index("point")
    assert (table.loc[["p99-sens-w0", "p99-sens-w1"], "status"] == "optimal").all()
    assert table.loc["p99-sens-w1", "interference"] <= table.loc["p99-sens-w0", "interference"] + 1e-6


def test_requests_only_trace_sweeps_request_configs_and_says_what_it_skipped(tmp_path):
    hosts, tasks, _ = tiny_tables(n_tasks=10, n_hosts=4)
    trace = write_tables(tmp_path / "requests", hosts, tasks, None)
    sweep = run_sweep(trace, tmp_path / "sweep", SweepOptions(baselines=("baseline-ffd",), time_limit_s=5))
    assert sweep.table["point"].tolist() == ["baseline", "baseline-ffd"]
    assert sweep.meta["yardstick"] == "baseline" and not sweep.meta["has_usage"]
    assert set(sweep.meta["skipped"]) == {"p99-cpu", "p99-mem", "p99", "p99-sens"}
    assert (sweep.table["tasks_at_risk"] == 0).all()


def test_an_interrupted_sweep_leaves_nothing(tmp_path):
    hosts, tasks, usage = tiny_tables(n_tasks=10, n_hosts=4)
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)

    def stop(event):
        if event.step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(trace, tmp_path / "sweep", SweepOptions(configs=("baseline", "p99"), weights=(1.0,), baselines=("baseline-ffd",)), progress=stop)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]


def test_a_resumed_sweep_reuses_the_plans_it_finds_and_solves_the_rest(tmp_path):
    hosts, tasks, usage = tiny_tables(n_tasks=10, n_hosts=4)
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    options = SweepOptions(configs=("baseline", "p99"), weights=(1.0,), baselines=("baseline-ffd",), time_limit_s=5, refine=0)
    first = run_sweep(trace, tmp_path / "sweep", options)
    shutil.rmtree(tmp_path / "sweep" / "plans" / "p99")  # as if the run had stopped before that point
    solved = []
    again = run_sweep(trace, tmp_path / "sweep", options, resume=True, progress=lambda e: e.row and not e.resumed and solved.append(e.point.name))
    assert solved == ["p99"] and sorted(again.meta["resumed"]) == sorted(set(first.meta["points"]) - {"p99"})
    kept = first.table.set_index("point").drop(index="p99")
    pd.testing.assert_frame_equal(again.table.set_index("point").loc[kept.index, ["tco", "hosts", "objective", "wall_s"]],
                                  kept[["tco", "hosts", "objective", "wall_s"]])
    assert verify_plan(trace, tmp_path / "sweep" / "plans" / "p99").ok
    with pytest.raises(InputError, match="other options"):
        run_sweep(trace, tmp_path / "sweep", dataclasses.replace(options, time_limit_s=6), resume=True)


# --- the command ---


def test_sweep_command_prints_the_table_and_the_dominance_check(tmp_path):
    hosts, tasks, usage = tiny_tables(n_tasks=12, n_hosts=5)
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    out = tmp_path / "sweep"
    result = CliRunner().invoke(cli, ["sweep", str(trace), "--out", str(out), "--weights", "0.5", "--config", "baseline", "--config", "p99-sens",
                                      "--baseline", "baseline-ffd", "--time-limit", "5", "--report"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "baseline-ffd" in result.output and "p99-sens-w0.5" in result.output and "current placement" in result.output
    assert "optimizer dominates" in result.output and "grid points, 4 solves" in result.output
    assert "p99-sens-no-new-risk" in result.output
    assert (out / "sweep.parquet").exists() and (out / "plans" / "p99-sens-w0.5" / "summary.json").exists()
    assert (out / "report" / "report.html").exists()


@pytest.mark.parametrize("args, message", [
    (["--weights", "a,b"], "comma-separated"),
    (["--config", "p98"], "unknown config"),
    (["--weights", "-1"], "weights"),
])
def test_sweep_command_rejects_bad_options_with_exit_2(tmp_path, args, message):
    hosts, tasks, usage = tiny_tables()
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    result = CliRunner().invoke(cli, ["sweep", str(trace), "--out", str(tmp_path / "s"), *args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "s").exists()


def test_a_failing_solve_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    import packer.solvers.run

    hosts, tasks, usage = tiny_tables(n_tasks=10, n_hosts=4)
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    real = packer.solvers.run.run_solver

    def flaky(problem, solver, *args, **kwargs):
        if solver == "baseline-ffd":
            raise ValueError("solver bug")
        return real(problem, solver, *args, **kwargs)

    monkeypatch.setattr(packer.solvers.run, "run_solver", flaky)
    out = tmp_path / "sweep"
    result = CliRunner().invoke(cli, ["sweep", str(trace), "--out", str(out), "--config", "p99", "--baseline", "baseline-ffd",
                                      "--baseline", "baseline-paragon"])
    assert result.exit_code == 1 and "FAILED baseline-ffd: ValueError: solver bug" in result.output
    sweep = read_sweep(out)
    status = sweep.table.set_index("point")["status"]
    assert status["baseline-ffd"] == "error" and status["p99"] in ("optimal", "feasible") and status["baseline-paragon"] == "feasible"
    assert sweep.meta["errors"] == {"baseline-ffd": "ValueError: solver bug"}
    assert not (out / "plans" / "baseline-ffd").exists()
    dominance = {d["baseline"]: d["dominated"] for d in sweep.meta["dominance"]}
    assert dominance["baseline-ffd"] is None


def test_the_sweep_refines_its_ladder_where_the_trade_off_changes(tmp_path):
    # At weight 0 the tasks pack together (hosts freed, all at risk), at weight 100 they stay apart;
    # the refinement solves a weight in between and its plan verifies.
    trace = crowdable_trace(tmp_path / "t")
    out = tmp_path / "sweep"
    result = CliRunner().invoke(cli, ["sweep", str(trace), "--out", str(out), "--config", "p99-sens", "--weights", "0,100", "--refine", "1",
                                      "--no-baselines", "--no-no-new-risk-point", "--time-limit", "5"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    table = read_sweep(out).table.set_index("point")
    assert list(table.index) == ["p99-sens-w0", "p99-sens-w100", "p99-sens-w33"]
    assert table.loc["p99-sens-w0", "tasks_at_risk"] > table.loc["p99-sens-w100", "tasks_at_risk"]
    assert table.loc["p99-sens-w33", "weight"] == 33 and table.loc["p99-sens-w33", "covers"] == "33"
    assert verify_plan(trace, out / table.loc["p99-sens-w33", "plan"]).ok
