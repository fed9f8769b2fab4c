"""The Dask engine of profiling gives the local engine's profiles bit for bit, and its errors."""
from __future__ import annotations

import shutil
import sys

import distributed
import fsspec
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import packer
import packer.characterization.profile_dask as profile_dask
from packer.characterization.profile import profile_tasks
from packer.characterization.profile_dask import profile_tasks_dask
from packer.cli import cli
from packer.distributed import dask_client, dask_executor
from packer.errors import InputError
from packer.io.trace import read_trace
from test_profile_order import MAX_ROWS, corrupt, traces  # noqa: F401  (traces: the fixture)

ORDERS = ["task-sorted", "shuffled", "time-sorted"]


@pytest.fixture(scope="module")
def client():
    """Two single-threaded workers in this process: quick to start, and they share its memory:// filesystem."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        yield c


@pytest.mark.parametrize("order", ORDERS)
def test_dask_profiles_are_the_local_engines_bit_for_bit(traces, client, order):
    trace = read_trace(traces[order])
    # One-hour windows hold 12 samples each: the sums depend on the order of a window's rows.
    for window_s in (60, 3600):
        local = profile_tasks(trace, [50, 99], window_s, max_rows=MAX_ROWS)
        seen = []
        on_dask = profile_tasks_dask(trace, client, [50, 99], window_s, max_rows=MAX_ROWS, progress=seen.append)
        pd.testing.assert_frame_equal(on_dask.profiles, local.profiles, check_exact=True)
        assert on_dask.rows == local.rows == 60 * 144 and on_dask.skipped == {}
        assert sum(seen) == 2 * 60 * 144  # every row once read, once profiled


READ_PIECE = profile_dask._read_piece
PIECES_READ: list[int] = []


def counted_read_piece(piece, *args):
    """Module-level, so that the in-process workers run this very function (a closure would be copied by value)."""
    PIECES_READ.append(piece.first)
    return READ_PIECE(piece, *args)


def test_each_piece_is_read_once(traces, client, monkeypatch):
    monkeypatch.setattr(profile_dask, "PIECE_ROWS", 1000)  # several pieces of two row groups
    monkeypatch.setattr(profile_dask, "_read_piece", counted_read_piece)
    PIECES_READ.clear()
    profile_tasks_dask(read_trace(traces["time-sorted"]), client, [99], 60, max_rows=MAX_ROWS)
    assert sorted(PIECES_READ) == list(range(0, 60 * 144, 1000))


def test_bad_values_are_reported_as_the_local_engine_reports_them(traces, client, tmp_path):
    trace = tmp_path / "t"
    shutil.copytree(traces["time-sorted"], trace)
    corrupt(trace, [7, 4321, 8000], "cpu", -1.0)
    corrupt(trace, [12], "mem", float("nan"))
    with pytest.raises(InputError) as local:
        profile_tasks(read_trace(trace), [99], 60, max_rows=MAX_ROWS)
    with pytest.raises(InputError) as on_dask:
        profile_tasks_dask(read_trace(trace), client, [99], 60, max_rows=MAX_ROWS)
    assert str(on_dask.value) == str(local.value)
    assert f"{trace / 'usage.parquet'}: column 'cpu': negative value (3 rows); first: row 7 (task_id=" in str(on_dask.value)

    skipped = {engine: run(read_trace(trace), [99], 60, skip_invalid=True, max_rows=MAX_ROWS)
               for engine, run in (("local", profile_tasks), ("dask", lambda *a, **k: profile_tasks_dask(a[0], client, *a[1:], **k)))}
    pd.testing.assert_frame_equal(skipped["dask"].profiles, skipped["local"].profiles, check_exact=True)
    assert skipped["dask"].skipped == skipped["local"].skipped and sum(skipped["dask"].skipped.values()) == 4


def test_the_cli_on_a_scheduler_writes_the_local_profiles_and_exits_2_on_bad_values(traces, client, tmp_path):
    address = client.scheduler.address
    result = CliRunner().invoke(cli, ["profile", str(traces["shuffled"]), "--scheduler", address, "--out", str(tmp_path / "dask.parquet")])
    assert result.exit_code == 0, result.output
    local = CliRunner().invoke(cli, ["profile", str(traces["shuffled"]), "--out", str(tmp_path / "local.parquet")])
    assert local.exit_code == 0, local.output
    assert pq.read_table(tmp_path / "dask.parquet").equals(pq.read_table(tmp_path / "local.parquet"))

    bad = tmp_path / "bad"
    shutil.copytree(traces["time-sorted"], bad)
    corrupt(bad, [4321], "net", float("inf"))
    result = CliRunner().invoke(cli, ["profile", str(bad), "--scheduler", address, "--out", str(tmp_path / "bad.parquet")])
    assert result.exit_code == 2 and "column 'net': infinite value (1 row); first: row 4321" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "bad.parquet").exists()


def test_usage_is_read_from_an_fsspec_url(traces, client, tmp_path):
    trace = tmp_path / "requests-only"
    shutil.copytree(traces["time-sorted"], trace, ignore=shutil.ignore_patterns("usage.parquet"))
    memory = fsspec.filesystem("memory")
    for k, part in enumerate(pq.read_table(traces["time-sorted"] / "usage.parquet").to_batches(3000)):
        with memory.open(f"/usage/part-{k}.parquet", "wb") as f:
            pq.write_table(pa.Table.from_batches([part]), f, row_group_size=500)
    try:
        profiles = packer.api.profile(trace, client=client, usage="memory://usage")
    finally:
        memory.rm("/usage", recursive=True)
    pd.testing.assert_frame_equal(profiles, packer.api.profile(traces["time-sorted"]), check_exact=True)


def test_a_url_whose_filesystem_is_not_installed_exits_2_naming_it(traces, client, tmp_path):
    result = CliRunner().invoke(cli, ["profile", str(traces["time-sorted"]), "--scheduler", client.scheduler.address,
                                      "--usage", "nosuchfs://bucket/usage", "--out", str(tmp_path / "p.parquet")])
    assert result.exit_code == 2 and "nosuchfs://bucket/usage: cannot open the usage URL" in result.output


def test_the_executor_runs_calls_on_the_cluster(client):
    assert dask_executor(client).submit(pow, 2, 10).result() == 1024


def test_workers_start_a_local_cluster_of_processes(traces, tmp_path):
    result = CliRunner().invoke(cli, ["profile", str(traces["time-sorted"]), "--workers", "1", "--out", str(tmp_path / "p.parquet")])
    assert result.exit_code == 0, result.output
    assert "starting a local Dask cluster of 1 workers" in result.output
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "p.parquet"), packer.api.profile(traces["time-sorted"]), check_exact=True)


@pytest.mark.parametrize("args, message", [
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "give one of them"),
    (["--usage", "s3://bucket/usage"], "--usage is read by Dask workers: add --workers N or --scheduler ADDRESS"),
    (["--workers", "0"], "--workers"),
])
def test_conflicting_cluster_options_exit_2(traces, tmp_path, args, message):
    result = CliRunner().invoke(cli, ["profile", str(traces["time-sorted"]), *args, "--out", str(tmp_path / "p.parquet")])
    assert result.exit_code == 2 and message in result.output and not (tmp_path / "p.parquet").exists()


def test_an_unreachable_scheduler_exits_2(traces, tmp_path, monkeypatch):
    monkeypatch.setattr("packer.distributed.CONNECT_TIMEOUT_S", 0.5)
    result = CliRunner().invoke(cli, ["profile", str(traces["time-sorted"]), "--scheduler", "tcp://127.0.0.1:9", "--out", str(tmp_path / "p.parquet")])
    assert result.exit_code == 2 and "cannot connect to the Dask scheduler at 'tcp://127.0.0.1:9'" in result.output


def test_without_dask_the_engine_asks_for_the_extra(traces, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now raises ImportError
    result = CliRunner().invoke(cli, ["profile", str(traces["time-sorted"]), "--workers", "2", "--out", str(tmp_path / "p.parquet")])
    assert result.exit_code == 2 and "pip install 'packer[dask]'" in result.output and "Traceback" not in result.output
    with pytest.raises(InputError, match=r"pip install 'packer\[dask\]'"):
        with dask_client(workers=1):
            pass
