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
        texts = _texts(db, [row[4] for row in found])
        out = [SymbolRow(name, path, title, json.loads(meta or "{}"), texts.get(sid, ""))
               for name, path, title, meta, sid in found]
    out.sort(key=lambda r: (r.metadata.get("file_path", ""), r.metadata.get("start_line", 0),
                            r.metadata.get("part", 0)))
    return out


def joined(pieces: list[tuple[int, int, str]]) -> str:
    """A document's text from its chunks, (start, end, text) with start/end offsets into it:
    chunks overlap (the chunker repeats a sentence or a line across a cut), so each character
    is taken once; a gap between chunks (text no chunk kept) is one "…" line."""
    out: list[str] = []
    pos = None
    for start, end, text in sorted(pieces):
        if pos is None or start >= pos:
            if pos is not None and start > pos:
                out.append("\n…\n")
            out.append(text)
        elif end > pos:
            out.append(text[pos - start:])
        pos = end if pos is None else max(pos, end)
    return "".join(out)


def _texts(db: Any, source_ids: list[int]) -> dict[int, str]:
    pieces: dict[int, list[tuple[int, int, str]]] = {}
    for start in range(0, len(source_ids), 900):
        part = source_ids[start:start + 900]
        for sid, a, b, text in db.execute(
                "SELECT source_id, start, end, text FROM chunks WHERE ordinal >= 0 AND"
                f" source_id IN ({','.join('?' * len(part))})", part):
            pieces.setdefault(int(sid), []).append((int(a), int(b), str(text)))
    return {sid: joined(p) for sid, p in pieces.items()}


def source_texts(catalog: Catalog, source_ids: list[int]) -> dict[int, str]:
    """The whole text of each of these sources (a symbol: its summary, then its code), put
    together from its chunks."""
    with catalog._lock:
        return _texts(catalog._db, source_ids)


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
