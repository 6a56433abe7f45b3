"""Catalog reads for the code tools (decision 0030): a code group's symbols by file or name,
their chunks, and the counts coderag_status reports. Read-only, under the catalog's lock."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ragd.daemon.stores.catalog import Catalog


@dataclass(frozen=True)
class SymbolRow:
    collection: str
    path: str  # the source key
    title: str
    metadata: dict[str, Any]
    text: str  # its chunks' text, in order


_BASE = """SELECT c.name, s.path, s.title, s.metadata, s.id FROM sources s
           JOIN collections c ON c.id = s.collection_id
           WHERE c.type = 'code' AND s.status = 'ok' AND s.source_type = 'code'"""


def _rows(catalog: Catalog, where: str, args: list[Any], limit: int) -> list[SymbolRow]:
    with catalog._lock:
        db = catalog._db
        found = db.execute(f"{_BASE} AND {where} LIMIT ?", [*args, limit]).fetchall()
        out = []
        for name, path, title, meta, sid in found:
            texts = [r[0] for r in db.execute(
                "SELECT text FROM chunks WHERE source_id=? AND ordinal >= 0 ORDER BY ordinal",
                (sid,))]
            out.append(SymbolRow(name, path, title, json.loads(meta or "{}"), "\n".join(texts)))
    out.sort(key=lambda r: (r.metadata.get("file_path", ""), r.metadata.get("start_line", 0),
                            r.metadata.get("part", 0)))
    return out


def symbols_in_file(catalog: Catalog, file_path: str, limit: int = 2000) -> list[SymbolRow]:
    """The symbols of a file, by its path in its repository (or ``alias/path``)."""
    return _rows(catalog, "(json_extract(s.metadata, '$.file_path') = ? OR "
                 "json_extract(s.metadata, '$.repository') || '/' || "
                 "json_extract(s.metadata, '$.file_path') = ?)", [file_path, file_path], limit)


def symbols_named(catalog: Catalog, name: str, limit: int = 50) -> list[SymbolRow]:
    """Symbols called ``name``, or ``Class.name``."""
    return _rows(catalog, "(json_extract(s.metadata, '$.symbol_name') = ? OR "
                 r"json_extract(s.metadata, '$.symbol_name') LIKE ? ESCAPE '\')",
                 [name, "%." + name.replace("%", "").replace("_", "\\_")], limit)


def code_counts(catalog: Catalog) -> dict[str, Any]:
    """Chunks, languages and the last indexing time of every code group."""
    with catalog._lock:
        db = catalog._db
        groups = db.execute("SELECT COUNT(*), MAX(last_indexed) FROM collections "
                            "WHERE type='code'").fetchone()
        chunks = db.execute("SELECT COUNT(*) FROM chunks ch JOIN sources s ON s.id=ch.source_id"
                            " JOIN collections c ON c.id=s.collection_id WHERE c.type='code'"
                            ).fetchone()[0]
        languages = [r[0] for r in db.execute(
            "SELECT DISTINCT json_extract(s.metadata, '$.language') FROM sources s "
            "JOIN collections c ON c.id=s.collection_id WHERE c.type='code' "
            "AND s.source_type='code' AND s.status='ok'") if r[0]]
    return {"groups": groups[0], "last_indexed": groups[1], "chunks": chunks,
            "languages": sorted(languages)}
