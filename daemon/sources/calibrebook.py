"""A reflowable book (EPUB) as numbered chapters, so a passage says where it is in the book.

The EPUB's package file gives the reading order (the spine); each chapter's XHTML is converted
through the doc store as HTML (in the conversion worker, cached by its bytes), its headings
moved one level down under ``# Chapter N``. N counts the chapters that hold text, in reading
order: it is stable for as long as the file is, and search reads it back as the result's
``page_number`` (``daemon.convert.formats.page_number``), as it reads a PDF's ``## Page N``.
Only the zip directory and the two small XML files are read in this process, with the doc
store's limits against decompression bombs; the chapters' HTML is parsed in the worker.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING
from urllib.parse import unquote

from daemon.models import Skip

if TYPE_CHECKING:
    from daemon.convert.docstore import DocStore

CHAPTER_HEADING = "Chapter {n}"
_NS = {"c": "urn:oasis:names:tc:opendocument:xmlns:container",
       "opf": "http://www.idpf.org/2007/opf", "dc": "http://purl.org/dc/elements/1.1/"}
_HTML_TYPES = ("application/xhtml+xml", "text/html")
_ATX = re.compile(r"^(#{1,5})(?= )", re.M)
MAX_XML_BYTES = 4 * 2**20


def _xml(zf: object, name: str) -> ET.Element | None:
    import zipfile

    assert isinstance(zf, zipfile.ZipFile)
    try:
        info = zf.getinfo(name)
        if info.file_size > MAX_XML_BYTES:
            return None
        return ET.fromstring(zf.read(info))
    except (KeyError, ET.ParseError, zipfile.BadZipFile, ValueError):
        return None


def spine_chapters(data: bytes) -> list[bytes] | Skip:
    """The XHTML of each chapter in reading order; a Skip when this is no readable EPUB (the
    caller then converts the whole file as the doc store does)."""
    from daemon.convert.converters import ConvertSkip, open_zip

    try:
        zf = open_zip(data, "EPUB")
    except ConvertSkip as exc:
        return Skip(exc.code, exc.detail)
    container = _xml(zf, "META-INF/container.xml")
    rootfile = container.find(".//c:rootfile", _NS) if container is not None else None
    opf_path = rootfile.get("full-path") if rootfile is not None else None
    opf = _xml(zf, opf_path) if opf_path else None
    if opf is None or not opf_path:
        return Skip("parse_error", "not an EPUB: no package file")
    if "META-INF/encryption.xml" in zf.namelist():
        return Skip("encrypted", "the EPUB lists encrypted files")  # the worker decides
    base = posixpath.dirname(opf_path)
    manifest = {i.get("id"): i for i in opf.iterfind(".//opf:manifest/opf:item", _NS)}
    out = []
    for ref in opf.iterfind(".//opf:spine/opf:itemref", _NS):
        item = manifest.get(ref.get("idref"))
        if item is None or item.get("media-type") not in _HTML_TYPES:
            continue
        name = posixpath.normpath(posixpath.join(base, unquote(item.get("href") or "")))
        try:
            out.append(zf.read(name))
        except (KeyError, ValueError):
            continue  # a spine entry with no file: the rest of the book still reads
    return out if out else Skip("no_text", "the EPUB's spine lists no chapters")


def chapters_markdown(store: DocStore, data: bytes, source_path: str) -> str | Skip:
    """The book as ``# Chapter N`` sections (N from 1, chapters without text not counted)."""
    from daemon.convert.formats import FORMATS

    chapters = spine_chapters(data)
    if isinstance(chapters, Skip):
        return chapters
    store.record(source_path, hashlib.sha256(data).hexdigest(), FORMATS["epub"], len(data), None)
    blocks: list[str] = []
    for html in chapters:
        conv = store.convert(html, FORMATS["html"])
        if isinstance(conv, Skip):
            if conv.code in ("no_text", "empty"):
                continue
            return conv
        text = conv.markdown.strip()
        if text:
            heading = CHAPTER_HEADING.format(n=len(blocks) + 1)
            blocks.append(f"# {heading}\n\n" + _ATX.sub(r"#\1", text))
    return "\n\n".join(blocks) if blocks else Skip("no_text", "the EPUB holds no text")
