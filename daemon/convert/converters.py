"""Bytes of a document -> markdown, one function per format.

Runs inside the worker process (``ragd.daemon.convert.worker``) for every format that parses binary
or nested structure; the libraries are imported on first use there, never in the daemon.
Expected failures raise :class:`ConvertSkip` with a stable code from ``ragd.daemon.skips``.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ragd.daemon.convert.bounds import TRUNCATED, cut, text_budget
from ragd.daemon.convert.markdown import html_to_markdown, html_to_text, md_table, plain_text

# A zip-based document (DOCX, PPTX, XLSX, EPUB) may expand to at most this much, and at most
# this many times its own size: past either it is a decompression bomb, not a document.
MAX_UNZIPPED_BYTES = 1 << 30
MAX_ZIP_RATIO = 200
OCR_TIMEOUT_S = 120.0
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


def convert(fmt: str, data: bytes, *, ocr: bool = True) -> Converted:
    """Convert ``data`` of format ``fmt`` (a name from ``ragd.daemon.convert.formats``)."""
    if not data:
        raise ConvertSkip("empty", "file has zero bytes")
    fn = _CONVERTERS.get(fmt) or _pdf_ocr_converter(fmt, ocr) or _book_converter(fmt) \
        or _feed_converter(fmt)
    if fn is None:
        raise ConvertSkip("parse_error", f"no converter for {fmt!r}")
    if fmt == "image":
        return convert_image(data, ocr=ocr)
    out = fn(data)
    if not out.markdown.strip():
        raise ConvertSkip("no_text", f"the {fmt.upper()} holds no text")
    return bounded(out, len(data))


def bounded(out: Converted, size: int) -> Converted:
    """``out`` cut to the text a file of ``size`` bytes may produce (ragd.daemon.convert.bounds);
    a cut document says so in its metadata (``text_truncated``: the characters produced)."""
    markdown, was_cut = cut(out.markdown, text_budget(size))
    if not was_cut:
        return out
    return Converted(out.title, markdown, {**out.metadata, TRUNCATED: len(out.markdown)})


# -- shared checks -----------------------------------------------------------------------------
def decode(data: bytes) -> str:
    """Text of a text format (UTF-8/16/32 by BOM, else Windows-1252), as notes are decoded."""
    from ragd.daemon.sources.vault import decode_text

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


# -- text formats ------------------------------------------------------------------------------
def convert_text(data: bytes) -> Converted:
    return Converted("", decode(data))


def convert_markdown(data: bytes) -> Converted:
    return Converted("", decode(data))


def convert_html(data: bytes) -> Converted:
    markdown, title = html_to_markdown(decode(data))
    return Converted(title, markdown)


def convert_mail_html(data: bytes) -> Converted:
    """An HTML mail body or a book description (UTF-8, sent by the daemon) as plain text."""
    return Converted("", html_to_text(data.decode("utf-8", "replace")))


_CSV_SNIFF = 8192


def convert_csv(data: bytes) -> Converted:
    text = decode(data)
    try:
        dialect: Any = csv.Sniffer().sniff(text[:_CSV_SNIFF], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), dialect))
    except csv.Error as exc:
        raise ConvertSkip("parse_error", f"not a readable CSV: {exc}") from None
    return Converted("", md_table(rows) + "\n", {"rows": len(rows)})


# -- images ------------------------------------------------------------------------------------
def tesseract() -> str | None:
    return shutil.which("tesseract")


OCR_MISSING = ("reading text from images needs Tesseract OCR (e.g. apt install "
               "tesseract-ocr), which is not installed")


def ocr_text(exe: str, image: bytes, *, timeout_s: float = OCR_TIMEOUT_S,
             dpi: int | None = None) -> str:
    """The text Tesseract (``exe``) reads in an image (any format it reads: PNG, JPEG, PNM,
    ...); ``dpi`` when the image does not say its own. ConvertSkip on a timeout or an
    unreadable image."""
    env = dict(os.environ, OMP_THREAD_LIMIT="1")  # one core: the laptop stays usable
    args = [exe, "stdin", "stdout"] + (["--dpi", str(dpi)] if dpi else [])
    try:
        proc = subprocess.run(args, input=image, capture_output=True, timeout=timeout_s,
                              env=env, check=False)
    except subprocess.TimeoutExpired:
        raise ConvertSkip("convert_timeout", f"OCR took over {timeout_s:g} s") from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ConvertSkip("parse_error", "not a readable image: "
                          + (err[-1] if err else f"tesseract exit {proc.returncode}"))
    return proc.stdout.decode("utf-8", "replace").strip()


def convert_image(data: bytes, *, ocr: bool = True) -> Converted:
    """OCR with the Tesseract command, when it is installed (and OCR is on)."""
    exe = tesseract() if ocr else None
    if exe is None:
        raise ConvertSkip("ocr_unavailable", OCR_MISSING if ocr
                          else "OCR of images is turned off (convert.ocr)")
    text = ocr_text(exe, data)
    if not text:
        raise ConvertSkip("no_text", "OCR found no text in the image")
    return Converted("", plain_text(text) + "\n", {"ocr": True})


def _lazy(module: str, name: str, what: str) -> Callable[[bytes], Converted]:
    def run(data: bytes) -> Converted:
        import importlib

        fn = getattr(importlib.import_module(module), name)
        return guarded(what, fn)(data)

    return run


def _pdf_ocr_converter(fmt: str, ocr: bool) -> Callable[[bytes], Converted] | None:
    """A PDF whose pages without a text layer are read by OCR (``pdf+ocr:<pages>:<seconds>``,
    [documents] ocr_pdfs, decision 0044); the worker's ``ocr`` switch turns it off."""
    from ragd.daemon.convert.formats import PdfOcr

    options = PdfOcr.parse(fmt)
    if options is None:
        return None

    def run(data: bytes) -> Converted:
        from ragd.daemon.convert.books import convert_pdf

        return guarded("PDF", lambda d: convert_pdf(d, ocr=options if ocr else None))(data)

    return run


