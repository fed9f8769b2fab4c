"""Profiling does not depend on the order of the usage rows, and reads usage in any order once."""
from __future__ import annotations

import errno
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import packer.characterization.profile
import packer.io.partition
from packer.characterization.profile import profile_tasks
from packer.cli import cli
from packer.errors import InputError
from packer.io.trace import read_trace
from packer.io.usage import _grouping_order, usage_work

GROUP_ROWS = 500  # 144 samples per task: row groups cut tasks, and 18 groups make the order matter
MAX_ROWS = 2_000  # a few groups: the task-sorted copy is read in task-id ranges, the other two are spilled


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict[str, Path]:
    """One generated trace (60 tasks, 144 samples each, one row group) and copies of it in 500-row groups, task-sorted,
    shuffled and time-sorted."""
    root = tmp_path_factory.mktemp("order")
    result = CliRunner().invoke(cli, ["generate", "--tasks", "60", "--hosts", "30", "--days", "0.5", "--seed", "3", "--out", str(root / "generated")])
    assert result.exit_code == 0, result.output
    usage = pq.read_table(root / "generated" / "usage.parquet")
    rng = np.random.default_rng(3)
    orders = {
        "task-sorted": usage,
        "shuffled": usage.take(rng.permutation(usage.num_rows)),
        "time-sorted": usage.sort_by("ts"),
    }
    out = {"as generated": root / "generated"}
    for name, table in orders.items():
        shutil.copytree(root / "generated", root / name, ignore=shutil.ignore_patterns("usage.parquet"))
        pq.write_table(table, root / name / "usage.parquet", row_group_size=GROUP_ROWS)
        out[name] = root / name
    return out


