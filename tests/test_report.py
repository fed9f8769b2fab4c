"""`packer report`: self-contained HTML whose images load, Markdown with PNGs, and numbers that match the summaries."""
from __future__ import annotations

import base64
import io
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

from conftest import tiny_tables, write_tables
from packer.cli import cli
from packer.errors import InputError
from packer.report import PAPER_CHANGES, fmt_change, fmt_count, fmt_number, fmt_share, relative_change, write_report
from packer.sweep import SweepOptions, run_sweep

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class _Page(HTMLParser):
    """Collects the tables (by id: header and rows of cell texts) and image sources of an HTML page."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.images: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = attrs["id"]
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table:
            self._cell = []
        elif tag == "img":
            self.images.append(attrs["src"])

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def parse_html(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    return page


def records(rows: list[list[str]]) -> list[dict[str, str]]:
    """Table rows as dicts keyed by the header row."""
    return [dict(zip(rows[0], row)) for row in rows[1:]]


def markdown_tables(text: str) -> dict[str, list[list[str]]]:
    """Markdown tables keyed by the bold caption line above them."""
    out, caption, rows = {}, None, None
    for line in text.splitlines():
        if line.startswith("**") and line.endswith("**"):
            caption, rows = line.strip("*"), []
        elif line.startswith("|") and caption is not None:
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not all(set(c) <= {"-"} for c in cells):
                rows.append(cells)
            out[caption] = rows
    return out


def number(text: str) -> float:
    """A formatted number back: ``1,234.5`` -> 1234.5, ``-12.3%`` -> -0.123, ``-`` -> NaN."""
    text = text.strip()
    if text == "-":
        return float("nan")
    if text.endswith("%"):
        return float(text[:-1].replace(",", "")) / 100
    return float(text.replace(",", ""))


def same(text: str, value) -> bool:
    """``text`` is ``value`` as the report formats it (4 significant digits, one decimal from 1000, 0.1% for shares)."""
    parsed = number(text)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.isnan(parsed)
    tol = 0.0006 if text.endswith("%") else 0.051 if abs(float(value)) >= 1000 else 5e-4 * max(abs(float(value)), 1e-12) + 1e-12
    return abs(parsed - float(value)) <= tol


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    hosts, tasks, usage = tiny_tables(n_tasks=16, n_hosts=6, seed=2)
    trace = write_tables(root / "trace", hosts, tasks, usage)
    return run_sweep(trace, root / "sweep", SweepOptions(weights=(1.0,), baselines=("baseline-ffd", "baseline-paragon"), time_limit_s=5))


@pytest.fixture(scope="module")
def sweep_report(sweep):
    return write_report(sweep.path)


def test_html_is_one_file_whose_images_are_valid_pngs(sweep_report):
    page = parse_html(sweep_report.html)
    assert len(page.images) >= 7  # Pareto, Figs. 7-8, 9, 10, 11, 12, relative performance
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.removeprefix("data:image/png;base64,"), validate=True)
        assert png.startswith(PNG_SIGNATURE)
        image = Image.open(io.BytesIO(png))
        image.load()
        assert image.size[0] > 100 and image.size[1] > 100
    # The Markdown links PNG files that sit beside it and are the same images.
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", sweep_report.markdown.read_text())
    assert len(linked) == len(page.images)
    for name in linked:
        assert (sweep_report.folder / name).read_bytes().startswith(PNG_SIGNATURE)


def test_sweep_table_numbers_match_the_sweep(sweep, sweep_report):
    page = parse_html(sweep_report.html)
    table = sweep.table.set_index("point")
    rows = {r["point"]: r for r in records(page.tables["sweep"])}
    assert set(table.index) < set(rows)
    for point, expected in table.iterrows():
        row = rows[point]
        assert same(row["TCO"], expected["tco"]) and same(row["hosts"], expected["hosts"])
        assert same(row["tasks at risk"], expected["tasks_at_risk"]) and same(row["interference"], expected["interference"])
        assert same(row["moves"], expected["moves"]) and row["status"] == expected["status"]
        assert (row["Pareto"] == "yes") == bool(expected["pareto"])
    current = sweep.meta["current"]
    assert same(rows["current placement"]["TCO"], current["tco"]) and same(rows["current placement"]["tasks at risk"], current["tasks_at_risk"])
    # The Markdown carries the same numbers.
    md = {r[0]: dict(zip(markdown_tables(sweep_report.markdown.read_text())["Sweep table (the numbers behind the Pareto plot)"][0], r))
          for r in markdown_tables(sweep_report.markdown.read_text())["Sweep table (the numbers behind the Pareto plot)"][1:]}
    for point, expected in table.iterrows():
        assert same(md[point]["TCO"], expected["tco"]) and same(md[point]["tasks at risk"], expected["tasks_at_risk"])


def test_figure_tables_match_the_plan_summaries_and_the_sweep_table(sweep, sweep_report):
    page = parse_html(sweep_report.html)
    for row in records(page.tables["arch"]):
        by_arch = json.loads((sweep.path / "plans" / row["point"] / "summary.json").read_text())["by_arch"][row["arch"]]
        for header, key in (("hosts freed", "freed"), ("newly occupied", "newly_occupied"), ("tasks moved out", "moved_out"),
                            ("tasks moved in", "moved_in"), ("occupied before", "hosts_before"), ("occupied after", "hosts_after")):
            assert same(row[header], by_arch[key]), (row, header)
    table = sweep.table.set_index("point")
    baseline = table.loc["baseline"]
    for row in records(page.tables["fragmentation"])[1:]:
        expected = table.loc[row["point"]]
        assert same(row["fragmentation cpu"], expected["frag_cpu"]) and same(row["share mem"], expected["frag_share_mem"])
        assert same(row["fragmentation cpu change"], relative_change(expected["frag_cpu"], baseline["frag_cpu"]))
    for row in records(page.tables["interference"])[1:]:
        expected = table.loc[row["point"]]
        assert same(row["tasks at risk"], expected["tasks_at_risk"])
        assert same(row["interference change"], relative_change(expected["interference"], baseline["interference"]))
    for row in records(page.tables["wsl"]):
        assert same(row["WSL"], table.loc[row["point"], "wsl"]) and same(row["hosts used"], table.loc[row["point"], "hosts"])
    for row in records(page.tables["rp"])[1:]:
        assert same(row["p5"], table.loc[row["point"], "rp_p5"]) and same(row["tasks below 0"], table.loc[row["point"], "rp_below_zero"])
    dominance = {d["baseline"]: d for d in sweep.meta["dominance"]}
    for row in records(page.tables["dominance"]):
        assert (row["dominated"] == "yes") == bool(dominance[row["baseline"]]["dominated"])


def test_paper_comparison_sits_next_to_the_published_changes(sweep, sweep_report):
    rows = records(parse_html(sweep_report.html).tables["paper"])
    assert len(rows) == len(PAPER_CHANGES)
    table = sweep.table.set_index("point")
    for row, change in zip(rows, PAPER_CHANGES):
        assert same(row["paper"], change.paper) and row["why they differ"]
    hosts = rows[0]
    assert hosts["comparison"] == "P99 vs Baseline"
    assert same(hosts["measured"], relative_change(table.loc["p99", "hosts"], table.loc["baseline", "hosts"]))
    sens_vs_p99 = rows[-1]
    assert sens_vs_p99["comparison"] == "P99 Sens (w=1) vs P99"
    assert same(sens_vs_p99["measured"], relative_change(table.loc["p99-sens-w1", "hosts"], table.loc["p99", "hosts"]))


def test_no_paper_comparison_without_the_three_configurations(tmp_path):
    hosts, tasks, usage = tiny_tables(n_tasks=8, n_hosts=4)
    trace = write_tables(tmp_path / "t", hosts, tasks, usage)
    run_sweep(trace, tmp_path / "s", SweepOptions(configs=("baseline", "p99"), weights=(1.0,), baselines=("baseline-ffd",)))
    files = write_report(tmp_path / "s")
    page = parse_html(files.html)
    assert "paper" not in page.tables and "sweep" in page.tables


def test_plan_report_numbers_match_its_summary(sweep):
    plan = sweep.path / "plans" / "p99-sens-w1"
    files = write_report(plan, sweep.path.parent / "plan-report")
    assert files.kind == "plan"
    summary = json.loads((plan / "summary.json").read_text())
    before, after = summary["metrics"]["before"], summary["metrics"]["after"]
    page = parse_html(files.html)
    headline = {r["metric"]: r for r in records(page.tables["headline"])}
    assert same(headline["TCO (cost units)"]["before"], before["tco"]) and same(headline["TCO (cost units)"]["after"], after["tco"])
    assert same(headline["occupied hosts"]["after"], after["hosts"]) and same(headline["tasks at risk"]["after"], after["tasks_at_risk"])
    assert same(headline["WSL (score-weighted hosts)"]["after"], summary["fleet_change"]["wsl"])
    for dim, value in after["interference"].items():
        assert same(headline[f"interference {dim}"]["after"], value)
    for row in records(page.tables["arch"]):
        expected = summary["by_arch"][row["arch"]]
        assert same(row["hosts freed"], expected["freed"]) and same(row["tasks moved in"], expected["moved_in"])
        assert same(row["TCO after"], expected["tco_after"]) and same(row["WSL"], expected["wsl"])
    moves = summary["moves_by_arch"]
    for row in records(page.tables["moves"]):
        for dst, cell in row.items():
            if dst != "from \\ to":
                assert same(cell, moves.get(row["from \\ to"], {}).get(dst, 0))
    rp = {r["group"]: r for r in records(page.tables["rp"])}
    assert same(rp["all after"]["median"], summary["relative_performance"]["after"]["all"]["median"])
    for src in page.images:
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_SIGNATURE)


def test_formatting_round_trips():
    assert fmt_number(12345.678) == "12,345.7" and fmt_number(0.012345) == "0.01235" and fmt_number(None) == "-"
    assert fmt_count(12345.0) == "12,345" and fmt_share(0.3051) == "30.5%" and fmt_change(-0.1234) == "-12.3%"
    assert math.isnan(relative_change(1.0, 0.0)) and relative_change(3.0, 4.0) == -0.25


def test_report_command(sweep, tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["report", str(sweep.path), "--out", str(tmp_path / "r")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "sweep report" in result.output and (tmp_path / "r" / "report.html").exists() and (tmp_path / "r" / "report.md").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(cli, ["report", str(empty)])
    assert result.exit_code == 2 and "neither a sweep folder" in result.output


def test_report_refuses_to_replace_its_input(sweep):
    with pytest.raises(InputError, match="would replace"):
        write_report(sweep.path, sweep.path)
    with pytest.raises(InputError, match="would replace"):
        write_report(sweep.path / "plans" / "p99", sweep.path)


def test_requests_only_sweep_report_says_so(tmp_path):
    hosts, tasks, _ = tiny_tables(n_tasks=8, n_hosts=4)
    trace = write_tables(tmp_path / "requests", hosts, tasks, None)
    run_sweep(trace, tmp_path / "s", SweepOptions(baselines=("baseline-ffd",)))
    text = write_report(tmp_path / "s").markdown.read_text()
    assert "requests only" in text and "Skipped configurations" in text and "p99-sens" in text
    assert "Reproducing the paper" not in text
    assert isinstance(pd.read_parquet(tmp_path / "s" / "sweep.parquet"), pd.DataFrame)
