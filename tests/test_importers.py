"""Importers: Bitbrains GWA-T-12 and Alibaba openb into the native trace format.

Synthetic tests build tiny CSVs in tmp_path; the real-data tests read
../shared/data and skip when it is absent.
"""
from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from packer.cli import cli
from packer.errors import InfeasibleError, InputError
from packer.io.importers import ImportSummary, import_bitbrains, import_openb
from packer.io.importers.initial_placement import first_fit_decreasing
from packer.io.trace import read_trace

from conftest import SHARED_DATA

BITBRAINS = SHARED_DATA / "bitbrains-rnd-2013-7"
OPENB = SHARED_DATA / "alibaba-openb"

BB_HEADER = [
    "Timestamp [ms]", "CPU cores", "CPU capacity provisioned [MHZ]", "CPU usage [MHZ]", "CPU usage [%]",
    "Memory capacity provisioned [KB]", "Memory usage [KB]", "Disk read throughput [KB/s]", "Disk write throughput [KB/s]",
    "Network received throughput [KB/s]", "Network transmitted throughput [KB/s]",
]


def write_vm(folder: Path, stem: str, rows: list[list], header: list[str] = BB_HEADER) -> Path:
    """A Bitbrains-style CSV: ';' separators, a tab after each ';' (as in the real files)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [";\t".join(header)] + [";\t".join(str(v) for v in row) for row in rows]
    path = folder / f"{stem}.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


# ts, cores, MHz provisioned, MHz used, %, mem KB provisioned, mem KB used, disk r, disk w, net rx, net tx
VM1 = [
    [1372629804, 2, 5200.0, 1300.0, 25.0, 8388608.0, 2097152.0, 0, 0, 100.0, 50.0],
    [1372630104, 2, 5200.0, 2600.0, 50.0, 8388608.0, 4194304.0, 0, 0, 10.0, 0.0],
    [1372630404, 4, 10400.0, 7800.0, 75.0, 16777216.0, 1048576.0, 0, 0, 0.0, 0.0],
]
VM2 = [
    [1372629804, 1, 2600.0, 260.0, 10.0, 2097152.0, 1048576.0, 0, 0, 1.0, 1.0],
    [1372630104, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0.0, 0.0],  # VM off: no CPU provisioned, none used
]


def host_loads(hosts: pd.DataFrame, tasks: pd.DataFrame, fleet, dims: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Summed requests and capacities per host, (hosts, dims), computed independently of the importer."""
    load = tasks.groupby("host_id")[[f"{d}_request" for d in dims]].sum().reindex(hosts["host_id"], fill_value=0.0).to_numpy()
    capacity = np.column_stack([fleet.capacity(d).loc[hosts["arch"]].to_numpy() for d in dims])
    return load, capacity


# --- Bitbrains, synthetic -------------------------------------------------------------------


def test_bitbrains_conversions(tmp_path: Path) -> None:
    src = tmp_path / "bb"
    write_vm(src, "1", VM1)
    write_vm(src, "2", VM2)
    summary = import_bitbrains(src, tmp_path / "out")
    assert isinstance(summary, ImportSummary)
    assert (summary.records, summary.tasks, summary.usage_rows) == (2, 2, 5)

    trace = read_trace(tmp_path / "out")
    tasks = trace.tasks.set_index("task_id")
    assert list(tasks.index) == ["vm1", "vm2"] and list(tasks["job_id"]) == ["vm1", "vm2"]
    assert tasks.loc["vm1", "cpu_request"] == 4  # the largest provisioned cores
    assert tasks.loc["vm1", "mem_request"] == pytest.approx(16.0)  # 16777216 KiB
    # peak net of vm1: 150 KiB/s = 150 * 1024 * 8 / 1e9 Gbps = 0.0012288 -> rounded up to 0.1
    assert tasks.loc["vm1", "net_request"] == pytest.approx(0.1)

    usage = pq.read_table(trace.usage_path).to_pandas()
    assert list(usage["task_id"]) == ["vm1"] * 3 + ["vm2"] * 2
    vm1 = usage[usage["task_id"] == "vm1"].reset_index(drop=True)
    assert vm1["ts"].iloc[0] == pd.Timestamp(1372629804, unit="s", tz="UTC")
    assert vm1["cpu"].tolist() == pytest.approx([1300 / 2600, 2600 / 2600, 7800 / 2600])
    assert vm1["mem"].tolist() == pytest.approx([2.0, 4.0, 1.0])
    assert vm1["net"].iloc[0] == pytest.approx(150 * 1024 * 8 / 1e9)
    vm2 = usage[usage["task_id"] == "vm2"]
    assert vm2["cpu"].tolist() == pytest.approx([0.1, 0.0])

    load, capacity = host_loads(trace.hosts, trace.tasks, trace.fleet, ["cpu", "mem", "net"])
    assert (load <= capacity + 1e-9).all()
    assert trace.hosts["domain"].notna().all()


