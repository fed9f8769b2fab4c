"""`packer import google2019`: a Borg 2019 cell exported from BigQuery (JSON lines or CSV shards) into a trace.

The fixtures follow clusterdata_trace_format_v3.proto (google/cluster-data): times in
microseconds, CPU and memory normalized (1.0 = the largest machine), 64-bit integers
as JSON strings (as BigQuery exports them), nested {cpus, memory} records.
"""
from __future__ import annotations

import gzip
import json
import tomllib
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from packer.cli import cli
from packer.errors import InputError
from packer.io.importers import import_google2019
from packer.io.trace import read_trace

S = 1_000_000  # microseconds per second


def as_numbers(rows: list[dict]) -> list[dict]:
    """The rows with 64-bit integers as JSON numbers (another exporter's encoding) instead of BigQuery's strings."""
    return [{k: int(v) if isinstance(v, str) and v.lstrip("-").isdigit() else v for k, v in r.items()} for r in rows]


def machine(t, mid, typ, cpus=None, mem=None, platform="PA", switch="s1"):
    row = {"time": str(t), "machine_id": str(mid), "type": str(typ), "switch_id": switch, "platform_id": platform, "missing_data_reason": None}
    row["capacity"] = {"cpus": cpus, "memory": mem} if cpus is not None else None
    return row


MACHINES = [
    machine(0, 1, 1, 0.5, 0.5),
    machine(0, 2, 1, 0.5, 0.5),
    machine(0, 3, 1, 1.0, 1.0, platform="PB", switch="s2"),
    machine(0, 4, 1, 0.25, 0.25, switch="s2"),
    machine(500 * S, 4, 2),  # removed at 500 s (a REMOVE carries no capacity)
    machine(0, 5, 1, 0.5, 0.25, platform="PB", switch="s2"),
    machine(100 * S, 5, 3, 0.5, 0.5, platform="PB", switch="s2"),  # memory upgraded at 100 s
]


def instance(t, typ, coll, idx, mid, cpus=0.0, mem=0.0, ctype=0):
    return {"time": str(t), "type": str(typ), "collection_id": str(coll), "scheduling_class": "1", "missing_type": None,
            "collection_type": str(ctype), "priority": "200", "alloc_collection_id": "0", "instance_index": str(idx), "machine_id": str(mid),
            "alloc_instance_index": "-1", "resource_request": {"cpus": cpus, "memory": mem}, "constraint": []}


INSTANCES = [
    instance(1 * S, 0, 100, 0, 0, 0.1, 0.05),  # SUBMIT
    instance(2 * S, 3, 100, 0, 1, 0.1, 0.05),  # SCHEDULE on 1: running
    instance(1 * S, 0, 100, 1, 0, 0.1, 0.05),
    instance(2 * S, 3, 100, 1, 2, 0.1, 0.05),  # on 2 ...
    instance(400 * S, 6, 100, 1, 2, 0.1, 0.05),  # ... FINISH at 400 s
    instance(10 * S, 3, 100, 2, 4, 0.05, 0.05),  # on 4, which leaves at 500 s
    instance(5 * S, 3, 200, 0, 3, 0.2, 0.1),  # on 3 ...
    instance(150 * S, 10, 200, 0, 3, 0.3, 0.2),  # ... UPDATE_RUNNING: bigger request
    instance(5 * S, 0, 200, 1, 0, 0.1, 0.1),  # only submitted: pending
    instance(5 * S, 3, 300, 0, 99, 0.1, 0.1),  # on a machine the cell never had
    instance(5 * S, 3, 400, 0, 3, 0.2, 0.2, ctype=1),  # an alloc instance: a reservation
    instance(3 * S, 3, 500, 0, 5, 0.1, 0.1),
]


def usage(start_s, coll, idx, mid, avg, peak):
    return {"start_time": str(start_s * S), "end_time": str((start_s + 300) * S), "collection_id": str(coll), "instance_index": str(idx),
            "machine_id": str(mid), "alloc_collection_id": "0", "alloc_instance_index": "-1", "collection_type": "0",
            "average_usage": {"cpus": avg[0], "memory": avg[1]}, "maximum_usage": {"cpus": peak[0], "memory": peak[1]},
            "random_sample_usage": {"cpus": avg[0]}, "assigned_memory": 0.3, "page_cache_memory": 0.01,
            "cycles_per_instruction": 1.2, "memory_accesses_per_instruction": 0.01, "sample_rate": 1.0,
            "cpu_usage_distribution": [avg[0]] * 11, "tail_cpu_usage_distribution": [peak[0]] * 9}


