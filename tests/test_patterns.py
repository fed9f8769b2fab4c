"""Column generation over host patterns (packer.solvers.patterns): a valid lower bound, valid packings, used by full repacks."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from packer.model.build import GoalWeights
from packer.model.metrics import evaluate, violations
from packer.solvers import patterns, run, solve_milp
from packer.solvers.clock import SearchClock
from packer.solvers.patterns import (FILL_WORK_PER_HOST, FULL_PATTERN_VISIT_WORK, GRIDS, Classes, _fill, price_by_cpsat, _price_by_table, _unique_rows,
                                     column_generation, dive,
                                     exact_units, full_packing, full_patterns, host_types, packing_applies, pattern_packing, perfect_packing_classes,
                                     supported, task_classes)
from packer.solvers.run import run_solver
from problems import known_optimum_problem, random_problem, small_problem

PRIMARY_ONLY = GoalWeights(fragmentation=0.0, moves=0.0)


def primary(problem, assign) -> float:
    return float(problem.primary_cost[np.unique(assign)].sum())


def test_items_larger_than_half_a_host_need_a_host_each():
    # Three tasks of 0.6 on hosts of 1: the architecture-level bound says ceil(1.8) = 2 hosts; patterns know a host holds one.
    problem = small_problem([0.6, 0.6, 0.6], [1.0] * 4, [1.0] * 4, [0, 1, 2], weights=PRIMARY_ONLY)
    found = column_generation(problem, time_limit=10)
    assert found.converged
    assert found.bound == pytest.approx(3.0)
    result = run_solver(problem, "engine", time_limit=5)
    assert result.stats["bound"]["primary_lower_bound"] == 3.0
    assert primary(problem, result.assign) == 3.0


def test_the_bound_is_the_known_optimum_and_the_packing_valid():
    for seed in (3, 4):
        problem, optimum = known_optimum_problem(seed, 60)
        found = column_generation(problem, time_limit=2)
        assert found.bound <= optimum + 1e-6
        packed = pattern_packing(problem, found, time_limit=1)
        assert packed is not None and violations(problem, packed) == []
        result = run_solver(problem, "engine", time_limit=2)
        assert result.stats["bound"]["primary_lower_bound"] == pytest.approx(optimum)
        assert primary(problem, result.assign) >= optimum - 1e-6


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_tasks=st.integers(4, 25), n_hosts=st.integers(3, 10))
def test_the_bound_never_exceeds_a_proven_optimum(seed, n_tasks, n_hosts):
    problem = random_problem(seed, n_tasks, n_hosts, max_moves=None, weights=PRIMARY_ONLY)
    found = column_generation(problem, time_limit=5)
    exact = solve_milp(problem, solver="cbc", time_limit=10)
    if exact.status != "optimal":
        return
    assert found.bound <= primary(problem, exact.assign) + 1e-6


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_tasks=st.integers(4, 60), n_hosts=st.integers(3, 20), grid=st.sampled_from([300, 8]))
def test_every_pattern_packing_is_valid(seed, n_tasks, n_hosts, grid):
    # Pins, eligibility and hosts over capacity today come from the random family; a coarse grid forces the repair step
    # (packed from here whatever the grid rounds away, which the engine would not pack from).
    problem = random_problem(seed, n_tasks, n_hosts, max_moves=None)
    found = column_generation(problem, time_limit=5, max_classes=grid)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(patterns, "PACKING_ROUNDING", 1.0)
        packed = pattern_packing(problem, found, time_limit=5)
    if packed is not None:
        assert violations(problem, packed) == []


def test_no_packing_is_sought_when_column_generation_had_no_time_for_a_bound():
    # At 37,000 tasks and a 15-s limit, setting up the master took all of column generation's share: its bound
    # stayed -inf, and the packing after it raised OverflowError (math.ceil of -inf) out of `packer solve`.
    sizes = np.random.default_rng(3).uniform(0.1, 0.7, 40)
    problem = small_problem(sizes, [1.0] * 40, [1.0] * 40, np.arange(40), weights=PRIMARY_ONLY)  # whole costs: the bound is rounded
    found = column_generation(problem, time_limit=0.0)
    assert found.iterations == 0 and found.bound == -np.inf
    assert pattern_packing(problem, found, time_limit=2) is None


def test_classes_round_down_and_coarsen_to_the_limit():
    problem, _ = known_optimum_problem(5, 200)
    fine, coarse = task_classes(problem, max_classes=10_000), task_classes(problem, max_classes=150)
    assert len(fine.count) == problem.n_tasks and len(coarse.count) <= 150 and coarse.grid < fine.grid
    for classes in (fine, coarse):
        assert classes.count.sum() == problem.movable.sum()
        assert (classes.k[classes.of_task] * classes.unit <= problem.demand + 1e-9).all()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), max_classes=st.integers(1, 400))
def test_classes_are_on_the_finest_grid_within_the_limit(seed, max_classes):
    problem, _ = known_optimum_problem(seed % 50, 150)
    classes = task_classes(problem, max_classes)
    top = problem.capacity.max(axis=0)
    counts = [len(np.unique(np.floor(problem.demand / (top / grid)), axis=0)) for grid in GRIDS]  # one architecture: no signature
    within = [grid for grid, n in zip(GRIDS, counts) if n <= max_classes]
    assert classes.grid == (within[0] if within else GRIDS[-1])
    assert len(classes.count) == counts[GRIDS.index(classes.grid)]


@given(rows=st.lists(st.lists(st.integers(0, 40), min_size=3, max_size=3), min_size=1, max_size=60), wide=st.booleans())
def test_unique_rows_are_numpys(rows, wide):
    rows = np.array(rows, dtype=np.int64) * (1 << 40 if wide else 1)  # wide: past 63 bits, NumPy's own unique
    for got, expected in zip(_unique_rows(rows), np.unique(rows, axis=0, return_inverse=True, return_counts=True)):
        assert np.array_equal(got, expected.reshape(got.shape))


def test_no_packing_is_sought_from_columns_that_never_settled_on_a_coarse_grid(monkeypatch):
    """At 37,000 tasks on a 1/32 grid (29% of the demand rounded away) such a packing cost 16,220 where the engine
    found 13,158, and took the engine's time."""
    problem, _ = known_optimum_problem(3, 400)
    found = column_generation(problem, time_limit=0.25, max_classes=40, deterministic=True)
    assert not found.converged and found.iterations > 0 and patterns.rounded_share(problem, found.classes) > patterns.PACKING_ROUNDING
    assert pattern_packing(problem, found, time_limit=2, deterministic=True) is None
    monkeypatch.setattr(patterns, "PACKING_ROUNDING", 1.0)
    assert pattern_packing(problem, found, time_limit=2, deterministic=True) is not None


