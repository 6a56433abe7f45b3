"""Boilerplate: a chunk whose text many notes of a collection share (decision 0026).

A generated footer ("This note in GitHub" with links to the note's own page), a template's
placeholder section: the same words in dozens of notes, which would otherwise take result
rows from the notes that hold the query's answer. Each body chunk's *shape* (its text without
URLs, whitespace collapsed, case folded; the title prefix embedded with it is not part of the
stored text) is kept in ``chunk_shapes`` by triggers on ``chunks``, so every write path
(commits, containers, skips, deletes) keeps it without a call. ``shared`` tells which of a
search's hits have a shape found in at least MIN_NOTES notes of their collection.

A note's head (ordinal <= 0: its properties and its first section, which carry its title) is
never boilerplate: it stands for the note, even when the note holds only a template.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Iterable

from ragd.daemon.text.reading import says_something

# In how many notes of one collection the same text makes it boilerplate. A paragraph quoted
# in two or three notes, or a note and its copy, is content; a footer or a template's
# placeholder repeats in tens or hundreds (obsidian-hub: 6,547 notes with the same footer).
MIN_NOTES = 5

# URLs differ from note to note inside a generated footer (each links to its own page).
_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s)\]\"'<>|]+", re.IGNORECASE)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunk_shapes (
    chunk_id INTEGER PRIMARY KEY,
    collection_id INTEGER NOT NULL,
    source_id INTEGER NOT NULL,
    shape TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunk_shapes_shape ON chunk_shapes (collection_id, shape, source_id);
CREATE TRIGGER IF NOT EXISTS chunk_shapes_insert AFTER INSERT ON chunks WHEN NEW.ordinal > 0
BEGIN
    INSERT OR REPLACE INTO chunk_shapes (chunk_id, collection_id, source_id, shape)
    SELECT NEW.id, collection_id, NEW.source_id, ragd_shape(NEW.text)
    FROM sources WHERE id = NEW.source_id;
END;
CREATE TRIGGER IF NOT EXISTS chunk_shapes_update AFTER UPDATE OF text, ordinal ON chunks
BEGIN
    DELETE FROM chunk_shapes WHERE chunk_id = OLD.id;
    INSERT INTO chunk_shapes (chunk_id, collection_id, source_id, shape)
    SELECT NEW.id, collection_id, NEW.source_id, ragd_shape(NEW.text)
    FROM sources WHERE id = NEW.source_id AND NEW.ordinal > 0;
END;
CREATE TRIGGER IF NOT EXISTS chunk_shapes_delete AFTER DELETE ON chunks
BEGIN
    DELETE FROM chunk_shapes WHERE chunk_id = OLD.id;
END;
"""


def shape(text: str) -> str:
    """What two copies of a generated block have in common: the text without URLs, its
    whitespace collapsed and its case folded, hashed (16 bytes of BLAKE2b, as hex)."""
    if "://" in text:  # the regex costs ~16 us a chunk; most chunks hold no URL
        text = _URL.sub("", text)
    norm = " ".join(text.split()).casefold()
    return hashlib.blake2b(norm.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def install(db: sqlite3.Connection) -> None:
    """Register ``ragd_shape`` on the catalog's connection and create the table and triggers;
    a catalog from before them gets its body chunks' shapes once (~2 s for 55k chunks)."""
    db.create_function("ragd_shape", 1, shape, deterministic=True)
    fresh = db.execute("SELECT 1 FROM sqlite_master WHERE name='chunk_shapes'").fetchone()
    db.executescript(_SCHEMA)
    if fresh is None:
        db.execute("INSERT OR REPLACE INTO chunk_shapes (chunk_id, collection_id, source_id,"
                   " shape) SELECT c.id, s.collection_id, c.source_id, ragd_shape(c.text)"
                   " FROM chunks c JOIN sources s ON s.id = c.source_id WHERE c.ordinal > 0")
    db.commit()


def shared(db: sqlite3.Connection, ids: Iterable[int], min_notes: int = MIN_NOTES) -> set[int]:
    """The chunks of ``ids`` whose shape at least ``min_notes`` notes of their collection
    hold (each counted once however many times it repeats the block)."""
    wanted = sorted(set(ids))
    out: set[int] = set()
    for i in range(0, len(wanted), 500):
        part = wanted[i:i + 500]
        marks = ",".join("?" * len(part))
        rows = db.execute(
            f"SELECT s.chunk_id FROM chunk_shapes s WHERE s.chunk_id IN ({marks}) AND"
            " (SELECT COUNT(*) FROM (SELECT DISTINCT t.source_id FROM chunk_shapes t"
            "  WHERE t.collection_id = s.collection_id AND t.shape = s.shape LIMIT ?)) >= ?",
            (*part, min_notes, min_notes)).fetchall()
        out.update(int(r[0]) for r in rows)
    return out


# A note's opening (what the note leg reads, decision 0039) may sit behind chunks that show
# but say nothing: a row of badges, a banner, editor comments (obsidian-hub: two chunks of
# them before each plugin's description). Looked for in this many first body chunks.
MAX_LEAD = 4


def quiet_leads(db: sqlite3.Connection, source_ids: Iterable[int]) -> dict[int, int]:
    """For each of ``source_ids``: how many of its first body chunks say nothing (only images,
    comments, markup: ``reading.says_something``), at most MAX_LEAD; 0 is left out."""
    wanted = sorted(set(source_ids))
    out: dict[int, int] = {}
    for i in range(0, len(wanted), 500):
        part = wanted[i:i + 500]
        marks = ",".join("?" * len(part))
        for source_id, ordinal, text in db.execute(
                f"SELECT source_id, ordinal, text FROM chunks WHERE source_id IN ({marks})"
                " AND ordinal BETWEEN 0 AND ? ORDER BY source_id, ordinal",
                (*part, MAX_LEAD - 1)):
            if out.get(source_id, 0) == ordinal and not says_something(text):
                out[source_id] = ordinal + 1
    return out
