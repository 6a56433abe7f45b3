"""The vault's link graph: every wikilink, embed and markdown link of every note (decision 0028).

Links are kept in ``note_links`` by triggers on ``chunks`` (a body chunk's links) and on
``sources`` (links in a note's properties, which Obsidian counts too), as ``chunk_shapes`` is
(decision 0026): every write path (commits, moves, skips, deletes) keeps the graph without a
call, and an older catalog gets its links once when the table is created.

What a link points at is decided when it is asked, not when it is stored, by
:class:`Resolver`, as Obsidian resolves it: case-insensitive; a path relative to the linking
note, then from the vault root, then the shortest path among notes of that name (or whose path
ends so); an alias only when no file matches. A note created or renamed later therefore
changes what an old link means, as it does in Obsidian, without rewriting any row.
"""

from __future__ import annotations

import json
import posixpath
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ragd.daemon.sources.vault import _mask_code

KINDS = ("link", "embed", "md")
_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
# [text](target) with a relative target: no scheme, no mail, not a bare #anchor. An image's
# ![alt](file.png) is an embed in Obsidian.
_MDLINK = re.compile(r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(\s*(<[^<>\n]+>|[^)\s]+)"
                     r"(?:\s+\"[^\"\n]*\")?\s*\)")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


@dataclass(frozen=True)
class Link:
    """One link as written: ``kind`` (link, embed, md), its ``target`` (a name or a path,
    without #heading or |alias), ``heading`` and ``alias`` ('' when absent), and where it
    sits in the text it was found in (``start``, ``end``: the whole ``[[...]]`` or
    ``[...](...)``)."""

    kind: str
    target: str
    heading: str
    alias: str
    start: int
    end: int

    @property
    def key(self) -> str:
        return link_key(self.target)


def link_key(target: str) -> str:
    """What a link is looked up by: its last path component, lowercased, without ``.md``."""
    name = target.replace("\\", "/").rstrip("/").rpartition("/")[2].strip().lower()
    return name[:-3] if name.endswith(".md") else name


def parse_links(text: str, *, masked: bool = False) -> list[Link]:
    """Every link of ``text`` in order, outside code and HTML (where Obsidian sees none)."""
    visible = text if masked else _mask_code(text)
    found: list[Link] = []
    for m in _WIKILINK.finditer(visible):
        inner = text[m.start(2):m.end(2)]
        # In tables the alias pipe is escaped as '\|'.
        target, _, alias = inner.replace("\\|", "|").partition("|")
        target, _, heading = target.partition("#")
        kind = "embed" if m.group(1) else "link"
        found.append(Link(kind, target.strip(), heading.strip(), alias.strip(), m.start(),
                          m.end()))
    if "](" in visible:
        for m in _MDLINK.finditer(visible):
            raw = text[m.start(3):m.end(3)].strip("<>").strip()
            if not raw or raw.startswith("#") or _SCHEME.match(raw):
                continue
            path, _, heading = raw.partition("#")
            kind = "embed" if m.group(1) else "md"
            found.append(Link(kind, unquote(path).strip(), unquote(heading).strip(),
                              m.group(2).strip(), m.start(), m.end()))
        found.sort(key=lambda link: link.start)
    return found


def _links_json(text: str | None) -> str:
    """``ragd_links``: the links of a chunk as JSON rows for the triggers."""
    if not text or ("[[" not in text and "](" not in text):
        return "[]"
    return json.dumps([[lk.kind, lk.target[:1000], lk.heading[:1000], lk.alias[:1000], lk.key]
                       for lk in parse_links(text) if lk.target or lk.heading][:1000])


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict | list):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _strings(item)


def _properties_links_json(metadata: str | None) -> str:
    """``ragd_property_links``: the links in a note's properties (``author: "[[X]]"``)."""
    if not metadata or "[[" not in metadata:
        return "[]"
    try:
        front = json.loads(metadata).get("frontmatter")
    except (ValueError, AttributeError):
        return "[]"
    return _links_json("\n".join(s for s in _strings(front) if "[[" in s))


