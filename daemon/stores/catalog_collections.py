"""The catalog's collections: creating and listing them, and the counts and skip lists that
status, rag_collection_info and the tray show per collection.

A part of ``Catalog`` (ragd.daemon.stores.catalog), which inherits it; like the other
``catalog_*`` modules it works on the catalog's one connection, under its lock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ragd.daemon.stores.sqlite_base import LockedConnection


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


class CatalogCollections(LockedConnection):
    """Collections and their per-collection counts."""

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
