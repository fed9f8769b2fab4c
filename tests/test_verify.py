"""`packer verify`: passes on correct plans, fails with a clear message on each kind of tampering."""
from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pulp
import pytest
from click.testing import CliRunner

from packer.cli import cli
from packer.model.metrics import evaluate
from packer.plan.plan import MOVES_FILE, PLACEMENT_FILE, REPORT_FILE, SUMMARY_FILE, format_gap, relative_gap, write_plan
from packer.plan.context import PlanContext
from packer.io.presets import get_preset
from packer.model.build import GoalWeights, RuleOptions, build_problem
from packer.characterization.profile import profile_tasks
from packer.solvers.result import SolveResult
from packer.io.trace import read_trace, write_trace
from packer.plan.verify import verify_plan
from packer.plan.claims import check_claims
from unittest import mock

from packer.solvers import milp, run
from packer.solvers.run import BUDGET_PATTERN_METHOD, engine_bound, run_solver
from problems import small_problem
from packer.report.report import plan_sections

from conftest import tiny_tables, write_tables

# Two architectures with the same per-core throughput, so cpu demand is the same everywhere.
TIGHT_FLEET = """
[types.I]
cost = 1.0
[types.II]
cost = 2.0
[arch.Small]
type = "I"
cores = 4
mem = 8
net = 10
membw = 10
score = 1.0
[arch.Big]
type = "II"
cores = 8
mem = 16
net = 10
membw = 20
score = 2.0
"""

# h0 (Small) is full with a and b; h1 (Small) is full with c; h2 (Big) has room for c; h3 (Small) has f, pinned.
TIGHT_TASKS = {  # task: (host, cpu cores, mem GiB, movable)
    "a": ("h0", 2, 4, True),
    "b": ("h0", 2, 4, True),
    "c": ("h1", 4, 8, True),
    "d": ("h2", 2, 4, True),
    "e": ("h2", 2, 2, True),
    "f": ("h3", 2, 4, False),
}
# c makes room on h1 for a; b joins f on h3; h0 is freed.
TIGHT_TARGET = {"a": "h1", "b": "h3", "c": "h2"}


def write_tight_trace(path: Path) -> Path:
    hosts = pd.DataFrame({"host_id": ["h0", "h1", "h2", "h3"], "arch": ["Small", "Small", "Big", "Small"]})
    tasks = pd.DataFrame(
        {
            "task_id": list(TIGHT_TASKS),
            "job_id": list(TIGHT_TASKS),
            "host_id": [v[0] for v in TIGHT_TASKS.values()],
            "cpu_request": [float(v[1]) for v in TIGHT_TASKS.values()],
            "mem_request": [float(v[2]) for v in TIGHT_TASKS.values()],
            "net_request": [0.5] * len(TIGHT_TASKS),
            "movable": [v[3] for v in TIGHT_TASKS.values()],
        }
    )
    return write_trace(path, hosts, tasks, None, fleet_toml=TIGHT_FLEET)


@pytest.fixture
def tight(tmp_path):
    """(trace folder, plan folder) of a valid 3-move plan whose move order matters."""
    trace_path = write_tight_trace(tmp_path / "tight")
    problem = build_problem(read_trace(trace_path), get_preset("baseline"), rules=RuleOptions(max_moves=3))
    assign = problem.current.copy()
    for task, host in TIGHT_TARGET.items():
        assign[list(problem.task_ids).index(task)] = list(problem.host_ids).index(host)
    result = SolveResult(assign, "feasible", evaluate(problem, assign).objective, 2.0, "hand", 0.01)
    context = PlanContext(trace=str(trace_path), fleet="trace", config="baseline", rules=RuleOptions(max_moves=3), solver="hand")
    return trace_path, write_plan(tmp_path / "plan", problem, result, context)


def run_verify(trace: Path, plan: Path):
    return CliRunner().invoke(cli, ["verify", str(trace), str(plan)])


