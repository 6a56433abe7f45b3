"""The embedding backlog (decision 0022): committed before embedded, in the right order.

Pure logic over real SQLite, FAISS and Whoosh on tmp_path, with a deterministic fake embedder
(named as such): what is tested is the order and the bookkeeping, not the vectors.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragd.daemon.indexer.pipeline import Indexer
from ragd.daemon.models import ChunkDraft, Filters
from ragd.daemon.sources.base import kind_for
from ragd.daemon.stores import backlog
from ragd.daemon.stores.catalog import Catalog, SourceUpdate, text_hash
from ragd.daemon.stores.fulltext import open_keyword_store
from ragd.daemon.stores.vectors import FaissStore


class FakeEmbedder:
    """Deterministic fake for unit tests only: a vector from the text's hash."""

    fingerprint = "fake-embedder-1"
    dimension = 16
    max_tokens = 256

    def __init__(self) -> None:
        self.calls = 0

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += len(texts)
        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:4], "little")
            v = np.random.default_rng(seed).standard_normal(self.dimension).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows)


def _update(path: str, recency: int, texts: Sequence[str]) -> SourceUpdate:
    chunks = tuple(ChunkDraft(n, t, f"{path} {t}", (), 0, len(t), 3)
                   for n, t in enumerate(texts))
    return SourceUpdate(path=path, size=1, mtime_ns=1, sha256=path, title=path,
                        source_type="markdown", date=None, metadata={}, tags=(), warnings=(),
                        chunks=chunks, recency=recency)


def _commit(cat: Catalog, coll: int, updates: list[SourceUpdate], urgency: int) -> None:
    hashes = frozenset(text_hash(c.embed_text) for u in updates for c in u.chunks)
    cat.commit_sources(coll, updates, "fp", {}, unembedded=hashes, urgency=urgency)


def test_backlog_order_urgent_first_then_collections_in_turn_newest_first(tmp_path: Path
                                                                         ) -> None:
    cat = Catalog(tmp_path / "catalog.sqlite")
    mail = cat.ensure_collection("email", type="system", kind="mail", root="/m").id
    books = cat.ensure_collection("calibre", type="system", kind="calibre", root="/b").id
    notes = cat.ensure_collection("obsidian", type="system", kind="vault", root="/v").id
    _commit(cat, mail, [_update("old", 100, ["m1", "m2"]), _update("new", 900, ["m3"])],
            backlog.BULK)
    _commit(cat, books, [_update("book", 500, ["b1", "b2"])], backlog.BULK)
    _commit(cat, notes, [_update("note", 1, ["n1"])], backlog.URGENT)
    assert cat.backlog_counts().chunks == 6 and cat.backlog_counts().sources == 4

    def texts(after: int | None) -> list[str]:
        return [p.embed_text.split(" ")[1] for p in cat.backlog_take(2, after)]

    assert texts(None) == ["n1"]  # urgent before any bulk work
    cat.vectors_arrived("fp", {}, [p.chunk_id for p in cat.backlog_take(2, None)])
    assert texts(None) == ["m3", "m1"]  # mail (first collection), newest first
    assert texts(mail) == ["b1", "b2"]  # then the books' turn
    assert texts(books) == ["m3", "m1"]  # and round again
    # A chunk deleted before it is embedded leaves the backlog with it.
    cat.delete_sources(books, ["book"])
    assert cat.backlog_counts().of(books) == (0, 0)
    assert cat.backlog_counts().chunks == 3
    cat.close()


@pytest.fixture
def indexer(tmp_path: Path) -> Iterator[tuple[Indexer, FakeEmbedder, Catalog]]:
    cat = Catalog(tmp_path / "catalog.sqlite")
    emb = FakeEmbedder()
    faiss = FaissStore(tmp_path / "faiss", emb.fingerprint, emb.dimension)
    keyword, _ = open_keyword_store("whoosh", tmp_path, tmp_path / "whoosh", cat)
    ix = Indexer(cat, emb, [faiss, keyword], max_file_bytes=2**20)
    yield ix, emb, cat
    keyword.close()
    cat.close()


def _folder(root: Path, n: int) -> None:
    root.mkdir()
    for i in range(n):
        (root / f"note{i:02d}.md").write_text(
            f"# Note {i}\n\nword{i} shared text about topic {i % 3}\n", encoding="utf-8")
        os.utime(root / f"note{i:02d}.md", ns=(i * 10**9, i * 10**9))


