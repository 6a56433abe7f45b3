"""A Calibre book as numbered chapters, so a passage says where it is in the book.

The EPUB's package file gives the reading order (the spine); each chapter's XHTML becomes
markdown under ``# Chapter N``, its own headings one level down. N counts the chapters that hold
text, in reading order: it is stable for as long as the file is, and search reads it back as the
result's ``page_number`` (``ragd.daemon.convert.formats.page_number``), as it reads a PDF's
``## Page N``. A book in a format ragd does not read (ODT, RTF, FB2, MOBI, ...) is turned into an
EPUB by Calibre's ``ebook-convert`` first.

All of it runs in the conversion worker (decision 0025), format ``calibre-epub`` or
``calibre-<format>``: the daemon sends the book's bytes and receives the markdown, within the
worker's time and memory limits, which ``ebook-convert`` inherits as the worker's child. The
text is bounded by the book's size on disk (``ragd.daemon.convert.bounds``): the spine is read until
the budget is spent, a chapter listed twice is read once, and no chapter is read past what the
budget could use. Before, the daemon read every chapter itself: a 154 KB EPUB listing one
150 MB chapter 20 times took it to 3.34 GB.
"""

from __future__ import annotations

import posixpath
import re
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ragd.daemon.convert.bounds import TRUNCATED, text_budget
from ragd.daemon.convert.converted import Converted, ConvertSkip, decode, open_zip
from ragd.daemon.convert.formats import Format

CHAPTER_HEADING = "Chapter {n}"
BOOK_PREFIX = "calibre-"  # the worker's formats: calibre-epub, calibre-odt, calibre-mobi, ...
_NS = {"c": "urn:oasis:names:tc:opendocument:xmlns:container",
       "opf": "http://www.idpf.org/2007/opf", "dc": "http://purl.org/dc/elements/1.1/"}
_HTML_TYPES = ("application/xhtml+xml", "text/html")
_ATX = re.compile(r"^(#{1,5})(?= )", re.M)
MAX_XML_BYTES = 4 * 2**20
# A chapter is read at most this many bytes per character of budget left (markup, inline
# styles), and at least MIN_CHAPTER_BYTES.
CHAPTER_BYTES_PER_CHAR = 16
MIN_CHAPTER_BYTES = 4 * 2**20
_KINDLE = ("mobi", "azw", "azw3")


def book_format(fmt: str) -> Format:
    """The doc store format of a Calibre book file of format ``fmt`` (EPUB, ODT, MOBI, ...):
    its chapters, through ebook-convert unless it is an EPUB. Its chunks are ``epub``."""
    return Format(BOOK_PREFIX + fmt.lower(), "epub", "1")


def is_book_format(name: str) -> bool:
    suffix = name[len(BOOK_PREFIX):]
    return name.startswith(BOOK_PREFIX) and suffix.isalnum() and len(suffix) <= 8


def _xml(zf: zipfile.ZipFile, name: str) -> ET.Element | None:
    try:
        info = zf.getinfo(name)
        if info.file_size > MAX_XML_BYTES:
            return None
        return ET.fromstring(zf.read(info))
    except (KeyError, ET.ParseError, zipfile.BadZipFile, ValueError):
        return None


def convert_book(data: bytes, suffix: str) -> Converted:
    """Worker side: the book as chapters (a ``Converted``); ``suffix`` is its format."""
    if suffix == "epub":
        return convert_chapters(data)
    return _through_ebook_convert(data, suffix)