def edit_placement(plan: Path, change) -> None:
    placement = pd.read_parquet(plan / PLACEMENT_FILE)
    change(placement).to_parquet(plan / PLACEMENT_FILE, index=False)


def move_task(task: str, host: str):
    return lambda p: p.assign(host_id=np.where(p["task_id"] == task, host, p["host_id"]))


def test_a_correct_plan_passes(tight):
    trace, plan = tight
    moves = pd.read_parquet(plan / MOVES_FILE)
    assert moves["task_id"].tolist().index("c") < moves["task_id"].tolist().index("a")
    result = run_verify(trace, plan)
    assert result.exit_code == 0, result.output
    assert result.output.count("PASS") == 7 and "FAIL" not in result.output
    assert "valid; summary verified" in result.output


def test_a_p99_plan_is_verified_from_recomputed_profiles(tmp_path, tiny_trace):
    trace = read_trace(tiny_trace)
    profiles = profile_tasks(trace, (99.0,), 60).profiles
    problem = build_problem(trace, get_preset("p99"), profiles)
    assign = problem.current.copy()
    assign[problem.host_ids[assign] == "h2"] = 0
    result = SolveResult(assign, "feasible", evaluate(problem, assign).objective, -math.inf, "hand", 0.1)
    plan = write_plan(tmp_path / "plan", problem, result, PlanContext(trace=str(tiny_trace), config="p99"))
    report = verify_plan(tiny_trace, plan)
    assert report.ok, report.checks
    # A different window changes the p99 limits, hence fragmentation: the verifier must notice.
    summary = json.loads((plan / SUMMARY_FILE).read_text())
    summary["context"]["window_s"] = 120
    (plan / SUMMARY_FILE).write_text(json.dumps(summary))
    report = verify_plan(tiny_trace, plan)
    assert not report.ok
    assert any("fragmentation.cpu" in m for c in report.checks if c.name == "summary" for m in c.messages)


@pytest.mark.parametrize(
    "tamper, check, message",
    [
        (lambda p: p[p["task_id"] != "d"], "placement", "1 tasks of the trace missing from the placement: d"),
        (lambda p: pd.concat([p, p[p["task_id"] == "e"]]), "placement", "1 tasks placed more than once: e"),
        (lambda p: p.assign(host_id=np.where(p["task_id"] == "e", "h9", p["host_id"])), "placement", "1 tasks on hosts not in the trace: h9"),
        (move_task("e", "h3"), "rules", "1 hosts over capacity, e.g. h3 in cpu, mem"),
        (move_task("f", "h0"), "rules", "1 pinned tasks moved, e.g. ['f']"),
        (move_task("e", "h0"), "rules", "4 moves exceed the budget of 3"),
    ],
    ids=["missing", "duplicated", "unknown-host", "over-capacity", "pinned", "too-many-moves"],
)
def test_a_tampered_placement_fails(tight, tamper, check, message):
    trace, plan = tight
    edit_placement(plan, tamper)
    result = run_verify(trace, plan)
    assert result.exit_code == 1, result.output
    assert f"FAIL {check}: " in result.output
    assert message in result.output
    assert "INVALID plan" in result.output


def test_moves_out_of_order_fail(tight):
    trace, plan = tight
    moves = pd.read_parquet(plan / MOVES_FILE)
    order = moves["task_id"].tolist()
    first_a, first_c = order.index("a"), order.index("c")
    steps = moves["step"].to_numpy().copy()
    steps[[first_a, first_c]] = steps[[first_c, first_a]]
    moves.assign(step=steps).to_parquet(plan / MOVES_FILE, index=False)
    result = run_verify(trace, plan)
    assert result.exit_code == 1, result.output
    assert "PASS moves:" in result.output  # same set of moves ...
    assert "FAIL move order: step 1 (task a to h1): host h1 over capacity (cpu 6 > 4, mem 12 > 8)" in result.output  # ... in a bad order


