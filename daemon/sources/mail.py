"""Mail messages: one RFC 5322 message (bytes) parsed into a ``MailMessage``.

Pure: nothing is read here but the bytes given. The standard library's ``email`` package
(policy ``compat32``) splits the MIME parts and undoes transfer encodings; charsets and RFC 2047
headers are decoded here, bounded: a part is decoded only up to what the body may keep, and only
with a codec that decodes in linear time (``mail_codec``). What cannot be decoded becomes a
warning, never an exception. An HTML-only body is kept as HTML (``html``) for the caller to turn
into text in the conversion worker (``ragd.daemon.sources.mailkind``), or turned into text here by the
``html_to_text`` collaborator when one is passed. What is embedded drops quoted history and the
signature (``trimmed``); ``body`` keeps the whole text.
"""

from __future__ import annotations

import codecs
import dataclasses
import email
import email.errors
import email.header
import email.policy
import email.utils
import hashlib
import logging
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import Message
from typing import Any

from ragd.daemon.models import Skip

log = logging.getLogger(__name__)

HtmlToText = Callable[[str], str]
MAX_ATTACHMENTS = 50
MAX_RECIPIENTS = 100
MAX_HEADER_CHARS = 16_384  # of any one header: a To: line of 100,000 addresses is cut here
MAX_PARTS = 500  # MIME parts looked at; the rest of a message of 20,000 parts is not read
MAX_BODY_CHARS = 2_000_000  # of text body: a 50 MB log pasted into a mail is cut here
# Bytes of one part decoded at most: the body's cut at 4 bytes a character (UTF-8's longest);
# an HTML part may be mostly markup. A 40 MB body is never decoded whole.
MAX_TEXT_PART_BYTES = 4 * MAX_BODY_CHARS
MAX_HTML_PART_BYTES = 16 * MAX_BODY_CHARS


@dataclass(frozen=True)
class Attachment:
    """A named part of a message, kept for conversion through the doc store."""

    filename: str
    content_type: str
    data: bytes


@dataclass(frozen=True)
class MailMessage:
    """What ragd keeps of one message."""

    key: str  # "mid:<message-id>", or "sha256:<hash of the bytes>" without a Message-ID
    message_id: str | None
    subject: str
    sender: str  # "Name <address>", or the address alone
    recipients: tuple[str, ...]
    date: str | None  # ISO 8601 with its time zone, as the message says
    in_reply_to: str | None
    references: tuple[str, ...]
    body: str  # the whole text body
    trimmed: str  # the body without quoted history and signature: what is embedded
    attachments: tuple[Attachment, ...] = ()
    warnings: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    html: str = ""  # an HTML-only body not turned into text yet (``body`` is "" then)

    @property
    def uri(self) -> str:
        """A stable ``mid:`` URI (RFC 2392) when there is a Message-ID."""
        if self.message_id:
            from urllib.parse import quote

            return "mid:" + quote(self.message_id, safe="@!$&'()*+,;=:")
        return ""

    def metadata(self, folder: str) -> dict[str, Any]:
        """The metadata a search result carries."""
        return {"sender": self.sender, "recipients": list(self.recipients), "date": self.date,
                "folder": folder, "subject": self.subject, "message_id": self.message_id,
                "in_reply_to": self.in_reply_to, "references": list(self.references),
                "attachments": [a.filename for a in self.attachments]}


def parse_message(data: bytes, *, html_to_text: HtmlToText | None = None) -> MailMessage | Skip:
    """Parse one message; a Skip only when nothing of it can be read. Without ``html_to_text``
    an HTML-only body stays HTML, in ``html``, for the caller to convert (``with_body``)."""
    if not data.strip():
        return Skip("empty", "message has no bytes")
    try:
        # compat32 parses in linear time and leaves headers as text: the default policy's
        # header registry took 58 s for one To: line of 100,000 addresses, and 2.9 s to
        # build 20,000 parts. Headers and parts are decoded here, bounded, instead.
        msg = email.message_from_bytes(data, policy=email.policy.compat32)
    except Exception as exc:  # the parser is lenient; this is a last resort
        return Skip("parse_error", f"not a mail message: {type(exc).__name__}: {exc}")
    if not msg.keys():
        return Skip("not_mail", "no mail headers: not a mail message")
    warnings: list[str] = []
    try:
        headers = _headers(msg, warnings)
        content, attachments = _content(msg, html_to_text, warnings)
    except Exception as exc:  # a parser bug must cost one message, not the mailbox
        log.exception("unexpected error parsing a message")
        return Skip("parse_error", f"{type(exc).__name__}: {exc}")
    body, html = ("", content.html) if isinstance(content, _Html) else (content, "")
    if not body.strip() and not html.strip() and not headers["subject"] and not attachments:
        return Skip("empty", "message has no subject, text or attachment")
    mid = headers["message_id"]
    key = f"mid:{mid}" if mid else "sha256:" + hashlib.sha256(data).hexdigest()
    return MailMessage(key=key, body=body, trimmed=trim_quoted(body),
                       attachments=tuple(attachments), warnings=tuple(dict.fromkeys(warnings)),
                       html=html, **headers)


