"""A Calibre book as chapters, converted in the worker and bounded (decision 0025): a spine
that lists one huge chapter many times is read once and cut to the book's budget."""

from __future__ import annotations

import io
import tracemalloc
import zipfile

import pytest
from calibre_fixtures import epub_bytes

from daemon.convert.bounds import TRUNCATED, text_budget
from daemon.convert.converters import ConvertSkip, convert
from daemon.sources.calibrebook import book_format, convert_chapters, is_book_format


def repeated_spine_epub(chapter_mb: int, times: int) -> bytes:
    """An EPUB whose spine lists one chapter of ``chapter_mb`` MB ``times`` times."""
    para = "<p>" + " ".join(["lorem ipsum dolor sit amet"] * 8) + "</p>\n"
    body = para * (chapter_mb * 2**20 // len(para))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", "application/epub+zip")
        z.writestr("META-INF/container.xml", '<container xmlns="urn:oasis:names:tc:opendocument'
                   ':xmlns:container"><rootfiles><rootfile full-path="c.opf"/></rootfiles>'
                   "</container>")
        z.writestr("c.opf", '<package xmlns="http://www.idpf.org/2007/opf"><manifest>'
                   '<item id="ch" href="ch.xhtml" media-type="application/xhtml+xml"/>'
                   "</manifest><spine>" + '<itemref idref="ch"/>' * times
                   + "</spine></package>")
        z.writestr("ch.xhtml", f"<html><body><h1>Big</h1>{body}</body></html>")
    return buf.getvalue()


def test_chapters_are_numbered_and_their_headings_moved_down() -> None:
    book = convert("calibre-epub", epub_bytes("T", "A", [("One", "alpha"), ("Two", "beta")]))
    assert book.markdown == "# Chapter 1\n\n## One\n\nalpha\n\n# Chapter 2\n\n## Two\n\nbeta"
    assert book.metadata == {"chapters": 2}


def test_a_chapter_listed_many_times_is_read_once_within_the_budget() -> None:
    data = repeated_spine_epub(chapter_mb=12, times=20)
    tracemalloc.start()
    book = convert_chapters(data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert book.metadata["chapters"] == 1 and TRUNCATED in book.metadata
    assert peak < 200 * 2**20  # 20 copies of 12 MB were 240 MB and more when read
    budget = text_budget(len(data))
    out = convert("calibre-epub", data)  # what the worker answers: cut to the budget
    assert len(out.markdown) <= budget and TRUNCATED in out.metadata


def test_book_formats_name_their_suffix() -> None:
    assert book_format("ODT").name == "calibre-odt" and book_format("EPUB").source_type == "epub"
    assert is_book_format("calibre-azw3") and not is_book_format("calibre-../x")
    with pytest.raises(ConvertSkip) as info:
        convert("calibre-epub", b"not a zip")
    assert info.value.code == "parse_error"
