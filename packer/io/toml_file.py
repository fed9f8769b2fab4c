"""Reading the TOML files a user edits (fleet catalog, presets, constraints), with errors that name the file."""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from packer.errors import InputError


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The TOML document at ``path``; a missing or unreadable file raises :class:`InputError` naming it as ``what`` (e.g. "fleet catalog")."""
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{path}: {what} is not valid TOML: {exc}") from None