def test_no_packing_is_sought_from_converged_columns_on_a_coarse_grid(monkeypatch):
    """600 tasks on a 1/32 grid (12% of the demand rounded away): column generation converged in two iterations, then its
    integer master and full patterns took 4 s of a 10-s full repack and found no packing (best fit found no host for the
    tasks the patterns' slots left out); repaired, such a packing cost 173.5 where the engine's plans cost about 140."""
    problem = random_problem(0, 600, 150, sens=True, max_moves=None)
    found = column_generation(problem, time_limit=2.5, deterministic=True)
    assert found.converged and patterns.rounded_share(problem, found.classes) > patterns.PACKING_ROUNDING
    assert not packing_applies(problem, found)
    monkeypatch.setattr(patterns, "PACKING_ROUNDING", 1.0)
    assert packing_applies(problem, found)


def test_move_bounded_problems_are_not_modelled():
    problem = random_problem(1, 20, 6, max_moves=3)
    assert not supported(problem)
    assert column_generation(problem) is None


def test_a_full_repack_reports_the_pattern_bound_and_never_ends_above_its_packing():
    # Sizes from a menu of three collapse into three classes: column generation converges and packs.
    sizes = np.random.default_rng(2).choice([0.3, 0.45, 0.7], 60)
    problem = small_problem(sizes, [1.0] * 60, [1.0] * 60, np.arange(60), weights=PRIMARY_ONLY)
    result = run_solver(problem, "engine", time_limit=4)
    detail = result.stats["bound"]
    assert detail["pattern_converged"] and not detail["pattern_gave_up"]
    assert violations(problem, result.assign) == []
    assert detail["primary_lower_bound"] <= primary(problem, result.assign) <= detail["pattern_packing"] + 1e-9


