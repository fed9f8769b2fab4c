"""Every validation rule: feed the bad input, check the message and the exit code."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from conftest import tiny_tables, write_tables
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
