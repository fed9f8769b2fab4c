"""Profiles match an independent pandas computation, whatever the layout of the usage table."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import tiny_tables, write_tables
from packer.cli import cli
from packer.characterization.profile import PERCENTILE_SAMPLE, grouped_percentiles, profile_chunk, profile_tasks
from packer.io.trace import read_trace
from packer.io.usage import UsageChunk


def expected_profiles(tasks: pd.DataFrame, usage: pd.DataFrame, q: float, window_s: int) -> pd.DataFrame:
    """The naive way: group by (task, window), average, then NumPy's percentile per task."""
    u = usage.copy()
    u["win"] = ((u["ts"] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)) // window_s
    windows = u.groupby(["task_id", "win"])[["cpu", "mem", "net"]].mean()
    rows = {}
    for task, grp in windows.groupby(level="task_id"):
        raw = u[u["task_id"] == task]
        rows[task] = {
            "samples": len(raw),
            "windows": len(grp),
            **{f"{d}_p{q:g}": np.percentile(grp[d].to_numpy(), q) for d in ("cpu", "mem", "net")},
            **{f"{d}_mean": raw[d].mean() for d in ("cpu", "mem", "net")},
            **{f"{d}_max": raw[d].max() for d in ("cpu", "mem", "net")},
        }
    return pd.DataFrame.from_dict(rows, orient="index").reindex(tasks["task_id"])


def check(profiles: pd.DataFrame, expected: pd.DataFrame) -> None:
    got = profiles.set_index("task_id")
    has = expected["samples"].notna()
    assert (got.loc[~has.to_numpy(), "samples"] == 0).all()
    for col in expected.columns:
        np.testing.assert_allclose(got.loc[has.to_numpy(), col].to_numpy(float), expected.loc[has, col].to_numpy(float), rtol=1e-9, atol=1e-9, err_msg=col)


layouts = st.sampled_from(["sorted", "shuffled", "partitioned"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n_tasks=st.integers(1, 12),
    samples=st.integers(1, 40),
    interval=st.sampled_from([1, 7, 20, 60, 300]),
    window=st.sampled_from([30, 60, 120]),
    q=st.sampled_from([50.0, 90.0, 99.0, 100.0]),
    layout=layouts,
    max_rows=st.sampled_from([5, 50, 10_000]),
    seed=st.integers(0, 10_000),
)
def test_profiles_match_independent_computation(tmp_path_factory, n_tasks, samples, interval, window, q, layout, max_rows, seed):
    hosts, tasks, usage = tiny_tables(n_tasks=n_tasks, samples=samples, interval=interval, seed=seed)
    rng = np.random.default_rng(seed)
    usage = usage[rng.random(len(usage)) > 0.2]  # gaps, and sometimes tasks with no usage at all
    if layout != "sorted":
        usage = usage.sample(frac=1.0, random_state=seed)
    path = tmp_path_factory.mktemp("trace")
    write_tables(path / "t", hosts, tasks, None)
    if layout == "partitioned":
        (path / "t" / "usage.parquet").mkdir()
        for k, part in enumerate(usage.iloc[i::3] for i in range(3)):
            pq.write_table(pa.Table.from_pandas(part, preserve_index=False), path / "t" / "usage.parquet" / f"part{k}.parquet", row_group_size=7)
    else:
        pq.write_table(pa.Table.from_pandas(usage, preserve_index=False), path / "t" / "usage.parquet", row_group_size=11)
    if usage.empty:
        return
    result = profile_tasks(read_trace(path / "t"), [q], window, max_rows=max_rows)
    check(result.profiles, expected_profiles(tasks, usage, q, window))


def test_grouped_percentiles_against_numpy():
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 50, 200)
    group = np.repeat(np.arange(200), sizes)
    values = rng.gamma(2.0, 3.0, len(group))
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    got = grouped_percentiles(values, group, starts, [0, 50, 99, 100])
    for g in range(200):
        np.testing.assert_allclose(got[:, g], np.percentile(values[group == g], [0, 50, 99, 100]), rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=1, max_size=12), st.sampled_from(["gamma", "ties", "float32"]),
       st.lists(st.sampled_from([0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0]), min_size=1, max_size=3), st.integers(0, 10**6))
