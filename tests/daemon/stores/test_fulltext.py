"""The keyword stores, Whoosh and tantivy, held to the same behaviour on tmp_path."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chunk_fixtures import row

from ragd.daemon.models import Filters
from ragd.daemon.stores import fulltext
from ragd.daemon.stores.catalog import Catalog
from ragd.daemon.stores.fulltext import (
    BACKEND_META,
    KeywordStore,
    WhooshStore,
    document_fields,
    open_keyword_store,
    record_backend,
)
from ragd.daemon.stores.keyword_fields import ancestors, tag_ancestors
from ragd.daemon.stores.tantivy_store import TantivyStore

BACKENDS = ("whoosh", "tantivy")


def open_store(backend: str, directory: Path) -> KeywordStore:
    return WhooshStore(directory) if backend == "whoosh" else TantivyStore(directory)


@pytest.fixture(params=BACKENDS)
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], KeywordStore]:
    """Opens (or reopens) the store of one backend on the same folder."""
    opened: list[KeywordStore] = []

    def factory() -> KeywordStore:
        store = open_store(request.param, tmp_path / request.param)
        opened.append(store)
        return store

    yield factory
    for s in opened:
        s.close()


def ids(store: KeywordStore, query: str, k: int = 10, **filters: Any) -> list[int]:
    return [i for i, _ in store.search_any(store.analyse(query), [], k, Filters(**filters))]


def test_finds_any_term_and_ranks_more_terms_first(make: Callable[[], KeywordStore]) -> None:
    s = make()
    s.apply([row(1, "herons wade in the pond"), row(2, "a heron by the lake at dawn"),
             row(3, "nothing about birds")], [], 3, {})
    assert s.analyse("The Herons running") == ["heron", "run"]
    assert set(ids(s, "heron")) == {1, 2}
    assert ids(s, "heron dawn lake")[0] == 2
    assert ids(s, "the of") == []
    # the title and headings are searched with the text
    s.apply([row(4, "body text", title="Kingfisher notes")], [], 4, {})
    assert ids(s, "kingfisher") == [4]


def test_phrases(make: Callable[[], KeywordStore]) -> None:
    s = make()
    s.apply([row(1, "the blue heron stood"), row(2, "heron, blue and grey")], [], 2, {})
    hits = s.search_phrase(s.analyse("blue heron"), 10, Filters())
    assert [i for i, _ in hits] == [1]
    assert s.search_phrase(["heron"], 10, Filters()) == []
    quoted = s.search_any(s.analyse("heron grey"), [s.analyse("blue heron")], 10, Filters())
    assert [i for i, _ in quoted][0] == 1  # the phrase counts double


def test_chinese_and_japanese_words_are_found(make: Callable[[], KeywordStore]) -> None:
    s = make()
    s.apply([row(1, "ガリ版の印刷は宮沢賢治の時代に広まった。"), row(2, "活版印刷所で働くジョバンニ"),
             row(3, "東京の印刷会社 printing company"), row(4, "版画と印象派"),
             row(5, "herons wade"), row(6, "他们支持中文输入法"), row(7, "東京から京都へ"),
             row(8, "東京都庁の展望台"), row(9, "한국어 사전을 찾다")], [], 9, {})
    assert s.analyse("ガリ版") == ["ガリ", "リ版"]
    assert set(ids(s, "印刷")) == {1, 2, 3}  # a word inside longer runs of text
    assert ids(s, "宮沢賢治") == [1] and ids(s, "中文") == [6] and ids(s, "印象") == [4]
    assert set(ids(s, "版")) == {1, 2, 4}  # one character: found inside runs too
    assert ids(s, "printing 印刷")[0] == 3 and ids(s, "heron") == [5]
    # A query of several characters is a phrase of bigrams, in the phrase leg...
    assert [i for i, _ in s.search_phrase(s.analyse("ガリ版の印刷"), 10, Filters())] == [1]
    assert s.search_phrase(s.analyse("ガリ版印刷"), 10, Filters()) == []
    assert [i for i, _ in s.search_phrase(s.analyse("東京都"), 10, Filters())] == [8]
    assert [i for i, _ in s.search_phrase(s.analyse("한국어 사전"), 10, Filters())] == [9]
    # ... and in the keyword leg: the word itself ranks above its bigrams apart.
    assert ids(s, "東京都")[0] == 8 and set(ids(s, "東京都")) == {3, 7, 8}


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_analysed_before_cjk_bigrams_is_rebuilt(backend: str, tmp_path: Path) -> None:
    store = open_store(backend, tmp_path)
    store.reset("fp")
    store.apply([row(1, "ガリ版の話")], [], 1, {})
    store.close()
    previous = {"whoosh": "4", "tantivy": "2"}[backend]  # the schemas before decision 0021
    state = tmp_path / "ragd-state.json"
    state.write_text(json.dumps({"mark": 1, "schema": previous}), encoding="utf-8")
    older = open_store(backend, tmp_path)
    assert older.stale and older.ids() == set() and older.mark == 0
    older.close()


def test_delete_and_update_show_at_once(make: Callable[[], KeywordStore]) -> None:
    s = make()
    s.apply([row(1, "heron pond"), row(2, "heron lake")], [], 2, {})
    assert set(ids(s, "heron")) == {1, 2}
    # Regression (decision 0007): a reused searcher must not keep stale deletion sets.
    s.apply([row(1, "heron pond", path="moved/n.md")], [2], 3, {})
    assert ids(s, "heron") == [1]
    assert ids(s, "heron", folder="a") == [] and ids(s, "heron", folder="moved") == [1]
    s.apply([row(1, "egret pond", path="moved/n.md")], [], 4, {})
    assert ids(s, "heron") == [] and ids(s, "egret") == [1]
    assert s.ids() == {1} and s.mark == 4


def test_filters_restrict_without_reordering(make: Callable[[], KeywordStore]) -> None:
    s = make()
    s.apply([
        row(1, "heron heron heron", "x/y/1.md", collection="notes", date=20240105,
            tags=("birds/wading",), sender="Ann Lee <ann@example.org>"),
        row(2, "heron heron", "x/2.md", collection="notes", date=20230101),
        row(3, "heron", "z/3.md", collection="mail", date=None, tags=("birds",)),
    ], [], 3, {})
    assert ids(s, "heron") == [1, 2, 3]
    assert ids(s, "heron", collections=("notes",)) == [1, 2]
    assert ids(s, "heron", collections=("notes", "mail")) == [1, 2, 3]
    assert ids(s, "heron", collections=()) == []
    assert ids(s, "heron", folder="x") == [1, 2] and ids(s, "heron", folder="x/y") == [1]
    assert ids(s, "heron", date_from=20240101) == [1]
    assert ids(s, "heron", date_from=20230101, date_to=20231231) == [2]
    assert ids(s, "heron", tags=("birds",)) == [1, 3]
    assert ids(s, "heron", tags=("birds/wading",)) == [1]
    assert ids(s, "heron", sender="ann@example") == [1]
    assert ids(s, "heron", sender="a.n") == []  # a literal, not a pattern
    # the same filter again (cached by Whoosh) still follows updates
    s.apply([], [1], 4, {})
    assert ids(s, "heron", collections=("notes",)) == [2]
    unfiltered = dict(s.search_any(["heron"], [], 10, Filters()))
    filtered = dict(s.search_any(["heron"], [], 10, Filters(collections=("notes",))))
    assert filtered == {2: pytest.approx(unfiltered[2])}  # a filter adds nothing to scores


def test_replay_is_idempotent_and_the_mark_persists(make: Callable[[], KeywordStore]) -> None:
    s = make()
    batch = [row(1, "heron"), row(2, "heron egret")]
    s.apply(batch, [], 2, {})
    s.apply(batch, [], 2, {})  # replayed after a crash: no duplicates
    assert len(s.search_any(["heron"], [], 10, Filters())) == 2
    assert s.mark == s.persisted_mark == 2
    s.close()
    again = make()
    assert again.mark == 2 and again.ids() == {1, 2} and not again.stale
    again.reset("fp")
    assert again.ids() == set() and again.mark == 0 and ids(again, "heron") == []


def test_a_new_or_older_index_is_stale(tmp_path: Path) -> None:
    for backend in BACKENDS:
        folder = tmp_path / backend
        first = open_store(backend, folder)
        assert first.stale  # created: the journal may not hold everything any more
        first.reset("fp")
        first.apply([row(1)], [], 1, {})
        first.close()
        assert not open_store(backend, folder).stale
        state = folder / "ragd-state.json"
        state.write_text(json.dumps({"mark": 1, "schema": "0"}), encoding="utf-8")
        older = open_store(backend, folder)
        assert older.stale and older.ids() == set()
        older.close()


def test_switching_backend_rebuilds_when_the_other_got_further(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog.sqlite")

    def reopen(backend: str) -> tuple[KeywordStore, bool]:
        return open_keyword_store(backend, tmp_path, tmp_path / "whoosh", catalog)

    try:
        whoosh, rebuild = reopen("whoosh")
        assert rebuild  # new
        whoosh.reset("fp")
        whoosh.apply([row(1)], [], 3, {})
        record_backend(catalog, "whoosh")
        whoosh.close()
        again, rebuild = reopen("whoosh")
        assert not rebuild and isinstance(again, WhooshStore)
        again.close()
        tan, rebuild = reopen("tantivy")
        assert rebuild and isinstance(tan, TantivyStore)
        tan.reset("fp")
        tan.apply([row(1)], [], 3, {})
        record_backend(catalog, "tantivy")
        tan.close()
        assert catalog.get_meta(BACKEND_META) == "tantivy"
        # nothing written while tantivy served: Whoosh is as far as tantivy got
        back, rebuild = reopen("whoosh")
        assert not rebuild
        back.close()
        tan, _ = reopen("tantivy")
        tan.apply([row(2)], [], 4, {})
        tan.close()
        # tantivy got further: the journal may have been pruned past Whoosh's mark
        back, rebuild = reopen("whoosh")
        assert rebuild
        back.close()
    finally:
        catalog.close()


_WRITER = """
import sys
from pathlib import Path
sys.path[:0] = [{repo!r}, {tests!r}, {fixtures!r}]
from test_fulltext import open_store, row
store = open_store({backend!r}, Path({folder!r}))
mark = store.mark
while True:
    mark += 1
    # each batch rewrites chunk 1 and adds chunk mark: what a journal replay would do
    store.apply([row(1, f"heron v{{mark}}"), row(mark + 10, "heron")], [], mark, {{}})
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_kill_9_while_writing_converges_on_replay(backend: str, tmp_path: Path) -> None:
    folder = tmp_path / backend
    code = _WRITER.format(repo=str(Path(__file__).resolve().parents[3]),
                          tests=str(Path(__file__).resolve().parent),
                          fixtures=str(Path(__file__).resolve().parents[2]), backend=backend,
                          folder=str(folder))
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    state = folder / "ragd-state.json"
    deadline = time.monotonic() + 60
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if json.loads(state.read_text(encoding="utf-8")).get("mark", 0) >= 5:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        assert proc.poll() is None, "the writer died by itself"
        os.kill(proc.pid, signal.SIGKILL)  # anywhere: mid-batch, mid-commit, before the mark
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    store = open_store(backend, folder)
    try:
        done = store.mark
        assert done >= 5
        # The journal's ops after the mark, replayed: the batch that was cut, if any.
        store.apply([row(1, f"heron v{done + 1}"), row(done + 11, "heron")], [], done + 1, {})
        expected = {1} | {m + 10 for m in range(1, done + 2)}
        assert store.ids() == expected  # a commit is whole; a batch past the mark, redone
        hits = store.search_any(["heron"], [], 1000, Filters())
        assert len(hits) == len({i for i, _ in hits})  # each chunk once
        assert ids(store, f"v{done + 1}") == [1]
    finally:
        store.close()