def group_reads(monkeypatch) -> list[int]:
    """Record every row group read from Parquet files from now on (the traces here have one usage file)."""
    reads: list[int] = []
    read_row_groups, iter_batches = pq.ParquetFile.read_row_groups, pq.ParquetFile.iter_batches

    def counted_read_row_groups(self, row_groups, *args, **kwargs):
        reads.extend(row_groups)
        return read_row_groups(self, row_groups, *args, **kwargs)

    def counted_iter_batches(self, *args, row_groups=None, **kwargs):
        reads.extend(row_groups)
        return iter_batches(self, *args, row_groups=row_groups, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", counted_read_row_groups)
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", counted_iter_batches)
    return reads


@pytest.mark.parametrize("max_rows", [MAX_ROWS, 1_000_000])
def test_profiles_are_bitwise_identical_in_any_row_order(traces, max_rows):
    results = {name: profile_tasks(read_trace(path), [50, 99], 60, max_rows=max_rows) for name, path in traces.items()}
    reference = results["task-sorted"]
    assert reference.rows == 60 * 144 and reference.tasks_without_usage == 0
    for name in ("as generated", "shuffled", "time-sorted"):
        pd.testing.assert_frame_equal(results[name].profiles, reference.profiles, check_exact=True)


def test_the_spill_holds_seconds_in_32_bits_and_values_as_stored(traces, monkeypatch):
    spilled = []
    write = packer.io.partition.Partitions.write
    monkeypatch.setattr(packer.io.partition.Partitions, "write", lambda self, columns: spilled.append({k: v.dtype for k, v in columns.items()}) or write(self, columns))
    profile_tasks(read_trace(traces["time-sorted"]), [99], 60, max_rows=MAX_ROWS)
    assert spilled and all(d == {"task": np.int32, "ts": np.int32, **{c: np.float32 for c in ("cpu", "mem", "net", "membw")}} for d in spilled)


def test_seconds_past_2038_and_float64_values_profile_alike_in_any_order(traces, tmp_path):
    """Batches before 2038 spill seconds in 32 bits, later ones in 64: partitions mix both, and float64 values
    spill as float64."""
    usage = pq.read_table(traces["task-sorted"] / "usage.parquet")
    ms = usage["ts"].cast(pa.int64()).to_numpy()
    late = ms >= np.median(ms)
    ms = np.where(late, ms + 400 * 365 * 86_400_000, ms)  # the later half moves 400 years on
    assert (ms[late] // 1000 > np.iinfo(np.int32).max).all() and (ms[~late] // 1000 < np.iinfo(np.int32).max).all()
    usage = usage.set_column(usage.schema.get_field_index("ts"), "ts", pa.array(ms, type=usage.schema.field("ts").type))
    for dim in ("cpu", "mem", "net", "membw"):
        usage = usage.set_column(usage.schema.get_field_index(dim), dim, usage[dim].cast(pa.float64()))
    results = {}
    for name, table in (("task-sorted", usage), ("time-sorted", usage.sort_by("ts"))):
        shutil.copytree(traces["task-sorted"], tmp_path / name, ignore=shutil.ignore_patterns("usage.parquet"))
        pq.write_table(table, tmp_path / name / "usage.parquet", row_group_size=GROUP_ROWS)
        results[name] = profile_tasks(read_trace(tmp_path / name), [50, 99], 3600, max_rows=MAX_ROWS)
    assert results["task-sorted"].profiles["samples"].sum() == 60 * 144 > results["task-sorted"].profiles["windows"].sum()
    pd.testing.assert_frame_equal(results["time-sorted"].profiles, results["task-sorted"].profiles, check_exact=True)


@pytest.mark.parametrize("order", ["shuffled", "time-sorted"])
def test_usage_in_any_order_is_read_once(traces, order, monkeypatch):
    reads = group_reads(monkeypatch)
    seen = []
    result = profile_tasks(read_trace(traces[order]), [99], 60, max_rows=MAX_ROWS, progress=seen.append)
    groups = pq.ParquetFile(traces[order] / "usage.parquet").metadata.num_row_groups
    assert sorted(reads) == list(range(groups))
    # Progress counts every row once as it is spilled, once more as its partition is profiled.
    assert sum(seen) == usage_work(read_trace(traces[order]), MAX_ROWS) == 2 * result.rows == 2 * 60 * 144


def test_progress_follows_the_profiling_of_spilled_partitions(traces, monkeypatch):
    events: list[tuple[str, int]] = []
    profile = packer.characterization.profile.profile_chunk
    monkeypatch.setattr(packer.characterization.profile, "profile_chunk", lambda chunk, *a: events.append(("profiled", len(chunk.task))) or profile(chunk, *a))
    profile_tasks(read_trace(traces["time-sorted"]), [99], 60, max_rows=MAX_ROWS, progress=lambda rows: events.append(("progress", rows)))
    total = usage_work(read_trace(traces["time-sorted"]), MAX_ROWS)
    done, at_first_profile = 0, None
    for kind, rows in events:
        if kind == "progress":
            done += rows
        elif at_first_profile is None:
            at_first_profile = done
    assert at_first_profile == total // 2  # the spill is half the work: the bar is not full while partitions are profiled
    assert done == total and events[-1][0] == "progress"  # and it fills as the last partition is done


def test_usage_stored_by_task_is_read_in_ranges_without_a_spill(traces, monkeypatch):
    # Its row groups cut tasks, so neighbours overlap in task_id: each range re-reads only the group it shares.
    reads = group_reads(monkeypatch)
    monkeypatch.setattr("packer.io.partition.Partitions.write", lambda *a: pytest.fail("usage stored by task was spilled"))
    profile_tasks(read_trace(traces["task-sorted"]), [99], 60, max_rows=MAX_ROWS)
    groups = pq.ParquetFile(traces["task-sorted"] / "usage.parquet").metadata.num_row_groups
    assert set(reads) == set(range(groups)) and len(reads) <= 1.5 * groups


def test_rows_without_a_task_id_are_reported_in_usage_stored_by_task(traces, tmp_path):
    trace = tmp_path / "t"
    shutil.copytree(traces["task-sorted"], trace)
    table = pq.read_table(trace / "usage.parquet")
    ids = table["task_id"].to_pylist()
    ids[4321] = None
    pq.write_table(table.set_column(0, "task_id", pa.array(ids, type=pa.string())), trace / "usage.parquet", row_group_size=GROUP_ROWS)
    with pytest.raises(InputError) as err:
        profile_tasks(read_trace(trace), [99], 60, max_rows=MAX_ROWS)
    assert "column 'task_id': usage for a task that tasks.parquet does not list" in str(err.value)
    assert "row 4321 (task_id=None)" in str(err.value)


def test_validate_checks_usage_in_any_order_without_a_spill(traces, tmp_path, monkeypatch):
    monkeypatch.setattr("packer.io.partition.Partitions.write", lambda *a: pytest.fail("validate spilled usage"))
    reads = group_reads(monkeypatch)
    result = CliRunner().invoke(cli, ["validate", str(traces["time-sorted"])])
    assert result.exit_code == 0, result.output
    assert "8,640 usage rows checked" in result.output
    assert sorted(reads) == list(range(pq.ParquetFile(traces["time-sorted"] / "usage.parquet").metadata.num_row_groups))


def corrupt(trace: Path, rows: list[int], column: str, value: float) -> None:
    path = trace / "usage.parquet"
    table = pq.read_table(path)
    values = table[column].to_numpy().copy()
    values[rows] = value
    table = table.set_column(table.schema.get_field_index(column), column, pa.array(values, type=table.schema.field(column).type))
    pq.write_table(table, path, row_group_size=GROUP_ROWS)


@pytest.mark.parametrize("order", ["task-sorted", "time-sorted"])
def test_bad_values_are_located_in_the_file_in_any_order(traces, order, tmp_path):
    trace = tmp_path / order
    shutil.copytree(traces[order], trace)
    corrupt(trace, [7, 4321, 8000], "cpu", -1.0)
    with pytest.raises(InputError) as err:
        profile_tasks(read_trace(trace), [99], 60, max_rows=MAX_ROWS)
    text = str(err.value)
    assert f"{trace / 'usage.parquet'}: column 'cpu': negative value (3 rows); first: row 7 (task_id=" in text
    assert "row 4321 (task_id=" in text and "row 8000 (task_id=" in text

    result = CliRunner().invoke(cli, ["profile", str(trace), "--out", str(tmp_path / "p.parquet")])
    assert result.exit_code == 2 and "negative value (3 rows)" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "p.parquet").exists()


def test_skipping_bad_rows_gives_the_same_profiles_in_any_order(traces, tmp_path):
    results = {}
    for order in ("task-sorted", "time-sorted"):
        trace = tmp_path / order
        shutil.copytree(traces[order], trace)
        table = pq.read_table(trace / "usage.parquet")
        # The same three samples (the first task's first, the 31st's last, the last one's 10th), wherever they sit.
        bad = sample_rows(table, [(0, 0), (30, 143), (59, 9)])
        corrupt(trace, bad, "mem", float("nan"))
        results[order] = profile_tasks(read_trace(trace), [99], 60, skip_invalid=True, max_rows=MAX_ROWS)
    skipped = {order: {(c, m): n for (_, c, m), n in r.skipped.items()} for order, r in results.items()}
    assert skipped["time-sorted"] == skipped["task-sorted"] == {("mem", "missing or NaN value"): 3}
    pd.testing.assert_frame_equal(results["time-sorted"].profiles, results["task-sorted"].profiles, check_exact=True)
    assert results["time-sorted"].rows == results["task-sorted"].rows == 60 * 144 - 3


def sample_rows(table: pa.Table, samples: list[tuple[int, int]]) -> list[int]:
    """Row numbers of samples given as (k-th task id in sorted order, its j-th timestamp)."""
    frame = table.select(["task_id", "ts"]).to_pandas()
    ids, times = np.unique(frame["task_id"]), np.unique(frame["ts"])
    return [int(np.flatnonzero((frame["task_id"] == ids[k]) & (frame["ts"] == times[j]))[0]) for k, j in samples]


def test_the_spill_folder_is_removed_whatever_happens(traces, tmp_path, monkeypatch):
    spill_root = tmp_path / "tmp"
    spill_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill_root))
    during = []

    def look(rows: int) -> None:
        during.append([p.name for p in spill_root.iterdir()])

    profile_tasks(read_trace(traces["time-sorted"]), [99], 60, max_rows=MAX_ROWS, progress=look)
    assert any(d and d[0].startswith("packer-usage-") for d in during)
    assert not list(spill_root.iterdir())

    def interrupt(*args) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # while spilling
        profile_tasks(read_trace(traces["time-sorted"]), [99], 60, max_rows=MAX_ROWS, progress=interrupt)
    assert not list(spill_root.iterdir())
    monkeypatch.setattr(packer.characterization.profile, "profile_chunk", interrupt)
    with pytest.raises(KeyboardInterrupt):  # while profiling a partition
        profile_tasks(read_trace(traces["time-sorted"]), [99], 60, max_rows=MAX_ROWS)
    assert not list(spill_root.iterdir())
    monkeypatch.undo()
    monkeypatch.setattr(tempfile, "tempdir", str(spill_root))

    bad = tmp_path / "bad"
    shutil.copytree(traces["time-sorted"], bad)
    corrupt(bad, [3], "net", float("inf"))
    with pytest.raises(InputError):
        profile_tasks(read_trace(bad), [99], 60, max_rows=MAX_ROWS)
    assert not list(spill_root.iterdir())



