"""A readable list of a plan's moves: which task goes where, in which order, and what each move buys.

:func:`move_list` turns the executable order of :func:`packer.plan.moves.order_moves` into one
row per move (step order) with the task's job, the source and destination hosts with
their architectures, and ``buys``, what the move is for:

* ``empties h1 (Skylake16, frees 2 cost units)``: the source host holds no task at the end
  of the plan, so its cost (cost units of the fleet catalog) is saved. When k > 1 moves
  empty one host, each says which of them it is (``move 2 of 3 off it``): the cost is freed
  once, by all k together;
* ``relieves h4: summed net sensitivity 1.31 → 0.98``, when the host does not end empty:
  it was over its sensitivity limit in the current placement (summed normalized
  sensitivity above 1 in a dimension, :mod:`packer.model.metrics`), the task adds to that
  dimension's sum, and the host ends the plan with a lower sum there. The numbers are the
  host's sum in that dimension (the most exceeded one the task adds to) before and after
  the whole plan, on the problem's sensitivity basis;
* ``via temporary host h7`` or ``via a spare machine outside the fleet``: the task is
  parked on a temporary host first (:mod:`packer.plan.moves`); written after what the move
  buys, or alone when it buys neither of the above;
* ``consolidation``: none of these; the task packs onto another host as part of the
  repack (the room or cost it saves shows on other moves' hosts).

:func:`write_move_list` writes ``moves.csv`` (every move) and ``moves.md`` (a Markdown
table, cut at :data:`MARKDOWN_ROWS` rows) into a plan folder.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from packer.model.metrics import TOLERANCE, host_sensitivity
from packer.model.problem import PlacementProblem
from packer.report.markdown import markdown_table

MOVES_CSV = "moves.csv"
MOVES_MARKDOWN = "moves.md"
#: Rows of the Markdown table; the rest are only in ``moves.csv``.
MARKDOWN_ROWS = 1000
#: Columns of :func:`move_list` (and of ``moves.csv``).
MOVE_LIST_COLUMNS = ("step", "task", "job", "from_host", "from_arch", "to_host", "to_arch", "buys")


def move_list(problem: PlacementProblem, assign: np.ndarray, moves: pd.DataFrame) -> pd.DataFrame:
    """One row per move of ``moves`` (columns of :data:`packer.plan.moves.MOVE_COLUMNS`), in step order, with what it buys.

    ``assign`` (T,) is the plan's placement (host indices), ``problem.current`` the
    placement the moves start from. Columns: :data:`MOVE_LIST_COLUMNS` (``job`` is empty
    when the problem has no job ids). Raises ``ValueError`` when ``moves`` names a task
    or host the problem does not have.
    """
    assign = np.asarray(assign, dtype=np.int64)
    moves = moves.sort_values("step", kind="stable").reset_index(drop=True)
    task = pd.Index(problem.task_ids).get_indexer(moves["task_id"])
    hosts = pd.Index(problem.host_ids)
    src, dst = hosts.get_indexer(moves["from_host"]), hosts.get_indexer(moves["to_host"])
    if (task < 0).any() or (src < 0).any() or (dst < 0).any():
        raise ValueError("the move list names tasks or hosts the problem does not have")
    arch = problem.arch_names[problem.host_arch]
    empties = _empties(problem, assign, src)
    # An emptied host is relieved too; saying it empties is the stronger statement.
    buys = _join(np.where(empties != "", empties, _relieves(problem, assign, task, src)), _temporary(moves))
    return pd.DataFrame({
        "step": moves["step"].to_numpy(dtype=np.int64),
        "task": problem.task_ids[task].astype(object),
        "job": problem.job_ids[task].astype(object) if problem.job_ids is not None else np.full(len(moves), None, dtype=object),
        "from_host": problem.host_ids[src].astype(object),
        "from_arch": arch[src].astype(object),
        "to_host": problem.host_ids[dst].astype(object),
        "to_arch": arch[dst].astype(object),
        "buys": np.where(buys == "", "consolidation", buys).astype(object),
    }, columns=list(MOVE_LIST_COLUMNS))


def _join(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Element-wise ``first; second``, leaving out empty parts (arrays of str)."""
    both = (first != "") & (second != "")
    return np.where(both, np.char.add(np.char.add(first, "; "), second), np.char.add(first, second))


