"""The `ragd index` progress bar: it moves with every file read, then every embedded batch.

Sources are committed as they are read, and their chunks embedded afterwards (decision 0022):
the bar counts files while reading, then chunks embedded of the known backlog (``embed``
events). Events that carry chunks embedded while files are still read (a daemon's) keep the
estimate below.

Indexer progress events carry files done of files planned and chunks embedded so far, one
event per embedded slice. How many chunks remain is not known until the files are read, so the
bar counts chunks embedded against an estimate: chunks per file so far (taken when a group of
files is committed) times the files left. The estimate is held between groups, so every batch
moves the bar; it never moves back, and it reaches 100 % exactly when the last file is done.
Before the first group is committed the total is unknown and the bar shows the count alone;
while nothing is embedded (unchanged files, vectors from the cache) it counts files.

Light: tqdm is imported when a bar is first drawn.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BarPosition:
    """Where the bar stands: ``n`` of ``total`` (None: not known yet) ``unit``s."""

    n: int
    total: int | None
    unit: str  # "chunk" or "file"


class EmbedProgress:
    """The pure part of the bar: one collection's progress events in, bar positions out."""

    def __init__(self) -> None:
        self._per_file: float | None = None  # chunks embedded per file, at the last group
        self._done = 0
        self._fraction = 0.0

    def update(self, done: int, total: int, embedded: int, *,
               final: bool = False) -> BarPosition:
        """The position after an event: ``done`` of ``total`` files, ``embedded`` chunks;
        ``final`` (or ``done == total``) means the collection is finished."""
        final = final or (total > 0 and done >= total)
        if embedded <= 0:
            return BarPosition(total if final else done, total, "file")
        if final:
            self._fraction = 1.0
            return BarPosition(embedded, embedded, "chunk")
        if done > self._done:  # a group was committed: re-estimate from every file so far
            self._done = done
            self._per_file = embedded / done
        if self._per_file is None:
            return BarPosition(embedded, None, "chunk")
        estimate = embedded + round(self._per_file * max(0, total - done))
        if self._fraction > 0 and embedded / estimate < self._fraction:
            estimate = int(embedded / self._fraction)  # a higher rate: slow down, never back
        estimate = max(estimate, embedded + 1)  # 100 % only when the last file is done
        self._fraction = embedded / estimate
        return BarPosition(embedded, estimate, "chunk")


class IndexBar:
    """A tqdm bar on stderr (so JSON on stdout stays clean), one per collection, fed with
    indexer :class:`~ragd.daemon.indexer.pipeline.Progress` objects or the daemon's progress events.
    Safe to feed from one thread and close from another."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: Any = None
        self._model = EmbedProgress()
        self._collection: str | None = None
        self._last: tuple[int, int, int] = (0, 0, 0)
        self._lock = threading.Lock()
        self._closed = False

    def __call__(self, p: Any) -> None:
        """The in-process indexer's ``on_progress``."""
        self.show(p.collection, p.phase, p.done, p.total, p.chunks_embedded)

    def event(self, event: dict[str, Any]) -> None:
        """One daemon ``progress`` event (other events are ignored)."""
        if event.get("phase") in ("index", "embed", "done") and event.get("collection"):
            self.show(str(event["collection"]), str(event["phase"]),
                      int(event.get("done") or 0), int(event.get("total") or 0),
                      int(event.get("embedded") or 0))

    def show(self, collection: str, phase: str, done: int, total: int, embedded: int) -> None:
        if not self.enabled or phase == "scan":
            return
        with self._lock:
            if self._closed:
                return
            if self._bar is not None and collection != self._collection:
                self._close_bar(complete=True)
            if self._bar is None:
                if total <= 0 and embedded <= 0:
                    return  # nothing to read: no bar
                self._open(collection)
            if phase == "embed":  # after reading: chunks embedded of the known backlog
                self._draw_chunks(done, total)
            else:
                self._draw(done, total, embedded, final=phase == "done")
            if phase == "done":
                self._close_bar(complete=False)

    def close(self, *, complete: bool = False) -> None:
        """Close the bar; with ``complete`` (the work succeeded), draw it at 100 % first.
        Later events are ignored."""
        with self._lock:
            self._closed = True
            self._close_bar(complete=complete)

    def _open(self, collection: str) -> None:
        from tqdm import tqdm

        self._collection = collection
        self._model = EmbedProgress()
        self._bar = tqdm(total=None, desc=f"indexing {collection}", unit="file",
                         file=sys.stderr, dynamic_ncols=True)

    def _draw(self, done: int, total: int, embedded: int, final: bool) -> None:
        self._last = (done, total, embedded)
        pos = self._model.update(done, total, embedded, final=final)
        bar = self._bar
        bar.unit = pos.unit
        bar.total = pos.total
        bar.n = pos.n
        bar.set_postfix_str(f"files {min(done, total) if total else done:,}/{total:,}",
                            refresh=False)
        bar.refresh()

    def _draw_chunks(self, done: int, total: int) -> None:
        bar = self._bar
        bar.unit, bar.total, bar.n = "chunk", max(total, done), done
        bar.set_postfix_str("embedding", refresh=False)
        bar.refresh()

    def _close_bar(self, *, complete: bool) -> None:
        if self._bar is None:
            return
        if complete:
            done, total, embedded = self._last
            self._draw(max(done, total), total, embedded, final=True)
        self._bar.close()
        self._bar = None
        self._collection = None
