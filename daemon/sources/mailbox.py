"""Where messages live: Maildir folders, mbox files (streamed), single .eml and .emlx files.

Every reader yields ``(locator, bytes)`` pairs, one per message, without holding a mailbox in
memory: an mbox of several GB is read line by line, and its locators are byte offsets, so a
file that only grew is read again from where the last pass stopped. Files are opened through
``daemon.sources.containment``: nothing outside the collection's root is read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from daemon.models import Skip
from daemon.sources.containment import open_inside

MAX_MESSAGE_BYTES = 50 * 1024 * 1024  # one message (with attachments) larger than this: skipped


@dataclass(frozen=True)
class MboxMessage:
    offset: int  # where its "From " line starts
    end: int  # where the next message (or the file) starts
    data: bytes  # without the "From " separator line


_FROM = re.compile(rb"From \S")


def read_mbox(root: str | os.PathLike[str], rel: str, start: int = 0
              ) -> Iterator[MboxMessage | Skip]:
    """The messages of an mbox from byte ``start`` on (0, or the ``end`` of the last message
    read before). A "From " line opens a message only at the start of the file or after a blank
    line, as mboxo/mboxrd writers guarantee; '>From ' quoting is undone (mboxrd)."""
    opened = open_inside(root, rel)
    if isinstance(opened, Skip):
        yield opened
        return
    fd, _ = opened
    with os.fdopen(fd, "rb") as fh:
        fh.seek(start)
        pos = offset = start
        lines: list[bytes] = []
        size, seen, too_big, blank_before = 0, False, False, True
        for line in fh:
            length = len(line)
            if blank_before and _FROM.match(line):
                if seen:
                    yield _message(offset, pos, lines, too_big)
                offset, lines, size, too_big, seen = pos, [], 0, False, True
            elif seen:
                if line.startswith(b">") and line.lstrip(b">").startswith(b"From "):
                    line = line[1:]
                size += length
                if size > MAX_MESSAGE_BYTES:
                    too_big, lines = True, []
                elif not too_big:
                    lines.append(line)
            pos += length
            blank_before = line.strip() == b""
        if seen:
            yield _message(offset, pos, lines, too_big)


def _message(offset: int, end: int, lines: list[bytes], too_big: bool) -> MboxMessage | Skip:
    if too_big:
        return Skip("too_large", f"message at byte {offset:,} is over "
                    f"{MAX_MESSAGE_BYTES:,} bytes")
    return MboxMessage(offset, end, b"".join(lines))