def _empties(problem: PlacementProblem, assign: np.ndarray, src: np.ndarray) -> np.ndarray:
    """``empties <host> (<arch>, frees <cost> cost units[; move i of k off it])`` where the source host ends empty, else ''."""
    ends_empty = (np.bincount(assign, minlength=problem.n_hosts) == 0)[src]
    by_source = pd.Series(src)
    nth = by_source.groupby(by_source).cumcount().to_numpy() + 1
    total = by_source.map(by_source.value_counts()).to_numpy()
    which = np.where(total > 1, np.char.add(np.char.add(np.char.add("; move ", nth.astype(str)), np.char.add(" of ", total.astype(str))), " off it"), "")
    text = np.char.add(np.char.add(np.char.add("empties ", problem.host_ids[src].astype(str)), " ("), problem.arch_names[problem.host_arch[src]].astype(str))
    text = np.char.add(np.char.add(np.char.add(text, ", frees "), np.char.mod("%g", problem.cost[src])), " cost units")
    return np.where(ends_empty, np.char.add(np.char.add(text, which), ")"), "")


def _relieves(problem: PlacementProblem, assign: np.ndarray, task: np.ndarray, src: np.ndarray) -> np.ndarray:
    """``relieves <host>: summed <dim> sensitivity <before> → <after>`` where the move lowers an exceeded sum, else ''."""
    if not problem.sens_dims:
        return np.full(len(src), "")
    before = host_sensitivity(problem, problem.current)[src]
    after = host_sensitivity(problem, assign)[src]
    lowers = (before > 1.0 + TOLERANCE) & (problem.sens_demand[task] > 0) & (after < before)
    # Of the dimensions the move relieves, name the one most over its limit.
    dim = np.where(lowers, before, -np.inf).argmax(axis=1)
    rows = np.arange(len(src))
    text = np.char.add(np.char.add(np.char.add("relieves ", problem.host_ids[src].astype(str)), ": summed "), np.asarray(problem.sens_dims)[dim])
    text = np.char.add(np.char.add(text, " sensitivity "), np.char.mod("%.2f", before[rows, dim]))
    text = np.char.add(np.char.add(text, " → "), np.char.mod("%.2f", after[rows, dim]))
    return np.where(lowers.any(axis=1), text, "")


def _temporary(moves: pd.DataFrame) -> np.ndarray:
    """``via temporary host <host>`` (or a spare outside the fleet) for parked moves, else ''."""
    via = moves["via_temporary"].to_numpy(dtype=bool)
    temp = moves["temp_host"]
    named = np.char.add("via temporary host ", temp.fillna("").to_numpy(dtype=str))
    return np.where(via, np.where(temp.notna().to_numpy(), named, "via a spare machine outside the fleet"), "")


def render_move_list(frame: pd.DataFrame, max_rows: int = MARKDOWN_ROWS) -> str:
    """``moves.md``: a Markdown table of the first ``max_rows`` moves of :func:`move_list`'s ``frame``."""
    lines = ["# Moves", ""]
    if frame.empty:
        return "\n".join([*lines, "No moves: every task stays on its current host.", ""])
    lines += [f"{len(frame):,} moves, in the order to execute them (step 1 first; a parked task lands on its destination after "
              "the last step). `what it buys`: see packer/plan/move_list.py. Every move is in moves.csv.", ""]
    shown = frame.head(max_rows)
    cells = pd.DataFrame({
        "step": shown["step"].astype(str),
        "task": shown["task"].astype(str),
        "job": shown["job"].fillna("-").astype(str),
        "from": shown["from_host"].astype(str) + " (" + shown["from_arch"].astype(str) + ")",
        "to": shown["to_host"].astype(str) + " (" + shown["to_arch"].astype(str) + ")",
        "buys": shown["buys"].astype(str),
    })
    lines.append(markdown_table(["step", "task", "job", "from host (arch)", "to host (arch)", "what it buys"],
                                cells.itertuples(index=False), "rlllll"))
    if len(frame) > max_rows:
        lines += ["", f"… and {len(frame) - max_rows:,} more moves in moves.csv."]
    return "\n".join([*lines, ""])


def write_move_list(folder: str | Path, frame: pd.DataFrame, max_rows: int = MARKDOWN_ROWS) -> None:
    """Write ``moves.csv`` (every row of ``frame``) and ``moves.md`` (:func:`render_move_list`) into ``folder``."""
    folder = Path(folder)
    frame.to_csv(folder / MOVES_CSV, index=False)
    (folder / MOVES_MARKDOWN).write_text(render_move_list(frame, max_rows))
