"""The embedding backlog worked off: vectors for the chunks committed without one.

A group of sources is committed as soon as it is read, keyword-searchable at once; its chunks
whose text has no cached vector wait in the catalog's backlog (``ragd.daemon.stores.backlog``,
decision 0022). The daemon's embedding thread takes them a slice at a time (``embed_some``);
the CLI and the tests, with no such thread, embed the whole backlog before a sync returns
(``embed_backlog``). The vectors reach the vector index by the journal catch-up.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ragd.daemon.errors import Interrupted
from ragd.daemon.indexer.catchup import CatchUp
from ragd.daemon.indexer.report import IndexReport, Progress
from ragd.daemon.stores.backlog import Counts
from ragd.daemon.stores.catalog import Collection, text_hash

EMBED_SLICE = 64  # ~4 s of embedding on two cores


class EmbeddingBacklog(CatchUp):
    """The embedding of ``Indexer`` (``pipeline``): a part of it, using its attributes."""

    backlog: Counts
    on_progress: Callable[[Progress], None]
    _turn: int | None

    def refresh_backlog(self) -> Counts:
        self.backlog = self.catalog.backlog_counts()
        return self.backlog

    def embed_some(self, limit: int = EMBED_SLICE) -> int:
        """Embed the next ``limit`` backlog chunks (cache first), store their vectors and
        project them to the vector index. Returns how many chunks left the backlog."""
        todo = self.catalog.backlog_take(limit, self._turn)
        if not todo:
            return 0
        self._turn = todo[0].collection_id
        fp = self.embedder.fingerprint
        texts = {text_hash(p.embed_text): p.embed_text for p in todo}
        vectors = self.catalog.cached_vectors(fp, sorted(texts))
        missing = sorted((h for h in texts if h not in vectors), key=lambda h: len(texts[h]))
        if missing:
            with self.spans.span("embed"):
                mat = self.embedder.embed([texts[h] for h in missing])
            fresh = dict(zip(missing, mat, strict=True))
        else:
            fresh = {}
        with self.spans.span("vectors_commit"):
            self.catalog.vectors_arrived(fp, fresh, [p.chunk_id for p in todo])
        self.catch_up(vectors_only=True)
        self.refresh_backlog()
        return len(todo)

    def embed_backlog(self, coll: Collection, report: IndexReport) -> None:
        """Embed the whole backlog now (no embedding thread), with progress events."""
        total = self.refresh_backlog().chunks
        done = 0
        while total and not self.should_stop():
            t0 = time.perf_counter()
            n = self.embed_some()
            if not n:
                break
            report.add_stage("embed", time.perf_counter() - t0)
            done += n
            report.embedded += n
            self.on_progress(Progress(coll.name, "embed", done, total, report.embedded))
        if self.should_stop():
            raise Interrupted(f"embedding {coll.name} was interrupted")
