"""Exchanges of two tasks between hosts, where they lower Eq. 4's interference and no single move can.

Relief by single moves needs a host with room for one more task, and relief by batches an empty host worth
opening (:func:`packer.solvers.engine._relieve_interference`). Once open hosts are full in some dimension,
or near their own sensitivity limit, excess is left spread thinly over many hosts. Exchanging a task on a
host over its limit for a less sensitive task elsewhere still lowers it: both hosts keep their task counts,
and sensitivity flows towards the hosts (often of another architecture) with room for it. On 37,000 tasks
under P99 Sens at weight 10, exchanges took a plan relief had finished with from 26,664 to 24,304 in 17 s
(benchmarks/RESULTS.md, issue 11, eighteenth session).

For each task on a host over its limit, largest relief first, every movable task elsewhere is scored at once
(:class:`_Partners`): the estimated change of the summed excess, where capacity, eligibility, the hosts that
may receive and the move budget allow the exchange. The best partner is then exchanged for real: the rules
admit each task on the other's host without the other, the change of the objective is summed over its two
moves (every goal), and the exchange is kept only if it lowers the objective and the whole placement keeps
every rule. Units: sensitivity normalized by each host's sensitivity capacity (as :meth:`PlacementState.excess`).
"""
from __future__ import annotations

import logging
from typing import Callable

import numpy as np

from packer.model.state import PlacementState
from packer.rules.interference import Interference
from packer.solvers.clock import SearchClock

log = logging.getLogger(__name__)

#: Work charged per partner scored (seconds on the deterministic clock): a scan of 37,000 partners takes ~0.5 ms.
SCAN_WORK = 1.5e-8
#: Tasks tried in a row without an exchange kept before the search stops (tasks come in decreasing relief).
EXCHANGE_PATIENCE = 1000


class _Partners:
    """For every movable placed task b on its host B, what scoring an exchange with it needs, one row per dimension.

    Rows per dimension (contiguous) make one scan several times faster than (n, D) arrays. ``room`` (D, n): B's
    room with b gone; ``level`` (K, n): B's normalized sensitivity with b gone, minus 1; ``inv`` (K, n): B's inverse
    sensitivity capacity; ``excess`` (n,): B's excess now. Kept current by :meth:`refresh` for the hosts an
    exchange changes.
    """

    def __init__(self, state: PlacementState):
        p = self.p = state.p
        self.state = state
        self.tasks = np.flatnonzero(p.movable & (state.assign >= 0))
        self.row = np.full(p.n_tasks, -1)
        self.row[self.tasks] = np.arange(len(self.tasks))
        self.demand = np.ascontiguousarray(p.demand[self.tasks].T)
        self.sens = np.ascontiguousarray(p.sens_demand[self.tasks].T)
        self.current = p.current[self.tasks]
        self.eligible = np.ascontiguousarray(p.eligible[self.tasks].T)  # (architectures, n): b may run there
        n = len(self.tasks)
        self.host = np.empty(n, dtype=np.int64)
        self.room = np.empty((len(p.dims), n))
        self.level = np.empty((len(p.sens_dims), n))
        self.inv = np.empty((len(p.sens_dims), n))
        self.excess = np.empty(n)
        self.refresh(np.arange(n))

    def refresh(self, rows: np.ndarray) -> None:
        """Re-read ``rows``' hosts from the state."""
        s = self.state
        h = self.host[rows] = s.assign[self.tasks[rows]]
        self.room[:, rows] = (s.cap[h] - s.loads[h]).T + self.demand[:, rows]
        inv = self.inv[:, rows] = s.inv_sens_cap[h].T
        self.level[:, rows] = (s.sens[h].T - self.sens[:, rows]) * inv - 1.0
        self.excess[rows] = s.excess(h)

    def refresh_hosts(self, hosts: tuple[int, ...]) -> None:
        """Re-read the partners on ``hosts``."""
        tasks = np.fromiter(set().union(*(self.state.tasks_on[h] for h in hosts)), dtype=np.int64)
        rows = self.row[tasks]
        self.refresh(rows[rows >= 0])

    def change(self, a: int, budget: float) -> np.ndarray:
        """(n,) the change of summed excess (unweighted) if task ``a`` and each partner exchanged hosts; inf where the
        exchange does not fit, is not eligible, needs a host that may not receive, or exceeds the move budget."""
        s, p = self.state, self.p
        A = int(s.assign[a])
        demand, sens, cur = p.demand[a], p.sens_demand[a], int(p.current[a])
        room_a = s.cap[A] - s.loads[A] + demand
        allowed = (self.host != A) & p.eligible[a][p.host_arch[self.host]] & self.eligible[p.host_arch[A]]
        for d in range(len(demand)):
            allowed &= (demand[d] <= self.room[d]) & (self.demand[d] <= room_a[d])
        # Capacity lets a host over it today keep its load but receive nothing (its tasks may come back).
        allowed &= s.receiver[self.host] | (self.host == cur)
        if not s.receiver[A]:
            allowed &= self.current == A
        if np.isfinite(budget):
            extra = ((self.host != cur).astype(int) - int(A != cur) + (self.current != A) - (self.current != self.host))
            allowed &= s.moves + extra <= budget
        inv_a = s.inv_sens_cap[A]
        level_a = s.sens[A] * inv_a - 1.0 - sens * inv_a  # A's normalized sensitivity with a gone, minus 1
        change = -self.excess - float(s.excess(np.array([A]))[0])
        for k in range(len(sens)):
            change += np.maximum(self.level[k] + sens[k] * self.inv[k], 0.0)
            change += np.maximum(level_a[k] + self.sens[k] * inv_a[k], 0.0)
        return np.where(allowed, change, np.inf)


