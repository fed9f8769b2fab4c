"""The executable plan: an order in which to move tasks so that no host ever exceeds its capacity.

A placement says where every task ends; :func:`order_moves` says in which order to
get there from ``problem.current``, one task at a time. Capacities are the
problem's: per host and dimension, the summed configured limits (requests or
pNN usage; cpu in reference cores, mem GiB, net Gbps, ...) of the tasks on it.

Replay semantics (what :func:`check_move_order` checks, and what the schedule promises)
-----------------------------------------------------------------------------------
Steps are applied in ``step`` order (1..n); each task appears at most once.

* A direct step (``via_temporary`` false) moves the task from ``from_host`` to
  ``to_host`` at once: the source loses its demand, the destination gains it.
* A temporary step (``via_temporary`` true) takes the task off ``from_host`` at that
  step and parks it on ``temp_host`` (an actual host of the fleet, which gains its
  demand), or, when ``temp_host`` is null, on a spare machine outside the fleet
  (nobody's capacity). Parked tasks land on their ``to_host`` after the last step,
  in step order, each leaving its temporary host as it lands.
* A step is executable when the host that *receives* the task (the destination, the
  temporary host, or the destination of a landing) is within capacity in every
  dimension afterwards (up to :data:`packer.model.metrics.TOLERANCE`). Hosts that only
  lose tasks are never checked, so a host already over capacity in the current
  placement may stay so while it sheds tasks, but it can receive a task only once
  it has room for it: the same grandfathering as :func:`packer.model.metrics.violations`.

Staging hosts are transient: eligibility is required of them (the task runs there
for a while) but spread limits are not.

Algorithm of :func:`order_moves`: event-driven greedy with one queue of pending
moves per destination. A move is applied as soon as its destination has room;
applying it frees room at its source, which puts the source back on the work list.
When no pending move fits (a cycle, e.g. two full hosts swapping tasks), one move
is parked on a temporary host and the greedy resumes. In a valid target placement
every blocked destination still has tasks to shed, so this always completes.
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

import numpy as np
import pandas as pd

from packer.model.metrics import TOLERANCE, host_loads
from packer.model.problem import PlacementProblem

log = logging.getLogger(__name__)

#: Columns of a move table (``moves.parquet``).
MOVE_COLUMNS = ("step", "task_id", "from_host", "to_host", "via_temporary", "temp_host")
#: At most this many problems are listed by :func:`check_move_order` (the count of the rest is given).
MAX_REPORTED = 10


@dataclass(frozen=True)
class MoveSchedule:
    """An executable move order. ``table`` has :data:`MOVE_COLUMNS`, one row per moved task, ``step`` 1..n."""

    table: pd.DataFrame

    @property
    def n_temporary(self) -> int:
        """Moves routed through a temporary host."""
        return int(self.table["via_temporary"].sum())

    def __len__(self) -> int:
        return len(self.table)


def _size_scale(problem: PlacementProblem) -> np.ndarray:
    """Mean host capacity per dimension, to compare demands across dimensions (1 where a dimension is all zero)."""
    mean = problem.capacity.mean(axis=0) if problem.n_hosts else np.ones(len(problem.dims))
    return np.where(mean > 0, mean, 1.0)


def _empty_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "step": pd.Series([], dtype="int64"),
            "task_id": pd.Series([], dtype="object"),
            "from_host": pd.Series([], dtype="object"),
            "to_host": pd.Series([], dtype="object"),
            "via_temporary": pd.Series([], dtype="bool"),
            "temp_host": pd.Series([], dtype="object"),
        }
    )


def order_moves(problem: PlacementProblem, assign: np.ndarray) -> MoveSchedule:
    """Order the moves from ``problem.current`` to ``assign`` so that every step is executable (see module doc).

    ``assign`` (T,) host indices must keep every host that receives tasks within
    capacity (as :func:`packer.model.metrics.violations` requires); otherwise no order
    exists and ``ValueError`` is raised naming a host that cannot take its tasks.
    """
    assign = np.asarray(assign, dtype=np.int64)
    moved = np.flatnonzero(assign != problem.current)
    if len(moved) == 0:
        return MoveSchedule(_empty_table())
    src = problem.current[moved]
    dst = assign[moved]
    demand = problem.demand[moved]
    load = host_loads(problem, problem.current)
    limit = problem.capacity + TOLERANCE
    scale = _size_scale(problem)

    # Per-host queues of move numbers (positions in ``moved``), in task order.
    pending_in: dict[int, list[int]] = {}
    pending_out: dict[int, set[int]] = {}
    for m, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
        pending_in.setdefault(d, []).append(m)
        pending_out.setdefault(s, set()).add(m)
    # Destinations that still expect a task (pending or parked): never used as staging hosts,
    # so a parked task never sits where another one must land.
    expecting = np.bincount(dst, minlength=problem.n_hosts)
    ends_empty = np.bincount(assign, minlength=problem.n_hosts) == 0

    order: list[int] = []
    temp_of: dict[int, int] = {}
    work = deque(sorted(pending_in))
    queued = np.zeros(problem.n_hosts, dtype=bool)
    queued[list(pending_in)] = True
    remaining = len(moved)

    def leave(m: int) -> None:
        s = int(src[m])
        load[s] -= demand[m]
        pending_out[s].discard(m)
        if pending_in.get(s) and not queued[s]:
            work.append(s)
            queued[s] = True

    while remaining:
        while work:
            h = work.popleft()
            queued[h] = False
            still = []
            for m in pending_in.get(h, ()):
                if np.all(load[h] + demand[m] <= limit[h]):
                    load[h] += demand[m]
                    expecting[h] -= 1
                    order.append(m)
                    remaining -= 1
                    leave(m)
                else:
                    still.append(m)
            if still:
                pending_in[h] = still
            else:
                pending_in.pop(h, None)
        if not remaining:
            break
        victim = _pick_victim(pending_in, pending_out, load, limit, demand, scale)
        if victim is None:
            h = next(iter(pending_in))
            raise ValueError(f"no move order exists: host {problem.host_ids[h]} cannot take its incoming tasks "
                             f"(the target placement exceeds its capacity)")
        d = int(dst[victim])
        pending_in[d].remove(victim)
        if not pending_in[d]:
            del pending_in[d]
        temp = _pick_staging_host(problem, moved[victim], int(src[victim]), demand[victim], load, limit, expecting, ends_empty)
        if temp is not None:
            load[temp] += demand[victim]
        temp_of[victim] = -1 if temp is None else temp
        order.append(victim)
        remaining -= 1
        leave(victim)

    seq = np.asarray(order, dtype=np.int64)
    via = np.asarray([m in temp_of for m in order], dtype=bool)
    temp_pos = np.asarray([temp_of.get(m, -1) for m in order], dtype=np.int64)
    temp_ids = np.where(temp_pos >= 0, problem.host_ids[np.maximum(temp_pos, 0)].astype(object), None)
    table = pd.DataFrame(
        {
            "step": np.arange(1, len(seq) + 1, dtype=np.int64),
            "task_id": problem.task_ids[moved[seq]].astype(object),
            "from_host": problem.host_ids[src[seq]].astype(object),
            "to_host": problem.host_ids[dst[seq]].astype(object),
            "via_temporary": via,
            "temp_host": pd.Series(temp_ids, dtype="object"),
        }
    )
    if via.any():
        log.info("%d of %d moves go through a temporary host (%d through a spare outside the fleet)", int(via.sum()), len(seq), int((via & (temp_pos < 0)).sum()))
    return MoveSchedule(table)


def _pick_victim(pending_in: dict[int, list[int]], pending_out: dict[int, set[int]], load: np.ndarray, limit: np.ndarray,
                 demand: np.ndarray, scale: np.ndarray) -> int | None:
    """The move to park when nothing fits: one that leaves the destination of a blocked move.

    Parking a task frees room only at its source, so it must leave a host that a
    blocked move waits for. Of that host's departures, the smallest that alone makes
    room for the blocked move is parked (keeping staging hosts free), else the largest.
    ``None`` when no blocked destination has departures left (the target is over capacity).
    """
    for h, blocked in pending_in.items():
        leaving = pending_out.get(h)
        if not leaving:
            continue
        need = np.maximum(load[h] + demand[blocked[0]] - limit[h], 0.0)
        candidates = np.fromiter(sorted(leaving), dtype=np.int64)
        size = (demand[candidates] / scale).sum(axis=1)
        covers = (demand[candidates] >= need).all(axis=1)
        if covers.any():
            pick = np.flatnonzero(covers)[np.argmin(size[covers])]
        else:
            pick = np.argmax(size)
        return int(candidates[pick])
    return None


def _pick_staging_host(problem: PlacementProblem, task: int, source: int, need: np.ndarray, load: np.ndarray, limit: np.ndarray,
                       expecting: np.ndarray, ends_empty: np.ndarray) -> int | None:
    """A host that can hold ``task`` for the rest of the schedule, or ``None`` for a spare outside the fleet.

    It must have room now, run the task's architecture, and expect no more arrivals
    (so its load never grows again and the parked task blocks nobody). Hosts that end
    empty are preferred: they are being freed anyway. Ties go to the lowest host index.
    """
    fits = (load + need <= limit).all(axis=1) & (expecting == 0) & problem.eligible[task][problem.host_arch]
    fits[source] = False
    for pool in (fits & ends_empty, fits):
        hosts = np.flatnonzero(pool)
        if len(hosts):
            return int(hosts[0])
    return None


def check_move_order(problem: PlacementProblem, moves: pd.DataFrame) -> list[str]:
    """Replay ``moves`` (columns :data:`MOVE_COLUMNS`) from ``problem.current``; every problem found, as sentences.

    Independent of :func:`order_moves`: follows the replay semantics of the module
    doc. Reports steps not numbered 1..n, unknown tasks or hosts, a task that moves
    twice or leaves a host it is not on, a staging host the task is not eligible
    for, and every arrival (direct, staging or final landing) that leaves the
    receiving host over capacity. Lists at most :data:`MAX_REPORTED` problems and
    counts the rest. An empty list means the order is executable.
    """
    missing = [c for c in MOVE_COLUMNS if c not in moves.columns]
    if missing:
        return [f"move table lacks column(s) {', '.join(missing)}"]
    n = len(moves)
    steps = pd.to_numeric(moves["step"], errors="coerce").to_numpy(dtype=float)
    if n and not np.array_equal(np.sort(steps), np.arange(1, n + 1)):
        return [f"steps must be numbered 1..{n} without gaps or repeats"]
    table = moves.iloc[np.argsort(steps, kind="stable")]
    task_index = pd.Index(problem.task_ids)
    host_index = pd.Index(problem.host_ids)
    task = task_index.get_indexer(table["task_id"].astype(str))
    frm = host_index.get_indexer(table["from_host"].astype(str))
    to = host_index.get_indexer(table["to_host"].astype(str))
    via = table["via_temporary"].fillna(False).to_numpy(dtype=bool)
    temp_given = table["temp_host"].notna().to_numpy()
    temp = np.where(temp_given, host_index.get_indexer(table["temp_host"].where(temp_given, "").astype(str)), -1)
    step = table["step"].to_numpy(dtype=np.int64)

    problems: list[str] = []
    for what, bad in (("name an unknown task", task < 0), ("name an unknown source host", frm < 0), ("name an unknown destination host", to < 0),
                      ("name an unknown temporary host", temp_given & (temp < 0)), ("give a temporary host on a direct move", temp_given & ~via)):
        if bad.any():
            problems.append(f"{int(bad.sum())} steps {what}, e.g. step {int(step[bad][0])}")
    if problems:
        return problems
    repeated = pd.Series(task).duplicated().to_numpy()
    if repeated.any():
        return [f"{int(repeated.sum())} tasks move more than once, e.g. {problem.task_ids[task[repeated][0]]} at step {int(step[repeated][0])}"]

    load = host_loads(problem, problem.current)
    limit = problem.capacity + TOLERANCE
    where = problem.current.copy()
    found = 0

    def note(text: str) -> None:
        nonlocal found
        found += 1
        if found <= MAX_REPORTED:
            problems.append(text)

    def arrive(h: int, d: np.ndarray, label: str) -> None:
        load[h] += d
        over = load[h] > limit[h]
        if over.any():
            dims = ", ".join(f"{problem.dims[j]} {load[h, j]:.6g} > {problem.capacity[h, j]:.6g}" for j in np.flatnonzero(over))
            note(f"{label}: host {problem.host_ids[h]} over capacity ({dims})")

    parked: list[int] = []
    for i in range(n):
        t, f, d = int(task[i]), int(frm[i]), problem.demand[task[i]]
        name = problem.task_ids[t]
        if where[t] != f:
            note(f"step {step[i]}: task {name} is on {problem.host_ids[where[t]]}, not on {problem.host_ids[f]}")
        load[where[t]] -= d
        if not via[i]:
            where[t] = to[i]
            arrive(int(to[i]), d, f"step {step[i]} (task {name} to {problem.host_ids[to[i]]})")
            continue
        parked.append(i)
        where[t] = temp[i]
        if temp[i] >= 0:
            if not problem.eligible[t, problem.host_arch[temp[i]]]:
                note(f"step {step[i]}: task {name} is not eligible on its temporary host {problem.host_ids[temp[i]]}")
            arrive(int(temp[i]), d, f"step {step[i]} (task {name} parked on {problem.host_ids[temp[i]]})")
    for i in parked:
        t, d = int(task[i]), problem.demand[task[i]]
        if temp[i] >= 0:
            load[temp[i]] -= d
        where[t] = to[i]
        arrive(int(to[i]), d, f"landing after the last step (task {problem.task_ids[t]} from step {step[i]} to {problem.host_ids[to[i]]})")
    if found > MAX_REPORTED:
        problems.append(f"... and {found - MAX_REPORTED} more")
    return problems
