"""A derived index (FAISS, the keyword index): a projection of the catalog, replayed from its
ops journal. What each provides, the names `ragd index --rebuild` knows them by, and the small
state file each keeps beside itself (its mark), written so a crash leaves the old or the new."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragd.daemon.stores.catalog import ChunkRow

# The derived indexes by role, as `ragd index --rebuild` and consistency checks name them.
# "whoosh" and "tantivy" name the keyword index's backends; both still select it.
INDEXES = ("faiss", "keyword")
_ALIASES = {"whoosh": "keyword", "tantivy": "keyword"}


def index_names(value: str) -> list[str]:
    """The indexes that ``value`` ("all", an index or a backend's name) stands for."""
    if value == "all":
        return list(INDEXES)
    name = _ALIASES.get(value, value)
    if name not in INDEXES:
        raise ValueError(f"{value!r} is not an index; use all, {', '.join(INDEXES)}")
    return [name]


class IndexStore(Protocol):
    """A projection of the catalog that applies journal ops idempotently."""

    name: str
    needs_vectors: bool

    @property
    def mark(self) -> int:
        """Sequence number of the last journal op applied (in memory)."""
        ...

    @property
    def persisted_mark(self) -> int:
        """Sequence number of the last journal op that is safely on disk."""
        ...

    def apply(self, rows: Sequence[ChunkRow], deletes: Sequence[int], mark: int,
              vectors: Mapping[int, np.ndarray]) -> None: ...

    def save(self) -> None: ...

    def ids(self) -> set[int]: ...

    def reset(self, fingerprint: str) -> None: ...

    def close(self) -> None: ...


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write, fsync, rename: a reader sees the old file or the new one, never half of one."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make a rename durable (POSIX); a no-op where directories cannot be opened."""
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
