"""The bad-input catalogue: every way a user can hand packer a broken file or flag, and what packer must do.

Each case copies a small valid trace (and a plan of it) into its own folder, breaks
one thing, runs the real command and checks the house rule for user mistakes: the
exit code (2 for input errors, 1 for a plan that fails a check), a message naming the
file, column or flag, no traceback, no output written, and inputs byte-identical
afterwards. A case is one row of :data:`CASES`: ``(id, args, break_it, code, needles)``
with ``{trace}``, ``{plan}``, ``{out}`` and ``{tmp}`` in ``args`` filled in per case.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from conftest import tiny_tables, write_tables
from packer import api
from packer.cli import cli
from packer.io.fleet import DEFAULT_FLEET

Break = Callable[[Path], None]


# --- The base inputs, made once per module ------------------------------------------------------

@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A folder with ``trace/`` (6 tasks on 3 hosts, 30 usage samples each) and ``plan/``, a verified plan of it."""
    root = tmp_path_factory.mktemp("base")
    hosts, tasks, usage = tiny_tables()
    tasks["service"] = ["A", "B"] * 3
    write_tables(root / "trace", hosts, tasks, usage)
    api.solve(root / "trace", time_limit=5, solver="baseline-ffd").write(root / "plan")
    return root


def folder_hash(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path) with the SHA-256 of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


# --- Ways to break an input (each takes the case's folder: trace/, plan/ and room for more) -----

def edit_table(name: str, change: Callable[[pd.DataFrame], pd.DataFrame | None], where: str = "trace") -> Break:
    """Rewrite ``<where>/<name>`` (a Parquet file) with ``change`` applied to it as a DataFrame."""
    def apply(root: Path) -> None:
        path = root / where / name
        df = pd.read_parquet(path)
        changed = change(df)
        (df if changed is None else changed).to_parquet(path, index=False)
    return apply


def set_value(name: str, column: str, value, rows=slice(0, 1), where: str = "trace") -> Break:
    """Set ``column`` (created if missing) of ``rows`` to ``value`` (the column becomes object dtype for a string in numbers)."""
    def change(df: pd.DataFrame) -> None:
        if column not in df.columns:
            df[column] = pd.Series([None] * len(df), dtype="object" if isinstance(value, str) else "float64")
        if isinstance(value, str) and df[column].dtype != object:
            df[column] = df[column].astype(object)
        df.loc[df.index[rows], column] = value
    return edit_table(name, change, where)


def drop_column(name: str, column: str, where: str = "trace") -> Break:
    return edit_table(name, lambda df: df.drop(columns=column), where)


def cast_column(name: str, column: str, to: str) -> Break:
    return edit_table(name, lambda df: df.assign(**{column: df[column].astype(to)}))


def empty_table(name: str) -> Break:
    return edit_table(name, lambda df: df.iloc[0:0])


def write_bytes(relative: str, data: bytes) -> Break:
    def apply(root: Path) -> None:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return apply


def write_text(relative: str, text: str) -> Break:
    return write_bytes(relative, text.encode())


def write_parquet(relative: str, columns: dict) -> Break:
    return lambda root: pd.DataFrame(columns).to_parquet(root / relative, index=False)


def remove(relative: str) -> Break:
    def apply(root: Path) -> None:
        path = root / relative
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return apply


def usage_in_parts(broken: Callable[[pd.DataFrame], pd.DataFrame] | bytes) -> Break:
    """Make usage.parquet a folder of two parts; the second is ``broken`` (bytes, or a change to the rows of the first)."""
    def apply(root: Path) -> None:
        usage = root / "trace" / "usage.parquet"
        df = pd.read_parquet(usage)
        usage.unlink()
        usage.mkdir()
        df.to_parquet(usage / "part-0.parquet", index=False)
        if isinstance(broken, bytes):
            (usage / "part-1.parquet").write_bytes(broken)
        else:
            broken(df.copy()).to_parquet(usage / "part-1.parquet", index=False)
    return apply


def fleet(change: Callable[[str], str]) -> Break:
    """Give the trace its own fleet.toml: the shipped catalog with ``change`` applied to its text."""
    return write_text("trace/fleet.toml", change(DEFAULT_FLEET.read_text()))


def replace_once(old: str, new: str) -> Callable[[str], str]:
    def change(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)
    return change


def summary(change: Callable[[dict], None]) -> Break:
    """Edit the plan's summary.json."""
    def apply(root: Path) -> None:
        path = root / "plan" / "summary.json"
        doc = json.loads(path.read_text())
        change(doc)
        path.write_text(json.dumps(doc))
    return apply


def both(first: Break, second: Break) -> Break:
    def apply(root: Path) -> None:
        first(root)
        second(root)
    return apply


def nothing(root: Path) -> None:
    """The inputs as they are: the flags are what is wrong."""


