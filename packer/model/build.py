"""Build a :class:`~packer.model.problem.PlacementProblem` from a trace: demands, capacities, eligibility, rules and goals.

Which number is a task's demand in a dimension is the preset's choice (Table IV):
its request, or the p-th percentile of its usage. A task without usage samples
falls back to its request (the only information there is).

What the user asks for becomes plugins (:mod:`packer.rules`): the goal (``tco``,
``hosts`` or ``fair``) and :class:`GoalWeights` become goals, :class:`RuleOptions`
(move budget, spread limits, guards, anti-affinity) become rules next to the
intrinsic ones (capacity, eligibility, pins).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from packer.characterization.normalize import (DEFAULT_SENSITIVITY_BASIS, check_basis, per_core_throughput, reference_arch,
                                           sensitivity_capacity, sensitivity_demand)
from packer.characterization.profile import percentile_column
from packer.errors import InputError
from packer.io.fleet import Fleet
from packer.io.presets import Preset
from packer.io.trace import TASKS_FILE, Trace
from packer.model.problem import PlacementProblem
from packer.model.rpf import RP_CAP, RP_FLOOR, task_goals
from packer.rules.anti_affinity import AntiAffinity
from packer.rules.at_risk import MaxNewAtRisk
from packer.rules.budget import MoveBudget
from packer.rules.capacity import Capacity
from packer.rules.cost import Cost
from packer.rules.eligibility import Eligibility, Pins
from packer.rules.fragmentation import Fragmentation
from packer.rules.interference import Interference
from packer.rules.min_rp import MinRP
from packer.rules.moves import FewerMoves
from packer.rules.pools import Pools
from packer.rules.spread import Spread

#: Goal names accepted by ``--goal``. ``fair``: leximin relative performance (:mod:`packer.solvers.leximin`).
GOALS = ("tco", "hosts", "fair")


@dataclass(frozen=True)
class GoalWeights:
    """Weights of the secondary goals, in cost units (colocation paper, Eq. 2, combined as its packer-solver does).

    ``objective = primary + fragmentation · F + sensitivity · S + moves · M`` where
    *primary* is the summed cost of occupied hosts (``tco``, cost units) or their count
    (``hosts``); ``F`` is Eq. 2's fragmentation summed over the fragmentation
    dimensions, each divided by the mean host capacity in that dimension (so F counts
    "empty hosts' worth" of unused capacity); ``S`` is the Eq. 4 interference (summed
    excess of normalized sensitivity over 1, per host and dimension); ``M`` is the
    number of moved tasks. The defaults make fragmentation a secondary goal and moves
    the last tie-break: a whole host of fragmentation is worth 1% of a Type I host's
    cost, a move 0.01%. Under the ``fair`` goal this objective (with ``tco``) is what
    a plan reports; leximin decides the placement.
    """

    fragmentation: float = 0.01
    sensitivity: float = 1.0
    moves: float = 1e-4


@dataclass(frozen=True)
class RuleOptions:
    """The hard constraints a user chooses, beyond capacity, eligibility and pins.

    ``max_moves``: at most this many tasks leave their host (None = unlimited).
    ``spread_host`` / ``spread_domain``: at most this many tasks of one job per host /
    per failure domain where the job gains tasks (None = no limit). ``min_rp``: every
    task ends with relative performance ≥ min(min_rp, its RP now) (None = no guard;
    :mod:`packer.rules.min_rp`). ``max_new_at_risk``: at most this many more tasks at
    risk of interference than today (None = no guard; :mod:`packer.rules.at_risk`).
    ``anti_affinity``: pairs of services whose tasks may not share a host they gain
    (:mod:`packer.rules.anti_affinity`).
    """

    max_moves: int | None = 400
    spread_host: int | None = None
    spread_domain: int | None = None
    min_rp: float | None = None
    max_new_at_risk: int | None = None
    anti_affinity: tuple[tuple[str, str], ...] = ()


def service_pairs(value) -> tuple[tuple[str, str], ...]:
    """Anti-affinity pairs from a list of ``[service, service]`` pairs (lists or tuples of two non-empty names).

    Raises ValueError naming what is wrong; callers at the boundary turn it into an :class:`InputError` naming their source.
    """
    pairs = list(value) if isinstance(value, (list, tuple)) else None
    if pairs is None or not all(isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(s, str) and s for s in p) for p in pairs):
        raise ValueError(f"expected a list of [service, service] pairs, got {value!r}")
    return tuple((a, b) for a, b in pairs)


def check_options(goal: str, weights: GoalWeights, options: RuleOptions, preset: Preset | None = None) -> None:
    """Raise :class:`InputError` for options no problem can have, or not under ``preset`` (the CLI's flags name them).

    Cheap: callers run it before profiling, so a wrong flag fails before the work.
    """
    problems = []
    if goal not in GOALS:
        problems.append(f"unknown goal '{goal}'; known: {', '.join(GOALS)}")
    for name, value in (("--fragmentation-weight", weights.fragmentation), ("--sensitivity-weight", weights.sensitivity),
                        ("--move-weight", weights.moves)):
        if not (math.isfinite(value) and value >= 0):
            problems.append(f"{name} must be a finite number >= 0, got {value}")
    if options.max_moves is not None and options.max_moves < 0:
        problems.append(f"--max-moves must be >= 0 or 'unlimited', got {options.max_moves}")
    for name, value in (("spread per host", options.spread_host), ("spread per domain", options.spread_domain)):
        if value is not None and value < 1:
            problems.append(f"{name} must be at least 1, got {value}")
    if options.min_rp is not None and not RP_FLOOR <= options.min_rp <= RP_CAP:
        # Relative performance lies in [RP_FLOOR, RP_CAP]: a guard outside it means nothing (or nothing reachable).
        problems.append(f"--min-rp must be a number from {RP_FLOOR:g} to {RP_CAP:g} (0 = at goal), got {options.min_rp}")
    if options.max_new_at_risk is not None and options.max_new_at_risk < 0:
        problems.append(f"--max-new-at-risk must be >= 0, got {options.max_new_at_risk}")
    if options.max_new_at_risk is not None and goal == "fair":
        problems.append("--max-new-at-risk guards the tco and hosts goals; --goal fair raises the lowest relative performance instead")
    if options.max_new_at_risk is not None and preset is not None and not preset.sensitivity:
        # A guard on tasks at risk of interference means nothing without sensitivity: say so rather than ignore it.
        problems.append(f"--max-new-at-risk counts tasks at risk of interference, which needs a configuration with "
                        f"sensitivity (--config p99-sens); '{preset.name}' has none")
    if problems:
        raise InputError("; ".join(problems))


def make_goals(goal: str, weights: GoalWeights = GoalWeights()) -> tuple:
    """The goals of ``goal``: cost (``tco`` or ``hosts``), fragmentation, interference, moves.

    ``fair`` gets the ``tco`` goals: its plans report that objective, while leximin
    (``PlacementProblem.fair``) decides the placement.
    """
    return (Cost("hosts" if goal == "hosts" else "tco"), Fragmentation(weights.fragmentation), Interference(weights.sensitivity),
            FewerMoves(weights.moves))


def make_rules(options: RuleOptions = RuleOptions(), services: np.ndarray | None = None, pools: Pools | None = None) -> tuple:
    """The intrinsic rules (capacity, eligibility, pins, and the trace's ``pools`` if it has some) and those ``options`` ask for.

    ``services`` (T,): each task's service name (None where it has none), needed by anti-affinity.
    """
    rules: list = [Capacity(), Eligibility(), Pins(), *([pools] if pools is not None else [])]
    if options.max_moves is not None:
        rules.append(MoveBudget(options.max_moves))
    if options.spread_host is not None:
        rules.append(Spread("host", options.spread_host))
    if options.spread_domain is not None:
        rules.append(Spread("domain", options.spread_domain))
    if options.min_rp is not None:
        rules.append(MinRP(options.min_rp))
    if options.max_new_at_risk is not None:
        rules.append(MaxNewAtRisk(options.max_new_at_risk))
    if options.anti_affinity:
        rules.append(AntiAffinity(options.anti_affinity, services))
    return tuple(rules)


def host_pools(hosts: pd.DataFrame) -> Pools | None:
    """The :class:`~packer.rules.pools.Pools` rule of a hosts table with a ``pool`` column (pools in order of appearance), else None."""
    if "pool" not in hosts.columns:
        return None
    codes, names = pd.factorize(hosts["pool"].astype(str))
    return Pools(codes, tuple(names))


def _codes(values) -> np.ndarray:
    codes, _ = pd.factorize(pd.Series(values), use_na_sentinel=True)
    return codes.astype(np.int64)


def task_limits(trace: Trace, preset: Preset, profiles: pd.DataFrame | None) -> pd.DataFrame:
    """Per task and dimension, the preset's limit in the trace's units (cpu cores on the current host).

    A percentile limit needs ``profiles`` with a ``<dim>_pNN`` column; a task whose
    profile is NaN (no usage) falls back to its request.
    """
    out = pd.DataFrame(index=trace.tasks.index)
    for dim in trace.dims:
        request = trace.tasks[f"{dim}_request"].to_numpy(dtype=float)
        limit = preset.limit(dim)
        if limit == "request":
            out[dim] = request
            continue
        col = percentile_column(dim, float(limit[1:]))
        if profiles is None or col not in profiles.columns:
            have = [c for c in profiles.columns if c.startswith(dim + "_p")] if profiles is not None else []
            have = "no profiles" if profiles is None else f"profiles with {', '.join(have)}" if have else f"profiles without any {dim}_p* column"
            raise InputError(f"config '{preset.name}' needs {col} for dimension '{dim}' but got {have}; profile with --percentile {limit[1:]}")
        aligned = profiles.set_index("task_id")[col].reindex(trace.tasks["task_id"]).to_numpy(dtype=float)
        out[dim] = np.where(np.isnan(aligned), request, aligned)
    return out


def build_problem(
    trace: Trace,
    preset: Preset,
    profiles: pd.DataFrame | None = None,
    sensitivity: pd.DataFrame | None = None,
    *,
    goal: str = "tco",
    weights: GoalWeights = GoalWeights(),
    rules: RuleOptions = RuleOptions(),
    sensitivity_basis: str = DEFAULT_SENSITIVITY_BASIS,
    task_class: np.ndarray | None = None,
) -> PlacementProblem:
    """Build the instance for ``trace`` under ``preset``.

    ``profiles``: from :func:`packer.characterization.profile.profile_tasks` (needed when the preset
    uses percentiles). ``sensitivity``: per task (``trace.tasks`` order) the scores
    of the preset's sensitivity dimensions and ``measured_on`` (as
    :class:`packer.characterization.sensitivity.SensitivityAssignment` ``.tasks``); needed when the
    preset uses sensitivity. Unscored tasks (NaN) use none of the soft capacity.
    ``sensitivity_basis``: what a score is a fraction of (:data:`packer.characterization.normalize.SENSITIVITY_BASES`).
    ``goal``, ``weights`` and ``rules``: the goals and rules of the problem (module doc);
    ``task_class`` (T,): workload class labels for the per-class reports.
    """
    check_basis(sensitivity_basis)
    check_options(goal, weights, rules, preset)
    fleet: Fleet = trace.fleet
    tasks, hosts = trace.tasks, trace.hosts
    arch_names = fleet.archs.index.to_numpy(dtype=str)
    host_arch = pd.Index(arch_names).get_indexer(hosts["arch"])
    host_pos = pd.Index(hosts["host_id"]).get_indexer(tasks["host_id"])
    current_arch = host_arch[host_pos]

    tput = per_core_throughput(fleet)
    ref = tput[list(arch_names).index(reference_arch(fleet))]
    dims = tuple(d for d in trace.dims)
    limits = task_limits(trace, preset, profiles)
    demand = np.empty((len(tasks), len(dims)))
    capacity = np.empty((len(hosts), len(dims)))
    for j, dim in enumerate(dims):
        cap = fleet.capacity(dim).to_numpy(dtype=float)
        if dim == "cpu":
            demand[:, j] = limits[dim].to_numpy() * tput[current_arch] / ref
            capacity[:, j] = cap[host_arch] * tput[host_arch] / ref
        else:
            demand[:, j] = limits[dim].to_numpy()
            capacity[:, j] = cap[host_arch]
    frag_dims = tuple(j for j, d in enumerate(dims) if d in ("cpu", "mem"))

    eligible = np.ones((len(tasks), len(arch_names)), dtype=bool)
    if "allowed_archs" in tasks.columns:
        allowed = tasks["allowed_archs"]
        constrained = allowed.notna().to_numpy()
        if constrained.any():
            lists = allowed[constrained].str.split("|")
            members = pd.DataFrame({"row": np.repeat(np.flatnonzero(constrained), lists.str.len()), "arch": np.concatenate(lists.to_numpy()).astype(str)})
            members["arch"] = members["arch"].str.strip()
            mask = np.zeros_like(eligible)
            mask[members["row"].to_numpy(), pd.Index(arch_names).get_indexer(members["arch"])] = True
            eligible[constrained] = mask[constrained]
    # A task larger than an empty host of an architecture can never run there.
    arch_cap = np.stack([capacity[np.argmax(host_arch == a)] if (host_arch == a).any() else np.zeros(len(dims)) for a in range(len(arch_names))])
    eligible &= (demand[:, None, :] <= arch_cap[None, :, :] + 1e-9).all(axis=2)

    sens_dims = tuple(preset.sensitivity)
    sens_demand = np.zeros((len(tasks), len(sens_dims)))
    sens_capacity = np.zeros((len(hosts), len(sens_dims)))
    if sens_dims:
        if sensitivity is None:
            raise InputError(f"config '{preset.name}' uses sensitivity ({', '.join(sens_dims)}) but no sensitivity scores were given")
        measured = sensitivity["measured_on"].to_numpy(dtype=object)
        # The need a score is a fraction of: the task's requested CPU in compute units (module doc of packer.characterization.normalize).
        need_cu = tasks["cpu_request"].to_numpy(dtype=float) * tput[current_arch]
        for k, dim in enumerate(sens_dims):
            use = sensitivity_demand(sensitivity[dim].to_numpy(dtype=float), measured, fleet, dim, sensitivity_basis, need_cu)
            sens_demand[:, k] = np.nan_to_num(use)
            cap = sensitivity_capacity(fleet, dim, sensitivity_basis).to_numpy(dtype=float)
            sens_capacity[:, k] = np.nan_to_num(cap[host_arch], nan=np.inf)
            # A task that alone would exceed an architecture's sensitivity capacity may not move there.
            with np.errstate(divide="ignore", invalid="ignore"):
                alone = sens_demand[:, k][:, None] / cap[None, :]
            eligible &= ~(np.nan_to_num(alone, nan=0.0) > 1.0 + 1e-9)

    named = {service for pair in rules.anti_affinity for service in pair}
    unknown = sorted(named - set(tasks["service"].dropna().astype(str)))
    if unknown:
        # A misspelt service would otherwise constrain nothing, silently.
        raise InputError(f"{Path(trace.path) / TASKS_FILE}: column 'service': anti-affinity names service(s) no task has: "
                         f"{', '.join(unknown)}")
    movable = tasks["movable"].to_numpy(dtype=bool)
    domain = _codes(hosts["domain"]) if "domain" in hosts.columns else np.full(len(hosts), -1)
    return PlacementProblem(
        task_ids=tasks["task_id"].to_numpy(dtype=str),
        host_ids=hosts["host_id"].to_numpy(dtype=str),
        arch_names=arch_names,
        dims=dims,
        demand=demand,
        capacity=capacity,
        frag_dims=frag_dims,
        sens_dims=sens_dims,
        sens_demand=sens_demand,
        sens_capacity=sens_capacity,
        host_arch=host_arch.astype(np.int64),
        cost=fleet.archs["cost"].to_numpy(dtype=float)[host_arch],
        eligible=eligible,
        current=host_pos.astype(np.int64),
        movable=movable,
        job=_codes(tasks["job_id"]),
        job_ids=tasks["job_id"].to_numpy(dtype=str),
        domain=domain,
        rules=make_rules(rules, tasks["service"].to_numpy(dtype=object), host_pools(hosts)),
        goals=make_goals(goal, weights),
        fair=goal == "fair",
        config=preset.name,
        sens_basis=sensitivity_basis,
        task_class=task_class,
        # The most CPU a task can use: its request (or its limit if larger), in reference cores.
        rp_goals=task_goals(tasks, tput[current_arch] / ref, np.maximum(demand[:, dims.index("cpu")], tasks["cpu_request"].to_numpy(dtype=float) * tput[current_arch] / ref)),
    )
