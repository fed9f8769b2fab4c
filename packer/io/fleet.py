"""The fleet catalog: server architectures, their capacities, scores and costs.

A catalog is a TOML file (``models/fleet.toml``) with a ``[types.NAME]`` table per
umbrella type (its ``cost`` per host) and an ``[arch.NAME]`` table per
architecture. Capacities are named by resource dimension, so new dimensions (say
``gpu``) need no code: ``cores`` is the ``cpu`` capacity (cores), ``mem`` GiB,
``net`` and ``membw`` Gbps, any other number a capacity in the trace's unit for that
dimension. ``score`` is the architecture's throughput score; string keys (such as
``gpu_model``) are attributes that constraints may match.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from packer.errors import InputError, Problem
from packer.io.resources import models_dir
from packer.io.toml_file import read_toml

MODELS_DIR = models_dir()
DEFAULT_FLEET = MODELS_DIR / "fleet.toml"

#: Keys of an ``[arch.*]`` table that are not resource capacities.
_ATTRIBUTES = {"type", "cost", "score"}
_REQUIRED = ("type", "cores", "mem", "score")
#: Keys that must be numbers: (least value, what the number is).
_NUMBERS = {"score": (0.0, "throughput score"), "cores": (0.0, "cores"), "mem": (0.0, "GiB"), "net": (0.0, "Gbps"),
            "membw": (0.0, "Gbps"), "gpu": (0.0, "GPUs")}
#: Keys that must be > 0 (a host without cores or throughput runs nothing).
_POSITIVE = {"score", "cores"}


@dataclass(frozen=True)
class Fleet:
    """Architectures of a fleet.

    ``archs`` is indexed by architecture name with columns ``type`` (umbrella
    type), ``cost`` (cost units per host), ``score`` (throughput score),
    ``cores``, one capacity column per resource dimension (``cpu`` = cores, ``mem``
    GiB, ``net`` and ``membw`` Gbps, ...) and any string attributes.
    ``dims`` lists the capacity columns.
    """

    archs: pd.DataFrame
    dims: tuple[str, ...]
    source: str

    def capacity(self, dim: str) -> pd.Series:
        """Capacity per architecture in dimension ``dim`` (0 where the catalog has none)."""
        if dim not in self.archs.columns:
            return pd.Series(0.0, index=self.archs.index, name=dim)
        return self.archs[dim].fillna(0.0).astype(float)

    @property
    def per_core_throughput(self) -> pd.Series:
        """``score / cores`` per architecture: how much work one core does (Broadwell18 core = 1/32)."""
        return self.archs["score"] / self.archs["cores"]


def load_fleet(path: str | Path = DEFAULT_FLEET) -> Fleet:
    """Read a fleet catalog (TOML) and check every value; problems raise one :class:`InputError` naming the file and keys."""
    path = Path(path)
    name = str(path)
    doc = read_toml(path, "fleet catalog")

    types = doc.get("types", {})
    archs = doc.get("arch", {})
    problems: list[Problem] = []
    if not isinstance(types, dict) or not all(isinstance(spec, dict) for spec in types.values()):
        problems.append(Problem(name, "types", "expected [types.NAME] tables", 0))
        types = {}
    if not isinstance(archs, dict) or not all(isinstance(spec, dict) for spec in archs.values()):
        problems.append(Problem(name, "arch", "expected [arch.NAME] tables", 0))
        archs = {}
    elif not archs:
        problems.append(Problem(name, "arch", "the catalog defines no [arch.*] tables", 0))
    rows = []
    for arch, spec in archs.items():
        row, arch_problems = _arch_row(name, arch, spec, types)
        problems += arch_problems
        if not arch_problems:
            rows.append(row)
    problems += _mixed_kinds(name, rows)
    if problems:
        raise InputError(problems)

    table = pd.DataFrame(rows).set_index("arch")
    table["cpu"] = table["cores"]
    numeric = [c for c in table.columns if c not in _ATTRIBUTES | {"cores", "cpu"} and pd.api.types.is_float_dtype(table[c])]
    return Fleet(archs=table, dims=("cpu", *numeric), source=name)


def _number(value) -> bool:
    """A finite TOML number (TOML allows nan and inf; a bool is not a number here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _arch_row(file: str, arch: str, spec: dict, types: dict) -> tuple[dict, list[Problem]]:
    """One ``[arch.NAME]`` table as a row of :attr:`Fleet.archs`, and its problems."""
    missing = [k for k in _REQUIRED if k not in spec]
    if missing:
        return {}, [Problem(file, f"arch.{arch}", f"missing {', '.join(missing)}", 0)]
    problems = []
    utype = str(spec["type"])
    cost = spec.get("cost", types.get(utype, {}).get("cost"))
    where = f"arch.{arch}.cost" if "cost" in spec else f"types.{utype}.cost"
    if cost is None:
        problems.append(Problem(file, f"arch.{arch}", f"type '{utype}' has no cost in [types.{utype}] and the architecture sets none", 0))
    elif not (_number(cost) and cost >= 0):
        problems.append(Problem(file, where, f"expected a finite number of cost units >= 0, got {cost!r}", 0))
    row = {"arch": arch, "type": utype, "cost": float(cost) if not problems else None}
    for key, value in spec.items():
        if key in ("type", "cost"):
            continue
        if key in _NUMBERS or not isinstance(value, str):
            least, unit = _NUMBERS.get(key, (0.0, "capacity"))
            if not (_number(value) and value >= least and (value > 0 or key not in _POSITIVE)):
                bound = "> 0" if key in _POSITIVE else f">= {least:g}"
                problems.append(Problem(file, f"arch.{arch}.{key}", f"expected a finite number ({unit}) {bound}, got {value!r}", 0))
                continue
            row[key] = float(value)
        else:
            row[key] = value
    return row, problems


def _mixed_kinds(file: str, rows: list[dict]) -> list[Problem]:
    """A key that is a number on some architectures and text on others is neither a capacity nor an attribute."""
    kinds: dict[str, set[type]] = {}
    for row in rows:
        for key, value in row.items():
            kinds.setdefault(key, set()).add(str if isinstance(value, str) else float)
    return [Problem(file, f"arch.*.{key}", "a number on some architectures and text on others; use one kind", 0)
            for key, seen in kinds.items() if len(seen) > 1]
