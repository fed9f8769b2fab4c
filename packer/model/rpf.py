"""Relative performance functions (RPFs; Carrera et al., Sections 3-4): how far each task is from its goal.

A relative performance (RP) is dimensionless: 0 means exactly at goal, positive
above it, negative below it. Every RP packer computes lies in
[:data:`RP_FLOOR`, :data:`RP_CAP`].

Paper equations (``004_86f47ebad560781b.txt``), as elementary vectorized functions:

* Eq. 1, transactional: ``u = (τ − t) / τ`` for a response-time goal τ and a mean
  response time t (:func:`transactional_rp`);
* Eq. 2, batch: ``u = (τ − t) / (τ − τ_start)`` for a completion-time goal τ, a desired
  start τ_start and a completion time t (:func:`batch_rp`);
* Eq. 3, the speed a job needs for RP u: ``ω(u) = α / (t(u) − t_now)`` with
  ``t(u) = τ − u·(τ − τ_start)`` (:func:`batch_speed_for`);
* Eq. 4-5, the matrices W, V sampled at target RPs, capped at the job's ``u_max``
  (:func:`rpf_matrices`); Eq. 6, the RP of every job when the jobs share an aggregate
  speed ω_g (:func:`hypothetical_rp`).

Tasks of a placement (:func:`relative_performance`). The task's **CPU speed** ω on
host h (reference cores, see :mod:`packer.model.problem`) follows a work-conserving
proportional share, as CPU shares proportional to each task's limit give it: the host's
CPU capacity C_h is shared in proportion to the tasks' CPU limits d (``ω = d·C_h/L_h``,
L_h = Σ limits on h), so a task gets at least its limit on a host within capacity and
more on a host with spare CPU, up to its **maximum speed** (its request, or its limit
if that is larger). Spare CPU left by tasks at their maximum speed is not redistributed
(a conservative one-pass share). Three kinds of task:

* **transactional** (``rt_goal_s`` given): Eq. 1 with t the mean response time of an
  M/M/1 processor-sharing server: requests arrive at ``request_rate`` λ per second and
  need ``service_core_s`` s core-seconds each, served at ω cores, so
  ``t = s / (ω − λ·s)`` (infinite, i.e. RP at the floor, when ω ≤ λ·s);
* **batch** (``deadline_s`` given): Eq. 2 with completion time ``t = work_core_s / ω``
  seconds from now; at the maximum speed this is Carrera's ``u_max``, which the RP
  never exceeds (Eq. 4-5);
* **default** (every other task, what most traces contain): *sensitivity headroom*.
  A task's normalized sensitivity s_k on its host (colocation paper, Eq. 1) is the
  share of resource k it must be guaranteed. Its RP is its host's headroom in units of
  its own need, minimized over the dimensions in which it is sensitive::

      u = min_k (1 − S_k) / s_k,   S_k = Σ_{tasks on h} s_k

  so ``u ≥ 0`` exactly when every sensitivity sum of its host is within 1 (the
  condition of Eq. 2's soft constraint), and below 0 ``−u`` is the host's Eq. 4
  interference (its excess ``S_k − 1``) measured in the task's own need. There is
  no clamp at −1 ("the others take it all"): a host three times over its limit must
  rank below one just over it, or leximin could not tell which crowded host to relieve
  first; only :data:`RP_FLOOR` bounds it. A task with no sensitivity
  (all s_k = 0, or no scores) is never limited: ``u = RP_CAP``. When the problem has
  no sensitivity dimensions (presets without "sens"), the same formula is applied to
  the task's share of its host's CPU (``s = d / C_h``): CPU headroom.

Load thresholds (:func:`rp_thresholds`). Every RP above falls as its host's load
rises, so "task t on host h has RP ≥ X" is "the host's *RP load* is at most a
threshold" — linear, which is how the exact models and the engine enforce RP floors.
The RP load of a host is a vector: column 0 its CPU load (reference cores), then one
column per sensitivity dimension (summed sensitivity demand, :mod:`packer.model.problem`).

Trace columns (optional, ``tasks.parquet``; README "trace format"): ``rt_goal_s``,
``request_rate``, ``service_core_s`` (transactional), ``deadline_s``,
``goal_start_s``, ``work_core_s`` (batch). Times in seconds relative to the moment
of planning; core-seconds on the task's current host's architecture (converted to
reference cores like the CPU limits).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # problem.py imports this module
    from packer.model.problem import PlacementProblem

#: Lowest RP reported (a task infinitely far from its goal, e.g. a saturated server).
RP_FLOOR = -10.0
#: Highest RP (Eq. 1 and Eq. 2 cannot exceed 1 for t ≥ 0 and t ≥ τ_start).
RP_CAP = 1.0
#: Default resolution of RP comparisons (leximin ties, see :mod:`packer.solvers.leximin`).
RP_RESOLUTION = 0.01
#: Tolerance (RP units) of RP floors checked on a placement.
RP_TOLERANCE = 1e-6

KIND_DEFAULT, KIND_TRANSACTIONAL, KIND_BATCH = 0, 1, 2
KIND_NAMES = ("default", "transactional", "batch")

#: Optional goal columns of tasks.parquet and their meaning (units).
GOAL_COLUMNS = {
    "rt_goal_s": "transactional: mean response-time goal τ, seconds",
    "request_rate": "transactional: request arrival rate λ, requests per second",
    "service_core_s": "transactional: CPU per request, core-seconds on the current host's architecture",
    "deadline_s": "batch: completion-time goal τ, seconds from now",
    "goal_start_s": "batch: desired start τ_start, seconds from now (≤ deadline_s; may be negative)",
    "work_core_s": "batch: remaining work, core-seconds on the current host's architecture",
}
TRANSACTIONAL_COLUMNS = ("rt_goal_s", "request_rate", "service_core_s")
BATCH_COLUMNS = ("deadline_s", "goal_start_s", "work_core_s")


# --- Carrera's equations -------------------------------------------------------------------------


def transactional_rp(response_time, goal) -> np.ndarray:
    """Eq. 1: ``(τ − t) / τ`` (seconds in, dimensionless out)."""
    return (np.asarray(goal, dtype=float) - np.asarray(response_time, dtype=float)) / np.asarray(goal, dtype=float)


def mm1_response_time(speed, rate, service) -> np.ndarray:
    """Mean response time (s) of an M/M/1 processor-sharing server: ``s / (ω − λ·s)``; inf when saturated.

    ``speed`` ω in cores, ``rate`` λ in requests/s, ``service`` s in core-seconds per request.
    """
    speed, rate, service = (np.asarray(v, dtype=float) for v in (speed, rate, service))
    spare = speed - rate * service
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(spare > 0, service / np.where(spare > 0, spare, 1.0), np.inf)


def transactional_speed_for(u, rate, service, goal) -> np.ndarray:
    """Inverse of Eq. 1 with M/M/1: the speed (cores) giving RP ``u``: ``λ·s + s / (τ·(1 − u))``; inf for u ≥ 1."""
    u, rate, service, goal = (np.asarray(v, dtype=float) for v in (u, rate, service, goal))
    target = goal * (1.0 - u)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(target > 0, rate * service + service / np.where(target > 0, target, 1.0), np.inf)


def batch_rp(completion, goal, goal_start) -> np.ndarray:
    """Eq. 2: ``(τ − t) / (τ − τ_start)`` (seconds in, dimensionless out)."""
    goal = np.asarray(goal, dtype=float)
    return (goal - np.asarray(completion, dtype=float)) / (goal - np.asarray(goal_start, dtype=float))


def batch_speed_for(u, work, now, goal, goal_start) -> np.ndarray:
    """Eq. 3: the average speed ``α / (t(u) − t_now)`` to reach RP ``u``; inf when t(u) ≤ t_now.

    ``work`` α in cycles (or core-seconds), times in seconds: speed in cycles (cores) per second.
    """
    u, work, now, goal, goal_start = (np.asarray(v, dtype=float) for v in (u, work, now, goal, goal_start))
    left = goal - u * (goal - goal_start) - now
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(left > 0, work / np.where(left > 0, left, 1.0), np.inf)


def batch_max_rp(work, max_speed, now, goal, goal_start) -> np.ndarray:
    """``u_max``: the RP of a job that runs at its maximum speed from ``now`` on (Eq. 2)."""
    return batch_rp(np.asarray(now, dtype=float) + np.asarray(work, dtype=float) / np.asarray(max_speed, dtype=float), goal, goal_start)


def rpf_matrices(u_targets, work, max_speed, now, goal, goal_start) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 4-5: W (R, M) speeds and V (R, M) RPs at the sampling points ``u_targets`` (ascending, first may be −inf).

    A target above a job's ``u_max`` is replaced by ``u_max`` and its speed by the
    maximum speed's equivalent ``ω(u_max)``.
    """
    u = np.asarray(u_targets, dtype=float)[:, None]
    u_max = batch_max_rp(work, max_speed, now, goal, goal_start)[None, :]
    v = np.where(u < u_max, u, u_max)
    finite = np.isfinite(v)
    w = np.where(finite, batch_speed_for(np.where(finite, v, 0.0), work, now, goal, goal_start), 0.0)
    return w, v


