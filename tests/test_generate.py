"""`packer generate`: paper-shaped synthetic traces (colocation paper, Sections I, III-B and IV)."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from packer.cli import cli
from packer.errors import InputError
from packer.io.fleet import load_fleet
from packer.io.generate import (
    ARCH_MIX,
    CLASSES,
    RACK_SIZE,
    NotEnoughHosts,
    generate_trace,
    make_hosts,
    make_jobs,
    place_by_requests,
    sample_count,
    usage_batches,
)
from packer.io.trace import read_trace

FLEET = load_fleet()
DIMS = ("cpu", "mem", "net")


def _overfull(tasks: pd.DataFrame, hosts: pd.DataFrame) -> np.ndarray:
    """Per host and dimension: summed requests minus capacity (> 0 means infeasible)."""
    load = tasks.groupby("host_id")[[f"{d}_request" for d in DIMS]].sum().reindex(hosts["host_id"]).fillna(0.0).to_numpy()
    capacity = FLEET.archs.loc[hosts["arch"], list(DIMS)].to_numpy()
    return load - capacity


@pytest.fixture(scope="module")
def paper_pool():
    """The default shape: 37,000 tasks on 18,000 hosts (placement only, no usage)."""
    jobs = make_jobs(37_000, seed=0)
    hosts = make_hosts(18_000, FLEET)
    return jobs, hosts, place_by_requests(jobs, hosts, FLEET, seed=0)


@pytest.fixture(scope="module")
def small_pool():
    """4,000 tasks on 2,000 hosts with one day of 300 s samples, as (tasks, stats) arrays per task."""
    jobs = make_jobs(4_000, seed=1)
    hosts = make_hosts(2_000, FLEET)
    tasks = place_by_requests(jobs, hosts, FLEET, seed=1)
    samples = sample_count(1, 300)
    cpu, mem = [], []
    for batch in usage_batches(tasks, jobs, days=1, interval=300, seed=1):
        cpu.append(batch.column("cpu").to_numpy().reshape(-1, samples))
        mem.append(batch.column("mem").to_numpy().reshape(-1, samples))
    return jobs, hosts, tasks, np.concatenate(cpu).astype(float), np.concatenate(mem).astype(float)


def test_job_sizes_are_heavy_tailed_like_the_paper_pool():
    jobs = make_jobs(37_000, seed=0)
    assert jobs["n_tasks"].sum() == 37_000
    assert 1_000 <= len(jobs) <= 1_200  # "more than 1000 production jobs with ~37,000 tasks"
    assert (jobs["n_tasks"] < 250).mean() == pytest.approx(0.93, abs=0.02)  # "around 93% of the jobs"
    assert jobs["n_tasks"].max() > 50 * jobs["n_tasks"].median()
    assert (jobs["n_tasks"] >= 1).all()
    # Ids sort in generation order, and first_task indexes the job's first task.
    assert jobs["job_id"].is_monotonic_increasing
    assert (jobs["first_task"].to_numpy() == np.concatenate([[0], np.cumsum(jobs["n_tasks"])[:-1]])).all()


def test_table_ii_services_name_one_job_of_their_class():
    jobs = make_jobs(37_000, seed=0)
    named = jobs.dropna(subset=["service"]).set_index("service")
    expected = {"Log1": "low", "KeyVal1": "low", "NN1": "medium", "KeyVal2": "medium", "KeyVal3": "high", "Rank2": "high"}
    assert named["cls"].to_dict() == expected


def test_hosts_follow_the_architecture_mix_in_homogeneous_racks():
    hosts = make_hosts(18_000, FLEET)
    counts = hosts["arch"].value_counts()
    for arch, share in ARCH_MIX.items():
        assert abs(counts[arch] - share * 18_000) <= 1
    type_ii = FLEET.archs.loc[hosts["arch"], "type"].eq("II").mean()
    assert type_ii == pytest.approx(2 / 3, abs=0.01)
    racks = hosts.groupby("domain")["arch"]
    assert (racks.nunique() == 1).all() and racks.size().max() == RACK_SIZE
    assert hosts["host_id"].is_unique and hosts["host_id"].is_monotonic_increasing


def test_paper_scale_placement_is_packed_by_requests_like_an_allocation_scheduler(paper_pool):
    jobs, hosts, tasks = paper_pool
    assert len(tasks) == 37_000 and tasks["task_id"].is_monotonic_increasing
    assert (_overfull(tasks, hosts) <= 0).all()
    archs_per_job = tasks.assign(arch=tasks["host_id"].map(hosts.set_index("host_id")["arch"])).groupby("job_id")["arch"].nunique()
    assert archs_per_job.max() <= 2
    capacity = FLEET.archs.loc[hosts["arch"], list(DIMS)].to_numpy()
    requested = tasks["cpu_request"].sum() / capacity[:, 0].sum()
    assert 0.70 <= requested <= 0.85
    fill = (_overfull(tasks, hosts) + capacity) / capacity
    busiest = fill[:, :2].max(axis=1)
    occupied = busiest > 0
    assert occupied.mean() > 0.9  # hosts are in use, not spare
    assert busiest[occupied].mean() > 0.8  # close to capacity in the binding dimension
    per_host = tasks["host_id"].value_counts()
    assert (per_host == 1).sum() / occupied.sum() < 0.3  # single-task hosts hold a task that fills them
    pairs = tasks.groupby(["job_id", "host_id"]).size()
    assert (pairs > 2).mean() < 0.01  # jobs are spread, at most two tasks of a job per host


def test_every_task_starts_on_an_architecture_eligible_for_it(paper_pool):
    """On the need basis with the class scores packer would give it (a Rank2 task alone fits a Skylake16, not a Haswell10)."""
    from packer.io.generate import _eligible_archs, _services

    jobs, hosts, tasks = paper_pool
    eligible = _eligible_archs(jobs, FLEET, _services())
    job = pd.Index(jobs["job_id"]).get_indexer(tasks["job_id"])
    arch = pd.Index(FLEET.archs.index).get_indexer(tasks["host_id"].map(hosts.set_index("host_id")["arch"]))
    assert eligible[job, arch].all()
    names = list(FLEET.archs.index)
    rank2 = int(np.flatnonzero(jobs["service"].to_numpy() == "Rank2")[0])
    assert eligible[rank2, names.index("Broadwell20")] and eligible[rank2, names.index("Skylake16")]
    assert not eligible[rank2, names.index("Broadwell18")]
    assert not eligible[(jobs["cls"] == "high").to_numpy()][:, names.index("Broadwell18")].any()


def test_cpu_requests_are_cores_of_the_current_host(paper_pool):
    jobs, hosts, tasks = paper_pool
    arch = tasks["host_id"].map(hosts.set_index("host_id")["arch"])
    ref = jobs.set_index("job_id").loc[tasks["job_id"], "cpu_ref"].to_numpy()
    expected = ref * (1 / 32) / FLEET.per_core_throughput.loc[arch].to_numpy()
    assert np.allclose(tasks["cpu_request"], expected, atol=0.0101)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tasks=st.integers(1, 300), hosts=st.integers(1, 200), seed=st.integers(0, 2**31))
def test_placement_is_feasible_or_refused(tasks, hosts, seed):
    jobs = make_jobs(tasks, seed)
    host_table = make_hosts(hosts, FLEET)
    try:
        placed = place_by_requests(jobs, host_table, FLEET, seed)
    except NotEnoughHosts:
        return
    assert len(placed) == tasks and placed["task_id"].is_unique
    assert (_overfull(placed, host_table) <= 0).all()


def test_usage_matches_the_paper_utilization_figures(small_pool):
    jobs, hosts, tasks, cpu, mem = small_pool
    cores = FLEET.archs.loc[hosts["arch"], "cpu"].sum()
    # "the average CPU utilization across our fleet is ~35-40%"
    assert 0.33 <= cpu.mean(axis=1).sum() / cores <= 0.42
    # "around 93% of the jobs (each utilizing less than 250 hosts) have on average 20% CPU and 31% memory utilization"
    size = jobs.set_index("job_id").loc[tasks["job_id"], "n_tasks"].to_numpy()
    tail = size < 250
    assert (cpu[tail].mean(axis=1) / tasks["cpu_request"].to_numpy()[tail]).mean() == pytest.approx(0.20, abs=0.03)
    assert (mem[tail].mean(axis=1) / tasks["mem_request"].to_numpy()[tail]).mean() == pytest.approx(0.31, abs=0.03)
    # "the percentile 99 CPU allocation for KeyVal2 [a medium-class service] is ~55% of the originally requested"
    cls = jobs.set_index("job_id").loc[tasks["job_id"], "cls"].to_numpy()
    p99 = np.percentile(cpu, 99, axis=1) / tasks["cpu_request"].to_numpy()
    assert np.median(p99[cls == "medium"]) == pytest.approx(0.55, abs=0.04)
    assert np.median(p99[cls == "low"]) < np.median(p99[cls == "medium"]) < np.median(p99[cls == "high"])


def test_usage_has_diurnal_cycles_steady_memory_spikes_and_respects_ceilings(small_pool):
    jobs, hosts, tasks, cpu, mem = small_pool
    by_time = cpu.sum(axis=0)
    assert by_time.max() / by_time.min() > 1.2  # the fleet follows a daily cycle
    variation = lambda x: x.std(axis=1) / x.mean(axis=1)  # noqa: E731
    assert (variation(mem) < variation(cpu)).mean() > 0.99
    cpu_request = tasks["cpu_request"].to_numpy()[:, None]
    assert (cpu >= 0).all() and (cpu <= 1.2 * cpu_request + 1e-4).all()
    assert (mem <= tasks["mem_request"].to_numpy()[:, None] + 1e-4).all()
    low = jobs.set_index("job_id").loc[tasks["job_id"], "cls"].to_numpy() == "low"
    spikes = (cpu[low] >= 0.8 * cpu_request[low] - 1e-4).mean()
    assert 0.0003 < spikes < 0.003  # ~0.1% of samples spike; low-class tasks never get near the request otherwise


def test_usage_streams_in_bounded_batches_of_whole_tasks():
    jobs = make_jobs(20_000, seed=3)
    tasks = place_by_requests(jobs, make_hosts(10_000, FLEET), FLEET, seed=3)
    samples = sample_count(1, 300)
    tracemalloc.start()
    rows, largest, previous_last = 0, 0, ""
    for batch in usage_batches(tasks, jobs, days=1, interval=300, seed=3, batch_rows=50_000):
        ids = batch.column("task_id")
        first, last = ids[0].as_py(), ids[-1].as_py()
        assert first > previous_last  # sorted by task_id across batches
        previous_last = last
        rows += batch.num_rows
        largest = max(largest, batch.num_rows)
        assert batch.num_rows % samples == 0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert rows == 20_000 * samples  # 5.76M rows, ~140 MB of values if held at once
    assert largest <= 50_000
    assert peak < 32 * 2**20


def test_written_trace_is_valid_sorted_and_typed(tmp_path):
    summary = generate_trace(tmp_path / "t", tasks=300, hosts=150, days=1, interval=600, seed=5)
    trace = read_trace(tmp_path / "t")
    assert len(trace.tasks) == 300 and len(trace.hosts) == 150
    assert summary.usage_rows == 300 * 144 and summary.samples_per_task == 144
    assert trace.tasks["movable"].dtype == bool and trace.tasks["service"].isna().mean() > 0.5
    usage = pq.read_table(trace.usage_path)
    ts_type = usage.schema.field("ts").type  # generated as timestamp[s, UTC]; Parquet has no seconds unit and keeps ms
    assert pa.types.is_timestamp(ts_type) and ts_type.tz == "UTC"
    seconds = usage.column("ts").cast(pa.timestamp("s", tz="UTC")).cast(pa.int64()).to_numpy()
    assert (np.diff(seconds[:144]) == 600).all() and seconds[0] == pd.Timestamp("2024-01-01T00:00:00Z").timestamp()
    assert all(usage.schema.field(c).type == pa.float32() for c in ("cpu", "mem", "net", "membw"))
    frame = usage.select(["task_id", "ts"]).to_pandas()
    assert frame.equals(frame.sort_values(["task_id", "ts"], ignore_index=True))
    assert set(frame["task_id"]) == set(trace.tasks["task_id"])
    assert usage.num_rows == summary.usage_rows


def test_same_seed_gives_byte_identical_tables_and_other_seeds_differ(tmp_path):
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        generate_trace(tmp_path / name, tasks=200, hosts=100, days=0.5, interval=900, seed=seed)
    for table in ("hosts.parquet", "tasks.parquet", "usage.parquet"):
        assert (tmp_path / "a" / table).read_bytes() == (tmp_path / "b" / table).read_bytes()
    for table in ("tasks.parquet", "usage.parquet"):
        assert (tmp_path / "a" / table).read_bytes() != (tmp_path / "c" / table).read_bytes()


def test_cli_generates_a_readable_trace(tmp_path):
    result = CliRunner().invoke(cli, ["generate", "--tasks", "120", "--hosts", "60", "--days", "1", "--interval", "3600",
                                      "--seed", "2", "--out", str(tmp_path / "g")])
    assert result.exit_code == 0, result.output
    assert "120 tasks" in result.output and "2,880 usage rows" in result.output and "of cores" in result.output
    assert len(read_trace(tmp_path / "g").tasks) == 120


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tasks", "0"], "--tasks: must be > 0, got 0"),
        (["--hosts", "-3"], "--hosts: must be > 0, got -3"),
        (["--days", "0"], "--days: must be > 0"),
        (["--interval", "0"], "--interval: must be > 0"),
        (["--days", "1", "--interval", "90000"], "--interval: 90000 s is longer than --days 1"),
        (["--tasks", "1000", "--hosts", "5"], "--hosts: the 5 hosts cannot hold the tasks"),
    ],
)
def test_cli_rejects_bad_arguments_with_exit_2(tmp_path, args, message):
    result = CliRunner().invoke(cli, ["generate", "--out", str(tmp_path / "g"), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert not (tmp_path / "g").exists()


def test_too_few_hosts_names_how_many_would_do(tmp_path):
    with pytest.raises(InputError, match=r"about (\d+) hosts would be needed") as err:
        generate_trace(tmp_path / "g", tasks=1_000, hosts=50, days=1, seed=0)
    needed = int(str(err.value).split("about ")[1].split(" hosts")[0])
    assert needed > 50
    jobs = make_jobs(1_000, seed=0)
    place_by_requests(jobs, make_hosts(needed, FLEET), FLEET, seed=0)  # the advice works


def test_classes_cover_the_three_behaviours():
    jobs = make_jobs(37_000, seed=0)
    share = jobs.groupby("cls")["n_tasks"].sum() / 37_000
    assert set(share.index) == set(CLASSES) and share.min() > 0.2


def test_a_custom_catalog_is_used_and_copied_into_the_trace(tmp_path):
    catalog = tmp_path / "fleet.toml"
    catalog.write_text('[types.II]\ncost = 2.0\n[arch.Big]\ntype = "II"\ncores = 128\nmem = 1024\nnet = 100\nmembw = 400\nscore = 4.0\n')
    generate_trace(tmp_path / "g", tasks=200, hosts=60, days=1, interval=3600, fleet=catalog)
    assert (tmp_path / "g" / "fleet.toml").read_text() == catalog.read_text()
    trace = read_trace(tmp_path / "g")
    assert set(trace.hosts["arch"]) == {"Big"}


def test_tasks_that_fit_no_architecture_are_reported(tmp_path):
    catalog = tmp_path / "tiny.toml"
    catalog.write_text('[types.I]\ncost = 1.0\n[arch.Tiny]\ntype = "I"\ncores = 4\nmem = 8\nnet = 1\nscore = 0.2\n')
    with pytest.raises(InputError, match="fits no architecture of the catalog"):
        generate_trace(tmp_path / "g", tasks=100, hosts=50, days=1, fleet=catalog)
