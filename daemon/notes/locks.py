"""One writer per path: the lock every vault write holds across its check and its write
(decision 0045).

The daemon serves any number of MCP clients at once, each call on a worker thread. Without a
lock, two calls could both see a note as it was (or absent), both pass the ``if_match`` check
and both write: one text lost. Every write therefore holds the lock of each real path it
reads or changes, from the read that the check compares to until its bytes are in place.

- **Keys** are the real path, Unicode-normalised (NFC) and case-folded. Folding on a
  case-sensitive file system only makes ``a.md`` and ``A.md`` wait for each other; not folding
  on a case-insensitive one (macOS, Windows) would let two writers into one file.
- **Several paths** (a rename's source and target) are taken in sorted key order, all before
  the step starts and released together: two renames of crossed pairs cannot deadlock, and no
  step ever asks for a lock while holding another it took earlier.
- Locks are in-process: one daemon per user owns every write (writes from outside ragd, such
  as Obsidian's own saves, are caught by the etag compared with the disk inside the step).
  A key's lock lives while someone holds or waits for it, so the table stays small.
"""

from __future__ import annotations

import os
import threading
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


def lock_key(real: str) -> str:
    """The key of a real path: one per file, whatever case or Unicode form names it."""
    return unicodedata.normalize("NFC", os.path.normcase(real)).casefold()


class PathLocks:
    """Named locks, created on first use and dropped when nobody holds or waits for them."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    def _take(self, key: str) -> threading.Lock:
        with self._guard:
            lock, users = self._locks.get(key, (None, 0))
            if lock is None:
                lock = threading.Lock()
            self._locks[key] = (lock, users + 1)
        return lock

    def _give_back(self, key: str) -> None:
        with self._guard:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    @contextmanager
    def hold(self, reals: Iterable[str]) -> Iterator[None]:
        """Hold the locks of ``reals`` (real paths) for the block, taken in sorted key order."""
        keys = sorted({lock_key(r) for r in reals})
        taken: list[tuple[str, threading.Lock]] = []
        try:
            for key in keys:
                lock = self._take(key)
                try:
                    lock.acquire()
                except BaseException:  # interrupted while waiting: never held, give it back
                    self._give_back(key)
                    raise
                taken.append((key, lock))
            yield
        finally:
            for key, lock in reversed(taken):
                lock.release()
                self._give_back(key)

    def held(self) -> int:
        """How many keys are held or waited for now (status, tests)."""
        with self._guard:
            return len(self._locks)


VAULT_LOCKS = PathLocks()  # the daemon's one table: every vault write goes through it