def with_body(msg: MailMessage, text: str, warnings: tuple[str, ...] = ()) -> MailMessage:
    """``msg`` with its HTML body turned into ``text`` (cut to ``MAX_BODY_CHARS``)."""
    more = list(warnings)
    if len(text) > MAX_BODY_CHARS:
        text = text[:MAX_BODY_CHARS]
        more.append("body_truncated")
    text = text.replace("\r\n", "\n")
    return dataclasses.replace(msg, body=text, trimmed=trim_quoted(text), html="",
                               warnings=tuple(dict.fromkeys((*msg.warnings, *more))))


# -- headers ----------------------------------------------------------------------------------

_MSGID = re.compile(r"<([^<>\s]+)>")


def _header(msg: Message, name: str, warnings: list[str]) -> str:
    """A header's text, RFC 2047 words decoded, at most ``MAX_HEADER_CHARS`` of it."""
    raw = msg.get(name)
    if raw is None:
        return ""
    text = str(raw)
    if len(text) > MAX_HEADER_CHARS:
        text = text[:MAX_HEADER_CHARS]
        warnings.append("header_truncated")
    if "=?" in text:
        try:
            text = str(email.header.make_header(email.header.decode_header(text)))
        except (LookupError, UnicodeError, ValueError, email.errors.HeaderParseError):
            warnings.append("bad_header")
    return " ".join(text.split())


def _ids(text: str) -> list[str]:
    return _MSGID.findall(text)


def _addresses(msg: Message, names: tuple[str, ...], warnings: list[str]) -> list[str]:
    values = [_header(msg, n, warnings) for n in names]
    out = []
    # getaddresses on the text, not the parsed header objects: it copes with groups
    # ("undisclosed-recipients:;") that the header registry trips over.
    for name, addr in email.utils.getaddresses([v for v in values if v]):
        if addr or name:
            out.append(f"{name} <{addr}>" if name and addr else addr or name)
    return list(dict.fromkeys(out))[:MAX_RECIPIENTS]


def _headers(msg: Message, warnings: list[str]) -> dict[str, Any]:
    mid_ids = _ids(_header(msg, "Message-ID", warnings))
    senders = _addresses(msg, ("From",), warnings) or _addresses(msg, ("Sender",), warnings)
    reply = _ids(_header(msg, "In-Reply-To", warnings))
    return {
        "message_id": mid_ids[0] if mid_ids else None,
        "subject": _header(msg, "Subject", warnings),
        "sender": senders[0] if senders else "",
        "recipients": tuple(_addresses(msg, ("To", "Cc"), warnings)),
        "date": _date(_header(msg, "Date", warnings)) or _received_date(msg),
        "in_reply_to": reply[0] if reply else None,
        "references": tuple(_ids(_header(msg, "References", warnings))[-50:]),
    }


def _received_date(msg: Message) -> str | None:
    """Without a Date header: when the nearest server received it (the top Received line)."""
    for value in msg.get_all("Received", failobj=[]) or []:
        _, sep, when = str(value).rpartition(";")
        if sep and (iso := _date(when.strip())):
            return iso
    return None


def _date(text: str) -> str | None:
    """ISO 8601 with the message's own offset; UTC when the message names no zone."""
    if not text:
        return None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    if not datetime(1970, 1, 1, tzinfo=UTC) <= when <= datetime(2200, 1, 1, tzinfo=UTC):
        return None
    return when.isoformat()


# -- content ----------------------------------------------------------------------------------


# Codecs whose decoder is not a table or a C loop: punycode decodes in quadratic time (a
# 2.9 MB part took 186 s), the escape codecs are Python source syntax, not mail charsets.
_UNICODE_CODECS = frozenset({"ascii", "iso8859-1", "utf-8", "utf-8-sig", "utf-7", "utf-16",
                             "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"})
_WIDE = ("utf-16", "utf-32")
_ASCII_TEXT = bytes(range(0x20, 0x7F)) + b"\t\n\r\f"


def mail_codec(charset: str) -> str | None:
    """The codec to decode a part declared in ``charset``, or None when there is none or it
    is refused: only codecs that decode in linear time are used (Unicode's, the single-byte
    tables, the C codecs of Chinese, Japanese and Korean)."""
    try:
        info = codecs.lookup(charset)
    except (LookupError, ValueError):
        return None
    if info.name in _UNICODE_CODECS:
        return info.name
    decode = info.decode
    owner = getattr(decode, "__self__", None)
    if type(owner).__name__ == "MultibyteCodec":  # the C codecs of CJK charsets
        return info.name
    module = sys.modules.get(getattr(decode, "__module__", None) or "")
    if isinstance(getattr(module, "decoding_table", None), str):  # a single-byte table
        return info.name
    return None


class _Html:
    """An HTML body not turned into text yet."""

    def __init__(self, html: str) -> None:
        self.html = html


