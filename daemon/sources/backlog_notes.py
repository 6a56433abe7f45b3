"""A backlog kept as markdown notes (decision 0030): what coderag_backlog reads.

Reference 002's backlog providers are remote services (Azure DevOps, Jira, ClickUp); ragd has
no network, and many teams keep their backlog in Obsidian: one note per item, with frontmatter
``id``, ``type`` (epic, story, task, bug, feature), ``state``, ``tags`` and optionally
``title``, ``url`` and ``code`` (linked code paths). ``BacklogProvider`` is the interface another
provider would implement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ragd.daemon.models import Document
from ragd.daemon.sources.files import read_bytes, walk_vault
from ragd.daemon.sources.vault import parse_note

TYPES = ("epic", "story", "task", "bug", "feature")
MAX_ITEMS = 5000
MAX_NOTE_BYTES = 1 << 20


@dataclass(frozen=True)
class BacklogItem:
    id: str
    external_id: str
    title: str
    type: str
    state: str
    tags: tuple[str, ...]
    url: str = ""
    linked_code_paths: tuple[str, ...] = ()
    text: str = field(default="", repr=False)

    def as_dict(self, *, linked: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "externalId": self.external_id,
                               "title": self.title, "type": self.type, "state": self.state,
                               "tags": list(self.tags)}
        if self.url:
            out["url"] = self.url
        if linked:
            out["linkedCodePaths"] = list(self.linked_code_paths)
        return out


class BacklogProvider(Protocol):
    def items(self) -> list[BacklogItem]: ...


def _list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, list | tuple):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return (str(value),)


class MarkdownBacklog:
    """The notes of one folder (and below) that have an ``id`` and a ``type``."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder).expanduser()

    def items(self) -> list[BacklogItem]:
        walked = walk_vault(self.folder, max_entries=MAX_ITEMS)
        out: list[BacklogItem] = []
        for f in walked.files[:MAX_ITEMS]:
            data = read_bytes(self.folder, f.path, MAX_NOTE_BYTES)
            doc = parse_note(f.path, data) if isinstance(data, bytes) else data
            if isinstance(doc, Document):
                item = _item(f.path, doc)
                if item is not None:
                    out.append(item)
        return out


def _item(rel: str, doc: Document) -> BacklogItem | None:
    fm = doc.metadata.get("frontmatter") or {}
    if not isinstance(fm, dict) or fm.get("id") in (None, "") or not fm.get("type"):
        return None
    kind = str(fm["type"]).strip().lower()
    if kind not in TYPES:
        return None
    heading = re.search(r"^#\s+(.+)$", doc.text, re.M)
    tags = tuple(dict.fromkeys(t.lstrip("#").lower() for t in
                               (*_list(fm.get("tags")), *map(str, doc.metadata.get("tags", ())))))
    return BacklogItem(
        id=str(fm["id"]), external_id=str(fm.get("external_id") or fm["id"]),
        title=str(fm.get("title") or (heading.group(1).strip() if heading else doc.title)), type=kind, state=str(fm.get("state") or ""),
        tags=tags, url=str(fm.get("url") or ""),
        linked_code_paths=_list(fm.get("code") or fm.get("linked_code_paths")),
        text=f"{doc.title}\n{doc.text}")


_WORD = re.compile(r"\w+")


def select(items: list[BacklogItem], *, query: str | None = None,
           types: list[str] | None = None, states: list[str] | None = None,
           tags: list[str] | None = None, limit: int = 10) -> list[BacklogItem]:
    """Items that pass the filters; with a query, those matching any of its words, the ones
    matching more of them (in the title counting twice) first."""
    want_types = {t.lower() for t in types or ()}
    want_states = {s.lower() for s in states or ()}
    want_tags = {t.lstrip("#").lower() for t in tags or ()}
    kept = [i for i in items if (not want_types or i.type in want_types)
            and (not want_states or i.state.lower() in want_states)
            and (not want_tags or want_tags <= set(i.tags))]
    if query is None:
        return sorted(kept, key=lambda i: i.id)[:limit]
    words = {w.lower() for w in _WORD.findall(query)}
    scored = []
    for i in kept:
        title = {w.lower() for w in _WORD.findall(i.title)}
        body = {w.lower() for w in _WORD.findall(i.text)}
        score = 2 * len(words & title) + len(words & body)
        if score:
            scored.append((-score, i.id, i))
    return [i for _, _, i in sorted(scored, key=lambda t: (t[0], t[1]))][:limit]
