"""Markdown headings with exact offsets, found by mistune's own block rules.

Only headings are kept: fenced code, `$$` math, `%%` comments and HTML blocks are consumed
whole so that nothing inside them is taken for a heading. Pure and fast: a text with no line
that could be a heading never reaches the parser.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import replace
from typing import cast

from mistune.block_parser import BlockParser
from mistune.core import BlockState

from ragd.daemon.models import Heading


class _HeadingState(BlockState):
    """Mistune's block state plus the top-level headings found, with their offsets.

    Paragraphs keep their start offset instead of their text: nothing here reads the text,
    and mistune's growing it line by line is quadratic on long paragraphs.
    """

    def __init__(self, parent: object | None = None) -> None:
        super().__init__(parent)
        self.headings: list[Heading] = []

    def add_paragraph(self, text: str) -> None:
        last = self.last_token()
        if not (last and last["type"] == "paragraph"):
            self.tokens.append({"type": "paragraph", "start": self.cursor})

    def append_paragraph(self) -> int | None:
        last = self.last_token()
        return self.find_line_end() if last and last["type"] == "paragraph" else None


def _line_text_end(src: str, start: int, end: int) -> int:
    """Offset after the last non-whitespace character in ``src[start:end]``."""
    return start + len(src[start:end].rstrip())


# The rules mistune's block quote uses to decide where a lazy continuation paragraph ends.
_QUOTE_LAZY_BREAKS = ["blank_line", "thematic_break", "fenced_code", "list", "block_html"]


class _HeadingParser(BlockParser):
    """Mistune's block parser, recording where top-level headings sit in the source.

    Mistune's tree has no positions, but its rules see the regex match on the source, so
    offsets come for free and inline parsing (the slow half of mistune) is never run.
    Headings inside lists and block quotes belong to those containers, not to the outline, so
    their content is never parsed: only their extent matters here, and mistune finds that
    before it parses the content.
    """

    def parse(self, state: BlockState, rules: list[str] | None = None) -> None:
        if state.parent is None:
            super().parse(state, rules)

    def compile_sc(self, rules: list[str] | None = None) -> re.Pattern[str]:
        if rules == _QUOTE_LAZY_BREAKS:
            # CommonMark lets an ATX heading end a quote's lazy paragraph; mistune does not,
            # and Obsidian notes often put a heading right under a callout.
            rules = [*rules, "atx_heading"]
        return super().compile_sc(rules)

    def parse_atx_heading(self, m: re.Match[str], state: BlockState) -> int:
        end = super().parse_atx_heading(m, state)
        if state.parent is None:
            token = state.last_token()
            level = token["attrs"]["level"]
            stop = _line_text_end(state.src, m.start(), m.end())
            cast(_HeadingState, state).headings.append(
                Heading(level, token["text"], m.start(), stop)
            )
        return end

    def parse_setex_heading(self, m: re.Match[str], state: BlockState) -> int | None:
        last = state.last_token()
        was_paragraph = bool(last) and last["type"] == "paragraph"
        end = super().parse_setex_heading(m, state)
        if was_paragraph and last["type"] == "heading" and state.parent is None:
            start = last["start"]  # the paragraph that became the heading's text
            text = " ".join(state.src[start : m.start()].split())
            stop = _line_text_end(state.src, m.start(), m.end())
            cast(_HeadingState, state).headings.append(
                Heading(last["attrs"]["level"], text, start, stop)
            )
        return end


def _opaque_block(parser: BlockParser, m: re.Match[str], state: BlockState) -> int | None:
    """A `$$` math block or a `%%` Obsidian comment, up to the line holding the next marker.

    Obsidian pairs these markers anywhere, not only on lines of their own (which is all that
    mistune's math plugin knows). ``str.find`` keeps it linear: a marker with no partner
    ends the search for good, as no later marker exists.
    """
    mark = m.group(0).strip()
    close = state.src.find(mark, m.end())
    if close < 0:
        return None  # no partner: an ordinary line
    state.append_token({"type": "block_opaque"})
    return state.find_line_end_at(close + len(mark))


def _build_parser() -> _HeadingParser:
    parser = _HeadingParser()
    parser.register("ragd_opaque", r"^ {0,3}(?:\$\$|%%)", _opaque_block, before="list")
    return parser


_PARSER = _build_parser()
# Every line mistune could take for a heading or a setext underline matches this.
_HEADING_LINE = re.compile(r"^ {0,3}(?:#{1,6}(?:[ \t]|$)|[=-]+[ \t]*$)", re.M)


def find_headings(text: str) -> list[Heading]:
    """The top-level markdown headings of ``text`` (ATX and setext), in document order.

    ``start`` is the offset of the heading's first line, ``end`` the offset after its last
    non-blank character. Lines inside fenced code, `$$` math, `%%` comments or HTML blocks
    are never headings, nor is ``#tag`` (no space after the hashes).
    """
    # Mistune's rules expect "\n" line ends; a lone "\r" becomes "\n" in place, but each "\r"
    # of a "\r\n" is dropped, and offsets are shifted back past the dropped ones afterwards.
    dropped = [m.start() - k for k, m in enumerate(re.finditer("\r\n", text))]
    src = text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
    if not _HEADING_LINE.search(src):
        return []  # common (daily notes, lists) and saves mistune's ~35 µs per list item
    state = _HeadingState()
    state.process(src if src.endswith("\n") else src + "\n")
    _PARSER.parse(state)
    if not dropped:
        return state.headings

    def original(pos: int) -> int:
        return pos + bisect_left(dropped, pos)  # a "\r" dropped before pos's character

    return [replace(h, start=original(h.start), end=original(h.end)) for h in state.headings]