def test_document_fields() -> None:
    assert ancestors("a/b/c.md") == ["a", "a/b"] and ancestors("c.md") == []
    assert tag_ancestors(["x/y/z", "q"]) == ["q", "x", "x/y", "x/y/z"]
    doc = document_fields(row(5, "body", tags=("proj/alpha",)))
    assert doc["chunk_id"] == "5" and doc["folders"] == "a,a/b"
    assert doc["tags"] == "proj,proj/alpha" and doc["date"] == 20240101
    assert doc["text"] == "T5\nH\nbody"


def test_whoosh_drops_the_most_frequent_terms_past_the_postings_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fulltext, "MIN_POSTINGS", 0)
    s = WhooshStore(tmp_path)
    # "common" in all 10 chunks, "middle" in 4, "rare" in 1: a budget of 5 postings keeps
    # "rare" and "middle" and drops "common".
    rows = [row(i, "common" + (" middle" if i < 4 else "") + (" rare" if i == 0 else ""))
            for i in range(10)]
    s.apply(rows, [], 1, {})
    assert fulltext.within_budget([10, 4, 1], 10) == [1, 2]  # common, middle, rare
    assert fulltext.within_budget([10], 10) == [0]  # the rarest term always stays
    assert ids(s, "common rare")[0] == 0
    s.close()


