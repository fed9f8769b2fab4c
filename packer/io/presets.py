"""Configuration presets (the colocation paper's Table IV): which limit each dimension uses."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packer.errors import InputError
from packer.io.fleet import MODELS_DIR
from packer.io.toml_file import read_toml

DEFAULT_PRESETS = MODELS_DIR / "presets.toml"
_LIMIT = re.compile(r"^(request|p(\d{1,2}(\.\d+)?|100))$")


@dataclass(frozen=True)
class Preset:
    """A configuration: ``limits[dim]`` is ``"request"`` or ``"pNN"``; ``sensitivity`` lists dimensions."""

    name: str
    title: str
    description: str
    limits: dict[str, str]
    sensitivity: tuple[str, ...]

    def limit(self, dim: str) -> str:
        """The limit used for ``dim``: its configured one, else ``"request"``."""
        return self.limits.get(dim, "request")

    @property
    def percentiles(self) -> set[float]:
        """Usage percentiles (0-100) this preset needs from the profiles."""
        return {float(v[1:]) for v in self.limits.values() if v != "request"}


def load_presets(path: str | Path = DEFAULT_PRESETS) -> dict[str, Preset]:
    """Read presets from TOML, keyed by name (``baseline``, ``p99``, ...)."""
    path = Path(path)
    doc = read_toml(path, "presets file")
    presets = {}
    for name, spec in doc.items():
        limits = {str(k): str(v) for k, v in spec.get("limits", {}).items()}
        bad = {k: v for k, v in limits.items() if not _LIMIT.match(v)}
        if bad:
            raise InputError(f"{path}: preset '{name}': limits must be 'request' or 'pNN', got {bad}")
        presets[name] = Preset(
            name=name,
            title=str(spec.get("title", name)),
            description=str(spec.get("description", "")),
            limits=limits,
            sensitivity=tuple(spec.get("sensitivity", ())),
        )
    return presets


def get_preset(name: str, path: str | Path = DEFAULT_PRESETS) -> Preset:
    """One preset by name; an unknown name raises :class:`InputError` listing the known ones."""
    presets = load_presets(path)
    key = name.lower().replace("_", "-").replace(" ", "-")
    if key not in presets:
        raise InputError(f"unknown config '{name}'; known: {', '.join(presets)}")
    return presets[key]