def relieve_by_exchange(state: PlacementState, budget: float, clock: SearchClock, report: Callable[[], None]) -> tuple[float, bool]:
    """Exchanges of two tasks between hosts, one at a time, while each lowers the objective (module doc).

    ``budget``: the plan's move budget (moves counted against today's placement). Returns (objective gain, whether
    the clock ran out first).
    """
    p = state.p
    weight = p.weight(Interference)
    if weight <= 0 or not len(p.sens_dims):
        return 0.0, False
    tasks = np.flatnonzero(p.movable & (state.assign >= 0))
    relief = state.relief(tasks)
    relieving = relief > 1e-12
    order = tasks[relieving][np.argsort(-relief[relieving], kind="stable")]
    partners = _Partners(state)
    gained, misses, kept = 0.0, 0, 0
    for k, a in enumerate(order.tolist()):
        if misses >= EXCHANGE_PATIENCE:
            break
        clock.spend(SCAN_WORK * len(partners.tasks))
        if k % 64 == 0:
            if clock.expired():
                return gained, True
            report()
        A = int(state.assign[a])
        if state.excess(np.array([A]))[0] <= 1e-12:
            continue  # earlier exchanges relieved this host
        change = partners.change(a, budget)
        i = int(np.argmin(change))
        b, B = int(partners.tasks[i]), int(partners.host[i])
        gain = _exchange(state, a, b) if weight * change[i] < -1e-9 else 0.0
        if gain > 0:
            gained += gain
            kept += 1
            misses = 0
            partners.refresh_hosts((A, B))
        else:
            misses += 1
    log.info("exchanges: %d kept, objective gain %.4f, moves %d", kept, gained, state.moves)
    return gained, False


def _exchange(state: PlacementState, a: int, b: int) -> float:
    """Exchange the hosts of tasks ``a`` and ``b`` if every rule admits each on the other's host (without the other)
    and the objective falls; the objective gain, or 0 with the state unchanged."""
    A, B = int(state.assign[a]), int(state.assign[b])
    state.move(b, A)  # b off B, to judge a there; both moves are undone before the exchange is made
    a_fits = len(state.feasible(a, np.array([B]))) > 0
    state.move(b, B)
    state.move(a, B)
    b_fits = len(state.feasible(b, np.array([A]))) > 0
    state.move(a, A)
    if not (a_fits and b_fits):
        return 0.0
    change = float(state.objective_delta(a, np.array([B]))[0])
    state.move(a, B)
    change += float(state.objective_delta(b, np.array([A]))[0])
    state.move(b, A)
    if change < -1e-9 and state.holds():
        return -change
    state.move(b, B)
    state.move(a, A)
    return 0.0