USAGE = [
    usage(0, 200, 0, 3, (0.05, 0.1), (0.08, 0.12)),
    usage(300, 200, 0, 3, (0.1, 0.1), (0.2, 0.1)),
    usage(0, 100, 0, 1, (0.02, 0.03), (0.04, 0.03)),
    usage(300, 100, 0, 1, (0.03, 0.03), (0.05, 0.04)),
    usage(300, 500, 0, 5, (0.01, 0.02), (0.02, 0.02)),
    usage(0, 100, 1, 2, (0.09, 0.04), (0.1, 0.04)),  # a task that finished: not kept
]


def write_lines(path: Path, rows: list[dict]) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def write_cell(folder: Path, machines=MACHINES, instances=INSTANCES, usage_rows=USAGE) -> Path:
    """A cell in BigQuery's shard layout: two gzipped shards of instance_events, one of each other table."""
    folder.mkdir(parents=True, exist_ok=True)
    write_lines(folder / "machine_events-000000000000.json", machines)
    half = len(instances) // 2
    write_lines(folder / "instance_events-000000000000.json.gz", instances[:half])
    write_lines(folder / "instance_events-000000000001.json.gz", instances[half:])
    if usage_rows:
        write_lines(folder / "instance_usage-000000000000.json.gz", usage_rows)
    return folder


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_snapshot_at_the_end_of_usage(tmp_path: Path) -> None:
    src = write_cell(tmp_path / "cell")
    summary = import_google2019(src, tmp_path / "out")  # --at: the last window's end, 600 s
    trace = read_trace(tmp_path / "out")
    tasks = trace.tasks.set_index("task_id")
    assert sorted(tasks.index) == ["100-0", "200-0", "500-0"]
    # 100-1 finished at 400 s, 200-1 is pending, 400-0 is an alloc instance: filtered; 100-2 and 300-0: machine gone/unknown
    assert summary.filtered == 3 and sorted(summary.dropped) == ["100-2", "300-0"]
    assert "machine 4 is not in the cell" in summary.dropped["100-2"]
    assert summary.dropped["100-2"].endswith("instance_events-000000000000.json.gz line 6")
    assert summary.records == 8 and summary.tasks == 3
    # requests: the latest given, scaled by 64 cores and 256 GiB per unit
    assert tasks.loc["200-0", ["cpu_request", "mem_request"]].tolist() == pytest.approx([0.3 * 64, 0.2 * 256])
    assert tasks.loc["200-0", ["job_id", "host_id"]].tolist() == ["200", "3"]
    assert (tasks["net_request"] == 0).all()

    hosts = trace.hosts.set_index("host_id")
    assert sorted(hosts.index) == ["1", "2", "3", "5"]  # 4 was removed at 500 s
    assert hosts.loc["3", "domain"] == "s2"
    assert hosts.loc["5", "arch"] == "p1-cpu32-mem128"  # after its update at 100 s
    assert summary.hosts_per_arch == {"p0-cpu32-mem128": 2, "p1-cpu32-mem128": 1, "p1-cpu64-mem256": 1}
    catalog = tomllib.loads((tmp_path / "out" / "fleet.toml").read_text())["arch"]
    assert catalog["p1-cpu64-mem256"] == {"type": "I", "cores": 64, "mem": 256, "net": 25, "score": 2, "cost": 1, "platform_id": "PB"}
    assert catalog["p0-cpu32-mem128"]["cost"] == 0.5

    samples = pq.read_table(trace.usage_path).to_pandas()
    assert samples["task_id"].tolist() == ["100-0", "100-0", "200-0", "200-0", "500-0"]
    first = samples[samples["task_id"] == "200-0"].iloc[0]
    assert first["ts"] == pd.Timestamp(0, unit="s", tz="UTC")
    assert [first["cpu"], first["mem"]] == pytest.approx([0.05 * 64, 0.1 * 256])  # the window's average
    assert samples[samples["task_id"] == "500-0"]["ts"].iloc[0] == pd.Timestamp(300, unit="s", tz="UTC")


