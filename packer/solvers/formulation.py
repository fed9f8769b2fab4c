"""Index sets and coefficients of the exact placement model, shared by the CP-SAT and MILP models.

Both exact models (:mod:`packer.solvers.cpsat`, :mod:`packer.solvers.milp`) solve the
same *neighbourhood*: the placement of some *free* tasks over some hosts, starting
from a valid placement ``base`` with every other task fixed where ``base`` puts it.
A whole-instance solve is the neighbourhood "all movable tasks over all hosts,
starting from the current placement". This module computes, with NumPy, everything
the models need; each model then states the constraints in one readable place.

The rules are those of :func:`packer.model.metrics.violations`, relative to the problem's
*current* placement (not to ``base``):

* a free task may stay where ``base`` puts it, and may go to a host of the
  neighbourhood that is its current host (exempt from eligibility) or whose
  architecture is eligible for it; pinned tasks are never free;
* capacity: a host's final load ≤ capacity + ``TOLERANCE`` per dimension. A host
  that already exceeds this in ``base`` (initially overloaded) may keep its load as
  long as no task enters it; if one does, it must end within capacity. For a whole
  solve (``base`` = current) "enters" is exactly the verifier's "gains"; inside a
  neighbourhood whose ``base`` differs from the current placement the models are
  slightly stricter than the verifier (a task may not return to its still
  overloaded original host);
* moves: tasks whose final host differs from the current one, within ``max_moves``;
* spread: a (job, host) or (job, domain) pair that gains a task — some task of the
  job ends there on a host other than its current one — ends with at most the
  limit; a pair that gains nothing is unconstrained.

The objective is :func:`packer.model.metrics.evaluate`'s, rewritten as linear terms::

    objective = Σ_h open_weight[h]·occupied[h] + w.sensitivity·Σ_{h,k} excess[h,k]
                + w.moves·moves − frag_constant(problem)

(Eq. 2's fragmentation is Σ_occupied capacity − Σ_all demand; the second sum does
not depend on the placement). Terms that do not depend on the free tasks are
folded into :attr:`Formulation.constant`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from packer.model.metrics import TOLERANCE, host_loads, host_sensitivity, occupied, violations
from packer.model.problem import PlacementProblem


@dataclass(frozen=True)
class SpreadGroup:
    """One (job, host) or (job, domain) pair whose spread limit can bind.

    ``pairs``: candidate pairs (indices into the pair arrays) that put a task of the
    job in the group; ``gainers``: those that make the group *gain* (the task is not on
    its current host); ``room``: limit minus the job's fixed tasks already in the
    group; ``forced``: a fixed task already makes the group gain.
    """

    pairs: np.ndarray
    gainers: np.ndarray
    room: int
    forced: bool


@dataclass(frozen=True)
class Formulation:
    """The neighbourhood as arrays. Units: demand/slack in the problem's dimension
    units, sensitivity use as a fraction of the host's share (1.0 = all), objective
    in objective units.

    Attributes:
      problem, base: the instance and the valid starting placement (T,)
      free (F,): free task indices; hosts (M,): host indices of the neighbourhood
      pair_task, pair_host (P,): candidate (task, host) pairs, sorted by task
      task_start (F+1,): pairs of free[i] are pair_task[task_start[i]:task_start[i+1]]
      pair_base (P,) bool: the pair is the task's host in ``base``
      pair_current (P,) bool: the pair is the task's current host (staying = no move)
      always_open (H,) bool: the host holds a fixed task (occupied whatever happens)
      slack (H, D): capacity + TOLERANCE − load in ``base`` (negative = over capacity)
      sens_use (P, K), sens_fixed (H, K), sens_active (H, K) bool: normalized
        sensitivity per pair, of the fixed tasks, and where an excess is possible
      move_budget: moves left for the free tasks (None = unlimited)
      spread: the :class:`SpreadGroup` s that can bind
      constant: objective of everything outside the model (objective units)
    """

    problem: PlacementProblem
    base: np.ndarray
    free: np.ndarray
    hosts: np.ndarray
    pair_task: np.ndarray
    pair_host: np.ndarray
    task_start: np.ndarray
    pair_base: np.ndarray
    pair_current: np.ndarray
    always_open: np.ndarray
    slack: np.ndarray
    sens_use: np.ndarray
    sens_fixed: np.ndarray
    sens_active: np.ndarray
    move_budget: int | None
    spread: list[SpreadGroup]
    constant: float

    @property
    def n_pairs(self) -> int:
        return len(self.pair_task)

    @property
    def model_hosts(self) -> np.ndarray:
        """Hosts of the neighbourhood whose occupancy the model decides (no fixed task on them)."""
        return self.hosts[~self.always_open[self.hosts]]

    def pairs_by_host(self) -> dict[int, list[int]]:
        """Candidate pair indices per host."""
        order = np.argsort(self.pair_host, kind="stable")
        hosts, starts = np.unique(self.pair_host[order], return_index=True)
        return {int(h): chunk.tolist() for h, chunk in zip(hosts, np.split(order, starts[1:]))}

    def assignment(self, chosen: np.ndarray) -> np.ndarray:
        """The full placement (T,) given the chosen pairs (bool (P,), one per free task)."""
        assign = self.base.copy()
        assign[self.pair_task[chosen]] = self.pair_host[chosen]
        return assign


def frag_constant(problem: PlacementProblem) -> float:
    """``w.fragmentation · Σ_dims Σ_tasks demand / frag_scale``: the placement-independent part of Eq. 2 (objective units)."""
    demand = problem.demand[:, list(problem.frag_dims)].sum(axis=0)
    return float(problem.weights.fragmentation * (demand / problem.frag_scale).sum())


def unplaceable_tasks(problem: PlacementProblem) -> np.ndarray:
    """Indices of tasks with no host to be on: no valid current host and no eligible host that could hold them even empty.

    The current placement always satisfies :func:`packer.model.metrics.violations` (nothing
    moved, nothing gained), so a task can only fail to fit when it has no current host.
    """
    has_current = (problem.current >= 0) & (problem.current < problem.n_hosts)
    homeless = np.flatnonzero(~has_current)
    if len(homeless) == 0:
        return homeless
    fits = (problem.demand[homeless, None, :] <= problem.capacity[None, :, :] + TOLERANCE).all(axis=2)
    fits &= problem.eligible[homeless][:, problem.host_arch] & problem.movable[homeless, None]
    return homeless[~fits.any(axis=1)]


def build_formulation(
    problem: PlacementProblem,
    base: np.ndarray | None = None,
    tasks: np.ndarray | None = None,
    hosts: np.ndarray | None = None,
) -> Formulation:
    """The neighbourhood "``tasks`` over ``hosts``, starting from ``base``" (defaults: all tasks, all hosts, current placement).

    Pinned tasks among ``tasks`` stay fixed. The neighbourhood's hosts are ``hosts``
    plus the ``base`` hosts of the free tasks (a free task may always stay). Raises
    ``ValueError`` when ``base`` is not a valid placement.
    """
    p = problem
    base = p.current.copy() if base is None else np.asarray(base, dtype=np.int64).copy()
    broken = violations(p, base)
    if broken:
        raise ValueError(f"the starting placement is invalid: {'; '.join(broken)}")
    task_ids = np.arange(p.n_tasks) if tasks is None else np.unique(np.asarray(tasks, dtype=np.int64))
    subset = np.arange(p.n_hosts) if hosts is None else np.unique(np.asarray(hosts, dtype=np.int64))
    free = task_ids[p.movable[task_ids]]
    is_free = np.zeros(p.n_tasks, dtype=bool)
    is_free[free] = True
    model_hosts = np.union1d(subset, base[free])
    in_subset = np.zeros(p.n_hosts, dtype=bool)
    in_subset[subset] = True

    base_load = host_loads(p, base)
    fixed_load = base_load.copy()
    np.subtract.at(fixed_load, base[free], p.demand[free])
    always_open = np.bincount(base[~is_free], minlength=p.n_hosts) > 0
    slack = p.capacity + TOLERANCE - base_load

    # Candidate pairs: stay on the base host, or enter a host of the subset that is the
    # task's current host or eligible, where it fits next to the fixed load and where a
    # sensitive task would not meet a zero sensitivity capacity (infinite interference).
    t_grid = np.repeat(free, len(model_hosts))
    h_grid = np.tile(model_hosts, len(free))
    enter = in_subset[h_grid] & ((h_grid == p.current[t_grid]) | p.eligible[t_grid, p.host_arch[h_grid]])
    enter &= (p.demand[t_grid] <= p.capacity[h_grid] + TOLERANCE - fixed_load[h_grid]).all(axis=1)
    if p.sens_dims:
        enter &= ~((p.sens_demand[t_grid] > 0) & (p.sens_capacity[h_grid] == 0)).any(axis=1)
    keep = enter | (h_grid == base[t_grid])
    pair_task, pair_host = t_grid[keep], h_grid[keep]
    task_start = np.searchsorted(pair_task, free, side="left")
    task_start = np.append(task_start, len(pair_task))
    pair_base = pair_host == base[pair_task]
    pair_current = pair_host == p.current[pair_task]

    sens_use, sens_fixed, sens_active = _sensitivity(p, is_free, base, pair_task, pair_host, model_hosts)

    moved_fixed = int((base[~is_free] != p.current[~is_free]).sum())
    can_stay = np.zeros(p.n_tasks, dtype=bool)
    can_stay[pair_task[pair_current]] = True
    forced_moves = int((~can_stay[free]).sum())
    budget = None if p.max_moves is None else p.max_moves - moved_fixed - forced_moves

    spread = []
    if p.spread_host is not None:
        spread += _spread_groups(p, p.spread_host, base, is_free, pair_task, pair_host, np.arange(p.n_hosts))
    if p.spread_domain is not None:
        spread += _spread_groups(p, p.spread_domain, base, is_free, pair_task, pair_host, p.domain)

    outside = np.ones(p.n_hosts, dtype=bool)
    outside[model_hosts] = False
    ow = p.open_weight
    w = p.weights
    excess_outside = 0.0
    if p.sens_dims:
        excess_outside = float(np.clip(host_sensitivity(p, base)[outside] - 1.0, 0.0, None).sum())
    constant = (
        float(ow[outside & occupied(p, base)].sum() + ow[~outside & always_open].sum())
        + w.sensitivity * excess_outside
        + w.moves * (moved_fixed + forced_moves)
        - frag_constant(p)
    )
    return Formulation(
        problem=p,
        base=base,
        free=free,
        hosts=model_hosts,
        pair_task=pair_task,
        pair_host=pair_host,
        task_start=task_start,
        pair_base=pair_base,
        pair_current=pair_current,
        always_open=always_open,
        slack=slack,
        sens_use=sens_use,
        sens_fixed=sens_fixed,
        sens_active=sens_active,
        move_budget=budget,
        spread=spread,
        constant=constant,
    )


def _sensitivity(p: PlacementProblem, is_free: np.ndarray, base: np.ndarray, pair_task: np.ndarray, pair_host: np.ndarray, model_hosts: np.ndarray):
    """Normalized sensitivity per pair and of the fixed tasks per host; where an excess over 1 is possible.

    Dimensions with infinite capacity never exceed; zero capacity is kept out of the
    model by the candidate rule (see :func:`build_formulation`).
    """
    k = len(p.sens_dims)
    cap = p.sens_capacity
    modelled = np.isfinite(cap) & (cap > 0)
    safe = np.where(modelled, cap, 1.0)
    sens_use = np.where(modelled[pair_host], p.sens_demand[pair_task] / safe[pair_host], 0.0) if k else np.zeros((len(pair_task), 0))
    sens_fixed = np.zeros((p.n_hosts, k))
    if k:
        np.add.at(sens_fixed, base[~is_free], p.sens_demand[~is_free])
        sens_fixed = np.where(modelled, sens_fixed / safe, 0.0)
    reach = sens_fixed.copy()
    np.add.at(reach, pair_host, sens_use)
    in_model = np.zeros(p.n_hosts, dtype=bool)
    in_model[model_hosts] = True
    active = (reach > 1.0) & modelled & in_model[:, None] & (p.weights.sensitivity > 0)
    return sens_use, sens_fixed, active


def _spread_groups(p: PlacementProblem, limit: int, base: np.ndarray, is_free: np.ndarray, pair_task: np.ndarray, pair_host: np.ndarray, group_of_host: np.ndarray) -> list[SpreadGroup]:
    """Spread groups (job × host, or job × domain via ``group_of_host``) whose limit can bind."""
    n_groups = int(group_of_host.max()) + 1 if len(group_of_host) else 0
    fixed = np.flatnonzero(~is_free & (group_of_host[base] >= 0))
    fixed_key = p.job[fixed] * n_groups + group_of_host[base[fixed]]
    fixed_keys, fixed_count = np.unique(fixed_key, return_counts=True)
    forced_keys = np.unique(fixed_key[base[fixed] != p.current[fixed]])

    valid = np.flatnonzero(group_of_host[pair_host] >= 0)
    key = p.job[pair_task[valid]] * n_groups + group_of_host[pair_host[valid]]
    order = np.argsort(key, kind="stable")
    keys, starts, sizes = np.unique(key[order], return_index=True, return_counts=True)
    already = np.zeros(len(keys), dtype=np.int64)
    if len(fixed_keys):
        pos = np.clip(np.searchsorted(fixed_keys, keys), 0, len(fixed_keys) - 1)
        hit = fixed_keys[pos] == keys
        already[hit] = fixed_count[pos[hit]]
    forced = np.isin(keys, forced_keys)
    # A group binds only if it can gain and could end above the limit; a free task
    # counts once however many of the group's hosts it may use.
    task_in_group = np.unique(key * p.n_tasks + pair_task[valid])
    tasks_per_group = np.unique(task_in_group // p.n_tasks, return_counts=True)[1]
    gains = ~(pair_host[valid] == p.current[pair_task[valid]])
    groups = []
    for g in np.flatnonzero(already + tasks_per_group > limit):
        members = valid[order[starts[g] : starts[g] + sizes[g]]]
        gainers = members[gains[order[starts[g] : starts[g] + sizes[g]]]]
        if forced[g] or len(gainers):
            groups.append(SpreadGroup(pairs=members, gainers=gainers, room=int(limit - already[g]), forced=bool(forced[g])))
    return groups
