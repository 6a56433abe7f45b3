"""A path that becomes a link out of its collection drops what was read there (decision
0025): a folder of notes, or a Maildir message, swapped for a link outside is not "unknown"
but outside the root, so its old text must not stay searchable. An unreadable folder is
still unknown, not deleted. Real SQLite and Whoosh, a fake embedder."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from ragd.daemon.indexer.pipeline import Indexer
from ragd.daemon.sources.base import kind_for
from ragd.daemon.stores.catalog import Catalog
from ragd.daemon.stores.fulltext import open_keyword_store
from ragd.daemon.stores.vectors import FaissStore

pytestmark = pytest.mark.skipif(os.name != "posix", reason="builds POSIX links")


class FakeEmbedder:
    """Fake for unit tests only: what is tested is which sources stay, not the vectors."""

    fingerprint = "fake-embedder-1"
    dimension = 8
    max_tokens = 256

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), self.dimension), dtype=np.float32) / self.dimension**0.5

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


@pytest.fixture
def indexer(tmp_path: Path) -> Iterator[tuple[Indexer, Catalog]]:
    cat = Catalog(tmp_path / "catalog.sqlite")
    emb = FakeEmbedder()
    faiss = FaissStore(tmp_path / "faiss", emb.fingerprint, emb.dimension)
    keyword, _ = open_keyword_store("whoosh", tmp_path, tmp_path / "whoosh", cat)
    yield Indexer(cat, emb, [faiss, keyword], max_file_bytes=2**20), cat
    keyword.close()
    cat.close()


def test_a_folder_swapped_for_a_link_out_drops_its_notes(indexer: tuple[Indexer, Catalog],
                                                         tmp_path: Path) -> None:
    ix, cat = indexer
    root = tmp_path / "proj"
    (root / "Sub").mkdir(parents=True)
    (root / "Sub" / "a.md").write_text("# A\n\nthe old wombat text\n", encoding="utf-8")
    (root / "keep.md").write_text("# Keep\n\nstays\n", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.md").write_text("# Secret\n\nnever read\n", encoding="utf-8")
    coll = cat.ensure_collection("proj", type="project", kind="folder", root=str(root))
    ix.sync(coll, kind_for("folder", []))
    assert {r.path for r in cat.source_records(coll.id)} == {"Sub/a.md", "keep.md"}
    (root / "Sub" / "a.md").unlink()
    (root / "Sub").rmdir()
    (root / "Sub").symlink_to(outside, target_is_directory=True)
    ix.sync(coll, kind_for("folder", []))
    rows = {r.path: r.status for r in cat.source_records(coll.id)}
    assert rows == {"Sub": "skipped", "keep.md": "ok"}  # Sub/a.md is gone, not kept


def test_a_maildir_message_swapped_for_a_link_out_is_dropped(
        indexer: tuple[Indexer, Catalog], tmp_path: Path) -> None:
    from mail_fixtures import deliver, maildir, message

    ix, cat = indexer
    root = maildir(tmp_path / "Mail")
    path = deliver(root, message("Wallaby", "the wallaby count", msgid="wallaby"))
    coll = cat.ensure_collection("email", type="system", kind="mail", root=str(root))
    ix.sync(coll, kind_for("mail", []))
    assert cat.keyed_source(coll.id, "mid:wallaby@example.org") is not None
    outside = tmp_path / "other.eml"
    outside.write_bytes(message("Dingo", "the dingo secret", msgid="dingo"))
    path.unlink()
    path.symlink_to(outside)
    report = ix.sync(coll, kind_for("mail", []))
    assert cat.keyed_source(coll.id, "mid:wallaby@example.org") is None
    assert cat.keyed_source(coll.id, "mid:dingo@example.org") is None
    rel = str(path.relative_to(root))
    assert (rel, "outside_root") in {(p, c) for p, c, _ in report.skipped_files}


def test_an_unreadable_folder_keeps_what_was_read(indexer: tuple[Indexer, Catalog],
                                                  tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any folder")
    ix, cat = indexer
    root = tmp_path / "proj"
    (root / "Locked").mkdir(parents=True)
    (root / "Locked" / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    coll = cat.ensure_collection("proj", type="project", kind="folder", root=str(root))
    ix.sync(coll, kind_for("folder", []))
    (root / "Locked").chmod(0)
    try:
        ix.sync(coll, kind_for("folder", []))
        assert "Locked/a.md" in {r.path for r in cat.source_records(coll.id)}
    finally:
        (root / "Locked").chmod(0o755)