def test_a_move_list_that_disagrees_with_the_placement_fails(tight):
    trace, plan = tight
    moves = pd.read_parquet(plan / MOVES_FILE)
    moves[moves["task_id"] != "b"].assign(step=[1, 2]).to_parquet(plan / MOVES_FILE, index=False)
    result = run_verify(trace, plan)
    assert result.exit_code == 1
    assert "FAIL moves: 1 tasks change host in the placement but have no move: b" in result.output
    assert "moves.count: summary says 3, recomputed 2" in result.output


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s["metrics"]["after"].update(tco=s["metrics"]["after"]["tco"] - 1), "metrics.after.tco: summary says 3.0, recomputed 4.0"),
        (lambda s: s["by_type"]["I"].update(hosts_after=1), "by_type.I.hosts_after: summary says 1, recomputed 2"),
        (lambda s: s["objective"].update(total=1.0), "objective.total: summary says 1.0"),
        (lambda s: s["moves"].update(temporary=1), "moves.temporary: summary says 1, recomputed 0"),
        (lambda s: s.update(bound=99.0), "above the plan's own objective"),
    ],
    ids=["tco", "by-type", "objective", "temporary", "bound"],
)
def test_a_false_summary_fails(tight, edit, message):
    trace, plan = tight
    summary = json.loads((plan / SUMMARY_FILE).read_text())
    edit(summary)
    (plan / SUMMARY_FILE).write_text(json.dumps(summary))
    result = run_verify(trace, plan)
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert "PASS rules:" in result.output and "the plan is valid but its summary is false" in result.output


def test_unreadable_input_exits_2(tight):
    trace, plan = tight
    (plan / SUMMARY_FILE).write_text("{not json")
    result = run_verify(trace, plan)
    assert result.exit_code == 2
    assert "summary.json: not valid JSON" in result.output
    (plan / SUMMARY_FILE).unlink()
    result = run_verify(trace, plan)
    assert result.exit_code == 2 and "summary.json: file not found" in result.output


def test_a_context_of_the_wrong_type_exits_2(tight):
    trace, plan = tight
    summary = json.loads((plan / SUMMARY_FILE).read_text())
    summary["context"]["rules"]["max_moves"] = "three"
    (plan / SUMMARY_FILE).write_text(json.dumps(summary))
    result = run_verify(trace, plan)
    assert result.exit_code == 2
    assert "column 'context': value(s) of the wrong type or unknown: rules.max_moves='three'" in result.output


# --- Claims of a solved plan: status, bound, gap, solver flags (packer.plan.claims) ---

SOLVES = {  # plan name: packer solve options
    # One second leaves no time for the neighbourhood search: the plan keeps the LP bound on what the budget can free.
    "engine-budget": ["--solver", "engine", "--max-moves", "3", "--time-limit", "1"],
    "engine-proven": ["--solver", "engine", "--max-moves", "3"],  # CP-SAT proves it optimal over the whole instance
    "engine-full": ["--solver", "engine", "--max-moves", "unlimited"],
    "cbc": ["--solver", "cbc"],
    "baseline": ["--solver", "baseline-ffd"],
}


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """(trace, {name: (plan folder, console output)}) for a tiny trace solved as :data:`SOLVES` says."""
    root = tmp_path_factory.mktemp("claims")
    hosts, tasks, usage = tiny_tables(n_tasks=12, n_hosts=6)
    trace = write_tables(root / "trace", hosts, tasks, usage)
    plans = {}
    for name, options in SOLVES.items():
        result = CliRunner().invoke(cli, ["solve", str(trace), "--out", str(root / name), "--time-limit", "5", *options])
        assert result.exit_code == 0, result.output
        plans[name] = (root / name, result.output)
    return trace, plans


def forged(solved, tmp_path, name: str, edit) -> Path:
    """A copy of the solved plan ``name`` whose summary.json ``edit`` changed."""
    plan = tmp_path / name
    shutil.copytree(solved[1][name][0], plan)
    summary = json.loads((plan / SUMMARY_FILE).read_text())
    edit(summary)
    (plan / SUMMARY_FILE).write_text(json.dumps(summary))
    return plan


