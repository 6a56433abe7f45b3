"""The calibre collection in process, with the real model and real stores, on a real library
built with Calibre's own calibredb from generated books: author, tag and series filters, PDF
pages, an edit in Calibre without re-embedding, a removal, and a library locked by a writer."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from calibre_fixtures import add_book, calibredb, epub_bytes, locked_edit, needs_calibre
from document_fixtures import pdf_bytes

from ragd.daemon.indexer import pipeline
from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search.engine import SearchRequest
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths
from ragd.daemon.sources.calibredb import LibraryBusy

pytestmark = [pytest.mark.slow, needs_calibre]

FRANKENSTEIN = [("Letter One", "The quillwort expedition sails north toward the ice."),
                ("Chapter Five", "The creature opened its dull yellow eye by candlelight.")]
HARBOUR = ["Harbour lantern ledger on the first page.",
           "Zebrafish migrate past the breakwater on page two."]


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three books: an EPUB in a series with a description, a PDF, and a book with no file."""
    tmp = tmp_path_factory.mktemp("calibre")
    lib = tmp / "Calibre Library"
    epub = tmp / "frankenstein.epub"
    epub.write_bytes(epub_bytes("Frankenstein Fragments", "Mary Shelley", FRANKENSTEIN))
    pdf = tmp / "harbour.pdf"
    pdf.write_bytes(pdf_bytes(HARBOUR, title="Harbour Notes"))
    add_book(lib, epub, title="Frankenstein Fragments", authors="Mary Wollstonecraft Shelley",
             tags="Gothic,Horror", series="Monsters", series_index=1,
             comments="<p>A <b>tale</b> of ambition and the marshwort laboratory.</p>")
    add_book(lib, pdf, title="Harbour Notes", authors="Ada Tester", tags="Science")
    out = calibredb(lib, "add", "--empty", "--title", "Unwritten Atlas", "--authors",
                    "Nobody Yet", "--tags", "Maps")
    assert "Added book ids" in out
    return lib


@pytest.fixture
def lib(library: Path, tmp_path: Path) -> Path:
    """A copy per test: tests edit it."""
    import shutil

    copy = tmp_path / "Calibre Library"
    shutil.copytree(library, copy)
    return copy


def open_app(lib: Path, embedder: Any) -> App:
    paths = resolve_paths()
    config = load_config(paths, {"calibre.libraries": [str(lib)], "obsidian.enabled": False})
    return App(paths, config, embedder=embedder)


@pytest.fixture
def app(lib: Path, real_embedder: Any) -> Iterator[App]:
    with open_app(lib, real_embedder) as a:
        yield a
        assert a.consistency()["ok"], a.consistency()


def search(app: App, query: str, mode: str = "keyword", k: int = 10,
           **filters: Any) -> list[dict[str, Any]]:
    req = SearchRequest(query=query, mode=mode, top_k=k, filters=Filters(**filters))
    return app.search_engine.search(req)["results"]


def source_metadata(app: App, key: str) -> dict[str, Any]:
    db = sqlite3.connect(f"file:{app.paths.catalog_path}?mode=ro", uri=True)
    try:
        (raw,) = db.execute("SELECT metadata FROM sources WHERE path=?", (key,)).fetchone()
    finally:
        db.close()
    return dict(json.loads(raw))


def sync(app: App) -> pipeline.IndexReport:
    (report,) = app.sync_all()
    assert not report.errors, report.errors
    return report


