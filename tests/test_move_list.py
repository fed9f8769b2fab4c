"""The readable move list: what each move buys, on a hand-made problem, and its CSV and Markdown files."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from packer.plan.move_list import MOVE_LIST_COLUMNS, MOVES_CSV, MOVES_MARKDOWN, move_list, render_move_list, write_move_list
from packer.plan.moves import order_moves
from problems import small_problem

# Hosts h0..h3 (capacity 10; costs 2, 1, 3, 1; sensitivity capacity 1). Today: t0, t1 on h0 (summed
# sensitivity 1.2: over the limit), t2, t3 on h2, t4, t5 on h3, t6 on h1.
DEMAND = [2, 2, 1, 1, 1, 1, 1]
SENS = [0.6, 0.6, 0.1, 0.1, 0.0, 0.0, 0.0]
CURRENT = [0, 0, 2, 2, 3, 3, 1]


@pytest.fixture
def problem():
    p = small_problem(DEMAND, [10, 10, 10, 10], [2, 1, 3, 1], CURRENT, sens=SENS, sens_capacity=[1, 1, 1, 1])
    return p.with_(job_ids=np.array([f"job{i // 2}" for i in range(len(DEMAND))]))


def _plan(problem, **moves):
    """``assign`` with tasks moved (``t1=1`` moves t1 to h1) and its executable move order."""
    assign = problem.current.copy()
    for task, host in moves.items():
        assign[int(task[1:])] = host
    return assign, order_moves(problem, assign).table


def test_each_move_says_what_it_buys(problem):
    assign, moves = _plan(problem, t1=1, t2=1, t3=1, t4=1)
    frame = move_list(problem, assign, moves)
    assert tuple(frame.columns) == MOVE_LIST_COLUMNS
    assert frame["step"].tolist() == sorted(moves["step"])
    buys = dict(zip(frame["task"], frame["buys"]))
    # t1 leaves h0, which was over its sensitivity limit and ends lower (t0 stays).
    assert buys["t1"] == "relieves h0: summed cpu sensitivity 1.20 → 0.60"
    # t2 and t3 empty h2 (cost 3) together, each saying which of the two moves it is.
    emptying = frame[frame["task"].isin(["t2", "t3"])].sort_values("step")
    assert emptying["buys"].tolist() == ["empties h2 (a, frees 3 cost units; move 1 of 2 off it)",
                                         "empties h2 (a, frees 3 cost units; move 2 of 2 off it)"]
    # t4 leaves h3, which keeps t5 and was not at risk.
    assert buys["t4"] == "consolidation"
    row = frame.set_index("task").loc["t4"]
    assert (row["job"], row["from_host"], row["from_arch"], row["to_host"], row["to_arch"]) == ("job2", "h3", "a", "h1", "a")


def test_a_lone_move_that_empties_a_host_does_not_count_itself(problem):
    assign, moves = _plan(problem, t6=3)
    assert move_list(problem, assign, moves)["buys"].tolist() == ["empties h1 (a, frees 1 cost units)"]


def test_no_relief_when_the_host_ends_no_lower(problem):
    # t1 (0.6) leaves h0 but t7 (0.7) arrives: h0 ends at 1.3, above today's 1.2, so t1's move relieves nothing.
    heavy = small_problem(DEMAND + [1], [10, 10, 10, 10], [2, 1, 3, 1], CURRENT + [3], sens=SENS + [0.7], sens_capacity=[1, 1, 1, 1])
    assign = heavy.current.copy()
    assign[1], assign[7] = 1, 0  # t1 out of h0, t7 (0.7) into h0: 1.2 → 1.3
    frame = move_list(heavy, assign, order_moves(heavy, assign).table)
    buys = dict(zip(frame["task"], frame["buys"]))
    assert buys["t1"] == "consolidation"
    assert frame["job"].isna().all()  # this problem has no job ids


def test_temporary_moves_are_named_after_what_they_buy(problem):
    assign, moves = _plan(problem, t2=1, t3=1, t4=1)
    moves = moves.copy()
    moves["temp_host"] = moves["temp_host"].astype(object)
    on = moves["task_id"] == "t4"
    moves.loc[on, "via_temporary"], moves.loc[on, "temp_host"] = True, "h0"
    first_out = moves[moves["task_id"].isin(["t2", "t3"])]["step"].min()
    moves.loc[moves["step"] == first_out, "via_temporary"] = True
    buys = move_list(problem, assign, moves).set_index("step")["buys"]
    assert buys[moves.loc[on, "step"].iloc[0]] == "via temporary host h0"
    assert buys[first_out] == "empties h2 (a, frees 3 cost units; move 1 of 2 off it); via a spare machine outside the fleet"


def test_unknown_hosts_are_refused(problem):
    assign, moves = _plan(problem, t4=1)
    with pytest.raises(ValueError, match="does not have"):
        move_list(problem, assign, moves.assign(to_host="h9"))


def test_files_and_markdown_cut(problem, tmp_path):
    assign, moves = _plan(problem, t1=1, t2=1, t3=1, t4=1)
    frame = move_list(problem, assign, moves)
    write_move_list(tmp_path, frame, max_rows=2)
    back = pd.read_csv(tmp_path / MOVES_CSV)
    assert back["task"].tolist() == frame["task"].tolist() and back["buys"].tolist() == frame["buys"].tolist()
    text = (tmp_path / MOVES_MARKDOWN).read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| step")]
    assert len(rows) == 2 and "… and 2 more moves in moves.csv." in text
    first = frame.iloc[0]
    assert rows[0] == f"| {first['step']} | {first['task']} | {first['job']} | {first['from_host']} (a) | {first['to_host']} (a) | {first['buys']} |"
    assert "No moves" in render_move_list(frame.head(0))


def test_emptying_a_host_over_its_limit_says_it_empties_it(problem):
    # t0 and t1 leave h0 (summed sensitivity 1.2): h0 ends empty, which is more than relieving it.
    assign, moves = _plan(problem, t0=1, t1=3)
    assert move_list(problem, assign, moves)["buys"].tolist() == [f"empties h0 (a, frees 2 cost units; move {i} of 2 off it)" for i in (1, 2)]
