"""`packer report`: self-contained HTML whose images load, Markdown with PNGs, and numbers that match the summaries."""
from __future__ import annotations

import base64
import io
import json
import math
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

from conftest import tiny_tables, write_tables
from packer.cli import cli
from packer.errors import InputError
from packer.report.report import (
    COLOURS,
    PAPER_CHANGES,
    RECOMMENDATION_RULE,
    SPARE_COLOURS,
    Recommendation,
    colour_of,
    compact_numbers,
    fmt_change,
    fmt_count,
    fmt_number,
    fmt_share,
    front_sentences,
    paper_comparison,
    paper_sens_point,
    place_labels,
    point_sentence,
    recommend,
    relative_change,
    unscored_text,
    write_report,
)
from packer.report.sweep import BASELINE, OPTIMIZER, SweepOptions, pareto_front, run_sweep

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
    # The Markdown carries the same numbers, and the caption names the tasks-at-risk basis.
    caption = "Sweep table (the numbers behind the Pareto plot; tasks at risk: need basis)"
    md = {r[1]: dict(zip(markdown_tables(sweep_report.markdown.read_text())[caption][0], r))
          for r in markdown_tables(sweep_report.markdown.read_text())[caption][1:]}
    for number, (point, expected) in enumerate(table.iterrows(), 1):
        assert same(md[point]["TCO"], expected["tco"]) and same(md[point]["tasks at risk"], expected["tasks_at_risk"])
        assert md[point]["#"] == str(number)  # the figure's point labels


def test_figure_tables_match_the_plan_summaries_and_the_sweep_table(sweep, sweep_report):
    page = parse_html(sweep_report.html)
    recommended = recommend(sweep.table, sweep.meta["current"]["tasks_at_risk"]).point
    assert recommended in {row["point"] for row in records(page.tables["arch"])}
    assert f"The recommended point (`{recommended}`) is drawn hatched" in sweep_report.markdown.read_text()
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
        assert same(row["paper"], change.paper) and row["why they differ"] and row["paper says"] == change.quote
        assert row["comparison"].endswith("vs Baseline")  # every published change is against the Baseline configuration
    hosts = rows[0]
    assert hosts["comparison"] == "P99 vs Baseline"
    assert same(hosts["measured"], relative_change(table.loc["p99", "hosts"], table.loc["baseline", "hosts"]))
    assert hosts["computed from"] == f"{fmt_count(table.loc['p99', 'hosts'])} vs {fmt_count(table.loc['baseline', 'hosts'])} hosts"
    # P99 Sens is a weight point (this sweep's no-new-risk point has fewer tasks at risk, but is no Table IV configuration).
    assert table.loc["p99-sens-no-new-risk", "tasks_at_risk"] < table.loc["p99-sens-w1", "tasks_at_risk"]
    risk, sens_hosts = rows[-2], rows[-1]
    assert risk["comparison"] == sens_hosts["comparison"] == "P99 Sens w=1 (`p99-sens-w1`) vs Baseline"
    assert same(sens_hosts["measured"], relative_change(table.loc["p99-sens-w1", "hosts"], table.loc["baseline", "hosts"]))
    assert risk["computed from"] == (f"{fmt_count(table.loc['p99-sens-w1', 'tasks_at_risk'])} vs "
                                     f"{fmt_count(table.loc['baseline', 'tasks_at_risk'])} tasks at risk (need basis)")


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
    assert "Tasks at risk are not measured" in text and "tasks at risk not measured." in text
    assert "Reproducing the paper" not in text
    assert isinstance(pd.read_parquet(tmp_path / "s" / "sweep.parquet"), pd.DataFrame)


# --- the answer at the top of a sweep report ---

_COLUMNS = ["point", "kind", "config", "weight", "max_new_at_risk", "tco", "tasks_at_risk", "moves"]


def _hand_table(rows) -> pd.DataFrame:
    """A sweep table from (point, kind, config, weight, max_new_at_risk, tco, tasks_at_risk, moves) rows, with its Pareto flags."""
    table = pd.DataFrame(rows, columns=_COLUMNS)
    table["pareto"] = pareto_front(table["tco"], table["tasks_at_risk"])
    return table


