"""Kindle books (MOBI, AZW, AZW3): converted through Calibre's ebook-convert when it is
installed, within the conversion time limit; else skipped as ``ebook_convert_missing``, a skip
the doc store does not keep. In process, through the worker, and in a project collection."""

from __future__ import annotations

import os
import shutil
import stat
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_path
from document_fixtures import calibre_mobi

from ragd.daemon.convert import books
from ragd.daemon.convert.converted import ConvertSkip
from ragd.daemon.convert.converters import convert
from ragd.daemon.convert.process import ConversionWorker
from ragd.daemon.models import Skip
from ragd.daemon.skips import SKIP_CODES, describe

needs_ebook_convert = pytest.mark.skipif(
    shutil.which("ebook-convert") is None,
    reason="Calibre's ebook-convert is not installed (apt install calibre)")


def mobi_bytes(encryption: int = 0) -> bytes:
    """The smallest Mobipocket file ebook-convert's reader would open: a Palm database
    header (type BOOKMOBI), one record list entry, and record 0's PalmDOC + MOBI headers."""
    first = 78 + 8 + 2
    header = (b"tiny".ljust(32, b"\0") + b"\0" * 28 + b"BOOKMOBI" + b"\0" * 8
              + struct.pack(">H", 1))
    entries = struct.pack(">IB3s", first, 0, b"\0\0\0") + b"\0\0"
    record0 = struct.pack(">HHIHHHH", 1, 0, 0, 0, 4096, encryption, 0) + b"MOBI" + b"\0" * 228
    return header + entries + record0


def fake_ebook_convert(folder: Path, body: str) -> Path:
    """An executable named ebook-convert that runs ``body`` (a shell script)."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "ebook-convert"
    exe.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether process ``pid`` has ended (a zombie counts: it runs no more), polled until a
    deadline."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)  # polling a process table entry against a deadline, not waiting
    return False


def read_pid(path: Path, within_s: float = 10.0) -> int:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        text = path.read_text(encoding="utf-8").strip() if path.exists() else ""
        if text:
            return int(text)
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def test_without_ebook_convert_a_kindle_book_is_a_clear_transient_skip(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(books, "ebook_convert", lambda: None)
    with pytest.raises(ConvertSkip) as info:
        convert("mobi", mobi_bytes())
    assert info.value.code == "ebook_convert_missing"
    assert "ebook-convert" in info.value.detail and "apt install calibre" in info.value.detail
    assert "ebook-convert" in describe("ebook_convert_missing") and "ebook_convert_missing" \
        in SKIP_CODES
    # Not a book, or a locked one: installing Calibre would not help, so it does not say so.
    with pytest.raises(ConvertSkip) as info:
        convert("mobi", mobi_bytes(encryption=2))
    assert info.value.code == "encrypted"
    with pytest.raises(ConvertSkip) as info:
        convert("mobi", b"PK\3\4 not a kindle book" + b"\0" * 100)
    assert info.value.code == "parse_error"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ebook_convert_past_its_time_limit_is_stopped_with_its_children(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pidfile = tmp_path / "child.pid"
    exe = fake_ebook_convert(tmp_path / "bin", f"sleep 60 & echo $! > {pidfile}; wait")
    monkeypatch.setattr(books, "ebook_convert", lambda: str(exe))
    monkeypatch.setattr(books, "EBOOK_CONVERT_TIMEOUT_S", 1.0)
    t0 = time.monotonic()
    with pytest.raises(ConvertSkip) as info:
        convert("mobi", mobi_bytes())
    assert info.value.code == "convert_timeout" and time.monotonic() - t0 < 10
    assert gone(read_pid(pidfile))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_killed_at_the_time_limit_takes_ebook_convert_with_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pidfile = tmp_path / "convert.pid"
    bin_dir = tmp_path / "bin"
    fake_ebook_convert(bin_dir, f"echo $$ > {pidfile}; exec sleep 60")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    worker = ConversionWorker(timeout_s=3.0, idle_s=0)
    try:
        answer = worker.convert("mobi", mobi_bytes())
    finally:
        worker.close()
    assert isinstance(answer, Skip) and answer.code == "convert_timeout"
    assert gone(read_pid(pidfile))


@needs_ebook_convert
@pytest.mark.corpus
def test_the_shared_mobi_converts_through_ebook_convert() -> None:
    data = corpus_path("books", "mobi", "pg-alice_in_wonderland.mobi").read_bytes()
    out = convert("mobi", data)
    assert out.title.startswith("Alice's Adventures in Wonderland")
    assert "rabbit-hole" in out.markdown and out.metadata["converter"] == "ebook-convert"
    assert out.metadata["authors"] == ["Lewis Carroll"]


# -- in a project collection -------------------------------------------------------------------
@pytest.fixture
def app(tmp_path: Path, real_embedder: Any) -> Iterator[Any]:
    from ragd.daemon.runtime.app import App
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    paths = resolve_paths()
    with App(paths, load_config(paths, {}), embedder=real_embedder) as a:
        yield a
        assert a.consistency()["ok"], a.consistency()


@pytest.mark.slow
def test_every_kindle_book_in_a_project_is_indexed_or_skipped_with_a_code(
        app: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "book.mobi").write_bytes(mobi_bytes())
    (folder / "locked.azw3").write_bytes(mobi_bytes(encryption=2))
    (folder / "notes.md").write_text("# Notes\n\nReading list.\n", encoding="utf-8")
    empty_bin = tmp_path / "no-calibre"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))  # the worker starts without ebook-convert
    report = app.sync_collection(app.create_project("books", str(folder)))
    codes = {path: code for path, code, _ in report.skipped_files}
    assert codes == {"book.mobi": "ebook_convert_missing", "locked.azw3": "encrypted"}
    assert report.indexed == 1


@pytest.mark.slow
@needs_ebook_convert
def test_a_mobi_skipped_without_calibre_is_indexed_once_calibre_is_there(
        app: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragd.daemon.models import Filters
    from ragd.daemon.search.engine import SearchRequest

    folder = tmp_path / "project"
    folder.mkdir()
    calibre_mobi(folder / "alice.mobi")  # one chapter: the test embeds it, not a novel
    path = os.environ.get("PATH", "")
    empty_bin = tmp_path / "no-calibre"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))
    coll = app.create_project("books", str(folder))
    report = app.sync_collection(coll)
    assert [(p, c) for p, c, _ in report.skipped_files] == [("alice.mobi",
                                                            "ebook_convert_missing")]
    monkeypatch.setenv("PATH", path)  # Calibre installed: the next worker finds it
    app.documents.store.converter.close()
    # Read again (when reconcile reads a skipped file again is its own rule): the doc
    # store did not keep the skip, so the book converts now.
    report = app.sync_collection(coll, force=True)
    assert report.indexed == 1 and not report.skipped_files
    req = SearchRequest(query="rabbit hole", mode="keyword", top_k=3,
                        filters=Filters(collections=("books",)))
    (top, *_) = app.search_engine.search(req)["results"]
    assert top["source_type"] == "mobi" and top["source_path"].endswith("alice.mobi")
    assert top["title"].startswith("Alice's Adventures in Wonderland")
