"""What an importer did: counts of what it read, wrote, skipped and dropped."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from packer.errors import Problem


@dataclass(frozen=True)
class ImportSummary:
    """Counts of one import.

    ``records``: input records read (Bitbrains: VM files; openb: pods in the pod
    list). ``tasks``: tasks written. ``hosts_per_arch``: hosts written per
    architecture. ``usage_rows``: usage samples written (0 for a requests-only
    trace). ``skipped``: invalid input rows dropped under ``skip_invalid``, one
    :class:`Problem` per file, column and reason (a row with several problems is
    counted under each); ``skipped_rows`` counts each dropped row once.
    ``dropped``: tasks left out because they fit no host, with the reason.
    ``filtered``: records left out on purpose by an option (e.g. a pod phase filter);
    ``filtered_reason`` says which.
    Importers of cluster traces (Google 2019, Alibaba 2018) also drop, with the
    reason, tasks whose machine is unknown at the snapshot, and list samples they
    leave out as documented (e.g. Alibaba's -1/101 markers) under ``skipped``.
    ``merged_samples``: duplicate samples (same task and timestamp) merged into one.
    """

    source: Path
    out: Path
    records: int
    tasks: int
    hosts_per_arch: dict[str, int]
    usage_rows: int = 0
    skipped_rows: int = 0
    skipped: tuple[Problem, ...] = ()
    dropped: dict[str, str] = field(default_factory=dict)
    filtered: int = 0
    filtered_reason: str = "by --phase"
    merged_samples: int = 0

    @property
    def hosts(self) -> int:
        return sum(self.hosts_per_arch.values())
