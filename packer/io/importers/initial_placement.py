"""An initial placement by requests for traces that do not say where tasks run.

Public traces often list tasks and machines but no assignment (Alibaba openb) or
no machines at all (Bitbrains). The importers then build a *current placement*
with first-fit decreasing: tasks in a caller-chosen decreasing order, each onto
the first eligible host (in host order) with room for its request in every
dimension. It is a plausible starting point for repacking, not an optimized one.

Real task lists collapse into few distinct demand vectors, so the placement works
on groups of identical tasks (same demand, same eligibility class): for identical
items first-fit fills hosts in order, each with as many copies as fit, so a group
is placed at once with a cumulative sum over hosts. The loop runs over groups,
never over tasks.
"""
from __future__ import annotations

import numpy as np

#: Tolerance for "fits": sums of float requests may exceed a capacity by rounding only.
_FIT_TOLERANCE = 1e-9


def first_fit_decreasing(
    demand: np.ndarray,
    capacity: np.ndarray,
    order: np.ndarray,
    task_class: np.ndarray | None = None,
    class_hosts: np.ndarray | None = None,
) -> np.ndarray:
    """Host index per task (``-1`` where no host has room) by grouped first-fit decreasing.

    ``demand`` is (tasks, dims) and ``capacity`` (hosts, dims) in the same units per
    dimension (e.g. cores, GiB, GPUs). ``order`` lists task indices from first to
    place to last (identical tasks must have identical sort keys, which any key
    computed from the demand and class guarantees). ``task_class`` (tasks,) and
    ``class_hosts`` (classes, hosts, bool) restrict tasks to eligible hosts; by
    default every host is eligible. ``capacity`` is the room left, so calling
    again with the residual places more tasks on top of an earlier placement.
    """
    demand = np.asarray(demand, dtype=float)
    residual = np.array(capacity, dtype=float)
    n_tasks, n_hosts = len(demand), len(residual)
    host_of = np.full(n_tasks, -1, dtype=np.int64)
    if n_tasks == 0 or n_hosts == 0:
        return host_of
    if task_class is None:
        task_class = np.zeros(n_tasks, dtype=np.int64)
        class_hosts = np.ones((1, n_hosts), dtype=bool)

    keys = np.column_stack([demand, task_class.astype(float)])
    _, group = np.unique(keys, axis=0, return_inverse=True)
    group = group.ravel()
    group_in_order = group[order]
    by_group = order[np.argsort(group_in_order, kind="stable")]
    starts = np.searchsorted(group[by_group], np.arange(group.max() + 2))
    _, first_seen = np.unique(group_in_order, return_index=True)

    for g in group_in_order[np.sort(first_seen)]:
        members = by_group[starts[g] : starts[g + 1]]
        need = demand[members[0]]
        positive = need > 0
        if positive.any():
            copies = np.floor((residual[:, positive] / need[positive]).min(axis=1) + _FIT_TOLERANCE)
            copies = np.clip(copies, 0, len(members))
        else:
            copies = np.full(n_hosts, float(len(members)))
        copies[~class_hosts[task_class[members[0]]]] = 0
        filled = np.cumsum(copies)
        placed = int(min(len(members), filled[-1]))
        if placed == 0:
            continue
        hosts = np.searchsorted(filled, np.arange(placed), side="right")
        host_of[members[:placed]] = hosts
        residual -= np.bincount(hosts, minlength=n_hosts)[:, None] * need
    return host_of

