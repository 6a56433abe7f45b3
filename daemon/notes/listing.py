"""What a vault holds, from the catalog: notes by folder, tag or glob, folders, tags with
counts, a frontmatter field's values, the folder tree and path search.

The catalog is what was indexed, so these answer at once, never walk the disk, and list
exactly what search can find. A note saved a moment ago is listed once its save is indexed
(the watcher's hint, or the write tool's own wait).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections import Counter
from typing import Any

from ragd.daemon.errors import InvalidArgument
from ragd.daemon.stores.catalog import Collection

MAX_LIST = 10_000  # rows one listing answers at most (`total` says how many matched)
MAX_PATTERN_CHARS = 512


def _notes(catalog: Any, coll: Collection) -> list[Any]:
    with catalog.reading() as db:
        return db.execute(
            "SELECT s.id, s.path, s.title, s.size, s.mtime_ns, s.source_type, s.metadata,"
            " (SELECT group_concat(tag, char(31)) FROM source_tags t WHERE t.source_id=s.id)"
            " AS tags FROM sources s WHERE s.collection_id=? AND s.status='ok'"
            " AND s.container IS NULL ORDER BY s.path", (coll.id,)).fetchall()


def _tags(row: Any) -> list[str]:
    return row["tags"].split("\x1f") if row["tags"] else []


def _folder_of(path: str) -> str:
    return path.rpartition("/")[0]


def _has_tag(tags: list[str], tag: str) -> bool:
    """A tag filter matches the tag and the tags nested under it (#area matches #area/sub)."""
    return any(t == tag or t.startswith(tag + "/") for t in tags)


def _iso(mtime_ns: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(mtime_ns / 1e9, tz=dt.UTC).isoformat(timespec="seconds")


def note_entry(row: Any) -> dict[str, Any]:
    kind = "note" if row["path"].lower().endswith(".md") else "attachment"
    return {"path": row["path"], "title": row["title"], "folder": _folder_of(row["path"]),
            "kind": kind, "tags": _tags(row), "size_bytes": row["size"],
            "modified": _iso(row["mtime_ns"])}


def list_notes(catalog: Any, coll: Collection, *, folder: str | None = None,
               tag: str | None = None, glob: str | None = None, regex: str | None = None,
               include_attachments: bool = True, limit: int = 1000) -> dict[str, Any]:
    """Notes (and attachments) of a vault whose folder, tag, glob and path regex all match.
    ``folder`` matches the notes directly in it and below it; ``glob`` is a Unix glob over
    the whole relative path (``*`` crosses folders); ``regex`` is searched in the path,
    ignoring case."""
    pattern = _regex(regex) if regex else None
    wanted = (tag or "").strip().lstrip("#").lower()
    prefix = (folder or "").strip("/")
    out: list[dict[str, Any]] = []
    total = 0
    for row in _notes(catalog, coll):
        path = row["path"]
        if not include_attachments and not path.lower().endswith(".md"):
            continue
        if prefix and not (path.startswith(prefix + "/")):
            continue
        if wanted and not _has_tag(_tags(row), wanted):
            continue
        if glob and not fnmatch.fnmatchcase(path, glob):
            continue
        if pattern is not None and not pattern.search(path):
            continue
        total += 1
        if len(out) < min(limit, MAX_LIST):
            out.append(note_entry(row))
    return {"vault": coll.name, "notes": out, "total": total, "truncated": total > len(out)}


def _regex(text: str) -> re.Pattern[str]:
    if len(text) > MAX_PATTERN_CHARS:
        raise InvalidArgument("pattern", f"is too long ({len(text):,} characters; at most "
                              f"{MAX_PATTERN_CHARS})", "pass a shorter pattern")
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error as exc:
        raise InvalidArgument("pattern", f"is not a valid regular expression ({exc})",
                              "escape special characters, e.g. \\. for a dot") from None


def folders(catalog: Any, coll: Collection) -> dict[str, Any]:
    """Every folder that holds notes (at any depth below it), '' for the root, with the
    number of notes directly in it and below it."""
    direct: Counter[str] = Counter()
    below: Counter[str] = Counter()
    for row in _notes(catalog, coll):
        folder = _folder_of(row["path"])
        direct[folder] += 1
        parts = folder.split("/") if folder else []
        below[""] += 1
        for i in range(1, len(parts) + 1):
            below["/".join(parts[:i])] += 1
    return {"vault": coll.name, "folders": [
        {"folder": f, "notes": direct.get(f, 0), "notes_below": below[f]}
        for f in sorted(below)]}


def tags(catalog: Any, coll: Collection) -> dict[str, Any]:
    """Every tag of the vault with the number of notes that carry it (most used first)."""
    with catalog.reading() as db:
        rows = db.execute(
            "SELECT t.tag, COUNT(*) AS n FROM source_tags t JOIN sources s ON s.id=t.source_id"
            " WHERE s.collection_id=? AND s.status='ok' GROUP BY t.tag ORDER BY n DESC, t.tag",
            (coll.id,)).fetchall()
    return {"vault": coll.name, "tags": [{"tag": r["tag"], "count": r["n"]} for r in rows]}


def _values(value: Any) -> list[str]:
    if isinstance(value, list):
        return [v for item in value for v in _values(item)]
    if isinstance(value, bool) or value is None or isinstance(value, dict):
        return []
    return [str(value).strip()] if str(value).strip() else []


def field_values(catalog: Any, coll: Collection, field: str) -> list[str]:
    """The distinct values of one frontmatter field across the vault, sorted. ``tags`` is the
    notes' tags as search filters them (frontmatter and inline, lowercased)."""
    if field in ("tags", "tag"):
        return sorted({t["tag"] for t in tags(catalog, coll)["tags"]})
    found: set[str] = set()
    for row in _notes(catalog, coll):
        fm = json.loads(row["metadata"]).get("frontmatter") or {}
        if isinstance(fm, dict) and field in fm:
            found.update(_values(fm[field]))
    return sorted(found)


def frontmatter_fields(catalog: Any, coll: Collection, limit: int = 50) -> list[str]:
    """The frontmatter keys the vault's notes use, most used first."""
    used: Counter[str] = Counter()
    for row in _notes(catalog, coll):
        fm = json.loads(row["metadata"]).get("frontmatter") or {}
        if isinstance(fm, dict):
            used.update(k for k in fm if isinstance(k, str))
    return [k for k, _ in used.most_common(limit)]


def structure(catalog: Any, coll: Collection, root_path: str, depth: int) -> dict[str, Any]:
    """The folder tree under ``root_path`` as nested objects: a folder is an object of its
    entries, or "..." past ``depth``; a note is the string "file" (reference 001's shape)."""
    tree: dict[str, Any] = {}
    prefix = root_path.strip("/")
    for row in _notes(catalog, coll):
        path = row["path"]
        if prefix:
            if not path.startswith(prefix + "/"):
                continue
            path = path[len(prefix) + 1:]
        parts = path.split("/")
        node = tree
        for level, part in enumerate(parts[:-1]):
            if level + 1 >= depth:
                node[part] = "..."
                break
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        else:
            if parts[-1].lower().endswith(".md"):
                node[parts[-1]] = "file"
    return tree


def stats(catalog: Any, coll: Collection) -> dict[str, Any]:
    """Counts of a vault: notes, attachments, chunks, folders, tags; embedding backlog."""
    rows = _notes(catalog, coll)
    notes = sum(1 for r in rows if r["path"].lower().endswith(".md"))
    with catalog.reading() as db:
        chunks = db.execute("SELECT COUNT(*) FROM chunks ch JOIN sources s ON"
                            " s.id=ch.source_id WHERE s.collection_id=?",
                            (coll.id,)).fetchone()[0]
        links_n = db.execute("SELECT COUNT(*) FROM note_links WHERE collection_id=?",
                             (coll.id,)).fetchone()[0]
    folder_set = {_folder_of(r["path"]) for r in rows}
    exts = sorted({r["path"].rpartition(".")[2].lower() for r in rows
                   if not r["path"].lower().endswith(".md") and "." in r["path"]})
    return {"vault": coll.name, "vault_path": coll.root, "document_count": notes,
            "attachment_count": len(rows) - notes, "file_count": len(rows),
            "chunk_count": int(chunks), "folder_count": len(folder_set),
            "link_count": int(links_n), "attachment_extensions": exts}
