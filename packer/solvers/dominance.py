"""Hosts that an empty host dominates, and moving their tasks onto it.

Host g dominates host h when keeping g open costs no more (primary cost) and g has at least
h's capacity in every dimension and at least its sensitivity capacity, more in some. Whatever
fits on h fits on g, so the tasks of an open h can all move to an empty g at no cost, leaving
room where h had none. Paper-shaped fleets have such architectures: Broadwell20 (63.36 cores,
256 GiB, 12.5 Gb/s, cost 2) is dominated by Skylake16 (80.64, 256, 12.5, cost 2), Haswell12
by both, Broadwell18 by Skylake14. Opening the smaller host saves fragmentation only, and
takes away room the packing could use: the 300-s full repack of 37,000 tasks under P99 kept
202 Broadwell20 hosts beyond those holding pinned tasks, where the bound's LP opens none, their
tasks swapped there whole from Skylake16 hosts by the engine's emptying passes
(benchmarks/RESULTS.md, issue 11, twenty-fifth session).
"""
from __future__ import annotations

import numpy as np

from packer.model.problem import PlacementProblem
from packer.model.state import PlacementState

#: Empty hosts tried per dominated host before it is left as it is.
CANDIDATES = 3


def dominance(problem: PlacementProblem) -> tuple[np.ndarray, np.ndarray]:
    """Host kinds and which dominate which: ``kind`` (H,) each host's kind (hosts of equal primary cost,
    capacity and sensitivity capacity are of one kind) and ``dominates`` (K, K) bool, ``dominates[j, i]``
    when kind j dominates kind i (no dearer, at least as large everywhere, larger somewhere)."""
    p = problem
    rows = np.column_stack([p.primary_cost, p.capacity, p.sens_capacity])
    kinds, kind = np.unique(rows, axis=0, return_inverse=True)
    cost, size = kinds[:, 0], kinds[:, 1:]
    no_dearer = cost[:, None] <= cost[None, :]
    at_least = (size[:, None, :] >= size[None, :, :]).all(axis=2)
    larger = (size[:, None, :] > size[None, :, :]).any(axis=2)
    return kind.ravel(), no_dearer & at_least & larger


def dominated_open_hosts(state: PlacementState) -> np.ndarray:
    """Open hosts without a pinned task that the kind of some empty receiving host dominates (indices, ascending)."""
    return _dominated_open_hosts(state, *dominance(state.p))


def _dominated_open_hosts(state: PlacementState, kind: np.ndarray, dominates: np.ndarray) -> np.ndarray:
    empty_kinds = np.zeros(len(dominates), dtype=bool)
    empty_kinds[kind[(state.count == 0) & state.receiver]] = True
    return np.flatnonzero((state.count > 0) & ~state.p.pinned_hosts & dominates[empty_kinds].any(axis=0)[kind])


def move_off_dominated_hosts(state: PlacementState, price: np.ndarray) -> int:
    """Move all the tasks of each open host without a pinned task onto an empty receiving host that
    dominates it, the one of lowest ``price`` (H,) first (e.g. :func:`packer.solvers.ffd.capacity_price`),
    where every rule admits each task there and holds after; returns how many hosts were moved off.

    Each host is one batch of moves: where a rule refuses a task, the batch is undone and the next
    candidate tried (at most :data:`CANDIDATES` per host). The primary cost does not change; goals
    that price spare capacity (fragmentation) may rise a little.
    """
    kind, dominates = dominance(state.p)
    empty = (state.count == 0) & state.receiver
    moved = 0
    for h in _dominated_open_hosts(state, kind, dominates).tolist():  # a few hundred on a paper-scale fleet
        targets = np.flatnonzero(empty & dominates[kind, kind[h]])
        for g in targets[np.argsort(price[targets], kind="stable")][:CANDIDATES].tolist():
            if _move_host(state, h, g):
                empty[g] = False
                moved += 1
                break
    return moved


def _move_host(state: PlacementState, h: int, g: int) -> bool:
    """Move every task of host ``h`` to host ``g`` if each is admitted and the rules hold after; else change nothing."""
    tasks = sorted(state.tasks_on[h])
    done = []
    for t in tasks:
        if not len(state.feasible(t, np.array([g]))):
            break
        state.move(t, g)
        done.append(t)
    if len(done) == len(tasks) and state.holds():
        return True
    for t in done:
        state.move(t, h)
    return False