@pytest.mark.slow
def test_app_switches_keyword_backend_and_rebuilds_only_when_behind(
        tmp_path: Path, real_embedder: Any) -> None:
    from vault_fixtures import write_vault

    from ragd.daemon.runtime.app import App
    from ragd.daemon.search.engine import SearchRequest
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    vault = write_vault(tmp_path / "vault")
    paths = resolve_paths()

    def opened(backend: str) -> App:
        config = load_config(paths, {"obsidian.vaults": [str(vault)],
                                     "index.keyword_backend": backend})
        return App(paths, config, embedder=real_embedder)

    def top(app: App, query: str) -> str:
        req = SearchRequest(query=query, mode="keyword", top_k=3,
                            filters=Filters(folder="Astronomy"))
        return str(app.search_engine.search(req)["results"][0]["title"])

    with opened("whoosh") as app:
        app.sync_all()
        assert top(app, "planet moons telescope") == "Observing Jupiter"
    with opened("tantivy") as app:  # rebuilt from the catalog, nothing embedded
        assert isinstance(app.whoosh, TantivyStore)
        assert app.consistency()["ok"], app.consistency()
        assert top(app, "planet moons telescope") == "Observing Jupiter"
        (vault / "Astronomy" / "Saturn.md").write_text("# Saturn\n\nRings and moons.\n",
                                                       encoding="utf-8")
        app.sync_all()
        assert app.consistency()["ok"]
    with opened("whoosh") as app:  # tantivy got further: Whoosh is rebuilt
        assert isinstance(app.whoosh, WhooshStore)
        assert app.consistency()["ok"], app.consistency()
        assert top(app, "saturn rings") == "Saturn"


