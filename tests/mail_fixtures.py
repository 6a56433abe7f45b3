"""Generated mail for tests: messages, Maildir deliveries and mbox files, written the way mail
programs write them (a Maildir message lands in ``tmp/``, then is renamed into ``new/``)."""

from __future__ import annotations

import email.utils
import os
import time
from email.message import EmailMessage
from pathlib import Path

_counter = 0


def message(subject: str, body: str, *, sender: str = "Ada Lovelace <ada@example.org>",
            to: str = "Charles Babbage <charles@example.org>", date: str = "2023-05-04 10:00",
            msgid: str | None = None, html: str | None = None,
            attachment: tuple[str, str, bytes] | None = None) -> bytes:
    """One RFC 5322 message. ``html`` makes an HTML-only body; ``attachment`` is
    (filename, mime type, bytes)."""
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    when = time.strptime(date, "%Y-%m-%d %H:%M")
    msg["Date"] = email.utils.formatdate(time.mktime(when), localtime=False)
    if msgid != "":
        msg["Message-ID"] = f"<{msgid or subject.lower().replace(' ', '-')}@example.org>"
    if html is not None:
        msg.set_content(html, subtype="html")
    else:
        msg.set_content(body)
    if attachment is not None:
        name, mime, data = attachment
        maintype, subtype = mime.split("/")
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return msg.as_bytes()


def maildir(root: Path) -> Path:
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return root


def deliver(folder: Path, data: bytes) -> Path:
    """Deliver into ``folder/new`` as an MDA does: write to ``tmp/``, then rename."""
    global _counter
    _counter += 1
    name = f"{int(time.time())}.M{_counter}P{os.getpid()}.ragd-test"
    tmp = folder / "tmp" / name
    tmp.write_bytes(data)
    dest = folder / "new" / name
    os.rename(tmp, dest)
    return dest


def mark_seen(path: Path) -> Path:
    """What a mail reader does once a message is read: new/ -> cur/ with the S flag."""
    dest = path.parent.parent / "cur" / (path.name + ":2,S")
    os.rename(path, dest)
    return dest


def mbox_bytes(messages: list[bytes]) -> bytes:
    """An mboxrd file: a "From " line before each message, body "From " lines quoted."""
    out = []
    for data in messages:
        lines = data.replace(b"\r\n", b"\n").split(b"\n")
        quoted = [b">" + ln if ln.lstrip(b">").startswith(b"From ") else ln for ln in lines]
        out.append(b"From ragd@example.org Thu May  4 10:00:00 2023\n" + b"\n".join(quoted)
                   .rstrip(b"\n") + b"\n\n")
    return b"".join(out)


# -- hostile mail (issue 28) ----------------------------------------------------------------------
SEPARATOR = b"From ada@example.org Thu May  4 10:00:00 2023\n"


def raw(subject: str, mid: str, content_type: str, body: bytes,
        encoding: str = "8bit") -> bytes:
    """A message with one body part of ``content_type``, its bytes as given."""
    return (f"From: Mallory <mallory@example.org>\nTo: ada@example.org\nSubject: {subject}\n"
            f"Date: Thu, 04 May 2023 10:00:00 +0000\nMessage-ID: <{mid}@example.org>\n"
            f"MIME-Version: 1.0\nContent-Type: {content_type}\n"
            f"Content-Transfer-Encoding: {encoding}\n\n").encode() + body


def nested(tag: str, close: str, n: int, text: str) -> bytes:
    """``n`` nested ``tag``s around ``text`` (a line break every 1,000: mail lines are short)."""
    opening = ((tag * 1000 + "\n") * (n // 1000)).encode()
    return opening + text.encode() + ((close * 1000 + "\n") * (n // 1000)).encode()


def latex(n: int) -> bytes:
    """A LaTeX paper of ~1 MB that pylatexenc takes seconds over (280,000 characters/s)."""
    para = " ".join(f"word{i % 50} \\emph{{x{n}}}" for i in range(40))
    return ("\\documentclass{article}\\begin{document}\n"
            + "".join(f"\\section{{Part {n}.{j}}}\n{para}\n\n" for j in range(2500))
            + "\\end{document}\n").encode()