def convert_chapters(data: bytes, *, budget: int | None = None) -> Converted:
    """An EPUB as ``# Chapter N`` sections (N from 1, chapters without text not counted), at
    most ``budget`` characters (the EPUB's own budget by default). An EPUB with no readable
    package file is converted as the doc store converts any EPUB."""
    from ragd.daemon.convert.books import _encrypted, convert_epub
    from ragd.daemon.convert.markdown import html_to_markdown

    zf = open_zip(data, "EPUB")
    container = _xml(zf, "META-INF/container.xml")
    rootfile = container.find(".//c:rootfile", _NS) if container is not None else None
    opf_path = rootfile.get("full-path") if rootfile is not None else None
    opf = _xml(zf, opf_path) if opf_path else None
    if opf is None or not opf_path:
        return convert_epub(data)  # which says why it cannot be read
    encrypted = _encrypted(zf)
    base = posixpath.dirname(opf_path)
    manifest = {i.get("id"): i for i in opf.iterfind(".//opf:manifest/opf:item", _NS)}
    budget = text_budget(len(data)) if budget is None else budget
    blocks: list[str] = []
    produced, read = 0, set()
    for ref in opf.iterfind(".//opf:spine/opf:itemref", _NS):
        if produced > budget:
            break
        item = manifest.get(ref.get("idref"))
        if item is None or item.get("media-type") not in _HTML_TYPES:
            continue
        name = posixpath.normpath(posixpath.join(base, unquote(item.get("href") or "")))
        if name in read:
            continue  # a chapter listed twice in the spine is read once
        read.add(name)
        if name in encrypted:
            raise ConvertSkip("encrypted", "the EPUB is DRM-protected (encrypted chapters)")
        raw = _chapter(zf, name, max(MIN_CHAPTER_BYTES,
                                     CHAPTER_BYTES_PER_CHAR * (budget - produced)))
        if raw is None:
            continue  # a spine entry with no file: the rest of the book still reads
        markdown, _ = html_to_markdown(decode(raw))
        text = markdown.strip()
        if text:
            heading = CHAPTER_HEADING.format(n=len(blocks) + 1)
            blocks.append(f"# {heading}\n\n" + _ATX.sub(r"#\1", text))
            produced += len(text)
    metadata: dict[str, Any] = {"chapters": len(blocks)}
    if produced > budget:
        metadata[TRUNCATED] = produced  # at least this much: the rest was not read
    return Converted("", "\n\n".join(blocks), metadata)


def _chapter(zf: zipfile.ZipFile, name: str, limit: int) -> bytes | None:
    """A chapter's bytes, at most ``limit`` of them (cut after a tag: the HTML parser reads
    what is there, and a character is never split)."""
    try:
        with zf.open(name) as fh:
            raw = fh.read(limit + 1)
    except (KeyError, ValueError, zipfile.BadZipFile, EOFError):
        return None
    if len(raw) > limit:
        raw = raw[: raw.rfind(b">", 0, limit) + 1]
    return raw


def _through_ebook_convert(data: bytes, suffix: str) -> Converted:
    """A book Calibre reads and ragd does not, as an EPUB's chapters. ebook-convert runs as
    the worker's child: the worker's memory limit applies to it, and it dies with the worker
    (which the daemon kills at the conversion time limit)."""
    from ragd.daemon.convert import books

    if suffix in _KINDLE and books.mobi_encryption(data):
        raise ConvertSkip("encrypted", "the book is DRM-protected (Kindle encryption)")
    exe = books.ebook_convert()
    if exe is None:
        raise ConvertSkip("ebook_convert_missing", books.EBOOK_CONVERT_HINT)
    with tempfile.TemporaryDirectory(prefix="ragd-calibre-") as tmp:
        src, out = Path(tmp) / f"book.{suffix}", Path(tmp) / "book.epub"
        src.write_bytes(data)
        returncode, err = books._run_ebook_convert([exe, str(src), str(out)])
        if returncode != 0 or not out.is_file():
            if "DRM" in err:
                raise ConvertSkip("encrypted", "the book is DRM-protected")
            if "MemoryError" in err or "std::bad_alloc" in err:
                raise ConvertSkip("convert_memory", "ebook-convert needed more memory than the "
                                  "conversion worker's limit")
            if returncode < 0:  # killed by a signal: a crash, or memory the limit refused
                raise ConvertSkip("convert_crashed", f"ebook-convert died (signal "
                                  f"{-returncode}) on this book")
            last = err.strip().splitlines()[-1:] or [f"exit status {returncode}"]
            raise ConvertSkip("parse_error", f"ebook-convert could not read the book: "
                              f"{last[0][:200]}")
        epub = out.read_bytes()
    book = convert_chapters(epub, budget=text_budget(len(data)))
    return Converted(book.title, book.markdown, {**book.metadata, "converter": "ebook-convert"})
