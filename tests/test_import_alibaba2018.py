"""`packer import alibaba2018`: the Alibaba cluster-trace-v2018 CSVs (no header) into a trace.

Fixtures follow cluster-trace-v2018/schema.txt (alibaba/clusterdata): columns in its
order, times in seconds, cpu_request 100 = 1 core, memory normalized to [0, 100]
(100 = the largest machine), usage percentages with -1/101 marking invalid samples.
"""
from __future__ import annotations

import gzip
import tomllib
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from packer.cli import cli
from packer.errors import InputError
from packer.io.importers import import_alibaba2018
from packer.io.trace import read_trace

# machine_id, time_stamp, failure_domain_1, failure_domain_2, cpu_num, mem_size, status
MACHINES = """m_1,0,11,a,96,100,USING
m_2,0,11,a,96,100,USING
m_10,0,12,b,64,50,USING
m_3,0,12,b,96,100,USING
m_4,0,13,c,96,100,USING
m_4,500,13,c,96,100,OFFLINE
"""
# container_id, machine_id, time_stamp, app_du, status, cpu_request, cpu_limit, mem_size
CONTAINERS = """c_1,m_1,0,app_1,started,400,400,1.5625
c_2,m_1,0,app_1,started,800,800,3.125
c_3,m_10,100,app_2,started,200,200,0.78125
c_1,m_2,600,app_1,started,400,400,1.5625
c_4,m_99,0,app_3,started,100,100,0.5
c_5,,0,app_3,allocated,100,100,0.5
c_6,m_3,300,app_2,started,100,100,1.0
"""
# container_id, machine_id, time_stamp, cpu_util_percent, mem_util_percent, cpi, mem_gps, mpki, net_in, net_out, disk_io_percent
USAGE = """c_1,m_1,10,50,20,1.2,3.1,4,0.1,0.1,2
c_1,m_1,20,-1,20,1.2,3.1,4,0.1,0.1,2
c_2,m_1,10,101,30,1.1,2.0,3,0.1,0.1,1
c_2,m_1,20,10,30,,,,,,
c_3,m_10,10,25,50,1.0,1.0,1,0.2,0.2,0
c_4,m_99,10,25,50,1.0,1.0,1,0.2,0.2,0
c_6,m_3,310,40,10,1.0,1.0,1,0.2,0.2,0
"""


def write_trace(folder: Path, machines: str = MACHINES, containers: str = CONTAINERS, usage: str | None = USAGE, gz: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "machine_meta.csv").write_text(machines)
    (folder / "container_meta.csv").write_text(containers)
    if usage is not None:
        if gz:
            (folder / "container_usage.csv.gz").write_bytes(gzip.compress(usage.encode()))
        else:
            (folder / "container_usage.csv").write_text(usage)
    return folder


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_conversions_and_default_snapshot(tmp_path: Path) -> None:
    summary = import_alibaba2018(write_trace(tmp_path / "ali", gz=True), tmp_path / "out")  # --at: 600 s, the last record
    trace = read_trace(tmp_path / "out")
    tasks = trace.tasks.set_index("task_id")
    assert sorted(tasks.index) == ["c_1", "c_2", "c_3", "c_6"]
    assert sorted(summary.dropped) == ["c_4", "c_5"] and "m_99" in summary.dropped["c_4"] and "no machine_id" in summary.dropped["c_5"]
    assert "container_meta.csv line 6" in summary.dropped["c_5"]
    assert summary.records == 6 and summary.filtered == 0
    assert tasks.loc["c_1", "host_id"] == "m_2"  # its last record (600 s) moved it
    assert tasks.loc["c_2", ["job_id", "cpu_request", "mem_request"]].tolist() == ["app_1", 8.0, pytest.approx(3.125 / 100 * 512)]
    assert (tasks["net_request"] == 0).all()

    hosts = trace.hosts.set_index("host_id")
    assert list(trace.hosts["host_id"]) == ["m_1", "m_2", "m_3", "m_4", "m_10"]  # natural order; m_4's status is not read
    assert hosts.loc["m_10", ["arch", "domain"]].tolist() == ["cpu64-mem256", "12"]
    assert summary.hosts_per_arch == {"cpu64-mem256": 1, "cpu96-mem512": 4}
    catalog = tomllib.loads((tmp_path / "out" / "fleet.toml").read_text())["arch"]
    assert catalog["cpu96-mem512"] == {"type": "I", "cores": 96, "mem": 512, "net": 25, "score": 3, "cost": 1}
    assert catalog["cpu64-mem256"]["cost"] == pytest.approx((64 / 96 + 0.5) / 2)

    samples = pq.read_table(trace.usage_path).to_pandas()
    assert samples["task_id"].tolist() == ["c_1", "c_2", "c_3", "c_6"]  # -1 and 101 samples left out, c_4 not kept
    c1 = samples.iloc[0]
    assert c1["ts"] == pd.Timestamp(10, unit="s", tz="UTC")
    assert [c1["cpu"], c1["mem"]] == pytest.approx([0.5 * 4, 0.2 * 1.5625 / 100 * 512])  # percent of the container's request
    assert samples.iloc[2][["cpu", "mem"]].tolist() == pytest.approx([0.25 * 2, 0.5 * 0.78125 / 100 * 512])
    assert {(p.column, p.count) for p in summary.skipped} == {("cpu_util_percent", 2)}


