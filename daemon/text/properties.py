"""A note's properties as a chunk of their own: title, aliases, tags and frontmatter, readable.

Notes made only of frontmatter (a book, a film, a place) have no body to chunk, and the
properties of every note say what it is about in words a user searches for. Both are rendered
here as short ``key: value`` lines and chunked like a body, so they are embedded and
keyword-indexed, and every note is findable.

Properties chunks have negative ordinals (-n .. -1, in order): the frontmatter comes before the
body in the file, and a negative ordinal is how the catalog, status and search tell them apart
from body chunks (ordinals 0 and up). Pure: the token counter is passed in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from ragd.daemon.models import ChunkDraft, Document
from ragd.daemon.text.chunking import TokenCounter, chunk_markdown

# Keys that are shown elsewhere (title, aliases, tags) or only style the note.
_SKIP_KEYS = frozenset({"title", "alias", "aliases", "tag", "tags", "cssclass", "cssclasses",
                        "position"})
MAX_ITEMS = 50  # items of one list value rendered
MAX_VALUE_CHARS = 300  # one value, cut at a word boundary
MAX_CHARS = 3000  # the whole rendering: a few chunks at most, whatever the frontmatter holds

_WIKILINK = re.compile(r"!?\[\[([^\]\n]*)\]\]")
_MDLINK = re.compile(r"!?\[([^\]\n]*)\]\(([^)\s]*)\)")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://\S+$", re.I)
_IMAGE = re.compile(r"\.(?:png|jpe?g|gif|webp|svg|bmp|avif|heic)$", re.I)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def is_properties(ordinal: int) -> bool:
    """Whether a chunk with this ordinal holds a note's properties (not its body)."""
    return ordinal < 0


def _link_text(m: re.Match[str]) -> str:
    target, _, alias = m.group(1).partition("|")
    return (alias or target.split("#", 1)[0]).strip()


def _text(value: str) -> str:
    """A string value without link syntax; an image URL or file becomes nothing."""
    value = " ".join(value.split())
    if _URL.match(value):
        parts = urlsplit(value)
        return "" if _IMAGE.search(parts.path) else (parts.netloc + parts.path).rstrip("/")
    value = _MDLINK.sub(lambda m: m.group(1), _WIKILINK.sub(_link_text, value))
    return "" if _IMAGE.search(value) and " " not in value else value.strip()


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    space = text.rfind(" ", 0, limit)
    return text[: space if space > limit // 2 else limit] + "…"


def render_value(value: Any) -> str:
    """One property value as words: lists joined by commas, flags and empty values dropped."""
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, str):
        return _cut(_text(value), MAX_VALUE_CHARS)
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Mapping):
        parts = (f"{render_key(str(k))} {v}" for k, v in
                 ((k, render_value(v)) for k, v in list(value.items())[:MAX_ITEMS]) if v)
        return _cut("; ".join(parts), MAX_VALUE_CHARS)
    if isinstance(value, list | tuple):
        items = (render_value(v) for v in value[:MAX_ITEMS])
        return _cut(", ".join(dict.fromkeys(i for i in items if i)), MAX_VALUE_CHARS)
    return _cut(_text(str(value)), MAX_VALUE_CHARS)


def render_key(key: str) -> str:
    """``imdbId`` -> ``imdb id``, ``date_read`` -> ``date read``."""
    return " ".join(_CAMEL.sub(" ", key).replace("_", " ").replace("-", " ").split()).lower()


def _lines(doc: Document) -> Iterator[str]:
    meta = doc.metadata
    aliases = render_value(list(meta.get("aliases") or ())[:MAX_ITEMS])
    if aliases:
        yield f"aliases: {aliases}"
    tags = render_value(list(meta.get("tags") or ())[:MAX_ITEMS])
    if tags:
        yield f"tags: {tags}"
    frontmatter = meta.get("frontmatter")
    if isinstance(frontmatter, Mapping):
        for key, value in frontmatter.items():
            name = render_key(str(key))
            if not name or str(key).lower() in _SKIP_KEYS:
                continue
            text = render_value(value)
            if text:
                yield f"{name}: {text}"


def render_properties(doc: Document) -> str:
    """The note's aliases, tags and frontmatter properties as ``key: value`` lines ("" when
    there are none). The title is not repeated: it prefixes every embedded chunk."""
    return _cut("\n".join(_lines(doc)), MAX_CHARS)


def properties_chunks(doc: Document, *, has_body: bool, count_tokens: TokenCounter,
                      max_tokens: int) -> list[ChunkDraft]:
    """The properties chunks of a note, with ordinals -n .. -1.

    A note with a body gets them only when it has properties beyond its title (its title is
    already in every body chunk). A note with no body always gets one, its title at least, so
    that nothing indexed is unfindable. Offsets are (0, 0): the text is not a slice of the body.
    """
    text = render_properties(doc)
    if not text:
        if has_body or not doc.title.strip():
            return []
        text = " ".join(doc.title.split())
    drafts = chunk_markdown(doc.title, text, count_tokens=count_tokens, max_tokens=max_tokens)
    n = len(drafts)
    return [ChunkDraft(d.ordinal - n, d.text, d.embed_text, (), 0, 0, d.token_count)
            for d in drafts]