def test_an_earlier_snapshot_sees_the_earlier_state(tmp_path: Path) -> None:
    src = write_cell(tmp_path / "cell")
    summary = import_google2019(src, tmp_path / "out", at=120 * S)
    tasks = read_trace(tmp_path / "out").tasks.set_index("task_id")
    assert sorted(tasks.index) == ["100-0", "100-1", "100-2", "200-0", "500-0"]  # 100-1 not yet finished, 4 not yet removed
    assert tasks.loc["200-0", "cpu_request"] == pytest.approx(0.2 * 64)  # before the update at 150 s
    assert list(summary.dropped) == ["300-0"]
    assert read_trace(tmp_path / "out").hosts.set_index("host_id").loc["5", "arch"] == "p1-cpu32-mem128"

    import_google2019(src, tmp_path / "early", at=50 * S)
    assert read_trace(tmp_path / "early").hosts.set_index("host_id").loc["5", "arch"] == "p1-cpu32-mem64"  # before its upgrade


def test_maximum_usage_and_scale_factors(tmp_path: Path) -> None:
    src = write_cell(tmp_path / "cell")
    import_google2019(src, tmp_path / "out", usage_stat="maximum", cores_per_unit=100, gib_per_unit=1000)
    samples = pq.read_table(tmp_path / "out" / "usage.parquet").to_pandas()
    first = samples[samples["task_id"] == "200-0"].iloc[0]
    assert [first["cpu"], first["mem"]] == pytest.approx([8.0, 120.0])  # 0.08 x 100 cores, 0.12 x 1000 GiB
    hosts = read_trace(tmp_path / "out").hosts
    assert set(hosts["arch"]) == {"p0-cpu50-mem500", "p1-cpu100-mem1000", "p1-cpu50-mem500"}