def test_earlier_snapshot_memory_option_and_status(tmp_path: Path) -> None:
    src = write_trace(tmp_path / "ali")
    summary = import_alibaba2018(src, tmp_path / "out", at=150, machine_mem_gib=256)
    tasks = read_trace(tmp_path / "out").tasks.set_index("task_id")
    assert sorted(tasks.index) == ["c_1", "c_2", "c_3"]  # c_6 appears at 300 s
    assert tasks.loc["c_1", "host_id"] == "m_1"  # not yet moved
    assert tasks.loc["c_1", "mem_request"] == pytest.approx(1.5625 / 100 * 256)
    assert summary.hosts_per_arch == {"cpu64-mem128": 1, "cpu96-mem256": 4}

    summary = import_alibaba2018(src, tmp_path / "started", statuses=["started"])
    assert summary.filtered == 1 and "c_5" not in summary.dropped  # c_5 is 'allocated'
    with pytest.raises(InputError, match="no container's last status is running"):
        import_alibaba2018(src, tmp_path / "none", statuses=["running"])


def test_subsample_machines(tmp_path: Path) -> None:
    src = write_trace(tmp_path / "ali")
    result = run("import", "alibaba2018", src, "--machines", "2", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    trace = read_trace(tmp_path / "out")
    assert list(trace.hosts["host_id"]) == ["m_1", "m_2"]
    assert sorted(trace.tasks["task_id"]) == ["c_1", "c_2"]
    assert "left out (by --status, or on machines outside --machines): 2 containers" in result.output  # c_3 (m_10), c_6 (m_3)
    assert "dropped 2 tasks without a host" in result.output


def test_round_trip_validate_solve_verify(tmp_path: Path) -> None:
    src = write_trace(tmp_path / "ali")
    trace, plan = tmp_path / "trace", tmp_path / "plan"
    result = run("import", "alibaba2018", src, "--out", trace)
    assert result.exit_code == 0, result.output
    assert "imported 4 tasks from 6 containers" in result.output and "usage rows: 4" in result.output
    assert run("validate", trace).exit_code == 0
    solved = run("solve", trace, "--out", plan, "--time-limit", "5")
    assert solved.exit_code == 0, solved.output
    checked = run("verify", trace, plan)
    assert checked.exit_code == 0, checked.output


def test_requests_only_without_usage(tmp_path: Path) -> None:
    import_alibaba2018(write_trace(tmp_path / "ali", usage=None), tmp_path / "out")
    assert read_trace(tmp_path / "out").usage_path is None


@pytest.mark.parametrize("table, text, column, line", [
    ("machine_meta", MACHINES.replace("m_10,0,12,b,64,50,USING", "m_10,0,12,b,64,50"), "", "line 3"),  # a field short
    ("machine_meta", MACHINES.replace("m_2,0,11,a,96,100,USING", "m_2,0,11,a,96,100,USING,x"), "", "line 2"),  # a field too many
    ("machine_meta", MACHINES.replace("m_3,0,12,b,96,100", "m_3,0,12,b,ninety,100"), "cpu_num", "line 4 (machine_id=m_3, cpu_num=ninety)"),
    ("container_meta", CONTAINERS.replace("c_3,m_10,100,app_2,started,200", "c_3,m_10,100,app_2,started,"), "cpu_request", "line 3"),
    ("container_usage", USAGE.replace("c_3,m_10,10,25", "c_3,m_10,10,abc"), "cpu_util_percent", "line 5"),
])
def test_bad_files_exit_2(tmp_path: Path, table: str, text: str, column: str, line: str) -> None:
    files = {"machines": MACHINES, "containers": CONTAINERS, "usage": USAGE}
    files[{"machine_meta": "machines", "container_meta": "containers", "container_usage": "usage"}[table]] = text
    src = write_trace(tmp_path / "ali", **files)
    result = run("import", "alibaba2018", src, "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert f"{table}.csv" in result.output and line in result.output and column in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_missing_file_and_bad_options(tmp_path: Path) -> None:
    src = write_trace(tmp_path / "ali")
    (src / "container_meta.csv").unlink()
    result = run("import", "alibaba2018", src, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "container_meta.csv" in result.output and "not found" in result.output
    src = write_trace(tmp_path / "ali2")
    assert run("import", "alibaba2018", src, "--out", tmp_path / "out", "--machine-mem", "0").exit_code == 2
    early = run("import", "alibaba2018", src, "--out", tmp_path / "out", "--at", "0", "--machines", "1")
    assert early.exit_code == 0, early.output  # at 0 s: c_1 and c_2 on m_1
    assert sorted(read_trace(tmp_path / "out").tasks["task_id"]) == ["c_1", "c_2"]


def test_duplicate_samples_merge_to_the_larger(tmp_path: Path) -> None:
    usage = USAGE + "c_3,m_10,10,75,25,1.0,1.0,1,0.2,0.2,0\n"  # c_3 again at 10 s
    summary = import_alibaba2018(write_trace(tmp_path / "ali", usage=usage), tmp_path / "out")
    assert summary.merged_samples == 1 and summary.usage_rows == 4
    samples = pq.read_table(tmp_path / "out" / "usage.parquet").to_pandas().set_index("task_id")
    assert samples.loc["c_3", ["cpu", "mem"]].tolist() == pytest.approx([0.75 * 2, 0.5 * 0.78125 / 100 * 512])  # the larger of each
