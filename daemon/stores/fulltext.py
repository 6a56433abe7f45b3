"""Whoosh full-text store: BM25F over title, headings and text, with filter fields.

Whoosh-Reloaded (imported as ``whoosh``) deletes and updates an order of magnitude faster than
Whoosh 2.7.4 (ARCHITECTURE.md). One writer per batch: deletes and adds in the same commit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from daemon.stores import read_json, write_json_atomic
from daemon.stores.catalog import ChunkRow

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1"


def _analyzer():  # type: ignore[no-untyped-def]
    from whoosh.analysis import StemmingAnalyzer
    from whoosh.lang.porter2 import stem

    # The default Porter stemmer turns "running" into "runn"; porter2 does not.
    return StemmingAnalyzer(stemfn=stem)


def _schema():  # type: ignore[no-untyped-def]
    from whoosh.fields import ID, KEYWORD, NUMERIC, TEXT, Schema

    ana = _analyzer()
    return Schema(
        chunk_id=ID(stored=True, unique=True),
        title=TEXT(analyzer=ana, field_boost=3.0),
        headings=TEXT(analyzer=ana, field_boost=2.0),
        content=TEXT(analyzer=ana, phrase=True),
        collection=ID,
        source_type=ID,
        folders=KEYWORD(commas=True),
        tags=KEYWORD(commas=True, lowercase=True),
        date=NUMERIC(int, bits=32),
        sender=ID,
        author=ID,
    )


def ancestors(path: str) -> list[str]:
    """'a/b/c.md' -> ['a', 'a/b']: every folder a path lies under."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def tag_ancestors(tags: Sequence[str]) -> list[str]:
    """Nested tags match their parents, as in Obsidian: 'a/b' is also 'a'."""
    out: set[str] = set()
    for t in tags:
        parts = t.split("/")
        out.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return sorted(out)


def _people(meta: Mapping[str, Any], key: str) -> str:
    value = meta.get(key)
    if isinstance(value, list):
        value = "; ".join(str(v) for v in value)
    return str(value).lower() if value else ""


def document_fields(row: ChunkRow) -> dict[str, Any]:
    """The Whoosh document of one chunk."""
    doc: dict[str, Any] = {
        "chunk_id": str(row.id),
        "title": row.title,
        "headings": " ".join(row.heading_path),
        "content": row.text,
        "collection": row.collection,
        "source_type": row.source_type,
        "folders": ",".join(ancestors(row.path)),
        "tags": ",".join(tag_ancestors(row.tags)),
    }
    if row.date is not None:
        doc["date"] = int(row.date)
    sender = _people(row.metadata, "sender")
    if sender:
        doc["sender"] = sender
    author = _people(row.metadata, "authors")
    if author:
        doc["author"] = author
    return doc


class WhooshStore:
    name = "whoosh"
    needs_vectors = False

    def __init__(self, directory: Path) -> None:
        from whoosh import index

        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._state_file = self.dir / "ragd-state.json"
        self._lock = threading.RLock()
        self._local = threading.local()
        state = read_json(self._state_file)
        if index.exists_in(str(self.dir)) and state.get("schema") == SCHEMA_VERSION:
            self._ix = index.open_dir(str(self.dir))
            self._mark = int(state.get("mark", 0))
        else:
            self._ix = index.create_in(str(self.dir), _schema())
            self._mark = 0
            write_json_atomic(self._state_file, {"mark": 0, "schema": SCHEMA_VERSION})

    @property
    def index(self):  # type: ignore[no-untyped-def]
        return self._ix

    @property
    def mark(self) -> int:
        return self._mark

    @property
    def persisted_mark(self) -> int:
        # Every apply commits, so what is applied is on disk.
        return self._mark

    def apply(self, rows: Sequence[ChunkRow], deletes: Sequence[int], mark: int,
              vectors: Mapping[int, np.ndarray]) -> None:
        with self._lock:
            writer = self._ix.writer(timeout=30)
            try:
                for cid in [r.id for r in rows] + list(deletes):
                    writer.delete_by_term("chunk_id", str(cid))
                for row in rows:
                    writer.add_document(**document_fields(row))
            except BaseException:
                writer.cancel()
                raise
            writer.commit()
            self._mark = max(self._mark, mark)
            write_json_atomic(self._state_file, {"mark": self._mark, "schema": SCHEMA_VERSION})

    def searcher(self):  # type: ignore[no-untyped-def]
        """A per-thread searcher, refreshed when a newer commit exists."""
        s = getattr(self._local, "searcher", None)
        if s is None or not s.up_to_date():
            # Not Searcher.refresh(): it reuses segment readers whose deletion sets are stale,
            # so documents deleted in an existing segment would still be found.
            if s is not None:
                s.close()
            s = self._ix.searcher()
            self._local.searcher = s
        return s

    def search(self, query: Any, k: int, filter_query: Any = None) -> list[tuple[int, float]]:
        if k <= 0:
            return []
        results = self.searcher().search(query, limit=k, filter=filter_query)
        return [(int(hit["chunk_id"]), float(hit.score)) for hit in results]

    def save(self) -> None:
        """Nothing to do: each apply is a commit."""

    def ids(self) -> set[int]:
        with self._ix.searcher() as s:
            return {int(f["chunk_id"]) for f in s.all_stored_fields()}

    def reset(self, fingerprint: str) -> None:
        from whoosh import index

        with self._lock:
            self._ix = index.create_in(str(self.dir), _schema())
            self._local = threading.local()
            self._mark = 0
            write_json_atomic(self._state_file, {"mark": 0, "schema": SCHEMA_VERSION})

    def close(self) -> None:
        s = getattr(self._local, "searcher", None)
        if s is not None:
            s.close()