def test_a_full_temporary_folder_is_reported_with_the_way_out(traces, tmp_path, monkeypatch):
    open_file = pa.OSFile

    def full(path, mode="r"):
        if mode == "wb":
            raise OSError(errno.ENOSPC, "No space left on device")
        return open_file(path, mode)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(pa, "OSFile", full)
    with pytest.raises(InputError) as err:
        profile_tasks(read_trace(traces["time-sorted"]), [99], 60, max_rows=MAX_ROWS)
    text = str(err.value)
    assert f"{traces['time-sorted'] / 'usage.parquet'}: column 'task_id': usage not stored by task" in text
    assert "No space left on device" in text and "set TMPDIR to a folder with" in text
    assert not list(tmp_path.iterdir())


@settings(max_examples=50, deadline=None)
@given(codes=st.lists(st.integers(0, 200_000), max_size=300), repeat=st.integers(1, 4))
def test_spilled_rows_are_grouped_by_task_in_file_order(codes, repeat):
    task = np.array(codes * repeat, dtype=np.int32)
    assert np.array_equal(_grouping_order(task), np.argsort(task, kind="stable"))


def test_partitions_of_more_tasks_than_16_bits_hold_are_grouped_too():
    task = np.random.default_rng(0).permutation(np.repeat(np.arange(70_000, dtype=np.int32), 2))
    assert np.array_equal(_grouping_order(task), np.argsort(task, kind="stable"))
