"""The catalog: the single source of truth that every index is a projection of.

One SQLite database (WAL) holds collections, sources, chunks, cached embeddings and the ops
journal. A source update is one transaction that also appends ops (chunk id upserted or
deleted); the FAISS and Whoosh writers replay those ops idempotently.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragd.daemon.models import ChunkDraft, SourceRecord
from ragd.daemon.stores import backlog, boilerplate, links
from ragd.daemon.stores.sqlite_base import LockedConnection

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


def text_hash(text: str) -> str:
    """The embedding-cache key of a text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Collection:
    id: int
    name: str
    type: str
    kind: str
    root: str
    description: str
    created_at: float
    last_indexed: float | None


@dataclass(frozen=True)
class SourceUpdate:
    """Everything a source's commit writes: its row, its chunks and their new vectors."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    title: str
    source_type: str
    date: int | None
    metadata: dict[str, Any]
    tags: tuple[str, ...]
    warnings: tuple[str, ...]
    chunks: tuple[ChunkDraft, ...]
    container: str | None = None  # for a document read from a container (decision 0015)
    locator: str = ""
    recency: int = 0  # larger is newer: its chunks are embedded first (decision 0022)


@dataclass(frozen=True)
class ContainerRecord:
    """How far a container was read (the ``containers`` table)."""

    path: str
    size: int
    mtime_ns: int
    fingerprint: str
    read_to: int


@dataclass(frozen=True)
class KeyedRecord:
    """A document read from a container, as reconcile needs it: its key (``sources.path``),
    where it was read from and the hash of its content."""

    id: int
    key: str
    container: str
    locator: str
    sha256: str
    status: str


@dataclass(frozen=True)
class ChunkRow:
    """A chunk joined with its source, as search and the index writers need it."""

    id: int
    source_id: int
    ordinal: int
    text: str
    embed_hash: str
    heading_path: tuple[str, ...]
    collection: str
    collection_type: str
    root: str
    path: str
    title: str
    source_type: str
    date: int | None
    metadata: dict[str, Any]
    tags: tuple[str, ...]


class Catalog(LockedConnection):
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

    @staticmethod
    def _set_titles(db: sqlite3.Connection, source_id: int, title: str,
                    metadata: dict[str, Any]) -> None:
        """Record a source's title and aliases for ``titles_equal``."""
        db.execute("DELETE FROM source_titles WHERE source_id=?", (source_id,))
        aliases = metadata.get("aliases") or []
        names = [title, *(a for a in aliases[:100] if isinstance(a, str))]
        db.executemany("INSERT OR IGNORE INTO source_titles (title, source_id) VALUES (?, ?)",
                       ((n.strip().lower(), source_id) for n in names if n.strip()))


    # -- meta ---------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- collections --------------------------------------------------------------------------
    def drop_collection(self, collection_id: int) -> None:
        """Forget a collection whose sources were deleted (``delete_sources``, journalled)."""
        with self.transaction() as db:
            db.execute("DELETE FROM containers WHERE collection_id=?", (collection_id,))
            db.execute("DELETE FROM collections WHERE id=?", (collection_id,))

    def ensure_collection(
        self, name: str, *, type: str, kind: str, root: str, description: str = ""
    ) -> Collection:
        """Create the collection, or update its root and description if it exists."""
        with self.transaction() as db:
            db.execute(
                "INSERT INTO collections (name, type, kind, root, description, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET root=excluded.root,"
                " description=excluded.description, kind=excluded.kind",
                (name, type, kind, root, description, time.time()),
            )
        found = self.collection(name)
        assert found is not None
        return found

    def collection(self, name: str) -> Collection | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM collections WHERE name=?", (name,)).fetchone()
        return None if row is None else Collection(**dict(row))

    def collections(self) -> list[Collection]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM collections ORDER BY id").fetchall()
        return [Collection(**dict(r)) for r in rows]

    def mark_indexed(self, collection_id: int) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE collections SET last_indexed=? WHERE id=?", (time.time(), collection_id)
            )

    def collection_stats(self, collection_id: int) -> dict[str, Any]:
        """Counts for status and rag_collection_info."""
        with self._lock:
            db = self._db
            sources = db.execute(
                "SELECT status, COUNT(*) FROM sources WHERE collection_id=? GROUP BY status",
                (collection_id,),
            ).fetchall()
            chunks = db.execute(
                "SELECT COUNT(*) FROM chunks JOIN sources s ON s.id=chunks.source_id"
                " WHERE s.collection_id=?",
                (collection_id,),
            ).fetchone()[0]
            types = db.execute(
                "SELECT DISTINCT source_type FROM sources WHERE collection_id=? AND status='ok'"
                " ORDER BY source_type",
                (collection_id,),
            ).fetchall()
            skips = db.execute(
                "SELECT skip_code, COUNT(*) FROM sources WHERE collection_id=? AND"
                " status='skipped' GROUP BY skip_code",
                (collection_id,),
            ).fetchall()
            # What each note contributed: body chunks (ordinal >= 0), or only its properties
            # (negative ordinals, ragd.daemon.text.properties).
            body, props = db.execute(
                "SELECT COUNT(*) FILTER (WHERE body), COUNT(*) FILTER (WHERE NOT body) FROM"
                " (SELECT MAX(ch.ordinal) >= 0 AS body FROM chunks ch JOIN sources s"
                " ON s.id=ch.source_id WHERE s.collection_id=? GROUP BY ch.source_id)",
                (collection_id,),
            ).fetchone()
        by_status = {r[0]: r[1] for r in sources}
        return {
            "source_count": by_status.get("ok", 0),
            "skipped_count": by_status.get("skipped", 0),
            "chunk_count": int(chunks),
            "body_source_count": int(body or 0),
            "metadata_only_count": int(props or 0),
            "source_types": [r[0] for r in types if r[0]],
            "skips": {r[0]: r[1] for r in skips},
        }

    def sample_titles(self, collection_id: int, limit: int = 10) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT title FROM sources WHERE collection_id=? AND status='ok'"
                " ORDER BY indexed_at DESC, id LIMIT ?",
                (collection_id, limit),
            ).fetchall()
        return [r[0] for r in rows]

    def skipped_sources(self, collection_id: int | None = None) -> list[dict[str, Any]]:
        """Every skipped file and every file indexed with a warning, for the CLI and the tray."""
        sql = (
            "SELECT c.name AS collection, s.path, s.status, s.skip_code, s.skip_detail,"
            " s.warnings FROM sources s JOIN collections c ON c.id=s.collection_id"
            " WHERE (s.status='skipped' OR s.warnings!='')"
        )
        args: tuple[Any, ...] = ()
        if collection_id is not None:
            sql += " AND s.collection_id=?"
            args = (collection_id,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY c.name, s.path", args).fetchall()
        return [dict(r) for r in rows]

    # -- sources ------------------------------------------------------------------------------
    def source_records(self, collection_id: int) -> list[SourceRecord]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, path, size, mtime_ns, sha256, status, skip_code, indexed_at FROM sources"
                " WHERE collection_id=?",
                (collection_id,),
            ).fetchall()
        return [SourceRecord(**dict(r)) for r in rows]

    def chunk_ids_of(self, db: sqlite3.Connection, source_id: int) -> list[int]:
        rows = db.execute("SELECT id FROM chunks WHERE source_id=?", (source_id,)).fetchall()
        return [r[0] for r in rows]

    def _journal(self, db: sqlite3.Connection, chunk_ids: Iterable[int]) -> None:
        db.executemany("INSERT INTO ops (chunk_id) VALUES (?)", ((i,) for i in chunk_ids))

    def delete_sources(self, collection_id: int, paths: Sequence[str]) -> int:
        """Remove sources and their chunks; journal each removed chunk. Returns chunks removed."""
        removed = 0
        with self.transaction() as db:
            for path in paths:
                row = db.execute(
                    "SELECT id FROM sources WHERE collection_id=? AND path=?",
                    (collection_id, path),
                ).fetchone()
                if row is None:
                    continue
                ids = self.chunk_ids_of(db, row[0])
                db.execute("DELETE FROM chunks WHERE source_id=?", (row[0],))
                db.execute("DELETE FROM sources WHERE id=?", (row[0],))
                self._journal(db, ids)
                removed += len(ids)
        return removed

    def move_source(self, collection_id: int, old: str, new: str, title: str, metadata: dict[str, Any], mtime_ns: int) -> None:
        """A rename or move: keep chunk ids and vectors, refresh path-derived fields."""
        with self.transaction() as db:
            row = db.execute(
                "SELECT id FROM sources WHERE collection_id=? AND path=?", (collection_id, old)
            ).fetchone()
            if row is None:
                return
            db.execute(
                "DELETE FROM sources WHERE collection_id=? AND path=? AND id!=?",
                (collection_id, new, row[0]),
            )
            db.execute(
                "UPDATE sources SET path=?, title=?, metadata=?, mtime_ns=?, indexed_at=?"
                " WHERE id=?",
                (new, title, json.dumps(metadata), mtime_ns, time.time(), row[0]),
            )
            self._set_titles(db, row[0], title, metadata)
            self._journal(db, self.chunk_ids_of(db, row[0]))

    def touch_source(self, source_id: int, size: int, mtime_ns: int) -> None:
        """Same content, new stat (e.g. `touch`): remember it so the hash is not read again."""
        with self.transaction() as db:
            db.execute(
                "UPDATE sources SET size=?, mtime_ns=? WHERE id=?", (size, mtime_ns, source_id)
            )

    def record_skip(
        self, collection_id: int, path: str, *, code: str, detail: str,
        size: int = 0, mtime_ns: int = 0, sha256: str = "", container: str | None = None,
        locator: str = "",
    ) -> None:
        """Store a skipped file (dropping any chunks an earlier version had)."""
        with self.transaction() as db:
            row = db.execute(
                "SELECT id FROM sources WHERE collection_id=? AND path=?", (collection_id, path)
            ).fetchone()
            if row is not None:
                ids = self.chunk_ids_of(db, row[0])
                db.execute("DELETE FROM chunks WHERE source_id=?", (row[0],))
                db.execute("DELETE FROM source_tags WHERE source_id=?", (row[0],))
                db.execute("DELETE FROM source_titles WHERE source_id=?", (row[0],))
                self._journal(db, ids)
            db.execute(
                "INSERT INTO sources (collection_id, path, size, mtime_ns, sha256, status,"
                " skip_code, skip_detail, indexed_at, container, locator)"
                " VALUES (?, ?, ?, ?, ?, 'skipped', ?, ?, ?, ?, ?)"
                " ON CONFLICT(collection_id, path) DO UPDATE SET size=excluded.size,"
                " mtime_ns=excluded.mtime_ns, sha256=excluded.sha256, status='skipped',"
                " skip_code=excluded.skip_code, skip_detail=excluded.skip_detail,"
                " warnings='', title='', source_type='', metadata='{}',"
                " indexed_at=excluded.indexed_at, container=excluded.container,"
                " locator=excluded.locator",
                (collection_id, path, size, mtime_ns, sha256, code, detail, time.time(),
                 container, locator),
            )

    def commit_sources(
        self,
        collection_id: int,
        updates: Sequence[SourceUpdate],
        fingerprint: str,
        vectors: dict[str, np.ndarray],
        containers: Sequence[ContainerRecord] = (),
        copies: Sequence[tuple[str, str, str]] = (),
        unembedded: frozenset[str] = frozenset(),
        urgency: int = backlog.BULK,
    ) -> tuple[int, int]:
        """Write new or changed sources in one transaction.

        Unchanged chunks (same embedded text) keep their ids; the rest are journaled.
        ``vectors`` holds newly computed embeddings by text hash. ``containers`` are the
        containers whose documents are all committed with this group or before it: they are
        recorded in the same transaction (kill -9 safety, decision 0015), as are ``copies``,
        (key, container, locator) of documents seen a second time. Returns (upserted,
        deleted). Chunks whose text hash is in ``unembedded`` go to the embedding backlog at
        ``urgency``: they are keyword-searchable now and get their vectors later.
        """
        upserted = deleted = 0
        with self.transaction() as db:
            self._insert_vectors(db, fingerprint, vectors)
            for up in updates:
                u, d = self._commit_one(db, collection_id, up, unembedded, urgency)
                upserted += u
                deleted += d
            self._put_containers(db, collection_id, containers)
            db.executemany(
                "INSERT OR IGNORE INTO source_copies (source_id, container, locator)"
                " SELECT id, ?, ? FROM sources WHERE collection_id=? AND path=?",
                ((c, loc, collection_id, key) for key, c, loc in copies))
        return upserted, deleted

    def _commit_one(
        self, db: sqlite3.Connection, collection_id: int, up: SourceUpdate,
        unembedded: frozenset[str] = frozenset(), urgency: int = backlog.BULK,
    ) -> tuple[int, int]:
        now = time.time()
        db.execute(
            "INSERT INTO sources (collection_id, path, size, mtime_ns, sha256, status,"
            " warnings, title, source_type, date, metadata, indexed_at, container, locator)"
            " VALUES (?, ?, ?, ?, ?, 'ok', ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(collection_id, path) DO UPDATE SET size=excluded.size,"
            " mtime_ns=excluded.mtime_ns, sha256=excluded.sha256, status='ok', skip_code=NULL,"
            " skip_detail=NULL, warnings=excluded.warnings, title=excluded.title,"
            " source_type=excluded.source_type, date=excluded.date,"
            " metadata=excluded.metadata, indexed_at=excluded.indexed_at,"
            " container=excluded.container, locator=excluded.locator",
            (
                collection_id, up.path, up.size, up.mtime_ns, up.sha256, ",".join(up.warnings),
                up.title, up.source_type, up.date, json.dumps(up.metadata), now, up.container,
                up.locator,
            ),
        )
        source_id = db.execute(
            "SELECT id FROM sources WHERE collection_id=? AND path=?", (collection_id, up.path)
        ).fetchone()[0]
        db.execute("DELETE FROM source_tags WHERE source_id=?", (source_id,))
        db.executemany(
            "INSERT OR IGNORE INTO source_tags (source_id, tag) VALUES (?, ?)",
            ((source_id, t) for t in up.tags),
        )
        self._set_titles(db, source_id, up.title, up.metadata)
        old: dict[str, list[int]] = {}
        for cid, h in db.execute(
            "SELECT id, embed_hash FROM chunks WHERE source_id=? ORDER BY ordinal", (source_id,)
        ):
            old.setdefault(h, []).append(cid)
        touched: list[int] = []
        waiting: list[tuple[int, str]] = []
        for ch in up.chunks:
            h = text_hash(ch.embed_text)
            row = (ch.ordinal, ch.text, json.dumps(list(ch.heading_path)), ch.start, ch.end,
                   ch.token_count)
            if old.get(h):
                cid = old[h].pop(0)
                # Same embedded text: keep the id and vector; refresh position fields only.
                db.execute(
                    "UPDATE chunks SET ordinal=?, text=?, heading_path=?, start=?, end=?,"
                    " token_count=? WHERE id=?",
                    (*row, cid),
                )
                touched.append(cid)
            else:
                cur = db.execute(
                    "INSERT INTO chunks (ordinal, text, heading_path, start, end, token_count,"
                    " source_id, embed_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (*row, source_id, h),
                )
                touched.append(int(cur.lastrowid or 0))
            if h in unembedded:
                waiting.append((touched[-1], ch.embed_text))
        backlog.add(db, collection_id, source_id, urgency, up.recency, waiting)
        gone = [cid for ids in old.values() for cid in ids]
        if gone:
            db.executemany("DELETE FROM chunks WHERE id=?", ((c,) for c in gone))
        # Metadata (tags, title, dates) lives on the source and feeds Whoosh's filter fields,
        # so every chunk of a changed source is re-journaled, not only the new ones.
        self._journal(db, touched + gone)
        return len(touched), len(gone)

    # -- containers (decision 0015) ------------------------------------------------------------
    def container_records(self, collection_id: int) -> list[ContainerRecord]:
        with self._lock:
            rows = self._db.execute(
                "SELECT path, size, mtime_ns, fingerprint, read_to FROM containers"
                " WHERE collection_id=?", (collection_id,)).fetchall()
        return [ContainerRecord(**dict(r)) for r in rows]

    _KEYED = "SELECT id, path AS key, container, locator, sha256, status FROM sources"

    def keyed_sources(self, collection_id: int, containers: Sequence[str] | None = None
                      ) -> dict[str, KeyedRecord]:
        """The documents of the collection read from containers (all of them, or those of
        the given containers: a watch hint's few, not a mailbox of 100,000), by key."""
        with self._lock:
            if containers is None:
                rows = self._db.execute(self._KEYED + " WHERE collection_id=? AND container"
                                        " IS NOT NULL", (collection_id,)).fetchall()
            else:
                rows = []
                for start in range(0, len(containers), 900):
                    part = list(containers[start:start + 900])
                    rows += self._db.execute(
                        self._KEYED + f" WHERE collection_id=? AND container IN"
                        f" ({','.join('?' * len(part))})", (collection_id, *part)).fetchall()
        return {r["key"]: KeyedRecord(**dict(r)) for r in rows}

    def keyed_source(self, collection_id: int, key: str) -> KeyedRecord | None:
        """One document by key, wherever it was read from."""
        with self._lock:
            row = self._db.execute(self._KEYED + " WHERE collection_id=? AND path=? AND"
                                   " container IS NOT NULL", (collection_id, key)).fetchone()
        return None if row is None else KeyedRecord(**dict(row))

    @staticmethod
    def _put_containers(db: sqlite3.Connection, collection_id: int,
                        records: Sequence[ContainerRecord]) -> None:
        db.executemany(
            "INSERT OR REPLACE INTO containers (collection_id, path, size, mtime_ns,"
            " fingerprint, read_to) VALUES (?, ?, ?, ?, ?, ?)",
            ((collection_id, r.path, r.size, r.mtime_ns, r.fingerprint, r.read_to)
             for r in records))

    def put_containers(self, collection_id: int, records: Sequence[ContainerRecord]) -> None:
        with self.transaction() as db:
            self._put_containers(db, collection_id, records)

    def relocate_source(self, source_id: int, container: str, locator: str,
                        metadata: dict[str, Any]) -> None:
        """The same document found elsewhere (a message moved to another folder): new place,
        same chunks and vectors. Its chunks are journaled, as the folder feeds the filters."""
        with self.transaction() as db:
            self._relocate(db, source_id, container, locator, metadata)

    def _relocate(self, db: sqlite3.Connection, source_id: int, container: str, locator: str,
                  metadata: dict[str, Any]) -> None:
        row = db.execute("SELECT metadata FROM sources WHERE id=?", (source_id,)).fetchone()
        if row is None:
            return
        meta = {**json.loads(row[0]), **metadata}
        db.execute("UPDATE sources SET container=?, locator=?, metadata=?, indexed_at=?"
                   " WHERE id=?", (container, locator, json.dumps(meta), time.time(), source_id))
        db.execute("DELETE FROM source_copies WHERE source_id=? AND container=? AND locator=?",
                   (source_id, container, locator))
        self._journal(db, self.chunk_ids_of(db, source_id))

    def add_copy(self, source_id: int, container: str, locator: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO source_copies (source_id, container, locator)"
                       " VALUES (?, ?, ?)", (source_id, container, locator))

    def forget_copies(self, collection_id: int, containers: Sequence[str]) -> None:
        """Drop the copies recorded in these containers (they are about to be read again)."""
        with self.transaction() as db:
            db.executemany(
                "DELETE FROM source_copies WHERE container=? AND source_id IN"
                " (SELECT id FROM sources WHERE collection_id=?)",
                ((c, collection_id) for c in containers))

    def finish_containers(
        self, collection_id: int, lost: Sequence[str], gone: Sequence[str],
        records: Sequence[ContainerRecord],
        location_metadata: Callable[[str, str, str], dict[str, Any]],
    ) -> tuple[int, int, int]:
        """The end of a pass, in one transaction: documents ``lost`` by the containers that
        were read again or are ``gone`` move to a copy seen in a container still there, or are
        deleted; the gone containers are forgotten and the re-read ones recorded.
        Returns (relocated, deleted, chunks deleted)."""
        relocated = deleted = chunks = 0
        gone_set = set(gone)
        with self.transaction() as db:
            db.executemany(
                "DELETE FROM source_copies WHERE container=? AND source_id IN"
                " (SELECT id FROM sources WHERE collection_id=?)",
                ((c, collection_id) for c in gone))
            for key in lost:
                row = db.execute("SELECT id FROM sources WHERE collection_id=? AND path=?",
                                 (collection_id, key)).fetchone()
                if row is None:
                    continue
                copy = next((c for c in db.execute(
                    "SELECT container, locator FROM source_copies WHERE source_id=?"
                    " ORDER BY container, locator", (row[0],)) if c[0] not in gone_set), None)
                if copy is not None:
                    self._relocate(db, row[0], copy[0], copy[1],
                                   location_metadata(key, copy[0], copy[1]))
                    relocated += 1
                    continue
                ids = self.chunk_ids_of(db, row[0])
                db.execute("DELETE FROM chunks WHERE source_id=?", (row[0],))
                db.execute("DELETE FROM sources WHERE id=?", (row[0],))
                self._journal(db, ids)
                deleted += 1
                chunks += len(ids)
            db.executemany("DELETE FROM containers WHERE collection_id=? AND path=?",
                           ((collection_id, g) for g in gone))
            self._put_containers(db, collection_id, records)
        return relocated, deleted, chunks

    def container_stats(self, collection_id: int) -> dict[str, Any]:
        """Per folder: documents and their date range (rag_collection_info of mail)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT json_extract(metadata, '$.folder') AS folder, COUNT(*) AS n,"
                " MIN(date) AS first, MAX(date) AS last FROM sources"
                " WHERE collection_id=? AND status='ok' AND container IS NOT NULL"
                " GROUP BY folder ORDER BY folder", (collection_id,)).fetchall()
        return {"folders": [{"folder": r["folder"] or "", "count": r["n"],
                             "date_from": _iso_day(r["first"]), "date_to": _iso_day(r["last"])}
                            for r in rows],
                "date_from": _iso_day(min((r["first"] for r in rows if r["first"]),
                                          default=None)),
                "date_to": _iso_day(max((r["last"] for r in rows if r["last"]), default=None))}

    # -- embeddings ---------------------------------------------------------------------------
    @staticmethod
    def _insert_vectors(db: sqlite3.Connection, fingerprint: str,
                        vectors: dict[str, np.ndarray]) -> None:
        db.executemany(
            "INSERT OR IGNORE INTO embeddings (fingerprint, text_hash, vector) VALUES (?,?,?)",
            ((fingerprint, h, np.ascontiguousarray(v, dtype=np.float32).tobytes())
             for h, v in vectors.items()),
        )

    def store_vectors(self, fingerprint: str, vectors: dict[str, np.ndarray]) -> None:
        """Cache freshly computed vectors at once, so a crash never embeds them again."""
        with self.transaction() as db:
            self._insert_vectors(db, fingerprint, vectors)

    # -- the embedding backlog (ragd.daemon.stores.backlog) ----------------------------------------
    def vectors_arrived(self, fingerprint: str, vectors: dict[str, np.ndarray],
                        chunk_ids: Sequence[int]) -> None:
        """Store the vectors of backlog chunks, take the chunks off the backlog and journal
        them for the vector index, in one transaction."""
        with self.transaction() as db:
            self._insert_vectors(db, fingerprint, vectors)
            backlog.done(db, chunk_ids)
            # Only chunks still there: one deleted meanwhile needs no vector op.
            db.executemany(
                "INSERT INTO ops (chunk_id, kind) SELECT id, ? FROM chunks WHERE id=?",
                ((backlog.VECTOR_OP, i) for i in chunk_ids))

    def backlog_take(self, limit: int, after_collection: int | None) -> list[backlog.Pending]:
        with self._lock:
            return backlog.take(self._db, limit, after_collection)

    def backlog_counts(self) -> backlog.Counts:
        with self._lock:
            return backlog.counts(self._db)

    def backlog_urgent(self) -> bool:
        with self._lock:
            return backlog.urgent_waiting(self._db)

    def backlog_sources(self, source_ids: Iterable[int]) -> set[int]:
        """Those of ``source_ids`` with chunks still waiting for their vectors."""
        ids = list(source_ids)
        if not ids:
            return set()
        with self._lock:
            return backlog.sources_waiting(self._db, ids)

    def backlog_any(self) -> bool:
        with self._lock:
            return backlog.any_waiting(self._db)

    def backlog_texts(self, chunk_ids: Sequence[int]) -> dict[int, str]:
        """The embed texts of those of ``chunk_ids`` still waiting for their vectors."""
        if not chunk_ids:
            return {}
        with self._lock:
            return backlog.texts_waiting(self._db, chunk_ids)

    def backlog_ids(self) -> set[int]:
        with self._lock:
            return backlog.chunk_ids(self._db)

    def backlog_promote(self, source_ids: Sequence[int]) -> None:
        with self.transaction() as db:
            backlog.promote(db, source_ids)

    def cached_vectors(self, fingerprint: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors already computed for these texts under this fingerprint."""
        return self._vectors_where(
            "SELECT text_hash, vector FROM embeddings WHERE fingerprint=? AND text_hash IN ({})",
            fingerprint, hashes)

    def chunk_vectors(self, fingerprint: str, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The exact (float32) vectors of these chunks under this fingerprint."""
        return self._vectors_where(
            "SELECT ch.id, e.vector FROM chunks ch JOIN embeddings e"
            " ON e.text_hash=ch.embed_hash AND e.fingerprint=? WHERE ch.id IN ({})",
            fingerprint, ids)

    def _vectors_where(self, sql: str, fingerprint: str, keys: Sequence[Any]
                       ) -> dict[Any, np.ndarray]:
        """(key, vector blob) rows of ``sql`` for ``keys``, 500 at a time (SQLite's limit
        on variables)."""
        found: dict[Any, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = list(keys[start : start + 500])
                rows = self._db.execute(sql.format(",".join("?" * len(part))),
                                        (fingerprint, *part))
                for key, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def prune_embeddings(self, fingerprint: str) -> int:
        """Drop cached vectors no chunk uses any more (and every other fingerprint's)."""
        with self.transaction() as db:
            cur = db.execute(
                "DELETE FROM embeddings WHERE fingerprint!=? OR text_hash NOT IN"
                " (SELECT embed_hash FROM chunks)",
                (fingerprint,),
            )
        return cur.rowcount

    # -- chunks for the index writers and search ----------------------------------------------
    _CHUNK_SELECT = (
        "SELECT ch.id, ch.source_id, ch.ordinal, ch.text, ch.embed_hash, ch.heading_path,"
        " c.name AS collection, c.type AS collection_type, c.root,"
        " COALESCE(s.container, s.path) AS path, s.title,"
        " s.source_type, s.date, s.metadata,"
        " (SELECT group_concat(tag, char(31)) FROM source_tags t WHERE t.source_id=s.id) AS tags"
        " FROM chunks ch JOIN sources s ON s.id=ch.source_id"
        " JOIN collections c ON c.id=s.collection_id"
    )

    @staticmethod
    def _chunk_row(r: sqlite3.Row) -> ChunkRow:
        return ChunkRow(
            id=r["id"], source_id=r["source_id"], ordinal=r["ordinal"], text=r["text"],
            embed_hash=r["embed_hash"], heading_path=tuple(json.loads(r["heading_path"])),
            collection=r["collection"], collection_type=r["collection_type"], root=r["root"],
            path=r["path"], title=r["title"], source_type=r["source_type"], date=r["date"],
            metadata=json.loads(r["metadata"]),
            tags=tuple(r["tags"].split("\x1f")) if r["tags"] else (),
        )

    def boilerplate(self, ids: Iterable[int]) -> set[int]:
        """The chunks of ``ids`` whose text many notes of their collection share."""
        with self._lock:
            return boilerplate.shared(self._db, ids)

    def quiet_leads(self, source_ids: Iterable[int]) -> dict[int, int]:
        """How many first body chunks of each source say nothing (``boilerplate.quiet_leads``)."""
        with self._lock:
            return boilerplate.quiet_leads(self._db, source_ids)

    def chunks_by_id(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        out: dict[int, ChunkRow] = {}
        with self._lock:
            for start in range(0, len(ids), 500):
                part = list(ids[start : start + 500])
                marks = ",".join("?" * len(part))
                for r in self._db.execute(
                    f"{self._CHUNK_SELECT} WHERE ch.id IN ({marks})", part
                ):
                    out[r["id"]] = self._chunk_row(r)
        return out

    def iter_chunks(self, batch: int = 2000) -> Iterator[list[ChunkRow]]:
        """Every chunk, in id order, in batches (for rebuilds)."""
        last = 0
        while True:
            with self._lock:
                rows = self._db.execute(
                    f"{self._CHUNK_SELECT} WHERE ch.id > ? ORDER BY ch.id LIMIT ?", (last, batch)
                ).fetchall()
            if not rows:
                return
            yield [self._chunk_row(r) for r in rows]
            last = rows[-1]["id"]

    def all_chunk_ids(self) -> set[int]:
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT id FROM chunks")}

    def vectors_for(self, fingerprint: str, rows: Sequence[ChunkRow]) -> dict[int, np.ndarray]:
        cached = self.cached_vectors(fingerprint, sorted({r.embed_hash for r in rows}))
        return {r.id: cached[r.embed_hash] for r in rows if r.embed_hash in cached}

    def source_path(self, source_id: int) -> tuple[str, str] | None:
        """(collection root, relative path) of a source."""
        with self._lock:
            row = self._db.execute(
                "SELECT c.root, s.path FROM sources s JOIN collections c ON c.id=s.collection_id"
                " WHERE s.id=?",
                (source_id,),
            ).fetchone()
        return None if row is None else (row[0], row[1])

    def filter_chunk_ids(self, where: str, args: Sequence[Any], limit: int | None = None
                         ) -> list[int]:
        """Chunk ids matching a SQL condition over ``s`` (sources) and ``c`` (collections);
        at most ``limit`` of them, so a broad filter stops early (decision 0020)."""
        sql = ("SELECT ch.id FROM chunks ch JOIN sources s ON s.id=ch.source_id"
               f" JOIN collections c ON c.id=s.collection_id WHERE {where}")
        if limit is not None:
            sql, args = sql + " LIMIT ?", (*args, limit)
        with self._lock:
            rows = self._db.execute(sql, tuple(args)).fetchall()
        return [r[0] for r in rows]

    def count_sources(self, where: str = "1", args: Sequence[Any] = ()) -> int:
        """Sources (indexed, status ok) matching a SQL condition over ``s`` and ``c``."""
        sql = ("SELECT COUNT(*) FROM sources s JOIN collections c ON c.id=s.collection_id"
               f" WHERE s.status='ok' AND ({where})")
        with self._lock:
            return int(self._db.execute(sql, tuple(args)).fetchone()[0])

    def sources_of(self, chunk_ids: Sequence[int]) -> set[int]:
        """The sources these chunks belong to."""
        out: set[int] = set()
        with self._lock:
            for start in range(0, len(chunk_ids), 900):
                part = list(chunk_ids[start:start + 900])
                out.update(int(r[0]) for r in self._db.execute(
                    "SELECT DISTINCT source_id FROM chunks WHERE id IN"
                    f" ({','.join('?' * len(part))})", part))
        return out

    def chunks_matching(self, ids: Sequence[int], where: str, args: Sequence[Any]) -> set[int]:
        """Those of ``ids`` whose chunk matches the SQL condition (see ``filter_chunk_ids``):
        a check of a few hundred candidates, where listing every match could take seconds."""
        out: set[int] = set()
        with self._lock:
            for start in range(0, len(ids), 900):  # under SQLite's variable limit
                part = list(ids[start:start + 900])
                rows = self._db.execute(
                    "SELECT ch.id FROM chunks ch JOIN sources s ON s.id=ch.source_id"
                    " JOIN collections c ON c.id=s.collection_id"
                    f" WHERE ch.id IN ({','.join('?' * len(part))}) AND ({where})",
                    (*part, *args),
                ).fetchall()
                out.update(r[0] for r in rows)
        return out

    def titles_equal(self, query: str, collection_names: Sequence[str] | None) -> list[int]:
        """Ids of the first chunk of each source whose title or alias equals the query."""
        q = query.strip().lower()
        if not q:
            return []
        sql = (
            "SELECT (SELECT MIN(ch.id) FROM chunks ch WHERE ch.source_id=st.source_id)"
            " FROM source_titles st JOIN sources s ON s.id=st.source_id"
            " JOIN collections c ON c.id=s.collection_id WHERE st.title=?"
        )
        args: list[Any] = [q]
        if collection_names is not None:
            sql += f" AND c.name IN ({','.join('?' * len(collection_names))})"
            args += list(collection_names)
        with self._lock:
            rows = self._db.execute(sql + " GROUP BY st.source_id ORDER BY s.id",
                                    args).fetchall()
        return [r[0] for r in rows if r[0] is not None]

    # -- ops journal --------------------------------------------------------------------------
    def last_op(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT MAX(seq) FROM ops").fetchone()
        return int(row[0] or 0)

    def ops_after(self, mark: int, limit: int = 50_000, *, vector_ops: bool = True
                  ) -> tuple[int, list[int]]:
        """Chunk ids touched after ``mark`` (deduplicated) and the new mark. Without
        ``vector_ops``, "a vector arrived" ops advance the mark but name no chunk (the keyword
        index has nothing to do for them)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, chunk_id, kind FROM ops WHERE seq > ? ORDER BY seq LIMIT ?",
                (mark, limit)).fetchall()
        if not rows:
            return mark, []
        ids = (r[1] for r in rows if vector_ops or r[2] != backlog.VECTOR_OP)
        return int(rows[-1][0]), list(dict.fromkeys(ids))

    def prune_ops(self, upto: int) -> None:
        """Forget ops every index has persisted."""
        with self.transaction() as db:
            db.execute("DELETE FROM ops WHERE seq <= ?", (upto,))


def _iso_day(value: int | None) -> str | None:
    """20240501 -> '2024-05-01'."""
    if not value:
        return None
    return f"{value // 10000:04d}-{value // 100 % 100:02d}-{value % 100:02d}"


def date_int(iso: str | None) -> int | None:
    """'2024-05-01' -> 20240501 (the form date filters compare)."""
    if not iso:
        return None
    try:
        y, m, d = (int(p) for p in iso[:10].split("-"))
    except ValueError:
        return None
    return y * 10000 + m * 100 + d
