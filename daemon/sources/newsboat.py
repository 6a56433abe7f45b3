"""Read Newsboat's ``cache.db``: read-only, in one transaction, patient with its write lock.

Newsboat keeps every article it fetched in ``rss_item`` (``guid``, ``title``, ``author``,
``url``, ``feedurl``, ``pubDate`` in seconds, ``content`` HTML, ``deleted``) and its feeds in
``rss_feed`` (``rssurl``, ``url``, ``title``). The database is opened with the SQLite URI
``mode=ro`` so no code path can write it. A pass reads every row in one read transaction, keeps
only each article's key and content hash (a body is read once, cut at the entry bound, and
dropped), and reads an article's text back by its row id only when it is new or changed: a
store of 100,000 articles never sits in memory. Articles Newsboat marked deleted are not
indexed. Standard library only.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sqlite3
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

from ragd.daemon.convert.feedparse import MAX_CONTENT_CHARS
from ragd.daemon.errors import RagdError
from ragd.daemon.models import Skip
from ragd.daemon.sources.containment import resolve_inside

BUSY_TIMEOUT_S = 1.0
ATTEMPTS = 3
RETRY_AFTER_S = 5.0


class ReaderBusy(RagdError):
    """The reader held its database locked through every attempt: try again later."""

    code = "reader_busy"
    retry_after_s = RETRY_AFTER_S


@dataclass(frozen=True)
class Article:
    """One row of ``rss_item`` as the kind needs it: no body (``load`` reads it back)."""

    rowid: int
    guid: str
    title: str
    author: str
    link: str
    feed_url: str
    feed_name: str
    date: str  # ISO 8601 in UTC, "" when unknown
    html: bool
    content_hash: str  # of the fields shown and the body as kept
    truncated: bool


def _connect(root: str, rel: str) -> sqlite3.Connection | Skip:
    real = resolve_inside(root, rel)  # a link to a database elsewhere is not read
    if isinstance(real, Skip):
        return real
    uri = "file:" + urllib.parse.quote(real) + "?mode=ro"
    return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)


def _iso(seconds: object) -> str:
    try:
        value = int(str(seconds))
        if value <= 0:
            return ""
        return dt.datetime.fromtimestamp(value, tz=dt.UTC).isoformat()
    except (ValueError, OverflowError, OSError):
        return ""


def read_articles(root: str, rel: str, *, attempts: int = ATTEMPTS,
                  sleep: Callable[[float], None] = time.sleep) -> list[Article] | Skip:
    """Every article of the store at ``root/rel`` not marked deleted, read in one read
    transaction. A Skip (``reader_unreadable``, ``outside_root``) when it is no Newsboat
    store; raises ``ReaderBusy`` when Newsboat kept it locked through every attempt."""
    last: Exception | None = None
    for attempt in range(attempts):
        if attempt:
            sleep(BUSY_TIMEOUT_S)
        db = _connect(root, rel)
        if isinstance(db, Skip):
            return db
        try:
            db.execute("BEGIN")  # one snapshot for both tables
            return _read(db)
        except sqlite3.DatabaseError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                return Skip("reader_unreadable", f"not a Newsboat cache.db: {exc}")
            last = exc
        finally:
            db.close()
    raise ReaderBusy(f"the feed reader's store {root}/{rel} is locked by another program "
                     f"(Newsboat reloading?): {last}",
                     f"ragd tries again in {RETRY_AFTER_S:.0f} s; searches still work")


def _read(db: sqlite3.Connection) -> list[Article]:
    cols = {r[1] for r in db.execute("PRAGMA table_info(rss_item)")}
    if not {"guid", "title", "url", "feedurl", "pubDate", "content"} <= cols:
        raise sqlite3.DatabaseError("no rss_item table of Newsboat's shape")
    feeds = {str(u): str(t or "") for u, t in db.execute("SELECT rssurl, title FROM rss_feed")}
    mime = "content_mime_type" if "content_mime_type" in cols else "''"
    deleted = "WHERE deleted = 0" if "deleted" in cols else ""
    author = "author" if "author" in cols else "''"
    out: list[Article] = []
    rows = db.execute(
        f"SELECT id, guid, title, {author}, url, feedurl, pubDate, {mime},"  # noqa: S608
        f" substr(content, 1, ?), length(content) FROM rss_item {deleted} ORDER BY id",
        (MAX_CONTENT_CHARS,))
    for rowid, guid, title, who, url, feed_url, pub, kind, content, size in rows:
        feed_name = feeds.get(str(feed_url), "") or str(feed_url or "")
        shown = [str(guid or ""), str(title or ""), str(who or ""), str(url or ""), feed_name,
                 _iso(pub), str(content or "")]
        digest = hashlib.sha256(json.dumps(shown, ensure_ascii=False).encode("utf-8"))
        out.append(Article(int(rowid), shown[0], shown[1], shown[2], shown[3],
                           str(feed_url or ""), feed_name, shown[5],
                           "plain" not in str(kind or ""), digest.hexdigest(),
                           int(size or 0) > MAX_CONTENT_CHARS))
    return out


def read_content(root: str, rel: str, rowid: int) -> str | Skip:
    """One article's body (cut at the entry bound), read back by its row id."""
    db = _connect(root, rel)
    if isinstance(db, Skip):
        return db
    try:
        row = db.execute("SELECT substr(content, 1, ?) FROM rss_item WHERE id = ?",
                         (MAX_CONTENT_CHARS, rowid)).fetchone()
    except sqlite3.DatabaseError as exc:
        return Skip("reader_unreadable", f"the article could not be read: {exc}")
    finally:
        db.close()
    if row is None:
        return Skip("vanished", "the article left the reader's store while it was indexed")
    return str(row[0] or "")

