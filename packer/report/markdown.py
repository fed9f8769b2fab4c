"""Markdown pipe tables, rendered one way for every report packer writes.

Plan reports, move lists, characterization reports and review reports all call
:func:`markdown_table`. This module imports nothing from packer, so the modules that
:mod:`packer.report.report` itself imports (:mod:`packer.plan`, :mod:`packer.characterization`)
can use it without an import cycle.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

#: The separator cell of each alignment letter (``l`` is Markdown's default, left).
_RULES = {"l": "---", "r": "---:", "c": ":---:"}


def cell_text(value: Any) -> str:
    """A cell as it is shown by default: ``str(value)``, empty for ``None``."""
    return "" if value is None else str(value)


def _escaped(text: str) -> str:
    # A pipe would end the cell and a newline the row.
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(columns: Sequence[Any], rows: Iterable[Sequence[Any]], align: str | None = None,
                   fmt: Callable[[Any], str] = cell_text) -> str:
    """A Markdown pipe table (no trailing newline): a header row, a separator row, one line per row.

    ``columns``: the header cells; ``rows``: sequences of cells, one per column;
    ``align``: one letter per column, ``l`` (left, the default), ``r`` (right) or
    ``c`` (centred); ``fmt`` turns a body cell into text (:func:`cell_text` by default).
    Pipes and newlines in cells are escaped.
    """
    align = align or "l" * len(columns)
    if len(align) != len(columns) or set(align) - set(_RULES):
        raise ValueError(f"align needs one of {''.join(_RULES)} per column ({len(columns)}), got {align!r}")
    lines = ["| " + " | ".join(_escaped(str(c)) for c in columns) + " |",
             "|" + "|".join(_RULES[a] for a in align) + "|"]
    lines += ["| " + " | ".join(_escaped(fmt(c)) for c in row) + " |" for row in rows]
    return "\n".join(lines)
