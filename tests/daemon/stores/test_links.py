"""The link graph: what a link is, what it resolves to, and triggers that keep it in the
catalog through every write path (decision 0028)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ragd.daemon.models import ChunkDraft
from ragd.daemon.notes.writing import links_to, rewrite_links
from ragd.daemon.stores import links
from ragd.daemon.stores.catalog import Catalog, SourceUpdate
from ragd.daemon.stores.links import NoteName, Resolver, parse_links


def test_every_link_form_is_parsed_outside_code() -> None:
    text = ("[[Alpha]] [[Beta#Intro|the beta]] ![[img.png]] [x](Folder/My%20Note.md#Part)\n"
            "`[[code]]` [web](https://x.org) [top](#anchor) | [[T\\|alias]] |\n"
            "```\n[[fenced]]\n```\n![pic](a/b.png)")
    got = [(lk.kind, lk.target, lk.heading, lk.alias) for lk in parse_links(text)]
    assert got == [("link", "Alpha", "", ""), ("link", "Beta", "Intro", "the beta"),
                   ("embed", "img.png", "", ""), ("md", "Folder/My Note.md", "Part", "x"),
                   ("link", "T", "", "alias"), ("embed", "a/b.png", "", "pic")]
    first = parse_links(text)[2]
    assert text[first.start:first.end] == "![[img.png]]"


def test_resolution_is_obsidians_case_shortest_path_then_alias() -> None:
    r = Resolver([NoteName(1, "Alpha.md"), NoteName(2, "deep/er/Alpha.md"),
                  NoteName(3, "Folder/My Note.md", ("Mine",)), NoteName(4, "img.png"),
                  NoteName(5, "a/b/Deep.md"), NoteName(6, "Beta.md", ("alpha",)),
                  NoteName(7, "x/Same.md"), NoteName(8, "Same.md")])
    assert r.resolve("alpha", "q.md") == 1  # case-insensitive; the path beats an alias
    assert r.resolve("ALPHA", "other/q.md") == 1  # the shortest path of that name
    assert r.resolve("er/alpha", "q.md") == 2  # a partial path
    assert r.resolve("deep/er/Alpha.md", "q.md") == 2
    assert r.resolve("mine", "q.md") == 3  # no file of that name: an alias
    assert r.resolve("img.png", "q.md") == 4
    assert r.resolve("deep", "q.md") == 5
    assert r.resolve("Same", "x/q.md") == 7  # the linking note's own folder first
    assert r.resolve("Same", "q.md") == 8
    assert r.resolve("../Alpha", "deep/q.md") == 1
    assert r.resolve("nothing", "q.md") is None
    assert r.resolve("", "Beta.md") == 6  # [[#Heading]]: the note itself


def _update(path: str, text: str, meta: dict[str, object] | None = None) -> SourceUpdate:
    chunk = ChunkDraft(ordinal=0, text=text, embed_text=text, heading_path=(), start=0,
                       end=len(text), token_count=3)
    return SourceUpdate(path=path, size=1, mtime_ns=1, sha256="h" + text, title=path,
                        source_type="markdown", date=None, metadata=meta or {}, tags=(),
                        warnings=(), chunks=(chunk,))


def _rows(cat: Catalog) -> list[tuple[str, str, str]]:
    with cat.reading() as db:
        return [tuple(r) for r in db.execute(
            "SELECT s.path, l.kind, l.target FROM note_links l JOIN sources s"
            " ON s.id=l.source_id ORDER BY s.path, l.target").fetchall()]


def test_triggers_keep_the_graph_through_commits_moves_skips_and_deletes(tmp_path: Path
                                                                          ) -> None:
    cat = Catalog(tmp_path / "c.sqlite")
    vault = cat.ensure_collection("obsidian", type="system", kind="vault", root="/v")
    mail = cat.ensure_collection("email", type="system", kind="mail", root="/m")
    cat.commit_sources(vault.id, [
        _update("a.md", "see [[B]] and ![[c.png]]"),
        _update("b.md", "back to [a](a.md)", {"frontmatter": {"up": "[[A|home]]"}})], "fp", {})
    cat.commit_sources(mail.id, [_update("m1", "[[not a note]]")], "fp", {})
    assert _rows(cat) == [("a.md", "link", "B"), ("a.md", "embed", "c.png"),
                          ("b.md", "link", "A"), ("b.md", "md", "a.md")]
    cat.commit_sources(vault.id, [_update("a.md", "now [[C]] only")], "fp", {})
    cat.move_source(vault.id, "b.md", "x/b2.md", "b2", {"frontmatter": {}}, 2)
    assert _rows(cat) == [("a.md", "link", "C"), ("x/b2.md", "md", "a.md")]
    cat.record_skip(vault.id, "a.md", code="binary", detail="NUL")
    assert _rows(cat) == [("x/b2.md", "md", "a.md")]
    cat.delete_sources(vault.id, ["x/b2.md"])
    assert _rows(cat) == []
    cat.close()


def test_an_older_catalog_gets_its_links_once(tmp_path: Path) -> None:
    cat = Catalog(tmp_path / "c.sqlite")
    vault = cat.ensure_collection("obsidian", type="system", kind="vault", root="/v")
    cat.commit_sources(vault.id, [_update("a.md", "see [[B]]")], "fp", {})
    cat.close()
    db = sqlite3.connect(tmp_path / "c.sqlite")
    db.executescript("DROP TABLE note_links;")  # as before decision 0028
    db.close()
    cat = Catalog(tmp_path / "c.sqlite")
    assert _rows(cat) == [("a.md", "link", "B")]
    with cat.reading() as db:
        res = Resolver(links.names(db, vault.id))
        assert links.outgoing(db, 1)[0].target == "B" and res.resolve("a", "x.md") == 1
    cat.close()


def test_rename_rewrites_only_the_links_to_the_renamed_note() -> None:
    res = Resolver([NoteName(1, "Old.md"), NoteName(2, "Other.md"), NoteName(3, "src/n.md")])
    text = ("[[Old]] [[old|alias]] [[Old#Heading]] ![[Old]] [[Other]] [m](../Old.md#H) "
            "| [[Old\\|t]] |")
    hits = links_to(text, "src/n.md", res, 1)
    assert len(hits) == 6
    assert rewrite_links(text, "src/n.md", hits, "Archive/New.md", True) == (
        "[[New]] [[New|alias]] [[New#Heading]] ![[New]] [[Other]] [m](../Archive/New.md#H) "
        "| [[New\\|t]] |")
    assert rewrite_links("[[Old]]", "n.md", links_to("[[Old]]", "n.md", res, 1), "a/New.md",
                         False) == "[[a/New]]"  # another note shares the name: its path
