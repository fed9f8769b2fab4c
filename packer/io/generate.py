"""Synthetic traces shaped like the colocation paper's production pool.

The colocation paper (Chakraborti et al., Sections I, III and IV) describes a pool
of more than 1,000 jobs with ~37,000 tasks on ~18,000 hosts of the six Table I
architectures, in which "around 93% of the jobs (each utilizing less than 250
hosts) have on average 20% CPU utilization and 31% memory utilization", the fleet's
average CPU utilization is ~35-40%, and the p99 CPU of a medium-class service
(KeyVal2) is ~55% of its request. :func:`generate_trace` writes a native trace
(:mod:`packer.io.trace`) with that shape; the pieces are pure functions so they can
be checked without writing files.

Jobs (:func:`make_jobs`)
    Job sizes come from a two-part mixture: with probability 93% a *tail* job of
    ``round(lognormal(median 6, sigma 1.2))`` tasks clipped to 1-249, else a *large*
    job of ``250 * (1 + Pareto(3))`` tasks; sizes are drawn until they add up to
    ``tasks`` (the last job is cut to fit) and no job is larger than an eighth of
    the tasks (so small traces are not one job). Each job has a behavioural class —
    low, medium or high resource use, the paper's three K-means clusters — from a
    mix that depends on the mixture part (:data:`TAIL_CLASS_MIX`,
    :data:`LARGE_CLASS_MIX`: the tail is mostly low, large jobs mostly high, the
    paper's long tail of under-used small jobs). Classes are dealt, not drawn: in a
    random job order each part gets its mix by share of tasks, so a few large jobs
    cannot swing the pool's load. A job's tasks are replicas with one request
    vector, dealt the same way from per-class menus of rounded sizes
    (:data:`CLASS_PROFILES`; CPU in *reference cores*, one reference core = 1/32
    score unit = one Broadwell18 core; memory GiB; network Gbps). The Table II
    services (Log1, KeyVal1 low; NN1, KeyVal2 medium; KeyVal3, Rank2 high; read from
    ``models/sensitivity.csv``) each name one tail job of their class, the one
    closest to 10 tasks, so the sensitivity table applies to some tasks (a small
    trace may lack a tail job of some class and so a service); other jobs have none.

Hosts (:func:`make_hosts`)
    Architectures follow :data:`ARCH_MIX`: two thirds Type II hosts, so that at the
    catalog's 2:1 prices Type II hosts carry ~80% of the pool's cost, as the paper's
    31.86% / 71.42% / 39.94% TCO reductions imply; within a type, newer and larger
    generations are more common. Racks (``domain``) hold :data:`RACK_SIZE` hosts of
    one architecture.

Current placement (:func:`place_by_requests`)
    What an allocation-based cluster scheduler leaves: feasible under requests (per
    host and dimension, the sum of task requests <= capacity) and packed close to
    capacity in each host's binding dimension (a per-host fill target of
    ``FILL_MIN + (1 - FILL_MIN) * Beta(FILL_BETA)``, mean 0.95; the spread stands for
    holes departed tasks left), every job on one architecture or two, at most two
    tasks of a job per host where possible. Jobs are placed most constrained first
    (fewest eligible architectures, then largest task: first-fit decreasing); each
    picks its architectures with probability proportional to the share of their
    capacity it could fill (so small tasks go to small hosts and large ones to large
    hosts) and takes the fullest hosts that still fit (best fit). If that strands a
    job (small or crowded pools), the placement is redone filling hosts to capacity.
    Every task starts on an architecture eligible for it: where it stays within the
    host's sensitivity capacity on its own, on packer's default ``need`` basis with
    the scores packer would give it (:func:`job_scores`: its service's Table III row,
    else the mean of its class's). Single-task hosts are those whose one task fills
    them (a medium task alone on a Broadwell18). A task's CPU request is in cores of
    its current host: the job's reference cores scaled by per-core throughput
    (``score / cores``), rounded up to 0.01 core. At the default shape about 77% of
    the fleet's cores are requested, hosts in use are ~88% full in their binding
    dimension and ~23% of them hold one task (benchmarks/RESULTS.md).

Usage (:func:`usage_batches`), one sample every ``interval`` seconds
    Per task, with ``r`` the request and ``t`` the time of day::

        cpu(t)   = r_cpu * level_cpu * weekly(t) * (1 + A cos(2 pi (t - peak) / 1 day) + 0.08 N(0,1))
                   clipped to [0, 1.2 r_cpu]
        net(t)   like cpu, with its own level and noise, clipped to [0, 1.2 r_net]
        mem(t)   = r_mem * level_mem * (1 + 0.03 cos(...) + 0.01 N(0,1)), clipped to [0, r_mem]
        membw(t) = cpu(t) * intensity * (1 + 0.05 N(0,1)), Gbps, >= 0

    ``level`` is a fraction of the request drawn per job around its class mean
    (:data:`CLASS_PROFILES`, lognormal jitter, CPU capped at 0.72) with a small
    per-task jitter; ``A`` the diurnal amplitude (0.18-0.30 by class, x0.7-1.3 per job), ``peak`` the
    job's peak hour (UTC, around 20:00), ``weekly`` a per-job dip of up to 10% on
    Saturday and Sunday, ``intensity`` the job's memory bandwidth per busy core
    (Gbps per core). Noise is Gaussian, independent per sample. One sample in a
    thousand is a CPU and network spike to 0.8-1.2x the request. CPU may exceed its
    request (idle cycles are shared), memory may not; memory is much steadier than
    CPU. Values are rounded to :data:`QUANTUM`. With the default mixes the pool's
    CPU utilization is ~36-40% of all hosts' cores (the paper: ~35-40%), tail jobs
    use ~20% of their CPU and ~31% of their memory requests, medium-class tasks have
    a median p99 CPU of ~55% of the request, and the busiest high-class tasks a p99
    CPU near or above it; tests/test_generate.py checks the paper's figures on a
    small trace.

Usage is streamed: tasks are generated in chunks of about ``batch_rows`` rows
(rows sorted by ``task_id`` then ``ts``, task ids zero-padded so that they sort in
generation order), so memory stays bounded however many rows are written. Usage
values are written as float32 (cores, GiB, Gbps); ``ts`` is ``timestamp[s, UTC]``
starting at :data:`DEFAULT_START` (Parquet, having no seconds unit, stores and
returns it as ``timestamp[ms, UTC]``). Everything is deterministic for a seed: the same
arguments give byte-identical files.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa

from packer.errors import InputError, Problem
from packer.io.fleet import DEFAULT_FLEET, MODELS_DIR, Fleet, load_fleet
from packer.characterization.normalize import SENSITIVITY_DIMS, sensitivity_capacity, sensitivity_demand, translate_sensitivity
from packer.io.trace import write_trace

log = logging.getLogger(__name__)

#: Host architecture shares (fractions of hosts) for Table I. Type II: 67%.
ARCH_MIX = {
    "Skylake16": 0.30,
    "Broadwell20": 0.22,
    "Haswell12": 0.15,
    "Skylake14": 0.13,
    "Broadwell18": 0.12,
    "Haswell10": 0.08,
}
RACK_SIZE = 40
#: Throughput of one reference core in score units: a Broadwell18 core (score 1.0, 32 cores).
REFERENCE_CORE_SCORE = 1.0 / 32
CLASSES = ("low", "medium", "high")
SERVICES_FILE = MODELS_DIR / "sensitivity.csv"
DEFAULT_START = pd.Timestamp("2024-01-01T00:00:00Z")  # a Monday
DEFAULT_BATCH_ROWS = 1 << 20
#: Generated request dimensions (cpu in cores on the current host, mem GiB, net Gbps).
REQUEST_DIMS = ("cpu", "mem", "net")

#: Job-size mixture: share of tail jobs and their lognormal; large jobs 250 * (1 + Pareto(shape)).
TAIL_SHARE = 0.93
TAIL_MEDIAN, TAIL_SIGMA, TAIL_MAX = 6.0, 1.2, 249
LARGE_MIN, LARGE_PARETO_SHAPE = 250, 3.0
#: Class mix (low, medium, high) of tail jobs and of large jobs.
TAIL_CLASS_MIX = (0.70, 0.28, 0.02)
LARGE_CLASS_MIX = (0.07, 0.38, 0.55)


@dataclass(frozen=True)
class ClassProfile:
    """Requests and usage levels of one behavioural class.

    Menus are the request sizes a job of the class picks from (CPU in reference
    cores, memory GiB, network Gbps). Levels are mean usage as a fraction of the
    request; ``amplitude`` the relative diurnal swing of CPU and network.
    """

    cpu_menu: tuple[float, ...]
    mem_menu: tuple[float, ...]
    net_menu: tuple[float, ...]
    cpu_level: float
    mem_level: float
    net_level: float
    amplitude: float


CLASS_PROFILES = {
    "low": ClassProfile((2, 4, 6, 10, 14), (4, 8, 12, 20, 28), (0.2, 0.5, 1.0), 0.11, 0.24, 0.10, 0.30),
    "medium": ClassProfile((8, 12, 18, 28, 36), (16, 24, 40, 56, 72, 96), (0.5, 1.0, 2.0), 0.40, 0.45, 0.28, 0.30),
    "high": ClassProfile((28, 32, 36, 44), (48, 64, 96, 128), (1.0, 2.0, 3.0), 0.56, 0.68, 0.50, 0.18),
}
CPU_NOISE, MEM_NOISE, MEMBW_NOISE = 0.08, 0.01, 0.05
MEM_AMPLITUDE = 0.03
SPIKE_SHARE = 0.001
#: Usage resolution: 1/1024 of a core, GiB or Gbps (about a millicore, a MiB, a Mbps).
QUANTUM = 1.0 / 1024
CPU_CEILING = 1.2  # CPU and network usage may burst above the request (idle cycles), memory may not
MAX_TASKS_PER_HOST_PER_JOB = 2
#: Fill target of each host in the current placement, a fraction of its capacity in every dimension:
#: ``FILL_MIN + (1 - FILL_MIN) * Beta(*FILL_BETA)`` (mean 0.95). An allocation scheduler packs hosts
#: close to full in their binding dimension; the spread stands for departed tasks' holes.
FILL_MIN = 0.80
FILL_BETA = (3.0, 1.0)
PINNED_SHARE = 0.01


@dataclass(frozen=True)
class GeneratedSummary:
    """What :func:`generate_trace` wrote. ``cpu_utilization`` = mean CPU usage summed
    over tasks / cores of all hosts; ``cpu_requested`` = CPU requests / cores of all hosts."""

    path: Path
    tasks: int
    jobs: int
    hosts: int
    empty_hosts: int
    usage_rows: int
    samples_per_task: int
    cpu_requested: float
    cpu_utilization: float
    elapsed_s: float


def _rng(seed: int, stream: int, *more: int) -> np.random.Generator:
    """Independent deterministic streams per purpose, so changing one part never shifts another."""
    return np.random.default_rng([seed, stream, *more])


def _ids(prefix: str, n: int) -> np.ndarray:
    """Zero-padded ids (``t0000123``) that sort lexicographically in generation order."""
    width = max(5, len(str(max(n - 1, 0))))
    return np.char.add(prefix, np.char.zfill(np.arange(n).astype(str), width))


def _strings(values: np.ndarray) -> pd.Series:
    """A string column stored as Arrow ``string`` (pandas' ``str`` dtype would write ``large_string``),
    the type the usage table's ``task_id`` has too."""
    return pd.Series(np.asarray(values, dtype=object), dtype=object)


def _services(path: Path = SERVICES_FILE) -> pd.DataFrame:
    """Table II services with their class and measured Table III scores (``models/sensitivity.csv``)."""
    table = pd.read_csv(path)
    table = table.sort_values("measured", ascending=False, kind="stable").drop_duplicates("service")
    return table.set_index("service")


def make_jobs(tasks: int = 37_000, seed: int = 0, services: pd.DataFrame | None = None) -> pd.DataFrame:
    """Jobs summing to ``tasks`` tasks, with class, request shape and usage parameters.

    Columns: ``job_id``, ``n_tasks``, ``first_task`` (index of its first task),
    ``large`` (drawn from the large-job part of the size mixture), ``cls``,
    ``cpu_ref`` (reference cores per task), ``mem_request`` (GiB), ``net_request``
    (Gbps), ``cpu_level``, ``mem_level``, ``net_level`` (mean usage / request),
    ``amplitude``, ``peak_hour`` (UTC), ``weekend_dip`` (fraction), ``membw_per_core``
    (Gbps per busy core), ``service`` (a Table II name or None).
    """
    if tasks <= 0:
        raise InputError([Problem("--tasks", "", f"must be > 0, got {tasks}", 0)])
    rng = _rng(seed, 1)
    # `tasks` candidates always suffice, since every job has at least one task.
    large = rng.random(tasks) >= TAIL_SHARE
    tail_size = np.clip(np.rint(rng.lognormal(math.log(TAIL_MEDIAN), TAIL_SIGMA, tasks)), 1, TAIL_MAX)
    large_size = np.floor(LARGE_MIN * (1 + rng.pareto(LARGE_PARETO_SHAPE, tasks)))
    size = np.where(large, large_size, tail_size).astype(np.int64)
    size = np.minimum(size, max(1, tasks // 8))
    ends = np.cumsum(size)
    n_jobs = int(np.searchsorted(ends, tasks)) + 1
    size, large = size[:n_jobs].copy(), large[:n_jobs]
    size[-1] -= ends[n_jobs - 1] - tasks

    # Classes are dealt, not drawn independently: in a random job order, each part of the mixture gets its
    # class mix by share of tasks. Independent draws let a few large jobs swing the pool's load by +-15%.
    order = rng.permutation(n_jobs)
    cls_idx = np.empty(n_jobs, dtype=np.int64)
    for part, mix in ((large, LARGE_CLASS_MIX), (~large, TAIL_CLASS_MIX)):
        members = order[part[order]]
        weight = size[members].astype(float)
        midpoint = (np.cumsum(weight) - weight / 2) / max(weight.sum(), 1.0)
        cls_idx[members] = np.minimum(np.searchsorted(np.cumsum(mix), midpoint, side="right"), len(CLASSES) - 1)
    cls = np.asarray(CLASSES)[cls_idx]
    profiles = [CLASS_PROFILES[c] for c in CLASSES]

    def per_class(values: Callable[[ClassProfile], float]) -> np.ndarray:
        return np.array([values(p) for p in profiles])[cls_idx]

    def from_menu(menu: Callable[[ClassProfile], tuple[float, ...]]) -> np.ndarray:
        """Deal a class's menu like the classes: each size gets an equal share of the class's tasks."""
        out = np.empty(n_jobs)
        order = rng.permutation(n_jobs)
        for k, p in enumerate(profiles):
            members = order[cls_idx[order] == k]
            weight = size[members].astype(float)
            midpoint = (np.cumsum(weight) - weight / 2) / max(weight.sum(), 1.0)
            choices = np.asarray(menu(p), dtype=float)
            out[members] = choices[np.minimum((midpoint * len(choices)).astype(int), len(choices) - 1)]
        return out

    cpu_ref, mem_request, net_request = from_menu(lambda p: p.cpu_menu), from_menu(lambda p: p.mem_menu), from_menu(lambda p: p.net_menu)
    jitter = np.exp(rng.standard_normal((n_jobs, 3)) * np.array([0.25, 0.15, 0.25]))  # cpu, mem, net levels
    jobs = pd.DataFrame(
        {
            "job_id": _strings(_ids("j", n_jobs)),
            "n_tasks": size,
            "first_task": np.concatenate([[0], np.cumsum(size)[:-1]]),
            "large": large,
            "cls": cls,
            "cpu_ref": cpu_ref,
            "mem_request": mem_request,
            "net_request": net_request,
            "cpu_level": np.clip(per_class(lambda p: p.cpu_level) * jitter[:, 0], 0.03, 0.72),
            "mem_level": np.clip(per_class(lambda p: p.mem_level) * jitter[:, 1], 0.05, 0.92),
            "net_level": np.clip(per_class(lambda p: p.net_level) * jitter[:, 2], 0.02, 0.85),
            "amplitude": per_class(lambda p: p.amplitude) * rng.uniform(0.7, 1.3, n_jobs),
            "peak_hour": np.mod(rng.normal(20.0, 3.0, n_jobs), 24.0),
            "weekend_dip": rng.uniform(0.0, 0.1, n_jobs),
            "membw_per_core": rng.lognormal(math.log(1.2), 0.4, n_jobs),
        }
    )
    jobs["service"] = pd.Series([None] * n_jobs, dtype="object")
    services = _services() if services is None else services
    # One small tail job per Table II service, of the service's class, so its sensitivity scores describe it.
    # Tail jobs only (Rank2 and KeyVal3 fit on Broadwell20 alone, Eq. 1), sizes closest to 10 tasks first.
    preference = np.abs(size - 10.0)
    free = ~large & (size >= 2)
    for name, service_class in services["class"].items():
        fitting = np.flatnonzero(free & (cls == service_class))
        if len(fitting):
            chosen = fitting[np.argmin(preference[fitting])]
            free[chosen] = False
            jobs.loc[chosen, "service"] = name
    return jobs


def make_hosts(hosts: int = 18_000, fleet: Fleet | None = None, rack_size: int = RACK_SIZE) -> pd.DataFrame:
    """``hosts`` hosts (``host_id``, ``arch``, ``domain`` = rack id) in :data:`ARCH_MIX` proportions.

    Counts are rounded by largest remainder. Architectures of a custom catalog that
    :data:`ARCH_MIX` does not name get the average share. Racks are homogeneous:
    each architecture's hosts fill their own racks of ``rack_size``.
    """
    if hosts <= 0:
        raise InputError([Problem("--hosts", "", f"must be > 0, got {hosts}", 0)])
    fleet = fleet or load_fleet()
    names = list(fleet.archs.index)
    default = float(np.mean(list(ARCH_MIX.values())))
    share = np.array([ARCH_MIX.get(a, default) for a in names])
    share = share / share.sum()
    exact = share * hosts
    count = np.floor(exact).astype(int)
    count[np.argsort(-(exact - count), kind="stable")[: hosts - count.sum()]] += 1
    arch = np.repeat(np.asarray(names, dtype=object), count)
    within = np.arange(hosts) - np.repeat(np.cumsum(count) - count, count)
    rack_of_arch = np.cumsum(-(-count // rack_size)) - (-(-count // rack_size))
    rack = np.repeat(rack_of_arch, count) + within // rack_size
    return pd.DataFrame(
        {
            "host_id": _strings(_ids("h", hosts)),
            "arch": _strings(arch),
            "domain": _strings(_ids("rack", int(rack.max()) + 1)[rack]),
        }
    )


def job_scores(jobs: pd.DataFrame, fleet: Fleet, services: pd.DataFrame) -> pd.DataFrame:
    """Sensitivity scores per job, as packer's characterization would give its tasks.

    A named service has its measured Table III row; any other job its class's
    scores: the mean over the class's measured services (packer's default class
    aggregate, :mod:`packer.characterization.sensitivity`), expressed with Eq. 1 on the architecture
    the first of them was measured on. Columns: one per sensitivity dimension and
    ``measured_on``.
    """
    measured = services[services["arch"].isin(fleet.archs.index)]
    if measured.empty:  # a catalog without the table's architectures: no job has scores
        return pd.DataFrame({**{d: np.full(len(jobs), np.nan) for d in SENSITIVITY_DIMS}, "measured_on": None})
    ref = str(measured["arch"].iloc[0])
    on_ref = pd.DataFrame({d: translate_sensitivity(measured[d].to_numpy(dtype=float), d, measured["arch"].to_numpy(), np.full(len(measured), ref), fleet)
                           for d in SENSITIVITY_DIMS}, index=measured.index)
    by_class = on_ref.groupby(measured["class"]).mean()
    out = by_class.reindex(jobs["cls"].to_numpy()).reset_index(drop=True).assign(measured_on=ref)
    named = jobs["service"].isin(measured.index).to_numpy()
    rows = measured.loc[jobs["service"][named].to_numpy()]
    out.loc[named, list(SENSITIVITY_DIMS)] = rows[list(SENSITIVITY_DIMS)].to_numpy(dtype=float)
    out.loc[named, "measured_on"] = rows["arch"].to_numpy()
    return out


def _eligible_archs(jobs: pd.DataFrame, fleet: Fleet, services: pd.DataFrame) -> np.ndarray:
    """(jobs, archs) mask: where a task of the job stays within the host's sensitivity capacity on its own.

    On packer's default ``need`` basis (:mod:`packer.characterization.normalize`), a task's demand is
    ``s · g_k(M) · CU`` against a host's ``g_k(A) · score_A``: large, sensitive
    tasks cannot use the small architectures. A job of a class without scores is
    eligible everywhere. A named service also stays on hosts of the umbrella type
    it was measured on: the paper's candidate services are clusters of its Type II
    hosts (Fig. 2), so their scores describe Type II classes, as packer's
    characterization then finds them.
    """
    scores = job_scores(jobs, fleet, services)
    need_cu = jobs["cpu_ref"].to_numpy(dtype=float) * REFERENCE_CORE_SCORE
    eligible = np.ones((len(jobs), len(fleet.archs)), dtype=bool)
    for dim in SENSITIVITY_DIMS:
        demand = np.nan_to_num(sensitivity_demand(scores[dim].to_numpy(dtype=float), scores["measured_on"].to_numpy(dtype=object),
                                                  fleet, dim, "need", need_cu))
        capacity = sensitivity_capacity(fleet, dim, "need").to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            alone = demand[:, None] / capacity[None, :]
        eligible &= ~(np.nan_to_num(alone, nan=0.0) > 1.0 + 1e-9)
    named = jobs["service"].isin(services.index).to_numpy()
    if named.any():
        measured_type = fleet.archs["type"].reindex(services.loc[jobs["service"][named].to_numpy(), "arch"]).to_numpy()
        eligible[named] &= fleet.archs["type"].to_numpy()[None, :] == measured_type[:, None]
    return eligible


def _requests_by_arch(jobs: pd.DataFrame, fleet: Fleet) -> np.ndarray:
    """(jobs, archs, dims) requests of one task: CPU in cores of that architecture, memory GiB, network Gbps."""
    per_core = fleet.per_core_throughput.to_numpy()
    cpu = np.ceil(jobs["cpu_ref"].to_numpy()[:, None] * REFERENCE_CORE_SCORE / per_core[None, :] * 100 - 1e-9) / 100
    mem = np.broadcast_to(jobs["mem_request"].to_numpy()[:, None], cpu.shape)
    net = np.broadcast_to(jobs["net_request"].to_numpy()[:, None], cpu.shape)
    return np.stack([cpu, mem, net], axis=-1)


class NotEnoughHosts(InputError):
    """The hosts cannot hold the tasks under their requests."""


def place_by_requests(jobs: pd.DataFrame, hosts: pd.DataFrame, fleet: Fleet, seed: int = 0,
                      services: pd.DataFrame | None = None) -> pd.DataFrame:
    """The current placement: one row per task, feasible under requests.

    Returns ``task_id``, ``job_id``, ``host_id``, ``cpu_request`` (cores on that
    host), ``mem_request`` (GiB), ``net_request`` (Gbps), in task order. Jobs are
    first placed by best fit up to per-host fill targets (module doc); if that
    strands a job, as it can on small or crowded pools, the placement is redone
    with every host's target at its capacity. Raises :class:`NotEnoughHosts` when
    neither places every task. The loop runs once per job (about a thousand at
    paper scale); each step is vectorized over hosts.
    """
    services = _services() if services is None else services
    try:
        return _place(jobs, hosts, fleet, _rng(seed, 2), services, fill_targets=True)
    except NotEnoughHosts:
        log.info("filling %d hosts to their targets stranded a job of %d; filling them to capacity instead", len(hosts), len(jobs))
        return _place(jobs, hosts, fleet, _rng(seed, 2, 1), services, fill_targets=False)


def _place(jobs: pd.DataFrame, hosts: pd.DataFrame, fleet: Fleet, rng: np.random.Generator, services: pd.DataFrame,
           fill_targets: bool) -> pd.DataFrame:
    arch_of_host = pd.Categorical(hosts["arch"], categories=fleet.archs.index).codes
    n_hosts, n_archs = len(hosts), len(fleet.archs)
    # A hair under capacity so that float sums of exactly-full hosts never read as overfull.
    capacity = np.stack([fleet.capacity(d).to_numpy() for d in REQUEST_DIMS], axis=1) * (1 - 1e-9)
    host_capacity = capacity[arch_of_host]
    fill_target = FILL_MIN + (1 - FILL_MIN) * rng.beta(*FILL_BETA, n_hosts) if fill_targets else np.ones(n_hosts)
    used = np.zeros((n_hosts, len(REQUEST_DIMS)))
    present = np.bincount(arch_of_host, minlength=n_archs) > 0

    request = _requests_by_arch(jobs, fleet)
    fits_catalog = np.all(request <= capacity[None, :, :], axis=-1)
    eligible = _eligible_archs(jobs, fleet, services)
    eligible[~(fits_catalog & eligible).any(axis=1)] = True  # a catalog with no suitable architecture: ignore sensitivity
    allowed = fits_catalog & eligible & present[None, :]
    n_tasks = jobs["n_tasks"].to_numpy()
    size = (request.min(axis=1) / capacity.max(axis=0)).max(axis=1)
    # Most constrained first: jobs allowed on fewer architectures, then larger tasks (first-fit decreasing).
    order = np.lexsort((rng.random(len(jobs)), -size, allowed.sum(axis=1)))
    task_host = np.empty(int(n_tasks.sum()), dtype=np.int64)
    first = jobs["first_task"].to_numpy()

    def fits(limit: np.ndarray, req: np.ndarray, most: int) -> np.ndarray:
        """How many more tasks of request ``req`` (hosts, dims) each host takes under ``limit``."""
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(req > 0, (limit - used) / req, np.inf).min(axis=1)
        return np.floor(np.clip(room, 0, most)).astype(np.int64)

    def describe(j: int) -> str:
        shape = ", ".join(f"{jobs[c].iat[j]:g} {u}" for c, u in (("cpu_ref", "reference cores"), ("mem_request", "GiB"), ("net_request", "Gbps")))
        return f"job {jobs['job_id'].iat[j]} ({n_tasks[j]} tasks of {shape})"

    def no_room(j: int) -> NotEnoughHosts:
        return NotEnoughHosts([Problem("--hosts", "", f"the {n_hosts} hosts cannot hold the tasks under their requests: {describe(j)} found no room", 0)])

    unfit = np.flatnonzero(~fits_catalog.any(axis=1))
    if len(unfit):
        raise InputError([Problem(fleet.source, "arch", f"{describe(unfit[0])} fits no architecture of the catalog ({len(unfit)} jobs)", 0)])
    target_capacity = host_capacity * fill_target[:, None]
    for j in order:
        if not allowed[j].any():
            raise no_room(j)
        req = request[j][arch_of_host]  # (hosts, dims): this job's task on each host
        fit_target, fit_full = fits(target_capacity, req, n_tasks[j]), fits(host_capacity, req, n_tasks[j])
        # An architecture's pull: the share of its hosts' capacity the job could fill there (tasks it takes, spread
        # limit included, times a task's share of a host), so small tasks go to small hosts and large to large.
        share = (req / host_capacity).max(axis=1)
        room_by_arch = np.bincount(arch_of_host, weights=np.minimum(fit_target, MAX_TASKS_PER_HOST_PER_JOB) * share, minlength=n_archs) * allowed[j]
        if room_by_arch.sum() == 0:
            room_by_arch = np.bincount(arch_of_host, weights=np.minimum(fit_full, MAX_TASKS_PER_HOST_PER_JOB) * share, minlength=n_archs) * allowed[j]
        if room_by_arch.sum() == 0:
            raise no_room(j)
        weights = room_by_arch / room_by_arch.sum()
        ranked = rng.choice(n_archs, size=int((weights > 0).sum()), replace=False, p=weights)
        primary = ranked[:1]
        if len(ranked) > 1 and (room_by_arch[primary[0]] / share[arch_of_host == primary[0]].max() < n_tasks[j] or rng.random() < 0.25):
            primary = ranked[:2]
        in_primary = np.isin(arch_of_host, primary)
        in_allowed = allowed[j][arch_of_host]
        # Best fit: the fullest hosts (in their binding dimension) that still take a task come first, ties at random.
        fullness = (used / host_capacity).max(axis=1)
        shuffled = np.lexsort((rng.random(n_hosts), -np.round(fullness, 6)))
        # Relax step by step: fill targets, then full hosts, then more tasks per host, then any allowed architecture.
        for fit, per_host, where in (
            (fit_target, MAX_TASKS_PER_HOST_PER_JOB, in_primary),
            (fit_full, MAX_TASKS_PER_HOST_PER_JOB, in_primary),
            (fit_full, n_tasks[j], in_primary),
            (fit_full, n_tasks[j], in_allowed),
        ):
            take = np.minimum(fit, per_host)[shuffled] * where[shuffled]
            if take.sum() >= n_tasks[j]:
                break
        else:
            raise no_room(j)
        cum = np.cumsum(take)
        last = int(np.searchsorted(cum, n_tasks[j]))
        take = take[: last + 1].copy()
        take[-1] -= cum[last] - n_tasks[j]
        chosen = shuffled[: last + 1]
        used[chosen] += req[chosen] * take[:, None]
        task_host[first[j]: first[j] + n_tasks[j]] = np.repeat(chosen, take)

    task_job = np.repeat(np.arange(len(jobs)), n_tasks)
    task_request = request[task_job, arch_of_host[task_host]]
    return pd.DataFrame(
        {
            "task_id": _strings(_ids("t", len(task_job))),
            "job_id": _strings(jobs["job_id"].to_numpy()[task_job]),
            "host_id": _strings(hosts["host_id"].to_numpy()[task_host]),
            "cpu_request": task_request[:, 0],
            "mem_request": task_request[:, 1],
            "net_request": task_request[:, 2],
        }
    )


USAGE_SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("ts", pa.timestamp("s", tz="UTC")),
        ("cpu", pa.float32()),
        ("mem", pa.float32()),
        ("net", pa.float32()),
        ("membw", pa.float32()),
    ]
)


def sample_count(days: float, interval: int) -> int:
    """Samples per task: one every ``interval`` seconds over ``days`` days."""
    return int(days * 86_400 // interval)


def _quantize(values: np.ndarray) -> None:
    """Round in place to multiples of :data:`QUANTUM`, as telemetry reports them; the zeroed low mantissa
    bits also let Parquet compress the columns (about a third smaller than raw float32 noise)."""
    values *= 1 / QUANTUM
    np.rint(values, out=values)
    values *= QUANTUM


def usage_batches(tasks: pd.DataFrame, jobs: pd.DataFrame, days: float = 7, interval: int = 300, seed: int = 0,
                  batch_rows: int = DEFAULT_BATCH_ROWS, start: pd.Timestamp = DEFAULT_START) -> Iterator[pa.RecordBatch]:
    """Usage samples of ``tasks`` (from :func:`place_by_requests`), as record batches of :data:`USAGE_SCHEMA`.

    Each batch holds whole tasks, about ``batch_rows`` rows (at least one task's
    samples), sorted by ``task_id`` then ``ts``: cpu in cores of the task's host,
    mem GiB, net and membw Gbps, float32. See the module docstring for the model.
    Each batch draws from its own random stream, so the values depend on ``seed``
    and on ``batch_rows``.
    """
    samples = sample_count(days, interval)
    offsets = np.arange(samples, dtype=np.int64) * interval
    ts = offsets + int(start.timestamp())
    angle = 2 * np.pi * ((offsets + start.hour * 3600 + start.minute * 60 + start.second) / 86_400.0)
    cos_t, sin_t = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    weekend = ((start.day_of_week + (offsets + start.hour * 3600) // 86_400) % 7 >= 5).astype(np.float32)

    task_job = pd.Index(jobs["job_id"]).get_indexer(tasks["job_id"])
    job = {c: jobs[c].to_numpy(dtype=np.float32)[task_job] for c in
           ("cpu_level", "mem_level", "net_level", "amplitude", "weekend_dip", "membw_per_core")}
    peak = jobs["peak_hour"].to_numpy()[task_job] * (2 * np.pi / 24)
    cos_p, sin_p = np.cos(peak).astype(np.float32), np.sin(peak).astype(np.float32)
    request = {d: tasks[f"{d}_request"].to_numpy(dtype=np.float32) for d in REQUEST_DIMS}
    task_ids = pa.array(tasks["task_id"].to_numpy(dtype=object), type=pa.string())
    per_batch = max(1, batch_rows // max(samples, 1))

    for chunk, a in enumerate(range(0, len(tasks), per_batch)):
        b = min(a + per_batch, len(tasks))
        n = b - a
        rng = _rng(seed, 3, chunk)
        col = lambda v: v[a:b, None]  # noqa: E731 -- per-task parameter as a column
        diurnal = col(cos_p) * cos_t + col(sin_p) * sin_t  # cos(2 pi (t - peak) / day)
        weekly = 1 - col(job["weekend_dip"]) * weekend
        level = rng.lognormal(0.0, 0.08, (n, 3)).astype(np.float32) * np.stack(
            [job["cpu_level"][a:b], job["mem_level"][a:b], job["net_level"][a:b]], axis=1)
        amplitude = col(job["amplitude"])

        cpu = rng.standard_normal((n, samples), dtype=np.float32)
        cpu *= CPU_NOISE
        cpu += 1 + amplitude * diurnal
        cpu *= weekly * (col(request["cpu"]) * level[:, :1])
        net = rng.standard_normal((n, samples), dtype=np.float32)
        net *= CPU_NOISE
        net += 1 + amplitude * diurnal
        net *= weekly * (col(request["net"]) * level[:, 2:])
        mem = rng.standard_normal((n, samples), dtype=np.float32)
        mem *= MEM_NOISE
        mem += 1 + MEM_AMPLITUDE * diurnal
        mem *= col(request["mem"]) * level[:, 1:2]

        spikes = rng.integers(0, n * samples, rng.binomial(n * samples, SPIKE_SHARE))
        spike_task = spikes // samples
        burst = rng.uniform(0.8, CPU_CEILING, len(spikes)).astype(np.float32)
        cpu.ravel()[spikes] = request["cpu"][a:b][spike_task] * burst
        net.ravel()[spikes] = request["net"][a:b][spike_task] * burst
        for values in (cpu, net, mem):
            _quantize(values)  # before clipping, so rounding cannot lift a value over its ceiling
        np.clip(cpu, 0, CPU_CEILING * col(request["cpu"]), out=cpu)
        np.clip(net, 0, CPU_CEILING * col(request["net"]), out=net)
        np.clip(mem, 0, col(request["mem"]), out=mem)

        membw = rng.standard_normal((n, samples), dtype=np.float32)
        membw *= MEMBW_NOISE
        membw += 1
        membw *= cpu * col(job["membw_per_core"])
        _quantize(membw)
        np.maximum(membw, 0, out=membw)
        rows = pa.array(np.repeat(np.arange(a, b, dtype=np.int64), samples))
        yield pa.RecordBatch.from_arrays(
            [
                task_ids.take(rows),
                pa.array(np.tile(ts, n), type=pa.timestamp("s", tz="UTC")),
                pa.array(cpu.ravel()),
                pa.array(mem.ravel()),
                pa.array(net.ravel()),
                pa.array(membw.ravel()),
            ],
            schema=USAGE_SCHEMA,
        )


def hosts_needed(jobs: pd.DataFrame, fleet: Fleet, seed: int = 0, at_least: int = 1) -> int:
    """The smallest host count (>= ``at_least``, searched in 10% steps from the lower bound
    total requests / average host capacity) at which :func:`place_by_requests` places ``jobs``."""
    hosts = make_hosts(max(at_least, 1), fleet)
    per_host = np.stack([fleet.capacity(d)[hosts["arch"]].to_numpy() for d in REQUEST_DIMS], axis=1).mean(axis=0)
    totals = (_requests_by_arch(jobs, fleet).min(axis=1) * jobs["n_tasks"].to_numpy()[:, None]).sum(axis=0)
    ratio = np.divide(totals, per_host, out=np.zeros_like(totals), where=per_host > 0)
    n = max(at_least, int(np.ceil(ratio.max())))
    for _ in range(200):
        try:
            place_by_requests(jobs, make_hosts(n, fleet), fleet, seed)
            return n
        except NotEnoughHosts:
            n = max(n + 1, int(np.ceil(n * 1.1)))
    return n


def check_arguments(tasks: int, hosts: int, days: float, interval: int) -> None:
    """Raise :class:`InputError` unless tasks, hosts, days and interval (seconds) are finite, > 0 and interval <= days."""
    problems = [
        Problem(f"--{name}", "", f"must be > 0, got {value}" if not value > 0 else f"must be finite, got {value}", 0)
        for name, value in (("tasks", tasks), ("hosts", hosts), ("days", days), ("interval", interval))
        if not (value > 0 and math.isfinite(value))
    ]
    if not problems and interval > days * 86_400:
        problems.append(Problem("--interval", "", f"{interval} s is longer than --days {days:g} ({days * 86_400:g} s)", 0))
    if problems:
        raise InputError(problems)


def generate_trace(out: str | Path, tasks: int = 37_000, hosts: int = 18_000, days: float = 7, interval: int = 300,
                   seed: int = 0, fleet: Fleet | str | Path | None = None,
                   progress: Callable[[int], None] | None = None) -> GeneratedSummary:
    """Write a synthetic trace folder to ``out`` and summarize it.

    ``days`` of samples every ``interval`` seconds for ``tasks`` tasks on ``hosts``
    hosts of ``fleet`` (a :class:`Fleet`, a catalog path, or ``None`` for
    ``models/fleet.toml``; a non-default catalog is copied into the trace).
    ``progress`` is called with the number of usage rows just written.
    Raises :class:`InputError` for bad arguments or too few hosts.
    """
    check_arguments(tasks, hosts, days, interval)
    started = time.perf_counter()
    if not isinstance(fleet, Fleet):
        fleet = load_fleet(fleet if fleet is not None else DEFAULT_FLEET)
    own_catalog = Path(fleet.source)
    fleet_toml = None if own_catalog.resolve() == DEFAULT_FLEET.resolve() or not own_catalog.exists() else own_catalog.read_text()

    jobs = make_jobs(tasks, seed)
    host_table = make_hosts(hosts, fleet)
    try:
        task_table = place_by_requests(jobs, host_table, fleet, seed)
    except NotEnoughHosts as exc:
        needed = hosts_needed(jobs, fleet, seed, at_least=hosts + 1)
        message = f"{exc.problems[0].message}; about {needed} hosts would be needed for {tasks} tasks (try --hosts {needed})"
        raise InputError([Problem("--hosts", "", message, 0)]) from None
    task_job = pd.Index(jobs["job_id"]).get_indexer(task_table["job_id"])
    task_table["service"] = _strings(jobs["service"].to_numpy()[task_job])
    task_table["movable"] = _rng(seed, 4).random(tasks) >= PINNED_SHARE
    log.info("placed %d tasks of %d jobs on %d hosts", tasks, len(jobs), hosts)

    samples = sample_count(days, interval)
    cpu_total = 0.0

    def counted() -> Iterator[pa.RecordBatch]:
        nonlocal cpu_total
        for batch in usage_batches(task_table, jobs, days, interval, seed):
            cpu_total += float(np.sum(batch.column("cpu").to_numpy(), dtype=np.float64))
            yield batch
            if progress is not None:
                progress(batch.num_rows)

    path = write_trace(out, host_table, task_table, counted(), fleet_toml=fleet_toml)
    cores = float(fleet.capacity("cpu")[host_table["arch"]].sum())
    return GeneratedSummary(
        path=path,
        tasks=tasks,
        jobs=len(jobs),
        hosts=hosts,
        empty_hosts=int(hosts - task_table["host_id"].nunique()),
        usage_rows=tasks * samples,
        samples_per_task=samples,
        cpu_requested=float(task_table["cpu_request"].sum()) / cores,
        cpu_utilization=cpu_total / samples / cores,
        elapsed_s=time.perf_counter() - started,
    )