def _book_converter(fmt: str) -> Callable[[bytes], Converted] | None:
    """A Calibre book's chapters (``calibre-<format>``, ragd.daemon.sources.calibrebook)."""
    from ragd.daemon.sources.calibrebook import BOOK_PREFIX, convert_book, is_book_format

    if not is_book_format(fmt):
        return None
    suffix = fmt[len(BOOK_PREFIX):]
    return guarded(suffix.upper(), lambda data: convert_book(data, suffix))


def _feed_converter(fmt: str) -> Callable[[bytes], Converted] | None:
    """A feed's entries (``feed:<max entries>``, ragd.daemon.sources.feedparse, decision 0029)."""
    from ragd.daemon.sources.feedparse import feed_converter

    fn: Callable[[bytes], Converted] | None = feed_converter(fmt)
    return fn


_CONVERTERS: dict[str, Callable[[bytes], Converted]] = {
    "pdf": _lazy("ragd.daemon.convert.books", "convert_pdf", "PDF"),
    "epub": _lazy("ragd.daemon.convert.books", "convert_epub", "EPUB"),
    "mobi": _lazy("ragd.daemon.convert.books", "convert_mobi", "MOBI"),
    "docx": _lazy("ragd.daemon.convert.office", "convert_docx", "DOCX"),
    "pptx": _lazy("ragd.daemon.convert.office", "convert_pptx", "PPTX"),
    "xlsx": _lazy("ragd.daemon.convert.office", "convert_xlsx", "XLSX"),
    "html": guarded("HTML", convert_html),
    "mail_html": guarded("HTML", convert_mail_html),
    "latex": _lazy("ragd.daemon.convert.latex", "convert_latex", "LaTeX"),
    "csv": guarded("CSV", convert_csv),
    "markdown": convert_markdown,
    "txt": convert_text,
    "image": lambda data: convert_image(data),
}
