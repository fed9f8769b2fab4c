"""SIGINT and SIGTERM during a solve: the first stops the search and keeps its best plan, a second aborts.

``packer solve`` runs inside :func:`handle_signals`. Its handler turns the first SIGINT
or SIGTERM into a *stop request*:

* it records the signal (:func:`stop_signal`);
* it stops the native searches running now (CP-SAT, HiGHS, a CBC process), which
  registered how to with :func:`on_stop`: they return their best solution as if their
  time limit had been reached;
* inside a :func:`stoppable` region (pure-Python search loops that catch
  ``KeyboardInterrupt`` and keep their best, profiling) it raises ``KeyboardInterrupt``;
  elsewhere (turning a result into a plan, writing it) the work goes on, and the next
  :func:`stoppable` region entered raises at once.

A second signal raises :class:`Abort` wherever the program is (``finally`` blocks still
run, so atomic writes leave nothing behind) and restores the default dispositions, so
a third one kills the process.

Without :func:`handle_signals` (the Python API), nothing changes: SIGINT raises
``KeyboardInterrupt`` as Python's default handler does; the native searches still
stop and re-raise it (:func:`run_stoppable`).
"""
from __future__ import annotations

import contextlib
import logging
import math
import signal
import threading
import time
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

#: The signals a stop request comes from.
SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Seconds between the repeated stops :func:`run_stoppable` sends a native solve after a stop request.
POLL_S = 0.1


class Abort(BaseException):
    """A second SIGINT or SIGTERM: leave at once. ``signum`` is that signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"aborted by {signal.Signals(signum).name}")
        self.signum = signum

    def __reduce__(self):  # a worker process's Abort crosses to the main process (packer.parallel)
        return (Abort, (self.signum,))


class _State:
    """What the handler knows: the first signal, the native searches to stop, whether to raise ``KeyboardInterrupt``."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.signum: int | None = None
        self.stoppers: list[Callable[[], None]] = []
        self.armed = False


_state = _State()


def stop_signal() -> int | None:
    """The signal number of the stop request, None while there is none."""
    return _state.signum


def stop_requested() -> bool:
    """True once a SIGINT or SIGTERM asked the solve to stop (only under :func:`handle_signals`)."""
    return _state.signum is not None


def _handler(signum: int, frame) -> None:
    if _state.signum is not None:
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        raise Abort(signum)
    _state.signum = signum
    for stop in list(_state.stoppers):
        stop()
    if _state.armed:
        raise KeyboardInterrupt


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """Install the SIGINT/SIGTERM handler of the module doc for the block (main thread only); restore the old ones after."""
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    _state.reset()
    for sig in SIGNALS:
        signal.signal(sig, _handler)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _state.reset()


@contextlib.contextmanager
def _armed(value: bool) -> Iterator[None]:
    before = _state.armed
    _state.armed = value
    try:
        if value and _state.signum is not None:
            raise KeyboardInterrupt
        yield
    finally:
        _state.armed = before
    if before and _state.signum is not None:
        raise KeyboardInterrupt


def stoppable() -> contextlib.AbstractContextManager[None]:
    """A region a stop request interrupts with ``KeyboardInterrupt`` (at once if one is already pending).

    For search loops that catch it and keep their best, and for work whose result is
    worthless when cut short (profiling). No effect without :func:`handle_signals`.
    """
    return _armed(True)


def held() -> contextlib.AbstractContextManager[None]:
    """A region a stop request does not cut short (e.g. applying a found improvement); a pending
    stop request raises ``KeyboardInterrupt`` when it returns into a :func:`stoppable` region."""
    return _armed(False)


@contextlib.contextmanager
def on_stop(stop: Callable[[], None]) -> Iterator[None]:
    """Call ``stop`` (it must be quick and thread-safe) on a stop request during the block, or at once if one is pending."""
    _state.stoppers.append(stop)
    try:
        if _state.signum is not None:
            stop()
        yield
    finally:
        _state.stoppers.remove(stop)


def run_stoppable(work: Callable[[], T], stop: Callable[[], None], grace: float = math.inf) -> T:
    """``work()`` (a native solve that holds the thread in C++), stopped by ``stop()`` on a stop request; its result.

    From the main thread, ``work`` runs in a worker thread so that signal handlers run
    at once (Python runs them only in the main thread, between bytecodes); after a
    stop request ``stop`` is repeated every :data:`POLL_S` seconds until ``work``
    returns, so it must be idempotent. A ``work`` that has not returned ``grace``
    seconds after the stop request (a solver that ignores ``stop``) is left to finish in
    its thread and ``KeyboardInterrupt`` is raised. Should the wait be interrupted
    (``KeyboardInterrupt``, :class:`Abort`), ``work`` is stopped and, but for an
    :class:`Abort`, awaited (at most ``grace`` seconds); then the exception propagates.
    """
    if threading.current_thread() is not threading.main_thread():
        with on_stop(stop):
            return work()
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # handed to the waiting main thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="packer-native-solve", daemon=True)
    wait = None if math.isinf(grace) else grace
    with on_stop(stop):
        worker.start()
        asked = None
        try:
            while worker.is_alive():
                worker.join(POLL_S)
                if _state.signum is not None and worker.is_alive():
                    stop()  # again: a stop sent before the solver started may have been lost
                    asked = asked or time.monotonic()
                    if time.monotonic() - asked > grace:
                        break
        except Abort:
            stop()
            raise
        except BaseException:
            stop()
            worker.join(wait)
            raise
    if worker.is_alive():
        log.warning("a native solver ignored the stop request for %g s; it is left to finish in the background", grace)
        raise KeyboardInterrupt
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
