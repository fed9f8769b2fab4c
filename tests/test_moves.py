"""Move ordering: hand-made chains and cycles, grandfathered hosts, and a replay property."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from packer.model.metrics import host_loads
from packer.plan.moves import MOVE_COLUMNS, check_move_order, order_moves
from packer.model.problem import PlacementProblem


def make_problem(demand, capacity, current, *, host_arch=None, eligible=None) -> PlacementProblem:
    """A bare problem: tasks t0.., hosts h0.., one dimension per demand column."""
    demand = np.asarray(demand, dtype=float).reshape(len(demand), -1)
    capacity = np.asarray(capacity, dtype=float).reshape(len(capacity), -1)
    n_tasks, n_hosts = len(demand), len(capacity)
    host_arch = np.zeros(n_hosts, dtype=np.int64) if host_arch is None else np.asarray(host_arch, dtype=np.int64)
    n_arch = int(host_arch.max()) + 1
    eligible = np.ones((n_tasks, n_arch), dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    return PlacementProblem(
        task_ids=np.array([f"t{i}" for i in range(n_tasks)]),
        host_ids=np.array([f"h{i}" for i in range(n_hosts)]),
        arch_names=np.array([f"a{i}" for i in range(n_arch)]),
        dims=tuple(f"d{j}" for j in range(demand.shape[1])),
        demand=demand,
        capacity=capacity,
        frag_dims=(0,),
        sens_dims=(),
        sens_demand=np.zeros((n_tasks, 0)),
        sens_capacity=np.zeros((n_hosts, 0)),
        host_arch=host_arch,
        cost=np.ones(n_hosts),
        eligible=eligible,
        current=np.asarray(current, dtype=np.int64),
        movable=np.ones(n_tasks, dtype=bool),
        job=np.arange(n_tasks),
        domain=np.full(n_hosts, -1),
    )


def test_chain_waits_for_the_destination_to_empty():
    # t0 on h0 goes to h1, which is full with t1 until t1 leaves for h2.
    problem = make_problem([1, 1], [1, 1, 1], [0, 1])
    schedule = order_moves(problem, np.array([1, 2]))
    assert list(schedule.table.columns) == list(MOVE_COLUMNS)
    assert schedule.table["task_id"].tolist() == ["t1", "t0"]
    assert schedule.table["step"].tolist() == [1, 2]
    assert schedule.n_temporary == 0
    assert check_move_order(problem, schedule.table) == []


def test_swap_between_two_full_hosts_needs_exactly_one_temporary_move():
    problem = make_problem([1, 1], [1, 1], [0, 1])
    schedule = order_moves(problem, np.array([1, 0]))
    assert schedule.n_temporary == 1
    temp = schedule.table[schedule.table["via_temporary"]]
    assert temp["temp_host"].isna().all()  # no host of the fleet has room: a spare outside it
    assert check_move_order(problem, schedule.table) == []


def test_swap_parks_on_a_host_with_room():
    problem = make_problem([1, 1], [1, 1, 1], [0, 1])
    schedule = order_moves(problem, np.array([1, 0]))
    assert schedule.n_temporary == 1
    assert schedule.table.loc[schedule.table["via_temporary"], "temp_host"].tolist() == ["h2"]
    assert check_move_order(problem, schedule.table) == []


def test_staging_host_must_run_the_task():
    # h2 has room but its architecture is not allowed for either task: park outside the fleet.
    problem = make_problem([1, 1], [1, 1, 1], [0, 1], host_arch=[0, 0, 1], eligible=[[True, False], [True, False]])
    schedule = order_moves(problem, np.array([1, 0]))
    assert schedule.n_temporary == 1
    assert schedule.table["temp_host"].isna().all()


def test_three_cycle_needs_one_temporary_move():
    problem = make_problem([1, 1, 1], [1, 1, 1], [0, 1, 2])
    schedule = order_moves(problem, np.array([1, 2, 0]))
    assert len(schedule) == 3
    assert schedule.n_temporary == 1
    assert check_move_order(problem, schedule.table) == []


def test_no_moves_gives_an_empty_table():
    problem = make_problem([1, 1], [2, 2], [0, 1])
    schedule = order_moves(problem, problem.current)
    assert len(schedule) == 0 and list(schedule.table.columns) == list(MOVE_COLUMNS)
    assert check_move_order(problem, schedule.table) == []


def test_overloaded_host_receives_only_after_shedding():
    # h0 starts over capacity (2 > 1.5); t1 leaves to h1, then t2 (0.5) may come in.
    problem = make_problem([1, 1, 0.5], [1.5, 1, 1], [0, 0, 2])
    schedule = order_moves(problem, np.array([0, 1, 0]))
    assert schedule.table["task_id"].tolist() == ["t1", "t2"]
    assert check_move_order(problem, schedule.table) == []
    reversed_order = schedule.table.assign(step=[2, 1])
    assert any("h0 over capacity" in p for p in check_move_order(problem, reversed_order))


def test_target_over_capacity_has_no_order():
    problem = make_problem([1, 1], [1, 1], [0, 1])
    with pytest.raises(ValueError, match="no move order exists"):
        order_moves(problem, np.array([1, 1]))


def test_check_move_order_reports_out_of_order_steps():
    problem = make_problem([1, 1], [1, 1, 1], [0, 1])
    table = order_moves(problem, np.array([1, 2])).table
    problems = check_move_order(problem, table.assign(step=[2, 1]))
    assert problems == ["step 1 (task t0 to h1): host h1 over capacity (d0 2 > 1)"]


def test_check_move_order_reports_bad_tables():
    problem = make_problem([1, 1], [1, 1, 1], [0, 1])
    table = order_moves(problem, np.array([1, 2])).table
    assert "numbered 1..2" in check_move_order(problem, table.assign(step=[1, 1]))[0]
    assert "task t1 is on h1, not on h0" in check_move_order(problem, table.assign(from_host=["h0", "h0"]))[0]
    assert "unknown task" in check_move_order(problem, table.assign(task_id=["t9", "t0"]))[0]
    assert "more than once" in check_move_order(problem, table.assign(task_id=["t1", "t1"]))[0]
    assert "lacks column" in check_move_order(problem, table.drop(columns="temp_host"))[0]


def test_check_move_order_checks_the_staging_host():
    problem = make_problem([1, 1], [1, 1, 0.5], [0, 1])
    table = order_moves(problem, np.array([1, 0])).table
    assert table["temp_host"].isna().all()  # h2 is too small to stage a task
    staged = table.assign(temp_host=[("h2" if v else None) for v in table["via_temporary"]])
    assert any("parked on h2" in p for p in check_move_order(problem, staged))


def test_many_swaps_scale_linearly():
    # 2,000 full hosts swapping tasks pairwise plus 4,000 chain moves: a rescanning scheduler would crawl.
    pairs = 1000
    n_hosts = 2 * pairs + 4001
    current = np.concatenate([np.arange(2 * pairs), 2 * pairs + np.arange(4000)])
    target = np.concatenate([np.arange(2 * pairs) ^ 1, 2 * pairs + 1 + np.arange(4000)])
    problem = make_problem(np.ones(len(current)), np.ones(n_hosts), current)
    schedule = order_moves(problem, target)
    assert len(schedule) == len(current)
    assert schedule.n_temporary == pairs
    assert check_move_order(problem, schedule.table) == []


@st.composite
def problems_and_targets(draw, ample: bool = False):
    n_tasks = draw(st.integers(1, 10))
    n_hosts = draw(st.integers(2, 5))
    demand = np.array(draw(st.lists(st.lists(st.integers(1, 10), min_size=2, max_size=2), min_size=n_tasks, max_size=n_tasks)), dtype=float) / 4
    current = np.array(draw(st.lists(st.integers(0, n_hosts - 1), min_size=n_tasks, max_size=n_tasks)))
    target = np.array(draw(st.lists(st.integers(0, n_hosts - 1), min_size=n_tasks, max_size=n_tasks)))
    host_arch = np.array(draw(st.lists(st.integers(0, 1), min_size=n_hosts, max_size=n_hosts)))
    extra = np.array(draw(st.lists(st.sampled_from([0.0, 0.25, 1.0]), min_size=n_hosts, max_size=n_hosts)))
    probe = make_problem(demand, np.zeros((n_hosts, 2)), current)
    before, after = host_loads(probe, current), host_loads(probe, target)
    if ample:
        # Room for every arriving task on top of the current load: no move ever waits.
        moved = target != current
        incoming = np.zeros((n_hosts, 2))
        np.add.at(incoming, target[moved], demand[moved])
        capacity = before + incoming + extra[:, None]
    else:
        # Tight: both the current and the target placement fit, nothing more (plus a little on some hosts).
        capacity = np.maximum(before, after) + extra[:, None]
    eligible = np.array(draw(st.lists(st.lists(st.booleans(), min_size=2, max_size=2), min_size=n_tasks, max_size=n_tasks)), dtype=bool).reshape(n_tasks, 2)
    eligible[np.arange(n_tasks), host_arch[current]] = True
    eligible[np.arange(n_tasks), host_arch[target]] = True
    if host_arch.max() == 0:
        eligible = eligible[:, :1]
    return make_problem(demand, capacity, current, host_arch=host_arch, eligible=eligible), target


@settings(max_examples=300, deadline=None)
@given(problems_and_targets())
def test_schedule_replays_within_capacity(case):
    problem, target = case
    schedule = order_moves(problem, target)
    table = schedule.table
    moved = np.flatnonzero(target != problem.current)
    assert sorted(table["task_id"]) == sorted(problem.task_ids[moved])
    assert table["task_id"].is_unique
    assert table["step"].tolist() == list(range(1, len(moved) + 1))
    assert check_move_order(problem, table) == []
    assert schedule.n_temporary <= len(moved)


@settings(max_examples=200, deadline=None)
@given(problems_and_targets(ample=True))
def test_no_temporary_moves_when_destinations_have_room(case):
    problem, target = case
    schedule = order_moves(problem, target)
    assert schedule.n_temporary == 0
    assert check_move_order(problem, schedule.table) == []
