"""The Python API (packer.api): the README's example runs, plans it writes verify, bad arguments are InputErrors."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

import packer
from conftest import tiny_tables, write_tables

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_example_runs(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Installing, and the Python API.*?```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    backend = matplotlib.get_backend()
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "out" / "api-plan" / "summary.json").is_file()
    assert matplotlib.get_backend() == backend


def test_solve_returns_a_plan_with_ids_that_verifies(tmp_path):
    hosts, tasks, usage = tiny_tables(n_tasks=12, n_hosts=6)
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    plan = packer.solve(trace, config="p99", max_moves=4, time_limit=5, spread_host=1)
    assert list(plan.placement.columns) == ["task_id", "host_id"] and set(plan.placement["task_id"]) == set(tasks["task_id"])
    assert len(plan.moves) <= 4 and set(plan.moves["task_id"]) <= set(tasks["task_id"])
    assert plan.status in ("optimal", "feasible") and plan.objective == plan.summary["objective"]["total"]
    assert packer.verify(trace, plan).ok  # in memory
    written = plan.write(tmp_path / "plan")
    assert written.path == tmp_path / "plan" and packer.verify(trace, tmp_path / "plan").ok
    again = packer.read_plan(tmp_path / "plan")
    assert again.summary == plan.summary and again.context == plan.context


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"goal": "profit"}, "goal must be one of"),
    ({"time_limit": 0}, "time_limit"),
    ({"time_limit": float("nan")}, "time_limit"),
    ({"max_moves": 2.5}, "max_moves"),
    ({"max_moves": -1}, "--max-moves must be >= 0"),
    ({"solver": "gurobi"}, "solver must be one of"),
    ({"anti_affinity": [("A",)]}, "anti_affinity"),
    ({"weights": {"sensitivity": 1}}, "GoalWeights"),
    ({"config": "p42"}, "unknown config"),
])
def test_bad_arguments_are_input_errors(tmp_path, kwargs, message):
    hosts, tasks, usage = tiny_tables()
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    with pytest.raises(packer.InputError, match=message):
        packer.solve(trace, **{"time_limit": 5, **kwargs})


def test_a_task_that_fits_nowhere_is_an_infeasible_error(tmp_path):
    hosts, tasks, usage = tiny_tables()
    tasks.loc[2, "mem_request"] = 300.0
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    with pytest.raises(packer.InfeasibleError) as err:
        packer.solve(trace, config="baseline", time_limit=5)
    assert err.value.tasks == ["t002"]


def test_profile_and_characterize_feed_solve(tmp_path):
    hosts, tasks, usage = tiny_tables(n_tasks=10, n_hosts=5)
    trace = packer.read_trace(write_tables(tmp_path / "t", hosts, tasks, usage))
    profiles = packer.profile(trace)
    assert {"task_id", "cpu_p99", "mem_p99"} <= set(profiles.columns)
    result = packer.characterize(trace, profiles)
    assert len(result.tasks) == 10 and (result.tasks["score_source"] != "none").all()
    plan = packer.solve(trace, config="p99-sens", profiles=profiles, time_limit=5)
    assert packer.verify(trace, plan).ok


def test_importing_and_using_packer_changes_no_global_state(tmp_path):
    """In a fresh interpreter (imports happen once): the matplotlib backend, logging and the environment stay the caller's."""
    hosts, tasks, usage = tiny_tables(n_tasks=10, n_hosts=4)
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    code = f"""
import logging, os, sys
import matplotlib
matplotlib.use("pdf")
before = (matplotlib.get_backend(), list(logging.getLogger().handlers), logging.getLogger().level, dict(os.environ))
import packer, packer.api, packer.cli, packer.report.report
from packer.characterization.characterize import write_characterization
trace = packer.read_trace({str(trace)!r})
result = packer.characterize(trace, packer.profile(trace))
write_characterization(result, {str(tmp_path / "chars")!r})
packer.solve(trace, config="baseline", time_limit=2).write({str(tmp_path / "plan")!r})
after = (matplotlib.get_backend(), list(logging.getLogger().handlers), logging.getLogger().level, dict(os.environ))
sys.exit(0 if after == before else f"changed: {{before}} -> {{after}}")
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
