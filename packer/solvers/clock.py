"""When a search stops: at a wall-clock limit, or (deterministic) after a fixed amount of work.

A wall-clock limit makes a search depend on machine load: with the same seed, a busy
machine gets through fewer neighbourhoods and returns another plan. A deterministic
clock counts work instead (CP-SAT's deterministic time for each sub-solve, a fixed
charge per step of the greedy passes and per column-generation iteration), so a seed
reproduces the plan byte for byte under any load. Its unit is a nominal second, close
to a second of an idle 2-core machine. A wall-clock cap of :data:`WALL_CAP` times the
limit still applies; a search that reaches it is not reproducible and says so
(:attr:`SearchClock.capped`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

#: A deterministic search also stops after this many times its limit in wall-clock seconds.
WALL_CAP = 5.0


@dataclass
class SearchClock:
    """A search's time: ``limit`` seconds of wall clock, or of work when ``deterministic``."""

    limit: float
    deterministic: bool = False
    started: float = field(default_factory=time.perf_counter)
    work: float = 0.0

    def spend(self, units: float) -> None:
        """Charge ``units`` nominal seconds of work (counted only by a deterministic clock)."""
        self.work += units

    def wall(self) -> float:
        """Wall-clock seconds since the clock started."""
        return time.perf_counter() - self.started

    def elapsed(self) -> float:
        """Seconds used: work when deterministic, wall clock otherwise."""
        return self.work if self.deterministic else self.wall()

    def remaining(self) -> float:
        """Seconds left before the limit (0 when reached)."""
        return max(0.0, self.limit - self.elapsed())

    @property
    def capped(self) -> bool:
        """True when a deterministic search ran into its wall-clock cap (its result then depends on the machine)."""
        return self.deterministic and self.wall() > WALL_CAP * self.limit

    def expired(self) -> bool:
        """True once the limit (or a deterministic search's wall-clock cap) is reached."""
        return self.remaining() <= 0.0 or self.capped

    def part(self, seconds: float) -> "SearchClock":
        """A clock for a part of this search, of at most ``seconds`` (and no more than remains), counted the same way."""
        return SearchClock(min(seconds, self.remaining()), self.deterministic)
