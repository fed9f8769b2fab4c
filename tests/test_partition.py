"""Spill files hash-partitioned by key give back every row once, by key, in input order."""
from __future__ import annotations

import numpy as np

from packer.io.partition import Partitions


def test_partitions_hold_every_row_once_by_key_in_input_order(tmp_path):
    rng = np.random.default_rng(0)
    partitions = Partitions(tmp_path, 5, "task")
    for k in range(3):
        partitions.write({"task": rng.integers(0, 40, 100).astype(np.int32), "x": np.arange(k * 100, (k + 1) * 100, dtype=np.float64)})
    got = [partitions.read(k) for k in range(5)]
    assert sorted(np.concatenate([g["x"] for g in got])) == list(range(300))
    assert all(np.all(np.diff(g["x"]) > 0) for g in got)  # input order
    keys = [set(g["task"].tolist()) for g in got]
    assert sum(len(k) for k in keys) == len(set().union(*keys)) == 40  # each key in one partition
    assert all(len(g["task"]) for g in got)  # the hash spreads 40 keys over all 5