NAN = float("nan")
# Front: baseline-ffd (70, 150), p99 (80, 130), p99-sens-w0.3 (85, 110), p99-sens-w1 = p99-sens-w3 (90, 95), baseline-paragon (99, 60).
# Off it: baseline (95, 100) and the no-new-risk point (92, 100), both dominated by p99-sens-w1.
HAND = _hand_table([
    ("baseline", OPTIMIZER, "baseline", NAN, NAN, 95.0, 100, 400),
    ("p99", OPTIMIZER, "p99", NAN, NAN, 80.0, 130, 400),
    ("p99-sens-w0.3", OPTIMIZER, "p99-sens", 0.3, NAN, 85.0, 110, 400),
    ("p99-sens-w1", OPTIMIZER, "p99-sens", 1.0, NAN, 90.0, 95, 380),
    ("p99-sens-w3", OPTIMIZER, "p99-sens", 3.0, NAN, 90.0, 95, 380),
    ("p99-sens-no-new-risk", OPTIMIZER, "p99-sens", 0.0, 0.0, 92.0, 100, 400),
    ("baseline-ffd", BASELINE, "p99-sens", NAN, NAN, 70.0, 150, 400),
    ("baseline-paragon", BASELINE, "p99-sens", NAN, NAN, 99.0, 60, 400),
])


@pytest.mark.parametrize("today, point, within", [
    (120, "p99-sens-w0.3", True),   # the cheapest front point at or under today's 120 (p99 has 130)
    (100, "p99-sens-w1", True),     # w0.3 (110) is over; w1 and w3 tie, the first in sweep order wins
    (95, "p99-sens-w1", True),      # "do not exceed": equal counts
    (50, "p99-sens-w1", False),     # every optimizer front point is over: the one with the fewest (baseline-paragon is a policy)
])
def test_recommendation_rule(today, point, within):
    assert recommend(HAND, today) == Recommendation(point, within)
    assert "lowest TCO whose tasks at risk do not exceed today's" in RECOMMENDATION_RULE


def test_recommendation_skips_points_off_the_front_and_baseline_policies():
    # The no-new-risk point (92, 100) is within today's 100 but dominated: never recommended.
    assert recommend(HAND, 100).point != "p99-sens-no-new-risk"
    assert recommend(HAND, 1000).point == "p99"  # not baseline-ffd, the cheapest of all
    assert recommend(HAND.assign(pareto=HAND["kind"] == BASELINE), 100) is None
    # Fallback ties on tasks at risk go to the lower TCO.
    tie = _hand_table([("a", OPTIMIZER, "p99", NAN, NAN, 90.0, 95, 1), ("b", OPTIMIZER, "p99", NAN, NAN, 80.0, 120, 1),
                       ("c", OPTIMIZER, "p99", NAN, NAN, 85.0, 100, 1)])
    assert recommend(tie, 10).point == "a" and not recommend(tie, 10).within_today


def test_point_sentence_numbers():
    today = {"tco": 30_000.0, "tasks_at_risk": 3_100}
    assert point_sentence("P99 Sens w=0.3", 28_760.0, 400, 2_900, today, "need basis") == (
        "P99 Sens w=0.3: frees 1,240.0 cost units (4.1% of today's TCO) with 400 moves; tasks at risk 3,100 → 2,900 (need basis).")
    assert point_sentence("P99", 30_300.0, 12, 3_500, today, "host basis") == (
        "P99: costs 300 cost units more than today (1.0% of today's TCO) with 12 moves; tasks at risk 3,100 → 3,500 (host basis).")
    assert point_sentence("P99", 29_000.0, 5, 0, today, "not measured").endswith("with 5 moves; tasks at risk not measured.")


