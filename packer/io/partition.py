"""Hash-partition rows by an integer key into spill files, to read back one partition at a time.

Used to group a usage table that is not stored by task (public traces are sorted
by time) in one pass over the input: each input batch is split by a hash of the
key (:func:`partition_of`) and written as one Arrow IPC file holding one record batch per partition
(empty ones included), so at most one spill file is open at a time whatever the
number of partitions. Partition ``k`` is read back by taking record batch ``k`` of
every spill file; its rows keep their input order.

Keys are known to lie in ``0..keys-1`` (task codes), so each key's partition is looked
up in a table rather than hashed per row, and where no partition has more than 65,536
keys a row's key is spilled as its 16-bit rank within its partition (2 bytes instead
of 4 or 8) and mapped back on reading.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

#: Knuth's multiplicative hash constant (2^32 / golden ratio): spreads consecutive keys over the partitions.
_GOLDEN = np.uint32(2654435761)


def partition_of(key: np.ndarray, parts: int) -> np.ndarray:
    """The partition (0..parts-1) of each non-negative integer ``key``, as uint16 (``parts`` <= 65536)."""
    mixed = key.astype(np.uint32) * _GOLDEN  # wraps modulo 2^32
    return ((mixed.astype(np.uint64) * np.uint64(parts)) >> np.uint64(32)).astype(np.uint16)


class SpillError(Exception):
    """Writing a spill file failed (no room left, no permission); ``args[0]`` is the ``OSError``."""


class Partitions:
    """Spill files in ``folder`` (which the caller creates and removes) for ``parts`` partitions by the int ``key`` column."""

    def __init__(self, folder: Path, parts: int, key: str, keys: int) -> None:
        """``keys``: the key column's values are integers in ``0..keys-1``."""
        if not 1 <= parts <= 1 << 16:
            raise ValueError(f"parts must be 1..65536, got {parts}")
        self.folder, self.parts, self.key, self.keys = Path(folder), parts, key, keys
        self.files: list[Path] = []
        self._part = partition_of(np.arange(keys), parts)
        # The keys of each partition, ascending; a key's rank among them is what is spilled where ranks fit 16 bits.
        order = np.argsort(self._part, kind="stable").astype(np.int32 if keys <= 1 << 31 else np.int64)
        self._members = np.split(order, np.cumsum(np.bincount(self._part, minlength=parts))[:-1])
        self._rank: np.ndarray | None = None
        if max(map(len, self._members)) <= 1 << 16:
            self._rank = np.empty(keys, dtype=np.uint16)
            self._rank[order] = np.concatenate([np.arange(len(m)) for m in self._members]).astype(np.uint16)

    def write(self, columns: dict[str, np.ndarray]) -> None:
        """Spill one batch: equal-length NumPy arrays by column name, ``columns[self.key]`` the partition key
        (integers in ``0..keys-1``, else :class:`ValueError`). Raises :class:`SpillError` if the file cannot be written."""
        key = columns[self.key]
        if len(key) and (key.min() < 0 or key.max() >= self.keys):
            raise ValueError(f"{self.key} outside 0..{self.keys - 1}")
        part = self._part[key]
        order = np.argsort(part, kind="stable")  # radix sort on uint16; keeps input order within a partition
        ends = np.cumsum(np.bincount(part, minlength=self.parts))
        if self._rank is not None:
            columns = {**columns, self.key: self._rank[key]}
        # from_arrays wraps the NumPy buffers; Arrow's take then reuses its memory pool's pages: fewer page faults than NumPy's.
        batch = pa.RecordBatch.from_arrays([pa.array(v) for v in columns.values()], names=list(columns)).take(pa.array(order))
        path = self.folder / f"spill-{len(self.files):06d}.arrow"
        try:
            with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as writer:
                start = 0
                for end in ends:
                    writer.write_batch(batch.slice(start, int(end) - start))
                    start = int(end)
        except OSError as exc:
            raise SpillError(exc) from exc
        self.files.append(path)

    def read(self, k: int) -> dict[str, np.ndarray]:
        """Partition ``k``'s rows in input order, as arrays by column name (after at least one :meth:`write`)."""
        pieces = []
        for path in self.files:
            with pa.OSFile(str(path)) as source:  # reads into memory: nothing keeps the file open
                pieces.append(pa.ipc.open_file(source).get_batch(k))
        # Concatenated column by column: files may differ in a column's dtype (NumPy promotes).
        columns = {name: np.concatenate([piece.column(name).to_numpy() for piece in pieces]) for name in pieces[0].schema.names}
        if self._rank is not None:
            columns[self.key] = self._members[k][columns[self.key]]
        return columns