def test_sync_commits_first_and_the_vectors_follow(indexer: tuple[Indexer, FakeEmbedder,
                                                                   Catalog],
                                                   tmp_path: Path) -> None:
    ix, emb, cat = indexer
    root = tmp_path / "proj"
    _folder(root, 12)
    coll = cat.ensure_collection("proj", type="project", kind="folder", root=str(root))
    ix.background = True  # as in the daemon: the sync returns once committed
    report = ix.sync(coll, kind_for("folder", []))
    assert report.indexed == 12 and report.embedded == 0 and emb.calls == 0
    faiss, keyword = ix.stores
    # Keyword-searchable and filterable now; nothing in the vector index yet.
    hits = keyword.search_any(["word7"], [], 5, Filters(collections=("proj",)))  # type: ignore[attr-defined]
    assert len(hits) == 1 and len(faiss.ids()) == 0
    waiting = cat.backlog_counts()
    assert waiting.sources == 12 and waiting.chunks == len(cat.all_chunk_ids())
    # Newest file first (its mtime is the largest).
    first = cat.backlog_take(1, None)[0]
    assert cat.chunks_by_id([first.chunk_id])[first.chunk_id].path == "note11.md"
    while ix.embed_some(5):
        pass
    assert faiss.ids() == cat.all_chunk_ids() and cat.backlog_counts().chunks == 0
    distinct = len({r.embed_hash for rows in cat.iter_chunks() for r in rows})
    assert emb.calls == distinct  # each text embedded once
    # Nothing changed: nothing read again, nothing embedded again.
    again = ix.sync(coll, kind_for("folder", []))
    assert again.indexed == 0 and emb.calls == distinct


def test_without_a_thread_a_sync_embeds_its_backlog(indexer: tuple[Indexer, FakeEmbedder,
                                                                     Catalog],
                                                    tmp_path: Path) -> None:
    ix, emb, cat = indexer
    root = tmp_path / "proj"
    _folder(root, 5)
    coll = cat.ensure_collection("proj", type="project", kind="folder", root=str(root))
    seen: list[str] = []
    ix.on_progress = lambda p: seen.append(p.phase)
    report = ix.sync(coll, kind_for("folder", []))
    assert report.embedded == emb.calls > 0 and "embed" in seen
    assert ix.stores[0].ids() == cat.all_chunk_ids() and cat.backlog_counts().chunks == 0
    # A note moved into a folder keeps its chunks and vectors: nothing is embedded again.
    (root / "sub").mkdir()
    (root / "note01.md").rename(root / "sub" / "note01.md")
    calls = emb.calls
    moved = ix.sync(coll, kind_for("folder", []))
    assert moved.moved == 1 and emb.calls == calls
    assert ix.stores[0].ids() == cat.all_chunk_ids()