def test_tantivy_checks_broad_filters_on_hits_and_runs_narrow_ones(tmp_path: Path) -> None:
    s = TantivyStore(tmp_path)
    rows = [row(i, "heron " * (1 + i % 7), collection="big", date=20240101 + i % 20)
            for i in range(1, 301)]
    rows += [row(i, "heron", collection="small") for i in range(301, 306)]
    s.apply(rows, [], 1, {})
    narrow = Filters(collections=("small",))
    assert s._checked(s_query(s), 10, narrow) is None  # too few among the best 200
    assert {i for i, _ in s.search_any(["heron"], [], 10, narrow)} == set(range(301, 306))
    broad = Filters(collections=("big",), date_from=20240105)
    checked = s._checked(s_query(s), 10, broad)
    assert checked is not None and len(checked) == 10
    s._checked = lambda *a: None  # type: ignore[method-assign]
    assert s.search_any(["heron"], [], 10, broad) == checked  # the same as the filter query
    s.close()


def s_query(s: TantivyStore) -> Any:
    import tantivy

    return tantivy.Query.term_query(s._schema, "text", "heron")


def test_a_searcher_reads_a_segment_that_a_merge_deleted(tmp_path: Path) -> None:
    """A commit that merges segments deletes their files while searches still use the
    searcher of the commit before (until the store reopens it): every file that searcher
    reads must be open by then. It read a stored field as None (TypeError, an internal
    error) under a stream of commits."""
    store = WhooshStore(tmp_path / "w")
    try:
        for n in range(3):  # three segments
            store.apply([row(i, text=f"lantern w{i}") for i in range(n * 10 + 1, n * 10 + 11)],
                        [], n + 1, {})
        before = store.segments()
        with store._search_lock:
            searcher, _ = store._current()
        # Another commit merges the small segments and deletes their files; this searcher
        # is still the one searches use until the store reopens.
        writer = store._ix.writer(compound=False)
        writer.add_document(**store._document(row(99, text="lantern tide")))
        writer.commit(optimize=True)  # as MERGE_SMALL does to small segments
        assert len(store._ix.reader().leaf_readers()) == 1 < before  # their files deleted
        ids = {cid for cid, _ in store._chunk_ids(searcher, [(d, 1.0) for d in range(30)])}
        assert ids == set(range(1, 31))
        for field in ("text", "phrase"):
            assert searcher.ixreader.doc_field_length(5, field) > 0
    finally:
        store.close()


def test_while_notes_are_saved_a_commit_merges_a_bounded_number_of_documents(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whoosh merges inside a commit: MERGE_SMALL merged 21 segments of ~1,000 chunks in one
    15 s commit that a saved note waited for. While notes are saved a merge takes at most
    MERGE_CAP_DOCS documents; once it is quiet, Whoosh's own policy goes on."""
    monkeypatch.setattr(fulltext, "MERGE_CAP_DOCS", 1500)
    monkeypatch.setattr(fulltext, "BUSY_COMMIT_S", 1e6)  # the time budget never binds here
    store = WhooshStore(tmp_path / "w")
    merged: list[int] = []
    real = fulltext._merge_bounded

    def spy(writer: Any, segments: list[Any], cap: int | None = None) -> list[Any]:
        kept = real(writer, segments, cap)
        gone = [s for s in segments if s not in kept]
        merged.append(sum(s.doc_count_all() for s in gone))
        return kept

    monkeypatch.setattr(fulltext, "_merge_bounded", spy)
    store.quiet = lambda: False
    try:
        for n in range(30):
            store.apply([row(i, text=f"word{i}") for i in range(n * 100 + 1, n * 100 + 101)],
                        [], n + 1, {})
        assert any(merged) and max(merged) <= 1500, merged
        calls = len(merged)
        store.quiet = lambda: True
        store.apply([row(9999, text="quiet")], [], 99, {})
        assert len(merged) == calls  # quiet: Whoosh's own policy, unbounded
        assert len(store.ids()) == 3001
    finally:
        store.close()