def hypothetical_rp(omega_g: float, w: np.ndarray, v: np.ndarray, work, now, goal, goal_start) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 6: each job's speed and RP when the jobs share the aggregate speed ``omega_g``.

    Finds the rows k, k+1 of W with ``Σ W_k ≤ ω_g ≤ Σ W_{k+1}``, interpolates each job's
    speed linearly between them (so the speeds sum to ω_g) and derives its RP from its
    speed with Eq. 2 (capped at ``V_{k+1}``). Beyond the last row every job runs at
    ``W_R``. Returns (speeds, RPs), one per job.
    """
    totals = w.sum(axis=1)
    if omega_g >= totals[-1]:
        speed = w[-1].copy()
    else:
        k = int(np.searchsorted(totals, omega_g, side="right")) - 1
        k = min(max(k, 0), len(totals) - 2)
        span = totals[k + 1] - totals[k]
        theta = 0.0 if span <= 0 else (omega_g - totals[k]) / span
        speed = w[k] + theta * (w[k + 1] - w[k])
    with np.errstate(divide="ignore"):
        completion = np.asarray(now, dtype=float) + np.asarray(work, dtype=float) / speed
    u = np.minimum(batch_rp(completion, goal, goal_start), np.nanmax(np.where(np.isfinite(v), v, -np.inf), axis=0))
    return speed, np.where(speed > 0, u, -np.inf)


# --- tasks of a placement ------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskGoals:
    """Per task (T,) goal parameters, in reference-core units (see the module doc).

    ``kind``: :data:`KIND_DEFAULT`, :data:`KIND_TRANSACTIONAL` or :data:`KIND_BATCH`.
    ``max_speed``: the most CPU the task can use, reference cores. Transactional:
    ``rt_goal_s`` (s), ``request_rate`` (1/s), ``service`` (reference core-seconds per
    request). Batch: ``deadline_s``, ``goal_start_s`` (s from now), ``work`` (reference
    core-seconds). Unused entries are NaN.
    """

    kind: np.ndarray
    max_speed: np.ndarray
    rt_goal_s: np.ndarray
    request_rate: np.ndarray
    service: np.ndarray
    deadline_s: np.ndarray
    goal_start_s: np.ndarray
    work: np.ndarray

    @classmethod
    def default(cls, n_tasks: int, max_speed: np.ndarray | None = None) -> "TaskGoals":
        """Every task with the default (sensitivity headroom) RPF."""
        nan = np.full(n_tasks, np.nan)
        speed = np.full(n_tasks, np.inf) if max_speed is None else np.asarray(max_speed, dtype=float)
        return cls(np.zeros(n_tasks, dtype=np.int8), speed, nan, nan, nan, nan, nan, nan)


def task_goals(tasks: pd.DataFrame, to_reference: np.ndarray, max_speed: np.ndarray) -> TaskGoals:
    """Goals from the optional columns of ``tasks`` (validated by :func:`packer.io.validate.check_tasks`).

    ``to_reference`` (T,): reference cores per core of the task's current architecture;
    ``max_speed`` (T,): reference cores.
    """
    n = len(tasks)

    def col(name: str) -> np.ndarray:
        return tasks[name].to_numpy(dtype=float, na_value=np.nan) if name in tasks.columns else np.full(n, np.nan)

    rt, deadline = col("rt_goal_s"), col("deadline_s")
    kind = np.where(~np.isnan(rt), KIND_TRANSACTIONAL, np.where(~np.isnan(deadline), KIND_BATCH, KIND_DEFAULT)).astype(np.int8)
    return TaskGoals(
        kind=kind,
        max_speed=np.asarray(max_speed, dtype=float),
        rt_goal_s=rt,
        request_rate=col("request_rate"),
        service=col("service_core_s") * to_reference,
        deadline_s=deadline,
        goal_start_s=col("goal_start_s"),
        work=col("work_core_s") * to_reference,
    )


def _cpu_index(problem: "PlacementProblem") -> int:
    return problem.dims.index("cpu")


def rp_demand(problem: "PlacementProblem") -> np.ndarray:
    """(T, 1+K) each task's contribution to its host's RP load: CPU limit (reference cores), then sensitivity demand."""
    return np.column_stack([problem.demand[:, _cpu_index(problem)], problem.sens_demand])


def rp_capacity(problem: "PlacementProblem") -> np.ndarray:
    """(H, 1+K) CPU capacity (reference cores), then sensitivity capacity per host."""
    return np.column_stack([problem.capacity[:, _cpu_index(problem)], problem.sens_capacity])


def rp_loads(problem: "PlacementProblem", assign: np.ndarray) -> np.ndarray:
    """(H, 1+K) RP load of every host under ``assign`` (see the module doc)."""
    loads = np.zeros((problem.n_hosts, 1 + len(problem.sens_dims)))
    np.add.at(loads, np.asarray(assign, dtype=np.int64), rp_demand(problem))
    return loads


def _goals(problem: "PlacementProblem") -> TaskGoals:
    return problem.rp_goals if problem.rp_goals is not None else TaskGoals.default(problem.n_tasks)


def relative_performance(problem: "PlacementProblem", assign: np.ndarray, loads: np.ndarray | None = None) -> np.ndarray:
    """(T,) RP of every task under ``assign`` (see the module doc), in [RP_FLOOR, RP_CAP].

    ``loads``: the hosts' RP loads (:func:`rp_loads`) when already known.
    """
    assign = np.asarray(assign, dtype=np.int64)
    loads = rp_loads(problem, assign) if loads is None else loads
    g = _goals(problem)
    demand = rp_demand(problem)
    cap = rp_capacity(problem)
    host_load, host_cap = loads[assign], cap[assign]
    d, c, l = demand[:, 0], host_cap[:, 0], host_load[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(l > 0, d * c / np.where(l > 0, l, 1.0), np.inf)
    speed = np.minimum(g.max_speed, share)
    rp = np.full(problem.n_tasks, RP_CAP)

    trans = g.kind == KIND_TRANSACTIONAL
    if trans.any():
        t = mm1_response_time(speed[trans], g.request_rate[trans], g.service[trans])
        rp[trans] = transactional_rp(t, g.rt_goal_s[trans])
    batch = g.kind == KIND_BATCH
    if batch.any():
        with np.errstate(divide="ignore"):
            completion = np.where(speed[batch] > 0, g.work[batch] / speed[batch], np.inf)
        rp[batch] = batch_rp(completion, g.deadline_s[batch], g.goal_start_s[batch])

    default = g.kind == KIND_DEFAULT
    if default.any():
        if problem.sens_dims:
            own, total, scap = demand[default, 1:], host_load[default, 1:], host_cap[default, 1:]
        else:
            own, total, scap = d[default, None], l[default, None], c[default, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.where(np.isfinite(scap), own / scap, 0.0)  # infinite capacity: never contended
            big_s = np.where(np.isfinite(scap), total / scap, 0.0)
            per_dim = (1.0 - big_s) / s
        per_dim = np.where(s > 0, per_dim, np.inf)
        rp[default] = np.min(per_dim, axis=1, initial=np.inf)
    return np.clip(np.nan_to_num(rp, nan=RP_FLOOR, neginf=RP_FLOOR, posinf=RP_CAP), RP_FLOOR, RP_CAP)


def rp_thresholds(problem: "PlacementProblem", tasks: np.ndarray, hosts: np.ndarray, level) -> np.ndarray:
    """(n, 1+K) the largest RP load of host ``hosts[i]`` (the task included) at which ``tasks[i]`` there has RP ≥ ``level``.

    ``level`` is a scalar or (n,). ``inf``: no limit in that column; ``-inf``: the level
    is out of reach on that host whatever its load.
    """
    tasks = np.asarray(tasks, dtype=np.int64)
    hosts = np.asarray(hosts, dtype=np.int64)
    level = np.broadcast_to(np.asarray(level, dtype=float), tasks.shape)
    g = _goals(problem)
    kind = g.kind[tasks]
    cap = rp_capacity(problem)[hosts]
    own = rp_demand(problem)[tasks]
    out = np.full((len(tasks), cap.shape[1]), np.inf)

    # CPU-speed RPFs: RP ≥ X  ⇔  ω ≥ need(X)  ⇔  d·C/L ≥ need  ⇔  L ≤ d·C/need (need ≤ max speed).
    need = np.zeros(len(tasks))
    trans = kind == KIND_TRANSACTIONAL
    t = tasks[trans]
    need[trans] = transactional_speed_for(level[trans], g.request_rate[t], g.service[t], g.rt_goal_s[t])
    batch = kind == KIND_BATCH
    b = tasks[batch]
    need[batch] = batch_speed_for(level[batch], g.work[b], 0.0, g.deadline_s[b], g.goal_start_s[b])
    speedy = trans | batch
    d, c = own[:, 0], cap[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        limit = np.where(need > 0, d * c / np.where(need > 0, need, 1.0), np.inf)
    limit = np.where(need > g.max_speed[tasks], -np.inf, limit)
    limit = np.where((need > 0) & (d <= 0), -np.inf, limit)
    out[speedy, 0] = limit[speedy]

    # Sensitivity (or CPU) headroom: RP ≥ X  ⇔  Σ load ≤ cap − X·own.
    default = kind == KIND_DEFAULT
    if default.any():
        cols = slice(1, None) if problem.sens_dims else slice(0, 1)
        o, k_cap, x = own[default, cols], cap[default, cols], level[default, None]
        limit = np.where(np.isfinite(k_cap) & (o > 0), k_cap - x * o, np.inf)
        limit = np.where((o > 0) & (k_cap <= 0), -np.inf, limit)
        out[default, cols] = limit
    out[level <= RP_FLOOR] = np.inf
    out[level > RP_CAP] = -np.inf
    return out
