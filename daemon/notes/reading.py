"""Read one note: its text (or one section), properties, tags, links and backlinks, and an etag.

The file is read from disk through the containment rule (``ragd.daemon.sources.containment``), so a
note read is the note as saved now, and a link that leads out of the vault is refused like any
other read. The etag is the SHA-256 of the file's bytes: every write takes it back as
``if_match`` (``ragd.daemon.notes.writing``), so a change made in between is never overwritten.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragd.daemon.errors import InvalidArgument, PathRefused
from ragd.daemon.models import Document, Skip
from ragd.daemon.notes.places import clean_rel
from ragd.daemon.sources.files import read_bytes
from ragd.daemon.sources.vault import (
    _frontmatter_tags,
    _inline_tags,
    _mask_code,
    parse_note,
)
from ragd.daemon.stores import links
from ragd.daemon.stores.catalog import Collection
from ragd.daemon.text.decoding import decode_text
from ragd.daemon.text.headings import find_headings

MAX_NOTE_BYTES = 20 * 1024 * 1024  # what a note read loads at most (a note, not a video)
_RESOLVERS: dict[int, tuple[tuple[int, float, int], links.Resolver]] = {}


@dataclass(frozen=True)
class Loaded:
    """A file of the vault as read now."""

    rel: str
    data: bytes
    size: int
    mtime: float

    @property
    def etag(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def etag_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_row(catalog: Any, coll: Collection, rel: str) -> Any:
    """The catalog's row for ``rel`` (exactly, then ignoring case), or None."""
    with catalog.reading() as db:
        row = db.execute("SELECT id, path, title, metadata FROM sources WHERE collection_id=?"
                         " AND path=? AND status='ok'", (coll.id, rel)).fetchone()
        if row is None:
            row = db.execute("SELECT id, path, title, metadata FROM sources WHERE"
                             " collection_id=? AND lower(path)=lower(?) AND status='ok'"
                             " ORDER BY path LIMIT 1", (coll.id, rel)).fetchone()
    return row


def locate(catalog: Any, coll: Collection, raw: Any, param: str,
           exclude: tuple[str, ...]) -> str:
    """The vault-relative path a tool's ``raw`` path names: as given, or with ``.md`` added,
    or a note of that path in another case. Refused paths never reach the disk."""
    rel = clean_rel(raw, param, exclude)
    tries = [rel] if rel.lower().endswith(".md") else [rel, rel + ".md"]
    root = Path(coll.root)
    for candidate in tries:
        if (root / candidate).is_file() or (root / candidate).is_symlink():
            return candidate
    for candidate in tries:
        row = source_row(catalog, coll, candidate)
        if row is not None:
            return str(row["path"])
    raise PathRefused(param, f"no note {rel!r} in vault {coll.name!r}",
                      "rag_list_notes (list_documents, search_notes in the vault and omni "
                      "tools) shows the vault's paths; a search finds a note by its content",
                      code="not_found")


def load(coll: Collection, rel: str, param: str, max_bytes: int = MAX_NOTE_BYTES) -> Loaded:
    """The file's bytes, read inside the vault only; a Skip becomes a refusal naming ``param``
    with the skip's code (``outside_root`` for a link out of the vault)."""
    data = read_bytes(coll.root, rel, max_bytes)
    if isinstance(data, Skip):
        raise PathRefused(param, f"{rel!r} cannot be read: {data.detail}",
                          "name a note inside the vault", code=data.code)
    st = (Path(coll.root) / rel).stat()
    return Loaded(rel, data, len(data), st.st_mtime)


