"""The catalog: the single source of truth that every index is a projection of.

One SQLite database (WAL) holds collections, sources, chunks, cached embeddings and the ops
journal. A source update is one transaction that also appends ops (chunk id upserted or
deleted); the FAISS and Whoosh writers replay those ops idempotently.

The ``Catalog`` class is composed of one part per responsibility, each in its own module:
catalog_collections (collections and their counts), catalog_sources (source commits, deletes,
moves and skips), catalog_containers (containers and the documents read from them),
catalog_vectors (the embedding cache and backlog) and catalog_chunks (chunk reads for search
and the index writers, titles, the ops journal). This module holds the schema, its migrations
and the meta table, and names everything the parts define, so callers import from here.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ragd.daemon.stores import backlog, boilerplate, links
from ragd.daemon.stores.catalog_chunks import CatalogChunks, ChunkRow
from ragd.daemon.stores.catalog_collections import CatalogCollections, Collection
from ragd.daemon.stores.catalog_containers import (
    CatalogContainers,
    ContainerRecord,
    KeyedRecord,
)
from ragd.daemon.stores.catalog_sources import CatalogSources, SourceUpdate, date_int
from ragd.daemon.stores.catalog_vectors import CatalogVectors, text_hash

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS collections (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,            -- system | code | project
    kind TEXT NOT NULL,            -- vault | folder | ...
    root TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    last_indexed REAL
);
CREATE TABLE IF NOT EXISTS sources (
    id INTEGER PRIMARY KEY,
    collection_id INTEGER NOT NULL REFERENCES collections(id),
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    status TEXT NOT NULL,          -- ok | skipped
    skip_code TEXT,
    skip_detail TEXT,
    warnings TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL DEFAULT '',
    source_type TEXT NOT NULL DEFAULT '',
    date INTEGER,                  -- YYYYMMDD, for date filters
    metadata TEXT NOT NULL DEFAULT '{}',
    indexed_at REAL NOT NULL,
    UNIQUE (collection_id, path)
);
CREATE INDEX IF NOT EXISTS sources_sha ON sources (collection_id, sha256);
CREATE TABLE IF NOT EXISTS source_tags (
    source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (source_id, tag)
);
CREATE INDEX IF NOT EXISTS source_tags_tag ON source_tags (tag);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    embed_hash TEXT NOT NULL,      -- sha256 of the embedded text: the embedding cache key
    heading_path TEXT NOT NULL DEFAULT '[]',
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    token_count INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_source ON chunks (source_id, ordinal);
CREATE TABLE IF NOT EXISTS embeddings (
    fingerprint TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (fingerprint, text_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ops (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id INTEGER NOT NULL
);
-- Files that hold many documents (an mbox, a Maildir message, a book's folder): how far each
-- was read (decision 0015). A container row is written only together with its documents.
CREATE TABLE IF NOT EXISTS containers (
    collection_id INTEGER NOT NULL REFERENCES collections(id),
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,     -- of the bytes up to read_to: tells "grown" from "rewritten"
    read_to INTEGER NOT NULL,      -- byte offset read so far (the size, for one-document files)
    PRIMARY KEY (collection_id, path)
) WITHOUT ROWID;
-- Every source's title and aliases, lowercased (Python's lower: Unicode, unlike SQLite's), for
-- the exact leg: one index lookup per query instead of a scan of every title and alias.
CREATE TABLE IF NOT EXISTS source_titles (
    title TEXT NOT NULL,
    source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    PRIMARY KEY (title, source_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS source_titles_source ON source_titles (source_id);
-- Where else a document with the same key was seen (the same message in two folders): when
-- its own container loses it, it moves to a copy instead of being deleted.
CREATE TABLE IF NOT EXISTS source_copies (
    source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    container TEXT NOT NULL,
    locator TEXT NOT NULL,
    PRIMARY KEY (source_id, container, locator)
) WITHOUT ROWID;
"""

# Columns added after version 1, with what an older catalog gets (ALTER TABLE ADD COLUMN).
_ADDED_COLUMNS = (
    # For documents read from a container: the container's path and where in it (an mbox
    # offset). ``path`` then holds the document's key (a Message-ID), not a file path.
    ("sources", "container", "TEXT"),
    ("sources", "locator", "TEXT NOT NULL DEFAULT ''"),
    # 0: a chunk changed (every index replays it); backlog.VECTOR_OP: its vector arrived
    # (only the vector index does).
    ("ops", "kind", "INTEGER NOT NULL DEFAULT 0"),
)


# Every part is named, in the order Python resolves them (CatalogSources builds on the three
# after it; another order fails at import).
class Catalog(CatalogCollections, CatalogSources, CatalogContainers, CatalogChunks,
              CatalogVectors):
    """SQLite catalog. One instance per thread; writes happen on the single writer thread."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._db.executescript(_SCHEMA)
        self._db.executescript(backlog.SCHEMA)
        self._add_columns()
        boilerplate.install(self._db)  # chunk shapes, kept by triggers (decision 0026)
        links.install(self._db)  # the vault's link graph, kept by triggers (decision 0028)
        stored = self.get_meta("schema_version")
        if stored is None or int(stored) < SCHEMA_VERSION:
            self.set_meta("schema_version", str(SCHEMA_VERSION))

    def _add_columns(self) -> None:
        for table, column, decl in _ADDED_COLUMNS:
            have = {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in have:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
        self._db.execute("CREATE INDEX IF NOT EXISTS sources_container"
                         " ON sources (collection_id, container)")
        self._db.commit()
        if self.get_meta("source_titles") is None:  # a catalog from before the table
            with self.transaction() as db:
                for sid, title, meta in db.execute(
                        "SELECT id, title, metadata FROM sources WHERE status='ok'").fetchall():
                    self._set_titles(db, sid, title, json.loads(meta))
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES"
                           " ('source_titles', '1')")

    # -- meta ---------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


__all__ = ["SCHEMA_VERSION", "Catalog", "ChunkRow", "Collection", "ContainerRecord",
           "KeyedRecord", "SourceUpdate", "date_int", "text_hash"]
