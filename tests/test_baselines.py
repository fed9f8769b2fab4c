"""Baselines produce valid plans (they are comparisons, not answers)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from packer.baselines import first_fit_decreasing
from packer.metrics import evaluate, violations
from test_exact import random_problem, small_problem


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_tasks=st.integers(1, 40), n_hosts=st.integers(1, 10), spread=st.booleans())
def test_ffd_plans_are_valid(seed, n_tasks, n_hosts, spread):
    problem = random_problem(seed, n_tasks, n_hosts, spread=spread, max_moves=None)
    result = first_fit_decreasing(problem)
    assert violations(problem, result.assign) == []
    assert result.solver == "ffd"


def test_ffd_packs_onto_the_cheapest_capacity_first():
    # Four tasks of 2 cores spread over four 8-core hosts; the cheapest host takes all of them.
    problem = small_problem([2, 2, 2, 2], capacity=[8, 8, 8, 8], cost=[3, 1, 2, 2], current=[0, 1, 2, 3])
    result = first_fit_decreasing(problem)
    assert set(result.assign.tolist()) == {1}
    assert evaluate(problem, result.assign).tco == 1
