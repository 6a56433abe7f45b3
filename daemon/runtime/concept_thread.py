"""The daemon's concept thread: analyses long documents after they are indexed (decision 0033).

It runs only when nothing else wants the cores: it holds while the embedding thread would
(paused, a saved note queued or running), while any indexing job runs or waits, and while
chunks wait for their vectors, and it checks again between every step of a document (each
batch of phrases it embeds), so a note saved during the analysis of a library waits at most
one step. A pass runs when the catalog changed (its ops journal moved on) since the last one.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import TYPE_CHECKING, Any

from ragd.daemon.concepts.analysis import Analyser, Settings, open_catalog_readonly
from ragd.daemon.runtime.background import BackgroundThread
from ragd.daemon.stores.concepts import ConceptStore

if TYPE_CHECKING:
    from ragd.daemon.runtime.service import Daemon

log = logging.getLogger(__name__)

POLL_S = 1.0
HOLD_POLL_S = 0.05
ERROR_WAIT_S = 30.0


class Stopping(Exception):
    """The daemon is stopping: the pass gives up (the next start picks the work up)."""


class ConceptThread(BackgroundThread):
    """Runs :class:`Analyser` passes in the background; ``passes`` counts the finished ones."""

    def __init__(self, d: Daemon, store: ConceptStore, settings: Settings) -> None:
        super().__init__("ragd-concepts")
        self.d = d
        self.store = store
        self.analyser = Analyser(d.paths.catalog_path, store, d.app.embedder, settings,
                                 pause=self._pause)
        self.passes = 0
        self.busy = False
        self.held_s = 0.0  # time spent giving way, for the bench
        self._seen: int | None = None

    def hold(self) -> bool:
        """Give way to everything the user may be waiting for."""
        d = self.d
        if self._stop.is_set() or d._stop.is_set():
            return True
        if d.queue.paused or d.queue.running is not None or d.queue.remaining():
            return True
        return bool(d.app.indexer.backlog.chunks) or d._hold_embedding()

    def _pause(self) -> None:
        started = time.monotonic()
        while self.hold():
            if self._stop.is_set() or self.d._stop.is_set():
                raise Stopping
            self._stop.wait(HOLD_POLL_S)
        self.held_s += time.monotonic() - started

    def _catalog_mark(self) -> int:
        db = open_catalog_readonly(self.d.paths.catalog_path)
        try:
            row = db.execute("SELECT seq FROM sqlite_sequence WHERE name='ops'").fetchone()
        except sqlite3.OperationalError:
            row = None
        finally:
            db.close()
        return int(row[0]) if row else 0

    def status(self) -> dict[str, Any]:
        return {"passes": self.passes, "busy": self.busy,
                "analysed_total": self.analyser.analysed_total,
                "last_pass": self.analyser.last_pass, "documents": self.store.doc_count()}

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(POLL_S)
            self._wake.clear()
            if self._stop.is_set() or self.hold():
                continue
            try:
                mark = self._catalog_mark()
                if mark == self._seen:
                    continue
                self.busy = True
                self.analyser.run_pass()
                self._seen = mark
                self.passes += 1
            except Stopping:
                return
            except Exception:
                log.exception("concept analysis failed; trying again in %.0f s", ERROR_WAIT_S)
                self._stop.wait(ERROR_WAIT_S)
            finally:
                self.busy = False


def start_concepts(d: Daemon) -> ConceptThread | None:
    """Open the concept store and start the thread (None when ``[concepts] enabled`` is
    false); both are closed with the app."""
    cfg = d.config.concepts
    if not cfg.enabled:
        return None
    store = ConceptStore(d.paths.data_dir / "concepts.sqlite")
    thread = ConceptThread(d, store, Settings(min_note_chars=cfg.min_note_chars,
                                              concepts_per_doc=cfg.concepts_per_doc))

    def close() -> None:
        thread.stop()
        store.close()

    d.app.on_close.append(close)
    thread.start()
    return thread
