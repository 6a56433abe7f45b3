"""Read a Calibre library's ``metadata.db``: read-only, patient with Calibre's write locks.

The database is opened with the SQLite URI ``mode=ro``, so ragd can never write to it, and with
a busy timeout: while Calibre holds a write lock, the read waits a little, tries again a few
times, then gives up with ``LibraryBusy`` (the service tries the sync again later). Only the
plain tables are read: the ``meta`` view needs SQL functions that Calibre registers itself.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ragd.daemon.errors import RagdError
from ragd.daemon.models import Skip
from ragd.daemon.settings.calibrelib import METADATA_DB
from ragd.daemon.sources.containment import resolve_inside

BUSY_TIMEOUT_S = 1.0  # SQLite waits this long for a lock on each attempt
ATTEMPTS = 3
RETRY_AFTER_S = 5.0  # the service tries a locked library again after this


class LibraryBusy(RagdError):
    """``metadata.db`` stayed locked by a writer (Calibre saving): try again later."""

    code = "library_busy"
    retry_after_s = RETRY_AFTER_S


class LibraryUnreadable(RagdError):
    """``metadata.db`` is missing or not a Calibre database."""

    code = "library_unreadable"


@dataclass(frozen=True)
class Book:
    """One row of ``books`` with what the other tables say about it."""

    id: int
    title: str
    path: str  # the book's folder, relative to the library
    last_modified: str
    uuid: str = ""
    pubdate: str = ""
    series_index: float = 1.0
    authors: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    series: str = ""
    publisher: str = ""
    languages: tuple[str, ...] = ()
    identifiers: dict[str, str] = field(default_factory=dict)
    comments: str = ""
    formats: dict[str, str] = field(default_factory=dict)  # FORMAT -> file name, no suffix

    def file_rel(self, fmt: str) -> str:
        """The file of one format: ``<path>/<name>.<format lower>``."""
        return f"{self.path}/{self.formats[fmt]}.{fmt.lower()}"

    def metadata_key(self) -> list[object]:
        """Everything shown of the book but its files (for its content hash)."""
        return [self.title, list(self.authors), list(self.tags), self.series,
                self.series_index, self.publisher, list(self.languages),
                sorted(self.identifiers.items()), self.comments, self.pubdate]


def timestamp_ns(value: str) -> int:
    """Calibre's ``2024-05-01 10:00:00.123456+00:00`` as ns since the epoch (0 if unreadable)."""
    try:
        when = dt.datetime.fromisoformat(value.strip().replace(" ", "T", 1))
    except ValueError:
        return 0
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1e9)


def pub_day(value: str) -> str | None:
    """A publication date as YYYY-MM-DD; None for Calibre's "undefined" (year 101)."""
    day = value.strip()[:10]
    return day if len(day) == 10 and day[:4].isdigit() and int(day[:4]) > 1000 else None


def library_id(root: Path) -> str:
    """The id Calibre gives a library in ``calibre://`` links: its folder name, spaces as
    underscores; hex-encoded (``_hex_-...``) when that is not plain ASCII."""
    name = root.name.replace(" ", "_")
    if name and all(c.isascii() and (c.isalnum() or c in "_-.") for c in name):
        return name
    return "_hex_-" + root.name.encode("utf-8").hex()


def book_uri(root: Path, book_id: int, fmt: str | None) -> str:
    """A link that opens the book in Calibre (its viewer when a format is known)."""
    lib = urllib.parse.quote(library_id(root), safe="")
    if fmt:
        return f"calibre://view-book/{lib}/{book_id}/{fmt}"
    return f"calibre://show-book/{lib}/{book_id}"


