"""Bytes of a document -> markdown, one function per format.

Runs inside the worker process (``ragd.daemon.convert.worker``) for every format that parses binary
or nested structure; the libraries are imported on first use there, never in the daemon.
Expected failures raise :class:`ConvertSkip` with a stable code from ``ragd.daemon.skips``.
The text formats are converted here; the others are in modules of their own, imported by
:func:`convert` when their format is asked for, and share ``converted`` with this one.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from ragd.daemon.convert.bounds import TRUNCATED, cut, text_budget
from ragd.daemon.convert.converted import Converted, ConvertSkip, decode, guarded
from ragd.daemon.convert.markdown import html_to_markdown, html_to_text, md_table, plain_text
from ragd.daemon.convert.ocr import OCR_MISSING, ocr_text, tesseract


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
    """A Calibre book's chapters (``calibre-<format>``, ragd.daemon.convert.calibrebook)."""
    from ragd.daemon.convert.calibrebook import BOOK_PREFIX, convert_book, is_book_format

    if not is_book_format(fmt):
        return None
    suffix = fmt[len(BOOK_PREFIX):]
    return guarded(suffix.upper(), lambda data: convert_book(data, suffix))


def _feed_converter(fmt: str) -> Callable[[bytes], Converted] | None:
    """A feed's entries (``feed:<max entries>``, ragd.daemon.convert.feedparse, decision 0029)."""
    from ragd.daemon.convert.feedparse import feed_converter

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
