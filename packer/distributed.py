"""Dask clusters for packer's parallel work: a client on an existing scheduler or on a local cluster.

Dask is an optional dependency (``pip install 'packer[dask]'``), imported only here and
only when a cluster is asked for, so packer without it works as before. Every worker
of an existing cluster needs the same version of packer installed (the work it runs
is packer's own functions) and must be able to read the usage files it is given.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
from typing import TYPE_CHECKING, Iterator

from packer.errors import InputError

if TYPE_CHECKING:
    import distributed

#: How to get the Dask engine, in every message that asks for it.
INSTALL_HINT = "pip install 'packer[dask]'"
#: Seconds to wait for an existing scheduler to answer.
CONNECT_TIMEOUT_S = 10


def require_dask() -> None:
    """Raise :class:`InputError` with the install hint unless ``dask.dataframe`` and ``distributed`` import."""
    try:
        import dask.dataframe  # noqa: F401  (dask and its dataframe extra)
        import distributed  # noqa: F401
    except ImportError as exc:
        raise InputError(f"the Dask engine (--workers, --scheduler) needs Dask, which is not installed ({exc}): {INSTALL_HINT}") from None


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None) -> Iterator["distributed.Client"]:
    """A ``distributed.Client`` on the scheduler at ``scheduler`` (``tcp://host:8786``), or else on a new
    ``LocalCluster`` of ``workers`` single-threaded worker processes; closed (the local cluster stopped) on exit."""
    if (scheduler is None) == (workers is None):
        raise InputError("give either a scheduler address or a number of workers for a local cluster, not both or neither")
    if workers is not None and workers < 1:
        raise InputError(f"a local Dask cluster needs at least one worker, got {workers}")
    require_dask()
    import distributed

    if scheduler is not None:
        try:
            client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT_S)
        except (OSError, ValueError, TypeError) as exc:  # unreachable (OSError, TimeoutError), or not an address
            raise InputError(f"cannot connect to the Dask scheduler at {scheduler!r}: {exc}") from None
        with client:
            yield client
        return
    # Its HTTP server (and dashboard, with bokeh installed) on any free port: 8787 may be taken by another cluster.
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        yield client


def dask_executor(client: "distributed.Client") -> concurrent.futures.Executor:
    """A ``concurrent.futures.Executor`` running its calls on ``client``'s cluster (sweep points, pools: :mod:`packer.parallel`).

    Calls are not pure (two equal calls both run); ``capacity`` is how many run at once.
    """
    executor = client.get_executor(pure=False)
    executor.capacity = worker_threads(client)
    return executor


def worker_threads(client: "distributed.Client") -> int:
    """Threads over all of ``client``'s workers now (at least 1): how many tasks run at once."""
    return max(1, sum(client.nthreads().values()))
