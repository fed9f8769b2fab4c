"""The placement problem: one solver-agnostic instance — data, rules and goals.

Every solver (exact CP-SAT and PuLP models, the scalable engine, the leximin solvers,
the baselines) and the verifier consume a :class:`PlacementProblem`: plain arrays (no
Parquet, no pandas) plus the problem's **rules** (hard constraints) and **goals**
(weighted objective terms), each a plugin of :mod:`packer.rules`.
:func:`packer.model.build.build_problem` builds one from a trace.

Units (ARCHITECTURE.md, "Units"). CPU is expressed in *reference cores*: cores of
the fleet's reference architecture (score 1.0; Broadwell18 in the paper's catalog).
A task using ``c`` cores on its current host of architecture A needs
``c · (score_A/cores_A) / (score_ref/cores_ref)`` reference cores anywhere, and a
host of architecture B offers ``cores_B · (score_B/cores_B) / (score_ref/cores_ref)``.
Memory (GiB), network (Gbps) and any other dimension do not change with the
architecture. Sensitivity (colocation paper, Eq. 1) is a further set of *soft*
dimensions: on the default ``need`` basis task ``t`` uses ``s_t,k · g_k(M_t) · CU_t``
of a host's ``g_k(A) · score_A`` (``CU_t`` its requested compute units), on the
``host`` basis ``s_t,k · g_k(M_t)`` of ``g_k(A)`` (:mod:`packer.characterization.normalize`), so the
paper's ``Σ_t Sensitivity(t, h) ≤ 1`` is ``Σ_t sens_demand[t,k] ≤ sens_capacity[h,k]``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TypeVar

import numpy as np

from packer.model.rpf import TaskGoals

R = TypeVar("R")


@dataclass(frozen=True)
class PlacementProblem:
    """A placement instance. ``T`` tasks, ``H`` hosts, ``D`` hard dimensions, ``K`` soft sensitivity dimensions.

    Attributes (arrays are NumPy):
      task_ids (T,), host_ids (H,), arch_names (A,)
      dims (D,) names; demand (T, D) and capacity (H, D): cpu in reference cores,
        mem GiB, net Gbps, others in the trace's unit
      frag_dims: indices of ``dims`` that count toward fragmentation (cpu and mem, as Eq. 2)
      sens_dims (K,) names; sens_demand (T, K), sens_capacity (H, K) (see module doc)
      host_arch (H,) index into arch_names; cost (H,) cost units per occupied host
      eligible (T, A) bool: task may run on the architecture
      current (T,) index of the task's current host; movable (T,) bool
      job (T,) job code; domain (H,) failure-domain code (-1 if none)
      rules: the hard constraints (:class:`packer.rules.base.Rule`), intrinsic ones included
      goals: the weighted objective terms (:class:`packer.rules.base.Goal`), minimized as their sum
      fair: the ``fair`` goal: leximin relative performance decides the placement (the goals are only reported)
      config: the configuration preset's name
      rp_goals: per-task relative-performance goals (:class:`packer.model.rpf.TaskGoals`; None = all default)
      task_class: (T,) workload class label per task (characterization), or None
      sens_basis: what a sensitivity score is a fraction of, ``need`` or ``host`` (:mod:`packer.characterization.normalize`)
      job_ids: (T,) the job id of each task as the trace names it (``job`` holds their codes), or None
      context: options that describe where the problem came from (file names, ...), for the summary

    Raises ``ValueError`` at construction for arrays of the wrong shape and for
    negative or non-finite demands and capacities (infinite sensitivity capacity
    means "not checked" and is allowed).
    """

    task_ids: np.ndarray
    host_ids: np.ndarray
    arch_names: np.ndarray
    dims: tuple[str, ...]
    demand: np.ndarray
    capacity: np.ndarray
    frag_dims: tuple[int, ...]
    sens_dims: tuple[str, ...]
    sens_demand: np.ndarray
    sens_capacity: np.ndarray
    host_arch: np.ndarray
    cost: np.ndarray
    eligible: np.ndarray
    current: np.ndarray
    movable: np.ndarray
    job: np.ndarray
    domain: np.ndarray
    rules: tuple = ()
    goals: tuple = ()
    fair: bool = False
    config: str = ""
    rp_goals: TaskGoals | None = None
    task_class: np.ndarray | None = None
    sens_basis: str = "need"
    job_ids: np.ndarray | None = None
    context: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        t, h, d, k = len(self.task_ids), len(self.host_ids), len(self.dims), len(self.sens_dims)
        shapes = {"demand": (self.demand, (t, d)), "capacity": (self.capacity, (h, d)), "sens_demand": (self.sens_demand, (t, k)),
                  "sens_capacity": (self.sens_capacity, (h, k)), "host_arch": (self.host_arch, (h,)), "cost": (self.cost, (h,)),
                  "eligible": (self.eligible, (t, len(self.arch_names))), "current": (self.current, (t,)),
                  "movable": (self.movable, (t,)), "job": (self.job, (t,)), "domain": (self.domain, (h,))}
        wrong = [f"{name} has shape {np.shape(a)}, expected {shape}" for name, (a, shape) in shapes.items() if np.shape(a) != shape]
        if wrong:
            raise ValueError("invalid placement problem: " + "; ".join(wrong))
        bad = [name for name, a in (("demand", self.demand), ("capacity", self.capacity), ("sens_demand", self.sens_demand), ("cost", self.cost))
               if a.size and not (np.isfinite(a).all() and (a >= 0).all())]
        if self.sens_capacity.size and ((self.sens_capacity < 0) | np.isnan(self.sens_capacity)).any():
            bad.append("sens_capacity")
        if bad:
            raise ValueError(f"invalid placement problem: {', '.join(bad)} must be finite and >= 0")

    @property
    def n_tasks(self) -> int:
        return len(self.task_ids)

    @property
    def n_hosts(self) -> int:
        return len(self.host_ids)

    def rule(self, kind: type[R]) -> R | None:
        """The problem's rule of class ``kind`` (the first), or None."""
        return next((r for r in self.rules if isinstance(r, kind)), None)

    def goal(self, kind: type[R]) -> R | None:
        """The problem's goal of class ``kind`` (the first), or None."""
        return next((g for g in self.goals if isinstance(g, kind)), None)

    def weight(self, kind: type) -> float:
        """The weight of the problem's goal of class ``kind``; 0 when it has none."""
        goal = self.goal(kind)
        return 0.0 if goal is None else goal.weight

    @property
    def max_moves(self) -> int | None:
        """The move budget: the tightest ``move_limit`` of the rules (:class:`packer.rules.budget.MoveBudget`), None when unlimited."""
        limits = [rule.move_limit for rule in self.rules if rule.move_limit is not None]
        return min(limits) if limits else None

    @property
    def pinned_hosts(self) -> np.ndarray:
        """(H,) bool: hosts that hold a pinned task today, and so stay open in every plan."""
        return np.bincount(self.current[~self.movable], minlength=self.n_hosts) > 0

    @property
    def primary_cost(self) -> np.ndarray:
        """(H,) weight of the primary goal per occupied host (:class:`packer.rules.cost.Cost`: cost units or 1); the fleet's cost without one."""
        return next((goal.open_cost(self) for goal in self.goals if goal.primary), self.cost)

    @property
    def frag_scale(self) -> np.ndarray:
        """Mean host capacity per fragmentation dimension (divides Eq. 2's F per dimension)."""
        caps = self.capacity[:, list(self.frag_dims)]
        mean = caps.mean(axis=0) if len(caps) else np.ones(len(self.frag_dims))
        return np.where(mean > 0, mean, 1.0)

    @property
    def open_weight(self) -> np.ndarray:
        """(H,) objective weight of occupying each host: the summed open costs of the goals that have one."""
        costs = [c for c in (g.open_cost(self) for g in self.goals) if c is not None]
        return np.sum(costs, axis=0) if costs else np.zeros(self.n_hosts)

    def with_(self, **changes) -> "PlacementProblem":
        """A copy with some fields replaced (e.g. ``problem.with_(rules=...)``)."""
        return replace(self, **changes)

    def with_rule(self, rule, replaces: type | None = None) -> "PlacementProblem":
        """A copy with ``rule`` instead of the rules of class ``replaces`` (default: ``type(rule)``); ``rule=None`` removes them."""
        kind = replaces or type(rule)
        kept = tuple(r for r in self.rules if not isinstance(r, kind))
        return replace(self, rules=kept if rule is None else (*kept, rule))

    def with_goal(self, goal) -> "PlacementProblem":
        """A copy with ``goal`` instead of the goals of its class."""
        return replace(self, goals=(*(g for g in self.goals if not isinstance(g, type(goal))), goal))
