"""Errors a user can fix, with the file, column and rows that caused them.

The CLI turns an :class:`InputError` into a message and exit code 2; anything else
is a bug and keeps its traceback.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

MAX_ROWS_SHOWN = 5


@dataclass(frozen=True)
class Problem:
    """One validation failure: ``count`` rows of ``file`` break a rule on ``column`` (a key, in a TOML file).

    ``rows`` holds up to :data:`MAX_ROWS_SHOWN` examples, each a short description
    such as ``"row 17 (task_id='t17', cpu=-1.0)"``. Row numbers are 0-based
    positions in the file (or in the dataset, for partitioned usage).
    """

    file: str
    column: str
    message: str
    count: int = 1
    rows: tuple[str, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        # A TOML file (fleet catalog, presets, constraints) has keys where a table has columns.
        kind = "key" if self.file.endswith(".toml") else "column"
        where = f"{self.file}: {kind} '{self.column}'" if self.column else self.file
        text = f"{where}: {self.message}" if where else self.message
        if self.count > 1 or self.rows:
            text += f" ({self.count} row{'s' if self.count != 1 else ''})"
        if self.rows:
            more = ", ..." if self.count > len(self.rows) else ""
            text += "; first: " + ", ".join(self.rows) + more
        return text


class InputError(Exception):
    """Bad input from the user: a file, flag or model that cannot be used as given."""

    exit_code = 2

    def __init__(self, problems: Sequence[Problem] | str):
        if isinstance(problems, str):
            problems = [Problem(file="", column="", message=problems, count=0)]
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class InfeasibleError(Exception):
    """The instance has no valid placement; ``tasks`` names the tasks that fit nowhere."""

    exit_code = 3

    def __init__(self, message: str, tasks: Sequence[str] = ()):
        self.tasks = list(tasks)
        super().__init__(message)


class NoPlanError(Exception):
    """The solver found no valid placement within its time limit (exact solvers only; the others always return one)."""

    exit_code = 4
