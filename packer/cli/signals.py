"""How a command ends on SIGINT/SIGTERM (:mod:`packer.interrupt`): one line saying what was written, then exit 128 + signal."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from packer import interrupt


@dataclass
class Written:
    """What the command has written so far (a plan, a sweep), for the line a signal prints; set it once written."""

    value: Any = None


@contextlib.contextmanager
def exit_on_signals(echo: Callable[..., None]) -> Iterator[Written]:
    """Run the block under :func:`packer.interrupt.handle_signals`; after a stop request or an abort, print and exit.

    ``echo(signum, written, aborted=False)`` prints the line: ``written`` is ``None`` when a
    stop came before anything was written (the block raised ``KeyboardInterrupt``).
    """
    written = Written()
    with interrupt.handle_signals():
        try:
            yield written
        except KeyboardInterrupt:
            signum = interrupt.stop_signal() or signal.SIGINT
            echo(signum, None)
            exit_at_once(128 + signum)
        except interrupt.Abort as exc:
            echo(exc.signum, written.value, aborted=True)
            exit_at_once(128 + exc.signum)
        if interrupt.stop_requested():
            echo(interrupt.stop_signal(), written.value)
            exit_at_once(128 + interrupt.stop_signal())


def exit_at_once(code: int) -> None:
    """Exit with ``code`` without waiting for a native solver's thread a stop request left running (every write is atomic)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