def _text_of(part: Message, warnings: list[str], *, limit: int = MAX_TEXT_PART_BYTES) -> str:
    """A text part's content in its declared charset, at most ``limit`` bytes of it decoded.
    An unknown, refused or lying charset falls back to UTF-8, then Windows-1252, with a
    warning; UTF-16 or UTF-32 declared over plain ASCII bytes is read as ASCII."""
    raw = part.get_payload(decode=True) or b""
    if not isinstance(raw, bytes):
        return ""
    whole = len(raw) <= limit
    if not whole:
        raw = raw[:limit]
        warnings.append("body_truncated")
    declared = part.get_content_charset() or "us-ascii"
    codec = mail_codec(declared)
    if codec is not None and codec.startswith(_WIDE) and len(raw) >= 4 \
            and not raw.translate(None, _ASCII_TEXT):
        warnings.append("charset_mismatch")  # read as what it is, not as CJK garbage
        codec = "ascii"
    if codec is not None:
        try:
            # Incremental: a part cut at ``limit`` may end inside a character.
            return codecs.getincrementaldecoder(codec)().decode(raw, final=whole)
        except UnicodeDecodeError:
            pass
    if declared.lower() not in ("us-ascii", "ascii"):
        warnings.append("unknown_charset")
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(raw, final=whole)
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")


def _content(msg: Message, html_to_text: HtmlToText | None, warnings: list[str]
             ) -> tuple[str | _Html, list[Attachment]]:
    """The text body (plain preferred, else HTML: as text with ``html_to_text``, else as
    HTML) and the named attachments."""
    plain: list[str] = []
    html: list[str] = []
    attachments: list[Attachment] = []
    for n, part in enumerate(msg.walk()):
        if n >= MAX_PARTS:
            warnings.append("mime_truncated")
            break
        if part.defects:
            warnings.append("mime_defects")
        if part.is_multipart():
            continue
        ctype = part.get_content_type()
        filename = _filename(part, warnings)
        disposition = (part.get_content_disposition() or "").lower()
        if filename or disposition == "attachment":
            if len(attachments) < MAX_ATTACHMENTS:
                payload = part.get_payload(decode=True)
                attachments.append(Attachment(filename or "attachment", ctype,
                                              payload if isinstance(payload, bytes) else b""))
            continue
        if ctype == "text/plain" or ctype.startswith("multipart/"):
            # A multipart whose boundary never appears is left as one text: read it as such.
            plain.append(_text_of(part, warnings))
        elif ctype == "text/html":
            html.append(_text_of(part, warnings, limit=MAX_HTML_PART_BYTES))
    if plain and any(p.strip() for p in plain):
        body = "\n\n".join(p.strip("\n") for p in plain)
    elif html and html_to_text is None:
        return _Html("\n".join(html)), attachments
    elif html and html_to_text is not None:
        body = "\n\n".join(html_to_text(h).strip("\n") for h in html)
    else:
        body = ""
    if len(body) > MAX_BODY_CHARS:
        warnings.append("body_truncated")
        body = body[:MAX_BODY_CHARS]
    return body.replace("\r\n", "\n"), attachments


def _filename(part: Message, warnings: list[str]) -> str:
    try:
        name = part.get_filename()
        if name and "=?" in name:  # RFC 2047 in a filename: common, though not standard
            name = str(email.header.make_header(email.header.decode_header(name)))
    except Exception:
        warnings.append("bad_header")
        return ""
    # Only the last path component: a name like "../../x" must not look like a path.
    return re.split(r"[\\/]", name)[-1].strip() if name else ""


# -- what is embedded ---------------------------------------------------------------------------

_SIGNATURE = re.compile(r"^-- ?$", re.M)
# "On Tue, 3 Nov 2009, Ada wrote:" / "Ada <a@b> wrote:" / Outlook's original-message banner.
_ATTRIBUTION = re.compile(r"^(?:On .{4,200}(?:wrote|writes):|.{2,120} (?:wrote|writes):)\s*$"
                          r"|^-{2,} ?Original Message ?-{2,}", re.M | re.I)


def trim_quoted(body: str) -> str:
    """The body without its signature, quoted lines ('>') and the attribution line above a
    quote. Quotes interleaved with replies keep the replies. Never returns nothing for a
    body that has text: a message that is all quote is kept whole."""
    sig = _SIGNATURE.search(body)
    text = body[: sig.start()] if sig else body
    banner = _ATTRIBUTION.search(text)
    if banner and banner.group(0).lstrip("-").lower().startswith("original"):
        text = text[: banner.start()]  # everything below Outlook's banner is the old mail
    kept: list[str] = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith(">"):
            continue
        if _ATTRIBUTION.fullmatch(line.strip()):
            nxt = next((ln for ln in lines[i + 1 : i + 50] if ln.strip()), "")
            if nxt.lstrip().startswith(">"):
                continue
        kept.append(line)
    out = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return out or body.strip()
