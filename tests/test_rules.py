"""Rules and goals as plugins: the incremental view of the heuristics agrees with the verifier's, rule by rule."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packer.model.build import service_pairs
from packer.model.metrics import evaluate, violations
from packer.model.rpf import rp_thresholds
from packer.model.state import PlacementState
from packer.rules import AntiAffinity, MaxNewAtRisk, MinRP, Spread
from packer.rules.min_rp import RP_LOAD_TOLERANCE, rp_load_scale
from packer.solvers.cpsat import solve_cpsat
from packer.solvers.milp import solve_milp
from problems import random_problem, small_problem

SERVICES = np.array(["A", "B", "C", None], dtype=object)


def _with_rules(problem, seed: int, anti_affinity: bool, min_rp: bool, at_risk: bool):
    rng = np.random.default_rng(seed)
    if anti_affinity:
        problem = problem.with_rule(AntiAffinity([("A", "B"), ("C", "C")], SERVICES[rng.integers(0, 4, problem.n_tasks)]))
    if min_rp:
        problem = problem.with_rule(MinRP(float(rng.uniform(-0.5, 0.5))))
    if at_risk:
        problem = problem.with_rule(MaxNewAtRisk(int(rng.integers(0, 3))))
    return problem


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), spread=st.booleans(), sens=st.booleans(), anti_affinity=st.booleans(), min_rp=st.booleans(),
       at_risk=st.booleans())
def test_moves_every_rule_admits_give_placements_the_verifier_accepts(seed, spread, sens, anti_affinity, min_rp, at_risk):
    """A random walk through moves that every rule admits (and after which every global rule holds) never breaks a rule."""
    problem = _with_rules(random_problem(seed, 16, 6, spread=spread, sens=sens), seed, anti_affinity, min_rp, at_risk and sens)
    state = PlacementState(problem, problem.current)
    rng = np.random.default_rng(seed)
    for _ in range(40):
        t = int(rng.integers(problem.n_tasks))
        hosts = np.flatnonzero(np.arange(problem.n_hosts) != state.assign[t])
        allowed = state.feasible(t, hosts)
        if not len(allowed):
            continue
        before = int(state.assign[t])
        state.move(t, int(rng.choice(allowed)))
        if not state.holds():
            state.move(t, before)
        assert violations(problem, state.assign) == []


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), sens=st.booleans(), anti_affinity=st.booleans(), min_rp=st.booleans())
def test_tallies_kept_by_moves_equal_fresh_ones(seed, sens, anti_affinity, min_rp):
    problem = _with_rules(random_problem(seed, 14, 5, spread=True, sens=sens), seed, anti_affinity, min_rp, sens)
    state = PlacementState(problem, problem.current)
    rng = np.random.default_rng(seed)
    for _ in range(30):
        state.move(int(rng.integers(problem.n_tasks)), int(rng.integers(problem.n_hosts)))
    fresh = PlacementState(problem, state.assign)
    np.testing.assert_allclose(state.loads, fresh.loads, atol=1e-9)
    np.testing.assert_allclose(state.sens, fresh.sens, atol=1e-9)
    assert state.moves == fresh.moves and (state.count == fresh.count).all()
    for rule in problem.rules:
        if isinstance(rule, AntiAffinity):
            assert (state.tally[rule].on == fresh.tally[rule].on).all() and (state.tally[rule].moved_in == fresh.tally[rule].moved_in).all()
        if isinstance(rule, MinRP):
            np.testing.assert_allclose(state.tally[rule].host_cap, fresh.tally[rule].host_cap, atol=1e-9)
        if isinstance(rule, MaxNewAtRisk) and rule in fresh.tally:
            assert state.tally[rule].total == fresh.tally[rule].total
    # Every host a rule admits for a task is admitted from scratch as well, and the other way round.
    for t in range(problem.n_tasks):
        hosts = np.arange(problem.n_hosts)
        assert (state.feasible(t, hosts) == fresh.feasible(t, hosts)).all()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), sens=st.booleans())
def test_objective_delta_of_a_move_is_the_change_of_the_objective(seed, sens):
    problem = random_problem(seed, 12, 5, sens=sens)
    state = PlacementState(problem, problem.current)
    rng = np.random.default_rng(seed)
    for _ in range(20):
        t, h = int(rng.integers(problem.n_tasks)), int(rng.integers(problem.n_hosts))
        if h == state.assign[t]:
            continue
        before = evaluate(problem, state.assign).objective
        predicted = float(state.objective_delta(t, np.array([h]))[0])
        state.move(t, h)
        assert evaluate(problem, state.assign).objective - before == pytest.approx(predicted, abs=1e-9)


def _three_hosts(services, current, pairs=(("A", "B"),), max_moves=None):
    """Three hosts of capacity 10; tasks of demand 2 (services as given)."""
    problem = small_problem([2.0] * len(current), [10, 10, 10], [1.0, 1.0, 1.0], current, max_moves=max_moves)
    return problem.with_rule(AntiAffinity(pairs, np.asarray(services, dtype=object)))


def test_anti_affinity_keeps_services_apart_where_hosts_gain_them():
    # Today h0 holds A and B together (allowed: nothing moved there); packing everything onto one host would free two.
    problem = _three_hosts(["A", "B", "A", None], [0, 0, 1, 2])
    assert violations(problem, problem.current) == []
    together = np.array([0, 0, 0, 0])  # A from h1 joins A and B on h0: h0 gains an A task
    assert any("both A and B" in v for v in violations(problem, together))
    apart = np.array([1, 2, 1, 1])
    assert violations(problem, apart) == []
    for result in (solve_cpsat(problem, time_limit=10), solve_milp(problem, solver="cbc", time_limit=10),
                   solve_milp(problem, solver="highs", time_limit=10)):
        assert violations(problem, result.assign) == []
        assert result.status == "optimal" and evaluate(problem, result.assign).hosts == 2  # A and B cannot share the last host


def test_anti_affinity_within_one_service_and_in_the_state():
    problem = _three_hosts(["A", "A", "A"], [0, 1, 2], pairs=(("A", "A"),))
    state = PlacementState(problem, problem.current)
    assert state.feasible(0, np.array([1, 2])).tolist() == []  # any host holding another A task
    assert solve_cpsat(problem, time_limit=10).objective == pytest.approx(evaluate(problem, problem.current).objective)
    rule = problem.rule(AntiAffinity)
    assert rule.describe() == {"rule": "anti-affinity", "pairs": [["A", "A"]]}
    with pytest.raises(ValueError, match="service"):
        AntiAffinity([("A", "B")], None)


def test_rules_describe_themselves_and_say_which_strategies_honour_them():
    problem = random_problem(3, 10, 4, spread=True, min_rp=0.1, max_new_at_risk=0, sens=True)
    described = [rule.describe() for rule in problem.rules]
    assert {"rule": "spread", "scope": "host", "limit": problem.rule(Spread).limit} in described
    assert problem.rule(MaxNewAtRisk).strategies == ("engine",)
    assert "baselines" not in problem.rule(MinRP).strategies
    assert {g.term for g in problem.goals} == {"primary", "fragmentation", "sensitivity", "moves"}


def test_service_pairs_are_pairs_of_names():
    assert service_pairs([["A", "B"], ("C", "C")]) == (("A", "B"), ("C", "C"))
    for bad in ("AB", ["AB"], [["A"]], [["A", "B", "C"]], [["A", ""]], [["A", 3]], None):
        with pytest.raises(ValueError, match="pairs"):
            service_pairs(bad)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), sens=st.booleans(), level=st.sampled_from([-0.5, 0.0, 0.5, 0.9]), stay=st.floats(0.0, 1.0))
def test_the_rp_guards_load_limits_hold_in_any_placement(seed, sens, level, stay):
    """What :meth:`MinRP.load_limits` claims, in any placement: a host that keeps all its tasks of today is limited by its
    limit; one that lost k of them, by at most its limit plus k rises; an empty host of today, by its limit."""
    problem = random_problem(seed, 14, 5, sens=sens).with_rule(MinRP(level))
    rule = problem.rule(MinRP)
    limits = rule.load_limits(problem)
    rng = np.random.default_rng(seed)
    assign = np.where(problem.movable & (rng.random(problem.n_tasks) >= stay), rng.integers(0, problem.n_hosts, problem.n_tasks), problem.current)
    thresholds = rp_thresholds(problem, np.arange(problem.n_tasks), assign, rule.floors(problem)) + RP_LOAD_TOLERANCE * rp_load_scale(problem)
    reached = np.full(limits.limit.shape, np.inf)  # the limit each host has in ``assign``: its tasks' least threshold
    np.minimum.at(reached, assign, thresholds)
    left = np.bincount(problem.current[assign != problem.current], minlength=problem.n_hosts)
    today = np.bincount(problem.current, minlength=problem.n_hosts)
    with np.errstate(invalid="ignore"):
        allowed = np.where(today[:, None] > 0, limits.limit + np.where(left[:, None] > 0, limits.rise * left[:, None], 0.0), limits.limit)
    assert np.all(limits.rise >= 0)
    occupied = np.bincount(assign, minlength=problem.n_hosts) > 0
    checked = occupied[:, None] & np.isfinite(allowed)
    assert np.all(reached[checked] <= allowed[checked] + 1e-9)
