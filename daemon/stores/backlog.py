"""The embedding backlog: chunks committed to the catalog whose vectors are still to come.

A source is committed (and so keyword-searchable, listed, filterable) as soon as it is read;
its chunks whose text has no cached vector wait here to be embedded (decision 0022). The rows
are written in the same transaction as the chunks, and removed in the same transaction as
the vectors arrive, so a kill at any instant neither loses a chunk's embedding nor does it
twice. A chunk deleted before it is embedded leaves the backlog with it (foreign key).

Order: ``urgency`` first (a saved note, an explicit request for a few files, then bulk work),
then the collections in turn (one collection's years of mail never starve a library), then
newest first within a collection (``recency``: a message's date, a file's mtime), so the part
people ask about first is semantic first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SCHEMA = """
CREATE TABLE IF NOT EXISTS unembedded (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    collection_id INTEGER NOT NULL,
    source_id INTEGER NOT NULL,
    urgency INTEGER NOT NULL,      -- 0 a user's own edit or request, 1 bulk work
    recency INTEGER NOT NULL,      -- larger is newer: embedded first
    embed_text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS unembedded_order
    ON unembedded (urgency, collection_id, recency DESC, chunk_id);
CREATE INDEX IF NOT EXISTS unembedded_source ON unembedded (source_id);
"""

URGENT, BULK = 0, 1
VECTOR_OP = 1  # ops.kind of "this chunk's vector arrived": only the vector index replays it


@dataclass(frozen=True)
class Pending:
    """One chunk to embed."""

    chunk_id: int
    collection_id: int
    embed_text: str


@dataclass(frozen=True)
class Counts:
    """How much is not embedded yet, in all and by collection id (chunks, sources)."""

    chunks: int = 0
    sources: int = 0
    by_collection: tuple[tuple[int, int, int], ...] = ()  # (collection id, chunks, sources)

    def of(self, collection_id: int) -> tuple[int, int]:
        for cid, chunks, sources in self.by_collection:
            if cid == collection_id:
                return chunks, sources
        return 0, 0


def add(db: sqlite3.Connection, collection_id: int, source_id: int, urgency: int,
        recency: int, rows: Iterable[tuple[int, str]]) -> None:
    """Queue (chunk id, embed text) pairs of one source; inside the commit's transaction."""
    db.executemany(
        "INSERT OR REPLACE INTO unembedded (chunk_id, collection_id, source_id, urgency,"
        " recency, embed_text) VALUES (?, ?, ?, ?, ?, ?)",
        ((cid, collection_id, source_id, urgency, recency, text) for cid, text in rows))


def take(db: sqlite3.Connection, limit: int, after_collection: int | None) -> list[Pending]:
    """The next chunks to embed: the most urgent level, the collection after
    ``after_collection`` in turn that has any at that level, newest first."""
    row = db.execute("SELECT MIN(urgency) FROM unembedded").fetchone()
    if row is None or row[0] is None:
        return []
    urgency = int(row[0])
    start = -1 if after_collection is None else after_collection
    found = db.execute(
        "SELECT collection_id FROM unembedded WHERE urgency=? AND collection_id>?"
        " ORDER BY collection_id LIMIT 1", (urgency, start)).fetchone()
    if found is None:  # wrap around
        found = db.execute("SELECT collection_id FROM unembedded WHERE urgency=?"
                           " ORDER BY collection_id LIMIT 1", (urgency,)).fetchone()
    rows = db.execute(
        "SELECT chunk_id, collection_id, embed_text FROM unembedded"
        " WHERE urgency=? AND collection_id=? ORDER BY recency DESC, chunk_id LIMIT ?",
        (urgency, found[0], limit)).fetchall()
    return [Pending(int(r[0]), int(r[1]), str(r[2])) for r in rows]


def done(db: sqlite3.Connection, chunk_ids: Sequence[int]) -> None:
    """Drop embedded chunks (inside the transaction that stores their vectors)."""
    db.executemany("DELETE FROM unembedded WHERE chunk_id=?", ((i,) for i in chunk_ids))


def promote(db: sqlite3.Connection, source_ids: Sequence[int]) -> None:
    """Make the chunks of these sources urgent (a user asked for them)."""
    db.executemany("UPDATE unembedded SET urgency=? WHERE source_id=?",
                   ((URGENT, s) for s in source_ids))


def counts(db: sqlite3.Connection) -> Counts:
    rows = db.execute(
        "SELECT collection_id, COUNT(*), COUNT(DISTINCT source_id) FROM unembedded"
        " GROUP BY collection_id").fetchall()
    by = tuple((int(c), int(n), int(s)) for c, n, s in rows)
    return Counts(sum(n for _, n, _ in by), sum(s for _, _, s in by), by)


def urgent_waiting(db: sqlite3.Connection) -> bool:
    """Whether a user's own edit or request waits for its vectors (one index probe)."""
    return db.execute("SELECT 1 FROM unembedded WHERE urgency=? LIMIT 1",
                      (URGENT,)).fetchone() is not None


def any_waiting(db: sqlite3.Connection) -> bool:
    """Whether any chunk waits for its vector (one index probe)."""
    return db.execute("SELECT 1 FROM unembedded LIMIT 1").fetchone() is not None


def texts_waiting(db: sqlite3.Connection, chunk_ids: Sequence[int]) -> dict[int, str]:
    """The embed texts of those of ``chunk_ids`` still waiting for their vectors."""
    out: dict[int, str] = {}
    for start in range(0, len(chunk_ids), 900):  # under SQLite's variable limit
        part = list(chunk_ids[start:start + 900])
        rows = db.execute("SELECT chunk_id, embed_text FROM unembedded WHERE chunk_id IN"
                          f" ({','.join('?' * len(part))})", part).fetchall()
        out.update((int(r[0]), str(r[1])) for r in rows)
    return out


def chunk_ids(db: sqlite3.Connection) -> set[int]:
    """Every chunk still waiting for its vector (consistency checks)."""
    return {int(r[0]) for r in db.execute("SELECT chunk_id FROM unembedded")}


def sources_waiting(db: sqlite3.Connection, source_ids: Sequence[int]) -> set[int]:
    """Those of ``source_ids`` that have chunks in the backlog (one index probe each)."""
    out: set[int] = set()
    for start in range(0, len(source_ids), 900):  # under SQLite's variable limit
        part = list(source_ids[start:start + 900])
        rows = db.execute("SELECT DISTINCT source_id FROM unembedded WHERE source_id IN"
                          f" ({','.join('?' * len(part))})", part).fetchall()
        out.update(int(r[0]) for r in rows)
    return out
