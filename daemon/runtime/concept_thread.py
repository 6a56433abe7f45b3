"""The daemon's concept thread: analyses long documents after they are indexed (decision 0033).

A document is analysed as soon as its own vectors are all in (issue 37), while the rest of a
library is still read and embedded: the thread gives way only to what a user waits for (a
pause, a saved note queued or running, a user's own edit waiting for its vectors) and to the
battery gate that holds bulk work (decision 0044), and it checks again between every step of a
document (each batch of phrases it embeds), so a note saved during an analysis waits at most
one step. A pass runs when the catalog changed (its ops journal moved on) since the last one:
at most every BUSY_PASS_S while indexing goes on. Categories are re-clustered after a pass
that changed something, at most every RECLUSTER_S while indexing goes on, and at once when
it is over.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any

from ragd.daemon.concepts.analysis import Analyser, Settings, open_catalog_readonly
from ragd.daemon.runtime.background import BackgroundThread
from ragd.daemon.runtime.surface import Service
from ragd.daemon.stores.concepts import ConceptStore

log = logging.getLogger(__name__)

POLL_S = 1.0
HOLD_POLL_S = 0.05
ERROR_WAIT_S = 30.0
# While indexing goes on the catalog changes with every commit: a pass (which lists the
# eligible documents, ~0.1 s at 100k sources) at most this often, and the categories (which
# every analysed document changes) re-clustered at most this often.
BUSY_PASS_S = 10.0
RECLUSTER_S = 60.0


class Stopping(Exception):
    """The daemon is stopping: the pass gives up (the next start picks the work up)."""


class ConceptThread(BackgroundThread):
    """Runs :class:`Analyser` passes in the background; ``passes`` counts the finished ones."""

    def __init__(self, d: Service, store: ConceptStore, settings: Settings) -> None:
        super().__init__("ragd-concepts")
        self.d = d
        self.store = store
        self.analyser = Analyser(d.paths.catalog_path, store, d.app.embedder, settings,
                                 pause=self._pause)
        self.passes = 0
        self.busy = False
        self.held_s = 0.0  # time spent giving way, for the bench
        self.waiting = 0  # documents to analyse, as the last pass left them
        self._seen: int | None = None
        self._last_pass = 0.0
        self._stale = False  # documents analysed or removed since the last re-clustering
        self._last_cluster = 0.0

    def hold(self) -> bool:
        """Give way to what the user may be waiting for, and to the battery gate."""
        d = self.d
        if self._stop.is_set() or d._stop.is_set():
            return True
        if d.queue.paused or d.queue.small_waiting() or d.queue.bulk_held():
            return True
        # A user's own edit waiting for its vectors has the cores, unless they are paused.
        return not d.embedding_paused and d.app.catalog.backlog_urgent()

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
        """Passes, whether one runs now, the documents analysed and those still to come."""
        return {"passes": self.passes, "busy": self.busy,
                "analysed_total": self.analyser.analysed_total,
                "last_pass": self.analyser.last_pass, "documents": self.store.doc_count(),
                "waiting": self.waiting}

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(POLL_S)
            self._wake.clear()
            if self._stop.is_set() or self.hold():
                continue
            try:
                self.busy = True
                self._step(indexing=bool(self.d.indexing()["active"]))
            except Stopping:
                return
            except Exception:
                log.exception("concept analysis failed; trying again in %.0f s", ERROR_WAIT_S)
                self._stop.wait(ERROR_WAIT_S)
            finally:
                self.busy = False

    def _step(self, indexing: bool) -> None:
        """A pass if the catalog changed (at most every BUSY_PASS_S while ``indexing``), then
        the categories if they are stale (at most every RECLUSTER_S while ``indexing``)."""
        now = time.monotonic()
        mark = self._catalog_mark()
        if mark != self._seen and not (indexing and now - self._last_pass < BUSY_PASS_S):
            done = self.analyser.run_pass(recluster=False)
            self._seen, self._last_pass = mark, time.monotonic()
            self.waiting = int(done["waiting"])
            self._stale = self._stale or bool(done["analysed"] or done["removed"])
            if not self._stale:
                self.passes += 1
        if self._stale and not (indexing and now - self._last_cluster < RECLUSTER_S):
            self.analyser.recluster()
            self._stale, self._last_cluster = False, time.monotonic()
            self.passes += 1


def start_concepts(d: Service) -> ConceptThread | None:
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