_ROW = ", ".join(f"json_extract(j.value, '$[{i}]')" for i in range(5))
_VAULT = "(SELECT kind FROM collections WHERE id = {coll}) = 'vault'"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS note_links (
    source_id INTEGER NOT NULL,
    chunk_id INTEGER,              -- NULL: a link in the note's properties
    collection_id INTEGER NOT NULL,
    kind TEXT NOT NULL,            -- link | embed | md
    target TEXT NOT NULL,          -- as written, without #heading and |alias
    heading TEXT NOT NULL,
    alias TEXT NOT NULL,
    key TEXT NOT NULL              -- link_key(target): what backlinks look up
);
CREATE INDEX IF NOT EXISTS note_links_key ON note_links (collection_id, key);
CREATE INDEX IF NOT EXISTS note_links_source ON note_links (source_id);
CREATE INDEX IF NOT EXISTS note_links_chunk ON note_links (chunk_id);
CREATE TRIGGER IF NOT EXISTS note_links_chunk_insert AFTER INSERT ON chunks
WHEN NEW.ordinal >= 0 AND (NEW.text LIKE '%[[%' OR NEW.text LIKE '%](%')
BEGIN
    INSERT INTO note_links (source_id, chunk_id, collection_id, kind, target, heading, alias, key)
    SELECT NEW.source_id, NEW.id, s.collection_id, {_ROW}
    FROM sources s, json_each(ragd_links(NEW.text)) j
    WHERE s.id = NEW.source_id AND {_VAULT.format(coll="s.collection_id")};
END;
CREATE TRIGGER IF NOT EXISTS note_links_chunk_update AFTER UPDATE OF text ON chunks
WHEN OLD.text IS NOT NEW.text
BEGIN
    DELETE FROM note_links WHERE chunk_id = OLD.id;
    INSERT INTO note_links (source_id, chunk_id, collection_id, kind, target, heading, alias, key)
    SELECT NEW.source_id, NEW.id, s.collection_id, {_ROW}
    FROM sources s, json_each(ragd_links(NEW.text)) j
    WHERE s.id = NEW.source_id AND NEW.ordinal >= 0
      AND {_VAULT.format(coll="s.collection_id")};
END;
CREATE TRIGGER IF NOT EXISTS note_links_chunk_delete AFTER DELETE ON chunks
BEGIN
    DELETE FROM note_links WHERE chunk_id = OLD.id;
END;
CREATE TRIGGER IF NOT EXISTS note_links_source_insert AFTER INSERT ON sources
WHEN NEW.metadata LIKE '%[[%' AND {_VAULT.format(coll="NEW.collection_id")}
BEGIN
    INSERT INTO note_links (source_id, chunk_id, collection_id, kind, target, heading, alias, key)
    SELECT NEW.id, NULL, NEW.collection_id, {_ROW}
    FROM json_each(ragd_property_links(NEW.metadata)) j;
END;
CREATE TRIGGER IF NOT EXISTS note_links_source_update AFTER UPDATE OF metadata ON sources
BEGIN
    DELETE FROM note_links WHERE source_id = OLD.id AND chunk_id IS NULL;
    INSERT INTO note_links (source_id, chunk_id, collection_id, kind, target, heading, alias, key)
    SELECT NEW.id, NULL, NEW.collection_id, {_ROW}
    FROM json_each(ragd_property_links(NEW.metadata)) j
    WHERE {_VAULT.format(coll="NEW.collection_id")};
END;
CREATE TRIGGER IF NOT EXISTS note_links_source_delete AFTER DELETE ON sources
BEGIN
    DELETE FROM note_links WHERE source_id = OLD.id;
