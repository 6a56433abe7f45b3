"""Documents indexed through the doc store with the real model and stores: a project folder of
every format (good and broken), vault attachments, and the shared books when present."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_path
from document_fixtures import pdf_bytes, write_all

from ragd.daemon.convert.formats import format_for
from ragd.daemon.models import Filters, Skip
from ragd.daemon.runtime.app import App
from ragd.daemon.search.engine import SearchRequest
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths

pytestmark = pytest.mark.slow


@pytest.fixture
def app(tmp_path: Path, real_embedder: Any) -> Iterator[App]:
    paths = resolve_paths()
    vault = tmp_path / "vault"
    (vault / "attachments").mkdir(parents=True)
    (vault / "Trip.md").write_text("# Trip\n\nSee the field guide.\n", encoding="utf-8")
    (vault / "attachments" / "Field guide.pdf").write_bytes(pdf_bytes())
    config = load_config(paths, {"obsidian.vaults": [str(vault)]})
    with App(paths, config, embedder=real_embedder) as a:
        yield a
        assert a.consistency()["ok"], a.consistency()


def search(app: App, query: str, mode: str = "hybrid", **filters: Any) -> list[dict[str, Any]]:
    req = SearchRequest(query=query, mode=mode, top_k=5, filters=Filters(**filters))
    return app.search_engine.search(req)["results"]


def test_a_project_of_every_format_indexes_and_broken_files_are_skipped_with_codes(
        app: App, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    files = write_all(folder)
    (folder / "readme.md").write_text("# Readme\n\nAbout this folder.\n", encoding="utf-8")
    coll = app.create_project("docs", str(folder))
    report = app.sync_collection(coll)
    skipped = {path: code for path, code, _ in report.skipped_files}
    text_formats = ("html", "tex", "csv")
    for name in files:
        kind, suffix = name.split(".")
        if kind == "good" or (kind == "truncated" and suffix in text_formats):
            assert name not in skipped, (name, skipped.get(name))
            continue
        want = {"empty": "empty", "encrypted": "encrypted",
                "corrupt": "binary" if suffix in text_formats else "parse_error",
                "truncated": "parse_error"}[kind]
        assert skipped.get(name) == want, (name, skipped.get(name))
    assert report.indexed == 1 + len(files) - len(skipped) and not report.errors
    info = app.collection_info("docs")
    assert {"pdf", "docx", "pptx", "xlsx", "html", "epub", "latex", "csv", "markdown"} <= set(
        info["source_types"])

    hits = search(app, "zebrafish migrate past the lighthouse", collections=("docs",))
    assert hits[0]["source_path"].endswith("good.pdf") and hits[0]["source_type"] == "pdf"
    assert hits[0]["metadata"]["page_number"] == 2 and "zebrafish" in hits[0]["content"]
    for query, name in [("Revenue 4242", "good.docx"), ("rocket telemetry checklist", "good.pptx"),
                        ("kayak rental", "good.xlsx"), ("granite tower waves", "good.epub"),
                        ("magma chambers caldera", "good.html"),
                        ("invariance under rotation", "good.tex"), ("Krakow Vistula", "good.csv")]:
        top = search(app, query, "keyword", collections=("docs",))
        assert top and top[0]["source_path"].endswith(name), (query, top[:1])
        assert top[0]["source_type"] == format_for(name).source_type  # type: ignore[union-attr]
    only = search(app, "zebrafish", source_type="docx", collections=("docs",))
    assert only and {r["source_type"] for r in only} == {"docx"}

    # The same bytes under another name cost no conversion.
    calls = app.documents.store.converter.calls  # type: ignore[attr-defined]
    shutil.copy(folder / "good.docx", folder / "copy of good.docx")
    report = app.sync_collection(coll)
    assert report.indexed == 1
    assert app.documents.store.converter.calls == calls  # type: ignore[attr-defined]


def test_vault_attachments_are_indexed_as_their_own_type(app: App) -> None:
    report = app.sync_all()[0]
    assert report.indexed == 2 and not report.skipped_files
    hits = search(app, "quasar telescope", collections=("obsidian",))
    assert hits[0]["title"] == "Field Guide" and hits[0]["source_type"] == "pdf"
    assert hits[0]["metadata"]["page_number"] == 3
    assert hits[0]["metadata"]["authors"] == ["Ada Tester"]
    assert hits[0]["source_path"].endswith("attachments/Field guide.pdf")
    paths = [d["source_path"] for d in app.documents.store.info()]
    assert any(p.endswith("Field guide.pdf") for p in paths)


@pytest.mark.corpus
def test_every_shared_book_converts_and_a_pdf_passage_is_found_on_its_page(
        app: App, tmp_path: Path) -> None:
    books = corpus_path("books")
    t0 = time.perf_counter()
    for path in sorted([*books.glob("pdf/*.pdf"), *books.glob("epub/*.epub")]):
        fmt = format_for(path.name)
        assert fmt is not None
        conv = app.documents.store.convert(path.read_bytes(), fmt, source_path=str(path))
        assert not isinstance(conv, Skip), (path.name, conv)
        assert conv.markdown.strip(), path.name
    assert time.perf_counter() - t0 < 120
    folder = tmp_path / "books"
    folder.mkdir()
    shutil.copy(books / "pdf" / "The-Man-Without-A-Body.pdf", folder)
    coll = app.create_project("books", str(folder))
    report = app.sync_collection(coll)
    assert report.indexed == 1 and not report.skipped_files
    hits = search(app, "A candle flame is the same candle flame although the burning gas is "
                  "continually changing", collections=("books",))
    assert hits[0]["metadata"]["page_number"] == 3, hits[0]
    assert "candle" in hits[0]["content"] and hits[0]["metadata"]["pages"] == 4
