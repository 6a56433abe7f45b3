"""The Obsidian vault source: read and parse one note into a ``Document``.

Listing the notes is ``ragd.daemon.sources.files``' job. Everything that can go wrong with a single
note comes back as data: a ``Skip`` with a code from ``ragd.daemon.skips``, or a warning code on
the ``Document``.
"""

from __future__ import annotations

import json
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
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, SequenceNode

from ragd.daemon.errors import InvalidArgument
from ragd.daemon.models import Document, Skip
from ragd.daemon.sources.files import read_bytes
from ragd.daemon.text.decoding import decode_text

log = logging.getLogger(__name__)

_YAML_ERRORS = (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError)
# Frontmatter is read with a bounded loader (see _BoundedLoader): a block over this size, or
# one whose merges and values would build more than _MAX_YAML_NODES nodes, is not read at all.
MAX_FRONTMATTER_BYTES = 256 * 1024
_MAX_YAML_NODES = 50_000
# JSON-safe conversion limits: YAML aliases can build huge or self-referencing structures.
_MAX_DEPTH = 16
_MAX_NODES = 5_000
_MAX_ITEMS = 100  # items kept of any one list in the stored frontmatter
_MAX_STRING = 4_000  # characters kept of any one frontmatter string
# What a note's metadata keeps (and every search result shows) of each list.
MAX_TAGS = 200
MAX_ALIASES = 50
MAX_LINKS = 500


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
    data = read_bytes(root, rel, max_bytes)
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
    decoded = decode_text(data)
    if isinstance(decoded, Skip):
        return decoded
    try:
        return _parse_text(rel, *decoded)
    except Exception as exc:  # a parser bug must cost one note, not the collection
        log.exception("unexpected error parsing %s", rel)
        return Skip("parse_error", f"{type(exc).__name__}: {exc}")


def _parse_text(rel: str, text: str, warnings: list[str]) -> Document | Skip:
    if not text.strip():
        return Skip("empty", "file contains only whitespace")
    fm, body_offset, fm_problem = _frontmatter(text)
    if fm_problem:
        warnings.append(fm_problem)
    body = text[body_offset:]
    visible = _mask_code(body)
    budget = _Budget(_MAX_NODES)
    safe_fm = _json_safe(fm, budget)
    # Obsidian counts links in properties (e.g. `author: "[[Steph Ango]]"`) as links too.
    links, embeds = _wikilinks("\n".join([visible, *_strings(safe_fm)]))
    folder, _, name = rel.rpartition("/")
    title = fm.get("title")
    tags = sorted(set(_frontmatter_tags(fm)) | set(_inline_tags(visible)))
    aliases = _aliases(fm)
    lists = ((tags, MAX_TAGS), (aliases, MAX_ALIASES), (links, MAX_LINKS), (embeds, MAX_LINKS))
    if budget.truncated or any(len(items) > cap for items, cap in lists):
        warnings.append("metadata_truncated")
    metadata: dict[str, Any] = {
        "tags": tags[:MAX_TAGS],
        "aliases": aliases[:MAX_ALIASES],
        "wikilinks": links[:MAX_LINKS],
        "embeds": embeds[:MAX_LINKS],
        "folder": folder,
        "frontmatter": safe_fm,
    }
    if isinstance(title, str):
        title = title[:_MAX_STRING]
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


def _frontmatter(text: str) -> tuple[dict[Any, Any], int, str | None]:
    """Return (mapping, body offset, warning code or None). A block that is not a YAML mapping,
    or too large or too complex to load safely, is dropped with a warning."""
    opened = _FM_OPEN.match(text)
    closed = _FM_CLOSE.search(text, opened.end() - 1) if opened else None
    if not opened or not closed:
        return {}, 0, None
    block = text[opened.end() : closed.start()]
    if len(block) > MAX_FRONTMATTER_BYTES:  # characters: close enough, and cheap to check
        return {}, closed.end(), "frontmatter_too_large"
    try:
        loaded = load_yaml(block)
    except _TooComplex:
        return {}, closed.end(), "frontmatter_too_large"
    except _YAML_ERRORS as exc:
        if _template_properties(block) is not None:
            # A template's: its properties are placeholders, not a fault, and not indexed
            # (kept, they cost 0.015 MRR@10 on kepano's known items: decision 0054).
            return {}, closed.end(), None
        log.debug("bad frontmatter: %s", exc)
        return {}, closed.end(), "bad_frontmatter"
    if loaded is None:
        return {}, closed.end(), None
    if not isinstance(loaded, dict):
        return {}, closed.end(), "bad_frontmatter"
    return loaded, closed.end(), None


# A template's placeholder as a whole value: `created: {{date}}`, `- {{title}}` (Obsidian's
# core Templates and Templater fill them in when the template is used).
_PLACEHOLDER = re.compile(r"^(\s*(?:-\s+|[^\s:#][^:#\n]*:\s+))(\{\{[^\n]*\}\}|<%[^\n]*%>)\s*$",
                          re.MULTILINE)


