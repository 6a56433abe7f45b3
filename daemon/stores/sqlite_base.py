"""What the catalog and the concept store share: one SQLite connection behind one lock."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class LockedConnection:
    """One connection used by several threads, one at a time (``_lock``)."""

    def __init__(self, path: Path) -> None:
        """Open ``path`` (its folder made) in WAL mode, rows as ``sqlite3.Row``."""
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write: everything inside commits together or not at all."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.rollback()
                raise
            self._db.commit()

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, for a few reads in a row (the note tools, decision 0028)."""
        with self._lock:
            yield self._db
