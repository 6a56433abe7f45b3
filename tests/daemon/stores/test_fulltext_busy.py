"""Whoosh while notes are saved (issue 21): a commit is bounded by time, and an apply gives
way before its commit when small work waits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chunk_fixtures import row

from ragd.daemon.stores import fulltext
from ragd.daemon.stores.fulltext import CommitYielded, WhooshStore


def test_an_apply_given_up_before_its_commit_writes_nothing(tmp_path: Path) -> None:
    store = WhooshStore(tmp_path / "w")
    try:
        store.apply([row(1, text="first")], [], 1, {})
        store.interrupt = lambda: True
        with pytest.raises(CommitYielded):
            store.apply([row(n, text=f"word{n}") for n in range(2, 40)], [1], 2, {})
        assert store.ids() == {1} and store.mark == 1  # nothing written, nothing deleted
        store.interrupt = lambda: False
        store.apply([row(n, text=f"word{n}") for n in range(2, 40)], [1], 2, {})
        assert store.ids() == set(range(2, 40)) and store.mark == 2
    finally:
        store.close()


def test_a_busy_commit_writes_and_merges_what_its_measured_cost_allows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """busy_docs() follows the measured seconds per document; while notes are saved a commit
    merges at most that many documents (MERGE_CAP_DOCS merged 2,048 in a 7 s commit)."""
    store = WhooshStore(tmp_path / "w")
    merged: list[int] = []
    caps: list[int | None] = []
    real = fulltext._merge_bounded

    def spy(writer: Any, segments: list[Any], cap: int | None = None) -> list[Any]:
        kept = real(writer, segments, cap)
        caps.append(cap)
        merged.append(sum(s.doc_count_all() for s in segments if s not in kept))
        return kept

    monkeypatch.setattr(fulltext, "_merge_bounded", spy)
    store.quiet = lambda: False
    try:
        assert store.busy_docs() == fulltext.BUSY_DOCS_DEFAULT  # nothing measured yet
        for n in range(12):  # segments of 20 documents, and tiny ones (saved notes)
            store._per_doc = fulltext.BUSY_COMMIT_S / 50  # as if measured
            store.apply([row(i, text=f"word{i}") for i in range(n * 20 + 1, n * 20 + 21)],
                        [], n + 1, {})
            store._per_doc = fulltext.BUSY_COMMIT_S / 50
            store.apply([row(1000 + n, text="note")], [], n + 1, {})
        assert set(caps) == {50} and any(merged) and max(merged) <= 50, (caps, merged)
        assert len(store.ids()) == 12 * 21
        store._per_doc = None
        store.apply([row(i, text="tide") for i in range(2000, 2040)], [], 99, {})
        assert store._per_doc is not None  # measured from a busy commit of 40 documents
        assert store.busy_docs() == max(fulltext.BUSY_DOCS_MIN,
                                        int(fulltext.BUSY_COMMIT_S / store._per_doc))
    finally:
        store.close()
