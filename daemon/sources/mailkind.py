"""The email collection's kind: mail files are containers, messages are documents (decision 0015).

An mbox holds many messages and grows at its end; a Maildir, .eml or .emlx file holds one and is
renamed when it moves (``new/`` to ``cur/``, a flag, another folder). A message is keyed by its
Message-ID (``ragd.daemon.sources.mail``), so a rename or a move between folders finds the same key
with the same content and costs no embedding. What is embedded is the message with its quoted
history and signature trimmed, then the text of its attachments, converted through the doc store.

Reading a message is bounded (decision 0025): an HTML-only body is turned into text in the
conversion worker (``ragd.daemon.convert.htmltext``), the message as a whole (body and attachments)
keeps at most ``MAX_MESSAGE_CHARS``, and its attachments are converted until the conversion time
limit is spent on them all together, not once each.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragd.daemon.convert.bounds import cut
from ragd.daemon.convert.htmltext import html_text
from ragd.daemon.models import Document, FileState, Skip
from ragd.daemon.sources.entry import Entry
from ragd.daemon.sources.files import WalkResult, read_bytes
from ragd.daemon.sources.mail import MAX_BODY_CHARS, MailMessage, parse_message, with_body
from ragd.daemon.sources.mailbox import (
    MAX_MESSAGE_BYTES,
    TOO_LARGE,
    MailFile,
    list_mail,
    mail_folder,
    read_emlx,
    read_mbox,
)

if TYPE_CHECKING:
    from ragd.daemon.convert.documents import Documents

_HEADING = re.compile(r"^(#{1,5})(?= )", re.M)
# Mail is plain text: a "---" under a line (a patch's diffstat, a signature rule) or a line that
# starts with "#" must not become a markdown heading that splits the message.
_SETEXT = re.compile(r"(?<=[^\n])\n(?=[ \t]{0,3}(?:=+|-+)[ \t]*(?:\n|$))")
_ATX = re.compile(r"^([ \t]{0,3})(#{1,6})(?=[ \t]|$)", re.M)


def plain_text_body(text: str) -> str:
    """A plain-text body that the markdown chunker reads as paragraphs, never headings."""
    return _ATX.sub(r"\1\\\2", _SETEXT.sub("\n\n", text))


# The text one message may give, its body and its attachments' together: the body alone is
# cut at MAX_BODY_CHARS, and a 30 MB text attachment became 35,840 chunks.
MAX_MESSAGE_CHARS = MAX_BODY_CHARS
DEFAULT_CONVERT_S = 120.0  # the attachments' time budget without a doc store's settings


def content_hash(msg: MailMessage) -> str:
    """What decides whether a message changed: its headers that are shown, its text (or its
    HTML, before it is turned into text) and its attachments' bytes; not its folder, flags or
    the mbox around it."""
    shown: list[Any] = [msg.subject, msg.sender, list(msg.recipients), msg.date, msg.body]
    if msg.html:
        shown.append(msg.html)
    h = hashlib.sha256(json.dumps(shown, ensure_ascii=False).encode("utf-8"))
    for a in msg.attachments:
        h.update(a.filename.encode("utf-8", "replace") + b"\0" + hashlib.sha256(a.data).digest())
    return h.hexdigest()


def cut_text_bytes(data: bytes, limit: int) -> bytes:
    """The first ``limit`` bytes of a text file, ending at a line break (else before a UTF-8
    sequence), so what is kept still decodes as it would have. UTF-16 and UTF-32 (a byte-order
    mark) are kept whole: their characters are not single bytes."""
    if len(data) <= limit or data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data
    at = data.rfind(b"\n", max(0, limit - 65536), limit)
    if at >= 0:
        return data[: at + 1]
    at = limit
    while at > limit - 4 and at > 0 and data[at] & 0xC0 == 0x80:
        at -= 1
    return data[:at]


class MailKind:
    """Maildir folders, mbox files (Thunderbird's too), .eml and Apple Mail .emlx files."""

    kind = "mail"
    newest_by_date = True  # the backlog embeds recent mail first, by the date it was sent

    def __init__(self, docs: Documents | None = None, *, only: str | None = None,
                 html_to_text: Callable[[str], str] | None = None) -> None:
        self.docs = docs
        self.only = only  # one file of the root, when [email] paths names a file
        # None: HTML bodies go to the conversion worker (tags stripped without one).
        self.html_to_text = html_to_text
        self._files: dict[str, MailFile] = {}

    # -- containers -----------------------------------------------------------------------------
    def walk(self, root: Path, *, should_stop: Callable[[], bool] | None = None,
             max_entries: int | None = None) -> WalkResult:
        files, skipped = list_mail(root, should_stop=should_stop, max_entries=max_entries)
        if self.only is not None:
            files = [f for f in files if f.path == self.only]
            skipped = [s for s in skipped if s[0] == self.only]
        self._files = {f.path: f for f in files}
        return WalkResult([FileState(f.path, f.size, f.mtime_ns) for f in files], skipped)

    def appendable(self, rel: str) -> bool:
        found = self._files.get(rel)
        return found is not None and found.kind == "mbox"

    def walk_state(self, paths: Sequence[str]) -> dict[str, Any]:
        """What ``entries`` needs of the walk, for the containers ``paths``: an extraction
        worker reads them with a kind of its own (decision 0041)."""
        return {p: dataclasses.astuple(self._files[p]) for p in paths if p in self._files}

    def take_walk_state(self, state: dict[str, Any]) -> None:
        self._files = {p: MailFile(*row) for p, row in state.items()}

    def entries(self, root: Path, rel: str, start: int) -> Iterator[Entry]:
        """The messages of one container from byte ``start`` on (0 but for a grown mbox)."""
        found = self._files.get(rel)
        if found is None:
            return
        if found.kind == "mbox":
            for m in read_mbox(root, rel, start):
                if isinstance(m, Skip):  # the file itself could not be opened
                    yield self._skipped(rel, "", m, start)
                elif m.skip is not None:
                    yield self._skipped(rel, str(m.offset), m.skip, m.end)
                else:
                    yield self._entry(root, rel, str(m.offset), m.data, m.end, m.warnings)
            return
        data = read_bytes(root, rel, MAX_MESSAGE_BYTES)
        if isinstance(data, Skip) and data.code == "too_large":
            data = Skip(TOO_LARGE, data.detail)
        if isinstance(data, Skip):
            yield self._skipped(rel, "", data, found.size)
            return
        if found.kind == "emlx":
            data = read_emlx(data)
        yield self._entry(root, rel, "", data, found.size)

    def location_metadata(self, root: Path, key: str, container: str,
                          locator: str) -> dict[str, Any]:
        """The metadata that changes when a message is found in another place."""
        out: dict[str, Any] = {"folder": mail_folder(container, mbox=bool(locator)),
                               "mailbox": container,
                               "offset": int(locator) if locator else None}
        if not key.startswith("mid:"):  # no Message-ID: the link is the mailbox file
            out["source_uri"] = (root / container).resolve().as_uri()
        return out

    # -- documents ------------------------------------------------------------------------------
    @staticmethod
    def _skipped(rel: str, locator: str, skip: Skip, end: int) -> Entry:
        key = f"skip:{rel}" + (f"#{locator}" if locator else "")
        return Entry(key, locator, "", end, lambda: skip)

    def _entry(self, root: Path, rel: str, locator: str, data: bytes, end: int,
               framing: tuple[str, ...] = ()) -> Entry:
        msg = parse_message(data)
        if isinstance(msg, Skip):
            return self._skipped(rel, locator, msg, end)
        if framing:  # what the mbox reader noticed around the message
            msg = dataclasses.replace(msg, warnings=tuple(dict.fromkeys(
                (*msg.warnings, *framing))))
        location = self.location_metadata(root, msg.key, rel, locator)
        return Entry(msg.key, locator, content_hash(msg), end,
                     lambda: self.document(msg, location), location)

    def document(self, msg: MailMessage, location: dict[str, Any]) -> Document:
        """The message as the pipeline chunks it: who wrote it and when, what they wrote (the
        quoted history and signature trimmed), then each attachment's text. At most
        ``MAX_MESSAGE_CHARS`` in all (``attachment_truncated``); the attachments are converted
        until the conversion time limit is spent (``attachment_time_budget``)."""
        deadline = time.monotonic() + (self.docs.settings.timeout_s if self.docs is not None
                                       else DEFAULT_CONVERT_S)
        if msg.html and not msg.body:
            msg = self.html_body(msg)
        warnings = list(msg.warnings)
        head = f"From: {msg.sender}" + (f" · {msg.date[:10]}" if msg.date else "")
        parts = [head, plain_text_body(msg.trimmed.strip())]
        budget = MAX_MESSAGE_CHARS - len(parts[1])
        for att in msg.attachments:
            if budget <= 0:
                warnings.append("attachment_truncated")
                break
            if time.monotonic() >= deadline:
                warnings.append("attachment_time_budget")
                break
            text = self._attachment_text(att.filename, att.data, warnings, budget)
            text, was_cut = cut(text, budget)
            if was_cut:
                warnings.append("attachment_truncated")
            if text:  # its headings one level down, under the attachment's own
                parts.append(f"## Attachment: {att.filename}\n\n" + _HEADING.sub(r"#\1", text))
                budget -= len(text)
        metadata = {**msg.metadata(location["folder"]), **location}
        metadata.setdefault("source_uri", msg.uri)
        return Document(title=msg.subject.strip() or "(no subject)",
                        text="\n\n".join(p for p in parts if p), source_type="email",
                        metadata=metadata, date=msg.date[:10] if msg.date else None,
                        warnings=tuple(dict.fromkeys(warnings)))

    def html_body(self, msg: MailMessage) -> MailMessage:
        """``msg`` with its HTML-only body turned into text: in the conversion worker, or by
        stripping tags when the HTML is too complex or the worker could not read it."""
        warnings: list[str] = []
        if self.html_to_text is not None:
            text = self.html_to_text(msg.html)
        else:
            converter = self.docs.store.converter if self.docs is not None else None
            text = html_text(msg.html, converter, warnings=warnings, stripped="html_body_stripped")
        return with_body(msg, text, tuple(warnings))

    def _attachment_text(self, filename: str, data: bytes, warnings: list[str],
                         budget: int) -> str:
        if self.docs is None or not data:
            return ""
        from ragd.daemon.convert.formats import format_for

        fmt = format_for(filename)
        if fmt is None:
            return ""  # an image, an archive, a calendar invite: kept out of the text
        if len(data) > self.docs.settings.max_file_bytes:
            warnings.append("attachment_too_large")
            return ""
        if not fmt.in_worker and len(data) > 4 * budget:  # text: never decoded past the cut
            data = cut_text_bytes(data, 4 * budget)
            warnings.append("attachment_truncated")
        conv = self.docs.store.convert(data, fmt, source_path=f"attachment:{filename}")
        if isinstance(conv, Skip):
            warnings.append("attachment_" + conv.code)
            return ""
        return conv.markdown.strip()
