"""Calibre libraries for tests: books generated here (a small valid EPUB, a PDF), added and
edited with Calibre's own ``calibredb`` (Debian's ``calibre`` package; CI installs it)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sqlite3
import subprocess
import time
import zipfile
from collections.abc import Iterator
from html import escape
from pathlib import Path

import pytest
import shared_data

CALIBREDB = shutil.which("calibredb")
needs_calibre = pytest.mark.skipif(CALIBREDB is None,
                                   reason="Calibre's calibredb is not installed "
                                          "(apt-get install calibre)")
BUSY = "Another calibre program"
BOOKS = shared_data.CORPUS / "books"


def epub_bytes(title: str, author: str, chapters: list[tuple[str, str]], *,
               lang: str = "en") -> bytes:
    """A small valid EPUB 3: the mimetype stored first, a package file, one XHTML file per
    (heading, paragraph) chapter, and a navigation document."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip",
                   compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml", """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
</rootfiles></container>""")
        items = "\n".join(f'<item id="c{i}" href="c{i}.xhtml" '
                          'media-type="application/xhtml+xml"/>'
                          for i in range(len(chapters)))
        spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
        z.writestr("OEBPS/content.opf", f"""<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
<dc:identifier id="id">urn:uuid:{abs(hash((title, author))):032x}</dc:identifier>
<dc:title>{escape(title)}</dc:title><dc:creator>{escape(author)}</dc:creator>
<dc:language>{lang}</dc:language>
<meta property="dcterms:modified">2024-01-01T00:00:00Z</meta></metadata>
<manifest><item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
{items}</manifest>
<spine>{spine}</spine></package>""")
        nav = "".join(f'<li><a href="c{i}.xhtml">{escape(h)}</a></li>'
                      for i, (h, _) in enumerate(chapters))
        z.writestr("OEBPS/nav.xhtml", f"""<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">
<head><title>Contents</title></head><body><nav epub:type="toc"><ol>{nav}</ol></nav></body></html>""")
        for i, (heading, text) in enumerate(chapters):
            z.writestr(f"OEBPS/c{i}.xhtml", f"""<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{escape(heading)}</title></head>
<body><h1>{escape(heading)}</h1><p>{escape(text)}</p></body></html>""")
    return buf.getvalue()


def calibredb(library: Path, *args: str) -> str:
    """Run ``calibredb`` on ``library`` (created on first use); its output."""
    assert CALIBREDB is not None
    env = {**os.environ, "CALIBRE_CONFIG_DIRECTORY": str(library.parent / ".calibre-config"),
           "QT_QPA_PLATFORM": "offscreen"}
    deadline = time.monotonic() + 120
    while True:
        done = subprocess.run([CALIBREDB, "--with-library", str(library), *args],
                              capture_output=True, text=True, env=env, timeout=120, check=False)
        # Calibre allows one calibredb at a time on a machine: another test's may be running.
        if BUSY not in done.stderr + done.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert done.returncode == 0, f"calibredb {args}: {done.stderr}"
    return done.stdout


def add_book(library: Path, path: Path, *, title: str, authors: str, tags: str = "",
             series: str = "", series_index: float = 1.0, comments: str = "") -> int:
    """Add one book file with its metadata; its Calibre id."""
    args = ["add", "--duplicates", "--title", title, "--authors", authors]
    if tags:
        args += ["--tags", tags]
    if series:
        args += ["--series", series, "--series-index", str(series_index)]
    out = calibredb(library, *args, str(path))
    ids = out.rsplit("Added book ids:", 1)[1].split()[0].strip(",")
    book_id = int(ids)
    if comments:
        calibredb(library, "set_metadata", "--field", f"comments:{comments}", str(book_id))
    return book_id


@contextlib.contextmanager
def locked_edit(library: Path, book_id: int, description: str) -> Iterator[None]:
    """Hold ``metadata.db`` locked as Calibre does while it saves (BEGIN EXCLUSIVE), with a
    new description and ``last_modified`` for one book written but not committed; committed
    when the block ends without an error."""
    writer = sqlite3.connect(library / "metadata.db", timeout=1, isolation_level=None)
    writer.create_function("title_sort", 1, lambda s: s)  # Calibre's triggers call it
    try:
        writer.execute("BEGIN EXCLUSIVE")
        writer.execute("INSERT OR REPLACE INTO comments (book, text) VALUES (?, ?)",
                       (book_id, description))
        writer.execute("UPDATE books SET last_modified='2031-01-01 00:00:00+00:00'"
                       " WHERE id=?", (book_id,))
        yield
        writer.execute("COMMIT")
    finally:
        writer.close()


def repeated_spine_epub(chapter_mb: int, times: int, word: str = "lorem") -> bytes:
    """A small EPUB whose spine lists one chapter of ``chapter_mb`` MB ``times`` times (the
    hostile book of issue 28: 154 KB on disk, 150 MB of XHTML listed 20 times)."""
    para = "<p>" + " ".join([f"{word} ipsum dolor sit amet"] * 8) + "</p>\n"
    body = para * (chapter_mb * 2**20 // len(para))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip",
                   compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml", '<container version="1.0" xmlns="urn:oasis:names'
                   ':tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="c.opf" '
                   'media-type="application/oebps-package+xml"/></rootfiles></container>')
        z.writestr("c.opf", '<package xmlns="http://www.idpf.org/2007/opf" version="2.0" '
                   'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
                   '<dc:title>Spine bomb</dc:title><dc:identifier id="id">spine-bomb'
                   '</dc:identifier><dc:language>en</dc:language></metadata><manifest>'
                   '<item id="ch" href="ch.xhtml" media-type="application/xhtml+xml"/>'
                   "</manifest><spine>" + '<itemref idref="ch"/>' * times
                   + "</spine></package>")
        z.writestr("ch.xhtml", '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Big'
                   f"</title></head><body><h1>Big</h1>{body}</body></html>")
    return buf.getvalue()


def odt_bytes(paragraphs: int, word: str, title: str = "Slow ODT") -> bytes:
    """An OpenDocument text of ``paragraphs`` short paragraphs: Calibre's ebook-convert takes
    seconds over a few thousand (5,000: 1 s; 12,000: 4-5 s; 50,000: 85 s on this machine)."""
    text = "".join(f"<text:p>Paragraph {i} of the {word} story, line {i % 97}.</text:p>"
                   for i in range(paragraphs))
    office = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.text",
                   compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/manifest.xml", '<?xml version="1.0" encoding="UTF-8"?>'
                   '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:'
                   'manifest:1.0"><manifest:file-entry manifest:full-path="/" manifest:media-'
                   'type="application/vnd.oasis.opendocument.text"/><manifest:file-entry '
                   'manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
                   "</manifest:manifest>")
        z.writestr("content.xml", f'<?xml version="1.0" encoding="UTF-8"?><office:document-'
                   f'content xmlns:office="{office}" xmlns:text="urn:oasis:names:tc:'
                   f'opendocument:xmlns:text:1.0" office:version="1.2"><office:body>'
                   f"<office:text>{text}</office:text></office:body></office:document-content>")
        z.writestr("meta.xml", f'<?xml version="1.0" encoding="UTF-8"?><office:document-meta '
                   f'xmlns:office="{office}" xmlns:dc="http://purl.org/dc/elements/1.1/" '
                   f'office:version="1.2"><office:meta><dc:title>{escape(title)}</dc:title>'
                   "</office:meta></office:document-meta>")
        z.writestr("styles.xml", f'<?xml version="1.0" encoding="UTF-8"?><office:document-'
                   f'styles xmlns:office="{office}" office:version="1.2"/>')
    return buf.getvalue()
