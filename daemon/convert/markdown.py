"""Markdown building blocks for the converters: tables, safe plain text, and HTML (or XHTML) to
markdown or to text.

HTML goes through html-to-markdown (MIT; a Rust parser and converter, no Python dependencies):
HTML pages, EPUB chapters and HTML-only mail share it. Decision 0013 compares it with markdownify
and inscriptis. Headings stay markdown headings (chunks are split at them); lists, quotes, code
blocks and tables are kept; scripts, styles, forms and navigation are dropped; links and images
become their text, and inline emphasis is dropped, so that heading paths and the indexed text
carry words, not markup. Text that markdown would read as structure is escaped by the library.
The library is imported on first use: only the conversion worker (and the mail source, for
HTML-only bodies) loads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, cast

_WS = re.compile(r"\s+")
MAX_TABLE_CELL = 500  # characters kept of one table cell
# Dropped with their content, on top of the library's own (script, style, head, forms, hidden).
_DROPPED = ["nav", "noscript", "template", "svg", "math", "object", "iframe", "select",
            "button"]


def cell_text(value: object) -> str:
    """A value as one markdown table cell: a single line, pipes escaped."""
    text = "" if value is None else str(value)
    text = _WS.sub(" ", text).strip().replace("|", "\\|")
    return text[:MAX_TABLE_CELL]


def md_table(rows: Sequence[Sequence[object]]) -> str:
    """A markdown table of ``rows`` (the first is the header); ragged rows are padded."""
    cells = [[cell_text(c) for c in row] for row in rows]
    cells = [r for r in cells if any(r)]
    if not cells:
        return ""
    width = max(len(r) for r in cells)
    cells = [r + [""] * (width - len(r)) for r in cells]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in cells[1:]]
    return "\n".join(lines)


def join_blocks(blocks: Iterable[str]) -> str:
    """Blocks separated by one blank line; empty ones dropped."""
    return "\n\n".join(b.strip("\n") for b in blocks if b and b.strip()) + "\n"


class _Words:
    """html-to-markdown visitor: links, images and emphasis as their text; headings demoted by
    ``shift`` levels; the first heading's text remembered (a title of last resort)."""

    def __init__(self, shift: int) -> None:
        self.shift = shift
        self.first_heading = ""

    def visit_link(self, ctx: Any, href: str, text: str, title: str) -> dict[str, str]:
        return {"type": "custom", "output": text}

    def visit_image(self, ctx: Any, src: str, alt: str, title: str) -> dict[str, str]:
        return {"type": "custom", "output": _WS.sub(" ", alt).strip()}

    def _text(self, ctx: Any, text: str) -> dict[str, str]:
        return {"type": "custom", "output": text}

    visit_strong = visit_emphasis = visit_underline = visit_strikethrough = _text
    visit_mark = visit_subscript = visit_superscript = _text

    def visit_heading(self, ctx: Any, level: int, text: str, id: str) -> dict[str, str]:
        text = _WS.sub(" ", text).strip()
        if text and not self.first_heading:
            self.first_heading = text
        if not self.shift:
            return {"type": "continue"}
        return {"type": "custom", "output": "#" * min(6, level + self.shift) + " " + text}


def html_to_markdown(html: str, *, shift: int = 0) -> tuple[str, str]:
    """(markdown, title) of an HTML or XHTML document. ``shift`` demotes every heading by that
    many levels (an EPUB chapter's headings go under the book). The title is the ``<title>``,
    else the first heading, else ""."""
    import html_to_markdown as h2m

    words = _Words(shift)
    options = h2m.ConversionOptions(extract_metadata=True, autolinks=False, compact_tables=True,
                                    exclude_selectors=_DROPPED)
    # The library calls only the visit_* methods a visitor defines; its Protocol lists all.
    result = h2m.convert(html, options, visitor=cast(Any, words))
    markdown = _without_front_matter(result.content or "")
    document = result.metadata.document if result.metadata else None
    title = _WS.sub(" ", (document.title if document else None) or "").strip()
    markdown = "\n".join(line.rstrip() for line in markdown.splitlines())
    return join_blocks([markdown]) if markdown.strip() else "", title or words.first_heading


def _without_front_matter(markdown: str) -> str:
    # The library writes the <head> metadata it extracts as YAML front matter; the title is
    # taken from the result instead. Text of its own never starts with a bare "---" line (the
    # library escapes it).
    if markdown.startswith("---\n"):
        end = markdown.find("\n---\n", 3)
        if end >= 0:
            return markdown[end + 5:]
    return markdown


def html_to_text(html: str) -> str:
    """Plain readable text of an HTML document (an HTML-only mail body): paragraphs, list items
    and table rows on lines of their own, no markup, scripts and styles dropped. It is text,
    not markdown: pass it through :func:`plain_text` before embedding it in markdown."""
    import html_to_markdown as h2m

    options = h2m.ConversionOptions(extract_metadata=False, output_format="plain",
                                    exclude_selectors=_DROPPED)
    text = h2m.convert(html, options).content or ""
    lines = [line.rstrip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n") + "\n" if any(lines) else ""

# A line of extracted text that markdown would read as structure: a heading, a fence (code,
# `$$` math, `%%` comment), an HTML block or a setext underline. Escaped, so that only the
# converter's own headings (pages, slides, sheets) shape the outline.
_STRUCTURAL = re.compile(r"^([ \t]{0,3})(#|`{3}|~{3}|\$\$|%%|<|=+[ \t]*$|-{2,}[ \t]*$)",
                         re.MULTILINE)


def plain_text(text: str) -> str:
    """Extracted text made safe to embed in markdown as plain paragraphs."""
    return _STRUCTURAL.sub(lambda m: m.group(1) + "\\" + m.group(2), text)
