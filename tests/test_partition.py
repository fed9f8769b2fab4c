"""Spill files hash-partitioned by key give back every row once, by key, in input order."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from packer.io.partition import Partitions


def _spilled(partitions: Partitions, k: int) -> list[np.ndarray]:
    """Partition ``k``'s key column as stored in each spill file."""
    out = []
    for path in partitions.files:
        with pa.OSFile(str(path)) as source:
            out.append(pa.ipc.open_file(source).get_batch(k).column(partitions.key).to_numpy())
    return out


def test_partitions_hold_every_row_once_by_key_in_input_order(tmp_path):
    rng = np.random.default_rng(0)
    partitions = Partitions(tmp_path, 5, "task", 40)
    written = []
    for k in range(3):
        written.append({"task": rng.integers(0, 40, 100).astype(np.int32), "x": np.arange(k * 100, (k + 1) * 100, dtype=np.float64)})
        partitions.write(written[-1])
    got = [partitions.read(k) for k in range(5)]
    assert sorted(np.concatenate([g["x"] for g in got])) == list(range(300))
    assert all(np.all(np.diff(g["x"]) > 0) for g in got)  # input order
    task_of_x = np.concatenate([w["task"] for w in written])
    assert all(np.array_equal(g["task"], task_of_x[g["x"].astype(int)]) for g in got)  # every row keeps its key
    assert all(g["task"].dtype == np.int32 for g in got)
    keys = [set(g["task"].tolist()) for g in got]
    assert sum(len(k) for k in keys) == len(set().union(*keys)) == 40  # each key in one partition
    assert all(len(g["task"]) for g in got)  # the hash spreads 40 keys over all 5
    assert all(piece.dtype == np.uint16 for k in range(5) for piece in _spilled(partitions, k))  # 2 bytes a key on disk


def test_keys_too_many_for_16_bits_in_a_partition_are_spilled_as_given(tmp_path):
    partitions = Partitions(tmp_path, 1, "task", 70_000)
    task = np.array([69_999, 0, 65_536, 3], dtype=np.int32)
    partitions.write({"task": task, "x": np.arange(4.0)})
    assert np.array_equal(partitions.read(0)["task"], task)
    assert _spilled(partitions, 0)[0].dtype == np.int32


@pytest.mark.parametrize("bad", [-1, 40])
def test_a_key_outside_its_range_is_refused_before_anything_is_written(tmp_path, bad):
    partitions = Partitions(tmp_path, 5, "task", 40)
    with pytest.raises(ValueError, match="task outside 0..39"):
        partitions.write({"task": np.array([0, bad], dtype=np.int32), "x": np.zeros(2)})
    assert partitions.files == [] and not list(tmp_path.iterdir())
