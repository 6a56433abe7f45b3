"""The indexes caught up with the catalog: its journal of ops replayed to each of them.

The catalog is the truth; the keyword and vector indexes are projections of it. A commit
journals an op per chunk it upserts or deletes, and each index keeps a mark, the last op it
has applied: ``catch_up`` applies the ops past every mark (idempotent), in slices that give way
to small work, a small job's own ops ahead of older ones (decisions 0022, 0025, issue 21).
``save`` persists the indexes and forgets the ops all of them have on disk; ``rebuild`` makes
an index again from the catalog alone. All of it holds ``Indexer.lock``: the writer and the
embedding thread both apply ops, never at the same time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np

from ragd.daemon.embed.embedding import Embedder
from ragd.daemon.indexer.pacing import Pacing
from ragd.daemon.indexer.report import IndexReport
from ragd.daemon.indexer.timings import Spans
from ragd.daemon.stores.catalog import Catalog
from ragd.daemon.stores.fulltext import CommitYielded
from ragd.daemon.stores.projection import IndexStore

# Journal ops per keyword commit when a projection replays a backlog of them: between two,
# small work that waits goes first. While notes are saved, fewer: what the keyword store can
# commit in its time budget (WhooshStore.busy_docs, issue 21).
REPLAY_SLICE = 512


class CatchUp(Pacing):
    """The index projections of ``Indexer`` (``pipeline``): a part of it, using its
    attributes."""

    catalog: Catalog
    embedder: Embedder
    stores: list[IndexStore]
    lock: threading.RLock
    spans: Spans
    _ahead: int | None
    _yielding: bool

    def catch_up(self, report: IndexReport | None = None, *,
                 vectors_only: bool = False) -> None:
        """Apply journal ops to every index past its mark (idempotent: safe to replay). A
        chunk still in the embedding backlog is not in the vector index yet."""
        start = time.monotonic()
        with self.lock:
            self.spans.add("lock_wait", start)
            for store in self.stores:
                if vectors_only and not store.needs_vectors:
                    continue
                t0 = time.perf_counter()
                self._replay(store)
                if report is not None:
                    report.add_stage(f"write_{store.name}", time.perf_counter() - t0)

    def _replay(self, store: IndexStore) -> None:
        """Apply the ops past the store's mark, in slices. A big document's keyword
        projection costs seconds (~0.7 ms a chunk in Whoosh on an idle machine, 5 on a
        loaded one): before each slice, and within one until its commit starts, it gives way
        to small work waiting; while notes are saved a slice is what the store commits in its
        time budget. A small job applies its own ops first and the older ones when it ends
        (``_finish``); what a job leaves is replayed by the next catch_up, which every job
        makes when it commits (decisions 0022, 0025)."""
        mark = store.mark
        if self._ahead is not None and not store.needs_vectors and mark < self._ahead:
            self._apply_ahead(store)  # the older ops wait for the end of the small job
            return
        self._yielding = True
        try:
            while not self.give_way():
                new_mark, ids = self.catalog.ops_after(mark, self._slice(store),
                                                       vector_ops=store.needs_vectors)
                if new_mark == mark:
                    return
                try:
                    self._apply_ids(store, ids, new_mark)
                except CommitYielded:
                    return
                mark = new_mark
        finally:
            self._yielding = False

    def _interrupt(self) -> bool:
        """Whether a keyword apply under way should be given up before its commit."""
        return self._yielding and self.give_way()

    def _slice(self, store: IndexStore) -> int:
        """Ops per apply: REPLAY_SLICE, or while notes are saved what the store can commit
        in its time budget."""
        busy = getattr(store, "busy_docs", None)
        if busy is None or self._quiet():
            return REPLAY_SLICE
        return max(1, min(REPLAY_SLICE, int(busy())))

    def _apply_ahead(self, store: IndexStore) -> None:
        """A small job's own ops, applied to a keyword index that is behind with older
        ones, without moving its mark: every op upserts or deletes a chunk as the catalog has
        it now, so applying it again when the replay reaches it changes nothing."""
        assert self._ahead is not None
        after = self._ahead
        while True:
            new_mark, ids = self.catalog.ops_after(after, REPLAY_SLICE, vector_ops=False)
            if new_mark == after:
                break
            self._apply_ids(store, ids, store.mark)
            after = new_mark
        self._ahead = after

    def _apply_ids(self, store: IndexStore, ids: Sequence[int], mark: int) -> None:
        start = time.monotonic()
        rows = self.catalog.chunks_by_id(ids)
        present = [rows[i] for i in ids if i in rows]
        absent = [i for i in ids if i not in rows]
        vectors: dict[int, np.ndarray] = {}
        if store.needs_vectors:
            vectors = self.catalog.vectors_for(self.embedder.fingerprint, present)
            absent += [r.id for r in present if r.id not in vectors]
            present = [r for r in present if r.id in vectors]
        applying = time.monotonic()
        self.spans.add("ops_read", start, applying)
        store.apply(present, absent, mark, vectors)
        if not hasattr(store, "on_span"):  # a store that does not time its own steps
            self.spans.add(f"{store.name}_apply", applying)

    def save(self) -> None:
        """Persist every index, then forget the ops all of them have on disk."""
        with self.lock:
            for store in self.stores:
                with self.spans.span(f"{store.name}_save"):
                    store.save()
            if self.stores:
                with self.spans.span("prune_ops"):
                    self.catalog.prune_ops(min(s.persisted_mark for s in self.stores))

    def rebuild(self, names: Sequence[str]) -> dict[str, int]:
        """Rebuild the named indexes from the catalog alone: nothing is embedded again."""
        counts: dict[str, int] = {}
        with self.lock:
            last = self.catalog.last_op()
            for store in self.stores:
                if store.name not in names:
                    continue
                store.reset(self.embedder.fingerprint)
                n = 0
                for rows in self.catalog.iter_chunks():
                    vectors: dict[int, np.ndarray] = {}
                    if store.needs_vectors:  # a chunk in the backlog has no vector yet
                        vectors = self.catalog.vectors_for(self.embedder.fingerprint, rows)
                        rows = [r for r in rows if r.id in vectors]
                    store.apply(rows, [], 0, vectors)
                    n += len(rows)
                store.apply([], [], last, {})
                store.save()
                counts[store.name] = n
            self.catch_up()
            self.save()
        return counts