END;
"""


def install(db: sqlite3.Connection) -> None:
    """Register the link functions on the catalog's connection, create the table and its
    triggers; a catalog from before them gets its vaults' links once."""
    db.create_function("ragd_links", 1, _links_json, deterministic=True)
    db.create_function("ragd_property_links", 1, _properties_links_json, deterministic=True)
    fresh = db.execute("SELECT 1 FROM sqlite_master WHERE name='note_links'").fetchone()
    db.executescript(_SCHEMA)
    if fresh is None:
        insert = ("INSERT INTO note_links (source_id, chunk_id, collection_id, kind, target,"
                  " heading, alias, key)")
        db.execute(
            f"{insert} SELECT ch.source_id, ch.id, s.collection_id, {_ROW} FROM chunks ch"
            " JOIN sources s ON s.id = ch.source_id JOIN collections c ON c.id = s.collection_id,"
            " json_each(ragd_links(ch.text)) j WHERE ch.ordinal >= 0 AND c.kind = 'vault'")
        db.execute(
            f"{insert} SELECT s.id, NULL, s.collection_id, {_ROW} FROM sources s"
            " JOIN collections c ON c.id = s.collection_id,"
            " json_each(ragd_property_links(s.metadata)) j WHERE c.kind = 'vault'")
    db.commit()


# -- resolution -------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoteName:
    """What resolution needs of one source: its id, vault-relative path and aliases."""

    id: int
    path: str
    aliases: tuple[str, ...] = ()


def _stem(path: str) -> str:
    return path[:-3] if path.lower().endswith(".md") else path


class Resolver:
    """Link targets -> source ids, the way Obsidian resolves them (see the module doc)."""

    def __init__(self, names: Iterable[NoteName]) -> None:
        self.paths: dict[str, int] = {}  # lowercased path, and path without .md -> id
        self.by_name: dict[str, list[tuple[int, str, int]]] = {}  # name -> (len, path, id)
        self.by_alias: dict[str, list[tuple[int, str, int]]] = {}
        self.path_of: dict[int, str] = {}
        for n in names:
            low = n.path.lower()
            self.path_of[n.id] = n.path
            self.paths.setdefault(low, n.id)
            if low.endswith(".md"):
                self.paths.setdefault(low[:-3], n.id)
            entry = (len(n.path), n.path, n.id)
            self.by_name.setdefault(link_key(n.path) if low.endswith(".md")
                                    else low.rpartition("/")[2], []).append(entry)
            for alias in n.aliases:
                self.by_alias.setdefault(alias.strip().lower(), []).append(entry)
        for table in (self.by_name, self.by_alias):
            for entries in table.values():
                entries.sort()

    def resolve(self, target: str, from_path: str) -> int | None:
        """The source a link written in ``from_path`` to ``target`` leads to, or None."""
        t = target.replace("\\", "/").strip().lower()
        if not t:  # [[#Heading]]: a heading of the note itself
            return self.paths.get(from_path.lower())
        if t.startswith("./") or t.startswith("../") or "/" not in t:
            near = posixpath.normpath(posixpath.join(posixpath.dirname(from_path.lower()), t))
            if not near.startswith("../") and near in self.paths:
                return self.paths[near]
        whole = t.lstrip("/")
        if whole in self.paths:
            return self.paths[whole]
        name = link_key(t) if not t.rpartition("/")[2].count(".") or t.endswith(".md") \
            else t.rpartition("/")[2]
        candidates = self.by_name.get(name, [])
        if "/" in whole:  # a partial path: notes whose path ends with it
            tail = "/" + whole
            candidates = [c for c in candidates
                          if c[1].lower().endswith(tail) or _stem(c[1].lower()).endswith(tail)]
        if candidates:
            return candidates[0][2]
        aliases = self.by_alias.get(t)
        return aliases[0][2] if aliases else None