def test_grouped_percentiles_of_large_groups_against_numpy(sizes, kind, qs, seed):
    """Large groups take the path that sorts only each group's values above a sampled guess."""
    rng = np.random.default_rng(seed)
    group = np.repeat(np.arange(len(sizes)), sizes)
    values = {"gamma": rng.gamma(2.0, 3.0, len(group)), "ties": rng.integers(0, 4, len(group)).astype(float),
              "float32": rng.random(len(group)).astype(np.float32).astype(float)}[kind]
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    got = grouped_percentiles(values, group, starts, qs)
    for g in range(len(sizes)):
        np.testing.assert_allclose(got[:, g], np.percentile(values[group == g], qs), rtol=1e-12, atol=0)


def test_grouped_percentiles_where_the_sample_misleads_sort_the_whole_group():
    """Every sampled value of the second group is larger than all the others: the guess is too high, and the group
    is sorted whole."""
    first = 32 * PERCENTILE_SAMPLE  # the sample takes every PERCENTILE_SAMPLE-th value of the whole array
    values = np.r_[np.linspace(0.0, 1.0, first), np.arange(1600) / 1600.0]
    values[first::PERCENTILE_SAMPLE] = 10.0 + np.arange(1600 // PERCENTILE_SAMPLE)
    group = np.repeat([0, 1], [first, 1600])
    got = grouped_percentiles(values, group, np.array([0, first]), [99.0])
    np.testing.assert_allclose(got[0], [np.percentile(values[:first], 99.0), np.percentile(values[first:], 99.0)], rtol=1e-12, atol=0)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 400), st.integers(0, 2**31 - 10**6), st.integers(0, 10**6))
def test_float32_values_and_int32_seconds_profile_as_if_widened_first(rows, start, seed):
    """Usage stored in 32 bits is profiled as stored: window sums still accumulate in float64, bit for bit."""
    rng = np.random.default_rng(seed)
    task = np.sort(rng.integers(0, 7, rows)).astype(np.int32)
    ts = (start + rng.integers(0, 10**6, rows)).astype(np.int32)
    cpu = (rng.random(rows) * 10 ** rng.uniform(-3, 3, rows)).astype(np.float32)
    narrow = profile_chunk(UsageChunk(task, ts, {"cpu": cpu}), ["cpu"], [50.0, 99.0], 300)
    wide = profile_chunk(UsageChunk(task, ts.astype(np.int64), {"cpu": cpu.astype(np.float64)}), ["cpu"], [50.0, 99.0], 300)
    pd.testing.assert_frame_equal(narrow, wide, check_exact=True)


def test_window_averaging_happens_before_the_percentile(tmp_path):
    hosts, tasks, _ = tiny_tables(n_tasks=1)
    # 1-s samples: one spike second per minute. Its 60-s window mean is small.
    ts = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(np.arange(600), unit="s")
    cpu = np.where(np.arange(600) % 60 == 0, 60.0, 0.0)
    usage = pd.DataFrame({"task_id": "t000", "ts": ts, "cpu": cpu, "mem": 1.0, "net": 0.1})
    result = profile_tasks(read_trace(write_tables(tmp_path / "t", hosts, tasks, usage)), [99], 60)
    row = result.profiles.iloc[0]
    assert row["windows"] == 10 and row["samples"] == 600
    assert row["cpu_p99"] == pytest.approx(1.0)
    assert row["cpu_max"] == 60.0
    assert row["cpu_request"] == tasks["cpu_request"].iloc[0]


def test_multiple_percentiles_and_names(tiny_trace):
    result = profile_tasks(read_trace(tiny_trace), [50, 99.9], 60)
    assert {"cpu_p50", "cpu_p99.9", "mem_p50", "net_p99.9"} <= set(result.profiles.columns)
    assert (result.profiles["cpu_p50"] <= result.profiles["cpu_p99.9"]).all()


def test_profile_command_writes_and_summarizes(tiny_trace, tmp_path):
    out = tmp_path / "profiles.parquet"
    result = CliRunner().invoke(cli, ["profile", str(tiny_trace), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "profiled 6 tasks from 180 usage rows" in result.output
    assert "How far p99 usage sits below requests" in result.output
    profiles = pd.read_parquet(out)
    assert list(profiles["task_id"]) == [f"t{i:03d}" for i in range(6)]
    assert not list(tmp_path.glob(".*tmp"))


@pytest.mark.parametrize("args", [["--percentile", "101"], ["--window", "0"]])
def test_profile_rejects_bad_flags(tiny_trace, args):
    result = CliRunner().invoke(cli, ["profile", str(tiny_trace), *args])
    assert result.exit_code == 2
