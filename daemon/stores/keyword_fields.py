"""What every keyword backend indexes of a chunk: its text, and its filter fields' values.

Whoosh (``fulltext``) and tantivy (``tantivy_store``) store them each in their own way; the
values are the same, so a filter matches the same chunks whichever backend serves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragd.daemon.stores.catalog import ChunkRow

# The keyword index's name in `ragd index --rebuild keyword`, status and consistency
# checks, whichever backend serves it.
KEYWORD_ROLE = "keyword"


def combined_text(row: ChunkRow) -> str:
    """What the keyword index sees of a chunk: its note's title, its headings, its text."""
    return "\n".join(p for p in (row.title, " ".join(row.heading_path), row.text) if p)


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


def people(meta: Mapping[str, Any], key: str) -> str:
    """The names under ``key`` (a sender, a book's authors) as one lowercased string."""
    value = meta.get(key)
    if isinstance(value, list):
        value = "; ".join(str(v) for v in value)
    return str(value).lower() if value else ""
