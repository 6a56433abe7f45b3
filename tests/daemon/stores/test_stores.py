"""The FAISS store on tmp_path (the keyword stores: test_fulltext.py): idempotent replay, removal, persistence."""

from pathlib import Path

import numpy as np
import pytest

from ragd.daemon.stores.catalog import ChunkRow
from ragd.daemon.stores.vectors import FaissStore


def row(i: int, text: str = "alpha beta", path: str = "a/b/n.md", tags: tuple[str, ...] = ()
        ) -> ChunkRow:
    return ChunkRow(id=i, source_id=i, ordinal=0, text=text, embed_hash=str(i),
                    heading_path=("H",), collection="obsidian", collection_type="system",
                    root="/v", path=path, title=f"T{i}", source_type="markdown", date=20240101,
                    metadata={}, tags=tags)


def vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return v / np.linalg.norm(v)


def test_faiss_apply_is_idempotent_and_removes(tmp_path: Path) -> None:
    s = FaissStore(tmp_path, "fp", 8)
    rows = [row(1), row(2), row(3)]
    vectors = {r.id: vec(r.id) for r in rows}
    s.apply(rows, [], 3, vectors)
    s.apply(rows, [], 3, vectors)  # replayed: no duplicates
    assert s.ids() == {1, 2, 3} and s.size == 3
    assert s.search(vec(2), 1)[0][0] == 2
    assert [i for i, _ in s.search(vec(2), 3, allowed=[1, 3])] != [] and 2 not in [
        i for i, _ in s.search(vec(2), 3, allowed=[1, 3])]
    s.apply([], [2, 99], 4, {})
    assert s.ids() == {1, 3} and s.mark == 4


def test_faiss_persists_mark_after_data_and_detects_other_fingerprint(tmp_path: Path) -> None:
    s = FaissStore(tmp_path, "fp", 8)
    s.apply([row(1)], [], 7, {1: vec(1)})
    assert s.persisted_mark == 0
    s.save()
    again = FaissStore(tmp_path, "fp", 8)
    assert again.ids() == {1} and again.persisted_mark == 7 and not again.stale
    other = FaissStore(tmp_path, "other-model", 8)
    assert other.stale and other.ids() == set() and other.mark == 0


def test_index_names_take_the_role_and_the_backend_names() -> None:
    from ragd.daemon.stores.projection import index_names

    assert index_names("all") == ["faiss", "keyword"]
    assert index_names("keyword") == index_names("whoosh") == index_names("tantivy") == ["keyword"]
    assert index_names("faiss") == ["faiss"]
    with pytest.raises(ValueError, match="not an index"):
        index_names("everything")