def test_where_the_engine_re_solves_the_whole_instance_column_generation_only_bounds_it(monkeypatch):
    # 40 tasks on 10 hosts: CP-SAT re-solves all of it, so column generation gets a small share for its bound and packs nothing.
    limits, packings = [], []
    cg, pack = run.column_generation, run.pattern_packing
    monkeypatch.setattr(run, "column_generation", lambda *a, **k: limits.append(k["time_limit"]) or cg(*a, **k))
    monkeypatch.setattr(run, "pattern_packing", lambda *a, **k: packings.append(k) or pack(*a, **k))
    small = random_problem(3, 40, 10, max_moves=None)
    run_solver(small, "engine", time_limit=2, deterministic=True)
    assert limits == [pytest.approx(run.WHOLE_INSTANCE_PATTERN_SHARE * 2)] and packings == []
    sizes = np.random.default_rng(2).choice([0.3, 0.45, 0.7], 60)
    large = small_problem(sizes, [1.0] * 60, [1.0] * 60, np.arange(60), weights=PRIMARY_ONLY)
    run_solver(large, "engine", time_limit=2, deterministic=True)
    assert limits[1:] == [pytest.approx(run.PATTERN_TIME_SHARE * 2)] and len(packings) == 1


def test_where_no_packing_is_built_from_the_columns_the_engine_gets_the_packings_share():
    # 600 tasks: column generation gives up after one iteration, on classes rounded too much for a packing. The packing's
    # share (a quarter of the limit) was charged all the same, and the engine searched for half of a 2-s solve.
    problem = random_problem(0, 600, 150, sens=True, max_moves=None)
    result = run_solver(problem, "engine", time_limit=2, deterministic=True)
    assert result.stats["bound"]["pattern_gave_up"] and "pattern_packing" not in result.stats["bound"]
    assert result.stats["deterministic"]["work_s"] >= 2 * (1 - run.PATTERN_TIME_SHARE) - 1e-6


def test_a_deterministic_clock_charges_column_generation_its_work_not_its_whole_share():
    # 600 tasks, 2 s of work: column generation gives up after ~0.26 s of work (its iterations and setup). Charged its
    # whole share (0.5 s), the engine had 1.5 s. At 10 s of work (seed 6) it converges after ~0.4 s of its 2.5, and the
    # full repack, left 7.5 s, ended above the 400-move plan (196.06 against 196.44; left 9.56 s, 195.68).
    problem = random_problem(0, 600, 150, sens=True, max_moves=None)
    result = run_solver(problem, "engine", time_limit=2, deterministic=True)
    assert result.stats["bound"]["pattern_gave_up"]
    assert result.stats["deterministic"]["work_s"] >= 2 * (1 - run.PATTERN_TIME_SHARE) + 0.2


def test_column_generation_gives_up_while_its_lp_stays_far_above_another_bound():
    problem, optimum = known_optimum_problem(11, 300)
    found = column_generation(problem, time_limit=2, give_up_above=0.5 * optimum)
    assert found.gave_up and not found.converged
    packed = pattern_packing(problem, found, time_limit=2)  # from full patterns only: its columns are not used
    assert packed is None or violations(problem, packed) == []


def _exact_fills(sizes: np.ndarray, capacity: int) -> set[tuple[int, ...]]:
    """Every multiset of the distinct ``sizes`` (no more of each than there are) that sums to ``capacity``: counts per distinct size."""
    values, count = np.unique(sizes, return_counts=True)
    ranges = [range(min(int(n), capacity // int(v)) + 1) for v, n in zip(values, count)]
    return {combo for combo in itertools.product(*ranges) if any(combo) and int(np.dot(combo, values)) == capacity}


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(2, 12), min_size=1, max_size=10), capacity=st.integers(12, 24))
def test_full_patterns_are_the_exact_fills(sizes, capacity):
    # Whole sizes are classed exactly, in units of their greatest common divisor g: a pattern is full
    # exactly when its tasks sum to the largest multiple of g within the capacity (nothing more fits).
    g = int(np.gcd.reduce(sizes))
    sizes = np.array(sizes, dtype=float)
    problem = small_problem(sizes, [float(capacity)] * len(sizes), [1.0] * len(sizes), np.arange(len(sizes)), weights=PRIMARY_ONLY)
    classes = task_classes(problem)
    assert classes.exact and classes.unit[0] == g
    listed = full_patterns(classes, host_types(problem, classes), limit=10_000)
    size_of_class = np.array([sizes[classes.of_task == c][0] for c in range(len(classes.count))])
    order = np.argsort(size_of_class)  # classes in increasing size, as np.unique orders the sizes
    got = {tuple(int(counts[c]) for c in order) for _, counts in listed}
    assert len(got) == len(listed)
    assert got == _exact_fills(sizes, capacity // g * g)


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.floats(0.05, 0.6), min_size=1, max_size=10))
def test_full_patterns_on_a_grid_leave_less_room_than_they_hold_tasks(sizes):
    # Real-valued sizes are rounded down to a grid; a full pattern is one that leaves less than one grid unit per task.
    sizes = np.array(sizes)
    problem = small_problem(sizes, [1.0] * len(sizes), [1.0] * len(sizes), np.arange(len(sizes)), weights=PRIMARY_ONLY)
    classes = task_classes(problem)
    if classes.exact:
        return
    types = host_types(problem, classes)
    for _, counts in full_patterns(classes, types, limit=10_000):
        used = int(counts @ classes.k[:, 0])
        assert used <= types.room[0, 0] and types.room[0, 0] - used < counts.sum()