def resolver(catalog: Any, coll: Collection) -> links.Resolver:
    """The link resolver of a vault, built again only when its notes changed."""
    with catalog.reading() as db:
        stamp = db.execute("SELECT COUNT(*), COALESCE(MAX(indexed_at), 0), COALESCE(MAX(id), 0)"
                           " FROM sources WHERE collection_id=?", (coll.id,)).fetchone()
        key = (int(stamp[0]), float(stamp[1]), int(stamp[2]))
        cached = _RESOLVERS.get(coll.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        built = links.Resolver(links.names(db, coll.id))
    _RESOLVERS[coll.id] = (key, built)
    return built


def _section(body: str, heading: str) -> tuple[str, dict[str, Any]]:
    """The text under ``heading`` (its own line included) up to the next heading of the same
    or a higher level. Matched by text, ignoring case and '#' marks."""
    wanted = " ".join(heading.lstrip("#").split()).lower()
    found = find_headings(body)
    for i, h in enumerate(found):
        if " ".join(h.text.split()).lower() != wanted:
            continue
        end = next((n.start for n in found[i + 1:] if n.level <= h.level), len(body))
        line = body.count("\n", 0, h.start) + 1
        return body[h.start:end].rstrip() + "\n", {"heading": h.text, "level": h.level,
                                                   "line": line}
    listed = "; ".join(h.text for h in found[:30]) or "none"
    raise InvalidArgument("section", f"no heading {heading!r} in this note (headings: "
                          f"{listed})", "pass one of the note's headings, or omit section "
                          "for the whole note")


def _link_rows(items: list[links.StoredLink], resolve: Any) -> list[dict[str, Any]]:
    return [{"kind": lk.kind, "target": lk.target, "heading": lk.heading, "alias": lk.alias,
             **resolve(lk)} for lk in items]


def read(catalog: Any, coll: Collection, raw_path: Any, *, section: str | None,
         exclude: tuple[str, ...], max_chars: int) -> dict[str, Any]:
    """The ragd ``note_read`` answer (see the module doc)."""
    rel = locate(catalog, coll, raw_path, "path", exclude)
    loaded = load(coll, rel, "path")
    doc = parse_note(rel, loaded.data)
    if isinstance(doc, Skip):
        if doc.code != "empty":
            raise PathRefused("path", f"{rel!r} is not a readable note: {doc.detail}",
                              "read a markdown note", code=doc.code)
        doc = Document(title=Path(rel).stem, text="", source_type="markdown",
                       metadata={"folder": rel.rpartition("/")[0]})
    meta = doc.metadata
    decoded = decode_text(loaded.data)
    text = decoded[0] if not isinstance(decoded, Skip) else doc.text
    part: dict[str, Any] | None = None
    if section:
        text, part = _section(doc.text, section)
    total = len(text)
    truncated = total > max_chars
    if truncated:
        text = text[:max_chars]
    fm = meta.get("frontmatter") or {}
    visible = _mask_code(doc.text)
    res = resolver(catalog, coll)
    row = source_row(catalog, coll, rel)
    outgoing: list[links.StoredLink] = []
    incoming: list[links.StoredLink] = []
    if row is not None:
        with catalog.reading() as db:
            outgoing = links.outgoing(db, row["id"])
            note = links.NoteName(row["id"], row["path"],
                                  tuple(a for a in meta.get("aliases") or []))
            incoming = links.backlinks(db, coll.id, note, res)

    def where(lk: links.StoredLink) -> dict[str, Any]:
        found = res.resolve(lk.target, rel)
        return {"path": res.path_of.get(found) if found is not None else None}

    def whence(lk: links.StoredLink) -> dict[str, Any]:
        return {"path": res.path_of.get(lk.source_id)}

    return {
        "vault": coll.name, "path": rel, "title": doc.title,
        "folder": rel.rpartition("/")[0], "etag": loaded.etag, "size_bytes": loaded.size,
        "modified": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(loaded.mtime)),
        "content": text, "section": part, "truncated": truncated, "total_chars": total,
        "headings": [{"level": h.level, "text": h.text} for h in find_headings(doc.text)],
        "frontmatter": fm, "tags": list(meta.get("tags") or []),
        "frontmatter_tags": sorted(set(_frontmatter_tags(fm))) if isinstance(fm, dict) else [],
        "inline_tags": sorted(set(_inline_tags(visible))),
        "aliases": list(meta.get("aliases") or []),
        "links": _link_rows(outgoing, where),
        "backlinks": _link_rows(incoming, whence),
        "indexed": row is not None,
    }


def neighbours(catalog: Any, chunk_id: int, before: int, after: int) -> dict[str, Any]:
    """A search hit's chunk with up to ``before`` chunks before it and ``after`` after it, in
    the note's order: the passage around a hit without reading the whole note."""
    with catalog.reading() as db:
        hit = db.execute("SELECT source_id, ordinal FROM chunks WHERE id=?",
                         (chunk_id,)).fetchone()
        if hit is None:
            raise InvalidArgument("chunk_id", f"no chunk {chunk_id} (the note changed since "
                                  "the search, or the id is wrong)",
                                  "search again and pass a result's metadata.chunk_id")
        rows = db.execute("SELECT id, ordinal, text, heading_path FROM chunks WHERE"
                          " source_id=? AND ordinal >= 0 ORDER BY ordinal",
                          (hit["source_id"],)).fetchall()
        src = db.execute("SELECT s.path, s.title, c.name FROM sources s JOIN collections c"
                         " ON c.id=s.collection_id WHERE s.id=?",
                         (hit["source_id"],)).fetchone()
    at = next((i for i, r in enumerate(rows) if r["id"] == chunk_id), 0)
    picked = rows[max(0, at - before):at + after + 1]
    return {"collection": src["name"], "path": src["path"], "title": src["title"],
            "chunk_id": chunk_id, "chunk_count": len(rows),
            "chunks": [{"chunk_id": r["id"], "chunk_index": r["ordinal"],
                        "heading_path": json.loads(r["heading_path"]), "text": r["text"],
                        "hit": r["id"] == chunk_id} for r in picked]}
