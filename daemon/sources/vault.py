"""The Obsidian vault source: read and parse one note into a ``Document``.

Listing the notes is ``daemon.sources.files``' job. Everything that can go wrong with a single
note comes back as data: a ``Skip`` with a code from ``daemon.skips``, or a warning code on
the ``Document``.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterable, Iterator
from datetime import date, datetime, time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml
from frontmatter import YAMLHandler

from daemon.errors import InvalidArgument
from daemon.models import Document, Skip
from daemon.sources.files import read_bytes

log = logging.getLogger(__name__)

BINARY_SNIFF_BYTES = 8192

_YAML = YAMLHandler()  # python-frontmatter's loader: yaml's (C) SafeLoader
_YAML_ERRORS = (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError)
# JSON-safe conversion limits: YAML aliases can build huge or self-referencing structures.
_MAX_DEPTH = 32
_MAX_NODES = 10_000


# --------------------------------------------------------------------------------------- read


def read_note(root: Path, rel: str, *, max_bytes: int) -> Document | Skip:
    """Read ``root/rel`` and parse it (see ``parse_note``); never raises for a bad file.

    The size is checked with ``stat`` before the file is opened, and the file is opened
    non-blocking, so an oversized file is never loaded and a FIFO never blocks.
    """
    parts = rel.split("/")
    outside = not rel or rel.startswith("/") or ".." in parts
    # Backslashes and ':' are legal in POSIX file names but could leave the vault on Windows.
    if outside or (os.name == "nt" and ("\\" in rel or ":" in rel)):
        raise InvalidArgument("rel", f"{rel!r} is not a '/'-separated path inside the vault")
    data = read_bytes(os.path.join(root, *parts), max_bytes)
    return data if isinstance(data, Skip) else parse_note(rel, data)


def _stem(name: str) -> str:
    stem, suffix = os.path.splitext(name)
    return stem if suffix else name


# -------------------------------------------------------------------------------------- parse


def parse_note(rel: str, data: bytes) -> Document | Skip:
    """Parse the bytes of the note at ``rel`` (vault-relative, '/'-separated).

    The decoded text (UTF-8, BOM removed) is ``frontmatter block + Document.text``, so
    ``Document.body_offset`` maps offsets in ``text`` back to the decoded file.
    """
    if not data:
        return Skip("empty", "file has zero bytes")
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return Skip("binary", f"NUL byte in the first {BINARY_SNIFF_BYTES} bytes")
    try:
        return _parse_text(rel, data)
    except Exception as exc:  # a parser bug must cost one note, not the collection
        log.exception("unexpected error parsing %s", rel)
        return Skip("parse_error", f"{type(exc).__name__}: {exc}")


def _parse_text(rel: str, data: bytes) -> Document | Skip:
    warnings: list[str] = []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Legacy notes are most often Windows-1252 or Latin-1; decoding them as such keeps
        # "crème" searchable, where replacement characters would lose it.
        try:
            text = data.decode("cp1252")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
        warnings.append("invalid_utf8")
    if not text.strip():
        return Skip("empty", "file contains only whitespace")
    fm, body_offset, fm_ok = _frontmatter(text)
    if not fm_ok:
        warnings.append("bad_frontmatter")
    body = text[body_offset:]
    visible = _mask_code(body)
    safe_fm = _json_safe(fm, [_MAX_NODES])
    # Obsidian counts links in properties (e.g. `author: "[[Steph Ango]]"`) as links too.
    links, embeds = _wikilinks("\n".join([visible, *_strings(safe_fm)]))
    folder, _, name = rel.rpartition("/")
    title = fm.get("title")
    metadata: dict[str, Any] = {
        "tags": sorted(set(_frontmatter_tags(fm)) | set(_inline_tags(visible))),
        "aliases": _aliases(fm),
        "wikilinks": links,
        "embeds": embeds,
        "folder": folder,
        "frontmatter": safe_fm,
    }
    return Document(
        title=title.strip() if isinstance(title, str) and title.strip() else _stem(name),
        text=body,
        source_type="markdown",
        metadata=metadata,
        body_offset=body_offset,
        date=_note_date(fm),
        warnings=tuple(warnings),
    )


# Obsidian only reads a YAML block that opens on the very first line and closes with '---'.
_FM_OPEN = re.compile(r"---[ \t]*\r?\n")
_FM_CLOSE = re.compile(r"\n---[ \t]*(?:\r?\n|\Z)")  # searched from the opening line's '\n'


def _frontmatter(text: str) -> tuple[dict[Any, Any], int, bool]:
    """Return (mapping, body offset, ok). A block that is not a YAML mapping is dropped."""
    opened = _FM_OPEN.match(text)
    closed = _FM_CLOSE.search(text, opened.end() - 1) if opened else None
    if not opened or not closed:
        return {}, 0, True
    try:
        loaded = _YAML.load(text[opened.end() : closed.start()])
    except _YAML_ERRORS as exc:
        log.debug("bad frontmatter: %s", exc)
        return {}, closed.end(), False
    if loaded is None:
        return {}, closed.end(), True
    if not isinstance(loaded, dict):
        return {}, closed.end(), False
    return loaded, closed.end(), True


# Block patterns are searched in "\n" + body: starting with a literal newline lets the regex
# engine skip ahead quickly (a leading '^' would make it try every position).
_FENCE = re.compile(r"\n[ \t]*(?:>[ \t]*)*(`{3,}|~{3,})")
# CommonMark's block-level HTML: such a block runs to the next blank line and Obsidian parses no
# markdown inside it (so `color: #fff` in a table is not a tag).
_HTML_BLOCK = re.compile(
    r"\n {0,3}</?(?:address|article|aside|blockquote|body|center|details|dialog|dd|div|dl|dt|"
    r"fieldset|figcaption|figure|footer|form|h[1-6]|head|header|hr|html|iframe|legend|li|main|"
    r"menu|nav|ol|p|pre|script|section|style|summary|table|tbody|td|textarea|tfoot|th|thead|"
    r"title|tr|ul)(?=[\s/>]|$)",
    re.IGNORECASE,
)
# HTML comments, and tag markup that holds a '#' or '[' (e.g. style="color: #fff").
_HTML_MARKUP = re.compile(r"<!--.*?-->|</?[A-Za-z][^<>\n]*[#\[][^<>\n]*>", re.DOTALL)
# A run of backticks closed by a run of the same length; the opening run starts at a literal '`'
# not preceded by another one.
_INLINE_CODE = re.compile(r"(`(?<!``)`*)(?!`)(.*?[^`])\1(?!`)")


def _mask_code(body: str) -> str:
    """Blank out code (fenced, inline) and HTML (blocks, comments, tag markup): the places where
    Obsidian sees no tags or links. Every other character keeps its offset."""
    masked = _mask_blocks(body)
    if "<" in masked:
        masked = _HTML_MARKUP.sub(_blank, masked)
    return _INLINE_CODE.sub(_blank, masked) if "`" in masked else masked


def _mask_blocks(body: str) -> str:
    """Blank out fenced code blocks and HTML blocks, line by line."""
    text = "\n" + body  # a match at i in text starts the line at offset i of body
    fences: dict[int, tuple[str, int]] = {}  # line offset -> (marker, end of marker in line)
    if "```" in body or "~~~" in body:
        fences = {m.start(): (m.group(1), m.end() - m.start() - 1) for m in _FENCE.finditer(text)}
    html = {m.start() for m in _HTML_BLOCK.finditer(text)} if "<" in body else set()
    if not fences and not html:
        return body
    lines = body.split("\n")
    fence: tuple[str, int] | None = None
    in_html = False
    start = 0
    for i, line in enumerate(lines):
        marker, end = fences.get(start, ("", 0))
        in_html = fence is None and bool(line.strip()) and (in_html or start in html)
        start += len(line) + 1
        if fence is not None:
            lines[i] = " " * len(line)
            if marker[:1] == fence[0] and len(marker) >= fence[1] and not line[end:].strip():
                fence = None
            continue
        # A backtick fence's info string cannot contain a backtick (CommonMark).
        if marker and not in_html and not (marker[0] == "`" and "`" in line[end:]):
            fence = (marker[0], len(marker))
        if in_html or fence is not None:
            lines[i] = " " * len(line)
    return "\n".join(lines)


def _blank(m: re.Match[str]) -> str:
    """The match as spaces, newlines kept (so offsets and line structure survive)."""
    text = m.group(0)
    return re.sub(r"[^\n]", " ", text) if "\n" in text else " " * len(text)


# Obsidian's tag characters: anything but whitespace, general punctuation and these ASCII marks.
# The '#' must start the text or follow whitespace or '>' (a blockquote, or inline HTML such as
# <b>#tag</b>). The pattern opens with the literal '#' and checks what precedes it afterwards, so
# the regex engine can scan for it quickly.
_TAG = re.compile(
    r"#(?<![^\s>]#)([^\u2000-\u206F\u2E00-\u2E7F'!\"#$%&()*+,.:;<=>?@^`{|}~\[\]\\\s]+)"
)
_WIKILINK = re.compile(r"\[\[([^\[\]\n]+?)\]\]")


def _normal_tag(raw: str) -> str | None:
    """Lower-case ``raw`` without '#'; None unless it has a character other than a digit."""
    tag = raw.strip().lstrip("#").strip("/").lower()
    return tag if any(not c.isdigit() for c in tag) else None


def _inline_tags(visible: str) -> list[str]:
    return [t for t in (_normal_tag(m.group(1)) for m in _TAG.finditer(visible)) if t]


def _frontmatter_tags(fm: dict[Any, Any]) -> list[str]:
    tags: list[str] = []
    for item in _str_items(fm, ("tags", "tag")):
        tags.extend(t for t in (_normal_tag(p) for p in re.split(r"[,\s]+", item)) if t)
    return tags


def _aliases(fm: dict[Any, Any]) -> list[str]:
    return list(dict.fromkeys(a.strip() for a in _str_items(fm, ("aliases", "alias")) if a.strip()))


def _str_items(fm: dict[Any, Any], keys: Iterable[str]) -> list[str]:
    """The string values under ``keys``, each given as one value or a list (numbers as text)."""
    out: list[str] = []
    for key in keys:
        value = fm.get(key)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, int | float) and not isinstance(item, bool):
                out.append(str(item))
    return out


def _strings(value: Any) -> Iterator[str]:
    """Every string inside JSON-safe data (keys excluded)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict | list):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _strings(item)


