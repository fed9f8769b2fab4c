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
    """Read a fleet catalog (TOML). Raises :class:`InputError` naming the file and key on bad input."""
    path = Path(path)
    name = str(path)
    doc = read_toml(path, "fleet catalog")

    types = doc.get("types", {})
    archs = doc.get("arch", {})
    problems: list[Problem] = []
    if not archs:
        problems.append(Problem(name, "arch", "the catalog defines no [arch.*] tables", 0))
    rows = []
    for arch, spec in archs.items():
        missing = [k for k in _REQUIRED if k not in spec]
        if missing:
            problems.append(Problem(name, f"arch.{arch}", f"missing {', '.join(missing)}", 0))
            continue
        utype = str(spec["type"])
        cost = spec.get("cost", types.get(utype, {}).get("cost"))
        if cost is None:
            problems.append(Problem(name, f"arch.{arch}", f"type '{utype}' has no cost in [types.{utype}] and the architecture sets none", 0))
            continue
        row = {"arch": arch, "type": utype, "cost": float(cost)}
        for key, value in spec.items():
            if key in _ATTRIBUTES:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                problems.append(Problem(name, f"arch.{arch}.{key}", f"unsupported value {value!r}", 0))
                continue
            if isinstance(value, str):
                row[key] = value
            elif value < 0:
                problems.append(Problem(name, f"arch.{arch}.{key}", f"capacity must be >= 0, got {value}", 0))
            else:
                row[key] = float(value)
        row["score"] = float(spec["score"])
        if row["score"] <= 0 or row.get("cores", 0) <= 0 or row["cost"] < 0:
            problems.append(Problem(name, f"arch.{arch}", "score and cores must be > 0 and cost >= 0", 0))
        rows.append(row)
    if problems:
        raise InputError(problems)

    table = pd.DataFrame(rows).set_index("arch")
    table["cpu"] = table["cores"]
    numeric = [c for c in table.columns if c not in _ATTRIBUTES | {"cores", "cpu"} and pd.api.types.is_float_dtype(table[c])]
    return Fleet(archs=table, dims=("cpu", *numeric), source=name)