def test_subsample_machines_and_cell_folder(tmp_path: Path) -> None:
    write_cell(tmp_path / "all" / "a")
    result = run("import", "google2019", tmp_path / "all", "--cell", "a", "--machines", "2", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    trace = read_trace(tmp_path / "out")
    assert sorted(trace.hosts["host_id"]) == ["1", "2"] and trace.tasks["task_id"].tolist() == ["100-0"]
    assert "left out (not running at --at" in result.output and "instances" in result.output
    assert set(pq.read_table(trace.usage_path)["task_id"].to_pylist()) == {"100-0"}
    missing = run("import", "google2019", tmp_path / "all", "--cell", "b", "--out", tmp_path / "out2")
    assert missing.exit_code == 2 and "cell 'b'" in missing.output and not (tmp_path / "out2").exists()


def test_csv_shards(tmp_path: Path) -> None:
    """A CSV export: nested fields flattened (capacity.cpus or capacity_cpus), a header line."""
    src = tmp_path / "csv"
    src.mkdir()
    flat = pd.json_normalize(MACHINES)
    flat.to_csv(src / "machine_events-000.csv", index=False)
    events = pd.json_normalize(INSTANCES).drop(columns=["constraint"])
    events.columns = [c.replace(".", "_") for c in events.columns]
    events.to_csv(src / "instance_events-000.csv.gz", index=False)
    import_google2019(src, tmp_path / "out", at=120 * S)
    tasks = read_trace(tmp_path / "out").tasks.set_index("task_id")
    assert tasks.loc["200-0", "mem_request"] == pytest.approx(0.1 * 256)
    assert read_trace(tmp_path / "out").usage_path is None  # no usage shards: a requests-only trace


def test_round_trip_validate_solve_verify(tmp_path: Path) -> None:
    src = write_cell(tmp_path / "cell")
    trace, plan = tmp_path / "trace", tmp_path / "plan"
    result = run("import", "google2019", src, "--out", trace)
    assert result.exit_code == 0, result.output
    assert "imported 3 tasks from 8 instances" in result.output and "dropped 2 tasks without a host" in result.output
    assert run("validate", trace).exit_code == 0
    solved = run("solve", trace, "--out", plan, "--time-limit", "5")
    assert solved.exit_code == 0, solved.output
    checked = run("verify", trace, plan)
    assert checked.exit_code == 0, checked.output


@pytest.mark.parametrize("edit, column, line", [
    (lambda rows: [{k: v for k, v in r.items() if k != "capacity"} for r in rows], "capacity_cpus", None),
    (lambda rows: rows[:2] + [{**rows[2], "time": "soon"}] + rows[3:], "time", "line 3"),
    (lambda rows: rows[:5] + [{**rows[5], "type": "7"}] + rows[6:], "type", "line 6"),
])
def test_bad_machine_events_exit_2(tmp_path: Path, edit, column, line) -> None:
    src = write_cell(tmp_path / "cell", machines=edit(MACHINES))
    result = run("import", "google2019", src, "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "machine_events-000000000000.json" in result.output and column in result.output
    assert line is None or line in result.output
    assert not (tmp_path / "out").exists()


def test_bad_json_line_and_bad_usage_value_exit_2(tmp_path: Path) -> None:
    src = write_cell(tmp_path / "cell")
    broken = (src / "machine_events-000000000000.json").read_text().splitlines()
    broken[3] = broken[3][:40]  # a line cut short
    (src / "machine_events-000000000000.json").write_text("\n".join(broken) + "\n")
    result = run("import", "google2019", src, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "not valid JSON lines" in result.output and "line 4" in result.output
    assert not (tmp_path / "out").exists()

    src = write_cell(tmp_path / "cell2", usage_rows=USAGE[:2] + [{**USAGE[2], "average_usage": {"cpus": "lots", "memory": 0.1}}])
    with pytest.raises(InputError) as info:
        import_google2019(src, tmp_path / "out")
    text = str(info.value)
    assert "instance_usage-000000000000.json.gz" in text and "average_usage_cpus" in text and "line 3" in text and "lots" in text
    assert not (tmp_path / "out").exists()


def test_missing_table_and_bad_options(tmp_path: Path) -> None:
    src = write_cell(tmp_path / "cell")
    (src / "machine_events-000000000000.json").unlink()
    result = run("import", "google2019", src, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "no machine_events shards" in result.output
    src = write_cell(tmp_path / "cell2")
    assert run("import", "google2019", src, "--out", tmp_path / "out", "--cores-per-unit", "0").exit_code == 2
    late = run("import", "google2019", src, "--out", tmp_path / "out", "--at", "0")
    assert late.exit_code == 2 and "no instance is running" in late.output


def test_empty_shard_is_skipped_and_update_without_machine_keeps_it(tmp_path: Path) -> None:
    """BigQuery may write empty shards; an UPDATE_RUNNING that omits machine_id leaves the instance where it was."""
    update = {**instance(150 * S, 10, 200, 0, 0, 0.3, 0.2), "machine_id": None}
    src = write_cell(tmp_path / "cell", instances=INSTANCES[:7] + [update] + INSTANCES[8:])
    (src / "instance_events-000000000002.json.gz").write_bytes(gzip.compress(b""))
    import_google2019(src, tmp_path / "out")
    tasks = read_trace(tmp_path / "out").tasks.set_index("task_id")
    assert tasks.loc["200-0", ["host_id", "cpu_request"]].tolist() == ["3", pytest.approx(0.3 * 64)]


def test_integers_as_json_numbers_read_the_same(tmp_path: Path) -> None:
    """Not BigQuery's encoding (integers as numbers, not strings): read by the general path, same trace."""
    import_google2019(write_cell(tmp_path / "strings"), tmp_path / "a")
    numbers = write_cell(tmp_path / "numbers", as_numbers(MACHINES), as_numbers(INSTANCES), as_numbers(USAGE))
    assert '"time": 0' in (numbers / "machine_events-000000000000.json").read_text()
    import_google2019(numbers, tmp_path / "b")
    for table in ("hosts.parquet", "tasks.parquet", "usage.parquet"):
        assert pq.read_table(tmp_path / "a" / table).equals(pq.read_table(tmp_path / "b" / table))


def test_csv_shard_with_a_wrong_number_of_fields_exits_2(tmp_path: Path) -> None:
    src = write_cell(tmp_path / "cell")
    (src / "machine_events-000000000000.json").unlink()
    lines = pd.json_normalize(MACHINES).to_csv(index=False).splitlines()
    lines[2] += ",extra"
    (src / "machine_events-000000000000.csv").write_text("\n".join(lines) + "\n")
    result = run("import", "google2019", src, "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "machine_events-000000000000.csv" in result.output and "wrong number of fields" in result.output and "line 3" in result.output
    assert not (tmp_path / "out").exists()