def test_listing_full_patterns_stops_on_its_clock():
    # Four dimensions and dozens of classes: full patterns are rare, and the listing alone took 23 s of a 1-s solve.
    problem = random_problem(0, 40, 10, sens=True, max_moves=None)
    found = column_generation(problem, time_limit=0.3, deterministic=True)
    short, longer = SearchClock(0.05, deterministic=True), SearchClock(0.2, deterministic=True)
    few = full_patterns(found.classes, found.types, limit=20_000, clock=short)
    more = full_patterns(found.classes, found.types, limit=20_000, clock=longer)
    assert short.expired() and short.work <= 0.05 + 256 * FULL_PATTERN_VISIT_WORK
    assert 0 < len(few) < len(more)  # the same search, stopped earlier: the first patterns of the longer listing
    for (t, counts), (t_more, counts_more) in zip(few, more):
        assert t == t_more and np.array_equal(counts, counts_more)


def test_demands_with_whole_units_are_classed_without_rounding():
    problem = small_problem([36.6, 26.8, 36.6, 30.0], [100.0] * 4, [1.0] * 4, np.arange(4), weights=PRIMARY_ONLY)
    classes = task_classes(problem)
    assert classes.exact and classes.unit[0] == pytest.approx(0.2)  # the gcd of 366, 268 and 300 tenths
    assert sorted(classes.k[:, 0].tolist()) == [134, 150, 183] and classes.count.sum() == 4
    assert np.allclose(classes.k[classes.of_task, 0] * classes.unit[0], problem.demand[:, 0])
    assert host_types(problem, classes).room[0, 0] == 500


@pytest.mark.parametrize("demand, capacity", [
    ([0.1234567891, 0.3], 1.0),  # more than six decimals
    ([0.000001, 0.3], 1000.0),  # a whole unit, but 10⁹ of them to a host: finer than the finest grid
])
def test_demands_without_a_usable_unit_go_on_a_grid(demand, capacity):
    problem = small_problem(demand, [capacity] * 2, [1.0] * 2, [0, 1], weights=PRIMARY_ONLY)
    assert exact_units(problem.demand, problem.capacity.max(axis=0)) is None
    classes = task_classes(problem)
    assert not classes.exact and (classes.k[classes.of_task] * classes.unit <= problem.demand + 1e-9).all()


def draw_knapsack(data, dims: int, most_classes: int, fewest_tasks: int, lowest_value: float, most_room: int):
    """A random knapsack of one host: classes (sizes 0-9 per dimension, up to 5 tasks each), their values, the room."""
    n = data.draw(st.integers(1, most_classes))
    k = np.array(data.draw(st.lists(st.lists(st.integers(0, 9), min_size=dims, max_size=dims), min_size=n, max_size=n)), dtype=np.int64)
    count = np.array(data.draw(st.lists(st.integers(fewest_tasks, 5), min_size=n, max_size=n)), dtype=np.int64)
    pi = np.array(data.draw(st.lists(st.floats(lowest_value, 3.0), min_size=n, max_size=n)))
    room = np.array(data.draw(st.lists(st.integers(0, most_room), min_size=dims, max_size=dims)), dtype=np.int64)
    classes = Classes(unit=np.ones(dims), k=k, count=count, allowed=np.ones((n, 1), dtype=bool), of_task=np.arange(n), grid=most_room,
                      exact=True)
    return n, pi, classes, room