def _wikilinks(visible: str) -> tuple[list[str], list[str]]:
    """Sorted unique targets of ``[[links]]`` and of ``![[embeds]]``, without #heading or |alias."""
    links: set[str] = set()
    embeds: set[str] = set()
    for m in _WIKILINK.finditer(visible):
        # In tables the alias pipe is escaped as '\|'.
        target = m.group(1).split("|", 1)[0].rstrip("\\").split("#", 1)[0].strip()
        if target:
            is_embed = m.start() > 0 and visible[m.start() - 1] == "!"
            (embeds if is_embed else links).add(target)
    return sorted(links), sorted(embeds)


_DATE_TEXT = re.compile(r"\s*(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)")


def _note_date(fm: dict[Any, Any]) -> str | None:
    """ISO date from frontmatter ``date``, else ``created``, else ``updated``."""
    for key in ("date", "created", "updated"):
        iso = _iso_date(fm.get(key))
        if iso:
            return iso
    return None


def _iso_date(value: Any) -> str | None:
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str) and (m := _DATE_TEXT.match(value)):
        try:
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3))).isoformat()
        except ValueError:
            return None
    return None


def _json_safe(value: Any, budget: list[int], depth: int = 0) -> Any:
    """``value`` as JSON-safe data: dates as ISO text, anything else unknown as ``str``.

    ``budget`` counts the nodes still allowed; past it, or past ``_MAX_DEPTH``, values become
    None, so a YAML alias bomb or a self-referencing alias cannot blow up.
    """
    budget[0] -= 1
    if budget[0] < 0 or depth > _MAX_DEPTH:
        return None
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, dict):
        return {
            k if isinstance(k, str) else str(_json_safe(k, budget, depth + 1)): _json_safe(
                v, budget, depth + 1
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_safe(v, budget, depth + 1) for v in value]
    return str(value)


# ---------------------------------------------------------------------------------------- uri


def obsidian_uri(vault_name: str, rel: str) -> str:
    """The ``obsidian://open`` URI that opens note ``rel`` of vault ``vault_name``."""
    file = rel[:-3] if rel.lower().endswith(".md") else rel
    return f"obsidian://open?vault={quote(vault_name, safe='')}&file={quote(file, safe='')}"
