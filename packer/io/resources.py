"""Where the shipped models and the sample trace are: inside an installed package, or at the top of a checkout.

The project keeps ``models/`` (the fleet catalog, Table III's sensitivity scores,
Table IV's presets) and ``traces/sample/`` at the top of the checkout, where a user
reads and edits them; the wheel ships them as the packages ``packer.models`` and
``packer.sample`` (a build-time mapping in ``pyproject.toml``), found here through
the import system. Running from a checkout without installing falls back to
the checkout's folders.
"""
from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[2]
#: The name a command line uses for the shipped sample trace (``packer solve packer:sample``).
SAMPLE_NAME = "packer:sample"


def _shipped(package: str, checkout: Path) -> Path:
    # The data folders have no __init__.py: they are namespace packages, whose
    # importlib.resources.files() is no plain folder on Python 3.11, so ask for the spec's location.
    spec = find_spec(package)
    locations = [Path(p) for p in (spec.submodule_search_locations or [])] if spec is not None else []
    return next((p for p in locations if p.is_dir()), checkout)


def models_dir() -> Path:
    """The folder of the shipped models (``fleet.toml``, ``presets.toml``, ``sensitivity.csv``)."""
    return _shipped("packer.models", _CHECKOUT / "models")


def sample_trace() -> Path:
    """The folder of the shipped sample trace (400 tasks on 140 hosts, one day of usage)."""
    return _shipped("packer.sample", _CHECKOUT / "traces" / "sample")
