"""``--workers N`` / ``--scheduler ADDRESS``: where independent parts (sweep points, pools) are solved side by side (:mod:`packer.parallel`)."""
from __future__ import annotations

import contextlib
import functools
from concurrent.futures import Executor
from typing import Iterator

import click

from packer.parallel import abandon, local_executor


def workers_opt(command):
    """``--workers N`` (local processes) and ``--scheduler ADDRESS`` (a Dask cluster), at most one; the command gets both."""

    @functools.wraps(command)
    def with_workers(*args, workers: int, scheduler: str | None, **kwargs):
        if scheduler is not None and workers != 1:
            raise click.UsageError("--workers starts local processes and --scheduler uses a Dask cluster: give one of them")
        return command(*args, workers=workers, scheduler=scheduler, **kwargs)

    with_workers = click.option(
        "--scheduler", metavar="ADDRESS", default=None,
        help="Solve the independent parts on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786) instead: as many "
             "at once as it has worker threads. Its workers need packer installed and the trace's path. Needs packer[dask].")(with_workers)
    return click.option(
        "--workers", type=click.IntRange(min=1), default=1, show_default=True,
        help="Processes that solve independent parts side by side (sweep points, a trace's pools); 1 solves them one after "
             "the other in this process. Each process gets its share of the cores.")(with_workers)


@contextlib.contextmanager
def executor_for(workers: int, scheduler: str | None = None) -> Iterator[Executor]:
    """The executor of ``--workers`` or ``--scheduler``, shut down after the block; left at once (workers ended) if the block raises."""
    if scheduler is not None:
        from packer.distributed import dask_client, dask_executor  # Dask only when asked for

        with dask_client(scheduler=scheduler) as client:
            yield dask_executor(client)
        return
    executor = local_executor(workers)
    try:
        yield executor
    except BaseException:
        abandon(executor)
        raise
    executor.shutdown(wait=True)
