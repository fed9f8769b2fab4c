"""Column generation within a move budget (packer.solvers.budget_patterns): its bound holds, its packing is valid."""
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from packer.model.metrics import violations
from packer.model.build import GoalWeights
from packer.solvers import run
from packer.solvers.budget_patterns import applies, budget_column_generation, budget_packing, host_groups
from packer.solvers.clock import SearchClock
from packer.solvers.cpsat import solve_cpsat
from packer.solvers.patterns import task_classes
from problems import random_problem, small_problem

NO_SOFT_TERMS = GoalWeights(fragmentation=0.0, sensitivity=0.0, moves=0.0)


def _primary(problem, assign) -> float:
    return float(problem.primary_cost[np.unique(assign)].sum())


def _scattered_thirds(max_moves: int):
    """12 tasks of 5, 3 and 2 (each three fill a host of 10), each alone on its host: every move frees at most the host
    it leaves, and four hosts hold them all, so ``max_moves`` moves free min(max_moves, 8) hosts at best."""
    return small_problem([5.0, 3.0, 2.0] * 4, [10.0] * 12, [1.0] * 12, list(range(12)), max_moves=max_moves,
                         weights=NO_SOFT_TERMS)


@pytest.mark.parametrize("max_moves, freeable", [(1, 1), (5, 5), (8, 8)])
def test_the_bound_and_the_packing_meet_what_a_budget_can_free(max_moves, freeable):
    problem = _scattered_thirds(max_moves)
    found = budget_column_generation(problem, 5.0, deterministic=True)
    assert 12 - found.bound == pytest.approx(freeable, abs=1e-6)
    packed = budget_packing(problem, found, SearchClock(5.0, True))
    assert not violations(problem, packed) and np.count_nonzero(packed != problem.current) <= max_moves
    assert 12 - _primary(problem, packed) == freeable


def test_it_applies_only_where_the_budget_binds():
    assert applies(_scattered_thirds(11)) and not applies(_scattered_thirds(12)) and not applies(_scattered_thirds(None))
    assert budget_column_generation(_scattered_thirds(12), 5.0) is None
    assert budget_column_generation(_scattered_thirds(5), 5.0, max_groups=1) is None  # 2 groups: 4 hosts of each size


def test_hosts_group_by_what_they_hold_today():
    problem = small_problem([5.0, 5.0, 3.0, 2.0], [10.0] * 5, [1.0] * 5, [0, 1, 2, 2], movable=[True, True, True, False],
                            max_moves=2)
    groups = host_groups(problem, task_classes(problem))
    # Hosts 0 and 1 hold one task of 5 each: one group. Host 2 keeps a pinned task (open: cost 0, its room less 2); host 3 and 4 are empty.
    assert sorted(len(h) for h in groups.hosts) == [1, 2, 2]
    pinned = next(g for g, h in enumerate(groups.hosts) if 2 in h)
    assert groups.cost[pinned] == 0.0 and groups.constant == 1.0 and groups.held[pinned].sum() == 1


def test_a_task_moves_only_where_it_is_eligible():
    """Two architectures; the tasks of host 0 may go only to architecture 0's other host, which the packing must choose."""
    problem = small_problem([4.0, 4.0, 4.0], [10.0] * 4, [1.0] * 4, [0, 1, 2], max_moves=1, weights=NO_SOFT_TERMS)
    problem = problem.with_(arch_names=np.array(["a", "b"]), host_arch=np.array([0, 0, 1, 1]),
                            eligible=np.array([[True, False], [True, True], [True, True]]))
    found = budget_column_generation(problem, 5.0, deterministic=True)
    packed = budget_packing(problem, found, SearchClock(5.0, True))
    assert not violations(problem, packed) and _primary(problem, packed) == 2.0
    assert packed[0] in (0, 1)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_tasks=st.integers(3, 14), n_hosts=st.integers(2, 6), crowded=st.booleans())
@example(seed=8, n_tasks=12, n_hosts=3, crowded=True)
def test_the_bound_holds_against_the_proven_optimum_and_every_packing_is_valid(seed, n_tasks, n_hosts, crowded):
    """Random instances (several architectures, eligibility, pinned tasks, hosts over capacity today), crowded: demands
    doubled so that room is scarce."""
    problem = random_problem(seed, n_tasks, n_hosts, max_moves=int(np.random.default_rng(seed).integers(1, n_tasks)),
                             weights=NO_SOFT_TERMS)
    if crowded:
        problem = problem.with_(demand=problem.demand * 2)
    found = budget_column_generation(problem, 5.0, deterministic=True)
    if found is None:
        assert not applies(problem)
        return
    exact = solve_cpsat(problem, time_limit=10, num_workers=1, deterministic=True)
    assert exact.status == "optimal"
    best = _primary(problem, exact.assign)
    assert found.bound <= best + 1e-6
    assert run._integral_lower_bound(problem, found.bound) <= best + 1e-6
    packed = budget_packing(problem, found, SearchClock(5.0, True))
    if packed is not None:
        assert not violations(problem, packed)
        assert _primary(problem, packed) >= best - 1e-6


@pytest.mark.parametrize("default_budget, freed", [(7, 7), (5, None)])
def test_a_full_repack_starts_from_the_default_budgets_plan_where_that_budget_nearly_frees_as_much(default_budget, freed):
    """The twelve scattered tasks: a full repack frees 8 hosts; 7 moves free 7 (within 1.25 times: the plan is a start),
    5 moves free 5 (the full repack's own plans free far more: no start)."""
    problem = _scattered_thirds(None)
    detail = run.engine_bound(problem)[1]
    with mock.patch.object(run, "BUDGETED_START_MOVES", default_budget), mock.patch.object(run, "covers_whole_instance", return_value=False):
        start = run._default_budget_start(problem, detail, 5.0, 0, None, SearchClock(5.0, True))
    if freed is None:
        assert start is None
    else:
        assert not violations(problem, start) and np.count_nonzero(start != problem.current) <= default_budget
        assert 12 - _primary(problem, start) == freed
