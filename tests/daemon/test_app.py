"""Index and search a generated vault in process, with the real model and real stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vault_fixtures import write_vault

from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search.engine import SearchRequest
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths

pytestmark = pytest.mark.slow


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return write_vault(tmp_path / "My Vault")


@pytest.fixture
def app(vault: Path, real_embedder: Any) -> Iterator[App]:
    paths = resolve_paths()
    config = load_config(paths, {"obsidian.vaults": [str(vault)]})
    with App(paths, config, embedder=real_embedder) as a:
        yield a
        # The invariant every test ends on: the three stores hold exactly the same chunk ids.
        assert a.consistency()["ok"], a.consistency()


def search(app: App, query: str, mode: str = "hybrid", **filters: Any) -> list[dict[str, Any]]:
    req = SearchRequest(query=query, mode=mode, top_k=5, filters=Filters(**filters))
    return app.search_engine.search(req)["results"]


def titles(results: list[dict[str, Any]]) -> list[str]:
    return [r["title"] for r in results]


def test_paraphrase_and_rare_word(app: App) -> None:
    report = app.sync_all()[0]
    assert report.indexed == 8 and not report.skipped_files and not report.errors
    query = "what to bring on a trip"
    # The paraphrase shares no analysed term with the note it must find.
    note_terms = set(app.search_engine.analyse(
        (Path(app.catalog.collection("obsidian").root) / "Travel/Packing list.md")  # type: ignore[union-attr]
        .read_text(encoding="utf-8")))
    assert not note_terms & set(app.search_engine.analyse(query))
    assert titles(search(app, query, "semantic"))[0] == "Packing list"
    assert titles(search(app, query))[0] == "Packing list"
    assert titles(search(app, "xylofrabic", "keyword")) == ["Xylofrabic protocol"]
    assert titles(search(app, "xylofrabic"))[0] == "Xylofrabic protocol"


def test_result_fields_and_filters(app: App) -> None:
    app.sync_all()
    r = search(app, "planet moons telescope")[0]
    assert r["title"] == "Observing Jupiter"
    assert set(r) == {"title", "content", "collection", "source_type", "source_path",
                      "source_uri", "score", "metadata"}
    assert r["collection"] == "obsidian" and r["source_type"] == "markdown"
    assert r["source_path"].endswith("Astronomy/Observing Jupiter.md")
    assert r["source_uri"] == ("obsidian://open?vault=My%20Vault"
                               "&file=Astronomy%2FObserving%20Jupiter")
    assert 0 < r["score"] <= 1 and r["metadata"]["tags"] == ["astronomy"]
    assert r["metadata"]["heading_path"] == ["Observing Jupiter"]
    assert "Io, Europa" in r["content"]
    # Filters are pushed into both legs: only matching notes come back, in every mode.
    for mode in ("hybrid", "keyword", "semantic"):
        assert set(titles(search(app, "care maintenance", mode, tags=("bread",)))) <= {
            "Levain care"}
        assert titles(search(app, "planet", mode, folder="Garden")) in ([], ["Tomatoes"])
        got = titles(search(app, "money and savings", mode, date_from=20240101,
                            date_to=20241231))
        # Only Levain care is dated 2024 (frontmatter); Budget 2024 has no date, so its
        # file time (today) counts, and Observing Jupiter is dated 2023.
        assert set(got) <= {"Levain care"}
    assert titles(search(app, "potash", "keyword", tags=("garden",))) == ["Tomatoes"]
    assert titles(search(app, "observing", "keyword", date_to=20231231)) == [
        "Observing Jupiter"]


def test_exact_title_is_not_buried(app: App) -> None:
    app.sync_all()
    assert titles(search(app, "Packing list"))[0] == "Packing list"
    assert titles(search(app, "Leaven"))[0] == "Levain care"  # an alias is a title too


def test_edit_add_rename_delete(app: App, vault: Path, real_embedder: Any) -> None:
    long_note = "\n\n".join(
        f"## Part {n}\n\n" + f"Section {n} talks about topic number {n} at length. " * 12
        for n in range(4))
    (vault / "Long.md").write_text("# Long\n\n" + long_note, encoding="utf-8")
    app.sync_all()
    chunks_before = app.catalog.collection_stats(1)["chunk_count"]

    # Edit one section of a multi-chunk note: only that chunk is embedded again.
    text = (vault / "Long.md").read_text(encoding="utf-8")
    (vault / "Long.md").write_text(text.replace("Section 2 talks", "Section 2 discusses", 1),
                                   encoding="utf-8")
    calls = real_embedder.calls
    report = app.sync_all()[0]
    assert report.indexed == 1 and report.embedded == 1
    assert real_embedder.calls - calls == 1
    assert app.catalog.collection_stats(1)["chunk_count"] == chunks_before

    # Add
    (vault / "Birds.md").write_text("# Birds\n\nA wren nests in the hedge.", encoding="utf-8")
    app.sync_all()
    assert titles(search(app, "wren", "keyword")) == ["Birds"]

    # Rename and move: found under the new path, nothing embedded.
    (vault / "Archive").mkdir()
    (vault / "Travel/Packing list.md").rename(vault / "Archive/Trip checklist.md")
    calls = real_embedder.calls
    report = app.sync_all()[0]
    assert report.moved == 1 and report.embedded == 0 and real_embedder.calls == calls
    hit = search(app, "passport charger rain jacket", "keyword")[0]
    assert hit["source_path"].endswith("Archive/Trip checklist.md")
    assert hit["title"] == "Trip checklist"
    assert titles(search(app, "passport", "keyword", folder="Travel")) == []

    # Delete
    (vault / "Cycling/Chain maintenance.md").unlink()
    report = app.sync_all()[0]
    assert report.deleted == 1
    assert "Chain maintenance" not in titles(search(app, "degreaser chain lubricant"))


def test_rebuild_gives_same_results_without_embedding(app: App, real_embedder: Any) -> None:
    app.sync_all()
    queries = ["telescope moons", "savings on payday", "how to practise an instrument"]
    before = [titles(search(app, q)) for q in queries]
    calls = real_embedder.calls
    counts = app.rebuild(["faiss", "keyword"])
    assert counts["faiss"] == counts["keyword"] == app.consistency()["catalog"]
    assert [titles(search(app, q)) for q in queries] == before
    assert real_embedder.calls == calls  # no chunk was embedded again


def test_restart_reopens_the_same_index(vault: Path, real_embedder: Any) -> None:
    paths = resolve_paths()
    config = load_config(paths, {"obsidian.vaults": [str(vault)]})
    with App(paths, config, embedder=real_embedder) as a:
        a.sync_all()
        first = titles(search(a, "telescope"))
    calls = real_embedder.calls
    with App(paths, config, embedder=real_embedder) as b:
        report = b.sync_all()[0]
        assert report.unchanged == 8 and report.indexed == 0
        assert titles(search(b, "telescope")) == first
        assert b.consistency()["ok"]
    assert real_embedder.calls == calls  # reopening embedded nothing


def test_changed_model_means_full_visible_reembed(vault: Path, real_embedder: Any,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    from ragd.daemon.embed.embedding import SentenceTransformerEmbedder

    paths = resolve_paths()
    config = load_config(paths, {"obsidian.vaults": [str(vault)]})
    with App(paths, config, embedder=real_embedder) as a:
        a.sync_all()
        chunks = a.consistency()["catalog"]
    # The same weights under another model id: a different fingerprint, another vector space.
    other = SentenceTransformerEmbedder(real_embedder.model_path)
    assert other.fingerprint != real_embedder.fingerprint
    with caplog.at_level("WARNING"), App(paths, config, embedder=other) as b:
        assert b.reembed_needed
        report = b.sync_all()[0]
        assert report.embedded == chunks and report.indexed == 8
        assert b.catalog.get_meta("fingerprint") == other.fingerprint
        assert b.faiss.fingerprint == other.fingerprint and b.consistency()["ok"]
        assert titles(search(b, "what to bring on a trip"))[0] == "Packing list"
    assert any("fingerprint changed" in r.getMessage() for r in caplog.records)
    with App(paths, config, embedder=other) as c:  # and only once
        assert not c.reembed_needed and c.sync_all()[0].embedded == 0


@pytest.mark.parametrize("overfetch", [200, 2])
def test_filtered_semantic_search_equals_the_id_selector_path(
        app: App, overfetch: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filter checked on the unfiltered neighbours (broad) or listed for FAISS's selector
    (narrow, or too few survive) gives the same top k as the selector alone."""
    import ragd.daemon.search.engine as engine_module
    from ragd.daemon.search.filters import to_sql

    monkeypatch.setattr(engine_module, "FILTER_OVERFETCH", overfetch)
    app.sync_all()
    engine = app.search_engine
    filters = [Filters(collections=("obsidian",)), Filters(folder="Travel"),
               Filters(tags=("garden",)), Filters(date_from=20240101),
               Filters(collections=("obsidian",), folder="Baking")]
    for f in filters:
        for query, k in (("how to look after sourdough starter", 3), ("packing a bag", 1)):
            vec = engine.embedder.embed_query(query)
            where, args = to_sql(f)
            want = app.faiss.search(vec, k, app.catalog.filter_chunk_ids(where, args))
            got = engine.semantic_hits(query, k, f)
            assert [i for i, _ in got] == [i for i, _ in want], (f, query)
