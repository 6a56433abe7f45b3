"""What the catalog and the concept store share: one SQLite connection behind one lock."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class LockedConnection:
    """One connection used by several threads, one at a time (``_lock``); subclasses open
    ``_db`` and create ``_lock`` in their ``__init__``."""

    _db: sqlite3.Connection
    _lock: threading.Lock | threading.RLock

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
