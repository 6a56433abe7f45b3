"""A Calibre book as chapters, converted in the worker and bounded (decision 0025): a spine
that lists one huge chapter many times is read once and cut to the book's budget."""

from __future__ import annotations

import os
import stat
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from calibre_fixtures import epub_bytes, odt_bytes, repeated_spine_epub

from ragd.daemon.convert.bounds import TRUNCATED, text_budget
from ragd.daemon.convert.calibrebook import book_format, convert_chapters, is_book_format
from ragd.daemon.convert.converted import ConvertSkip
from ragd.daemon.convert.converters import convert


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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the rlimit in /bin/sh")
def test_ebook_convert_runs_within_the_workers_limits(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A Calibre book in a format ragd does not read goes to ebook-convert as the worker's
    child: it inherits the worker's memory limit, and the worker's time limit stops it (it
    ran from the daemon's writer with 300 s and no memory limit: 1.77 GB on a 62 KB ODT)."""
    from ragd.daemon.convert.process import ConversionWorker
    from ragd.daemon.models import Skip

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    limit = tmp_path / "limit"
    exe = bin_dir / "ebook-convert"
    exe.write_text(f"#!/bin/sh\nulimit -v > {limit}\nexec sleep 60\n", encoding="utf-8")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    worker = ConversionWorker(timeout_s=3.0, memory_mb=700, idle_s=0)
    t0 = time.monotonic()
    try:
        answer = worker.convert(book_format("ODT").name, odt_bytes(10, "heron"))
    finally:
        worker.close()
    assert isinstance(answer, Skip) and answer.code == "convert_timeout"
    assert time.monotonic() - t0 < 10
    assert limit.read_text(encoding="utf-8").strip() == str(700 * 1024)  # KiB
