"""The concept store: per-document summaries and concepts, one concept table, categories.

A projection of the catalog, in a file of its own (``concepts.sqlite`` beside the catalog), so
that the background analysis never takes the catalog's lock or its write transaction: the
writer commits a saved note without waiting for it. Everything here is rebuilt from the
catalog (its chunks and cached vectors) if the file is deleted (decision 0033).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragd.daemon.stores.sqlite_base import LockedConnection

SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
    source_id INTEGER PRIMARY KEY,
    sha256 TEXT NOT NULL,
    collection TEXT NOT NULL,
    source TEXT NOT NULL,          -- the document's full path (or its Calibre file)
    title TEXT NOT NULL,
    source_type TEXT NOT NULL,
    metadata TEXT NOT NULL,        -- authors, tags, ... as the catalog has them
    summary TEXT NOT NULL,
    vector BLOB NOT NULL,          -- mean of its chunk vectors, normalised
    analysed_at REAL NOT NULL,
    seconds REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS concepts (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,      -- normalised phrase
    name TEXT NOT NULL,            -- as written most often
    vector BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS doc_concepts (
    source_id INTEGER NOT NULL REFERENCES docs(source_id) ON DELETE CASCADE,
    concept_id INTEGER NOT NULL REFERENCES concepts(id),
    rank INTEGER NOT NULL,
    score REAL NOT NULL,
    similarity REAL NOT NULL,
    tfidf REAL NOT NULL,
    count INTEGER NOT NULL,
    chunk_ids TEXT NOT NULL,       -- JSON list: the chunks that mention it
    PRIMARY KEY (source_id, concept_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS doc_concepts_concept ON doc_concepts (concept_id);
-- The document's most frequent candidate phrases: the document frequencies of TF-IDF.
CREATE TABLE IF NOT EXISTS doc_terms (
    source_id INTEGER NOT NULL REFERENCES docs(source_id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    PRIMARY KEY (key, source_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS doc_terms_source ON doc_terms (source_id);
-- The shapes of each document's sentences: one found in several documents is boilerplate.
CREATE TABLE IF NOT EXISTS doc_sentences (
    hash INTEGER NOT NULL,
    source_id INTEGER NOT NULL,
    PRIMARY KEY (hash, source_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS doc_sentences_source ON doc_sentences (source_id);
CREATE TABLE IF NOT EXISTS categories (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    aliases TEXT NOT NULL,         -- JSON list
    concepts TEXT NOT NULL,        -- JSON list of concept keys, most distinctive first
    created_at REAL NOT NULL,
    parent TEXT                    -- the broader category's id; NULL at the top
);
CREATE TABLE IF NOT EXISTS category_docs (
    category_id TEXT NOT NULL REFERENCES categories(id) ON DELETE CASCADE,
    source_id INTEGER NOT NULL REFERENCES docs(source_id) ON DELETE CASCADE,
    PRIMARY KEY (category_id, source_id)
) WITHOUT ROWID;
"""


def blob(v: np.ndarray) -> bytes:
    return np.ascontiguousarray(v, dtype=np.float32).tobytes()


def unblob(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.float32)


@dataclass
class Category:
    """A cluster of documents: a stable id, a name, aliases, members (source keys)."""

    id: str
    name: str
    aliases: list[str]
    members: list[str]
    concepts: list[str] = field(default_factory=list)  # distinctive concept keys, best first
    parent: str | None = None  # the broader category's id (None at the top)


@dataclass(frozen=True)
class DocRecord:
    """What the analysis stores for one document."""

    source_id: int
    sha256: str
    collection: str
    source: str
    title: str
    source_type: str
    metadata: dict[str, Any]
    summary: str
    vector: np.ndarray
    seconds: float


