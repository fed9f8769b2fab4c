"""Bringing a plan within a move budget (packer.solvers.trim), and the budgeted engine starting from trimmed constructions."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packer.model.metrics import evaluate, violations
from packer.rules.budget import MoveBudget
from packer.solvers import run
from packer.solvers.bounds import repack_cost_bound
from packer.solvers.clock import SearchClock
from packer.solvers.engine import EngineConfig, construct_repack, solve_engine, wide_budget
from packer.solvers.run import engine_bound, run_solver
from packer.solvers.trim import trim_to_budget
from problems import random_problem, small_problem

# Today: t0 (5) on h0, t1 (5) on h1, t2 (3) on h2; h3 empty. The plan: t0 and t1 to h3, t2 to h0 (3 moves, 2 hosts).
TODAY, PLAN = [0, 1, 2], np.array([3, 3, 0])


def three_moves(budget: int):
    return small_problem([5, 5, 3], capacity=[10] * 4, cost=[1] * 4, current=TODAY, max_moves=budget)


def test_a_plan_within_the_budget_comes_back_as_it_is():
    assert np.array_equal(trim_to_budget(three_moves(3), PLAN, 3), PLAN)


def test_a_task_returns_to_its_host_where_that_host_stays_open():
    # t0's host h0 holds t2 in the plan and has room for t0: its return saves a move and no host.
    assert trim_to_budget(three_moves(2), PLAN, 2).tolist() == [0, 3, 0]


def test_an_emptied_host_is_opened_again_where_returns_alone_do_not_reach_the_budget():
    # After t0's return, t1 and t2 have only emptied hosts to go back to; reopening h1 (t1) empties h3 on the way.
    trimmed = trim_to_budget(three_moves(1), PLAN, 1)
    assert trimmed.tolist() == [0, 1, 0]
    assert evaluate(three_moves(1), trimmed).hosts == 2


def test_every_move_undone_gives_todays_placement():
    assert trim_to_budget(three_moves(0), PLAN, 0).tolist() == TODAY


def test_a_task_that_may_not_go_back_makes_trimming_give_up():
    # h0 is over capacity today (6 + 6 > 10): no task may move onto it, so t1's move cannot be undone.
    problem = small_problem([6, 6], capacity=[10, 10], cost=[1, 1], current=[0, 0], max_moves=0)
    assert trim_to_budget(problem, np.array([0, 1]), 0) is None


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_tasks=st.integers(2, 30), n_hosts=st.integers(2, 10), spread=st.booleans(),
       sens=st.booleans(), share=st.floats(0.0, 1.0))
def test_a_trimmed_plan_keeps_every_rule_and_the_budget_and_only_undoes_moves(seed, n_tasks, n_hosts, spread, sens, share):
    problem = random_problem(seed, n_tasks, n_hosts, spread=spread, sens=sens, max_moves=None)
    mix = repack_cost_bound(problem).mix
    plan = None if mix is None else construct_repack(problem, mix, keep_in_place=False)
    if plan is None:
        return
    budget = int(share * int((plan != problem.current).sum()))
    trimmed = trim_to_budget(problem, plan, budget)
    if trimmed is None:
        return
    assert int((trimmed != problem.current).sum()) <= budget
    assert violations(problem, trimmed) == []
    assert np.all((trimmed == plan) | (trimmed == problem.current))


# A first fit in random order onto hosts of 10 (seed 0 of a scan): 13 hosts hold 24 tasks, with room stranded everywhere.
SIZES = [7, 5, 5, 3, 3, 2, 2, 2, 3, 6, 5, 7, 5, 5, 7, 6, 5, 5, 5, 7, 3, 6, 6, 2]
STRANDED = [0, 1, 2, 0, 2, 2, 1, 1, 3, 3, 4, 5, 4, 6, 7, 8, 6, 9, 9, 10, 5, 11, 12, 7]


def stranded(budget: int):
    return small_problem(SIZES, capacity=[10] * 15, cost=[1] * 15, current=STRANDED, max_moves=budget)


def test_a_wide_budget_also_starts_from_a_full_repacks_construction_trimmed_to_it():
    problem = stranded(12)
    assert wide_budget(problem)
    mixes = engine_bound(problem.with_rule(None, replaces=MoveBudget))[2]
    config = EngineConfig(time_limit=1.0, deterministic=True, lns=False)
    alone, with_constructions = solve_engine(problem, config), solve_engine(problem, config, mixes=mixes)
    assert evaluate(problem, alone.assign).hosts == 13
    assert evaluate(problem, with_constructions.assign).hosts == 12 and with_constructions.stats["moves"] <= 12


@pytest.mark.parametrize("budget, wide", [(5, False), (12, True)])
def test_only_a_wide_budget_gets_a_full_repacks_starts(budget, wide):
    with mock.patch.object(run, "solve_engine", wraps=solve_engine) as engine:
        result = run_solver(stranded(budget), "engine", 1.0, deterministic=True)
    assert bool(engine.call_args.kwargs["mixes"]) == wide
    assert violations(stranded(budget), result.assign) == []


@pytest.mark.parametrize("budget, packing", [(150, False), (300, True)])
def test_column_generations_packing_is_a_start_only_from_half_the_movable_tasks(budget, packing):
    # 500 tasks: more than one neighbourhood holds, so column generation could pack.
    problem = small_problem(np.full(500, 3.0), capacity=[10] * 200, cost=[1] * 200, current=np.arange(500) % 200, max_moves=budget)
    with mock.patch.object(run, "_pattern_bound_and_start", return_value=None) as pack:
        mixes, starts, _ = run._full_repack_starts(problem, 10.0, 0.0, None, SearchClock(10.0))
    assert pack.called == packing and len(mixes) == 1 and starts == []
