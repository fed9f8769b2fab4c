"""`packer characterize`: output folder, report, PNG, bad inputs (exit 2), determinism."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.image
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner

from packer.characterization.characterize import characterize
from packer.cli import cli
from packer.io.trace import read_trace, write_trace

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TYPE_ARCHS = {"I": ["Skylake14", "Broadwell18"], "II": ["Broadwell20", "Skylake16", "Haswell12"]}


def make_trace(root: Path, per_level: int = 20, seed: int = 0, with_usage: bool = False) -> tuple[Path, Path]:
    """A trace with three usage levels per umbrella type, its profiles file, and (optionally) usage."""
    rng = np.random.default_rng(seed)
    hosts, tasks, profiles = [], [], []
    for utype, archs in TYPE_ARCHS.items():
        hosts += [{"host_id": f"{utype}-{a}", "arch": a} for a in archs]
        for level in range(3):
            n = per_level
            cpu = np.exp(0.3 + 1.5 * level + rng.normal(0, 0.1, n))
            mem = np.exp(0.5 + 1.3 * level + rng.normal(0, 0.1, n))
            net = np.exp(-2.0 + 1.0 * level + rng.normal(0, 0.1, n))
            ids = [f"{utype}-{level}-{i}" for i in range(n)]
            host = [f"{utype}-{archs[i % len(archs)]}" for i in range(n)]
            service = np.where((np.arange(n) == 0) & (level == 2) & (utype == "II"), "Rank2", None)
            tasks.append(pd.DataFrame({"task_id": ids, "job_id": [f"j{utype}{level}"] * n, "host_id": host,
                                       "cpu_request": cpu * 1.5, "mem_request": mem * 1.5, "net_request": net * 1.5, "service": service}))
            profiles.append(pd.DataFrame({"task_id": ids, "samples": 30, "cpu_p99": cpu, "mem_p99": mem, "net_p99": net}))
    tasks = pd.concat(tasks, ignore_index=True)
    usage = None
    if with_usage:
        ts = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(np.arange(30) * 60, unit="s")
        reps = len(ts)
        usage = [pa.Table.from_pandas(pd.DataFrame({
            "task_id": np.repeat(tasks["task_id"].to_numpy(), reps),
            "ts": np.tile(ts.to_numpy(), len(tasks)),
            **{d: np.repeat(tasks[f"{d}_request"].to_numpy() / 1.5, reps) * rng.uniform(0.9, 1.0, len(tasks) * reps) for d in ("cpu", "mem", "net")},
        }), preserve_index=False)]
    trace = write_trace(root / "trace", pd.DataFrame(hosts), tasks, usage)
    profiles_path = root / "profiles.parquet"
    pd.concat(profiles, ignore_index=True).to_parquet(profiles_path, index=False)
    return trace, profiles_path


def run(*args: str):
    return CliRunner().invoke(cli, ["characterize", *map(str, args)])


def test_cli_writes_tasks_report_and_png(tmp_path):
    trace, profiles = make_trace(tmp_path)
    out = tmp_path / "char"
    result = run(trace, "--profiles", profiles, "--out", out, "--seed", 3)
    assert result.exit_code == 0, result.output
    assert "characterized 120 tasks" in result.output and "type II  high" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["classes.parquet", "report.md", "tasks.parquet", "wcss.parquet", "wcss.png"]

    tasks = pd.read_parquet(out / "tasks.parquet")
    assert len(tasks) == 120 and tasks["task_id"].is_unique
    for col in ("type", "class", "cpu_ref_cores", "mem_gib", "net_gbps", "cpu_sens", "membw_sens_demand", "net_sens_Haswell10",
                "measured_on", "score_source", "eligible_archs", "ineligible_archs"):
        assert col in tasks.columns, col
    assert set(tasks.groupby("type")["class"].nunique()) == {3}
    # Rank2 (a measured service) has Table III's Broadwell20 scores; on Haswell10 its CPU is 1.13.
    rank2 = tasks[tasks["service"] == "Rank2"].iloc[0]
    assert (rank2["cpu_sens"], rank2["measured_on"], rank2["score_source"]) == (0.93, "Broadwell20", "service")
    assert rank2["cpu_sens_Haswell10"] == pytest.approx(1.1297, abs=1e-4)
    # On the need basis a Haswell10 is ineligible for it exactly when 1.13 x its share of a Haswell10 exceeds 1.
    share = rank2["need_cu"] / 1.63
    assert ("Haswell10" in rank2["ineligible_archs"].split("|")) == (1.1297 * share > 1)
    assert "Broadwell20" in rank2["eligible_archs"].split("|")
    # Type I classes have no measured service in the default table: they take Type II's class of their level.
    type1 = tasks[tasks["type"] == "I"]
    assert (type1["score_source"] == "nearest-class").all() and type1["score_class"].str.startswith("II/").all()
    assert "no sensitivity scores" not in result.output
    # The whole-host reading: 1.13 > 1 makes Haswell10 ineligible whatever the task's size.
    host = run(trace, "--profiles", profiles, "--out", tmp_path / "host", "--seed", 3, "--sensitivity-basis", "host")
    assert host.exit_code == 0, host.output
    rank2 = pd.read_parquet(tmp_path / "host" / "tasks.parquet").query("service == 'Rank2'").iloc[0]
    assert "Haswell10" in rank2["ineligible_archs"].split("|")
    assert "basis `host`" in (tmp_path / "host" / "report.md").read_text()

    report = (out / "report.md").read_text()
    for text in ("## Workload classes", "## Sensitivity", "WCSS", "Tasks that may not use each architecture", "![WCSS](wcss.png)",
                 "Broadwell18 cores", "basis `need`", "mean over the class's measured services"):
        assert text in report, text
    png = (out / "wcss.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000
    pixels = matplotlib.image.imread(out / "wcss.png")
    assert pixels.shape[0] > 200 and pixels.shape[1] > 300 and pixels.std() > 0.05


def test_same_seed_same_output(tmp_path):
    trace, profiles = make_trace(tmp_path)
    for name in ("a", "b"):
        assert run(trace, "--profiles", profiles, "--out", tmp_path / name, "--seed", 5).exit_code == 0
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "a" / "tasks.parquet"), pd.read_parquet(tmp_path / "b" / "tasks.parquet"))


def test_k_override(tmp_path):
    trace, profiles = make_trace(tmp_path)
    result = run(trace, "--profiles", profiles, "--out", tmp_path / "o", "--k", 2)
    assert result.exit_code == 0, result.output
    assert set(pd.read_parquet(tmp_path / "o" / "classes.parquet")["class"]) == {"level-1/2", "level-2/2"}


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda t: t.replace("Broadwell20,0.93", "Broadwell99,0.93"), "column 'arch': architecture missing from the fleet catalog"),
        (lambda t: t + "Rank3,,Broadwell20,0.5,0.5,0.5,true\n", "column 'service': service not in the trace and no class given"),
        (lambda t: t.replace("0.93,0.86", "9.3,0.86"), "column 'cpu': score outside [0, 5]"),
        (lambda t: t.replace(",membw,", ",memory_bw,"), "column 'membw': required column missing"),
    ],
)
def test_bad_sensitivity_table_exits_2(tmp_path, edit, needle):
    trace, profiles = make_trace(tmp_path)
    table = tmp_path / "bad.csv"
    table.write_text(edit((Path(__file__).resolve().parents[1] / "models" / "sensitivity.csv").read_text()))
    result = run(trace, "--profiles", profiles, "--sensitivity", table, "--out", tmp_path / "o")
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and str(table) in result.output and needle in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_characterize_leaves_the_matplotlib_backend_alone(tmp_path):
    # A non-Agg backend, so that switching to Agg (what the plot once did) would show.
    original = matplotlib.get_backend()
    matplotlib.use("pdf")
    try:
        trace, profiles = make_trace(tmp_path, per_level=8)
        result = run(trace, "--profiles", profiles, "--out", tmp_path / "char")
        assert result.exit_code == 0, result.output
        assert (tmp_path / "char" / "wcss.png").read_bytes().startswith(PNG_MAGIC)
        assert matplotlib.get_backend() == "pdf"
    finally:
        matplotlib.use(original)


def test_profiles_of_another_trace_exit_2(tmp_path):
    trace, profiles = make_trace(tmp_path)
    other = tmp_path / "other.parquet"
    pd.read_parquet(profiles).assign(task_id=lambda d: "x" + d["task_id"]).to_parquet(other)
    result = run(trace, "--profiles", other, "--out", tmp_path / "o")
    assert result.exit_code == 2 and "task not in the trace" in result.output


def test_profiles_computed_when_not_given(tmp_path, monkeypatch):
    trace, _ = make_trace(tmp_path, per_level=8, with_usage=True)
    monkeypatch.chdir(tmp_path)
    result = run(trace)
    assert result.exit_code == 0, result.output
    tasks = pd.read_parquet(tmp_path / "out" / "trace" / "characterization" / "tasks.parquet")
    assert tasks["profiled"].all() and len(tasks) == 48


def test_library_api_matches_the_trace_order(tmp_path):
    trace_path, profiles = make_trace(tmp_path)
    trace = read_trace(trace_path)
    shuffled = pd.read_parquet(profiles).sample(frac=1.0, random_state=0)
    result = characterize(trace, shuffled, seed=0)
    assert list(result.tasks["task_id"]) == list(trace.tasks["task_id"])
    assert result.eligible.shape == (len(trace.tasks), 6)
    # Level structure recovered: the highest-usage tasks of each type are in the top class.
    top = result.tasks[result.tasks["task_id"].str.contains(r"-2-")]
    assert set(top["class"]) == {"high"}


def test_cli_infer_fills_missing_scores(tmp_path):
    trace, profiles = make_trace(tmp_path)
    table = tmp_path / "partial.csv"
    shipped = (Path(__file__).resolve().parents[1] / "models" / "sensitivity.csv").read_text()
    table.write_text(shipped.replace("Rank2,high,Broadwell20,0.93,0.86", "Rank2,high,Broadwell20,0.93,"))
    refused = run(trace, "--profiles", profiles, "--sensitivity", table, "--out", tmp_path / "o")
    assert refused.exit_code == 2 and "--infer" in refused.output
    result = run(trace, "--profiles", profiles, "--sensitivity", table, "--out", tmp_path / "o", "--infer")
    assert result.exit_code == 0, result.output
    assert "inferred 1 missing sensitivity scores" in result.output
    tasks = pd.read_parquet(tmp_path / "o" / "tasks.parquet")
    rank2 = tasks[tasks["service"] == "Rank2"].iloc[0]
    assert rank2["scores_inferred"] and 0 < rank2["membw_sens"] <= 5
    assert "Scores filled by collaborative filtering" in (tmp_path / "o" / "report.md").read_text()