def with_bound(bound: float):
    """Set the bound and the gap that follows from it, so only the bound itself is false."""
    return lambda s: s.update(bound=bound, gap=relative_gap(s["objective"]["total"], bound))


@pytest.mark.parametrize("name", list(SOLVES))
def test_an_untouched_solved_plan_verifies(solved, name):
    trace, plans = solved
    result = run_verify(trace, plans[name][0])
    assert result.exit_code == 0, result.output
    assert "claim, not verified: runtime_s" in result.output
    if name == "cbc":  # the exact solver's optimum, re-proven by verify
        assert "PASS status and bound: bound 1.00402: recomputed (CBC's proven optimum)" in result.output
        assert "status optimal: the objective 1.00402 meets the lower bound 1.00402 verify computed (the optimum verify re-proved with CBC)" in result.output
    elif name == "engine-proven":
        assert "status: optimal (CP-SAT proved it before the time limit): gap 0.00%" in plans[name][1]
        assert re.search(r"status optimal: the objective (\S+) meets the lower bound \1 verify computed \(the optimum verify "
                         r"re-proved with CBC\)", result.output)
    elif name == "baseline":
        assert "PASS status and bound: nothing to prove" in result.output
    else:
        assert "PASS status and bound: bound" in result.output
        assert "claim, not verified: solver.stats.interrupted: false, solver.stats.timed_out: false" in result.output


@pytest.mark.parametrize(
    "name, edit, message",
    [
        # Verify re-proves these engine plans optimal with CBC (they are), but an optimal plan's bound meets its objective.
        ("engine-budget", lambda s: s.update(status="optimal"), "with status 'optimal': an optimal plan's bound meets its objective"),
        ("engine-full", lambda s: s.update(status="optimal"), "with status 'optimal': an optimal plan's bound meets its objective"),
        ("engine-budget", lambda s: with_bound(s["bound"] + 0.5)(s), "bound: summary says 7.5, recomputed 7.0 (the primary cost today minus"),
        ("engine-full", lambda s: (with_bound(1.003)(s), s["solver"]["stats"]["bound"].update(primary_lower_bound=1.003)),
         "bound: summary says 1.003, "),  # above the column generation verify ran (or the MILP bound, where that is the solve's)
        ("cbc", with_bound(0.9), "bound: summary says 0.9, recomputed 1.0040"),
        ("engine-budget", lambda s: s.update(gap=0.01), "gap: summary says 0.01, recomputed 0.134"),
        ("engine-full", lambda s: s.update(gap=0.01), "gap: summary says 0.01, recomputed 0.0039"),
        ("cbc", lambda s: s.update(gap=0.01), "gap: summary says 0.01, recomputed 9.99"),
        ("cbc", lambda s: s["solver"]["stats"].update(interrupted=True),
         "solver.stats.interrupted: summary says true with status 'optimal': an interrupted solve never finished a proof"),
        ("engine-budget", lambda s: (s["solver"]["stats"].update(interrupted=True), s.update(status="optimal")),
         "solver.stats.interrupted: summary says true with status 'optimal'"),
        ("engine-full", lambda s: s["solver"]["stats"].update(timed_out=True),
         "solver.stats.timed_out: summary says true, but runtime_s"),
        ("baseline", lambda s: with_bound(s["objective"]["total"] / 2)(s), "but the baseline-ffd policy computes no bound"),
        ("baseline", lambda s: s.update(status="optimal"), "status: summary says 'optimal', but verify proved no bound the objective"),
        ("engine-proven", lambda s: with_bound(s["objective"]["total"] - 0.5)(s), "with status 'optimal': an optimal plan's bound meets"),
    ],
    ids=["status-engine-budget", "status-engine-full", "bound-engine-budget", "bound-engine-full", "bound-cbc",
         "gap-engine-budget", "gap-engine-full", "gap-cbc", "interrupted-cbc", "interrupted-engine", "timed-out",
         "bound-baseline", "status-baseline", "bound-engine-proven"],
)
def test_a_forged_claim_fails(solved, tmp_path, name, edit, message):
    result = run_verify(solved[0], forged(solved, tmp_path, name, edit))
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert "the plan is valid but its summary is false" in result.output


