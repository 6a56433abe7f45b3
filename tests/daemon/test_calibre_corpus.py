"""The calibre collection on real books from the shared corpus (../shared/corpus/books), added
with calibredb: an EPUB, a PDF and a MOBI-only book (read through Calibre's ebook-convert), and
Calibre's own empty library. Skipped when the corpus is absent. The MOBI is a chapter that
ebook-convert writes, not the shared Alice: indexed whole with the reference embedder, the
novel took past the 600 s timeout on a busy machine (issue 40)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from calibre_fixtures import BOOKS, add_book, needs_calibre
from document_fixtures import calibre_mobi

from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search.engine import SearchRequest
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths

pytestmark = [pytest.mark.slow, needs_calibre,
              pytest.mark.skipif(not (BOOKS / "manifest.tsv").is_file(),
                                 reason=f"the shared books corpus is absent ({BOOKS})")]


def open_app(libs: list[Path], embedder: Any) -> App:
    paths = resolve_paths()
    config = load_config(paths, {"calibre.libraries": [str(p) for p in libs],
                                 "obsidian.enabled": False})
    return App(paths, config, embedder=embedder)


def search(app: App, query: str, **filters: Any) -> list[dict[str, Any]]:
    req = SearchRequest(query=query, mode="keyword", top_k=5, filters=Filters(**filters))
    return app.search_engine.search(req)["results"]


@pytest.fixture
def app(tmp_path: Path, real_embedder: Any) -> Iterator[App]:
    lib = tmp_path / "Books"
    add_book(lib, BOOKS / "epub" / "idpf-wasteland.epub", title="The Waste Land",
             authors="T.S. Eliot", tags="Poetry,Classics")
    add_book(lib, BOOKS / "pdf" / "The-Man-Without-A-Body.pdf",
             title="The Man Without A Body", authors="Edward Page Mitchell",
             tags="Science Fiction", series="Early SF", series_index=1)
    add_book(lib, calibre_mobi(tmp_path / "alice.mobi"),
             title="Alice's Adventures in Wonderland", authors="Lewis Carroll")
    empty = tmp_path / "Empty"
    shutil.copytree(BOOKS / "calibre-empty-library", empty)
    for f in empty.iterdir():
        f.chmod(0o644)
    with open_app([lib, empty], real_embedder) as a:
        yield a
        assert a.consistency()["ok"], a.consistency()


def test_shared_books_by_author_series_and_page(app: App) -> None:
    reports = app.sync_all()
    assert [(r.collection, r.indexed) for r in reports] == [("calibre", 3), ("calibre-empty", 0)]
    assert not any(r.errors for r in reports)

    hits = search(app, "cruellest month lilacs", author="eliot")
    assert hits and {h["title"] for h in hits} == {"The Waste Land"}
    assert hits[0]["source_type"] == "epub"

    hits = search(app, "body", tags=("series/early sf",), source_type="pdf")
    assert hits and hits[0]["title"] == "The Man Without A Body"
    assert all(isinstance(h["metadata"].get("page_number"), int) for h in hits)

    # MOBI only: converted with Calibre's ebook-convert, then read as EPUB.
    (alice, *_) = search(app, "rabbit hole", author="carroll")
    assert alice["title"] == "Alice's Adventures in Wonderland"
    assert alice["source_uri"].endswith("/3/MOBI")
