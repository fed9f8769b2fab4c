"""Write outputs atomically: a crash or Ctrl-C never leaves a half-written result.

Files are written beside their destination under a temporary name and moved into
place with ``os.replace``; folders are built in a temporary sibling and swapped in
at the end, so a reader sees either the old output or the complete new one.

Temporary siblings are named ``.NAME.PID.XXXX.tmp`` (and ``.NAME.PID.XXXX.old`` for the
folder being replaced) after the process writing them: a run killed outright
(SIGKILL, power loss) leaves them behind, and the next write to NAME removes those whose
process is gone. Concurrent writers of one folder swap it in turn, under an exclusive
``flock`` on the parent folder, so each swap sees a consistent state and the last one wins.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator


def _prefix(path: Path) -> str:
    """The start of the temporary names of this process for ``path``."""
    return f".{path.name}.{os.getpid()}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_dead_siblings(path: str | os.PathLike) -> list[Path]:
    """Remove the temporary siblings of ``path`` (``.NAME.PID.XXXX.tmp`` / ``.old``) whose process is no longer running; returns them."""
    path = Path(path)
    removed = []
    for sibling in path.parent.glob(f".{_glob_escape(path.name)}.*"):
        if sibling.suffix not in (".tmp", ".old"):
            continue
        pid = sibling.name[len(path.name) + 2:].split(".", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        _remove(sibling)
        removed.append(sibling)
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _glob_escape(name: str) -> str:
    """``name`` with the glob metacharacters made literal."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``folder`` for the block (released when the process dies)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path; on success it replaces ``path``, on error it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_siblings(path)
    fd, tmp = tempfile.mkstemp(prefix=_prefix(path), suffix=".tmp", dir=path.parent)
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
    remove_dead_siblings(path)
    tmp = Path(tempfile.mkdtemp(prefix=_prefix(path), suffix=".tmp", dir=path.parent))
    # mkdtemp makes the folder private (0700); outputs should get the usual permissions.
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)
    old = tmp.with_suffix(".old")
    try:
        yield tmp
        with _locked(path.parent):
            if path.exists():
                os.replace(path, old)
            os.replace(tmp, path)
    finally:
        for leftover in (tmp, old):
            if leftover.exists() or leftover.is_symlink():
                _remove(leftover)


def refuse_to_overwrite_input(output: str | os.PathLike, *inputs: str | os.PathLike) -> None:
    """Raise :class:`~packer.errors.InputError` if ``output`` is, contains or lies inside an input."""
    from packer.errors import InputError

    out = Path(output).resolve()
    for given in inputs:
        src = Path(given).resolve()
        if out == src or src in out.parents or out in src.parents:
            raise InputError(f"output {output} would overwrite the input {given}; choose another --out")
