"""Baselines: placement policies under the same inputs and move budget; every plan they make is valid."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import tiny_tables, write_tables
from packer.solvers.baselines import BASELINES, first_fit_decreasing, paragon_greedy, run_baseline, tarcil_encode, tarcil_quality, tarcil_sample_size
from packer.cli import cli
from packer.model.metrics import evaluate, violations
from problems import random_problem, small_problem


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n_tasks=st.integers(1, 40), n_hosts=st.integers(1, 10), spread=st.booleans(), sens=st.booleans(),
       name=st.sampled_from(sorted(BASELINES)))
def test_every_baseline_makes_valid_plans_within_the_budget(seed, n_tasks, n_hosts, spread, sens, name):
    problem = random_problem(seed, n_tasks, n_hosts, spread=spread, sens=sens)
    result = run_baseline(problem, name, seed)
    assert violations(problem, result.assign) == []
    assert result.stats["valid"] and result.solver == name and result.status == "feasible"
    if problem.max_moves is not None:
        assert result.stats["moves"] <= problem.max_moves
    assert result.objective == pytest.approx(evaluate(problem, result.assign).objective)


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_deterministic_for_a_seed(name):
    problem = random_problem(7, 40, 10, sens=True, spread=True, max_moves=12)
    first, again = run_baseline(problem, name, 3), run_baseline(problem, name, 3)
    assert np.array_equal(first.assign, again.assign)


def test_random_baseline_depends_on_the_seed():
    problem = random_problem(7, 40, 10, max_moves=20)
    assert len({tuple(run_baseline(problem, "baseline-random", s).assign) for s in range(5)}) > 1


def test_zero_budget_moves_nothing():
    problem = random_problem(1, 30, 8, sens=True, max_moves=0)
    for name in BASELINES:
        assert np.array_equal(run_baseline(problem, name).assign, problem.current)


def test_ffd_full_repack_packs_onto_the_cheapest_capacity_first():
    # Four tasks of 2 cores spread over four 8-core hosts; the cheapest host takes all of them.
    problem = small_problem([2, 2, 2, 2], capacity=[8, 8, 8, 8], cost=[3, 1, 2, 2], current=[0, 1, 2, 3])
    result = first_fit_decreasing(problem)
    assert set(result.assign.tolist()) == {1}
    assert evaluate(problem, result.assign).tco == 1 and result.solver == "baseline-ffd"


def test_ffd_under_a_budget_moves_the_tasks_of_the_last_ranked_hosts():
    # Budget 1: FFD lifts the task of the most expensive host (h0, cost 3) and first-fits it onto h1.
    problem = small_problem([2, 2, 2, 2], capacity=[8, 8, 8, 8], cost=[3, 1, 2, 2], current=[0, 1, 2, 3], max_moves=1)
    assert first_fit_decreasing(problem).assign.tolist() == [1, 1, 2, 3]


def test_paragon_keeps_sensitive_tasks_apart_where_ffd_does_not():
    # t2 (CPU sensitivity 0.5) on the lightly loaded, expensive h2 is moved by both; FFD first-fits it onto h0
    # beside t0 (0.7): 1.2 > 1, two tasks at risk. Paragon filters h0 out (D2 = 1 - 0.5 - 0.7 < 0) and picks h1.
    problem = small_problem([2, 2, 1], capacity=[10, 10, 10], cost=[1, 1, 5], current=[0, 1, 2], sens=[0.7, 0.1, 0.5],
                            sens_capacity=[1, 1, 1], max_moves=1)
    ffd, paragon = first_fit_decreasing(problem), paragon_greedy(problem)
    assert ffd.assign.tolist() == [0, 1, 0] and evaluate(problem, ffd.assign).tasks_at_risk == 2
    assert paragon.assign.tolist() == [0, 1, 1] and evaluate(problem, paragon.assign).tasks_at_risk == 0


def test_paragon_relaxes_when_no_host_tolerates_the_task():
    # t2 (0.5) shares h2 with the pinned t3 (0.95): 1.45, the worst excess, so it is the one moved. Every host
    # would violate (h0: 0.6 + 0.5, h1: 0.9 + 0.5, h2: 0.95 + 0.5); Paragon relaxes to the least violating, h0.
    problem = small_problem([1, 1, 1, 1], capacity=[10, 10, 10], cost=[1, 1, 5], current=[0, 1, 2, 2], sens=[0.6, 0.9, 0.5, 0.95],
                            sens_capacity=[1, 1, 1], movable=[True, True, True, False], max_moves=1)
    result = paragon_greedy(problem)
    assert result.assign.tolist() == [0, 1, 0, 2]
    assert evaluate(problem, result.assign).interference["cpu"] == pytest.approx(0.1)  # down from 0.45


def test_tarcil_sample_size_and_the_papers_numbers():
    assert tarcil_sample_size() == 8  # x = 0.8, p = 0.2: ⌈ln 0.2 / ln 0.8⌉ = ⌈7.21⌉
    assert tarcil_sample_size(0.9, 1e-6) == 32  # capped: ⌈131.1⌉ = 132 samples would be needed
    assert tarcil_sample_size(0.9, 1e-6, cap=None) == 132
    # Tarcil 3.3: "for R = 64 there is a 10^-6 probability that none of the sampled RUs will have quality of at
    # least 80%": 0.8^64 = 6.3e-7, and the least such R is 62.
    assert 0.8 ** 64 < 1e-6 and tarcil_sample_size(0.8, 1e-6, cap=None) == 62
    # "Pr[D < 0.8] = 10^-3 is achieved with R = 32": the least R is 31 (0.8^31 = 9.9e-4); 32 also achieves it.
    assert tarcil_sample_size(0.8, 1e-3, cap=None) == 31 and 0.8 ** 32 < 1e-3
    # Discrepancy: "Pr[D < 0.92] = 10^-3 ... requires a sample size of R = 82", but 0.92^82 = 1.08e-3 > 1e-3;
    # the equation (F_A(x) = x^R) needs R = 83.
    assert 0.92 ** 82 > 1e-3 and tarcil_sample_size(0.92, 1e-3, cap=None) == 83
    # Paragon 3.3 (same F(x) = x^R): 128 candidates leave ~1e-6 (1.4e-6) that none has quality over 0.9, 64 about 1e-3.
    assert math.isclose(0.9 ** 128, 1.39e-6, rel_tol=0.01) and math.isclose(0.9 ** 64, 1.18e-3, rel_tol=0.01)


def test_tarcil_encoding_and_quality():
    assert tarcil_encode(np.array([84, 31])) * 9999 == pytest.approx(8431)  # Tarcil Eq. 1 example
    # A host whose free share equals what the task causes is ideal (Q = 1); more room is worse; too little, below T_W.
    assert tarcil_quality(np.array([0.3]), np.array([0.7])) == pytest.approx(1.0)
    roomy, short = tarcil_quality(np.array([[0.3], [0.3]]), np.array([[0.2], [0.9]]))
    target = 30 / 99
    assert roomy == pytest.approx(1 - (1 - 20 / 99 - target)) and roomy > target
    assert short == pytest.approx(target - (1 - 89 / 99)) and short < target  # 0.9 of 99 levels rounds to 89


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    hosts, tasks, usage = tiny_tables(n_tasks=12, n_hosts=6)
    return write_tables(tmp_path_factory.mktemp("t") / "t", hosts, tasks, usage)


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_cli_writes_verified_baseline_plans(tiny, tmp_path, name):
    runner = CliRunner()
    out = tmp_path / "plan"
    solved = runner.invoke(cli, ["solve", str(tiny), "--out", str(out), "--solver", name, "--config", "p99", "--max-moves", "4", "--seed", "5"])
    assert solved.exit_code == 0, solved.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["solver"]["name"] == name and summary["context"]["solver"] == name
    assert summary["moves"]["count"] <= 4
    checked = runner.invoke(cli, ["verify", str(tiny), str(out)])
    assert checked.exit_code == 0, checked.output


def test_cli_paragon_with_sensitivity_full_repack(tiny, tmp_path):
    runner = CliRunner()
    out = tmp_path / "plan"
    solved = runner.invoke(cli, ["solve", str(tiny), "--out", str(out), "--solver", "baseline-paragon", "--config", "p99-sens", "--max-moves", "unlimited"])
    assert solved.exit_code == 0, solved.output
    assert runner.invoke(cli, ["verify", str(tiny), str(out)]).exit_code == 0
