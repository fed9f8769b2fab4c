"""Write outputs atomically: a crash or Ctrl-C never leaves a half-written result.

Files are written beside their destination under a temporary name and moved into
place with ``os.replace``; folders are built in a temporary sibling and swapped in
at the end, so a reader sees either the old output or the complete new one.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path; on success it replaces ``path``, on error it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    umask = os.umask(0)
    os.umask(umask)
    tmp_path.chmod(0o666 & ~umask)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder; on success it becomes ``path`` (replacing any old one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    # mkdtemp makes the folder private (0700); outputs should get the usual permissions.
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)
    try:
        yield tmp
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.replace(path, old / path.name)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def refuse_to_overwrite_input(output: str | os.PathLike, *inputs: str | os.PathLike) -> None:
    """Raise :class:`~packer.errors.InputError` if ``output`` is, contains or lies inside an input."""
    from packer.errors import InputError

    out = Path(output).resolve()
    for given in inputs:
        src = Path(given).resolve()
        if out == src or src in out.parents or out in src.parents:
            raise InputError(f"output {output} would overwrite the input {given}; choose another --out")
