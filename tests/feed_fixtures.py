"""Generated feeds for the rss tests: RSS 2.0, Atom, JSON Feed, OPML and a Newsboat store built
in Newsboat's own schema. Nothing here is read from the network or the shared corpus."""

from __future__ import annotations

import email.utils
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np


class CountingEmbedder:
    """Fake for tests only: every vector the same (the semantic leg returns whatever the
    filters let through), and the texts it was asked to embed counted."""

    fingerprint = "fake-embedder-1"
    dimension = 8
    max_tokens = 256

    def __init__(self) -> None:
        self.texts: list[str] = []

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return np.ones((len(texts), self.dimension), dtype=np.float32) / self.dimension**0.5

    def embed_query(self, text: str) -> np.ndarray:
        return np.ones(self.dimension, dtype=np.float32) / self.dimension**0.5


@dataclass(frozen=True)
class Item:
    guid: str
    title: str
    body: str  # HTML
    date: str = "2024-03-01T10:00:00+00:00"  # ISO 8601
    link: str = ""
    author: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)


def _rfc822(iso: str) -> str:
    import datetime as dt

    return email.utils.format_datetime(dt.datetime.fromisoformat(iso))


def rss_bytes(title: str, items: Sequence[Item], *, link: str = "https://example.org/") -> bytes:
    parts = [f'<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel>'
             f"<title>{escape(title)}</title><link>{escape(link)}</link>"]
    for it in items:
        parts.append(
            "<item>" + (f"<guid>{escape(it.guid)}</guid>" if it.guid else "")
            + f"<title>{escape(it.title)}</title>"
            + (f"<link>{escape(it.link)}</link>" if it.link else "")
            + (f"<author>{escape(it.author)}</author>" if it.author else "")
            + "".join(f"<category>{escape(t)}</category>" for t in it.tags)
            + f"<pubDate>{_rfc822(it.date)}</pubDate>"
            + f"<description>{escape(it.body)}</description></item>\n")
    parts.append("</channel></rss>\n")
    return "".join(parts).encode("utf-8")


def atom_bytes(title: str, items: Sequence[Item]) -> bytes:
    parts = ['<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom">'
             f"<title>{escape(title)}</title><id>urn:feed:{escape(title)}</id>"
             "<updated>2024-03-01T00:00:00Z</updated>"]
    for it in items:
        parts.append(
            f"<entry><id>{escape(it.guid)}</id><title>{escape(it.title)}</title>"
            f"<updated>{it.date}</updated><published>{it.date}</published>"
            + (f'<link href="{escape(it.link)}"/>' if it.link else "")
            + (f"<author><name>{escape(it.author)}</name></author>" if it.author else "")
            + f'<content type="html">{escape(it.body)}</content></entry>\n')
    parts.append("</feed>\n")
    return "".join(parts).encode("utf-8")


def json_feed_bytes(title: str, items: Sequence[Item]) -> bytes:
    return json.dumps({
        "version": "https://jsonfeed.org/version/1.1", "title": title,
        "home_page_url": "https://example.org/", "feed_url": "https://example.org/feed.json",
        "items": [{"id": it.guid, "url": it.link or None, "title": it.title,
                   "content_html": it.body, "date_published": it.date,
                   "authors": [{"name": it.author}] if it.author else [],
                   "tags": list(it.tags)} for it in items]}).encode("utf-8")


def opml_bytes(title: str, feeds: Sequence[tuple[str, str, str]]) -> bytes:
    """(folder, name, xmlUrl) per subscription; folder "" for none."""
    by_folder: dict[str, list[tuple[str, str]]] = {}
    for folder, name, url in feeds:
        by_folder.setdefault(folder, []).append((name, url))
    body = []
    for folder, subs in by_folder.items():
        lines = "".join(f'<outline type="rss" text="{escape(n)}" title="{escape(n)}" '
                        f'xmlUrl="{escape(u)}" htmlUrl="{escape(u.rsplit("/", 1)[0])}/"/>'
                        for n, u in subs)
        body.append(f'<outline text="{escape(folder)}">{lines}</outline>' if folder else lines)
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<opml version="2.0"><head><title>'
            f'{escape(title)}</title></head><body>{"".join(body)}</body></opml>\n'
            ).encode()


# Newsboat's cache.db schema, as Newsboat creates it.
NEWSBOAT_SCHEMA = """
CREATE TABLE rss_feed (rssurl VARCHAR(1024) PRIMARY KEY NOT NULL, url VARCHAR(1024) NOT NULL,
  title VARCHAR(1024) NOT NULL, lastmodified INTEGER(11) NOT NULL DEFAULT 0,
  is_rtl INTEGER(1) NOT NULL DEFAULT 0, etag VARCHAR(128) NOT NULL DEFAULT "");
CREATE TABLE rss_item (id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
  guid VARCHAR(64) NOT NULL, title VARCHAR(1024) NOT NULL, author VARCHAR(1024) NOT NULL,
  url VARCHAR(1024) NOT NULL, feedurl VARCHAR(1024) NOT NULL, pubDate INTEGER NOT NULL,
  content VARCHAR(65535) NOT NULL, unread INTEGER(1) NOT NULL,
  enclosure_url VARCHAR(1024), enclosure_type VARCHAR(1024),
  enqueued INTEGER(1) NOT NULL DEFAULT 0, flags VARCHAR(52),
  deleted INTEGER(1) NOT NULL DEFAULT 0, base VARCHAR(128) NOT NULL DEFAULT "",
  content_mime_type VARCHAR(255) NOT NULL DEFAULT "");
CREATE INDEX idx_guid ON rss_item(guid);
CREATE INDEX idx_feedurl ON rss_item(feedurl);
"""


def newsboat_db(path: Path, feeds: dict[str, tuple[str, Sequence[Item]]]) -> Path:
    """A Newsboat ``cache.db`` at ``path``: {feed url: (title, items)}."""
    import datetime as dt

    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    if not db.execute("SELECT name FROM sqlite_master WHERE name='rss_item'").fetchone():
        db.executescript(NEWSBOAT_SCHEMA)
    for url, (title, items) in feeds.items():
        db.execute("INSERT OR REPLACE INTO rss_feed (rssurl, url, title) VALUES (?, ?, ?)",
                   (url, url.rsplit("/", 1)[0], title))
        for it in items:
            when = int(dt.datetime.fromisoformat(it.date).timestamp())
            db.execute("INSERT INTO rss_item (guid, title, author, url, feedurl, pubDate,"
                       " content, unread, content_mime_type) VALUES (?,?,?,?,?,?,?,1,?)",
                       (it.guid, it.title, it.author, it.link, url, when, it.body,
                        "text/html"))
    db.commit()
    db.close()
    return path