def test_an_engine_bound_looser_than_this_versions_verifies_where_its_details_follow_from_it(solved, tmp_path):
    """A plan made before the bounds grew tighter (e.g. before they counted the RP guard) states a looser, valid bound."""
    def loosen(summary, details=True):
        with_bound(summary["bound"] - 0.5)(summary)
        bound = summary["solver"]["stats"]["bound"]
        if details:
            bound["freeable_bound"] += 0.5
            bound["share_of_bound"] = bound["freed"] / bound["freeable_bound"]

    result = run_verify(solved[0], forged(solved, tmp_path, "engine-budget", loosen))
    assert result.exit_code == 0, result.output
    assert "PASS status and bound: bound 6.5: valid, below the 7 this version of packer computes" in result.output
    result = run_verify(solved[0], forged(solved, tmp_path / "details", "engine-budget", lambda s: loosen(s, details=False)))
    assert result.exit_code == 1 and "solver.stats.bound.freeable_bound: summary says" in result.output, result.output


def test_an_engine_plan_whose_bound_autos_exact_solver_raised_verifies(solved, tmp_path):
    """``auto`` keeps the engine's plan but HiGHS's higher dual bound: the bound is HiGHS's claim, not the engine's to recompute."""
    def raised(summary):
        engine = summary["bound"]
        with_bound((engine + summary["objective"]["total"]) / 2)(summary)
        summary["solver"]["stats"]["auto"] = {"engine": {"status": "feasible", "bound": engine},
                                              "highs": {"status": "feasible", "bound": summary["bound"]}}

    result = run_verify(solved[0], forged(solved, tmp_path, "engine-full", raised))
    assert result.exit_code == 0, result.output
    assert "claim, not verified: bound" in result.output and "highs's own bound, above verify's best lower bound" in result.output