def test_bitbrains_duplicate_timestamps_merge_to_max(tmp_path: Path) -> None:
    rows = [VM1[0], [VM1[0][0], 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0.0, 0.0], VM1[1]]
    write_vm(tmp_path / "bb", "7", rows)
    summary = import_bitbrains(tmp_path / "bb", tmp_path / "out")
    assert summary.merged_samples == 1 and summary.usage_rows == 2
    usage = pq.read_table(tmp_path / "out" / "usage.parquet").to_pandas()
    assert usage["cpu"].tolist() == pytest.approx([0.5, 1.0])


def test_bitbrains_fixed_net_request_and_own_catalog(tmp_path: Path) -> None:
    write_vm(tmp_path / "bb", "1", VM1)
    catalog = tmp_path / "fleet.toml"
    catalog.write_text('[arch.Box]\ntype = "I"\ncost = 1.0\ncores = 8\nmem = 64\nnet = 10\nscore = 1.0\n')
    summary = import_bitbrains(tmp_path / "bb", tmp_path / "out", fleet=catalog, hosts_per_arch=3, slack=0.0, net_request=2.0)
    assert summary.hosts_per_arch == {"Box": 3}
    trace = read_trace(tmp_path / "out")  # uses the copied catalog
    assert (tmp_path / "out" / "fleet.toml").read_text() == catalog.read_text()
    assert trace.tasks["net_request"].tolist() == [2.0]