def _template_properties(block: str) -> dict[Any, Any] | None:
    """The properties of a template note, whose placeholders are not YAML (`{{date}}` reads
    as a flow mapping), each placeholder read as the text it is: how a template's block is
    told from a broken one. None when the block holds none, or is still not a mapping (a
    real error: the note keeps its warning)."""
    if "{{" not in block and "<%" not in block:
        return None
    quoted = _PLACEHOLDER.sub(lambda m: m.group(1) + json.dumps(m.group(2)), block)
    if quoted == block:
        return None
    try:
        loaded = load_yaml(quoted)
    except (_TooComplex, *_YAML_ERRORS):
        return None
    return loaded if isinstance(loaded, dict) else None


class _TooComplex(Exception):
    """The YAML would build more nodes than a note's metadata may have."""


_SafeBase: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _BoundedLoader(_SafeBase):  # type: ignore[misc]
    """yaml's safe loader with a budget on the nodes it builds.

    PyYAML expands ``<<`` merge keys eagerly, copying the merged pairs into every mapping that
    merges them: eight nested levels that each merge the one below ten times make 10^8 pairs
    from 574 bytes. Here every merged pair and every constructed value is charged to a budget,
    before it is copied, and the load stops when it runs out. Plain aliases cost nothing: the
    constructor shares the object they point at.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.budget = _MAX_YAML_NODES

    def _spend(self, n: int) -> None:
        self.budget -= n
        if self.budget < 0:
            raise _TooComplex

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        if node not in self.constructed_objects:
            self._spend(1)
        return super().construct_object(node, deep)

    def flatten_mapping(self, node: MappingNode) -> None:
        merged: list[tuple[Node, Node]] = []
        index = 0
        while index < len(node.value):
            key, value = node.value[index]
            if key.tag != "tag:yaml.org,2002:merge":
                if key.tag == "tag:yaml.org,2002:value":
                    key.tag = "tag:yaml.org,2002:str"
                index += 1
                continue
            del node.value[index]
            sources = value.value if isinstance(value, SequenceNode) else [value]
            parts = []
            for source in sources:
                if not isinstance(source, MappingNode):
                    raise ConstructorError("while constructing a mapping", node.start_mark,
                                           "a merge key needs mappings", source.start_mark)
                self.flatten_mapping(source)
                self._spend(len(source.value))
                parts.append(source.value)
            for part in reversed(parts):  # earlier mappings in a merge list win
                merged.extend(part)
        if merged:
            node.value = merged + node.value


def load_yaml(block: str) -> Any:
    """Load a frontmatter block with :class:`_BoundedLoader`; raises ``_TooComplex`` past its
    budget and yaml's own errors for bad YAML."""
    loader = _BoundedLoader(block)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


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


class _Budget:
    """Nodes still allowed while making frontmatter JSON-safe, and whether anything was cut."""

    def __init__(self, nodes: int) -> None:
        self.left = nodes
        self.truncated = False

    def spend(self) -> bool:
        self.left -= 1
        if self.left < 0:
            self.truncated = True
        return self.left >= 0


def _json_safe(value: Any, budget: _Budget, depth: int = 0) -> Any:
    """``value`` as JSON-safe data: dates as ISO text, anything else unknown as ``str``.

    Bounded, so what a note stores and every search result repeats stays small: lists keep
    their first ``_MAX_ITEMS`` items, strings ``_MAX_STRING`` characters, nesting
    ``_MAX_DEPTH`` levels, and the whole ``budget`` nodes (past it, values become None and
    containers stop). A YAML alias bomb or a self-referencing alias cannot blow up.
    """
    if not budget.spend() or depth > _MAX_DEPTH:
        budget.truncated = True
        return None
    if isinstance(value, str):
        if len(value) > _MAX_STRING:
            budget.truncated = True
        return value[:_MAX_STRING]
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for n, (k, v) in enumerate(value.items()):
            if n >= _MAX_ITEMS * 10 or budget.left <= 0:
                budget.truncated = True
                break
            key = k if isinstance(k, str) else str(_json_safe(k, budget, depth + 1))
            out[key[:_MAX_STRING]] = _json_safe(v, budget, depth + 1)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        kept = []
        for n, v in enumerate(value):
            if n >= _MAX_ITEMS or budget.left <= 0:
                budget.truncated = True
                break
            kept.append(_json_safe(v, budget, depth + 1))
        return kept
    return str(value)[:_MAX_STRING]


# ---------------------------------------------------------------------------------------- uri


def obsidian_uri(vault_name: str, rel: str) -> str:
    """The ``obsidian://open`` URI that opens note ``rel`` of vault ``vault_name``."""
    file = rel[:-3] if rel.lower().endswith(".md") else rel
    return f"obsidian://open?vault={quote(vault_name, safe='')}&file={quote(file, safe='')}"