def solve_generated(tmp_path: Path, generate: list[str], solve: list[str]) -> tuple[Path, Path, str]:
    """A trace ``packer generate`` writes (0.2 days, ``generate``'s options) solved by the engine, counted as work (``solve``'s
    options): the trace, the plan and the console's output."""
    trace, plan = tmp_path / "trace", tmp_path / "plan"
    result = CliRunner().invoke(cli, ["generate", "--days", "0.2", *generate, "--out", str(trace)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["solve", str(trace), "--out", str(plan), "--solver", "engine", "--deterministic", *solve])
    assert result.exit_code == 0, result.output
    return trace, plan, result.output


def test_a_p99_sens_plans_bound_counts_interference_and_verifies(tmp_path):
    """The engine's bound on a P99 Sens full repack is the MILP's on TCO plus interference, above the TCO bound alone."""
    trace, plan, _ = solve_generated(tmp_path, ["--tasks", "30", "--hosts", "15", "--seed", "3"],
                                     ["--config", "p99-sens", "--max-moves", "unlimited", "--time-limit", "3"])
    summary = json.loads((plan / SUMMARY_FILE).read_text())
    detail = summary["solver"]["stats"]["bound"]
    assert detail["primary_and_soft_lower_bound"] > detail["primary_lower_bound"] + 1
    assert summary["bound"] == pytest.approx(detail["primary_and_soft_lower_bound"] + detail.get("objective_floor", 0.0))
    result = run_verify(trace, plan)
    assert result.exit_code == 0, result.output
    assert "(the lower bound on the primary cost and the interference term, the MILP over architectures)" in result.output
    looser = tmp_path / "looser"  # as an earlier version's, which bounded interference less tightly
    shutil.copytree(plan, looser)
    with_bound(summary["bound"] - 0.5)(summary)
    detail["primary_and_soft_lower_bound"] -= 0.5
    (looser / SUMMARY_FILE).write_text(json.dumps(summary))
    result = run_verify(trace, looser)
    assert result.exit_code == 0 and "valid, below the" in result.output, result.output
    summary = json.loads((plan / SUMMARY_FILE).read_text())
    detail = summary["solver"]["stats"]["bound"]
    detail["primary_lower_bound"] -= 1  # a false TCO bound beside the true bound on the objective
    (plan / SUMMARY_FILE).write_text(json.dumps(summary))
    result = run_verify(trace, plan)
    assert result.exit_code == 1 and "solver.stats.bound.primary_lower_bound: summary says 3.0, recomputed 4.0" in result.output, result.output


def test_a_budgets_plan_from_column_generation_within_it_verifies(tmp_path):
    """On limits from requests (a fine grid) a binding budget's solve runs column generation within it; its bound caps
    the LP's (here 21 against 22.0) and the plan, counted as work, verifies, the bound recomputed by the same method."""
    trace, plan, console = solve_generated(tmp_path, ["--tasks", "120", "--hosts", "50", "--seed", "12"],
                                           ["--config", "baseline", "--max-moves", "30", "--time-limit", "4"])
    assert "lower bound and plan within the move budget (column generation)" in console
    detail = json.loads((plan / SUMMARY_FILE).read_text())["solver"]["stats"]["bound"]
    assert BUDGET_PATTERN_METHOD in detail["kind"] and detail["freeable_bound"] < detail["freeable_lp"] - 0.5
    result = run_verify(trace, plan)
    assert result.exit_code == 0, result.output
    assert "column generation over host patterns within the move budget, counted as work" in result.output, result.output


def test_console_summary_and_report_show_one_gap(solved):
    """packer solve's status line, summary.json, report.md and packer report's plan section give one gap per plan."""
    for name, (plan, console) in solved[1].items():
        summary = json.loads((plan / SUMMARY_FILE).read_text())
        gap = format_gap(summary["gap"])
        assert summary["gap"] == relative_gap(summary["objective"]["total"], summary["bound"])
        assert (f"gap {gap} to the lower bound" if summary["bound"] is not None else "gap unknown (no lower bound)") in console, (name, console)
        assert f"gap {gap} ((objective − bound) / objective)" in (plan / REPORT_FILE).read_text(), name
        assert f"gap {gap} ((objective − bound) / objective)" in plan_sections(summary)[0].text[0], name
        assert console.count("gap") == 1 and "within" not in console, (name, console)


@pytest.mark.parametrize("deterministic", [True, False])
def test_a_deterministic_column_generation_bound_must_be_stated_exactly(deterministic):
    # Ten tasks of 0.6 host each: the MILP over architectures says 6 hosts, the patterns 10 (one task a host).
    problem = small_problem([6.0] * 10, [10.0] * 12, [1.0] * 12, list(range(10)))
    result = run_solver(problem, "engine", time_limit=2.0, deterministic=deterministic)
    assert "column generation" in result.stats["bound"]["kind"] and result.bound == 10.0
    context = PlanContext(trace="unused", solver="engine", time_limit_s=2.0, deterministic=deterministic)
    forged = dict(result.stats["bound"], primary_lower_bound=9.0, primary_gap=(10.0 - 9.0) / 9.0)
    summary = {"status": "feasible", "bound": 9.0, "solver": {"name": "engine", "objective": result.objective,
                                                              "stats": dict(result.stats, bound=forged)}}
    found = check_claims(problem, context, summary, result.assign)
    # A lower bound below the true one is still valid: only a reproducible run can tell that it is not what the solve computed.
    assert bool(found.wrong) == deterministic, found.wrong


@pytest.mark.parametrize("deterministic", [True, False])
def test_a_budgets_column_generation_cap_must_be_stated_exactly_where_reproducible(deterministic):
    # 50 tasks of 0.6 host on 60 hosts, 30 moves: the budget's LP says 12 can be freed, column generation's full repack
    # none (where column generation within the budget does not run: here, as if the hosts formed too many groups).
    problem = small_problem([6.0] * 50, [10.0] * 60, [1.0] * 60, list(range(50)), max_moves=30)
    with mock.patch.object(run, "budget_column_generation", return_value=None):
        result = run_solver(problem, "engine", time_limit=2.0, deterministic=deterministic)
    detail = result.stats["bound"]
    assert "column generation" in detail["kind"] and detail["freeable_bound"] == 0.0 and result.bound == 50.0
    context = PlanContext(trace="unused", solver="engine", time_limit_s=2.0, deterministic=deterministic)

    def summary(bound: float, **changes) -> dict:
        return {"status": "feasible", "bound": bound, "solver": {"name": "engine", "objective": result.objective,
                                                                 "stats": dict(result.stats, bound=dict(detail, **changes))}}

    assert check_claims(problem, context, summary(50.0), result.assign).wrong == []
    looser = summary(45.0, repack_lower_bound=45.0, freeable_bound=5.0, share_of_bound=0.0)
    # A lower bound below the true one is still valid: only a reproducible run can tell that it is not what the solve computed.
    assert bool(check_claims(problem, context, looser, result.assign).wrong) == deterministic
    inconsistent = check_claims(problem, context, summary(50.0, repack_lower_bound=45.0), result.assign).wrong
    assert any("not what its freeable_bound 5.0 gives" in line for line in inconsistent), inconsistent
    # A bound ``auto``'s exact solver raised above the engine's is that solver's, not what the engine's details give.
    raised = summary(47.0, repack_lower_bound=45.0, freeable_bound=5.0, share_of_bound=0.0)
    raised["solver"]["stats"]["auto"] = {"engine": {"status": "feasible", "bound": 45.0}, "highs": {"status": "feasible", "bound": 47.0}}
    assert not any("not what its freeable_bound" in line for line in check_claims(problem, context, raised, result.assign).wrong)


@pytest.mark.parametrize("deterministic", [True, False])
def test_a_bound_within_the_budget_must_be_stated_exactly_where_reproducible(deterministic):
    # 50 tasks of 0.6 host on 60 hosts, 10 moves: the budget's LP says 4 can be freed, column generation within it none.
    problem = small_problem([6.0] * 50, [10.0] * 60, [1.0] * 60, list(range(50)), max_moves=10)
    result = run_solver(problem, "engine", time_limit=2.0, deterministic=deterministic)
    detail = result.stats["bound"]
    assert BUDGET_PATTERN_METHOD in detail["kind"] and detail["budget_lower_bound"] == 50.0 and result.bound == 50.0
    context = PlanContext(trace="unused", solver="engine", time_limit_s=2.0, deterministic=deterministic)

    def summary(bound: float, **changes) -> dict:
        return {"status": "feasible", "bound": bound, "solver": {"name": "engine", "objective": result.objective,
                                                                 "stats": dict(result.stats, bound=dict(detail, **changes))}}

    found = check_claims(problem, context, summary(50.0), result.assign)
    assert found.wrong == [] and any(BUDGET_PATTERN_METHOD.split(" within")[0] in line for line in found.proven), found.proven
    looser = summary(47.0, budget_lower_bound=47.0, freeable_bound=3.0, share_of_bound=0.0)
    # A lower bound below the true one is still valid: only a reproducible run can tell that it is not what the solve computed.
    assert bool(check_claims(problem, context, looser, result.assign).wrong) == deterministic
    inconsistent = check_claims(problem, context, summary(50.0, budget_lower_bound=47.0), result.assign).wrong
    assert any("not what its freeable_bound 3.0 gives" in line for line in inconsistent), inconsistent


@pytest.mark.parametrize("deterministic", [True, False])
def test_a_solve_counted_as_work_may_time_out_before_its_limit_by_the_clock(deterministic):
    problem = small_problem([6.0] * 4, [10.0] * 4, [1.0] * 4, list(range(4)))
    result = run_solver(problem, "engine", time_limit=2.0)
    context = PlanContext(trace="unused", solver="engine", time_limit_s=60.0, deterministic=deterministic)
    summary = {"status": "feasible", "bound": result.bound, "runtime_s": 40.0,
               "solver": {"name": "engine", "objective": result.objective, "stats": dict(result.stats, timed_out=True)}}
    found = check_claims(problem, context, summary, result.assign)
    assert any("timed_out" in line for line in found.wrong) != deterministic, found.wrong


def test_an_exact_solvers_plan_states_the_better_of_its_bound_and_the_engines_and_verifies(monkeypatch):
    # Three tasks of 6 on hosts of 10, CBC stopped at its time limit: its bound is the exact model's LP relaxation (1.0
    # host), where the MILP over architectures proves 2. The plan states 2; a plan of an earlier version stating CBC's own still verifies.
    real = milp._solve_cbc

    def stopped_at_its_limit(engine, lp):
        real(engine, lp)
        lp.assignStatus(pulp.LpStatusNotSolved, pulp.LpSolutionIntegerFeasible)

    monkeypatch.setattr(milp, "_solve_cbc", stopped_at_its_limit)
    problem = small_problem([6, 6, 6], capacity=[10, 10, 10], cost=[1, 1, 1], current=[0, 1, 2])
    result = run_solver(problem, "cbc", time_limit=5.0)
    assert result.status == "feasible" and result.bound == pytest.approx(engine_bound(problem)[0]) == 2.0
    assert result.stats["solver_bound"] < 1.01
    context = PlanContext(trace="unused", solver="cbc", time_limit_s=5.0)
    earlier = {key: value for key, value in result.stats.items() if key not in ("bound", "solver_bound")}
    for bound, stats, proven in ((result.bound, result.stats, "recomputed"), (result.stats["solver_bound"], earlier, "valid, below the 2")):
        summary = {"status": "feasible", "bound": bound, "solver": {"name": "cbc", "objective": result.objective, "stats": stats}}
        found = check_claims(problem, context, summary, result.assign)
        assert not found.wrong and any(proven in line for line in found.proven), (found.wrong, found.proven)
    # Where no method of the solver's recomputes it, the bound is checked against verify's own and named for what it is.
    summary = {"status": "feasible", "bound": result.bound, "solver": {"name": "highs", "objective": result.objective, "stats": result.stats}}
    found = check_claims(problem, dataclasses.replace(context, solver="highs"), summary, result.assign)
    assert not found.wrong and any("bound 2 (the engine's): valid" in line for line in found.proven), (found.wrong, found.proven)


@pytest.mark.parametrize("max_moves", [None, 1])
def test_a_plan_below_its_primary_bound_by_a_host_kept_over_capacity_has_a_valid_bound_that_verifies(max_moves):
    # h0 holds 6 + 6 of 10 today and may keep them: one host (cost 1) with 2 cores less than nothing unused, so the
    # fragmentation term is -0.1 and the objective 0.9, below the bound on the primary cost (1). The plan's bound adds the
    # least that term can be.
    problem = small_problem([6, 6], capacity=[10, 10], cost=[1, 1], current=[0, 0], weights=GoalWeights(fragmentation=0.5),
                            max_moves=max_moves)
    result = run_solver(problem, "engine", time_limit=1.0, deterministic=True)
    assert result.assign.tolist() == [0, 0] and result.objective == pytest.approx(0.9)
    assert result.bound == pytest.approx(0.9) and result.stats["bound"]["objective_floor"] == pytest.approx(-0.1)
    context = PlanContext(trace="unused", solver="engine", time_limit_s=1.0, deterministic=True)
    summary = {"status": result.status, "bound": result.bound,
               "solver": {"name": "engine", "objective": result.objective, "stats": result.stats}}
    found = check_claims(problem, context, summary, result.assign)
    assert not found.wrong, found.wrong
    assert any(line.startswith(f"bound {result.bound:.6g}: recomputed") for line in found.proven), found.proven
