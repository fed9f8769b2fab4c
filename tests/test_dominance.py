"""Hosts dominated by an empty host, and the engine's move of their tasks onto it before its neighbourhood search."""
from __future__ import annotations

import dataclasses
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from packer.model.build import GoalWeights
from packer.model.metrics import evaluate, violations
from packer.model.state import PlacementState
from packer.solvers import engine
from packer.solvers.clock import SearchClock
from packer.solvers.dominance import dominance, move_off_dominated_hosts
from packer.solvers.engine import EngineConfig, _lns, solve_engine
from packer.solvers.ffd import capacity_price
from packer.solvers.result import SolveResult
from problems import random_problem, small_problem


def test_dominance_needs_no_dearer_and_at_least_as_large_everywhere_and_larger_somewhere():
    # h0 5 cpu cost 1; h1 8 cost 1; h2 8 cost 2; h3 5 cost 1 (h0's twin)
    problem = small_problem([1.0], [5.0, 8.0, 8.0, 5.0], [1.0, 1.0, 2.0, 1.0], [0])
    kind, dominates = dominance(problem)
    assert kind[0] == kind[3] and len(set(kind.tolist())) == 3
    by_host = dominates[np.ix_(kind, kind)]  # by_host[g, h]: host g dominates host h
    assert by_host[1, 0] and by_host[1, 3]
    assert not by_host[2, 0]  # dearer
    assert not by_host[0, 3] and not by_host[3, 0]  # equal is not larger
    assert not by_host[1, 2] and not by_host[0, 1]


def test_the_tasks_of_a_dominated_host_move_together_onto_the_empty_host_of_most_capacity_per_cost():
    # h0 (5 cpu) holds both tasks; h1 (8) and h2 (6) are empty, of the same cost; h3 (4) holds nothing
    problem = small_problem([3.0, 2.0], [5.0, 8.0, 6.0, 4.0], [1.0] * 4, [0, 0])
    state = PlacementState(problem, problem.current)
    assert move_off_dominated_hosts(state, capacity_price(problem)) == 1
    assert state.assign.tolist() == [1, 1]
    assert not violations(problem, state.assign)
    assert move_off_dominated_hosts(state, capacity_price(problem)) == 0  # nothing dominates h1


def test_hosts_with_a_pinned_task_or_no_dominating_empty_host_stay():
    pinned = small_problem([3.0, 2.0], [5.0, 8.0], [1.0, 1.0], [0, 0], movable=np.array([True, False]))
    state = PlacementState(pinned, pinned.current)
    assert move_off_dominated_hosts(state, capacity_price(pinned)) == 0 and state.assign.tolist() == [0, 0]
    dearer = small_problem([3.0, 2.0], [5.0, 8.0], [1.0, 2.0], [0, 0])
    state = PlacementState(dearer, dearer.current)
    assert move_off_dominated_hosts(state, capacity_price(dearer)) == 0 and state.assign.tolist() == [0, 0]


def test_a_host_a_rule_refuses_is_left_whole_and_the_next_dominating_host_tried():
    # h1 (8 cpu, architecture b) would be tried first, but task 1 may not run on b: h2 (6, a) takes both.
    one = small_problem([3.0, 2.0], [5.0, 8.0, 6.0], [1.0] * 3, [0, 0])
    problem = dataclasses.replace(one, arch_names=np.array(["a", "b"]), host_arch=np.array([0, 1, 0]),
                                  eligible=np.array([[True, True], [True, False]]))
    state = PlacementState(problem, problem.current)
    assert move_off_dominated_hosts(state, capacity_price(problem)) == 1
    assert state.assign.tolist() == [2, 2]
    assert state.count.tolist() == [0, 0, 2]  # nothing left behind on h1 from the refused try


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n_tasks=st.integers(1, 30), n_hosts=st.integers(2, 12), sens=st.booleans(),
       spread=st.booleans())
def test_moving_off_dominated_hosts_keeps_every_rule_and_the_primary_cost(seed, n_tasks, n_hosts, sens, spread):
    # Architecture a2 (24 cpu, 96 GiB) costs what a0 (16, 64) costs, so it dominates it.
    base = random_problem(seed, n_tasks, n_hosts, sens=sens, spread=spread, max_moves=None)
    problem = dataclasses.replace(base, cost=np.array([1.0, 2.0, 1.0])[base.host_arch])
    start = solve_engine(problem, EngineConfig(time_limit=1.0, lns=False, deterministic=True, seed=seed)).assign
    assume(not violations(problem, start))
    state = PlacementState(problem, start)
    moved = move_off_dominated_hosts(state, capacity_price(problem))
    assert not violations(problem, state.assign)
    assert problem.primary_cost[np.unique(state.assign)].sum() == problem.primary_cost[np.unique(start)].sum()
    kind, dominates = dominance(problem)
    changed = np.flatnonzero(state.assign != start)
    sources = np.unique(start[changed])
    assert len(sources) == moved
    assert not problem.movable[changed].size or problem.movable[changed].all()
    for h in sources.tolist():
        mine = start == h
        (g,) = np.unique(state.assign[mine])  # a host's tasks move together
        assert dominates[kind[g], kind[h]] and not (start == g).any()