def names(db: sqlite3.Connection, collection_id: int) -> list[NoteName]:
    """Every indexed source of a collection, as the resolver needs it."""
    rows = db.execute(
        "SELECT id, path, json_extract(metadata, '$.aliases') FROM sources"
        " WHERE collection_id=? AND status='ok'", (collection_id,)).fetchall()
    out = []
    for sid, path, aliases in rows:
        try:
            listed = json.loads(aliases) if aliases else []
        except ValueError:
            listed = []
        out.append(NoteName(sid, path, tuple(a for a in listed if isinstance(a, str))))
    return out


@dataclass(frozen=True)
class StoredLink:
    """A row of ``note_links``: who links, how, and to what as written."""

    source_id: int
    kind: str
    target: str
    heading: str
    alias: str


def outgoing(db: sqlite3.Connection, source_id: int) -> list[StoredLink]:
    """A note's links, each (kind, target, heading, alias) once, in a stable order."""
    rows = db.execute(
        "SELECT DISTINCT source_id, kind, target, heading, alias FROM note_links"
        " WHERE source_id=? ORDER BY rowid", (source_id,)).fetchall()
    return [StoredLink(*r) for r in rows]


def pointing_at(db: sqlite3.Connection, collection_id: int, keys: Sequence[str]
                ) -> list[StoredLink]:
    """Links of a collection whose key is one of ``keys`` (candidates for backlinks)."""
    wanted = sorted({k for k in keys if k})
    if not wanted:
        return []
    marks = ",".join("?" * len(wanted))
    rows = db.execute(
        "SELECT DISTINCT source_id, kind, target, heading, alias FROM note_links"
        f" WHERE collection_id=? AND key IN ({marks}) ORDER BY source_id",
        (collection_id, *wanted)).fetchall()
    return [StoredLink(*r) for r in rows]


def backlinks(db: sqlite3.Connection, collection_id: int, note: NoteName,
              resolver: Resolver) -> list[StoredLink]:
    """The links of other notes (or of itself) that resolve to ``note``."""
    keys = [link_key(note.path) if note.path.lower().endswith(".md")
            else note.path.rpartition("/")[2].lower(), *(a.lower() for a in note.aliases)]
    out = []
    for link in pointing_at(db, collection_id, keys):
        src = resolver.path_of.get(link.source_id)
        if src is not None and resolver.resolve(link.target, src) == note.id:
            out.append(link)
    return out


def linked_ids(db: sqlite3.Connection, source_id: int, resolver: Resolver) -> set[int]:
    """The notes ``source_id`` links to (resolved), for suggestions to leave out."""
    src = resolver.path_of.get(source_id, "")
    found = {resolver.resolve(lk.target, src) for lk in outgoing(db, source_id)}
    return {i for i in found if i is not None}


@dataclass(frozen=True)
class Graph:
    """A vault's links resolved once: which notes each note links to, and which link to it
    (each pair once, whatever the number or kind of links between them; no self-links)."""

    out: dict[int, frozenset[int]]
    into: dict[int, frozenset[int]]

    def in_degree(self, note: int) -> int:
        """How many notes link to ``note``: what makes a note a hub."""
        return len(self.into.get(note, ()))

    def out_degree(self, note: int) -> int:
        """How many notes ``note`` links to: what makes a note an index."""
        return len(self.out.get(note, ()))


def graph(db: sqlite3.Connection, collection_id: int, resolver: Resolver) -> Graph:
    """Every link of a collection resolved as Obsidian would (links in properties and embeds
    count: Obsidian's graph counts them too)."""
    rows = db.execute("SELECT DISTINCT source_id, target FROM note_links WHERE collection_id=?",
                      (collection_id,)).fetchall()
    out: dict[int, set[int]] = {}
    into: dict[int, set[int]] = {}
    for source_id, target in rows:
        src = resolver.path_of.get(source_id)
        if src is None or not target:
            continue
        found = resolver.resolve(target, src)
        if found is None or found == source_id:
            continue
        out.setdefault(source_id, set()).add(found)
        into.setdefault(found, set()).add(source_id)
    return Graph({k: frozenset(v) for k, v in out.items()},
                 {k: frozenset(v) for k, v in into.items()})
