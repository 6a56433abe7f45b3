"""The catalog's containers (decision 0015): files that hold many documents (an mbox, a
Maildir message, a book's folder), how far each was read, the documents read from them by key,
the other places the same document was seen, and moving a document to one of those when its
container loses it.

A part of ``Catalog`` (ragd.daemon.stores.catalog), which inherits it; a source commit records
its containers through ``_put_containers`` in the same transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ragd.daemon.stores.catalog_chunks import CatalogChunks


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


class CatalogContainers(CatalogChunks):
    """Containers, keyed documents and their copies."""

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


def _iso_day(value: int | None) -> str | None:
    """20240501 -> '2024-05-01'."""
    if not value:
        return None
    return f"{value // 10000:04d}-{value // 100 % 100:02d}-{value % 100:02d}"
