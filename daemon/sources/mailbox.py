"""Where messages live: Maildir folders, mbox files (streamed), single .eml and .emlx files.

Every reader yields ``(locator, bytes)`` pairs, one per message, without holding a mailbox in
memory: an mbox of several GB is read line by line, and its locators are byte offsets, so a
file that only grew is read again from where the last pass stopped. Files are opened through
``ragd.daemon.sources.containment``: nothing outside the collection's root is read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ragd.daemon.models import Skip
from ragd.daemon.sources.containment import open_inside
from ragd.daemon.sources.files import walk_vault

# One message (with its attachments) larger than this is skipped as too_large: the standard
# library's parser holds ~8 times a message while it reads it (a 38 MB message peaked at
# 308 MB), and mail services refuse messages past 20-25 MB anyway.
MAX_MESSAGE_BYTES = 25 * 1024 * 1024
TOO_LARGE = "message_too_large"


@dataclass(frozen=True)
class MboxMessage:
    offset: int  # where its "From " line starts
    end: int  # where the next message (or the file) starts
    data: bytes  # without the "From " separator line
    skip: Skip | None = None  # why the message is not read (then ``data`` is empty)
    warnings: tuple[str, ...] = ()  # what the framing noticed (mbox_unquoted_from)


# A line is read at most this much at a time: one line of 3 GB is never held whole.
PIECE_BYTES = 64 * 1024
_FROM = re.compile(rb"From \S")
# What a separator carries after "From ": a sender (or "-"), then a date with a time and a
# year: "From ada@example.org Thu May  4 10:00:00 2023", Thunderbird's "From - Mon Jan 01
# 00:00:00 2001", Google Takeout's "... +0000 2023".
_SEPARATOR_DATE = re.compile(rb"\d{1,2}:\d\d.*\b\d{4}\b|\b\d{4}\b.*\d{1,2}:\d\d")
_HEADER_START = re.compile(rb"[!-9;-~]+:")


def read_mbox(root: str | os.PathLike[str], rel: str, start: int = 0
              ) -> Iterator[MboxMessage | Skip]:
    """The messages of an mbox from byte ``start`` on (0, or the ``end`` of the last message
    read before). A "From " line opens a message only at the start of the file or after a blank
    line, as mboxo/mboxrd writers guarantee, and only when it carries a date and a header line
    follows it: an unquoted "From " line in a body (mboxcl, a careless writer) stays in its
    message, with the warning ``mbox_unquoted_from``. '>From ' quoting is undone (mboxrd).
    Lines are read in pieces of ``PIECE_BYTES``; a message over ``MAX_MESSAGE_BYTES`` is not
    kept in memory but skipped as ``message_too_large``, and the reader goes on to the next."""
    opened = open_inside(root, rel)
    if isinstance(opened, Skip):
        yield opened
        return
    fd, _ = opened
    with os.fdopen(fd, "rb") as fh:
        fh.seek(start)
        yield from _frame(fh, start)


class _Framing:
    """The message being read."""

    def __init__(self) -> None:
        self.offset = 0
        self.lines: list[bytes] = []
        self.size = 0
        self.too_big = False
        self.warnings: list[str] = []

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.size > MAX_MESSAGE_BYTES:
            self.too_big, self.lines = True, []
        elif not self.too_big:
            self.lines.append(piece)

    def message(self, end: int) -> MboxMessage:
        if self.too_big:
            return MboxMessage(self.offset, end, b"", Skip(
                TOO_LARGE, f"message at byte {self.offset:,} is over "
                f"{MAX_MESSAGE_BYTES:,} bytes"))
        return MboxMessage(self.offset, end, b"".join(self.lines),
                           warnings=tuple(dict.fromkeys(self.warnings)))


def _frame(fh: BinaryIO, start: int) -> Iterator[MboxMessage]:
    pos = start
    current: _Framing | None = None
    held: tuple[int, bytes] | None = None  # a "From " line waiting for the line after it
    line_start, blank_before = True, True
    while True:
        piece = fh.readline(PIECE_BYTES)
        length = len(piece)
        starts, whole = line_start, piece.endswith(b"\n")
        line_start = whole
        if held is not None:  # the line after a possible separator decides
            at, sep = held
            held = None
            if piece and _HEADER_START.match(piece):
                if current is not None:
                    yield current.message(at)
                current = _Framing()
                current.offset = at
            elif current is not None:
                current.add(sep)
                current.warnings.append("mbox_unquoted_from")
        if not piece:
            break
        if starts and whole and blank_before and _FROM.match(piece):
            if current is None:  # the first message: the file was sniffed as an mbox
                current = _Framing()
                current.offset = pos
            elif _SEPARATOR_DATE.search(piece):
                held = (pos, piece)
            else:
                current.add(piece)
                current.warnings.append("mbox_unquoted_from")
        elif current is not None:
            if starts and piece.startswith(b">") and piece.lstrip(b">").startswith(b"From "):
                piece = piece[1:]
            current.add(piece)
        pos += length
        blank_before = starts and whole and not piece.strip()
    if current is not None:
        yield current.message(pos)


# -- listing ------------------------------------------------------------------------------------

# Files that live beside mail and are never mail: Thunderbird's summaries and indexes, Apple
# Mail's plists and databases, Dovecot's and notmuch's own files, lock files.
_NOT_MAIL_SUFFIXES = (".msf", ".dat", ".sqlite", ".sqlite-wal", ".sqlite-shm", ".json",
                      ".plist", ".lock", ".idx", ".cache", ".log", ".emlxpart", ".db", ".html",
                      ".txt", ".pdf", ".png", ".jpg", ".gif", ".ics", ".vcf", ".tgz", ".zip")
_NOT_MAIL_NAMES = frozenset(("maildirfolder", "subscriptions", "courierimapuiddb",
                             "courierimapkeywords", "dovecot-uidlist", "dovecot-keywords",
                             "dovecot.index", "msgFilterRules.dat", "popstate.dat"))
SNIFF_BYTES = 4096
_HEADER_LINE = re.compile(rb"[!-9;-~]+:[ \t]")  # RFC 5322 field name, then a colon


@dataclass(frozen=True)
class MailFile:
    """One file that holds mail: an mbox (many messages) or a single message."""

    path: str  # relative to the root, '/'-separated
    kind: str  # "mbox" | "message" | "emlx"
    folder: str  # the mail folder it belongs to, as a person would name it
    size: int
    mtime_ns: int


def could_be_mail(name: str) -> bool:
    """Whether a file name may hold mail (cheap: no file is opened)."""
    lower = name.lower()
    return not (name in _NOT_MAIL_NAMES or lower.endswith(_NOT_MAIL_SUFFIXES))


def mail_folder(rel: str, *, mbox: bool = False) -> str:
    """The folder a person sees: Maildir's cur/new dropped, Maildir++ '.A.B' as 'A/B', an mbox
    file's name without '.mbox' (Thunderbird's 'Inbox.sbd/Work' as 'Inbox/Work')."""
    parts = rel.split("/")
    if mbox:
        name = parts[-1]
        parts[-1] = name[:-5] if name.lower().endswith(".mbox") else name
    else:
        parts = parts[:-1]
    if parts and parts[-1] in ("cur", "new"):
        parts = parts[:-1]
    out: list[str] = []
    for part in parts:
        if part.startswith(".") and len(part) > 1:
            out.extend(p for p in part[1:].split(".") if p)
        elif part.lower().endswith(".sbd"):
            out.append(part[:-4])
        else:
            out.append(part)
    return "/".join(out) or "Inbox"


def classify(root: str | os.PathLike[str], rel: str) -> str | Skip:
    """'mbox', 'emlx' or 'message' from the first bytes of ``root/rel``; a Skip when the file
    is not mail (or cannot be read, or lies outside the root)."""
    opened = open_inside(root, rel)
    if isinstance(opened, Skip):
        return opened
    fd, st = opened
    with os.fdopen(fd, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    if not head.strip():
        return Skip("empty", "file is empty")
    if rel.lower().endswith(".emlx"):
        first, _, rest = head.partition(b"\n")
        if first.strip().isdigit() and _HEADER_LINE.match(rest.lstrip()):
            return "emlx"
    if head.startswith(b"From ") and b"\n" in head:
        return "mbox"
    if _HEADER_LINE.match(head.lstrip()):
        return "message"
    return Skip("not_mail", "does not start like an mbox or a mail message")


def read_emlx(data: bytes) -> bytes:
    """The message inside Apple Mail's .emlx: a byte count line, the message, then a plist."""
    first, _, rest = data.partition(b"\n")
    try:
        return rest[: int(first.strip())]
    except ValueError:
        return rest


