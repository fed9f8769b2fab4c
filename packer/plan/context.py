"""What a plan was solved on, and how to rebuild that problem from the inputs alone.

:class:`PlanContext` records every option that shapes the problem (trace, fleet,
configuration, profiling, characterization, rules, goal and weights, solver); it is
written into a plan's ``summary.json`` so that :mod:`packer.plan.verify` (and anyone)
can rebuild exactly the problem the plan was solved on with
:func:`problem_from_context`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pandas as pd

from packer.characterization.normalize import DEFAULT_SENSITIVITY_BASIS
from packer.characterization.sensitivity import DEFAULT_CLASS_AGGREGATE
from packer.errors import InputError, Problem
from packer.io.fleet import DEFAULT_FLEET, Fleet, load_fleet
from packer.io.presets import DEFAULT_PRESETS, Preset
from packer.io.trace import FLEET_FILE, Trace
from packer.model.build import GoalWeights, RuleOptions, build_problem, service_pairs
from packer.model.problem import PlacementProblem

if TYPE_CHECKING:
    from packer.characterization.characterize import Characterization

SUMMARY_FILE = "summary.json"


#: Packages whose versions a plan records.
VERSIONED_PACKAGES = ("packer", "numpy", "pandas", "pyarrow", "ortools", "pulp")


def package_versions() -> dict[str, str | None]:
    """Installed version of each of :data:`VERSIONED_PACKAGES` (``None`` if not installed)."""
    out: dict[str, str | None] = {}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


@dataclass(frozen=True)
class PlanContext:
    """Everything the verifier needs to rebuild the problem from the inputs alone.

    ``trace``: the trace folder. ``fleet``: a catalog path, ``"trace"`` (the trace's
    own ``fleet.toml``) or ``"default"`` (the shipped catalog). ``config``: preset
    name in ``presets`` (a presets TOML path). Profiles: ``percentiles`` (0-100),
    ``window_s`` (seconds), ``skip_invalid_usage``. Characterization (used only when
    the preset has sensitivity dimensions): ``sensitivity`` table path (``None`` =
    the shipped Table III), ``k`` (``None`` = elbow), ``kmax``,
    ``characterize_seed``, ``characterize_percentile``, ``class_scores`` (``mean`` or
    ``max`` of a class's measured services), ``classes_from`` (reference class centres,
    ``None`` = fit K-means), ``sensitivity_basis`` (``need`` or ``host``: what a score is
    a fraction of, :mod:`packer.characterization.normalize`). ``goal``: ``tco``, ``hosts``
    or ``fair``; ``weights``: the secondary goals' :class:`~packer.model.build.GoalWeights`;
    ``rules``: the :class:`~packer.model.build.RuleOptions` (move budget, spread, guards,
    anti-affinity). Solver: ``solver`` name, ``time_limit_s``, ``seed``, ``deterministic``
    (the time limit counted as work, :mod:`packer.solvers.clock`), ``start`` (the plan
    folder the search started from, if any: a record, not needed to rebuild the problem). ``versions``:
    package versions at solve time.
    """

    trace: str
    fleet: str = "default"
    config: str = "p99"
    presets: str = str(DEFAULT_PRESETS)
    percentiles: tuple[float, ...] = (99.0,)
    window_s: int = 60
    skip_invalid_usage: bool = False
    sensitivity: str | None = None
    k: int | None = None
    kmax: int = 8
    characterize_seed: int = 0
    characterize_percentile: float = 99.0
    class_scores: str = DEFAULT_CLASS_AGGREGATE
    classes_from: str | None = None
    sensitivity_basis: str = DEFAULT_SENSITIVITY_BASIS
    goal: str = "tco"
    weights: GoalWeights = GoalWeights()
    rules: RuleOptions = RuleOptions()
    solver: str = ""
    time_limit_s: float | None = None
    seed: int = 0
    deterministic: bool = False
    start: str | None = None
    versions: dict[str, str | None] = field(default_factory=package_versions)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; input paths are made absolute so the plan can be verified from any folder."""
        out = dataclasses.asdict(self)
        out["trace"] = str(Path(self.trace).resolve())
        out["presets"] = str(Path(self.presets).resolve())
        if self.fleet not in ("trace", "default"):
            out["fleet"] = str(Path(self.fleet).resolve())
        for key in ("sensitivity", "classes_from", "start"):
            if out[key] is not None:
                out[key] = str(Path(out[key]).resolve())
        out["percentiles"] = [float(q) for q in self.percentiles]
        out["rules"]["anti_affinity"] = [list(pair) for pair in self.rules.anti_affinity]
        return out

    @classmethod
    def from_dict(cls, doc: dict[str, Any], source: str = SUMMARY_FILE) -> "PlanContext":
        """Inverse of :meth:`to_dict`; unknown or missing keys raise :class:`InputError` naming ``source``.

        Contexts of plans written before format ``packer-plan/4`` (top-level move budget
        and spread, guards and goal inside ``weights``) are read into today's shape, and
        those before ``packer-plan/3`` with the sensitivity reading of their time.
        """
        values = _upgraded(dict(doc))
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise InputError([Problem(source, "context", f"unknown key(s) {', '.join(unknown)}", 0)])
        if "trace" not in values:
            raise InputError([Problem(source, "context.trace", "missing", 0)])
        bad = [f"{key}={value!r}" for key, value in values.items() if not _has_type(value, _CONTEXT_TYPES[key])]
        for part, types in (("weights", _WEIGHT_TYPES), ("rules", _RULE_TYPES)):
            nested = values.get(part, {})
            if isinstance(nested, dict):
                bad += [f"{part}.{key}={value!r}" for key, value in nested.items() if key not in types or not _has_type(value, types[key])]
        if bad:
            raise InputError([Problem(source, "context", f"value(s) of the wrong type or unknown: {', '.join(bad)}", 0)])
        try:
            if "weights" in values:
                values["weights"] = GoalWeights(**values["weights"])
            if "rules" in values:
                rules = dict(values["rules"])
                rules["anti_affinity"] = service_pairs(rules.get("anti_affinity", []))
                values["rules"] = RuleOptions(**rules)
            if "percentiles" in values:
                values["percentiles"] = tuple(float(q) for q in values["percentiles"])
        except (TypeError, ValueError) as exc:
            raise InputError([Problem(source, "context", f"unreadable: {exc}", 0)]) from None
        return cls(**values)

    def problem_options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`packer.model.build.build_problem` this context records."""
        return {"goal": self.goal, "weights": self.weights, "rules": self.rules, "sensitivity_basis": self.sensitivity_basis}


def _upgraded(values: dict[str, Any]) -> dict[str, Any]:
    """A context written by an older packer, in today's keys (see :meth:`PlanContext.from_dict`)."""
    # Before packer-plan/3 there was no sensitivity basis: a score was read on the whole host, classes by their maximum.
    values.setdefault("sensitivity_basis", "host")
    values.setdefault("class_scores", "max")
    if "rules" in values:
        return values
    weights = dict(values.get("weights") or {})
    rules = {key: values.pop(key) for key in ("max_moves", "spread_host", "spread_domain") if key in values}
    for key in ("min_rp", "max_new_at_risk"):
        if key in weights:
            rules[key] = weights.pop(key)
    if "goal" in weights:
        values["goal"] = weights.pop("goal")
    if "weights" in values:
        values["weights"] = weights
    values["rules"] = rules
    return values