class ConceptStore(LockedConnection):
    """SQLite file of the concept tables; one connection, used under a lock."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._db.executescript(SCHEMA)
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(categories)")}
        if "parent" not in columns:  # a store made before categories had parents
            self._db.execute("ALTER TABLE categories ADD COLUMN parent TEXT")


    # -- documents ----------------------------------------------------------------------------
    def analysed(self) -> dict[int, str]:
        """source id -> the sha256 it was analysed at."""
        with self.reading() as db:
            return {r[0]: r[1] for r in db.execute("SELECT source_id, sha256 FROM docs")}

    def remove(self, source_ids: Iterable[int]) -> int:
        """Forget documents; concepts no document holds any more go with them."""
        ids = list(source_ids)
        if not ids:
            return 0
        with self.transaction() as db:
            db.executemany("DELETE FROM docs WHERE source_id=?", ((i,) for i in ids))
            db.executemany("DELETE FROM doc_sentences WHERE source_id=?", ((i,) for i in ids))
            db.execute("DELETE FROM concepts WHERE id NOT IN"
                       " (SELECT DISTINCT concept_id FROM doc_concepts)")
            db.execute("DELETE FROM categories WHERE id NOT IN"
                       " (SELECT DISTINCT category_id FROM category_docs)")
        return len(ids)

    def put_sentences(self, source_id: int, hashes: Iterable[int]) -> None:
        """Replace one document's sentence shapes."""
        with self.transaction() as db:
            db.execute("DELETE FROM doc_sentences WHERE source_id=?", (source_id,))
            db.executemany("INSERT OR IGNORE INTO doc_sentences (hash, source_id) VALUES (?, ?)",
                           ((h, source_id) for h in hashes))

    def keep_sentences(self, source_ids: set[int]) -> None:
        """Forget the sentence shapes of documents not in ``source_ids`` (removed before
        their analysis)."""
        with self.transaction() as db:
            have = {r[0] for r in db.execute("SELECT DISTINCT source_id FROM doc_sentences")}
            db.executemany("DELETE FROM doc_sentences WHERE source_id=?",
                           ((i,) for i in have - source_ids))

    def _by_keys(self, sql: str, keys: Sequence[str]) -> list[Any]:
        """Rows of ``sql`` (its ``{marks}`` an IN list) for ``keys``, 500 keys a query."""
        rows: list[Any] = []
        with self.reading() as db:
            for start in range(0, len(keys), 500):
                part = list(keys[start:start + 500])
                rows += db.execute(sql.format(marks=",".join("?" * len(part))), part).fetchall()
        return rows

    def document_frequency(self, keys: Sequence[str]) -> dict[str, int]:
        return {k: n for k, n in self._by_keys(
            "SELECT key, COUNT(*) FROM doc_terms WHERE key IN ({marks}) GROUP BY key", keys)}

    def doc_count(self) -> int:
        with self.reading() as db:
            return int(db.execute("SELECT COUNT(*) FROM docs").fetchone()[0])

    def concept_vectors(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        return {k: unblob(v) for k, v in self._by_keys(
            "SELECT key, vector FROM concepts WHERE key IN ({marks})", keys)}

    def put(self, doc: DocRecord, concepts: Sequence[tuple[Any, np.ndarray, list[int]]],
            terms: Sequence[str]) -> None:
        """Replace one document's record, concepts (concept, vector, chunk ids) and terms."""
        with self.transaction() as db:
            db.execute("DELETE FROM doc_concepts WHERE source_id=?", (doc.source_id,))
            db.execute("DELETE FROM doc_terms WHERE source_id=?", (doc.source_id,))
            db.execute(
                "INSERT OR REPLACE INTO docs (source_id, sha256, collection, source, title,"
                " source_type, metadata, summary, vector, analysed_at, seconds)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (doc.source_id, doc.sha256, doc.collection, doc.source, doc.title,
                 doc.source_type, json.dumps(doc.metadata, ensure_ascii=False, default=str),
                 doc.summary, blob(doc.vector), time.time(), doc.seconds))
            for rank, (c, vec, chunk_ids) in enumerate(concepts):
                db.execute("INSERT INTO concepts (key, name, vector) VALUES (?,?,?)"
                           " ON CONFLICT(key) DO NOTHING", (c.key, c.name, blob(vec)))
                cid = db.execute("SELECT id FROM concepts WHERE key=?", (c.key,)).fetchone()[0]
                db.execute("INSERT OR REPLACE INTO doc_concepts (source_id, concept_id, rank,"
                           " score, similarity, tfidf, count, chunk_ids)"
                           " VALUES (?,?,?,?,?,?,?,?)",
                           (doc.source_id, cid, rank, c.score, c.similarity, c.tfidf, c.count,
                            json.dumps(chunk_ids)))
            db.executemany("INSERT OR IGNORE INTO doc_terms (source_id, key) VALUES (?, ?)",
                           ((doc.source_id, k) for k in terms))
            db.execute("DELETE FROM concepts WHERE id NOT IN"
                       " (SELECT DISTINCT concept_id FROM doc_concepts)")

    # -- categories ---------------------------------------------------------------------------
    def categories(self) -> list[Category]:
        with self.reading() as db:
            rows = db.execute("SELECT id, name, aliases, concepts, parent FROM categories"
                              ).fetchall()
            members: dict[str, list[str]] = {}
            for cid, sid in db.execute("SELECT category_id, source_id FROM category_docs"):
                members.setdefault(cid, []).append(str(sid))
        return [Category(r[0], r[1], json.loads(r[2]), sorted(members.get(r[0], [])),
                         json.loads(r[3]), r[4]) for r in rows]

    def put_categories(self, cats: Sequence[Category]) -> None:
        with self.transaction() as db:
            created = {r[0]: r[1] for r in db.execute("SELECT id, created_at FROM categories")}
            db.execute("DELETE FROM category_docs")
            db.execute("DELETE FROM categories")
            for c in cats:
                db.execute("INSERT INTO categories (id, name, aliases, concepts, created_at,"
                           " parent) VALUES (?,?,?,?,?,?)",
                           (c.id, c.name, json.dumps(c.aliases, ensure_ascii=False),
                            json.dumps(c.concepts, ensure_ascii=False),
                            created.get(c.id, time.time()), c.parent))
                db.executemany("INSERT INTO category_docs (category_id, source_id) VALUES"
                               " (?, ?)", ((c.id, int(m)) for m in c.members))

    def doc_vectors(self) -> tuple[list[int], np.ndarray]:
        with self.reading() as db:
            rows = db.execute("SELECT source_id, vector FROM docs ORDER BY source_id").fetchall()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        return [r[0] for r in rows], np.vstack([unblob(r[1]) for r in rows])

    def doc_concept_keys(self, limit: int = 40) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        with self.reading() as db:
            for sid, key in db.execute(
                    "SELECT dc.source_id, c.key FROM doc_concepts dc JOIN concepts c"
                    " ON c.id=dc.concept_id WHERE dc.rank < ? ORDER BY dc.source_id, dc.rank",
                    (limit,)):
                out.setdefault(str(sid), []).append(key)
        return out

    def display_names(self) -> dict[str, str]:
        with self.reading() as db:
            return {r[0]: r[1] for r in db.execute("SELECT key, name FROM concepts")}