@settings(max_examples=60, deadline=None)
@given(data=st.data(), dims=st.integers(1, 2))
def test_pricing_by_table_finds_cp_sats_optimum(data, dims):
    n, pi, classes, room = draw_knapsack(data, dims, most_classes=8, fewest_tasks=1, lowest_value=0.0, most_room=20)
    k, count = classes.k, classes.count
    candidates = np.arange(n)
    best, value = _price_by_table(pi, classes, room, candidates)
    found, bound, proven, _ = price_by_cpsat(pi, classes, room, candidates, time_limit=10.0, hint=None)
    assert proven
    optimum = float(pi @ found[-1]) if found else 0.0
    assert value == pytest.approx(optimum, abs=1e-6 * max(1.0, optimum))
    if best is None:
        assert value == pytest.approx(0.0, abs=1e-9)
    else:
        assert (best <= count).all() and (best @ k <= room).all() and float(pi @ best) == pytest.approx(value)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), dims=st.integers(1, 3), hosts=st.integers(1, 4))
def test_fractional_values_bound_every_hosts_best_pattern(data, dims, hosts):
    # Negative values (a budget's arrivals) and sizes of 0 included: such a class adds nothing to the bound.
    n = data.draw(st.integers(1, 5))
    k = np.array(data.draw(st.lists(st.lists(st.integers(0, 9), min_size=dims, max_size=dims), min_size=n, max_size=n)), dtype=np.int64)
    count = np.array(data.draw(st.lists(st.lists(st.integers(0, 3), min_size=n, max_size=n), min_size=hosts, max_size=hosts)))
    pi = np.array(data.draw(st.lists(st.floats(-2.0, 3.0), min_size=n, max_size=n)))
    room = np.array(data.draw(st.lists(st.lists(st.integers(0, 20), min_size=dims, max_size=dims), min_size=hosts, max_size=hosts)))
    bounds = patterns.fractional_values(pi, k, count, room)
    for h in range(hosts):
        best = max(float(pi @ np.array(a)) for a in itertools.product(*(range(c + 1) for c in count[h]))
                   if (np.array(a) @ k <= room[h]).all())
        assert bounds[h] >= best - 1e-9
        assert patterns.fractional_value(pi, k, count[h], room[h]) == pytest.approx(bounds[h])


def test_a_fractional_value_is_the_fractional_knapsack_of_its_tightest_dimension():
    # Two of each of values 3 and 2, sizes (2, 1) and (1, 4), room (4, 6). Dimension 0, by value per unit (2, then 1.5):
    # both of the second (2 units, 4), then 2 of the first's 4 units (half of 6): 7. Dimension 1 (3, then 0.5): both of
    # the first (2 units, 6), then 4 of the second's 8 units (half of 4): 8. The smaller: 7.
    pi, k = np.array([3.0, 2.0]), np.array([[2, 1], [1, 4]])
    assert patterns.fractional_value(pi, k, np.array([2, 2]), np.array([4, 6])) == pytest.approx(7.0)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), dims=st.integers(1, 3))
def test_greedy_patterns_fit_and_leave_no_room_for_another_task_of_value(data, dims):
    n, pi, classes, room = draw_knapsack(data, dims, most_classes=12, fewest_tasks=0, lowest_value=-1.0, most_room=30)
    k, count = classes.k, classes.count
    candidates = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1)))), dtype=np.int64)
    found = patterns.greedy_patterns(pi, classes, room, candidates)
    valued = candidates[pi[candidates] > 1e-12]
    assert len(found) <= dims + 1 and (len(found) > 0) == bool(count[valued].any() and any(((k[c] <= room).all() for c in valued if count[c])))
    for pattern in found:
        assert (pattern <= count).all() and (pattern @ k <= room).all()
        assert set(np.flatnonzero(pattern)) <= set(valued.tolist())
        left = room - pattern @ k
        assert not any(pattern[c] < count[c] and (k[c] <= left).all() for c in valued)


def test_whole_sizes_converge_with_table_pricing_at_the_known_optimum():
    # 40 bins of 150 each cut into 2-4 whole sizes: the optimum is 40 bins, and the pattern LP (priced exactly by table) says so.
    rng = np.random.default_rng(7)
    sizes = np.concatenate([np.diff(np.r_[0, np.sort(rng.choice(np.arange(20, 131), rng.integers(1, 4), replace=False)), 150])
                            for _ in range(40)]).astype(float)
    n = len(sizes)
    problem = small_problem(rng.permutation(sizes), [150.0] * n, [1.0] * n, np.arange(n), weights=PRIMARY_ONLY)
    found = column_generation(problem, time_limit=20)
    assert found.classes.exact and found.converged
    assert found.bound == pytest.approx(40.0)
    packed = pattern_packing(problem, found, time_limit=2)
    assert packed is not None and violations(problem, packed) == [] and primary(problem, packed) >= 40.0


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(1, 10), min_size=2, max_size=12), capacity=st.integers(10, 16))
def test_the_bound_on_whole_sizes_never_exceeds_a_proven_optimum(sizes, capacity):
    problem = small_problem(np.array(sizes, dtype=float), [float(capacity)] * len(sizes), [1.0] * len(sizes), np.arange(len(sizes)),
                            weights=PRIMARY_ONLY)
    found = column_generation(problem, time_limit=5)
    assert found.classes.exact
    # HiGHS, asked for a zero gap: CBC aborted (exit code -6) on sizes [10, 8, 9, 10, 4, 3, 3, 5, 4, 4, 9, 6], capacity 15.
    exact = solve_milp(problem, solver="highs", time_limit=10)
    if exact.status == "optimal":
        assert found.bound <= primary(problem, exact.assign) + 1e-6


