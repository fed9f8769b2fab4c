"""A constraints file: the rules a plan must keep, for ``packer solve --constraints FILE`` (and ``sweep``).

TOML, every key optional::

    max_moves = 400                 # or "unlimited"
    spread_host = 2                 # at most 2 tasks of a job per host it gains
    spread_domain = 4               # ... per failure domain
    min_rp = 0.0                    # relative-performance guard
    max_new_at_risk = 0             # tasks-at-risk guard
    anti_affinity = [["KeyVal1", "KeyVal3"], ["Rank2", "Rank2"]]

The keys and their meaning are :class:`packer.model.build.RuleOptions`'s. Flags given
on the command line override the file's values; anti-affinity pairs from both are
kept.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from packer.errors import InputError, Problem
from packer.io.toml_file import read_toml
from packer.model.build import RuleOptions, service_pairs
from packer.model.rpf import RP_CAP, RP_FLOOR

_COUNTS = ("spread_host", "spread_domain", "max_new_at_risk")


def read_constraints(path: str | Path, base: RuleOptions = RuleOptions()) -> RuleOptions:
    """``base`` with the rules of the constraints file ``path`` (module doc); problems raise :class:`InputError` naming file and key."""
    path = Path(path)
    doc = read_toml(path, "constraints file")
    name = str(path)
    problems: list[Problem] = []
    values: dict[str, Any] = {}
    known = ("max_moves", *_COUNTS, "min_rp", "anti_affinity")
    for key in sorted(set(doc) - set(known)):
        problems.append(Problem(name, key, f"unknown key (known: {', '.join(known)})", 0))
    if "max_moves" in doc:
        value = doc["max_moves"]
        if isinstance(value, str) and value.lower() == "unlimited":
            values["max_moves"] = None
        elif _whole(value) and value >= 0:
            values["max_moves"] = value
        else:
            problems.append(Problem(name, "max_moves", f"expected a whole number >= 0 or \"unlimited\", got {value!r}", 0))
    for key in _COUNTS:
        if key in doc:
            value, least = doc[key], 0 if key == "max_new_at_risk" else 1
            if _whole(value) and value >= least:
                values[key] = value
            else:
                problems.append(Problem(name, key, f"expected a whole number >= {least}, got {value!r}", 0))
    if "min_rp" in doc:
        value = doc["min_rp"]
        if isinstance(value, (int, float)) and not isinstance(value, bool) and RP_FLOOR <= value <= RP_CAP:
            values["min_rp"] = float(value)
        else:
            problems.append(Problem(name, "min_rp", f"expected a number from {RP_FLOOR:g} to {RP_CAP:g} (0 = at goal), got {value!r}", 0))
    if "anti_affinity" in doc:
        try:
            values["anti_affinity"] = base.anti_affinity + service_pairs(doc["anti_affinity"])
        except ValueError as exc:
            problems.append(Problem(name, "anti_affinity", str(exc), 0))
    if problems:
        raise InputError(problems)
    return replace(base, **values)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
