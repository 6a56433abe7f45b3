"""The catalog's embedding cache (vectors by fingerprint and text hash, so a text is embedded
once) and the embedding backlog of chunks still waiting for theirs.

A part of ``Catalog`` (ragd.daemon.stores.catalog), which inherits it; a source commit stores
its new vectors through ``_insert_vectors`` in the same transaction.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ragd.daemon.stores import backlog
from ragd.daemon.stores.catalog_chunks import ChunkRow
from ragd.daemon.stores.sqlite_base import LockedConnection


def text_hash(text: str) -> str:
    """The embedding-cache key of a text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CatalogVectors(LockedConnection):
    """Cached embeddings and the embedding backlog."""

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

    def vectors_for(self, fingerprint: str, rows: Sequence[ChunkRow]) -> dict[int, np.ndarray]:
        cached = self.cached_vectors(fingerprint, sorted({r.embed_hash for r in rows}))
        return {r.id: cached[r.embed_hash] for r in rows if r.embed_hash in cached}