_NONE = type(None)
#: JSON types of the context's keys (bool is not accepted where a number is meant).
_CONTEXT_TYPES: dict[str, tuple[type, ...]] = {
    "trace": (str,), "fleet": (str,), "config": (str,), "presets": (str,), "solver": (str,), "sensitivity": (str, _NONE),
    "percentiles": (list,), "window_s": (int,), "skip_invalid_usage": (bool,), "k": (int, _NONE), "kmax": (int,),
    "characterize_seed": (int,), "characterize_percentile": (int, float), "class_scores": (str,), "classes_from": (str, _NONE),
    "sensitivity_basis": (str,), "goal": (str,), "weights": (dict,), "rules": (dict,), "time_limit_s": (int, float, _NONE),
    "seed": (int,), "deterministic": (bool,), "start": (str, _NONE), "versions": (dict,),
}
_WEIGHT_TYPES = {"fragmentation": (int, float), "sensitivity": (int, float), "moves": (int, float)}
_RULE_TYPES = {"max_moves": (int, _NONE), "spread_host": (int, _NONE), "spread_domain": (int, _NONE), "min_rp": (int, float, _NONE),
               "max_new_at_risk": (int, _NONE), "anti_affinity": (list,)}


def _has_type(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def fleet_choice(fleet: str | Path | None, trace: str | Path) -> str:
    """The context's ``fleet`` for a ``--fleet`` option: the path, else ``"trace"`` or ``"default"`` as read_trace chooses."""
    if fleet is not None:
        return str(Path(fleet).resolve())
    return "trace" if (Path(trace) / FLEET_FILE).exists() else "default"


def resolve_fleet(choice: str, trace: str | Path) -> Fleet:
    """Load the fleet a context names (see :class:`PlanContext`); ``"trace"`` means ``trace``'s own ``fleet.toml``."""
    if choice == "trace":
        return load_fleet(Path(trace) / FLEET_FILE)
    if choice == "default":
        return load_fleet(DEFAULT_FLEET)
    return load_fleet(choice)


def problem_from_context(
    trace: Trace,
    preset: Preset,
    context: PlanContext,
    profiles: pd.DataFrame | None = None,
    progress: Callable[[int], None] | None = None,
    characterization: Characterization | None = None,
) -> PlacementProblem:
    """The problem ``context`` describes, computed from the trace (profiles and characterization as recorded).

    ``profiles`` may be passed to reuse a profiling run made with the same options;
    ``progress`` is called with usage rows read while profiling; ``characterization``
    may be passed to reuse a :func:`packer.characterization.characterize.characterize` run made on those
    profiles with the context's options (its scores and class labels are used as they are).
    """
    if profiles is None and (preset.percentiles or preset.sensitivity):
        from packer.characterization.profile import profile_tasks

        profiles = profile_tasks(trace, context.percentiles, context.window_s, skip_invalid=context.skip_invalid_usage, progress=progress).profiles
    scores = task_class = None
    if preset.sensitivity:
        result = characterization if characterization is not None else characterize_from_context(trace, profiles, context)
        scores = result.scores.tasks
        # Workload class labels ("<type>/<class>") for the per-class relative-performance report.
        labels = result.tasks.set_index("task_id")[["type", "class"]].reindex(trace.tasks["task_id"]).astype(str)
        task_class = (labels["type"] + "/" + labels["class"]).to_numpy(dtype=str)
    return build_problem(trace, preset, profiles, scores, task_class=task_class, **context.problem_options())


def characterize_from_context(trace: Trace, profiles: pd.DataFrame, context: PlanContext) -> Characterization:
    """The characterization ``context`` records (classes, class scores, basis), computed from the trace's profiles."""
    from packer.characterization.characterize import characterize
    from packer.characterization.classes import read_reference_classes
    from packer.characterization.sensitivity import DEFAULT_SENSITIVITY

    reference = read_reference_classes(context.classes_from) if context.classes_from else None
    return characterize(trace, profiles, k=context.k, kmax=context.kmax, seed=context.characterize_seed,
                        sensitivity=context.sensitivity or DEFAULT_SENSITIVITY, percentile=context.characterize_percentile,
                        aggregate=context.class_scores, basis=context.sensitivity_basis, reference=reference)


