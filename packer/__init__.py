"""packer: repack datacenter tasks onto a heterogeneous fleet (the public API: :mod:`packer.api`).

The names below are re-exported lazily, so that importing one part of packer (say
``packer.io.trace``) does not load the solvers.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "characterize": "packer.api", "profile": "packer.api", "solve": "packer.api", "verify": "packer.api",
    "InfeasibleError": "packer.errors", "InputError": "packer.errors", "NoPlanError": "packer.errors", "Problem": "packer.errors",
    "Fleet": "packer.io.fleet", "load_fleet": "packer.io.fleet",
    "Preset": "packer.io.presets", "get_preset": "packer.io.presets", "load_presets": "packer.io.presets",
    "sample_trace": "packer.io.resources",
    "Trace": "packer.io.trace", "read_trace": "packer.io.trace", "write_trace": "packer.io.trace",
    "GoalWeights": "packer.model.build", "RuleOptions": "packer.model.build",
    "Plan": "packer.plan.plan", "read_plan": "packer.plan.plan",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'packer' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return __all__