def list_mail(root: str | os.PathLike[str], *, should_stop: Callable[[], bool] | None = None,
              max_entries: int | None = None) -> tuple[list[MailFile], list[tuple[str, Skip]]]:
    """Every file under ``root`` that holds mail, and the ones that could not be told apart.

    Maildir messages (files in ``cur/`` or ``new/``), ``.eml`` and ``.emlx`` files are known by
    where they are and their names; any other candidate (an ``.mbox``, Thunderbird's
    extension-less mbox beside its ``.msf``, a message file outside ``cur/``) is sniffed from
    its first bytes. Maildir++ folders (``.Sent``) are listed; ``tmp/`` (deliveries in
    progress) is not. Files are opened only through the containment rule.
    """
    walked = walk_vault(Path(root), exclude=("tmp",), hidden=True, accept=could_be_mail,
                        should_stop=should_stop, max_entries=max_entries)
    files: list[MailFile] = []
    skipped = list(walked.skipped)
    for f in walked.files:
        parent = f.path.rsplit("/", 2)[-2] if "/" in f.path else ""
        lower = f.path.lower()
        kind: str | Skip
        if parent in ("cur", "new") or lower.endswith(".eml"):
            kind = "message"
        elif lower.endswith(".emlx"):
            kind = "emlx"
        else:
            kind = classify(root, f.path)
        if isinstance(kind, Skip):
            if kind.code != "not_mail":
                skipped.append((f.path, kind))
            continue
        files.append(MailFile(f.path, kind, mail_folder(f.path, mbox=kind == "mbox"),
                              f.size, f.mtime_ns))
    return files, skipped