def test_the_engine_searches_from_dominated_hosts_moved_off_and_keeps_the_plan_before_where_that_ends_higher():
    # Construction fills h0 (5 cpu); h1 (8 cpu, the same cost) stands empty and dominates it.
    problem = small_problem([3.0, 2.0], [5.0, 8.0], [1.0, 1.0], [0, 0], weights=GoalWeights())
    searched_from = []

    def no_search(state, *args):
        searched_from.append(state.assign.tolist())
        return engine.Search(state, None, {"count": 0, "largest_hosts": 0})

    with mock.patch.object(engine, "_lns", no_search), mock.patch.object(engine, "covers_whole_instance", lambda *a: False):
        result = solve_engine(problem, EngineConfig(time_limit=2.0, deterministic=True))
    assert searched_from == [[1, 1]]
    # On the larger host the spare capacity (fragmentation) is higher, and nothing was searched: the plan before stands.
    assert evaluate(problem, np.array([1, 1])).objective > evaluate(problem, np.array([0, 0])).objective
    assert result.assign.tolist() == [0, 0]


def test_a_budgeted_solve_does_not_move_dominated_hosts():
    problem = small_problem([3.0, 2.0], [5.0, 8.0], [1.0, 1.0], [0, 0], max_moves=1, weights=GoalWeights())
    searched_from = []

    def no_search(state, *args):
        searched_from.append(state.assign.tolist())
        return engine.Search(state, None, {"count": 0, "largest_hosts": 0})

    with mock.patch.object(engine, "_lns", no_search), mock.patch.object(engine, "covers_whole_instance", lambda *a: False):
        solve_engine(problem, EngineConfig(time_limit=2.0, deterministic=True))
    assert searched_from == [[0, 0]]


def test_a_full_repack_empties_a_host_into_the_room_a_dominated_hosts_move_leaves():
    # h0 and h1 (5 cpu) hold 4 and 3 cpu: neither fits beside the other. h2 (8 cpu, the same cost) stands empty: with h0's
    # task moved onto it, h1's task fits beside it.
    problem = small_problem([4.0, 3.0], [5.0, 5.0, 8.0], [1.0] * 3, [0, 1])
    config = EngineConfig(time_limit=2.0, lns=False, deterministic=True)
    assert solve_engine(problem, config).assign.tolist() == [2, 2]
    with mock.patch.object(engine, "move_off_dominated_hosts", lambda *a: 0):
        assert len(set(solve_engine(problem, config).assign.tolist())) == 2


def test_empty_dominated_moves_off_then_empties_on_a_copy_and_is_none_where_nothing_can_move():
    problem = small_problem([4.0, 3.0], [5.0, 5.0, 8.0], [1.0] * 3, [0, 1])
    state = PlacementState(problem, problem.current)
    config = EngineConfig(time_limit=1.0, deterministic=True)
    clock = SearchClock(1.0, True)
    assert engine._empty_dominated(state, config, np.random.default_rng(0), clock).tolist() == [2, 2]
    assert state.assign.tolist() == [0, 1]  # a copy was changed
    twins = small_problem([4.0, 3.0], [5.0, 5.0, 5.0], [1.0] * 3, [0, 1])
    assert engine._empty_dominated(PlacementState(twins, twins.current), config, np.random.default_rng(0), clock) is None


@pytest.mark.parametrize("max_moves", [None, 30])
def test_the_search_tries_moving_off_dominated_hosts_every_few_neighbourhoods_and_only_in_a_full_repack(monkeypatch, max_moves):
    # Counted as work, with sub-solves that gain nothing: 25 neighbourhoods of 0.02 s however loaded the machine.
    tries = []
    monkeypatch.setattr(engine, "solve_subproblem", _no_gain)
    monkeypatch.setattr(engine, "_empty_dominated", lambda state, *args: tries.append(1))
    monkeypatch.setattr(engine, "DOMINATED_EVERY", 2)
    problem = random_problem(5, 60, 20, max_moves=max_moves, weights=GoalWeights(fragmentation=0.0, moves=0.0))
    searched = _lns(PlacementState(problem, problem.current), _COUNTED, np.random.default_rng(0), SearchClock(0.5, True),
                    lambda *a: None).searched
    assert searched["count"] >= 2 * engine.DOMINATED_EVERY
    expected = searched["count"] // engine.DOMINATED_EVERY if max_moves is None else 0
    assert len(tries) in (expected, expected - 1)  # the last may fall after the last neighbourhood


def test_the_search_adopts_the_plan_of_moving_off_dominated_hosts_where_it_is_lower(monkeypatch):
    problem = random_problem(5, 60, 20, max_moves=None, weights=GoalWeights(fragmentation=0.0, moves=0.0))
    start = solve_engine(problem, EngineConfig(time_limit=1.0, lns=False, deterministic=True)).assign
    lower = solve_engine(problem, EngineConfig(time_limit=3.0, deterministic=True)).assign
    assert evaluate(problem, lower).objective < evaluate(problem, start).objective
    monkeypatch.setattr(engine, "solve_subproblem", _no_gain)
    monkeypatch.setattr(engine, "_empty_dominated", lambda state, *args: lower)
    found = _lns(PlacementState(problem, start), _COUNTED, np.random.default_rng(0), SearchClock(0.5, True), lambda *a: None).state
    assert found.assign.tolist() == lower.tolist()


_COUNTED = EngineConfig(time_limit=0.5, lns_hosts=4, lns_time=0.05, deterministic=True)


def _no_gain(problem, assign, tasks, hosts, **kwargs) -> SolveResult:
    """A stand-in for CP-SAT's sub-solve that keeps the placement, charging 0.01 s of work."""
    return SolveResult(assign=assign.copy(), status="feasible", objective=evaluate(problem, assign).objective,
                       bound=-np.inf, solver="cpsat", wall_s=0.01, stats={"solve_s": 0.01, "deterministic_s": 0.01})