def _triplets(n_bins: int, seed: int) -> np.ndarray:
    """Falkenauer's triplet family: per bin of 1,000, sizes in [250, 500] that sum to exactly 1,000, shuffled."""
    rng = np.random.default_rng(seed)
    first = rng.integers(380, 491, n_bins)
    second = rng.integers(250, 1000 - first - 250 + 1)
    return rng.permutation(np.column_stack([first, second, 1000 - first - second]).ravel()).astype(float)


def test_triplets_pack_into_full_hosts():
    # Column generation's own columns rarely combine into 3 items per bin; the full patterns do.
    for seed in (1, 2):
        sizes = _triplets(20, seed)
        problem = small_problem(sizes, [1000.0] * 60, [1.0] * 60, np.arange(60), weights=PRIMARY_ONLY)
        found = column_generation(problem, time_limit=2)
        packed = pattern_packing(problem, found, time_limit=2)
        assert violations(problem, packed) == []
        assert primary(problem, packed) == 20.0
        result = run_solver(problem, "engine", time_limit=4)
        assert primary(problem, result.assign) == 20.0 and result.stats["bound"]["primary_lower_bound"] == 20.0


@pytest.mark.parametrize("converged, whole_costs, exact, order", [
    (True, True, True, ["master", "dive", "full"]),  # the only case where reaching the rounded-up bound proves a packing optimal
    (True, False, True, ["master", "full"]), (True, True, False, ["master", "full"]), (False, True, True, ["full", "master"])])
def test_the_likelier_packing_runs_first_with_most_of_the_time(monkeypatch, converged, whole_costs, exact, order):
    problem = small_problem([0.3, 0.45, 0.7] * 4, [1.0] * 12, [1.0] * 12, np.arange(12), weights=PRIMARY_ONLY)
    found = column_generation(problem, time_limit=2)
    assert found.classes.exact
    found.converged = converged
    found.types.cost = found.types.cost + (0.0 if whole_costs else 0.5)
    found.classes.exact = exact
    calls = []
    for name, method in (("master", "_master_packing"), ("dive", "_dive_packing"), ("full", "full_packing")):
        monkeypatch.setattr(patterns, method, lambda p, f, seconds, d, name=name: calls.append((name, seconds)))
    assert pattern_packing(problem, found, time_limit=4, deterministic=True) is None
    assert [name for name, _ in calls] == order
    shares = [patterns.MASTER_BEFORE_DIVE_SHARE, patterns.FIRST_METHOD_SHARE, 1.0] if len(order) == 3 else [patterns.FIRST_METHOD_SHARE, 1.0]
    left, expected = 4.0, []
    for share in shares:  # each method gets its share of what the ones before it left, so that all of them fit in the limit
        expected.append(share * left)
        left -= expected[-1]
    assert [seconds for _, seconds in calls] == pytest.approx(expected)


def _uniform(seed: int, n: int) -> np.ndarray:
    """Falkenauer's u family with an own seed: whole sizes in [20, 100] for bins of 150."""
    return np.random.default_rng(seed).integers(20, 101, n).astype(float)


def test_a_dive_that_ends_on_whole_hosts_covers_every_task_at_the_bound():
    for seed in (3, 7):  # of seeds 0-9 of 60 items, the dives that end on whole numbers (the others stop or are not tried)
        problem = small_problem(_uniform(seed, 60), [150.0] * 60, [1.0] * 60, np.arange(60), weights=PRIMARY_ONLY)
        found = column_generation(problem, time_limit=5)
        used = dive(found, SearchClock(5, deterministic=True))
        assert used is not None
        col_type, counts = found.master.column_arrays()
        cost = found.types.cost[col_type]
        assert (used >= 0).all() and (used @ counts >= found.classes.count).all()
        assert used @ cost == math.ceil(found.bound - 1e-6)
        assert all(v.lower_bound == 0 for v in found.master.variables)  # the master is left as column generation left it