def test_bitbrains_vm_too_big_for_every_architecture(tmp_path: Path) -> None:
    write_vm(tmp_path / "bb", "1", VM1)
    huge = [[1372629804, 2, 5200.0, 10.0, 1.0, 2**20 * 4096.0, 1.0, 0, 0, 0.0, 0.0]]  # 4 TiB
    write_vm(tmp_path / "bb", "9", huge)
    with pytest.raises(InfeasibleError) as info:
        import_bitbrains(tmp_path / "bb", tmp_path / "out")
    assert info.value.tasks == ["vm9"] and not (tmp_path / "out").exists()
    result = CliRunner().invoke(cli, ["import", "bitbrains", str(tmp_path / "bb"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 3 and "vm9" in result.output

    summary = import_bitbrains(tmp_path / "bb", tmp_path / "out", drop_unfit=True)
    assert list(summary.dropped) == ["vm9"] and summary.tasks == 1
    assert set(pq.read_table(tmp_path / "out" / "usage.parquet")["task_id"].to_pylist()) == {"vm1"}


def test_bitbrains_missing_column_exits_2(tmp_path: Path) -> None:
    header = [c for c in BB_HEADER if c != "Memory usage [KB]"]
    write_vm(tmp_path / "bb", "1", [row[:6] + row[7:] for row in VM1], header=header)
    result = CliRunner().invoke(cli, ["import", "bitbrains", str(tmp_path / "bb"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "1.csv" in result.output and "Memory usage [KB]" in result.output and "required column missing" in result.output
    assert not (tmp_path / "out").exists()


def test_bitbrains_missing_folder_and_no_csv(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["import", "bitbrains", str(tmp_path / "nope"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "not found" in result.output
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no CSV files"):
        import_bitbrains(tmp_path / "empty", tmp_path / "out")


def test_bitbrains_invalid_rows_fail_or_are_skipped(tmp_path: Path) -> None:
    rows = [VM1[0], [1372630104, 2, 5200.0, "nan", 0.0, 8388608.0, 1.0, 0, 0, 0.0, 0.0], [1372630404, 2, 5200.0, 10.0, 0.0, 8388608.0, -5.0, 0, 0, 0.0, 0.0], VM1[1]]
    write_vm(tmp_path / "bb", "3", rows)
    args = ["import", "bitbrains", str(tmp_path / "bb"), "--out", str(tmp_path / "out")]
    failed = CliRunner().invoke(cli, args)
    assert failed.exit_code == 2
    assert "CPU usage [MHZ]" in failed.output and "missing or non-numeric" in failed.output
    assert "Memory usage [KB]" in failed.output and "negative value" in failed.output and "line 4 (Timestamp [ms]=1372630404, Memory usage [KB]=-5.0)" in failed.output and "--skip-invalid" in failed.output
    assert not (tmp_path / "out").exists()

    skipped = CliRunner().invoke(cli, [*args, "--skip-invalid"])
    assert skipped.exit_code == 0, skipped.output
    assert "skipped 2 invalid rows" in skipped.output and "usage rows: 2" in skipped.output
    summary = import_bitbrains(tmp_path / "bb", tmp_path / "out", skip_invalid=True)
    assert summary.skipped_rows == 2 and {p.column for p in summary.skipped} == {"CPU usage [MHZ]", "Memory usage [KB]"}


def test_bitbrains_cpu_used_without_cpu_provisioned_is_invalid(tmp_path: Path) -> None:
    write_vm(tmp_path / "bb", "4", [VM1[0], [1372630104, 0, 0.0, 99.0, 0.0, 8388608.0, 1.0, 0, 0, 0.0, 0.0]])
    with pytest.raises(InputError, match="cannot be converted to cores"):
        import_bitbrains(tmp_path / "bb", tmp_path / "out")


# --- openb, synthetic -----------------------------------------------------------------------

NODES = """sn,cpu_milli,memory_mib,gpu,model
n0,32000,262144,0,
n1,96000,393216,8,G2
n2,104000,524288,2,T4
n3,96000,393216,8,G2
"""
PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,12000,16384,1,470,,LS,Running,0,10,0
p1,6000,12288,2,1000,T4,LS,Running,1,10,1
p2,88000,262144,0,0,,BE,Running,2,10,2
p3,4000,8192,1,1000,G2|V100M16,LS,Pending,3,10,
p4,500,1024,8,1000,,LS,Running,4,10,4
"""


def write_openb(folder: Path, pods: str = PODS, nodes: str = NODES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "openb_node_list_all_node.csv").write_text(nodes)
    (folder / "openb_pod_list_default.csv").write_text(pods)
    return folder


def test_openb_fleet_tasks_and_placement(tmp_path: Path) -> None:
    src = write_openb(tmp_path / "ob")
    summary = import_openb(src, tmp_path / "out", phases=None)
    assert (summary.records, summary.tasks, summary.usage_rows) == (5, 5, 0)
    assert summary.hosts_per_arch == {"cpu32-mem256": 1, "cpu104-mem512-gpu2-T4": 1, "cpu96-mem384-gpu8-G2": 2}
    assert not (tmp_path / "out" / "usage.parquet").exists()

    catalog = tomllib.loads((tmp_path / "out" / "fleet.toml").read_text())["arch"]
    assert catalog["cpu96-mem384-gpu8-G2"] == {"type": "II", "cores": 96, "mem": 384, "gpu": 8, "gpu_model": "G2", "net": 25, "score": 3, "cost": 11}
    assert catalog["cpu32-mem256"] == {"type": "I", "cores": 32, "mem": 256, "gpu": 0, "net": 25, "score": 1, "cost": 1}

    trace = read_trace(tmp_path / "out")
    assert trace.usage_path is None and set(trace.dims) == {"cpu", "mem", "net", "gpu"}
    tasks = trace.tasks.set_index("task_id")
    assert tasks.loc["p0", ["cpu_request", "mem_request", "gpu_request", "net_request"]].tolist() == pytest.approx([12.0, 16.0, 0.47, 0.0])
    assert tasks.loc["p1", "gpu_request"] == 2.0
    assert tasks.loc["p1", "allowed_archs"] == "cpu104-mem512-gpu2-T4"
    assert tasks.loc["p3", "allowed_archs"] == "cpu96-mem384-gpu8-G2"  # V100M16: no such node
    assert tasks["allowed_archs"].isna().sum() == 3
    assert tasks.loc["p1", "host_id"] == "n2" and tasks.loc["p3", "host_id"] in {"n1", "n3"}

    load, capacity = host_loads(trace.hosts, trace.tasks, trace.fleet, ["cpu", "mem", "gpu"])
    assert (load <= capacity + 1e-9).all()


def test_openb_phase_filter_default_running(tmp_path: Path) -> None:
    summary = import_openb(write_openb(tmp_path / "ob"), tmp_path / "out")
    assert summary.tasks == 4 and summary.filtered == 1
    with pytest.raises(InputError, match="no pod has phase Sleeping"):
        import_openb(tmp_path / "ob", tmp_path / "out2", phases=["Sleeping"])


def test_openb_missing_column_exits_2(tmp_path: Path) -> None:
    pods = PODS.replace("memory_mib", "mem")
    src = write_openb(tmp_path / "ob", pods=pods)
    result = CliRunner().invoke(cli, ["import", "openb", str(src), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "openb_pod_list_default.csv" in result.output and "memory_mib" in result.output


def test_openb_invalid_rows_and_skip(tmp_path: Path) -> None:
    pods = PODS + "p5,-1000,1024,0,0,,LS,Running,5,10,5\np6,1000,,0,0,,LS,Running,6,10,6\n"
    src = write_openb(tmp_path / "ob", pods=pods)
    args = ["import", "openb", str(src), "--out", str(tmp_path / "out")]
    failed = CliRunner().invoke(cli, args)
    assert failed.exit_code == 2 and "cpu_milli" in failed.output and "p5" in failed.output and "memory_mib" in failed.output
    ok = CliRunner().invoke(cli, [*args, "--skip-invalid"])
    assert ok.exit_code == 0, ok.output
    assert "skipped 2 invalid rows" in ok.output and "imported 4 tasks from 7 pods" in ok.output


def test_openb_pod_that_fits_nowhere(tmp_path: Path) -> None:
    src = write_openb(tmp_path / "ob", pods=PODS + "p9,500000,1024,0,0,,LS,Running,9,10,9\n")
    result = CliRunner().invoke(cli, ["import", "openb", str(src), "--out", str(tmp_path / "out")])
    assert result.exit_code == 3 and "p9" in result.output
    summary = import_openb(src, tmp_path / "out", drop_unfit=True)
    assert list(summary.dropped) == ["p9"] and "even alone" in summary.dropped["p9"]


def test_openb_bad_node_list(tmp_path: Path) -> None:
    src = write_openb(tmp_path / "ob", nodes=NODES + "n4,8000,32768,1,\n")
    with pytest.raises(InputError, match="GPU node without a GPU model"):
        import_openb(src, tmp_path / "out")


# --- initial placement ----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    demand=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=30),
    hosts=st.lists(st.tuples(st.integers(1, 10), st.integers(1, 10), st.booleans()), min_size=1, max_size=6),
    constrained=st.lists(st.booleans(), min_size=30, max_size=30),
)
def test_first_fit_respects_capacity_and_eligibility(demand, hosts, constrained) -> None:
    d = np.array(demand, dtype=float)
    cap = np.array([h[:2] for h in hosts], dtype=float)
    task_class = np.array(constrained[: len(d)], dtype=int)
    class_hosts = np.vstack([np.ones(len(cap), bool), np.array([h[2] for h in hosts])])
    order = np.lexsort((-d[:, 1], -d[:, 0]))
    host_of = first_fit_decreasing(d, cap, order, task_class, class_hosts)
    placed = host_of >= 0
    load = np.zeros_like(cap)
    np.add.at(load, host_of[placed], d[placed])
    assert (load <= cap + 1e-9).all()
    assert class_hosts[task_class[placed], host_of[placed]].all()
    # first fit never leaves a task out while an eligible host still has room for it
    residual = cap - load
    for t in np.flatnonzero(~placed):
        room = (residual >= d[t] - 1e-9).all(axis=1) & class_hosts[task_class[t]]
        assert not room.any()


# --- real data ------------------------------------------------------------------------------

needs_bitbrains = pytest.mark.skipif(not BITBRAINS.is_dir(), reason=f"real Bitbrains data not found at {BITBRAINS}")
needs_openb = pytest.mark.skipif(not OPENB.is_dir(), reason=f"real openb data not found at {OPENB}")


@pytest.fixture(scope="module")
def bitbrains_trace(tmp_path_factory) -> tuple[ImportSummary, Path]:
    out = tmp_path_factory.mktemp("bitbrains") / "trace"
    return import_bitbrains(BITBRAINS, out, drop_unfit=True), out


@needs_bitbrains
def test_real_bitbrains(bitbrains_trace) -> None:
    summary, out = bitbrains_trace
    assert summary.records == 100
    # VM 27 provisions 511.5 GiB, more than any Table I architecture (256 GiB at most)
    assert list(summary.dropped) == ["vm27"] and summary.tasks == 99
    trace = read_trace(out)
    assert len(trace.tasks) == 99 and trace.tasks["task_id"].is_unique

    raw = pd.read_csv(BITBRAINS / "22.csv", sep=";")
    raw.columns = raw.columns.str.strip()
    row = raw.iloc[100]
    task = trace.tasks.set_index("task_id").loc["vm22"]
    assert task["cpu_request"] == raw["CPU cores"].max()
    assert task["mem_request"] == pytest.approx(raw["Memory capacity provisioned [KB]"].max() / 1024**2)
    usage = pq.read_table(trace.usage_path, filters=[("task_id", "=", "vm22")]).to_pandas().set_index("ts")
    assert len(usage) == raw["Timestamp [ms]"].nunique()
    sample = usage.loc[pd.Timestamp(int(row["Timestamp [ms]"]), unit="s", tz="UTC")]
    assert sample["cpu"] == pytest.approx(row["CPU usage [MHZ]"] / (row["CPU capacity provisioned [MHZ]"] / row["CPU cores"]))
    assert sample["mem"] == pytest.approx(row["Memory usage [KB]"] / 1024**2)
    net_kib = row["Network received throughput [KB/s]"] + row["Network transmitted throughput [KB/s]"]
    assert sample["net"] == pytest.approx(net_kib * 1024 * 8 / 1e9)

    load, capacity = host_loads(trace.hosts, trace.tasks, trace.fleet, ["cpu", "mem", "net"])
    assert (load <= capacity + 1e-9).all()
    assert summary.usage_rows == pq.ParquetFile(trace.usage_path).metadata.num_rows


@needs_openb
@pytest.mark.parametrize("pods", ["default", "gpuspec33"])
def test_real_openb(tmp_path: Path, pods: str) -> None:
    summary = import_openb(OPENB, tmp_path / "out", pods=pods)
    raw = pd.read_csv(OPENB / f"openb_pod_list_{pods}.csv")
    running = raw[raw["pod_phase"] == "Running"]
    assert summary.records == 8152 and summary.tasks == len(running) == 5193 and summary.hosts == 1523
    assert len(summary.hosts_per_arch) == 27
    trace = read_trace(tmp_path / "out")
    assert len(trace.hosts) == 1523 and trace.usage_path is None

    tasks = trace.tasks.set_index("task_id")
    row = running.iloc[7]
    task = tasks.loc[row["name"]]
    assert task["cpu_request"] == row["cpu_milli"] / 1000 and task["mem_request"] == row["memory_mib"] / 1024
    assert task["gpu_request"] == pytest.approx(row["num_gpu"] * row["gpu_milli"] / 1000)

    load, capacity = host_loads(trace.hosts, trace.tasks, trace.fleet, ["cpu", "mem", "gpu"])
    assert (load <= capacity + 1e-9).all()

    spec = running.set_index("name")["gpu_spec"].dropna()
    if pods == "default":
        assert spec.empty and ("allowed_archs" not in trace.tasks or trace.tasks["allowed_archs"].isna().all())
        return
    model = trace.fleet.archs["gpu_model"]
    allowed = tasks.loc[spec.index, "allowed_archs"].str.split("|").explode()
    wanted = spec.str.split("|").loc[allowed.index]
    assert [model[a] in set(w) for a, w in zip(allowed, wanted)] == [True] * len(allowed)
    # and every architecture with a wanted model is allowed
    per_pod = allowed.groupby(level=0).apply(set)
    expected = spec.str.split("|").map(lambda ms: set(model.index[model.isin(ms)]))
    assert (per_pod.sort_index() == expected.sort_index()).all()
    host_arch = trace.hosts.set_index("host_id")["arch"]
    on = host_arch.loc[tasks.loc[spec.index, "host_id"]].to_numpy()
    assert all(a in s for a, s in zip(on, tasks.loc[spec.index, "allowed_archs"].str.split("|")))
