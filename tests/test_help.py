"""Help that teaches: every command's --help is whole (nothing cut off), with no double negatives."""
from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from packer.cli import cli


def commands(group: click.Group = cli, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The argument paths of the group and every command under it (``()``, ``("solve",)``, ``("import", "openb")``, ...)."""
    found = [path]
    for name, command in group.commands.items():
        found += commands(command, (*path, name)) if isinstance(command, click.Group) else [(*path, name)]
    return found


@pytest.mark.parametrize("width", [80, 100])  # a plain terminal, and the width the CLI caps help at (max_content_width)
@pytest.mark.parametrize("path", commands(), ids=lambda path: " ".join(path) or "packer")
def test_help_is_whole(path: tuple[str, ...], width: int) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=width)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "…" not in text and "--no-no-" not in text
    # click ends a description it had to shorten with "...": only the usage line's "[ARGS]..." may end so.
    cut = [line for line in text.splitlines() if line.rstrip().endswith("...") and not line.startswith("Usage:")]
    assert not cut, cut


def test_old_flag_spellings_still_work(tmp_path) -> None:
    """Renamed flags keep their old spelling as a hidden alias (scripts keep working)."""
    from conftest import tiny_tables, write_tables

    trace = write_tables(tmp_path / "trace", *tiny_tables())
    result = CliRunner().invoke(cli, ["profile", str(trace), "--skip-invalid-usage", "--out", str(tmp_path / "p.parquet")])
    assert result.exit_code == 0, result.output
    assert "--skip-invalid-usage" not in CliRunner().invoke(cli, ["profile", "--help"]).output
    assert "--no-no-new-risk-point" not in CliRunner().invoke(cli, ["sweep", "--help"]).output
