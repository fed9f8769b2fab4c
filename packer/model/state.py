"""One placement state that every heuristic runs over: incremental loads, counts and each rule's tallies.

:class:`PlacementState` holds a placement of a :class:`~packer.model.problem.PlacementProblem`
(host index per task, -1 for a task not placed yet) with per-host loads, summed
sensitivity demand, task counts and task sets kept up to date by :meth:`move`, and
each rule's own tallies (:meth:`packer.rules.base.Rule.attach`). The scalable engine,
the leximin greedy and the baseline policies all move tasks through it:

* :meth:`feasible` — the hosts a task may move to now, the intersection of every
  rule's :meth:`~packer.rules.base.Rule.admits`;
* :meth:`holds` — whether the whole state keeps every rule (global guards such as
  the tasks-at-risk count, checked after a batch of moves);
* :meth:`objective_delta` — the change of the weighted objective if a task moved to
  each of some hosts, summed over the problem's goals.

Units: loads in the problem's dimension units, sensitivity demand in the problem's
sensitivity units (:mod:`packer.model.problem`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from packer.model.metrics import TOLERANCE, initially_overloaded
from packer.model.problem import PlacementProblem


def inverse(capacity: np.ndarray) -> np.ndarray:
    """1/capacity, 0 where the capacity is 0 (nothing can use such a dimension there)."""
    with np.errstate(divide="ignore"):
        return np.where(capacity > 0, 1.0 / np.maximum(capacity, 1e-12), 0.0)


class PlacementState:
    """A placement with incrementally maintained loads, counts and rule tallies (see the module doc).

    Attributes: ``p`` the problem; ``assign`` (T,) host per task (-1: not placed);
    ``loads`` (H, D); ``sens`` (H, K) summed sensitivity demand; ``count`` (H,) tasks per
    host; ``tasks_on`` per host the set of its tasks; ``moves`` placed tasks off their
    current host; ``receiver`` (H,) hosts that may receive tasks (not over capacity in
    the current placement); ``cap`` capacity + tolerance; ``inv_cap``, ``inv_sens_cap``
    inverses (0 where a capacity is 0); ``tally`` each rule's tallies.
    """

    def __init__(self, problem: PlacementProblem, assign: np.ndarray):
        p = self.p = problem
        self.assign = np.asarray(assign, dtype=np.int64).copy()
        placed = np.flatnonzero(self.assign >= 0)
        self.loads = np.zeros((p.n_hosts, len(p.dims)))
        np.add.at(self.loads, self.assign[placed], p.demand[placed])
        self.sens = np.zeros((p.n_hosts, len(p.sens_dims)))
        np.add.at(self.sens, self.assign[placed], p.sens_demand[placed])
        self.count = np.bincount(self.assign[placed], minlength=p.n_hosts)
        self.moves = int((self.assign[placed] != p.current[placed]).sum())
        self.receiver = ~initially_overloaded(p)
        self.cap = p.capacity + TOLERANCE
        self.inv_cap = inverse(p.capacity)
        self.inv_sens_cap = inverse(p.sens_capacity)
        order = np.argsort(self.assign[placed], kind="stable")
        hosts, starts = np.unique(self.assign[placed][order], return_index=True)
        self.tasks_on: list[set[int]] = [set() for _ in range(p.n_hosts)]
        for h, chunk in zip(hosts.tolist(), np.split(placed[order], starts[1:])):
            self.tasks_on[h] = set(chunk.tolist())
        self.open_cost = p.open_weight
        self.tally: dict[Any, Any] = {}
        for rule in p.rules:
            tally = rule.attach(self)
            if tally is not None:
                self.tally[rule] = tally

    def move(self, t: int, to: int) -> None:
        """Put task ``t`` on host ``to`` (from its host, or from nowhere if it is not placed yet)."""
        p, frm = self.p, int(self.assign[t])
        if frm == to:
            return
        if frm >= 0:
            self.loads[frm] -= p.demand[t]
            self.count[frm] -= 1
            self.tasks_on[frm].discard(t)
            if len(p.sens_dims):
                self.sens[frm] -= p.sens_demand[t]
        self.loads[to] += p.demand[t]
        if len(p.sens_dims):
            self.sens[to] += p.sens_demand[t]
        self.count[to] += 1
        self.tasks_on[to].add(t)
        self.moves += int(to != p.current[t]) - int(frm >= 0 and frm != p.current[t])
        self.assign[t] = to
        for rule in p.rules:
            rule.on_move(self, t, frm, to)

    def feasible(self, t: int, hosts: np.ndarray) -> np.ndarray:
        """The subset of ``hosts`` (indices) task ``t`` may move to now: every rule admits it there."""
        for rule in self.p.rules:
            if not len(hosts):
                break
            hosts = hosts[rule.admits(self, t, hosts)]
        return hosts

    def holds(self) -> bool:
        """Whether every rule holds for the whole state (global guards, checked after a batch of moves)."""
        return all(rule.holds(self) for rule in self.p.rules)

    def preference(self, t: int, hosts: np.ndarray) -> np.ndarray | None:
        """(n,) summed rule preferences for ``hosts`` (lower first), or None when no rule has one."""
        keys = [k for k in (rule.preference(self, t, hosts) for rule in self.p.rules) if k is not None]
        return np.sum(keys, axis=0) if keys else None

    def objective_delta(self, t: int, hosts: np.ndarray) -> np.ndarray:
        """(n,) change of the weighted objective if task ``t`` moved from where it is to each of ``hosts``.

        Goals that are a cost per occupied host (:meth:`packer.rules.base.Goal.open_cost`)
        are scored here: opening an empty host costs its open cost, emptying the source
        host saves the source's; the others add their own :meth:`~packer.rules.base.Goal.delta`.
        """
        frm = int(self.assign[t])
        delta = np.where(self.count[hosts] == 0, self.open_cost[hosts], 0.0)
        if frm >= 0 and self.count[frm] == 1:
            delta = delta - self.open_cost[frm]
        for goal in self.p.goals:
            delta = delta + goal.delta(self, t, hosts)
        return delta

    def tie_break_delta(self, t: int, hosts: np.ndarray) -> np.ndarray:
        """(n,) the part of :meth:`objective_delta` from tie-break goals (:attr:`packer.rules.base.Goal.tie_break`)."""
        return sum((goal.delta(self, t, hosts) for goal in self.p.goals if goal.tie_break), np.zeros(len(hosts)))

    def excess(self, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Summed sensitivity excess over 1 of hosts ``rows`` (Eq. 4 per host, unweighted)."""
        if not len(self.p.sens_dims):
            return np.zeros(self.p.n_hosts)[rows]
        return np.clip(self.sens[rows] * self.inv_sens_cap[rows] - 1.0, 0.0, None).sum(axis=-1)

    def relief(self, tasks: np.ndarray) -> np.ndarray:
        """(n,) the summed sensitivity excess over 1 (unweighted, as :meth:`excess`) each of ``tasks`` removes from its host by leaving it."""
        h = self.assign[tasks]
        here = self.sens[h] * self.inv_sens_cap[h]
        own = self.p.sens_demand[tasks] * self.inv_sens_cap[h]
        return (np.clip(here - 1.0, 0.0, None) - np.clip(here - own - 1.0, 0.0, None)).sum(axis=1)

    def room_share(self, hosts: np.ndarray | slice = slice(None)) -> np.ndarray:
        """(n, D) room left per dimension on ``hosts``, as a share of capacity (the tolerance counted as room)."""
        return (self.cap[hosts] - self.loads[hosts]) * self.inv_cap[hosts]

    def load_share(self, hosts: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Largest share of capacity used in any dimension, per host (fraction)."""
        return (self.loads[hosts] * self.inv_cap[hosts]).max(axis=-1) if len(self.p.dims) else np.zeros(self.p.n_hosts)[hosts]
