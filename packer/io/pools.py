"""One trace of several pools: trace folders side by side, each host tagged with its pool (``hosts.parquet``'s ``pool`` column).

:func:`combine_pools` writes a trace whose pools are the given traces (e.g. several
``packer generate`` runs with different seeds): every id (host, task, job, failure
domain) is prefixed with ``<pool>/`` so that ids of different pools never collide,
and usage is written as a dataset folder ``usage.parquet/`` with one file per pool
(the rows are copied batch by batch, never all in memory).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from packer.errors import InputError
from packer.io.atomic import atomic_dir
from packer.io.trace import FLEET_FILE, HOSTS_FILE, TASKS_FILE, USAGE_FILE, read_trace


def combine_pools(parts: Sequence[str | Path], out: str | Path, names: Sequence[str] | None = None) -> Path:
    """Write to ``out`` (atomically) one trace whose pool ``names[i]`` (default ``pool<i>``) is the trace folder ``parts[i]``.

    The parts must share their fleet catalog (the default one, or identical ``fleet.toml``
    files) and all have usage or none. Returns ``out``.
    """
    names = [f"pool{i}" for i in range(len(parts))] if names is None else [str(n) for n in names]
    if len(names) != len(parts) or len(set(names)) != len(names) or len(parts) < 1:
        raise InputError(f"combine_pools needs one distinct name per part, got {names} for {len(parts)} parts")
    traces = [read_trace(part) for part in parts]
    catalogs = {(Path(part) / FLEET_FILE).read_text() if (Path(part) / FLEET_FILE).exists() else None for part in parts}
    if len(catalogs) > 1:
        raise InputError("the traces to combine have different fleet catalogs (fleet.toml); pools of one trace share one")
    if len({t.usage_path is None for t in traces}) > 1:
        raise InputError("some traces to combine have usage and some not; a trace has usage for every task or none")
    with atomic_dir(out) as tmp:
        hosts = [t.hosts.assign(pool=name) for t, name in zip(traces, names)]
        for table, name in zip(hosts, names):
            for column in ("host_id", "domain"):
                if column in table.columns:
                    table[column] = _prefixed(table[column], name)
        tasks = [t.tasks.copy() for t in traces]
        for table, name in zip(tasks, names):
            for column in ("task_id", "job_id", "host_id"):
                table[column] = _prefixed(table[column], name)
        _write(tmp / HOSTS_FILE, hosts)
        _write(tmp / TASKS_FILE, tasks)
        catalog = catalogs.pop()
        if catalog is not None:
            (tmp / FLEET_FILE).write_text(catalog)
        if traces[0].usage_path is not None:
            (tmp / USAGE_FILE).mkdir()
            for i, (trace, name) in enumerate(zip(traces, names)):
                _copy_usage(trace.usage_dataset(), tmp / USAGE_FILE / f"part-{i:03d}.parquet", name)
    return Path(out)


def _prefixed(column, name: str):
    return (name + "/" + column.astype("string")).where(column.notna(), column)


def _write(path: Path, tables: list) -> None:
    pq.write_table(pa.Table.from_pandas(pd.concat(tables, ignore_index=True), preserve_index=False), path)


def _copy_usage(dataset, path: Path, name: str) -> None:
    """The usage rows of ``dataset`` with pool-prefixed task ids, into the Parquet file ``path``, batch by batch."""
    writer = None
    try:
        for batch in dataset.to_batches():
            table = pa.Table.from_batches([batch])
            ids = pc.binary_join_element_wise(pa.scalar(name + "/"), table.column("task_id").cast(pa.string()), "")
            table = table.set_column(table.schema.get_field_index("task_id"), "task_id", ids)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()

