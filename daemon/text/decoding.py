"""A text file's bytes as text: by its byte-order mark, else UTF-8, else Windows-1252.

Notes, plain-text documents, CSV and HTML files are all decoded here, the same way.
"""

from __future__ import annotations

import codecs

from ragd.daemon.models import Skip

BINARY_SNIFF_BYTES = 8192

# UTF-32 first: its little-endian BOM begins with UTF-16's.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def decode_text(data: bytes) -> tuple[str, list[str]] | Skip:
    """Text from a file's bytes: UTF-16/32 by their BOM, else UTF-8 (BOM removed), else
    Windows-1252 with a warning. NUL bytes in anything else mean binary data."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding), []  # these codecs drop the BOM themselves
            except UnicodeDecodeError:
                return Skip("binary", f"starts with a {encoding.upper()} byte-order mark but "
                            f"is not valid {encoding.upper()}")
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return Skip("binary", f"NUL byte in the first {BINARY_SNIFF_BYTES} bytes")
    try:
        return data.decode("utf-8-sig"), []
    except UnicodeDecodeError:
        # Legacy notes are most often Windows-1252 or Latin-1; decoding them as such keeps
        # "crème" searchable, where replacement characters would lose it.
        try:
            return data.decode("cp1252"), ["invalid_utf8"]
        except UnicodeDecodeError:
            return data.decode("latin-1"), ["invalid_utf8"]
