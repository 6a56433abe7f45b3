"""The catalog's chunks as search and the index writers read them, the titles of the exact
leg, and the ops journal every derived index replays.

A part of ``Catalog`` (ragd.daemon.stores.catalog), which inherits it; the source and
container writes build on its journal (``_journal``, ``chunk_ids_of``) and titles.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ragd.daemon.stores import backlog, boilerplate
from ragd.daemon.stores.sqlite_base import LockedConnection


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


class CatalogChunks(LockedConnection):
    """Chunk reads, titles and the ops journal."""

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

    # -- titles -------------------------------------------------------------------------------
    @staticmethod
    def _set_titles(db: sqlite3.Connection, source_id: int, title: str,
                    metadata: dict[str, Any]) -> None:
        """Record a source's title and aliases for ``titles_equal``."""
        db.execute("DELETE FROM source_titles WHERE source_id=?", (source_id,))
        aliases = metadata.get("aliases") or []
        names = [title, *(a for a in aliases[:100] if isinstance(a, str))]
        db.executemany("INSERT OR IGNORE INTO source_titles (title, source_id) VALUES (?, ?)",
                       ((n.strip().lower(), source_id) for n in names if n.strip()))

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
    def chunk_ids_of(self, db: sqlite3.Connection, source_id: int) -> list[int]:
        rows = db.execute("SELECT id FROM chunks WHERE source_id=?", (source_id,)).fetchall()
        return [r[0] for r in rows]

    def _journal(self, db: sqlite3.Connection, chunk_ids: Iterable[int]) -> None:
        db.executemany("INSERT INTO ops (chunk_id) VALUES (?)", ((i,) for i in chunk_ids))

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
