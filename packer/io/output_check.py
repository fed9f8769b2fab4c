"""Check, before any work, that an output can be written where the user asked.

Outputs are written atomically beside their destination (:mod:`packer.io.atomic`),
so what must be writable is the destination's parent folder, or, when that does not
exist yet, the nearest folder above it (the missing folders are created).
"""
from __future__ import annotations

import os
from pathlib import Path

from packer.errors import InputError


def check_output_writable(out: str | os.PathLike, flag: str = "--out", folder: bool = True) -> None:
    """Raise :class:`InputError` naming ``flag`` when ``out`` cannot be written.

    ``folder``: the output is a folder (else a file). Fails when ``out`` exists as the
    other kind, when a path component above it is a file, or when the nearest existing
    folder above it is not writable (read-only folder or file system).
    """
    out = Path(out)
    if out.exists() and out.is_dir() != folder:
        kind = "a file" if folder else "a folder"
        raise InputError(f"{flag} {out}: exists and is {kind}; choose another {flag}")
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"{flag} {out}: cannot be created, {parent} is a file, not a folder; choose another {flag}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {out}: cannot write in {parent} (permission denied or read-only); choose another {flag}")
