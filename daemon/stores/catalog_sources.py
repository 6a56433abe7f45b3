"""The catalog's source writes: committing new or changed sources with their chunks in one
transaction that also journals them, and deleting, moving, touching and skipping sources.

A part of ``Catalog`` (ragd.daemon.stores.catalog), which inherits it; it builds on the journal
and titles (catalog_chunks), the containers (catalog_containers) and the embedding cache and
backlog (catalog_vectors).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragd.daemon.models import ChunkDraft, SourceRecord
from ragd.daemon.stores import backlog
from ragd.daemon.stores.catalog_containers import CatalogContainers, ContainerRecord
from ragd.daemon.stores.catalog_vectors import CatalogVectors, text_hash


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


class CatalogSources(CatalogContainers, CatalogVectors):
    """Source writes: commits, deletes, moves, touches and skips."""

    # -- sources ------------------------------------------------------------------------------
    def source_records(self, collection_id: int) -> list[SourceRecord]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, path, size, mtime_ns, sha256, status, skip_code, indexed_at FROM sources"
                " WHERE collection_id=?",
                (collection_id,),
            ).fetchall()
        return [SourceRecord(**dict(r)) for r in rows]

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


def date_int(iso: str | None) -> int | None:
    """'2024-05-01' -> 20240501 (the form date filters compare)."""
    if not iso:
        return None
    try:
        y, m, d = (int(p) for p in iso[:10].split("-"))
    except ValueError:
        return None
    return y * 10000 + m * 100 + d