def test_front_sentences_one_per_distinct_point_cheapest_first():
    sentences = front_sentences(HAND, {"tco": 100.0, "tasks_at_risk": 100}, "need basis")
    assert sentences == [
        "P99 (`p99`): frees 20 cost units (20.0% of today's TCO) with 400 moves; tasks at risk 100 → 130 (need basis).",
        "P99 Sens w=0.3 (`p99-sens-w0.3`): frees 15 cost units (15.0% of today's TCO) with 400 moves; tasks at risk 100 → 110 (need basis).",
        "P99 Sens w=1, 3 (`p99-sens-w1`, `p99-sens-w3`: the same TCO, moves and tasks at risk): frees 10 cost units (10.0% of today's TCO) "
        "with 380 moves; tasks at risk 100 → 95 (need basis).",
    ]


def test_paper_sens_point_is_the_fewest_at_risk_weight_point():
    table = _hand_table([
        ("p99-sens-w0.3", OPTIMIZER, "p99-sens", 0.3, NAN, 85.0, 110, 400),
        ("p99-sens-w3", OPTIMIZER, "p99-sens", 3.0, NAN, 91.0, 95, 400),
        ("p99-sens-w10", OPTIMIZER, "p99-sens", 10.0, NAN, 90.0, 95, 400),   # ties w3 on tasks at risk, cheaper
        ("p99-sens-no-new-risk", OPTIMIZER, "p99-sens", 0.0, 0.0, 99.0, 40, 400),
        ("baseline-paragon", BASELINE, "p99-sens", NAN, NAN, 99.0, 30, 400),
    ])
    assert paper_sens_point(table)["point"] == "p99-sens-w10"
    assert paper_sens_point(table[table["point"] == "p99-sens-no-new-risk"]) is None


def test_paper_comparison_against_baseline_from_the_two_numbers():
    table = HAND.assign(hosts=[100, 60, 70, 80, 80, 90, 50, 95], frag_cpu=1.0, frag_mem=1.0)
    meta = {"options": {"rules": {"max_moves": 400}}, "current": {"hosts": 120, "tasks_at_risk": 100}, "n_tasks": 500, "yardstick": "p99-sens",
            "sensitivity_basis": "need", "sens_dims": ["cpu"]}
    by_type = {"I": {"tco_after": 10.0}, "II": {"tco_after": 20.0}}
    comparison = paper_comparison(table, meta, {p: {"by_type": by_type} for p in table["point"]})
    assert (comparison["reference"] == "baseline").all()
    sens = comparison[comparison["config"] == "p99-sens"].set_index("metric")
    assert (sens["subject"] == "p99-sens-w1").all()  # fewest tasks at risk (95) of the weight points; w1 before w3 on the tie
    assert sens.loc["tasks at risk", "value"] == 95 and sens.loc["tasks at risk", "reference_value"] == 100
    assert sens.loc["tasks at risk", "measured"] == pytest.approx(-0.05) and sens.loc["tasks at risk", "unit"] == "tasks at risk (need basis)"
    assert sens.loc["hosts used", "measured"] == pytest.approx(-0.20) and sens.loc["hosts used", "paper"] == 0.30
    assert sens.loc["hosts used", "comparison"] == "P99 Sens w=1 (`p99-sens-w1`) vs Baseline"


def test_unscored_tasks_are_counted_and_explained():
    text = unscored_text({"service": 2, "class": 5, "nearest-class": 1, "none": 2})
    assert text.startswith("2 of 10 tasks have no sensitivity score (no class of the trace has scores to lend)")
    assert "never put a host at risk" in text
    assert unscored_text({}) is None
    assert unscored_text({"service": 3, "class": 0, "nearest-class": 0, "none": 0}).startswith("0 of 3 tasks have no sensitivity score")