def test_books_by_author_tag_series_format_and_page(app: App, lib: Path) -> None:
    report = sync(app)
    assert (report.indexed, report.total_found) == (3, 3)
    assert [c["name"] for c in app.list_collections()] == ["calibre"]

    (hit,) = search(app, "quillwort", author="SHELLEY", collections=("calibre",))
    assert hit["title"] == "Frankenstein Fragments" and hit["source_type"] == "epub"
    assert hit["metadata"]["authors"] == ["Mary Wollstonecraft Shelley"]
    assert hit["metadata"]["tags"] == ["gothic", "horror", "series/monsters"]
    assert hit["source_uri"] == "calibre://view-book/Calibre_Library/1/EPUB"
    # A reflowable book: its page_number is the chapter, in reading order.
    assert hit["metadata"]["page_number"] == 1
    assert hit["metadata"]["heading_path"][:2] == ["Chapter 1", "Letter One"]
    (eye,) = search(app, "candlelight", source_type="epub")
    assert eye["metadata"]["page_number"] == 2
    # All of Calibre's metadata is on the source (search results show a fixed subset).
    meta = source_metadata(app, "calibre:1")
    assert meta["series"] == "Monsters" and meta["series_index"] == 1
    assert meta["calibre_tags"] == ["Gothic", "Horror"] and meta["format"] == "EPUB"
    assert meta["file_uri"].startswith("file://") and meta["file_uri"].endswith(".epub")
    assert search(app, "quillwort", author="tester") == []

    # Tags (case-insensitive), the series as the nested tag series/<name>, the description.
    assert [h["title"] for h in search(app, "creature", tags=("gothic",))] \
        == ["Frankenstein Fragments"]
    assert search(app, "creature", tags=("science",)) == []
    assert {h["title"] for h in search(app, "marshwort", tags=("series/monsters",))} \
        == {"Frankenstein Fragments"}

    # A PDF: the page a passage is on; source_type filters.
    (page,) = search(app, "zebrafish", source_type="pdf")
    assert page["title"] == "Harbour Notes" and page["metadata"]["page_number"] == 2
    assert page["source_uri"] == "calibre://view-book/Calibre_Library/2/PDF"
    assert search(app, "zebrafish", source_type="epub") == []

    # No file at all: still found by its metadata (the properties chunk).
    (atlas,) = search(app, "unwritten atlas", author="nobody")
    assert atlas["source_type"] == "book" and source_metadata(app, "calibre:3")["format"] is None

    info = app.collection_info("calibre")
    assert info["book_count"] == 3 and set(info["source_types"]) >= {"epub", "pdf", "book"}

    # Nothing changed: nothing is read again.
    again = sync(app)
    assert (again.indexed, again.embedded, again.unchanged) == (0, 0, 3)


def test_metadata_edit_is_seen_without_re_embedding_the_text(app: App, lib: Path,
                                                             real_embedder: Any) -> None:
    sync(app)
    before = search(app, "creature")[0]["metadata"]["chunk_id"]
    calibredb(lib, "set_metadata", "--field", "tags:Gothic,Classic", "--field",
              "authors:Mary Shelley", "1")
    calls = real_embedder.calls
    report = sync(app)
    assert report.indexed == 1
    # Only the short properties chunk (its "tags:" line) is new; the book's text is not.
    assert report.embedded <= 1 and real_embedder.calls - calls <= 1
    hit = search(app, "creature", tags=("classic",))[0]
    assert hit["metadata"]["chunk_id"] == before
    assert hit["metadata"]["authors"] == ["Mary Shelley"]
    assert search(app, "creature", tags=("horror",)) == []
    # The author change moved the book's folder in Calibre: the same document.
    assert hit["source_path"].startswith(str(lib / "Mary Shelley"))


def test_removed_book_disappears(app: App, lib: Path) -> None:
    sync(app)
    assert search(app, "zebrafish")
    calibredb(lib, "remove", "--permanent", "2")
    report = sync(app)
    assert report.deleted == 1
    assert search(app, "zebrafish") == []
    assert app.collection_info("calibre")["book_count"] == 2


def test_book_file_replaced_in_place_is_read_again(app: App, lib: Path) -> None:
    sync(app)
    (pdf,) = (lib / "Ada Tester").glob("*/*.pdf")
    pdf.write_bytes(pdf_bytes(["Walrus tide tables on the first page."], title="Harbour"))
    report = sync(app)
    assert (report.indexed, report.deleted) == (1, 0)
    (hit,) = search(app, "walrus")
    assert hit["title"] == "Harbour Notes" and hit["metadata"]["page_number"] == 1
    assert search(app, "zebrafish") == []


def test_locked_library_keeps_search_and_catches_up(app: App, lib: Path) -> None:
    sync(app)
    with locked_edit(lib, 1, "<p>A tale of the saxifrage laboratory.</p>"):
        with pytest.raises(LibraryBusy) as info:
            app.sync_all()
        assert "locked" in str(info.value) and info.value.retry_after_s > 0
        assert search(app, "marshwort")  # searches keep working
    report = sync(app)
    assert report.indexed == 1
    assert search(app, "saxifrage") and search(app, "marshwort") == []
    # Read-only: ragd never wrote to the library.
    assert not (lib / "metadata.db-journal").exists()
