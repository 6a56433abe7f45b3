"""The daemon's embedding thread: vectors for what the writer has committed (decision 0022).

The writer reads, chunks and commits; a committed source is keyword-searchable at once, and its
chunks wait in the catalog's embedding backlog. This thread embeds them a small slice at a
time, so that reading (and converting, in the worker process) runs while the model embeds, and
so that it can step aside between slices: while the writer handles small work (a saved note),
or while indexing is paused. Semantic search reaches a chunk as soon as its slice is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ragd.daemon.indexer.pipeline import Indexer
from ragd.daemon.indexer.timings import EMBEDDING_TAG
from ragd.daemon.runtime.background import BackgroundThread

log = logging.getLogger(__name__)

SLICE = 16  # chunks per slice: ~0.5 s of int8 embedding on two cores, the longest step aside
IDLE_WAIT_S = 5.0  # a wake-up is sent on every commit; this is only a safety net
ERROR_WAIT_S = 10.0


class EmbeddingThread(BackgroundThread):
    """Drains the embedding backlog in the background; ``embedded`` counts its chunks."""

    def __init__(self, indexer: Indexer, *, hold: Callable[[], bool],
                 on_slice: Callable[[], None] = lambda: None) -> None:
        """``hold`` says when to wait between slices (paused, or small work running)."""
        super().__init__("ragd-embed")
        self.indexer = indexer
        self.hold = hold
        self.on_slice = on_slice
        self.embedded = 0

    def start(self) -> None:
        self.indexer.background = True
        self.indexer.on_backlog = self.wake
        self.indexer.refresh_backlog()
        super().start()

    def _run(self) -> None:
        self.indexer.spans.tag_thread(EMBEDDING_TAG)
        while not self._stop.is_set():
            if self.hold():
                # Not _wake.wait: every commit sets it, and a set event made this loop spin
                # (taking the queue's lock and the GIL) for as long as small work ran.
                self._stop.wait(0.05)
                continue
            self._wake.clear()  # before looking: a commit meanwhile wakes the next wait
            try:
                n = self.indexer.embed_some(SLICE)
            except Exception:
                log.exception("embedding the backlog failed; trying again in %.0f s",
                              ERROR_WAIT_S)
                self._stop.wait(ERROR_WAIT_S)
                continue
            if n:
                self.embedded += n
                self.on_slice()
            else:
                self._wake.wait(IDLE_WAIT_S)
