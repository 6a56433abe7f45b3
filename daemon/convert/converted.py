"""What every format's converter returns and raises, and the checks they share.

The converters (``converters`` for text formats and the table of them all, ``books``,
``office``, ``latex``, ``calibrebook``, ``feedparse``) import these; nothing here imports a
converter, so the table can import its members without a circle.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ragd.daemon.text.decoding import decode_text

# A zip-based document (DOCX, PPTX, XLSX, EPUB) may expand to at most this much, and at most
# this many times its own size: past either it is a decompression bomb, not a document.
MAX_UNZIPPED_BYTES = 1 << 30
MAX_ZIP_RATIO = 200
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


@dataclass(frozen=True)
class Converted:
    """A document as markdown, with its own title ("" if none) and metadata (pages, authors,
    slides, sheets, chapters)."""

    title: str
    markdown: str
    metadata: dict[str, Any] = field(default_factory=dict)


class ConvertSkip(Exception):
    """An expected failure: the file is skipped with ``code`` (see ``ragd.daemon.skips``)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


def decode(data: bytes) -> str:
    """Text of a text format (UTF-8/16/32 by BOM, else Windows-1252), as notes are decoded."""
    decoded = decode_text(data)
    if not isinstance(decoded, tuple):
        raise ConvertSkip(decoded.code, decoded.detail)
    return decoded[0]


def open_zip(data: bytes, what: str) -> zipfile.ZipFile:
    """A zip container, checked: not an encrypted Office file, not a bomb, not encrypted."""
    if data.startswith(_OLE_MAGIC):
        if "EncryptedPackage".encode("utf-16-le") in data:
            raise ConvertSkip("encrypted", f"the {what} is password-protected")
        raise ConvertSkip("parse_error", f"not a {what}: an older binary Office file "
                          "(save it in the current format)")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError) as exc:
        raise ConvertSkip("parse_error", f"not a readable {what} (damaged or truncated "
                          f"zip: {exc})") from None
    total = sum(i.file_size for i in infos)
    if total > MAX_UNZIPPED_BYTES or total > MAX_ZIP_RATIO * max(len(data), 1 << 20):
        raise ConvertSkip("too_large", f"the {what} expands to {total:,} bytes "
                          "(a decompression bomb?)")
    if any(i.flag_bits & 0x1 for i in infos):
        raise ConvertSkip("encrypted", f"the {what}'s contents are password-protected")
    return zf


def guarded(what: str, fn: Callable[[bytes], Converted]) -> Callable[[bytes], Converted]:
    """``fn`` with a library's own exceptions on damaged input turned into ``parse_error``."""

    def run(data: bytes) -> Converted:
        try:
            return fn(data)
        except (ConvertSkip, MemoryError):
            raise
        except (zipfile.BadZipFile, EOFError) as exc:
            raise ConvertSkip("parse_error", f"damaged or truncated {what}: {exc}") from None
        except Exception as exc:  # the libraries raise anything on malformed input
            raise ConvertSkip("parse_error", f"not a readable {what}: "
                              f"{type(exc).__name__}: {str(exc)[:200]}") from None

    return run
