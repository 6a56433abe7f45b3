"""A real daemon under hostile input (issue 28): its peak memory, how long a note saved during a
case takes to be searchable, and what the catalog says about each hostile source."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon_proc import DaemonProc, wait_for

GB = 1 << 30
SAVE_LIMIT_S = 2.0


@contextmanager
def environment(**values: str) -> Iterator[None]:
    """``os.environ`` with ``values`` set (DaemonProc passes os.environ to the daemon)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass
class Hostile:
    """A running daemon, the vault its notes are saved in, its data folder, and the folder of
    the collection under attack (a mail folder, a Calibre library)."""

    daemon: DaemonProc
    vault: Path
    home: Path
    root: Path
    saves: int = 0

    @property
    def pid(self) -> int:
        return int(self.daemon.call("status")["pid"])

    def peak_rss(self) -> int:
        """The daemon's peak resident memory so far (VmHWM), in bytes."""
        for line in Path(f"/proc/{self.pid}/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM in /proc/<pid>/status")

    def busy_with(self, collection: str, timeout: float = 30) -> None:
        """Wait until the writer works on ``collection``."""
        def working() -> bool:
            current = self.daemon.call("status", timeout=10).get("current") or {}
            return current.get("collection") == collection

        wait_for(working, timeout, f"the daemon to work on {collection}", interval=0.02)

    def settle(self, timeout: float = 120) -> None:
        """Wait until the writer has nothing to do (the embedding may go on): a case's commit
        and its keyword projection are over before the next case begins."""
        def quiet() -> bool:
            st = self.daemon.call("status", timeout=10)
            return not st.get("current") and not st["queue"]

        wait_for(quiet, timeout, "the writer to be done", interval=0.1)

    def save_note(self) -> float:
        """Save a new note with a word of its own; seconds until a keyword search finds it.
        Fails past ``SAVE_LIMIT_S``."""
        self.saves += 1
        word = f"zqv{self.saves}savedword"
        t0 = time.monotonic()
        (self.vault / "Inbox").mkdir(exist_ok=True)
        (self.vault / "Inbox" / f"Saved {self.saves}.md").write_text(
            f"# Saved {self.saves}\n\nA {word} note saved during a hostile case.\n",
            encoding="utf-8")

        def found() -> bool:
            hits = self.daemon.call("search", {"query": word, "mode": "keyword", "top_k": 3},
                                    timeout=30)["results"]
            return bool(hits)

        wait_for(found, SAVE_LIMIT_S, f"note {self.saves} to be searchable", interval=0.02)
        return time.monotonic() - t0

    def sources(self, where: str = "1", *args: Any) -> list[dict[str, Any]]:
        """Rows of the catalog's sources (read-only)."""
        db = sqlite3.connect(f"file:{self.home / 'data' / 'catalog.sqlite'}?mode=ro", uri=True,
                             timeout=10)
        db.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in db.execute(
                "SELECT path, status, skip_code, warnings, container, locator FROM sources"
                f" WHERE {where}", args)]
        finally:
            db.close()

    def source(self, path: str, timeout: float = 120) -> dict[str, Any]:
        """The catalog row of ``path`` (a message key), once it is there."""
        rows = wait_for(lambda: self.sources("path = ?", path), timeout, f"{path} in the catalog",
                        interval=0.1)
        return rows[0]

    def containers(self) -> dict[str, tuple[int, int]]:
        db = sqlite3.connect(f"file:{self.home / 'data' / 'catalog.sqlite'}?mode=ro", uri=True,
                             timeout=10)
        try:
            return {p: (s, r) for p, s, r in db.execute(
                "SELECT path, size, read_to FROM containers")}
        finally:
            db.close()

    def keyword(self, query: str) -> list[dict[str, Any]]:
        return list(self.daemon.call("search", {"query": query, "mode": "keyword",
                                                "top_k": 5})["results"])
