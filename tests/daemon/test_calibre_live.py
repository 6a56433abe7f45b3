"""A Calibre library as a user meets it: a real daemon watching it while calibredb adds a book,
and while another program holds metadata.db locked for writing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from calibre_fixtures import add_book, epub_bytes, locked_edit, needs_calibre
from daemon_proc import DaemonProc, wait_for

pytestmark = [pytest.mark.slow, needs_calibre]


def search(d: DaemonProc, query: str, **params: Any) -> list[dict[str, Any]]:
    return d.call("search", {"query": query, "mode": "keyword", **params})["results"]


def test_book_added_while_running_and_a_locked_library(
        ragd_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / "Library"
    first = tmp_path / "first.epub"
    first.write_bytes(epub_bytes("The Lantern Year", "Ada Tester",
                                 [("One", "The lamplighter counted kumquats at dusk.")]))
    add_book(lib, first, title="The Lantern Year", authors="Ada Tester", tags="Seasons")
    monkeypatch.setenv("RAGD_CALIBRE_LIBRARIES", str(lib))
    monkeypatch.setenv("RAGD_OBSIDIAN_ENABLED", "false")
    d = DaemonProc(ragd_home, None, tmp_path / "daemon.log").start()
    try:
        status = d.wait_idle()
        assert [c["name"] for c in status["collections"]] == ["calibre"]
        (hit,) = search(d, "kumquats", author="tester", collection="calibre")
        assert hit["title"] == "The Lantern Year"

        # Added in Calibre while the daemon runs: metadata.db changes, the library is re-read.
        second = tmp_path / "second.epub"
        second.write_bytes(epub_bytes("Salt Roads", "Mary Shelley",
                                      [("Map", "Caravans carried tamarind over the dunes.")]))
        add_book(lib, second, title="Salt Roads", authors="Mary Shelley", series="Roads")
        (new,) = wait_for(lambda: search(d, "tamarind", tags=["series/roads"]), 60,
                          "the book added while the daemon runs")
        assert new["source_uri"] == "calibre://view-book/Library/2/EPUB"

        # A writer holds metadata.db locked (Calibre saving). Its journal file is a change the
        # daemon hears about; reading fails, so it says it will try again, and still serves.
        with locked_edit(lib, 1, "<p>A diary of the quince orchard.</p>"):
            d.call("index", {"collection": "calibre", "wait": False})  # as a sweep would
            retrying = wait_for(lambda: d.call("status")["retrying"].get("calibre"), 60,
                                "the daemon to report the locked library")
            assert "locked" in retrying["error"]
            assert search(d, "kumquats")  # searches keep working meanwhile
        wait_for(lambda: search(d, "quince"), 60, "the catch-up after the lock is released")
        wait_for(lambda: not d.call("status")["retrying"], 30, "the retry to be cleared")
    finally:
        d.stop()
