"""Every validation rule: feed the bad input, check the message and the exit code."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from conftest import tiny_tables, write_tables
import packer.io.fleet
from packer import api
from packer.cli import cli
from packer.errors import InputError
from packer.io.trace import read_trace


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def make(tmp_path, hosts=None, tasks=None, usage=None, **kw):
    h, t, u = tiny_tables(**kw)
    return write_tables(tmp_path / "trace", h if hosts is None else hosts, t if tasks is None else tasks, u if usage is None else usage)


def assert_rejected(trace, *needles: str, command: str = "validate"):
    result = run(command, str(trace))
    assert result.exit_code == 2, result.output
    for needle in needles:
        assert needle in result.output, f"{needle!r} not in {result.output!r}"
    assert "Traceback" not in result.output
    return result.output


def test_valid_trace_passes(tiny_trace):
    result = run("validate", str(tiny_trace))
    assert result.exit_code == 0, result.output
    assert "valid" in result.output and "180 usage rows" in result.output


def test_missing_required_column(tmp_path):
    _, t, _ = tiny_tables()
    out = assert_rejected(make(tmp_path, tasks=t.drop(columns=["mem_request"])), "tasks.parquet", "mem_request", "required column missing")
    assert "the file has" in out


def test_wrong_column_type(tmp_path):
    _, t, _ = tiny_tables()
    t["cpu_request"] = t["cpu_request"].astype(str)
    assert_rejected(make(tmp_path, tasks=t), "tasks.parquet", "'cpu_request'", "expected a number column")


def test_duplicate_task_ids(tmp_path):
    _, t, _ = tiny_tables()
    t.loc[1, "task_id"] = "t000"
    assert_rejected(make(tmp_path, tasks=t), "'task_id'", "duplicate id (2 rows)", "row 0", "row 1")


def test_duplicate_host_ids(tmp_path):
    h, _, _ = tiny_tables()
    h.loc[2, "host_id"] = "h0"
    assert_rejected(make(tmp_path, hosts=h), "hosts.parquet", "'host_id'", "duplicate id")


def test_task_on_unknown_host(tmp_path):
    _, t, _ = tiny_tables()
    t.loc[4, "host_id"] = "nowhere"
    assert_rejected(make(tmp_path, tasks=t), "tasks.parquet", "'host_id'", "host that hosts.parquet does not list", "row 4", "nowhere")


def test_host_of_unknown_architecture(tmp_path):
    h, _, _ = tiny_tables()
    h.loc[1, "arch"] = "Zen99"
    assert_rejected(make(tmp_path, hosts=h), "hosts.parquet", "'arch'", "missing from the fleet catalog", "Zen99", "row 1")


@pytest.mark.parametrize(
    "value,needle",
    [(-1.0, "negative value"), (np.nan, "missing or NaN value"), (np.inf, "infinite value"), (5000.0, "implausibly large")],
)
def test_bad_request_values(tmp_path, value, needle):
    _, t, _ = tiny_tables()
    t.loc[3, "cpu_request"] = value
    assert_rejected(make(tmp_path, tasks=t), "tasks.parquet", "'cpu_request'", needle, "row 3")


def test_empty_tables(tmp_path):
    h, t, u = tiny_tables()
    assert_rejected(make(tmp_path, tasks=t.iloc[:0]), "tasks.parquet", "no rows")
    assert_rejected(make(tmp_path, hosts=h.iloc[:0], tasks=t), "hosts.parquet", "no rows")
    assert_rejected(make(tmp_path, usage=u.iloc[:0]), "usage.parquet", "no rows")


def test_usage_for_unknown_task(tmp_path):
    _, _, u = tiny_tables()
    u.loc[[7, 8, 40], "task_id"] = "ghost"
    out = assert_rejected(make(tmp_path, usage=u), "usage.parquet", "'task_id'", "tasks.parquet does not list (3 rows)", "row 7", "ghost")
    assert "row 40" in out


@pytest.mark.parametrize("command", ["validate", "profile"])
@pytest.mark.parametrize(
    "value,needle",
    [(-0.5, "negative value"), (np.nan, "missing or NaN value"), (1e6, "implausibly large")],
)
def test_bad_usage_values(tmp_path, command, value, needle):
    _, _, u = tiny_tables()
    u.loc[[5, 9], "cpu"] = value
    trace = make(tmp_path, usage=u)
    assert_rejected(trace, "usage.parquet", "'cpu'", needle, "(2 rows)", "row 5", command=command)
    assert not (tmp_path / "out").exists()


def test_usage_missing_column_and_wrong_type(tmp_path):
    _, _, u = tiny_tables()
    assert_rejected(make(tmp_path, usage=u.drop(columns=["net"])), "usage.parquet", "net", "required column missing")
    u2 = u.copy()
    u2["cpu"] = u2["cpu"].astype(str)
    assert_rejected(make(tmp_path / "b", usage=u2), "usage.parquet", "'cpu'", "expected a numeric column")


def test_errors_are_listed_together(tmp_path):
    h, t, _ = tiny_tables()
    h.loc[0, "arch"] = "Zen99"
    t.loc[0, "mem_request"] = -2.0
    with pytest.raises(InputError) as err:
        read_trace(make(tmp_path, hosts=h, tasks=t))
    assert len(err.value.problems) == 2


def test_skip_invalid_usage_reports_counts(tmp_path):
    _, _, u = tiny_tables()
    u.loc[[5, 9], "cpu"] = -1.0
    u.loc[11, "task_id"] = "ghost"
    trace = make(tmp_path, usage=u)
    out = tmp_path / "p.parquet"
    result = CliRunner().invoke(cli, ["profile", str(trace), "--out", str(out), "--skip-invalid-usage"])
    assert result.exit_code == 0, result.output
    assert "skipped 2 usage rows" in result.output and "negative value" in result.output
    assert "skipped 1 usage rows" in result.output
    profiles = pd.read_parquet(out)
    assert profiles["samples"].sum() == len(u) - 3


def test_inputs_are_never_modified(tmp_path):
    _, _, u = tiny_tables()
    u.loc[3, "mem"] = np.nan
    trace = make(tmp_path, usage=u)
    before = {p: p.read_bytes() for p in trace.iterdir()}
    run("profile", str(trace), "--out", str(tmp_path / "p.parquet"))
    run("profile", str(trace), "--out", str(tmp_path / "p.parquet"), "--skip-invalid-usage")
    assert {p: p.read_bytes() for p in trace.iterdir()} == before


def test_refuses_output_inside_the_trace(tiny_trace):
    result = run("profile", str(tiny_trace), "--out", str(tiny_trace / "profiles.parquet"))
    assert result.exit_code == 2 and "would overwrite the input" in result.output


def test_not_a_trace_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    assert_rejected(tmp_path / "empty", "hosts.parquet", "file not found")


def test_message_without_file_has_no_stray_colon():
    assert str(InputError("something is wrong")) == "something is wrong"


def test_outputs_get_normal_permissions(tmp_path):
    from packer.io.atomic import atomic_dir, atomic_file

    with atomic_dir(tmp_path / "d") as d:
        (d / "x").write_text("1")
    with atomic_file(tmp_path / "f") as f:
        f.write_text("1")
    assert (tmp_path / "d").stat().st_mode & 0o055 == 0o055
    assert (tmp_path / "f").stat().st_mode & 0o044 == 0o044


# --- Fail before the work (issue 13, item 2) ---------------------------------------------------

def test_read_only_out_folder_fails_before_solving(tiny_trace, tmp_path, monkeypatch):
    """A folder packer may not write in is named before any profiling or solving (os.access stubbed: root ignores permissions)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == locked else real_access(path, mode))
    monkeypatch.setattr(api, "solve", lambda *a, **k: pytest.fail("solved before checking --out"))
    result = run("solve", str(tiny_trace), "--out", str(locked / "plan"))
    assert result.exit_code == 2 and "--out" in result.output and str(locked) in result.output and "cannot write" in result.output


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores folder permissions")
def test_read_only_out_folder_chmod(tiny_trace, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        result = run("solve", str(tiny_trace), "--out", str(locked / "plan"), "--time-limit", "1")
    finally:
        locked.chmod(0o755)
    assert result.exit_code == 2 and "cannot write" in result.output and not (locked / "plan").exists()


def test_out_below_a_file_is_refused(tiny_trace, tmp_path):
    (tmp_path / "afile").write_text("x")
    result = run("profile", str(tiny_trace), "--out", str(tmp_path / "afile" / "sub" / "profiles.parquet"))
    assert result.exit_code == 2 and "is a file, not a folder" in result.output and "--out" in result.output


@pytest.mark.parametrize("value", ['"lots"', "nan", "-3", "true"])
def test_fleet_values_are_checked_when_read(tiny_trace, tmp_path, value):
    catalog = re.sub(r"(\[arch\.Broadwell20\][^\[]*?\nnet = )[^\n]*", lambda m: m.group(1) + value,
                     Path(packer.io.fleet.DEFAULT_FLEET).read_text())
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(catalog)
    result = run("solve", str(tiny_trace), "--fleet", str(fleet), "--out", str(tmp_path / "plan"))
    assert result.exit_code == 2, result.output
    assert str(fleet) in result.output and "arch.Broadwell20.net" in result.output and "profiling" not in result.output


def test_dimension_without_fleet_capacity_is_named(tmp_path):
    _, t, _ = tiny_tables()
    t["gpu_request"] = 1.0
    trace = make(tmp_path, tasks=t)
    out = assert_rejected(trace, "tasks.parquet", "gpu_request", "the fleet has no gpu capacity", command="solve")
    assert "np.float64" not in out and "gpu_request=1.0" in out


@pytest.mark.parametrize("broken", ["part-0.parquet", "part-9.parquet"])  # the part the dataset takes its schema from, or another
def test_corrupt_usage_part_is_named(tmp_path, tiny_trace, broken):
    usage = tiny_trace / "usage.parquet"
    (tmp_path / "parts").mkdir()
    usage.rename(tmp_path / "parts" / "part-5.parquet")
    (tmp_path / "parts" / broken).write_bytes(b"PAR1 not really")
    (tmp_path / "parts").rename(usage)
    for command in ("validate", "solve"):
        out = ["--out", str(tmp_path / "plan")] if command == "solve" else []
        result = CliRunner().invoke(cli, [command, str(tiny_trace), *out])
        assert result.exit_code == 2, result.output
        assert f"{broken}: not a readable Parquet file" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1"])
def test_time_limit_must_be_finite_and_positive(tiny_trace, tmp_path, value):
    for command in ("solve", "sweep"):
        result = run(command, str(tiny_trace), "--time-limit", value, "--out", str(tmp_path / command))
        assert result.exit_code == 2 and "--time-limit" in result.output and "must be > 0 seconds and finite" in result.output


@pytest.mark.parametrize("value", ["2", "1.5", "-11", "nan"])
def test_min_rp_outside_relative_performance_range(tiny_trace, tmp_path, value):
    result = run("solve", str(tiny_trace), "--min-rp", value, "--out", str(tmp_path / "plan"))
    assert result.exit_code == 2 and "--min-rp" in result.output and not (tmp_path / "plan").exists()


def test_constraints_file_min_rp_range(tiny_trace, tmp_path):
    (tmp_path / "c.toml").write_text("min_rp = 2.0\n")
    result = run("solve", str(tiny_trace), "--constraints", str(tmp_path / "c.toml"), "--out", str(tmp_path / "plan"))
    assert result.exit_code == 2 and "min_rp" in result.output and "from -10 to 1" in result.output


def test_skip_invalid_profiles_give_a_plan_that_verifies(tmp_path):
    """The README's workaround: profile --skip-invalid, then solve --profiles: the plan records the skip, so verify redoes it."""
    h, t, u = tiny_tables()
    u.loc[3, "cpu"] = -1.0
    trace = make(tmp_path, hosts=h, tasks=t, usage=u)
    profiles, plan = tmp_path / "profiles.parquet", tmp_path / "plan"
    assert run("profile", str(trace), "--skip-invalid", "--window", "120", "--out", str(profiles)).exit_code == 0
    solved = run("solve", str(trace), "--profiles", str(profiles), "--time-limit", "2", "--out", str(plan))
    assert solved.exit_code == 0, solved.output
    context = json.loads((plan / "summary.json").read_text())["context"]
    assert context["skip_invalid_usage"] is True and context["window_s"] == 120
    verified = run("verify", str(trace), str(plan))
    assert verified.exit_code == 0, verified.output


def _bitbrains_vm(folder: Path, stem: str, rows: list[list]) -> None:
    header = ["Timestamp [ms]", "CPU cores", "CPU capacity provisioned [MHZ]", "CPU usage [MHZ]", "CPU usage [%]",
              "Memory capacity provisioned [KB]", "Memory usage [KB]", "Disk read throughput [KB/s]", "Disk write throughput [KB/s]",
              "Network received throughput [KB/s]", "Network transmitted throughput [KB/s]"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.csv").write_text("\n".join(";\t".join(str(v) for v in row) for row in [header, *rows]) + "\n")


def test_bitbrains_problems_plain_by_line_all_at_once(tmp_path):
    good = [1372629804, 2, 5200.0, 1300.0, 25.0, 8388608.0, 2097152.0, 0, 0, 100.0, 50.0]
    off = [1372630104, 0, 5200.0, 0.0, 0.0, 8388608.0, 0.0, 0, 0, 0.0, 0.0]  # switched off: no cores, MHz still provisioned
    _bitbrains_vm(tmp_path / "bb", "1", [good, off])
    _bitbrains_vm(tmp_path / "bb", "2", [good, [1372630104, 2, 5200.0, "", 0.0, 8388608.0, 1.0, 0, 0, 0.0, 0.0]])
    result = run("import", "bitbrains", str(tmp_path / "bb"), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and not (tmp_path / "out").exists()
    assert "1.csv" in result.output and "2.csv" in result.output  # both files' problems at once
    assert "line 3 (Timestamp [ms]=1372630104, CPU cores=0, CPU capacity provisioned [MHZ]=5200.0)" in result.output
    assert "line 3 (Timestamp [ms]=1372630104, CPU usage [MHZ]=(empty))" in result.output
    assert "np.float64" not in result.output and "--skip-invalid" in result.output

    _bitbrains_vm(tmp_path / "bb", "3", [off])  # nothing valid left: the VM is left out, not a second failure
    skipped = run("import", "bitbrains", str(tmp_path / "bb"), "--out", str(tmp_path / "out"), "--skip-invalid")
    assert skipped.exit_code == 0, skipped.output
    assert "the VM is left out" in skipped.output
    assert sorted(pd.read_parquet(tmp_path / "out" / "tasks.parquet")["task_id"]) == ["vm1", "vm2"]

    # A VM too big for every architecture is named with the rows' problems, not only once they are fixed.
    huge = [1372629804, 2, 5200.0, 1300.0, 25.0, 600 * 2**20, 1.0, 0, 0, 0.0, 0.0]  # 600 GiB: more than any Table I host
    _bitbrains_vm(tmp_path / "bb", "9", [huge])
    result = run("import", "bitbrains", str(tmp_path / "bb"), "--out", str(tmp_path / "new"))
    assert result.exit_code == 2 and "1.csv" in result.output and "vm9" in result.output and "--drop-unfit" in result.output


@pytest.mark.parametrize("args, needle", [
    (["--config", "p99-sens", "--sensitivity", "{tmp}/bad.csv"], "bad.csv"),
    (["--config", "p99-sens", "--classes-from", "{tmp}/bad.csv"], "bad.csv"),
    (["--max-new-at-risk", "0"], "--max-new-at-risk"),
    (["--fragmentation-weight", "nan"], "--fragmentation-weight"),
    (["--move-weight", "inf"], "--move-weight"),
    (["--goal", "fair", "--max-new-at-risk", "0", "--config", "p99-sens"], "--max-new-at-risk"),
    (["--fleet", "{tmp}/fleet.toml"], "arch.Broadwell20.mem"),
    (["--config", "p99-sens", "--max-new-at-risk", "0", "--solver", "cbc"], "tasks-at-risk guard"),
    (["--min-rp", "0", "--solver", "baseline-ffd"], "minimum relative performance"),
    (["--goal", "fair", "--solver", "highs"], "--goal fair"),
])
def test_solve_fails_before_profiling(tiny_trace, tmp_path, monkeypatch, args, needle):
    """Options, tables and catalogs solve can check cheaply are checked before the usage is profiled."""
    import packer.characterization.profile

    (tmp_path / "bad.csv").write_text("service,cpu\nA,abc\n")
    catalog = Path(packer.io.fleet.DEFAULT_FLEET).read_text()
    (tmp_path / "fleet.toml").write_text(re.sub(r"(\[arch\.Broadwell20\][^\[]*?\nmem = )[^\n]*", r'\g<1>"lots"', catalog))
    monkeypatch.setattr(packer.characterization.profile, "profile_tasks", lambda *a, **k: pytest.fail("profiled before checking"))
    result = run("solve", str(tiny_trace), "--out", str(tmp_path / "plan"), *(a.format(tmp=tmp_path) for a in args))
    assert result.exit_code == 2, result.output
    assert needle in result.output and not (tmp_path / "plan").exists()


@pytest.mark.parametrize("command", [
    ["profile", "{trace}"], ["characterize", "{trace}"], ["solve", "{trace}"], ["sweep", "{trace}"], ["report", "{trace}"],
    ["generate", "--tasks", "4", "--hosts", "2", "--days", "0.01"], ["import", "bitbrains", "{tmp}"], ["import", "openb", "{tmp}"],
])
def test_every_writing_command_checks_its_out_first(tiny_trace, tmp_path, command):
    (tmp_path / "afile").write_text("x")
    args = [a.format(trace=tiny_trace, tmp=tmp_path) for a in command]
    result = run(*args, "--out", str(tmp_path / "afile" / "out"))
    assert result.exit_code == 2, result.output
    assert "--out" in result.output and "is a file, not a folder" in result.output