def test_a_dive_finds_the_patterns_an_optimal_packing_needs():
    # 300 items (seed 7, found by a search over seeds 0-149): the integer master over column generation's own columns
    # is a bin above the rounded-up bound; after a dive it has the columns to meet it, which proves the packing optimal.
    problem = small_problem(_uniform(7, 300), [150.0] * 300, [1.0] * 300, np.arange(300), weights=PRIMARY_ONLY)
    found = column_generation(problem, time_limit=5)
    target = math.ceil(found.bound - 1e-6)
    assert found.converged and primary(problem, patterns._master_packing(problem, found, 2, deterministic=True)) == target + 1
    before = len(found.master.columns)
    dive(found, SearchClock(5, deterministic=True))
    assert len(found.master.columns) > before
    packed = patterns._master_packing(problem, found, 2, deterministic=True)
    assert violations(problem, packed) == [] and primary(problem, packed) == target


def test_a_large_triplet_instance_packs_into_full_hosts():
    # 501 tasks in 167 triples (Falkenauer's t501 size, own seed): an exact cover by full patterns, which CP-SAT finds.
    sizes = _triplets(167, 5)
    problem = small_problem(sizes, [1000.0] * 501, [1.0] * 501, np.arange(501), weights=PRIMARY_ONLY)
    found = column_generation(problem, time_limit=0.5)
    packed = full_packing(problem, found, seconds=10)
    assert packed is not None and violations(problem, packed) == [] and primary(problem, packed) == 167.0


def test_a_packing_into_full_hosts_is_tried_first_and_spares_column_generation():
    # 150 tasks in 50 triples: every task in a full host meets the volume bound; column generation is not run.
    sizes = _triplets(50, 7)
    problem = small_problem(sizes, [1000.0] * 150, [1.0] * 150, np.arange(150), weights=PRIMARY_ONLY, max_moves=None)
    result = run_solver(problem, "engine", time_limit=10)
    bound = result.stats["bound"]
    assert primary(problem, result.assign) == 50.0 and bound["primary_lower_bound"] == 50.0
    assert bound["perfect_packing"] == 50.0 and "pattern_lp" not in bound


@pytest.mark.parametrize("case", ["a total that is no whole number of hosts", "demands without a unit", "hosts of two sizes"])
def test_a_packing_into_full_hosts_is_not_tried_where_none_can_exist(case):
    sizes, capacity = _triplets(10, 3), [1000.0] * 30
    if case == "a total that is no whole number of hosts":
        sizes[0] -= 1.0
    elif case == "demands without a unit":
        sizes = sizes + np.random.default_rng(0).uniform(0, 1e-3, 30)
    else:
        capacity[0] = 1100.0
    problem = small_problem(sizes, capacity, [1.0] * 30, np.arange(30), weights=PRIMARY_ONLY, max_moves=None)
    assert perfect_packing_classes(problem) is None


def _summary(lower, gap, bound=None) -> dict:
    objective = 90.0
    return {"status": "feasible", "bound": bound, "gap": None if bound is None else (objective - bound) / objective,
            "objective": {"total": objective}, "context": {"goal": "tco"},
            "solver": {"stats": {"bound": {"primary_lower_bound": lower, "primary_gap": gap, "reason": "INFEASIBLE"}}}}


def test_the_console_never_prints_an_infinite_bound_and_says_when_the_bound_is_reached():
    from packer.cli.output import _status

    assert _status(_summary(float("inf"), None)) == "feasible: gap unknown (no lower bound could be computed: INFEASIBLE)"
    assert _status(_summary(None, None)).startswith("feasible: gap unknown (no lower bound")
    assert _status(_summary(86.0, 0.0, 86.0)) == ("feasible: gap 4.44% to the lower bound 86 on the objective 90; "
                                                  "TCO equals its lower bound (proven optimal TCO)")
    assert _status(_summary(86.0, 0.035, 86.0)) == "feasible: gap 4.44% to the lower bound 86 on the objective 90"


def test_the_full_pattern_search_stays_bounded_on_many_tiny_tasks():
    # 300 tasks of 1 on hosts of 100: a full host holds 100 tasks, more than a full pattern may (no deep recursion, no pattern).
    problem = small_problem([1.0] * 300, [100.0] * 300, [1.0] * 300, np.arange(300), weights=PRIMARY_ONLY)
    classes = task_classes(problem)
    assert full_patterns(classes, host_types(problem, classes), limit=10_000) == []


