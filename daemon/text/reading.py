"""What a reader sees of a markdown note: the text the embedding model is given (decision 0038).

A note's stored chunks are exact slices of its text (offsets, snippets and line numbers need
that), but the model should read what Obsidian's reading view shows, not the markup around it:

- ``%% comments %%`` and ``<!-- HTML comments -->``: only visible while editing;
- a link's or image's destination: ``[GitHub repository](https://github.com/…)`` reads as
  "GitHub repository", ``![badge](https://img.shields.io/…)`` as "badge";
- a wiki link's target when it has a display text: ``[[Mobile-compatible plugins|Yes]]``
  reads as "Yes"; ``[[Note]]`` as "Note" (the brackets go);
- HTML tags: ``<span class="git-footer">Edit</span>`` reads as "Edit".

Code (fenced blocks and inline spans) is left exactly as written: a ``%%`` or a ``<div>`` in
code is content. Bare URLs stay too: reading view shows them as they are.

Everything hidden is a *deletion*, so the reading text of any slice of a note is the slice with
the hidden ranges that fall inside it taken out, and it is never longer than the slice: the
chunker's token budget, counted on what is embedded, still holds.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence

Ranges = Sequence[tuple[int, int]]

# Fenced code: a line opening with ``` or ~~~ (up to three spaces in), to the matching close.
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[^\n]*\n(?:.*?\n)??[ \t]{0,3}\1[`~]*[ \t]*(?:\n|\Z)",
                    re.MULTILINE | re.DOTALL)
_UNCLOSED_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[^\n]*(?:\n|\Z)", re.MULTILINE)
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)

_COMMENT = re.compile(r"(?<!\\)%%.*?(?<!\\)%%", re.DOTALL)
# Elements a note's HTML uses for layout and emphasis; a name outside the list (an address in
# angle brackets, "<snip>") is text.
_TAGS = ("a|abbr|audio|b|big|blockquote|br|button|center|cite|code|col|colgroup|dd|del|details|"
         "dfn|div|dl|dt|em|figcaption|figure|font|h[1-6]|hr|i|iframe|img|input|ins|kbd|label|li|"
         "mark|ol|p|picture|pre|q|s|samp|section|small|source|span|strike|strong|sub|summary|sup|"
         "table|tbody|td|tfoot|th|thead|tr|tt|u|ul|video")
_TAG = re.compile(rf"</?(?:{_TAGS})(?:\s[^<>]*)?/?>", re.IGNORECASE)
# [text](destination "title") and ![alt](…): one level of brackets inside the text (a linked
# badge, [![alt](img)](link)), a destination in <…> or with balanced parentheses.
_LINK_TEXT = r"(?:[^\[\]\n]|\[[^\[\]\n]*\])*"
_DESTINATION = (r"\((?:<[^<>\n]*>|(?:[^()\s]|\([^()\s]*\))*)"
                r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)")
_LINK = re.compile(rf"(!?\[)({_LINK_TEXT})(\]{_DESTINATION})")
_IMAGE = re.compile(rf"!\[{_LINK_TEXT}\]{_DESTINATION}|!\[\[[^\[\]\n]*\]\]")
_WIKILINK = re.compile(r"(!?\[\[)([^\[\]|\n]*\|)?([^\[\]\n]*)(\]\])")


def _code(text: str) -> list[tuple[int, int]]:
    """Fenced blocks (an unclosed fence runs to the end) and inline code spans outside them."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while (m := _UNCLOSED_FENCE.search(text, pos)) is not None:
        closed = _FENCE.match(text, m.start())
        end = closed.end() if closed else len(text)
        spans.append((m.start(), end))
        pos = end
    out: list[tuple[int, int]] = []
    last = 0
    for start, end in [*spans, (len(text), len(text))]:
        out.extend((last + c.start(), last + c.end()) for c in _CODE_SPAN.finditer(text[last:start]))
        out.append((start, end))
        last = end
    return [(s, e) for s, e in out if s < e]


def _masked(text: str, code: Ranges) -> str:
    """``text`` with its code replaced by a character no pattern here matches (same offsets)."""
    if not code:
        return text
    parts, last = [], 0
    for start, end in code:
        parts += [text[last:start], "\0" * (end - start)]
        last = end
    parts.append(text[last:])
    return "".join(parts)


def _html_comments(text: str) -> list[tuple[int, int]]:
    """``<!-- … -->`` spans, in one pass: a pattern would rescan the rest of the note from each
    opener that has no closer (a note of 20,000 ``<!--`` took 9 s)."""
    out: list[tuple[int, int]] = []
    pos = 0
    while (start := text.find("<!--", pos)) >= 0:
        end = text.find("-->", start + 4)
        if end < 0:
            break  # no closer after this one: none after any later opener either
        out.append((start, end + 3))
        pos = end + 3
    return out


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(r for r in ranges if r[0] < r[1]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _links(masked: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    """Hidden parts of markdown links in ``masked[start:end]``, nested ones included."""
    for m in _LINK.finditer(masked, start, end):
        out += [m.span(1), m.span(3)]
        _links(masked, m.start(2), m.end(2), out)


def hidden(text: str, *, images: bool = False) -> list[tuple[int, int]]:
    """Sorted, disjoint ``(start, end)`` ranges of ``text`` that reading view does not show.

    With ``images``, whole images and embeds (``![alt](…)``, ``![[file]]``) too: what is left
    is what the text says, as opposed to what it shows (a banner, a row of badges).
    """
    if not any(mark in text for mark in ("%%", "<", "](", "[[")):
        return []
    masked = _masked(text, _code(text))
    out: list[tuple[int, int]] = []
    if images:
        out += (m.span() for m in _IMAGE.finditer(masked))
    out += (m.span() for m in _COMMENT.finditer(masked))
    out += _html_comments(masked)
    out += (m.span() for m in _TAG.finditer(masked))
    _links(masked, 0, len(masked), out)
    for m in _WIKILINK.finditer(masked):
        out.append((m.start(1), m.end(2)) if m.group(2) else m.span(1))
        out.append(m.span(4))
    return _merge(out)


def reading(text: str, ranges: Ranges, start: int = 0, end: int | None = None) -> str:
    """``text[start:end]`` without the parts of ``ranges`` (from :func:`hidden`) inside it."""
    end = len(text) if end is None else end
    if not ranges:
        return text[start:end]
    i = max(0, bisect_left(ranges, (start, start)) - 1)
    parts, pos = [], start
    for k in range(i, len(ranges)):  # not ranges[i:]: a copy per chunk is quadratic
        lo, hi = ranges[k]
        if lo >= end:
            break
        if hi <= pos:
            continue
        parts.append(text[pos:max(pos, lo)])
        pos = max(pos, min(hi, end))
    parts.append(text[pos:end])
    return "".join(parts)


def says_something(text: str) -> bool:
    """Whether ``text`` holds any words a reader reads: not only images, comments, markup."""
    return bool(reading(text, hidden(text, images=True)).strip())
