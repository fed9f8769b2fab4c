"""Shared test helpers: tiny hand-made traces written to a temporary folder."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from packer.io.trace import write_trace

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def tiny_tables(n_tasks: int = 6, n_hosts: int = 3, samples: int = 30, interval: int = 60, seed: int = 0):
    """Hosts, tasks and usage frames of a small valid trace on Table I architectures."""
    rng = np.random.default_rng(seed)
    archs = ["Broadwell20", "Skylake14", "Haswell12"]
    hosts = pd.DataFrame(
        {
            "host_id": [f"h{i}" for i in range(n_hosts)],
            "arch": [archs[i % len(archs)] for i in range(n_hosts)],
            "domain": [f"rack{i // 2}" for i in range(n_hosts)],
        }
    )
    tasks = pd.DataFrame(
        {
            "task_id": [f"t{i:03d}" for i in range(n_tasks)],
            "job_id": [f"j{i // 2}" for i in range(n_tasks)],
            "host_id": [f"h{i % n_hosts}" for i in range(n_tasks)],
            "cpu_request": rng.uniform(1, 4, n_tasks).round(2),
            "mem_request": rng.uniform(1, 8, n_tasks).round(2),
            "net_request": rng.uniform(0.1, 1, n_tasks).round(2),
        }
    )
    ts = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(np.arange(samples) * interval, unit="s")
    usage = pd.DataFrame(
        {
            "task_id": np.repeat(tasks["task_id"].to_numpy(), samples),
            "ts": np.tile(ts.to_numpy(), n_tasks),
            "cpu": rng.uniform(0, 1, n_tasks * samples) * np.repeat(tasks["cpu_request"].to_numpy(), samples),
            "mem": rng.uniform(0.2, 0.6, n_tasks * samples) * np.repeat(tasks["mem_request"].to_numpy(), samples),
            "net": rng.uniform(0, 0.5, n_tasks * samples),
        }
    )
    return hosts, tasks, usage


def write_tables(path: Path, hosts: pd.DataFrame, tasks: pd.DataFrame, usage: pd.DataFrame | None, row_group_rows: int = 1 << 20) -> Path:
    batches = None if usage is None else [pa.Table.from_pandas(usage, preserve_index=False)]
    return write_trace(path, hosts, tasks, batches, row_group_rows=row_group_rows)


def crowdable_trace(path: Path) -> Path:
    """Four 14-core tasks, each alone on a Broadwell18 (32 cores, Eq. 1 CPU scores ~1.3 there): two per host fit by
    p99 usage but hold 2 x 1.3 x 14/32 > 1 of the host's sensitivity, so packing them puts tasks at risk."""
    hosts, tasks, usage = tiny_tables(n_tasks=4, n_hosts=4)
    hosts["arch"] = "Broadwell18"
    tasks["host_id"] = hosts["host_id"].to_numpy()
    tasks["cpu_request"] = 14.0
    return write_tables(path, hosts, tasks, usage)


@pytest.fixture
def tiny_trace(tmp_path: Path) -> Path:
    hosts, tasks, usage = tiny_tables()
    return write_tables(tmp_path / "tiny", hosts, tasks, usage)
