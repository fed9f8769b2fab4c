"""``--workers N``: how many processes solve independent parts (sweep points, pools) side by side (:mod:`packer.parallel`)."""
from __future__ import annotations

import contextlib
from concurrent.futures import Executor
from typing import Iterator

import click

from packer.parallel import abandon, local_executor

workers_opt = click.option(
    "--workers", type=click.IntRange(min=1), default=1, show_default=True,
    help="Processes that solve independent parts side by side (sweep points, a trace's pools); 1 solves them one after "
         "the other in this process. Each process gets its share of the cores.")


@contextlib.contextmanager
def executor_for(workers: int) -> Iterator[Executor]:
    """The executor of ``--workers``, shut down after the block; left at once (workers ended) if the block raises."""
    executor = local_executor(workers)
    try:
        yield executor
    except BaseException:
        abandon(executor)
        raise
    executor.shutdown(wait=True)
