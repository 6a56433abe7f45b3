"""The rss kind in process (decision 0029): real SQLite, Whoosh and FAISS, generated feeds, and
a fake embedder that counts what it embeds (what is tested is which entries are embedded, not
the vectors). Feeds parse in process here; the daemon tests parse them in the worker."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from feed_fixtures import (
    CountingEmbedder,
    Item,
    atom_bytes,
    json_feed_bytes,
    newsboat_db,
    opml_bytes,
    rss_bytes,
)

from ragd.daemon.indexer.pipeline import Indexer, IndexReport
from ragd.daemon.sources.rss import RssKind, entry_key
from ragd.daemon.stores.catalog import Catalog, Collection
from ragd.daemon.stores.feeds import feed_stats
from ragd.daemon.stores.fulltext import open_keyword_store
from ragd.daemon.stores.vectors import FaissStore


class Env:
    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "feeds"
        self.root.mkdir()
        self.cat = Catalog(tmp_path / "catalog.sqlite")
        self.emb = CountingEmbedder()
        faiss = FaissStore(tmp_path / "faiss", self.emb.fingerprint, self.emb.dimension)
        self.keyword, _ = open_keyword_store("whoosh", tmp_path, tmp_path / "whoosh", self.cat)
        self.ix = Indexer(self.cat, self.emb, [faiss, self.keyword], max_file_bytes=2**20)
        self.coll: Collection = self.cat.ensure_collection(
            "rss", type="system", kind="rss", root=str(self.root))
        self.kind = RssKind(html_to_text=lambda h: h.replace("<p>", "").replace("</p>", "\n"))

    def sync(self, **kwargs: object) -> IndexReport:
        report = self.ix.sync(self.coll, self.kind, **kwargs)  # type: ignore[arg-type]
        assert not report.errors, report.errors
        return report

    def sources(self) -> dict[str, tuple[str, str, dict[str, object]]]:
        """key -> (status, title, metadata)."""
        with self.cat._lock:
            rows = self.cat._db.execute(
                "SELECT path, status, title, metadata, skip_code FROM sources"
                " WHERE collection_id=?", (self.coll.id,)).fetchall()
        return {r[0]: (r[1] if r[1] == "ok" else f"skipped:{r[4]}", r[2], json.loads(r[3]))
                for r in rows}

    def titles(self) -> set[str]:
        return {t for s, t, _ in self.sources().values() if s == "ok"}


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.keyword.close()
    e.cat.close()


def items(n: int, start: int = 0) -> list[Item]:
    return [Item(f"https://example.org/p/{i}", f"Post {i}", f"<p>Body of post {i} about "
                 f"topic{i}.</p>", date=f"2024-03-{1 + i % 28:02d}T10:00:00+00:00",
                 link=f"https://example.org/p/{i}", author="Ann", tags=("News",))
            for i in range(start, start + n)]


def test_new_entries_only_are_embedded_and_lost_ones_stay(env: Env) -> None:
    feed = env.root / "blog.xml"
    feed.write_bytes(rss_bytes("The Blog", items(5)))
    report = env.sync()
    assert report.indexed == 5 and env.titles() == {f"Post {i}" for i in range(5)}
    meta = env.sources()["id:https://example.org/p/3"][2]
    assert meta["feed_name"] == "The Blog" and meta["url"] == "https://example.org/p/3"
    assert meta["date"] == "2024-03-04T10:00:00+00:00" and meta["author"] == "Ann"
    assert meta["tags"] == ["news"] and meta["feed_file"] == "blog.xml"

    # Saved again: a new entry on top, the oldest off the end. Only the new one is embedded.
    env.emb.texts.clear()
    feed.write_bytes(rss_bytes("The Blog", [*items(1, start=5), *items(4, start=1)]))
    report = env.sync()
    assert report.indexed == 1 and report.deleted == 0
    assert env.emb.texts and all("Post 5" in t for t in env.emb.texts), env.emb.texts
    assert env.titles() == {f"Post {i}" for i in range(6)}  # Post 0 left the feed, stays

    # An entry edited: only it is read and embedded again.
    env.emb.texts.clear()
    edited = [*items(1, start=5), *items(4, start=1)]
    edited[2] = Item(edited[2].guid, edited[2].title, "<p>Rewritten quokka paragraph.</p>",
                     edited[2].date, edited[2].link)
    feed.write_bytes(rss_bytes("The Blog", edited))
    report = env.sync()
    assert report.indexed == 1
    assert env.emb.texts and all("quokka" in t for t in env.emb.texts), env.emb.texts

    # The feed file deleted: its entries go with it.
    feed.unlink()
    report = env.sync()
    assert env.titles() == set()


def test_late_entry_with_an_old_date_is_not_lost(env: Env) -> None:
    feed = env.root / "late.atom"
    feed.write_bytes(atom_bytes("Late", items(3, start=10)))
    env.sync()
    old = Item("urn:late:1", "Backdated note", "<p>written long ago</p>",
               date="2019-01-01T00:00:00+00:00")
    feed.write_bytes(atom_bytes("Late", [*items(3, start=10), old]))
    assert env.sync().indexed == 1
    status, title, meta = env.sources()["id:urn:late:1"]
    assert (status, title, meta["date"]) == ("ok", "Backdated note", "2019-01-01T00:00:00+00:00")


def test_json_feed_and_opml(env: Env) -> None:
    (env.root / "feed.json").write_bytes(json_feed_bytes("JSON Blog", [
        Item("1", "Json one", "<p>the first json entry</p>", link="https://j.org/1",
             author="Jo", tags=("Tech",)),
        Item("2", "Json two", "<p>the second</p>")]))
    (env.root / "subs.opml").write_bytes(opml_bytes("My feeds", [
        ("Tech", "Ars", "https://ars.example/feed"), ("", "Blog", "https://b.example/rss")]))
    env.sync()
    src = env.sources()
    one = src["id:https://example.org/feed.json#1"]  # "1" is no URI: scoped by its feed
    assert one[1] == "Json one" and one[2]["author"] == "Jo" and one[2]["tags"] == ["tech"]
    assert one[2]["url"] == "https://j.org/1" and one[2]["feed_name"] == "JSON Blog"
    sub = src["id:https://ars.example/feed"]
    assert sub[1] == "Ars" and sub[2]["subscription"] is True and sub[2]["tags"] == ["tech"]
    stats = feed_stats(env.cat, env.coll.id)
    assert stats["subscription_count"] == 2 and stats["entry_count"] == 2
    assert [(f["feed_name"], f["count"]) for f in stats["feeds"]] == [("JSON Blog", 2)]


def test_newsboat_store_is_read_only_and_mirrored(env: Env) -> None:
    db = newsboat_db(env.root / "cache.db", {
        "https://a.example/rss": ("Feed A", items(3)),
        "https://b.example/rss": ("Feed B", items(2, start=20))})
    before = db.read_bytes()
    env.sync()
    assert env.titles() == {"Post 0", "Post 1", "Post 2", "Post 20", "Post 21"}
    assert db.read_bytes() == before  # never written
    stats = feed_stats(env.cat, env.coll.id)
    assert {f["feed_name"]: f["count"] for f in stats["feeds"]} == {"Feed A": 3, "Feed B": 2}

    # Newsboat fetches one more and deletes one: the new one is embedded, the deleted goes.
    env.emb.texts.clear()
    newsboat_db(db, {"https://a.example/rss": ("Feed A", items(1, start=30))})
    con = sqlite3.connect(db)
    con.execute("UPDATE rss_item SET deleted = 1 WHERE title = 'Post 1'")
    con.commit()
    con.close()
    env.sync()
    assert env.titles() == {"Post 0", "Post 2", "Post 20", "Post 21", "Post 30"}
    assert env.emb.texts and all("Post 30" in t for t in env.emb.texts)


def test_not_a_store_is_skipped(env: Env) -> None:
    con = sqlite3.connect(env.root / "cache.db")
    con.execute("CREATE TABLE other (x)")
    con.close()
    env.sync()
    assert env.sources() == {"skip:cache.db": ("skipped:reader_unreadable", "", {})}


def test_keys_fall_back_to_link_then_hash_and_duplicates_are_kept_apart(env: Env) -> None:
    assert entry_key({"id": "42"}, "https://f/") == "id:https://f/#42"
    assert entry_key({"id": "", "link": "https://x/1"}, "f") == "link:https://x/1"
    assert entry_key({"title": "t"}, "f").startswith("sha256:")
    same = [Item("dup", "First dup", "<p>one</p>"), Item("dup", "Second dup", "<p>two</p>"),
            Item("", "No id", "<p>three</p>", link="https://x.example/3"),
            Item("", "Nothing", "<p>four</p>")]
    (env.root / "dups.rss").write_bytes(rss_bytes("Dups", same))
    env.sync()
    assert env.titles() == {"First dup", "Second dup", "No id", "Nothing"}
    assert "link:https://x.example/3" in env.sources()
