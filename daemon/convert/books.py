"""PDF (text by page, with pypdfium2), EPUB (chapters in spine order, standard library) and
Kindle books (MOBI, AZW, AZW3: EPUB through Calibre's ebook-convert, when it is installed).

Worker-process only: pypdfium2 is a native library, so a PDF that crashes it costs the worker,
never the daemon (decision 0013); ebook-convert runs as the worker's child, within its limits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ragd.daemon.convert.bounds import TRUNCATED, text_budget
from ragd.daemon.convert.converted import Converted, ConvertSkip, decode, open_zip
from ragd.daemon.convert.formats import PAGE_HEADING, PdfOcr
from ragd.daemon.convert.markdown import html_to_markdown, join_blocks, plain_text
from ragd.daemon.convert.pdf_ocr import PageOcr

log = logging.getLogger(__name__)

_PDF_PASSWORD = 4  # FPDF_ERR_PASSWORD
_BLANK_RUNS = re.compile(r"\n{3,}")


def convert_pdf(data: bytes, *, ocr: PdfOcr | None = None) -> Converted:
    """Each page with text becomes ``## Page N`` and its text: page numbers survive chunking.
    With ``ocr``, a page without a text layer (a scan) is rendered and read by Tesseract
    (:mod:`ragd.daemon.convert.pdf_ocr`), within the page and time limits it names."""
    import pypdfium2 as pdfium

    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise ConvertSkip("parse_error", "not a PDF (no %PDF header)")
    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if getattr(exc, "err_code", None) == _PDF_PASSWORD or "password" in str(exc).lower():
            raise ConvertSkip("encrypted", "the PDF is password-protected") from None
        raise ConvertSkip("parse_error", f"damaged or truncated PDF: {exc}") from None
    reader = PageOcr(ocr) if ocr is not None else None
    try:
        meta = _pdf_metadata(doc)
        blocks = []
        total = len(doc)
        for i in range(total):
            page = doc[i]
            try:
                textpage = page.get_textpage()
                text = textpage.get_text_range()
                textpage.close()
                text = _BLANK_RUNS.sub("\n\n", text.replace("\r\n", "\n").replace("\r", "\n"))
                text = text.replace("\x00", "").strip()
                if not text and reader is not None:
                    text = reader.read(page)
            finally:
                page.close()
            if text:
                blocks.append(f"## {PAGE_HEADING.format(n=i + 1)}\n\n{plain_text(text)}")
    finally:
        doc.close()
    metadata: dict[str, Any] = {"pages": total}
    if meta.get("Author"):
        metadata["authors"] = [meta["Author"]]
    if reader is not None:
        if not blocks:
            reader.nothing_read()  # raises: ocr_unavailable or no_text
        metadata.update(reader.metadata())
    return Converted(meta.get("Title", ""), join_blocks(blocks) if blocks else "", metadata)


def _pdf_metadata(doc: Any) -> dict[str, str]:
    try:
        raw = doc.get_metadata_dict(skip_empty=True)
    except Exception:
        return {}
    return {k: " ".join(str(v).split()) for k, v in raw.items() if str(v).strip()}


# -- EPUB --------------------------------------------------------------------------------------
_NS = {"c": "urn:oasis:names:tc:opendocument:xmlns:container",
       "opf": "http://www.idpf.org/2007/opf", "dc": "http://purl.org/dc/elements/1.1/",
       "enc": "http://www.w3.org/2001/04/xmlenc#"}
# Font obfuscation (IDPF, Adobe) scrambles fonts only: the text is still readable.
_FONT_OBFUSCATION = ("http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC")
_HTML_TYPES = ("application/xhtml+xml", "text/html", "application/x-dtbook+xml")


def _xml(zf: Any, name: str) -> ET.Element:
    try:
        return ET.fromstring(zf.read(name))
    except KeyError:
        raise ConvertSkip("parse_error", f"not an EPUB: {name} is missing") from None
    except ET.ParseError as exc:
        raise ConvertSkip("parse_error", f"damaged EPUB: {name}: {exc}") from None


def convert_epub(data: bytes) -> Converted:
    """Chapters in spine order, each converted from XHTML; title and authors from the OPF."""
    zf = open_zip(data, "EPUB")
    container = _xml(zf, "META-INF/container.xml")
    rootfile = container.find(".//c:rootfile", _NS)
    opf_path = rootfile.get("full-path") if rootfile is not None else None
    if not opf_path:
        raise ConvertSkip("parse_error", "not an EPUB: container.xml names no package file")
    opf = _xml(zf, opf_path)
    base = posixpath.dirname(opf_path)
    encrypted = _encrypted(zf)
    manifest = {item.get("id"): item for item in opf.iterfind(".//opf:manifest/opf:item", _NS)}
    blocks: list[str] = []
    chapters = 0
    budget, produced = text_budget(len(data)), 0  # a spine may list one chapter 60 times
    for ref in opf.iterfind(".//opf:spine/opf:itemref", _NS):
        if produced > budget:
            break  # converters.bounded() cuts the text and says so
        item = manifest.get(ref.get("idref"))
        if item is None or item.get("media-type") not in _HTML_TYPES:
            continue
        name = posixpath.normpath(posixpath.join(base, unquote(item.get("href") or "")))
        if name in encrypted:
            raise ConvertSkip("encrypted", "the EPUB is DRM-protected (encrypted chapters)")
        try:
            html = decode(zf.read(name))
        except KeyError:
            continue  # a spine entry with no file: the rest of the book still reads
        markdown, _ = html_to_markdown(html)
        if markdown.strip():
            blocks.append(markdown)
            produced += len(markdown)
            chapters += 1
    title = " ".join((opf.findtext(".//dc:title", "", _NS) or "").split())
    authors = [" ".join(a.split()) for a in
               (el.text or "" for el in opf.iterfind(".//dc:creator", _NS)) if a.strip()]
    metadata: dict[str, Any] = {"chapters": chapters}
    if produced > budget:
        metadata[TRUNCATED] = produced  # at least this much: the rest was not converted
    if authors:
        metadata["authors"] = authors
    # A title page first: a book of pictures (a comic) is still found by title and author.
    front = [plain_text(title), plain_text(", ".join(authors))]
    return Converted(title, join_blocks(front + blocks), metadata)


def _encrypted(zf: Any) -> set[str]:
    """Files META-INF/encryption.xml lists as encrypted (font obfuscation aside)."""
    try:
        root = ET.fromstring(zf.read("META-INF/encryption.xml"))
    except (KeyError, ET.ParseError):
        return set()
    out = set()
    for data in root.iterfind(".//enc:EncryptedData", _NS):
        method = data.find("enc:EncryptionMethod", _NS)
        algorithm = method.get("Algorithm", "") if method is not None else ""
        ref = data.find(".//enc:CipherReference", _NS)
        if ref is not None and algorithm not in _FONT_OBFUSCATION:
            out.add(posixpath.normpath(unquote(ref.get("URI", ""))))
    return out


# -- MOBI, AZW, AZW3 ---------------------------------------------------------------------------
# The default conversion time limit (documents.timeout_s). The daemon kills the worker at the
# configured limit, and on Linux ebook-convert dies with it; this bounds it elsewhere too.
EBOOK_CONVERT_TIMEOUT_S = 120.0
EBOOK_CONVERT_HINT = ("reading MOBI, AZW and AZW3 books needs Calibre's ebook-convert, which "
                      "is not installed (e.g. apt install calibre, or calibre-ebook.com; on "
                      "macOS put calibre.app/Contents/MacOS on the PATH)")
_PDB_TYPES = (b"BOOKMOBI", b"TEXtREAd")  # a Mobipocket book, a plain PalmDOC one


def ebook_convert() -> str | None:
    return shutil.which("ebook-convert")


def mobi_encryption(data: bytes) -> int:
    """The book's DRM scheme from its first record's PalmDOC header (0: none). Raises
    ConvertSkip when the bytes are no Mobipocket book at all."""
    if len(data) < 86 or data[60:68] not in _PDB_TYPES:
        raise ConvertSkip("parse_error", "not a MOBI/AZW book (no Mobipocket header)")
    first = struct.unpack(">I", data[78:82])[0]  # the offset of record 0
    if first + 14 > len(data):
        raise ConvertSkip("parse_error", "damaged or truncated MOBI: no first record")
    return int(struct.unpack(">H", data[first + 12:first + 14])[0])


def convert_mobi(data: bytes) -> Converted:
    """A Kindle book turned into EPUB by Calibre's ebook-convert, then read as an EPUB.
    Bytes that are no book, or a DRM-protected one, are skipped as such even without
    ebook-convert: installing it would not help them."""
    if mobi_encryption(data):
        raise ConvertSkip("encrypted", "the book is DRM-protected (Kindle encryption)")
    exe = ebook_convert()
    if exe is None:
        raise ConvertSkip("ebook_convert_missing", EBOOK_CONVERT_HINT)
    with tempfile.TemporaryDirectory(prefix="ragd-mobi-") as tmp:
        # ebook-convert picks its reader by suffix; its MOBI reader reads AZW and AZW3 too.
        src, out = Path(tmp) / "book.mobi", Path(tmp) / "book.epub"
        src.write_bytes(data)
        returncode, err = _run_ebook_convert([exe, str(src), str(out)])
        if returncode != 0 or not out.is_file():
            if "DRM" in err:
                raise ConvertSkip("encrypted", "the book is DRM-protected")
            last = err.strip().splitlines()[-1:] or [f"exit status {returncode}"]
            raise ConvertSkip("parse_error", f"ebook-convert could not read the book: "
                              f"{last[0][:200]}")
        epub = out.read_bytes()
    book = convert_epub(epub)
    return Converted(book.title, book.markdown, {**book.metadata, "converter": "ebook-convert"})


def _run_ebook_convert(cmd: list[str]) -> tuple[int, str]:
    """Run ebook-convert, killed with its children past the time limit; (exit status,
    stderr). Its output goes to stderr: the worker's stdout is the protocol.

    In a worker it shares the worker's process group, which the daemon kills as a whole (past
    the conversion time limit, on stop): ebook-convert and whatever it started go with it,
    and on Linux the kernel kills it if the worker dies any other way (decision 0024).
    Elsewhere (in process) it gets a group of its own, killed whole past its limit."""
    from ragd.daemon.convert import lifeline

    shared = lifeline.owns_group()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=not shared,
                            preexec_fn=lifeline.death_signal_preexec())
    try:
        _, err = proc.communicate(timeout=EBOOK_CONVERT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        if shared:
            lifeline.end_rest_of_group()
        elif hasattr(os, "killpg"):
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise ConvertSkip("convert_timeout", "ebook-convert took longer than "
                          f"{EBOOK_CONVERT_TIMEOUT_S:g} s and was stopped") from None
    return proc.returncode, err.decode("utf-8", "replace")
