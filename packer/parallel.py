"""Where independent solves run: in this process, or on worker processes that hear stop requests.

Work that can run side by side (a sweep's points, a fleet's pools) is handed to a
:class:`concurrent.futures.Executor`, so any executor fits (a Dask client's too):

* :class:`InlineExecutor` runs each call at once in this process: ``--workers 1``, the
  serial path, with the signal handling of :mod:`packer.interrupt` unchanged;
* :func:`local_executor` is a :class:`StoppablePool`: a :class:`ProcessPoolExecutor` on
  the ``forkserver`` context (workers fork from a clean server process that imported the
  solvers and started no solver thread: OR-Tools' threads do not survive a plain ``fork``) whose workers each
  get their share of the cores (CP-SAT threads, :func:`packer.solvers.cpsat.set_default_workers`)
  and stop their search on a stop request.

Stop requests. A worker runs each call under :func:`packer.interrupt.handle_signals`, so
a SIGINT or SIGTERM it receives (Ctrl-C reaches the whole process group) stops its
search, which returns its best plan. A stop the main process alone receives (``timeout``,
a batch scheduler) reaches the workers through :meth:`StoppablePool.request_stop`: an
event a thread of each worker waits on, which raises the same stop request in the
worker's main thread. Idle workers ignore SIGINT and SIGTERM (the main process decides),
and a call that would start after the stop request does not run (its future raises
``CancelledError``, as a cancelled one does). :func:`stop_work` does this for any executor; one without
``request_stop`` (a Dask client) has its queued calls cancelled and its running ones
finish.

Inputs must be picklable (problems, paths, options, arrays), never open solvers.
"""
from __future__ import annotations

import _thread
import concurrent.futures
import multiprocessing
import os
import signal
import threading
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from typing import Any, Callable, Iterable

from packer import interrupt

#: Seconds between checks for a stop request while waiting on workers.
POLL_S = 0.1
#: Modules the fork server imports once, so that each worker starts without importing them (measured: ~2 s each, more
#: on a busy machine; a spawned worker also re-imported the command line's main module, ~4 s).
PRELOAD = ("packer.parallel", "packer.solvers.run", "packer.report.sweep")


class InlineExecutor(Executor):
    """Runs each submitted call at once, in this process and thread (the serial path); an ``Exception`` goes into its future."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # KeyboardInterrupt and interrupt.Abort propagate, as without an executor
            future.set_exception(exc)
        return future


class StoppablePool(ProcessPoolExecutor):
    """A process pool (``forkserver``) of ``workers`` processes whose calls stop on :meth:`request_stop` (module doc)."""

    def __init__(self, workers: int):
        context = multiprocessing.get_context("forkserver")
        # Workers fork from a server that imported only the solvers (not the CLI, not what the caller's __main__ imports).
        context.set_forkserver_preload(list(PRELOAD))
        self._stop = context.Event()
        threads = max(1, (os.cpu_count() or 1) // workers)
        super().__init__(max_workers=workers, mp_context=context, initializer=_start_worker, initargs=(self._stop, threads))

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        return super().submit(_run_call, fn, args, kwargs)

    def request_stop(self) -> None:
        """Stop every running call's search (it returns its best result) and every call that starts later."""
        if self._stop is not None:
            self._stop.set()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=wait, cancel_futures=cancel_futures)
        # Drop the event now (ours and the initializer's arguments): its semaphores are released when it is collected,
        # even if the command then leaves by os._exit.
        self._stop = self._initargs = None


def local_executor(workers: int) -> Executor:
    """``workers`` == 1: an :class:`InlineExecutor`; more: a :class:`StoppablePool` of that many processes."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    return InlineExecutor() if workers == 1 else StoppablePool(workers)


def capacity(executor: Executor) -> int:
    """How many calls are worth having under way at once on ``executor`` (its workers; 1 inline)."""
    if isinstance(executor, InlineExecutor):
        return 1
    declared = getattr(executor, "capacity", None) or getattr(executor, "_max_workers", None)  # a Dask executor's, a pool's
    return max(1, int(declared or os.cpu_count() or 1))


def stop_work(executor: Executor, futures: Iterable[Future]) -> None:
    """On a stop request: stop ``executor``'s running calls (:meth:`StoppablePool.request_stop`) or cancel what has not started."""
    request = getattr(executor, "request_stop", None)
    if request is not None:
        request()
    for future in futures:
        future.cancel()


def wait_some(futures: Iterable[Future], timeout: float = POLL_S) -> set[Future]:
    """The futures of ``futures`` done within ``timeout`` seconds (waiting in short steps, so signal handlers run)."""
    done, _ = concurrent.futures.wait(list(futures), timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED)
    return done


def abandon(executor: Executor) -> None:
    """Leave ``executor`` at once (a second signal, an error): cancel what has not started and end its worker processes."""
    executor.shutdown(wait=False, cancel_futures=True)
    for process in list((getattr(executor, "_processes", None) or {}).values()):
        process.terminate()


# --- inside a worker process ---

_worker = {"stop": None, "lock": threading.Lock(), "busy": False, "told": False}


def _start_worker(stop: Any, threads: int) -> None:
    """Worker initializer: ignore signals while idle, take ``threads`` CP-SAT threads, listen for the pool's stop event."""
    from packer.solvers.cpsat import set_default_workers

    for sig in interrupt.SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    set_default_workers(threads)
    _worker["stop"] = stop
    threading.Thread(target=_listen, args=(stop,), name="packer-stop-listener", daemon=True).start()


def _listen(stop: Any) -> None:
    stop.wait()
    with _worker["lock"]:
        _tell_main_thread()


def _tell_main_thread() -> None:
    """Raise a stop request in the worker's main thread once per call (the lock is held), unless a signal already did."""
    if _worker["busy"] and not _worker["told"] and not interrupt.stop_requested():
        _worker["told"] = True
        _thread.interrupt_main(signal.SIGINT)


def _run_call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` under :func:`packer.interrupt.handle_signals`; ``CancelledError`` if the pool's stop came before it started."""
    with interrupt.handle_signals():
        try:
            with _worker["lock"]:
                _worker["busy"], _worker["told"] = True, False
                if _worker["stop"] is not None and _worker["stop"].is_set():
                    raise concurrent.futures.CancelledError("stopped before it started")
            return fn(*args, **kwargs)
        finally:
            with _worker["lock"]:
                _worker["busy"] = False

