"""HTML that is not a document turned into text, bounded: HTML-only mail bodies and Calibre
book descriptions (decision 0025).

The HTML library never runs in the daemon: the text comes from the conversion worker (format
``mail_html``), within its time and memory limits. HTML too complex to be worth the library's
time (more than ``MAX_TAGS`` tags: 3 million nested ``<div>``s took 3.2 GB in process), or that
the worker could not convert, has its tags stripped instead, in linear time and in slices, with
a warning. Standard library only.
"""

from __future__ import annotations

import html as html_lib
import re
import time
from typing import TYPE_CHECKING

from ragd.daemon.models import Skip

if TYPE_CHECKING:
    from ragd.daemon.convert.docstore import Converter

MAIL_HTML = "mail_html"  # the worker's format: HTML to plain text
MAX_TAGS = 200_000  # a heavy newsletter has a few thousand
STRIP_SLICE = 1 << 20  # characters stripped at a time (~15 ms), the other threads running between
# A tag is at most 4,096 characters and holds no '<': every match attempt ends at the next '<'
# or after 4 KiB, so stripping is linear whatever the input.
_BREAK = re.compile(r"<(?:br|/p|/div|/tr|/li|/h[1-6]|/table|/blockquote)\b[^<>]{0,4096}>", re.I)
_TAG = re.compile(r"<[^<>]{0,4096}>")
_SPACES = re.compile(r"[ \t\r\f\v]+")
_BLANKS = re.compile(r" ?\n[ \n]*")


def strip_tags(html: str, max_chars: int = 2_000_000) -> str:
    """The text of ``html`` with its tags removed (line breaks kept at block ends), at most
    about ``max_chars`` of it. Linear, and in slices between which the writer thread runs: a
    fallback, not a converter."""
    out: list[str] = []
    produced = at = 0
    while at < len(html) and produced < max_chars:
        end = min(len(html), at + STRIP_SLICE)
        if end < len(html):
            tag = html.rfind("<", at + 1, end)
            end = tag if tag > 0 else end  # never cut a tag in two
        piece = _TAG.sub(" ", _BREAK.sub("\n", html[at:end]))
        piece = _BLANKS.sub("\n", _SPACES.sub(" ", html_lib.unescape(piece)))
        if piece.strip():
            out.append(piece)
            produced += len(piece)
        at = end
        time.sleep(0)  # let the writer go on with a saved note
    return _BLANKS.sub("\n", _SPACES.sub(" ", "".join(out))).strip()


def html_text(html: str, converter: Converter | None, *, warnings: list[str],
              stripped: str) -> str:
    """The text of ``html``: converted in the worker when there is one and the HTML is not
    too complex (the worker bounds the text it sends), else its tags stripped, with the
    warning ``stripped`` (``html_body_stripped``, ``description_stripped``)."""
    if not html.strip():
        return ""
    text: str | None = None
    if converter is not None and html.count("<") <= MAX_TAGS:
        answer = converter.convert(MAIL_HTML, html.encode("utf-8", "replace"))
        if isinstance(answer, Skip):
            if answer.code in ("no_text", "empty"):
                return ""
        else:
            text = str(answer.get("markdown") or "")
    if text is None:
        if converter is not None:  # without a worker (tests, tools) stripping is the way
            warnings.append(stripped)
        text = strip_tags(html)
    return text