_QUERIES = {
    "authors": "SELECT l.book, a.name FROM books_authors_link l JOIN authors a"
               " ON a.id = l.author ORDER BY l.book, l.id",
    "tags": "SELECT l.book, t.name FROM books_tags_link l JOIN tags t ON t.id = l.tag"
            " ORDER BY l.book, t.name",
    "series": "SELECT l.book, s.name FROM books_series_link l JOIN series s ON s.id = l.series",
    "publisher": "SELECT l.book, p.name FROM books_publishers_link l JOIN publishers p"
                 " ON p.id = l.publisher",
    "languages": "SELECT l.book, g.lang_code FROM books_languages_link l JOIN languages g"
                 " ON g.id = l.lang_code ORDER BY l.book, l.item_order",
    "comments": "SELECT book, text FROM comments",
}


def _read(db: sqlite3.Connection) -> list[Book]:
    many: dict[str, dict[int, list[str]]] = {}
    for name, sql in _QUERIES.items():
        found: dict[int, list[str]] = defaultdict(list)
        for book, value in db.execute(sql):
            found[book].append(str(value))
        many[name] = found
    idents: dict[int, dict[str, str]] = defaultdict(dict)
    for book, kind, val in db.execute("SELECT book, type, val FROM identifiers"):
        idents[book][str(kind)] = str(val)
    formats: dict[int, dict[str, str]] = defaultdict(dict)
    for book, fmt, name in db.execute("SELECT book, format, name FROM data"):
        formats[book][str(fmt).upper()] = str(name)
    books = []
    for row in db.execute("SELECT id, title, path, last_modified, uuid, pubdate, series_index"
                          " FROM books ORDER BY id"):
        bid = int(row[0])

        def first(name: str, bid: int = bid) -> str:
            values = many[name].get(bid)
            return values[0] if values else ""

        books.append(Book(
            id=bid, title=str(row[1] or ""), path=str(row[2] or ""),
            last_modified=str(row[3] or ""), uuid=str(row[4] or ""), pubdate=str(row[5] or ""),
            series_index=float(row[6] if row[6] is not None else 1.0),
            authors=tuple(many["authors"].get(bid, ())), tags=tuple(many["tags"].get(bid, ())),
            series=first("series"), publisher=first("publisher"),
            languages=tuple(many["languages"].get(bid, ())), identifiers=dict(idents[bid]),
            comments=first("comments"), formats=dict(formats[bid])))
    return books


def read_library(root: Path, *, attempts: int = ATTEMPTS, timeout_s: float = BUSY_TIMEOUT_S,
                 sleep: Callable[[float], None] = time.sleep) -> list[Book]:
    """Every book of the library at ``root``, read in one read transaction.

    Raises ``LibraryBusy`` when a writer kept the database locked through every attempt, and
    ``LibraryUnreadable`` when it is missing or not Calibre's.
    """
    path = root / METADATA_DB
    if not path.is_file():
        raise LibraryUnreadable(f"no {METADATA_DB} in {root}",
                                "check [calibre] libraries: it names the library folder")
    real = resolve_inside(root, METADATA_DB)  # a link to a database elsewhere is not read
    if isinstance(real, Skip):
        raise LibraryUnreadable(f"{path} is not a file inside the library: {real.detail}",
                                "point [calibre] libraries at the library folder itself")
    uri = "file:" + urllib.parse.quote(real) + "?mode=ro"
    last: Exception | None = None
    for attempt in range(attempts):
        if attempt:
            sleep(timeout_s)
        try:
            db = sqlite3.connect(uri, uri=True, timeout=timeout_s, check_same_thread=False)
        except sqlite3.OperationalError as exc:
            last = exc
            continue
        try:
            db.execute("BEGIN")  # one snapshot for all the queries
            return _read(db)
        except sqlite3.DatabaseError as exc:  # "file is not a database" too (a corrupt one)
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise LibraryUnreadable(f"{path} cannot be read: {exc}",
                                        "is it a Calibre library?") from exc
            last = exc
        finally:
            db.close()
    raise LibraryBusy(f"the Calibre library {root} is locked by another program (Calibre "
                      f"saving?): {last}",
                      f"ragd tries again in {RETRY_AFTER_S:.0f} s; searches still work")
