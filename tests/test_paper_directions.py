"""The colocation paper's directions at a 400-move budget on a generated pool (issue 10): a slow end-to-end check.

A fresh 5,000-task paper-shaped trace (a seed nobody tuned on) is swept with the real
command; the sweep must reproduce the paper's qualitative findings
(:func:`packer.report.sweep.paper_directions`) and every plan it writes must pass the verifier.
"""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from packer.cli import cli
from packer.report.sweep import paper_directions, read_sweep
from packer.plan.verify import verify_plan


@pytest.mark.slow
def test_a_generated_pool_shows_the_papers_trade_off_at_400_moves(tmp_path):
    trace = tmp_path / "pool"
    made = CliRunner().invoke(cli, ["generate", "--tasks", "5000", "--hosts", "2432", "--days", "2", "--seed", "7", "--out", str(trace)])
    assert made.exit_code == 0, made.output
    out = tmp_path / "sweep"
    swept = CliRunner().invoke(cli, ["sweep", str(trace), "--max-moves", "400", "--time-limit", "15", "--no-baselines", "--out", str(out)])
    assert swept.exit_code == 0, swept.output
    sweep = read_sweep(out)
    assert sweep.meta["sensitivity_basis"] == "need"
    missed = [f"{c.name}: {c.detail}" for c in paper_directions(sweep) if not c.passed]
    assert not missed, missed
    for plan in sweep.table["plan"]:
        report = verify_plan(trace, out / plan)
        assert report.ok, (plan, [c for c in report.checks if not c.passed])