def test_a_bulk_job_commits_small_groups_only_while_small_work_comes(
        indexer: tuple[Indexer, FakeEmbedder, Catalog], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Big groups by default (Whoosh's cost per commit), small ones for a minute after small
    work ran or waited, so a saved note waits only for a small group's commit."""
    from ragd.daemon.indexer import pipeline

    ix, _, cat = indexer
    ix.background = True
    now = [1000.0]
    monkeypatch.setattr(pipeline.time, "monotonic", lambda: now[0])
    assert ix._window() == pipeline.WINDOW_CHUNKS
    ix._started = now[0] - 5
    ix.give_way = lambda: True  # a saved note waits beside this job
    assert ix._yield_now()
    assert ix._window() == pipeline.WINDOW_CHUNKS_BACKGROUND
    now[0] += pipeline.SMALL_WINDOW_S + 1
    assert ix._window() == pipeline.WINDOW_CHUNKS
    # A small job itself (a hint for one note) counts as small work too.
    root = tmp_path / "small"
    _folder(root, 1)
    coll = cat.ensure_collection("small", type="project", kind="folder", root=str(root))
    ix.urgency = backlog.URGENT
    ix.sync(coll, kind_for("folder", []))
    assert ix._window() == pipeline.WINDOW_CHUNKS_BACKGROUND


def test_a_small_jobs_own_chunks_reach_the_keyword_index_before_older_ones(
        indexer: tuple[Indexer, FakeEmbedder, Catalog], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A big document's keyword projection costs seconds: a bulk job replays it in slices and
    gives way between them; a saved note's chunks then go into the keyword index first, and
    the older ones follow when the small job ends (issue 28 row 8)."""
    from ragd.daemon.indexer import catchup

    ix, _, cat = indexer
    ix.background = True
    keyword = ix.stores[1]
    monkeypatch.setattr(catchup, "REPLAY_SLICE", 4)
    bulk_root = tmp_path / "bulk"
    _folder(bulk_root, 30)
    bulk = cat.ensure_collection("bulk", type="project", kind="folder", root=str(bulk_root))
    waiting = [True]
    ix.give_way = lambda: waiting[0]  # a saved note waits all along the bulk job
    ix.sync(bulk, kind_for("folder", []))
    behind = cat.all_chunk_ids() - keyword.ids()
    assert behind, "the bulk job replayed everything: the test proves nothing"

    applied: list[tuple[set[int], int]] = []
    real_apply = keyword.apply

    def apply(rows: Any, deletes: Any, mark: int, vectors: Any) -> None:
        applied.append(({r.id for r in rows}, mark))
        real_apply(rows, deletes, mark, vectors)

    monkeypatch.setattr(keyword, "apply", apply)
    mark_before = keyword.mark
    waiting[0] = False
    note_root = tmp_path / "notes"
    note_root.mkdir()
    (note_root / "Saved.md").write_text("# Saved\n\nzqxsaved words\n", encoding="utf-8")
    notes = cat.ensure_collection("notes", type="project", kind="folder", root=str(note_root))
    ix.urgency = backlog.URGENT
    ix.sync(notes, kind_for("folder", []))
    own = {r.id for rows in cat.iter_chunks() for r in rows if r.path == "Saved.md"}
    first_ids, first_mark = applied[0]
    assert first_ids == own and first_mark == mark_before  # ahead, its mark unmoved
    assert len(applied) > 1 and keyword.mark > mark_before
    assert keyword.ids() == cat.all_chunk_ids()  # and the older ones followed


def test_a_keyword_replay_gives_way_within_a_slice_and_resumes(
        indexer: tuple[Indexer, FakeEmbedder, Catalog], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Whoosh commit of a bulk slice cost 1-7 s on a loaded machine, and a saved note
    waited for it (issue 21). Small work that arrives while a slice's documents are added
    cancels it before the commit: nothing is written, the mark stays, and the next catch-up
    applies the same ops."""
    ix, _, cat = indexer
    ix.background = True
    keyword = ix.stores[1]
    waiting = [False]
    added = [0]
    real_document = keyword._document  # type: ignore[attr-defined]

    def document(row: Any) -> dict[str, Any]:
        added[0] += 1
        if added[0] == 20:  # a note is saved while the slice is being written
            waiting[0] = True
        return real_document(row)

    monkeypatch.setattr(keyword, "_document", document)
    ix.give_way = lambda: waiting[0]
    root = tmp_path / "bulk"
    _folder(root, 30)
    coll = cat.ensure_collection("bulk", type="project", kind="folder", root=str(root))
    ix.sync(coll, kind_for("folder", []))
    assert added[0] >= 20 and keyword.ids() == set() and keyword.mark == 0
    assert any(name == "keyword_cancelled" for name in ix.spans.between(0, float("inf")))
    ix.catch_up()  # waits while the note is handled
    assert keyword.ids() == set()
    waiting[0] = False
    ix.catch_up()
    assert keyword.ids() == cat.all_chunk_ids() and keyword.mark == cat.last_op()


def test_while_notes_are_saved_a_keyword_slice_is_what_its_time_budget_allows(
        indexer: tuple[Indexer, FakeEmbedder, Catalog], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """While notes are saved, a bulk replay commits as many chunks as the keyword store's
    measured cost per chunk fits in BUSY_COMMIT_S; otherwise REPLAY_SLICE (ingest as before)."""
    import time

    from ragd.daemon.indexer import pipeline
    from ragd.daemon.stores import fulltext

    ix, _, cat = indexer
    ix.background = True
    keyword = ix.stores[1]
    sizes: list[int] = []
    budgets: list[int] = []  # busy_docs() before each apply: it follows the measured cost
    real_apply = keyword.apply

    def apply(rows: Any, deletes: Any, mark: int, vectors: Any) -> None:
        sizes.append(len(rows) + len(deletes))
        budgets.append(keyword.busy_docs())  # type: ignore[attr-defined]
        real_apply(rows, deletes, mark, vectors)

    monkeypatch.setattr(keyword, "apply", apply)
    keyword._per_doc = fulltext.BUSY_COMMIT_S / 20  # type: ignore[attr-defined]
    assert keyword.busy_docs() == 20  # type: ignore[attr-defined]
    ix._small_at = time.monotonic()  # a note was just saved
    root = tmp_path / "bulk"
    _folder(root, 30)
    coll = cat.ensure_collection("bulk", type="project", kind="folder", root=str(root))
    ix.sync(coll, kind_for("folder", []))
    assert len(sizes) >= 2 and sizes[0] == 20, sizes
    assert all(n <= b for n, b in zip(sizes, budgets, strict=True)), (sizes, budgets)
    assert keyword.ids() == cat.all_chunk_ids()
    # Quiet again: one slice of up to REPLAY_SLICE.
    ix._small_at = -pipeline.SMALL_WINDOW_S
    sizes.clear()
    for path in sorted(root.glob("*.md"))[:12]:
        path.write_text(path.read_text(encoding="utf-8") + "\nmore words\n", encoding="utf-8")
    ix.sync(coll, kind_for("folder", []))
    assert len(sizes) == 1 and 12 <= sizes[0] <= pipeline.REPLAY_SLICE, sizes
    assert keyword.ids() == cat.all_chunk_ids()