def bitbrains(rows: list[str]) -> Break:
    """A Bitbrains folder ``bb/`` with one VM file of the header and ``rows`` (';'-separated)."""
    header = ("Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\tCPU usage [%];\tMemory capacity "
              "provisioned [KB];\tMemory usage [KB];\tDisk read throughput [KB/s];\tDisk write throughput [KB/s];\t"
              "Network received throughput [KB/s];\tNetwork transmitted throughput [KB/s]")
    return write_text("bb/1.csv", "\n".join([header, *rows]) + "\n")


GOOD_VM = "1372629804;\t2;\t5200.0;\t1300.0;\t25.0;\t8388608.0;\t2097152.0;\t0;\t0;\t100.0;\t50.0"
ARCH = "[arch.Broadwell20]"

TRACE, OUT = "{trace}", "{out}"
SOLVE = ["solve", TRACE, "--out", OUT, "--time-limit", "5"]
VALIDATE = ["validate", TRACE]
VERIFY = ["verify", TRACE, "{plan}"]


# --- The catalogue ----------------------------------------------------------------------------------

CASES: list[tuple[str, list[str], Break, int, tuple[str, ...]]] = [
    # Files missing, empty or not Parquet.
    ("tasks-missing", VALIDATE, remove("trace/tasks.parquet"), 2, ("tasks.parquet", "not found")),
    ("hosts-missing", SOLVE, remove("trace/hosts.parquet"), 2, ("hosts.parquet", "not found")),
    ("tasks-zero-bytes", VALIDATE, write_bytes("trace/tasks.parquet", b""), 2, ("tasks.parquet", "not a readable Parquet file")),
    ("tasks-garbage", SOLVE, write_text("trace/tasks.parquet", "task_id,cpu\nt1,2\n"), 2, ("tasks.parquet", "not a readable Parquet file")),
    ("hosts-garbage", VALIDATE, write_bytes("trace/hosts.parquet", b"PAR1\x00\x00PAR1"), 2, ("hosts.parquet", "not a readable Parquet file")),
    ("usage-garbage", VALIDATE, write_bytes("trace/usage.parquet", b"not parquet"), 2, ("usage.parquet", "not a readable Parquet")),
    ("usage-truncated", SOLVE, lambda root: (root / "trace/usage.parquet").write_bytes((root / "trace/usage.parquet").read_bytes()[:300]),
     2, ("usage.parquet", "not a readable Parquet")),
    ("usage-part-corrupt", SOLVE, usage_in_parts(b"PAR1 broken"), 2, ("part-1.parquet", "not a readable Parquet file")),
    ("usage-part-missing-column", VALIDATE, usage_in_parts(lambda df: df.drop(columns="net")), 2, ("part-1.parquet", "net", "missing")),
    ("usage-part-text-column", VALIDATE, usage_in_parts(lambda df: df.assign(cpu=df["cpu"].astype(str))), 2, ("part-1.parquet", "cpu")),
    ("trace-missing", ["validate", "{tmp}/nope"], nothing, 2, ("nope", "does not exist")),
    ("trace-is-a-file", ["solve", "{trace}/tasks.parquet", "--out", OUT], nothing, 2, ("tasks.parquet", "is a file")),
    # Columns missing or of the wrong type.
    ("tasks-no-task_id", VALIDATE, drop_column("tasks.parquet", "task_id"), 2, ("tasks.parquet", "task_id", "required column missing")),
    ("tasks-no-job_id", SOLVE, drop_column("tasks.parquet", "job_id"), 2, ("tasks.parquet", "job_id", "required column missing")),
    ("tasks-no-host_id", VALIDATE, drop_column("tasks.parquet", "host_id"), 2, ("tasks.parquet", "host_id", "required column missing")),
    ("tasks-no-cpu_request", VALIDATE, drop_column("tasks.parquet", "cpu_request"), 2, ("tasks.parquet", "cpu_request", "missing")),
    ("tasks-no-net_request", SOLVE, drop_column("tasks.parquet", "net_request"), 2, ("tasks.parquet", "net_request", "missing")),
    ("hosts-no-arch", VALIDATE, drop_column("hosts.parquet", "arch"), 2, ("hosts.parquet", "arch", "required column missing")),
    ("hosts-no-host_id", VALIDATE, drop_column("hosts.parquet", "host_id"), 2, ("hosts.parquet", "host_id", "required column missing")),
    ("usage-no-ts", VALIDATE, drop_column("usage.parquet", "ts"), 2, ("usage.parquet", "ts", "required column missing")),
    ("usage-no-cpu", SOLVE, drop_column("usage.parquet", "cpu"), 2, ("usage.parquet", "cpu", "required column missing")),
    ("tasks-cpu-as-text", VALIDATE, cast_column("tasks.parquet", "cpu_request", "str"), 2, ("tasks.parquet", "cpu_request", "expected a number")),
    ("tasks-id-as-number", VALIDATE, edit_table("tasks.parquet", lambda df: df.assign(task_id=np.arange(len(df)))), 2,
     ("tasks.parquet", "task_id", "expected a string")),
    ("tasks-movable-as-text", VALIDATE, set_value("tasks.parquet", "movable", "yes", slice(None)), 2, ("tasks.parquet", "movable", "expected a bool")),
    ("hosts-domain-as-number", VALIDATE, edit_table("hosts.parquet", lambda df: df.assign(domain=np.arange(len(df)))), 2,
     ("hosts.parquet", "domain", "expected a string")),
    ("usage-cpu-as-text", VALIDATE, edit_table("usage.parquet", lambda df: df.assign(cpu=df["cpu"].astype(str))), 2,
     ("usage.parquet", "cpu", "expected a numeric")),
    ("usage-task_id-as-number", VALIDATE, edit_table("usage.parquet", lambda df: df.assign(task_id=1)), 2,
     ("usage.parquet", "task_id", "expected a string")),
    ("usage-ts-as-text", VALIDATE, edit_table("usage.parquet", lambda df: df.assign(ts=df["ts"].astype(str))), 2,
     ("usage.parquet", "ts", "expected a timestamp")),
    # Empty tables.
    ("tasks-no-rows", VALIDATE, empty_table("tasks.parquet"), 2, ("tasks.parquet", "no rows")),
    ("hosts-no-rows", SOLVE, empty_table("hosts.parquet"), 2, ("hosts.parquet", "no rows")),
    ("usage-no-rows", VALIDATE, empty_table("usage.parquet"), 2, ("usage.parquet", "no rows")),
    # Ids: duplicate, missing, unknown.
    ("tasks-duplicate-id", VALIDATE, set_value("tasks.parquet", "task_id", "t000", slice(1, 2)), 2, ("tasks.parquet", "task_id", "duplicate id")),
    ("tasks-null-id", SOLVE, set_value("tasks.parquet", "task_id", None), 2, ("tasks.parquet", "task_id", "missing id")),
    ("tasks-null-job", VALIDATE, set_value("tasks.parquet", "job_id", None), 2, ("tasks.parquet", "job_id", "missing job id")),
    ("tasks-unknown-host", VALIDATE, set_value("tasks.parquet", "host_id", "h99"), 2, ("tasks.parquet", "host_id", "h99")),
    ("hosts-duplicate-id", VALIDATE, set_value("hosts.parquet", "host_id", "h0", slice(1, 2)), 2, ("hosts.parquet", "host_id", "duplicate id")),
    ("hosts-null-id", VALIDATE, set_value("hosts.parquet", "host_id", None), 2, ("hosts.parquet", "host_id", "missing id")),
    ("hosts-unknown-arch", SOLVE, set_value("hosts.parquet", "arch", "Pentium4"), 2, ("hosts.parquet", "arch", "Pentium4")),
    ("tasks-unknown-allowed-arch", VALIDATE, set_value("tasks.parquet", "allowed_archs", "Broadwell20|Z80"), 2,
     ("tasks.parquet", "allowed_archs", "Z80")),
    ("usage-unknown-task", VALIDATE, set_value("usage.parquet", "task_id", "ghost"), 2, ("usage.parquet", "task_id", "ghost")),
    ("usage-unknown-task-solve", SOLVE, set_value("usage.parquet", "task_id", "ghost"), 2, ("usage.parquet", "task_id", "ghost")),
    ("usage-null-ts", VALIDATE, set_value("usage.parquet", "ts", None), 2, ("usage.parquet", "ts", "missing timestamp")),
    # Amounts: NaN, infinite, negative, huge.
    ("tasks-cpu-nan", VALIDATE, set_value("tasks.parquet", "cpu_request", np.nan), 2, ("tasks.parquet", "cpu_request", "NaN")),
    ("tasks-cpu-inf", SOLVE, set_value("tasks.parquet", "cpu_request", np.inf), 2, ("tasks.parquet", "cpu_request", "infinite")),
    ("tasks-cpu-negative", VALIDATE, set_value("tasks.parquet", "cpu_request", -1.0), 2, ("tasks.parquet", "cpu_request", "negative")),
    ("tasks-cpu-huge", VALIDATE, set_value("tasks.parquet", "cpu_request", 1e7), 2, ("tasks.parquet", "cpu_request", "implausibly large")),
    ("tasks-mem-huge", SOLVE, set_value("tasks.parquet", "mem_request", 1e9), 2, ("tasks.parquet", "mem_request", "implausibly large")),
    ("tasks-net-negative", VALIDATE, set_value("tasks.parquet", "net_request", -0.5), 2, ("tasks.parquet", "net_request", "negative")),
    ("tasks-movable-null", VALIDATE, edit_table("tasks.parquet", lambda df: df.assign(movable=pd.array([None] + [True] * (len(df) - 1),
                                                                                                 dtype="boolean"))), 2,
     ("tasks.parquet", "movable", "missing value")),
    ("tasks-gpu-without-capacity", SOLVE, set_value("tasks.parquet", "gpu_request", 1.0, slice(None)), 2,
     ("tasks.parquet", "gpu_request", "the fleet has no gpu capacity")),
    ("tasks-membw-huge", VALIDATE, set_value("tasks.parquet", "membw_request", 1e6, slice(None)), 2, ("membw_request", "implausibly large")),
    ("usage-cpu-nan", VALIDATE, set_value("usage.parquet", "cpu", np.nan), 2, ("usage.parquet", "cpu", "NaN")),
    ("usage-cpu-inf", SOLVE, set_value("usage.parquet", "cpu", np.inf), 2, ("usage.parquet", "cpu", "infinite")),
    ("usage-mem-negative", VALIDATE, set_value("usage.parquet", "mem", -1.0), 2, ("usage.parquet", "mem", "negative")),
    ("usage-net-huge", VALIDATE, set_value("usage.parquet", "net", 1e6), 2, ("usage.parquet", "net", "implausibly large")),
    ("usage-cpu-nan-profile", ["profile", TRACE, "--out", "{out}/p.parquet"], set_value("usage.parquet", "cpu", np.nan), 2,
     ("usage.parquet", "cpu", "--skip-invalid")),
    # Relative-performance goal columns.
    ("goal-rt-negative", VALIDATE, edit_table("tasks.parquet", lambda df: df.assign(rt_goal_s=-1.0, request_rate=1.0, service_core_s=0.1)), 2,
     ("tasks.parquet", "rt_goal_s", "> 0")),
    ("goal-rt-inf", VALIDATE, edit_table("tasks.parquet", lambda df: df.assign(rt_goal_s=np.inf, request_rate=1.0, service_core_s=0.1)), 2,
     ("rt_goal_s", "infinite")),
    ("goal-rt-incomplete", SOLVE, edit_table("tasks.parquet", lambda df: df.assign(rt_goal_s=1.0)), 2, ("request_rate", "missing for a transactional")),
    ("goal-deadline-before-start", VALIDATE,
     edit_table("tasks.parquet", lambda df: df.assign(deadline_s=10.0, goal_start_s=20.0, work_core_s=5.0)), 2, ("goal_start_s", "before deadline_s")),
    ("goal-both-kinds", VALIDATE, edit_table("tasks.parquet", lambda df: df.assign(
        rt_goal_s=1.0, request_rate=1.0, service_core_s=0.1, deadline_s=10.0, goal_start_s=0.0, work_core_s=5.0)), 2, ("not both",)),
    ("goal-work-negative", VALIDATE, edit_table("tasks.parquet", lambda df: df.assign(deadline_s=10.0, goal_start_s=0.0, work_core_s=-5.0)), 2,
     ("work_core_s", ">= 0")),
    # The fleet catalog.
    ("fleet-bad-toml", SOLVE, write_text("trace/fleet.toml", "[arch.X\ncores = 4\n"), 2, ("fleet.toml", "not valid TOML")),
    ("fleet-not-utf8", VALIDATE, write_bytes("trace/fleet.toml", b"\xff\xfe[arch]"), 2, ("fleet.toml", "not valid TOML")),
    ("fleet-mem-text", SOLVE, fleet(replace_once(ARCH, '[arch.Bad]\ntype = "I"\ncores = 4\nmem = "lots"\nscore = 1\n' + ARCH)), 2,
     ("fleet.toml", "arch.Bad.mem", "lots")),
    ("fleet-net-nan", SOLVE, fleet(replace_once(ARCH, f"{ARCH}\ngpu = nan")), 2, ("fleet.toml", "arch.Broadwell20.gpu", "nan")),
    ("fleet-cores-zero", VALIDATE, fleet(replace_once(ARCH, "[arch.Zero]\ntype = \"I\"\ncores = 0\nmem = 1\nscore = 1\n" + ARCH)), 2,
     ("arch.Zero.cores", "> 0")),
    ("fleet-score-negative", VALIDATE, fleet(replace_once(ARCH, "[arch.Neg]\ntype = \"I\"\ncores = 4\nmem = 1\nscore = -1\n" + ARCH)), 2,
     ("arch.Neg.score", "> 0")),
    ("fleet-capacity-negative", VALIDATE, fleet(replace_once(ARCH, f"{ARCH}\ngpu = -2")), 2, ("arch.Broadwell20.gpu", ">= 0")),
    ("fleet-capacity-bool", VALIDATE, fleet(replace_once(ARCH, f"{ARCH}\ngpu = true")), 2, ("arch.Broadwell20.gpu", "True")),
    ("fleet-missing-mem", VALIDATE, fleet(replace_once(ARCH, "[arch.NoMem]\ntype = \"I\"\ncores = 4\nscore = 1\n" + ARCH)), 2,
     ("arch.NoMem", "missing mem")),
    ("fleet-type-without-cost", VALIDATE, fleet(replace_once(ARCH, "[arch.Odd]\ntype = \"III\"\ncores = 4\nmem = 1\nscore = 1\n" + ARCH)), 2,
     ("arch.Odd", "no cost")),
    ("fleet-cost-text", SOLVE, fleet(replace_once("cost = 1.0", 'cost = "cheap"')), 2, ("types.I.cost", "cheap")),
    ("fleet-cost-negative", VALIDATE, fleet(replace_once(ARCH, f"{ARCH}\ncost = -1")), 2, ("arch.Broadwell20.cost", ">= 0")),
    ("fleet-no-archs", VALIDATE, write_text("trace/fleet.toml", "[types.I]\ncost = 1.0\n"), 2, ("fleet.toml", "no [arch.*] tables")),
    ("fleet-arch-not-table", VALIDATE, write_text("trace/fleet.toml", "arch = 3\n"), 2, ("fleet.toml", "arch", "[arch.NAME] tables")),
    ("fleet-mixed-kinds", VALIDATE, fleet(replace_once(ARCH, '[arch.Other]\ntype = "I"\ncores = 4\nmem = 1\nscore = 1\ngpu_model = "T4"\n'
                                                       f'{ARCH}\ngpu_model = 3')), 2, ("gpu_model", "one kind")),
    ("fleet-flag-missing", [*SOLVE, "--fleet", "{tmp}/nope.toml"], nothing, 2, ("--fleet", "nope.toml")),
    ("fleet-flag-bad", [*SOLVE, "--fleet", "{tmp}/f.toml"], write_text("f.toml", "[arch.A]\ntype = 1\n"), 2, ("f.toml", "arch.A", "missing")),
    # The constraints file.
    ("constraints-bad-toml", [*SOLVE, "--constraints", "{tmp}/c.toml"], write_text("c.toml", "max_moves = = 3\n"), 2, ("c.toml", "not valid TOML")),
    ("constraints-unknown-key", [*SOLVE, "--constraints", "{tmp}/c.toml"], write_text("c.toml", "max_move = 3\n"), 2, ("c.toml", "max_move", "unknown key")),
    ("constraints-negative-moves", [*SOLVE, "--constraints", "{tmp}/c.toml"], write_text("c.toml", "max_moves = -1\n"), 2, ("c.toml", "max_moves")),
    ("constraints-fraction-moves", [*SOLVE, "--constraints", "{tmp}/c.toml"], write_text("c.toml", "max_moves = 1.5\n"), 2, ("c.toml", "max_moves")),
    ("constraints-spread-zero", [*SOLVE, "--constraints", "{tmp}/c.toml"], write_text("c.toml", "spread_host = 0\n"), 2, ("c.toml", "spread_host")),
    ("constraints-min-rp-text", [*SOLVE, "--constraints", "{tmp}/c.toml"], write_text("c.toml", 'min_rp = "high"\n'), 2, ("c.toml", "min_rp")),
    ("constraints-min-rp-high", [*SOLVE, "--constraints", "{tmp}/c.toml"], write_text("c.toml", "min_rp = 3\n"), 2, ("c.toml", "min_rp", "from -10 to 1")),
    ("constraints-pairs-text", [*SOLVE, "--constraints", "{tmp}/c.toml"], write_text("c.toml", 'anti_affinity = "A,B"\n'), 2,
     ("c.toml", "anti_affinity")),
    ("constraints-unknown-service", [*SOLVE, "--constraints", "{tmp}/c.toml"], write_text("c.toml", 'anti_affinity = [["A", "Nope"]]\n'), 2,
     ("tasks.parquet", "service", "Nope")),
    ("constraints-missing", [*SOLVE, "--constraints", "{tmp}/none.toml"], nothing, 2, ("--constraints", "none.toml")),
    # Flags of solve.
    ("time-limit-inf", [*SOLVE, "--time-limit", "inf"], nothing, 2, ("--time-limit", "finite")),
    ("time-limit-nan", [*SOLVE, "--time-limit", "nan"], nothing, 2, ("--time-limit", "finite")),
    ("time-limit-zero", [*SOLVE, "--time-limit", "0"], nothing, 2, ("--time-limit", "> 0")),
    ("time-limit-text", [*SOLVE, "--time-limit", "soon"], nothing, 2, ("--time-limit", "soon")),
    ("max-moves-negative", [*SOLVE, "--max-moves", "-1"], nothing, 2, ("--max-moves", ">= 0")),
    ("max-moves-text", [*SOLVE, "--max-moves", "lots"], nothing, 2, ("--max-moves", "lots")),
    ("min-rp-above-one", [*SOLVE, "--min-rp", "2"], nothing, 2, ("--min-rp",)),
    ("min-rp-nan", [*SOLVE, "--min-rp", "nan"], nothing, 2, ("--min-rp",)),
    ("min-rp-below-floor", [*SOLVE, "--min-rp", "-20"], nothing, 2, ("--min-rp",)),
    ("spread-host-zero", [*SOLVE, "--spread-host", "0"], nothing, 2, ("--spread-host",)),
    ("anti-affinity-one-name", [*SOLVE, "--anti-affinity", "A"], nothing, 2, ("--anti-affinity", "two service names")),
    ("anti-affinity-unknown", [*SOLVE, "--anti-affinity", "A,Zed"], nothing, 2, ("tasks.parquet", "service", "Zed")),
    ("goal-unknown", [*SOLVE, "--goal", "speed"], nothing, 2, ("--goal", "speed")),
    ("solver-unknown", [*SOLVE, "--solver", "magic"], nothing, 2, ("--solver", "magic")),
    ("config-unknown", [*SOLVE, "--config", "p42"], nothing, 2, ("config", "p42", "p99-sens")),
    ("sensitivity-weight-negative", [*SOLVE, "--sensitivity-weight", "-1"], nothing, 2, ("--sensitivity-weight",)),
    ("fragmentation-weight-nan", [*SOLVE, "--fragmentation-weight", "nan"], nothing, 2, ("--fragmentation-weight",)),
    ("move-weight-inf", [*SOLVE, "--move-weight", "inf"], nothing, 2, ("--move-weight",)),
    ("at-risk-without-sensitivity", [*SOLVE, "--max-new-at-risk", "0"], nothing, 2, ("--max-new-at-risk", "p99-sens")),
    ("fair-with-at-risk", [*SOLVE, "--max-new-at-risk", "0", "--goal", "fair", "--config", "p99-sens"], nothing, 2, ("--max-new-at-risk", "fair")),
    ("seed-text", [*SOLVE, "--seed", "x"], nothing, 2, ("--seed",)),
    ("unknown-flag", [*SOLVE, "--fast"], nothing, 2, ("--fast",)),
    ("out-is-a-file", ["solve", TRACE, "--out", "{tmp}/f"], write_text("f", "x"), 2, ("--out", "a file")),
    ("out-below-a-file", ["solve", TRACE, "--out", "{tmp}/f/plan"], write_text("f", "x"), 2, ("--out", "is a file, not a folder")),
    ("out-is-the-trace", ["solve", TRACE, "--out", TRACE], nothing, 2, ("would overwrite the input",)),
    ("out-inside-the-trace", ["solve", TRACE, "--out", "{trace}/plan"], nothing, 2, ("would overwrite the input",)),
    ("profiles-missing", [*SOLVE, "--profiles", "{tmp}/none.parquet"], nothing, 2, ("--profiles", "none.parquet")),
    ("profiles-garbage", [*SOLVE, "--profiles", "{tmp}/p.parquet"], write_text("p.parquet", "garbage"), 2, ("p.parquet", "not a readable")),
    ("profiles-of-another-trace", [*SOLVE, "--profiles", "{tmp}/p.parquet"], write_parquet("p.parquet", {"task_id": ["x"], "cpu_p99": [1.0]}), 2,
     ("p.parquet", "task_id", "another trace")),
    ("profiles-without-percentiles", [*SOLVE, "--profiles", "{trace}/usage.parquet"], nothing, 2, ("cpu_p99", "--percentile 99")),
    ("profiles-no-task_id", [*SOLVE, "--profiles", "{trace}/hosts.parquet"], nothing, 2, ("hosts.parquet", "task_id")),
    ("sensitivity-missing", [*SOLVE, "--sensitivity", "{tmp}/none.csv"], nothing, 2, ("--sensitivity", "none.csv")),
    ("sensitivity-bad-columns", [*SOLVE, "--config", "p99-sens", "--sensitivity", "{tmp}/s.csv"], write_text("s.csv", "service,cpu\nA,abc\n"), 2,
     ("s.csv", "required column missing")),
    ("sensitivity-bad-score", [*SOLVE, "--config", "p99-sens", "--sensitivity", "{tmp}/s.csv"],
     write_text("s.csv", "service,arch,cpu,membw,net\nA,Broadwell20,lots,0.1,0.1\n"), 2, ("s.csv", "cpu")),
    ("classes-from-garbage", [*SOLVE, "--config", "p99-sens", "--classes-from", "{tmp}/c.parquet"], write_text("c.parquet", "x"), 2,
     ("c.parquet",)),
    # Other commands' flags.
    ("profile-percentile-101", ["profile", TRACE, "-p", "101", "--out", "{out}/p.parquet"], nothing, 2, ("--percentile", "101")),
    ("profile-window-zero", ["profile", TRACE, "--window", "0", "--out", "{out}/p.parquet"], nothing, 2, ("--window",)),
    ("profile-out-is-folder", ["profile", TRACE, "--out", "{tmp}/d"], write_text("d/x", ""), 2, ("--out", "d")),
    ("characterize-k-zero", ["characterize", TRACE, "--k", "0", "--out", OUT], nothing, 2, ("--k",)),
    ("characterize-sensitivity-bad", ["characterize", TRACE, "--sensitivity", "{tmp}/s.csv", "--out", OUT], write_text("s.csv", "service,cpu\nA,1\n"),
     2, ("s.csv", "required column missing")),
    ("characterize-classes-garbage", ["characterize", TRACE, "--classes-from", "{tmp}/c.parquet", "--out", OUT],
     write_text("c.parquet", "x"), 2, ("c.parquet",)),
    ("generate-negative-tasks", ["generate", "--tasks", "-1", "--hosts", "2", "--out", OUT], nothing, 2, ("--tasks", "> 0")),
    ("generate-zero-days", ["generate", "--tasks", "2", "--hosts", "2", "--days", "0", "--out", OUT], nothing, 2, ("--days", "> 0")),
    ("generate-infinite-days", ["generate", "--tasks", "2", "--hosts", "2", "--days", "inf", "--out", OUT], nothing, 2, ("--days", "finite")),
    ("generate-interval-too-long", ["generate", "--tasks", "2", "--hosts", "2", "--days", "0.01", "--interval", "9000", "--out", OUT], nothing, 2,
     ("--interval",)),
    ("sweep-weights-text", ["sweep", TRACE, "--weights", "0,heavy", "--out", OUT], nothing, 2, ("--weights", "heavy")),
    ("sweep-weights-negative", ["sweep", TRACE, "--weights", "0,-1", "--out", OUT], nothing, 2, ("--weights", ">= 0")),
    ("sweep-weights-nan", ["sweep", TRACE, "--weights", "nan", "--out", OUT], nothing, 2, ("--weights", "finite")),
    ("sweep-baselines-contradict", ["sweep", TRACE, "--baseline", "baseline-ffd", "--no-baselines", "--out", OUT], nothing, 2,
     ("--baseline", "--no-baselines")),
    ("sweep-config-unknown", ["sweep", TRACE, "--config", "p42", "--out", OUT], nothing, 2, ("p42",)),
    ("sweep-time-limit-inf", ["sweep", TRACE, "--time-limit", "inf", "--out", OUT], nothing, 2, ("--time-limit",)),
    ("sweep-baseline-unknown", ["sweep", TRACE, "--baseline", "magic", "--out", OUT], nothing, 2, ("--baseline", "magic")),
    ("report-not-a-plan", ["report", TRACE, "--out", OUT], nothing, 2, (str(Path("trace")),)),
    ("report-missing", ["report", "{tmp}/none", "--out", OUT], nothing, 2, ("none",)),
    # Importers.
    ("bitbrains-missing", ["import", "bitbrains", "{tmp}/none", "--out", OUT], nothing, 2, ("none", "not found")),
    ("bitbrains-no-csv", ["import", "bitbrains", "{tmp}/bb", "--out", OUT], write_text("bb/readme.txt", "x"), 2, ("bb", "no CSV files")),
    ("bitbrains-bad-row", ["import", "bitbrains", "{tmp}/bb", "--out", OUT],
     bitbrains([GOOD_VM, GOOD_VM.replace("1372629804", "1372630104").replace("2097152.0", "-1")]), 2,
     ("1.csv", "Memory usage [KB]", "line 3", "--skip-invalid")),
    ("bitbrains-missing-column", ["import", "bitbrains", "{tmp}/bb", "--out", OUT], write_text("bb/1.csv", "Timestamp [ms];CPU cores\n1;2\n"), 2,
     ("1.csv", "required column missing")),
    ("bitbrains-empty-file", ["import", "bitbrains", "{tmp}/bb", "--out", OUT], write_text("bb/1.csv", ""), 2, ("1.csv", "not a readable")),
    ("bitbrains-unknown-arch", ["import", "bitbrains", "{tmp}/bb", "--out", OUT, "--arch", "Z80"], bitbrains([GOOD_VM]), 2, ("Z80",)),
    ("bitbrains-slack-one", ["import", "bitbrains", "{tmp}/bb", "--out", OUT, "--slack", "1"], bitbrains([GOOD_VM]), 2, ("--slack",)),
    ("openb-missing", ["import", "openb", "{tmp}/none", "--out", OUT], nothing, 2, ("none",)),
    ("openb-garbage", ["import", "openb", "{tmp}/ob", "--out", OUT], write_text("ob/openb_node_list_gpu_node.csv", "a,b\n1,2\n"), 2, ("ob",)),
    # Tampered plan folders (verify: 2 when the plan cannot be read, 1 when it is read and a check fails).
    ("plan-no-summary", VERIFY, remove("plan/summary.json"), 2, ("summary.json",)),
    ("plan-summary-not-json", VERIFY, write_text("plan/summary.json", "{not json"), 2, ("summary.json", "not valid JSON")),
    ("plan-summary-a-list", VERIFY, write_text("plan/summary.json", "[]"), 2, ("summary.json", "JSON object")),
    ("plan-context-unknown-key", VERIFY, summary(lambda doc: doc["context"].update(colour="blue")), 2, ("summary.json", "colour")),
    ("plan-context-wrong-type", VERIFY, summary(lambda doc: doc["context"].update(seed="zero")), 2, ("summary.json", "seed")),
    ("plan-context-unknown-config", VERIFY, summary(lambda doc: doc["context"].update(config="p42")), 2, ("p42",)),
    ("plan-context-fleet-missing", VERIFY, summary(lambda doc: doc["context"].update(fleet="/nonexistent/fleet.toml")), 2, ("fleet.toml", "not found")),
    ("plan-presets-bad-toml", VERIFY, both(write_text("p.toml", "[p99\n"), summary(lambda doc: doc["context"].update(presets="p.toml"))), 2,
     ("p.toml", "not valid TOML")),
    ("plan-presets-bad-limit", VERIFY, both(write_text("p.toml", '[p99.limits]\ncpu = "p999"\n'),
                                            summary(lambda doc: doc["context"].update(presets="p.toml"))), 2, ("p.toml", "p999")),
    ("plan-presets-missing", VERIFY, summary(lambda doc: doc["context"].update(presets="/nonexistent/presets.toml")), 2,
     ("presets.toml", "not found")),
    ("plan-no-placement", VERIFY, remove("plan/placement.parquet"), 2, ("placement.parquet",)),
    ("plan-placement-garbage", VERIFY, write_text("plan/placement.parquet", "x"), 2, ("placement.parquet", "not a readable")),
    ("plan-placement-no-host", VERIFY, drop_column("placement.parquet", "host_id", where="plan"), 2, ("placement.parquet", "host_id")),
    ("plan-no-moves", VERIFY, remove("plan/moves.parquet"), 2, ("moves.parquet",)),
    ("plan-placement-unknown-host", VERIFY, set_value("placement.parquet", "host_id", "h99", where="plan"), 1, ("placement", "h99")),
    ("plan-placement-unknown-task", VERIFY, set_value("placement.parquet", "task_id", "ghost", where="plan"), 1, ("placement", "ghost")),
    ("plan-summary-objective", VERIFY, summary(lambda doc: doc.update(objective={k: v + 1 if isinstance(v, (int, float)) else v
                                                                              for k, v in doc["objective"].items()})), 1, ("summary",)),
]