def test_report_opens_with_the_recommendation(sweep, sweep_report):
    text = sweep_report.markdown.read_text()
    assert text.split("\n## ")[1].startswith("Recommendation")
    current = sweep.meta["current"]
    row = sweep.table.set_index("point").loc[recommend(sweep.table, current["tasks_at_risk"]).point]
    freed = current["tco"] - row["tco"]
    line = next(line for line in text.splitlines() if line.startswith("Recommended: "))
    assert (f"(`{row.name}`): frees {fmt_number(freed)} cost units ({fmt_share(freed / current['tco'])} of today's TCO) "
            f"with {fmt_count(row['moves'])} moves; tasks at risk {fmt_count(current['tasks_at_risk'])} → "
            f"{fmt_count(row['tasks_at_risk'])} (need basis). Why: the cheapest point on the front") in line
    assert f"The rule: {RECOMMENDATION_RULE}" in text and "on the `need` basis" in text
    bullets = [line for line in text.split("\n## ")[1].splitlines() if line.startswith("- ")]
    front = sweep.table[(sweep.table["kind"] == OPTIMIZER) & sweep.table["pareto"]]
    assert len(bullets) == len(front.drop_duplicates(["tco", "moves", "tasks_at_risk"]))
    sources = {r["source"]: r["tasks"] for r in records(parse_html(sweep_report.html).tables["score_sources"])}
    assert sources == {k: fmt_count(v) for k, v in sweep.meta["score_sources"].items()}
    assert f"0 of {sweep.meta['n_tasks']} tasks have no sensitivity score" in text


def test_report_of_a_sweep_without_sensitivity_basis_or_with_unscored_tasks(sweep, tmp_path):
    copy = Path(shutil.copytree(sweep.path, tmp_path / "sweep"))
    meta = json.loads((copy / "sweep.json").read_text())
    meta["score_sources"] = {"service": 0, "class": 10, "nearest-class": 3, "none": 3}
    (copy / "sweep.json").write_text(json.dumps(meta))
    text = write_report(copy).markdown.read_text()
    assert "3 of 16 tasks have no sensitivity score" in text
    meta.update(sensitivity_basis=None, sens_dims=[], score_sources={})
    (copy / "sweep.json").write_text(json.dumps(meta))
    text = write_report(copy).markdown.read_text()
    assert "Tasks at risk are not measured" in text and "need basis" not in text and "tasks at risk not measured." in text


def test_plan_report_names_the_basis(sweep, tmp_path):
    text = write_report(sweep.path / "plans" / "p99-sens-w1", tmp_path / "r").markdown.read_text()
    assert "**Before and after (tasks at risk: need basis)**" in text and "on the `need` basis" in text
    text = write_report(sweep.path / "plans" / "p99", tmp_path / "r2").markdown.read_text()
    assert "Tasks at risk are not measured: configuration `p99` has no sensitivity dimensions" in text


# --- figures ---


def test_labels_do_not_overlap_in_a_crowded_cluster():
    rng = np.random.default_rng(0)
    anchors = np.vstack([200 + rng.uniform(0, 8, (12, 2)), np.column_stack([np.linspace(20, 380, 7), np.full(7, 40.0)])])
    sizes = np.array([[6.0 * len(str(i)) + 4, 9.0] for i in range(len(anchors))])
    offsets = place_labels(anchors, sizes, (400.0, 300.0), marker=4.0)
    centres = anchors + offsets
    boxes = np.hstack([centres - sizes / 2, centres + sizes / 2])
    assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= 400).all() and (boxes[:, 3] <= 300).all()
    for i in range(len(boxes)):
        for j in range(len(boxes)):
            markers_hit = (boxes[i, 0] < anchors[j, 0] + 4 and anchors[j, 0] - 4 < boxes[i, 2]
                           and boxes[i, 1] < anchors[j, 1] + 4 and anchors[j, 1] - 4 < boxes[i, 3])
            assert not markers_hit, (i, j)
            if i < j:
                assert not (boxes[i, 0] < boxes[j, 2] and boxes[j, 0] < boxes[i, 2] and boxes[i, 1] < boxes[j, 3] and boxes[j, 1] < boxes[i, 3]), (i, j)


def test_one_colour_per_configuration_and_policy():
    named = [colour_of(n) for n in ("baseline", "p99-cpu", "p99-mem", "p99", "p99-sens", "baseline-random", "baseline-least-loaded",
                                     "baseline-ffd", "baseline-paragon", "baseline-tarcil", "current")]
    assert len(set(named)) == len(named) == len(COLOURS)
    assert colour_of("my-preset") == colour_of("my-preset") in SPARE_COLOURS
    assert compact_numbers([6, 9, 7, 8, 12, 14, 15]) == "6-9,12,14,15"
