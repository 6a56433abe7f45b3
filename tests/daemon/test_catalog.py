"""The catalog keeps chunk ids stable, journals every change and caches vectors."""

from pathlib import Path

import numpy as np

from ragd.daemon.models import ChunkDraft
from ragd.daemon.stores.catalog import Catalog, SourceUpdate, date_int, text_hash


def chunk(i: int, text: str) -> ChunkDraft:
    return ChunkDraft(ordinal=i, text=text, embed_text=f"T > {text}", heading_path=("T",),
                      start=0, end=len(text), token_count=3)


def update(path: str, *texts: str) -> SourceUpdate:
    return SourceUpdate(path=path, size=1, mtime_ns=1, sha256="h" + path, title="T",
                        source_type="markdown", date=20240101, metadata={"aliases": ["Alias"]},
                        tags=("a/b",), warnings=(), chunks=tuple(chunk(i, t)
                                                                  for i, t in enumerate(texts)))


def test_unchanged_chunks_keep_ids_and_changes_are_journaled(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite")
    coll = cat.ensure_collection("obsidian", type="system", kind="vault", root="/v")
    vectors = {text_hash(f"T > {t}"): np.ones(4, dtype=np.float32) for t in "abc"}
    cat.commit_sources(coll.id, [update("n.md", "a", "b")], "fp", vectors)
    ids = sorted(cat.all_chunk_ids())
    mark, touched = cat.ops_after(0)
    assert sorted(touched) == ids
    cat.commit_sources(coll.id, [update("n.md", "a", "c")], "fp", {})
    rows = cat.chunks_by_id(sorted(cat.all_chunk_ids()))
    assert ids[0] in rows and ids[1] not in rows  # 'a' kept its id; 'b' was replaced
    _, touched = cat.ops_after(mark)
    assert ids[1] in touched and len(cat.all_chunk_ids()) == 2
    assert cat.titles_equal("alias", None) == [ids[0]]
    assert set(cat.cached_vectors("fp", list(vectors))) == set(vectors)
    assert cat.prune_embeddings("fp") == 1  # 'b' is no longer used


def test_delete_move_skip(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite")
    coll = cat.ensure_collection("obsidian", type="system", kind="vault", root="/v")
    cat.commit_sources(coll.id, [update("n.md", "a"), update("m.md", "b")], "fp", {})
    [cid] = [r.id for r in cat.chunks_by_id(sorted(cat.all_chunk_ids())).values()
             if r.path == "n.md"]
    cat.move_source(coll.id, "n.md", "x/n2.md", "N2", {}, 5)
    assert cat.chunks_by_id([cid])[cid].path == "x/n2.md"  # same id after the move
    cat.record_skip(coll.id, "m.md", code="binary", detail="NUL")
    assert [s["skip_code"] for s in cat.skipped_sources()] == ["binary"]
    assert cat.delete_sources(coll.id, ["x/n2.md"]) == 1
    assert cat.all_chunk_ids() == set()
    assert cat.collection_stats(coll.id)["skips"] == {"binary": 1}
    cat.prune_ops(cat.last_op())
    assert cat.ops_after(0) == (0, [])
    assert date_int("2024-05-01") == 20240501 and date_int("junk") is None


def test_titles_and_aliases_are_looked_up_by_index(tmp_path: Path) -> None:
    import dataclasses

    cat = Catalog(tmp_path / "c.sqlite")
    coll = cat.ensure_collection("obsidian", type="system", kind="vault", root="/v")
    other = cat.ensure_collection("proj", type="project", kind="folder", root="/p")
    note = dataclasses.replace(update("n.md", "a"), title="Ärger im Büro",
                               metadata={"aliases": ["Bürostress", 7]})
    cat.commit_sources(coll.id, [note], "fp", {})
    cat.commit_sources(other.id, [dataclasses.replace(update("x.md", "z"), title="Ärger")],
                       "fp", {})
    [first] = cat.titles_equal("ärger im büro", None)
    assert cat.titles_equal("BÜROSTRESS", None) == [first]  # Unicode lowercase, aliases too
    assert len(cat.titles_equal("ärger", None)) == 1
    assert cat.titles_equal("ärger", ["obsidian"]) == []
    # A changed alias replaces the old one; a skip and a delete take the source's names away.
    cat.commit_sources(coll.id, [dataclasses.replace(note, metadata={"aliases": ["Neu"]})],
                       "fp", {})
    assert cat.titles_equal("bürostress", None) == [] and cat.titles_equal("neu", None)
    cat.move_source(coll.id, "n.md", "Archiv/n.md", "Alt", {"aliases": []}, 2)
    assert cat.titles_equal("neu", None) == [] and cat.titles_equal("alt", None)
    cat.record_skip(coll.id, "Archiv/n.md", code="binary", detail="x")
    assert cat.titles_equal("alt", None) == []
    cat.delete_sources(other.id, ["x.md"])
    assert cat.titles_equal("ärger", None) == []
    cat.close()


def test_titles_are_filled_in_for_a_catalog_from_before(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite")
    coll = cat.ensure_collection("obsidian", type="system", kind="vault", root="/v")
    cat.commit_sources(coll.id, [update("n.md", "a")], "fp", {})
    with cat.transaction() as db:  # as an older ragd left it: no table contents, no marker
        db.execute("DELETE FROM source_titles")
        db.execute("DELETE FROM meta WHERE key='source_titles'")
    cat.close()
    again = Catalog(tmp_path / "c.sqlite")
    assert len(again.titles_equal("alias", None)) == 1 and len(again.titles_equal("t", None)) == 1
    again.close()
