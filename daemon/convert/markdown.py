"""Markdown building blocks for the converters: tables, and HTML (or XHTML) to markdown.

Standard library only (``html.parser``): HTML pages and EPUB chapters share this converter, so
neither needs a GPL (html2text) or a heavy dependency. It keeps what search and a reader need:
headings, paragraphs, lists, quotes, code blocks and tables; it drops scripts, styles,
navigation and inline formatting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from html.parser import HTMLParser

_WS = re.compile(r"\s+")

_SKIP = frozenset({"script", "style", "head", "noscript", "template", "svg", "math", "nav",
                   "object", "iframe", "select", "button"})
_BLOCK = frozenset({"p", "div", "section", "article", "header", "footer", "main", "aside",
                    "figure", "figcaption", "address", "dl", "dt", "dd", "center", "form",
                    "fieldset", "details", "summary", "body", "html", "caption"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_VOID = frozenset({"br", "hr", "img", "meta", "link", "input", "col", "area", "base", "wbr",
                   "source", "track", "embed", "param"})
MAX_TABLE_CELL = 500  # characters kept of one table cell


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


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self.inline: list[str] = []
        self.title = ""
        self.first_heading = ""
        self.skip = 0  # depth inside skipped elements
        self.in_title = False
        self.pre: list[str] | None = None
        self.lists: list[list[int | str]] = []  # [kind ("ul"/"ol"), counter]
        self.quote = 0
        self.heading = 0
        self.tables: list[list[list[str]]] = []  # stack of tables (rows of cells)
        self.cell: list[str] | None = None

    # -- text ----------------------------------------------------------------------------
    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title += data
        if self.skip:
            return
        if self.pre is not None:
            self.pre.append(data)
        elif self.cell is not None:
            self.cell.append(data)
        else:
            self.inline.append(data)

    def flush(self) -> None:
        text = _WS.sub(" ", "".join(self.inline)).strip()
        self.inline = []
        if not text:
            return
        if self.heading:
            if not self.first_heading:
                self.first_heading = text
            text = "#" * self.heading + " " + text
        else:
            text = plain_text(text)
        if not self.heading and self.lists:
            kind, n = self.lists[-1]
            indent = "  " * (len(self.lists) - 1)
            text = f"{indent}{n}. {text}" if kind == "ol" else f"{indent}- {text}"
        if self.quote:
            text = "\n".join("> " + line for line in text.split("\n"))
        self.blocks.append(text)

    # -- tags ----------------------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        if tag in _SKIP:
            if tag not in _VOID:
                self.skip += 1
            return
        if self.skip:
            return
        if tag == "br":
            self.handle_data("\n" if self.pre is not None else " ")
        elif tag == "img":
            alt = dict(attrs).get("alt")
            if alt and alt.strip():
                self.handle_data(f" {alt.strip()} ")
        elif tag == "table":
            self.flush()
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self.tables:
            if not self.tables[-1]:
                self.tables[-1].append([])
            self.cell = []
        elif tag == "pre":
            self.flush()
            self.pre = []
        elif tag in _HEADINGS:
            self.flush()
            self.heading = _HEADINGS[tag]
        elif tag in ("ul", "ol"):
            self.flush()
            self.lists.append([tag, 0])
        elif tag == "li":
            self.flush()
            if self.lists and self.lists[-1][0] == "ol":
                self.lists[-1][1] = int(self.lists[-1][1]) + 1
        elif tag == "blockquote":
            self.flush()
            self.quote += 1
        elif (tag in _BLOCK or tag == "hr") and self.cell is None:
            self.flush()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in _SKIP:
            if tag not in _VOID:
                self.skip = max(0, self.skip - 1)
            return
        if self.skip:
            return
        if tag in ("td", "th") and self.tables and self.cell is not None:
            self.tables[-1][-1].append("".join(self.cell))
            self.cell = None
        elif tag == "table" and self.tables:
            rows = self.tables.pop()
            table = md_table(rows)
            if self.tables:  # a table inside a cell: flattened into that cell's text
                self.cell = (self.cell or []) + [" ".join(" ".join(r) for r in rows)]
            elif table:
                self.blocks.append(table)
        elif tag == "pre" and self.pre is not None:
            code = "".join(self.pre).strip("\n")
            self.pre = None
            if code.strip():
                self.blocks.append(f"```\n{code}\n```")
        elif tag in _HEADINGS:
            self.flush()
            self.heading = 0
        elif tag in ("ul", "ol"):
            self.flush()
            if self.lists:
                self.lists.pop()
        elif tag == "li":
            self.flush()
        elif tag == "blockquote":
            self.flush()
            self.quote = max(0, self.quote - 1)
        elif tag in _BLOCK and self.cell is None:
            self.flush()

    def close(self) -> None:
        super().close()
        if self.cell is not None and self.tables:
            self.tables[-1][-1].append("".join(self.cell))
            self.cell = None
        while self.tables:
            table = md_table(self.tables.pop())
            if table:
                self.blocks.append(table)
        if self.pre:
            self.blocks.append("```\n" + "".join(self.pre).strip("\n") + "\n```")
            self.pre = None
        self.flush()


def html_to_markdown(html: str, *, shift: int = 0) -> tuple[str, str]:
    """(markdown, title) of an HTML or XHTML document. ``shift`` demotes every heading by that
    many levels (an EPUB chapter's headings go under the book). The title is the ``<title>``,
    else the first heading, else ""."""
    parser = _Html()
    parser.feed(html)
    parser.close()
    blocks = parser.blocks
    if shift:
        blocks = [_demote(b, shift) for b in blocks]
    title = _WS.sub(" ", parser.title).strip() or parser.first_heading
    return join_blocks(blocks), title


def _demote(block: str, shift: int) -> str:
    if not block.startswith("#"):
        return block
    level = len(block) - len(block.lstrip("#"))
    return "#" * min(6, level + shift) + block[level:]


# A line of extracted text that markdown would read as structure: a heading, a fence (code,
# `$$` math, `%%` comment), an HTML block or a setext underline. Escaped, so that only the
# converter's own headings (pages, slides, sheets) shape the outline.
_STRUCTURAL = re.compile(r"^([ \t]{0,3})(#|`{3}|~{3}|\$\$|%%|<|=+[ \t]*$|-{2,}[ \t]*$)",
                         re.MULTILINE)


def plain_text(text: str) -> str:
    """Extracted text made safe to embed in markdown as plain paragraphs."""
    return _STRUCTURAL.sub(lambda m: m.group(1) + "\\" + m.group(2), text)