def test_progress_counts_from_the_start_of_the_solve():
    problem, _ = known_optimum_problem(11, 300)
    reports = []
    result = run_solver(problem, "engine", time_limit=3, progress=reports.append)
    engine = [r for r in reports if r.phase not in ("lower bound (LP)", "column generation")]
    assert engine and engine[0].elapsed_s >= result.stats["bound"]["pattern_wall_s"]
    assert [r.elapsed_s for r in reports] == sorted(r.elapsed_s for r in reports)


def test_the_best_fit_after_the_patterns_stops_on_its_clock():
    # No pattern chosen: all 300 tasks go to the best fit, which scans every host per task (13 s at 37,000 tasks).
    problem = small_problem([1.0] * 300, [100.0] * 300, [1.0] * 300, np.arange(300), weights=PRIMARY_ONLY)
    classes = task_classes(problem)
    types = host_types(problem, classes)
    no_patterns = (np.zeros(1, dtype=np.int64), np.zeros((1, len(classes.count)), dtype=np.int64), np.zeros(1, dtype=np.int64))
    packed = _fill(problem, classes, types, *no_patterns, SearchClock(10.0))
    assert violations(problem, packed) == [] and primary(problem, packed) == 3.0
    assert _fill(problem, classes, types, *no_patterns, SearchClock(0.0)) is None
    # A deterministic clock is charged per host scanned, whatever the machine: 300 tasks × 300 hosts.
    work = 300 * 300 * FILL_WORK_PER_HOST
    assert _fill(problem, classes, types, *no_patterns, SearchClock(work / 2, deterministic=True)) is None
    assert np.array_equal(_fill(problem, classes, types, *no_patterns, SearchClock(2 * work, deterministic=True)), packed)


def test_column_generation_on_rounded_classes_stops_once_its_lp_is_below_another_bound():
    """Its bound is at most its LP, which only falls: it can no longer beat the other bound, and no packing is built
    (on the known-optimum family at 5,000 tasks: 0.6 s instead of 10 s, and 30 s of packing at 2,330 against the
    engine's 2,280, given back to the engine)."""
    problem, optimum = known_optimum_problem(3, 400)
    found = column_generation(problem, time_limit=5, max_classes=40, useless_below=optimum, deterministic=True)
    assert not found.classes.exact and found.useless and found.iterations == 1 and found.lp <= optimum
    assert found.detail["pattern_useless"] is True
    assert pattern_packing(problem, found, time_limit=2, deterministic=True) is None
    kept = column_generation(problem, time_limit=5, max_classes=40, deterministic=True)
    assert not kept.useless and kept.iterations > 1


def test_column_generation_on_exact_classes_goes_on_below_another_bound():
    """Exact classes (here three sizes) can still give a packing at the bound, so their run is never cut short."""
    sizes = np.random.default_rng(2).choice([0.3, 0.45, 0.7], 60)
    problem = small_problem(sizes, [1.0] * 60, [1.0] * 60, np.arange(60), weights=PRIMARY_ONLY)
    found = column_generation(problem, time_limit=4, useless_below=1e9, deterministic=True)
    assert found.classes.exact and not found.useless and found.converged


def test_a_full_repack_builds_no_packing_from_a_useless_column_generation():
    problem, _ = known_optimum_problem(3, 400)
    result = run_solver(problem, "engine", time_limit=4, deterministic=True)
    detail = result.stats["bound"]
    assert detail["pattern_useless"] and "pattern_packing" not in detail
    assert violations(problem, result.assign) == []


def test_a_master_lp_that_fails_ends_column_generation_with_the_bound_so_far(monkeypatch):
    """GLOP stopping with an error of its own (:class:`~packer.solvers.bounds.SolverFailed`) on the second solve of the
    master ends column generation with its first iteration's bound, not with a traceback."""
    from packer.solvers.bounds import SolverFailed

    problem, optimum = known_optimum_problem(3, 200)
    solve, calls = patterns.solve_incremental, []

    def fails_after_one(lp, model_params=None):
        calls.append(lp)
        if len(calls) > 1:
            raise SolverFailed("GLOP: internal error")
        return solve(lp, model_params)

    monkeypatch.setattr(patterns, "solve_incremental", fails_after_one)
    found = column_generation(problem, time_limit=5, deterministic=True)
    assert found.iterations == 2 and not found.converged and math.isfinite(found.bound) and found.bound <= optimum + 1e-6