def run_case(base: Path, tmp_path: Path, args: list[str], break_it: Break, code: int, needles: tuple[str, ...],
             invoke: Callable[[list[str]], tuple[int, str]]) -> None:
    """Copy the base inputs, break them, run ``invoke(args)`` -> (exit code, output) and check the house rule (module doc)."""
    shutil.copytree(base / "trace", tmp_path / "trace")
    shutil.copytree(base / "plan", tmp_path / "plan")
    break_it(tmp_path)
    before = folder_hash(tmp_path)
    filled = [a.format(trace=tmp_path / "trace", plan=tmp_path / "plan", out=tmp_path / "out", tmp=tmp_path) for a in args]
    exit_code, output = invoke(filled)
    assert exit_code == code, output
    assert "Traceback" not in output
    for needle in needles:
        assert needle in output, f"{needle!r} not in:\n{output}"
    assert folder_hash(tmp_path) == before, "the command wrote output or changed an input"


@pytest.mark.parametrize("args, break_it, code, needles", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_input(base: Path, tmp_path: Path, monkeypatch, args: list[str], break_it: Break, code: int, needles: tuple[str, ...]) -> None:
    def invoke(filled: list[str]) -> tuple[int, str]:
        result = CliRunner().invoke(cli, filled)
        # An exception other than SystemExit is a bug escaping as a traceback.
        assert isinstance(result.exception, SystemExit), f"{result.exception!r}\n{result.output}"
        return result.exit_code, result.output

    # A command that ignored --out would write under the working folder: make that the case's folder, which is hashed.
    monkeypatch.chdir(tmp_path)
    run_case(base, tmp_path, args, break_it, code, needles, invoke)


SUBPROCESS_CASES = ("usage-part-corrupt", "fleet-mem-text", "time-limit-inf", "plan-summary-not-json", "bitbrains-bad-row")


@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_bad_input_in_a_real_process(base: Path, tmp_path: Path, name: str) -> None:
    """A few cases in a process of their own, as the console script runs: its exit code and stderr."""
    args, break_it, code, needles = next(case[1:] for case in CASES if case[0] == name)

    def invoke(filled: list[str]) -> tuple[int, str]:
        command = [sys.executable, "-c", "from packer.cli import main; main()", *filled]
        done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=120)
        return done.returncode, done.stdout + done.stderr

    run_case(base, tmp_path, args, break_it, code, needles, invoke)


def test_the_catalogue_is_large_and_distinct() -> None:
    ids = [case[0] for case in CASES]
    assert len(ids) >= 100 and len(set(ids)) == len(ids)
