"""Typed sub-queries (decision 0048): their validation, and how their hits join the legs."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from ragd.daemon.cli.main import build_parser, search_params
from ragd.daemon.errors import InvalidArgument
from ragd.daemon.ipc.protocol import MAX_QUERY_CHARS, MAX_SEARCHES, parse_searches
from ragd.daemon.models import Filters
from ragd.daemon.search.engine import SearchEngine, SearchRequest, SubQuery, validate
from ragd.daemon.search.fusion import merge_hits
from ragd.daemon.search.params import build_request


# -- validation -------------------------------------------------------------------------------
def test_sub_queries_are_normalised() -> None:
    assert parse_searches(None) == [] and parse_searches([]) == []
    assert parse_searches([{"type": " LEX ", "query": "  embed  "},
                           {"type": "hyde", "query": "A passage.\n"}]) == [
        {"type": "lex", "query": "embed"}, {"type": "hyde", "query": "A passage."}]


@pytest.mark.parametrize(("value", "words"), [
    ("embed", "must be a list"),
    ({"type": "lex", "query": "x"}, "must be a list"),
    ([{"type": "vec", "query": "x"}] * (MAX_SEARCHES + 1), f"at most {MAX_SEARCHES}"),
    (["embed"], "entry 1 must be an object"),
    ([{"type": "vec", "query": "x"}, {"type": "bm25", "query": "x"}], "entry 2 has type 'bm25'"),
    ([{"query": "x"}], "has type None"),
    ([{"type": "vec", "query": "   "}], "entry 1 (vec) needs a non-empty string"),
    ([{"type": "vec"}], "needs a non-empty string"),
    ([{"type": "vec", "query": 3}], "needs a non-empty string"),
    ([{"type": "vec", "query": "x", "weight": 2}], "unknown keys: weight"),
    ([{"type": "hyde", "query": "x" * (MAX_QUERY_CHARS + 1)}], "is too long"),
])
def test_bad_sub_queries_name_the_parameter(value: Any, words: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_searches(value)
    assert caught.value.param == "searches"
    assert words in caught.value.message
    assert caught.value.hint


def test_build_request_carries_the_sub_queries() -> None:
    engine: Any = SimpleNamespace(resolve_collection=lambda name: None)
    assert build_request(engine, query="q").searches == ()
    req = build_request(engine, query="q", searches=[
        {"type": "vec", "query": "a paraphrase"}, {"type": "lex", "query": "caf\udcc3"}])
    assert req.searches[0] == SubQuery("vec", "a paraphrase")
    assert req.searches[1].query.encode("utf-8")  # a lone surrogate made encodable
    assert req.sub_queries("vec", "hyde") == ["a paraphrase"]
    with pytest.raises(InvalidArgument) as caught:
        build_request(engine, query="q", searches=[{"type": "vec", "query": ""}])
    assert caught.value.param == "searches"


def test_the_engine_refuses_sub_queries_it_was_not_given_normalised() -> None:
    validate(SearchRequest("q", searches=(SubQuery("lex", "embed"),)))
    for bad in (SubQuery("LEX", "embed"), SubQuery("vec", " x "), SubQuery("other", "x")):
        with pytest.raises(InvalidArgument) as caught:
            validate(SearchRequest("q", searches=(bad,)))
        assert caught.value.param == "searches"


def test_the_command_line_sends_searches_only_when_given() -> None:
    parser = build_parser()
    plain = search_params(parser.parse_args(["search", "how", "to", "embed"]))
    assert "searches" not in plain and plain["query"] == "how to embed"
    args = parser.parse_args(["search", "show a page in a page", "--hyde", "Add ! before a link",
                              "--lex", "embed", "--vec", "embed a note", "--lex", "transclusion"])
    assert search_params(args)["searches"] == [
        {"type": "lex", "query": "embed"}, {"type": "lex", "query": "transclusion"},
        {"type": "vec", "query": "embed a note"}, {"type": "hyde", "query": "Add ! before a link"}]


# -- the leg merge ------------------------------------------------------------------------------
def test_merge_keeps_each_chunks_best_score() -> None:
    main = [(1, 0.9), (2, 0.5), (3, 0.4)]
    other = [(4, 0.8), (2, 0.7), (5, 0.1)]
    assert merge_hits([main, other], 10) == [(1, 0.9), (4, 0.8), (2, 0.7), (3, 0.4), (5, 0.1)]
    assert merge_hits([main, other], 2) == [(1, 0.9), (4, 0.8)]
    assert merge_hits([main], 10) == main
    assert merge_hits([[], []], 5) == []


def test_scaled_merges_put_the_lists_on_one_scale() -> None:
    main = [(1, 12.0), (2, 6.0), (4, 3.0)]
    lex = [(3, 3.0), (1, 1.5)]
    assert merge_hits([main, lex], 10) == [(1, 12.0), (2, 6.0), (4, 3.0), (3, 3.0)]
    assert merge_hits([main, lex], 10, scale="best") == [(1, 1.0), (3, 1.0), (2, 0.5),
                                                         (4, 0.25)]
    z = dict(merge_hits([main, lex], 10, scale="z"))
    assert z[3] == 1.0 and z[1] > 1.0 > 0 > z[2]  # deviations from each list's own mean


class KeywordStore:
    """Stands in for the keyword index: fixed BM25 hits per first query term."""

    def __init__(self, hits: dict[str, list[tuple[int, float]]]) -> None:
        self.hits = hits
        self.asked: list[str] = []

    def analyse(self, text: str) -> list[str]:
        return text.split()

    def search_any(self, terms: Sequence[str], phrases: Sequence[Sequence[str]], k: int,
                   filters: Filters) -> list[tuple[int, float]]:
        self.asked.append(" ".join(terms))
        return self.hits.get(terms[0], [])[:k]


def test_lex_sub_queries_join_the_keyword_leg() -> None:
    engine = SearchEngine.__new__(SearchEngine)  # only the keyword legs
    store = KeywordStore({"show": [(1, 4.0), (2, 2.0)], "embed": [(7, 9.0), (2, 4.5)]})
    engine.whoosh = store  # type: ignore[assignment]
    alone = engine.expanded_keyword_hits("show page", [], 10, Filters())
    assert alone == [(1, 4.0), (2, 2.0)] and store.asked == ["show page"]
    merged = engine.expanded_keyword_hits("show page", ["embed"], 10, Filters())
    assert merged == [(7, 9.0), (2, 4.5), (1, 4.0)]  # one index: BM25 scores on one scale
    assert store.asked[1:] == ["show page", "embed"]


class FakeQueryEmbedder:
    """A deterministic fake for unit tests: a text's vector is fixed by its first word."""

    fingerprint = "fake"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed_query(self, text: str) -> np.ndarray:
        self.seen.append(text)
        return np.full(4, float(len(text.split()[0])), dtype=np.float32)


def test_vec_and_hyde_sub_queries_join_the_semantic_leg() -> None:
    engine = SearchEngine.__new__(SearchEngine)
    engine.embedder = FakeQueryEmbedder()  # type: ignore[assignment]
    searches = (SubQuery("lex", "embed"), SubQuery("vec", "paraphrase here"),
                SubQuery("hyde", "A  passage\nthat answers"))
    extra = engine.extra_vectors(searches)
    assert len(extra) == 2  # lex is for the keyword leg only
    assert engine.embedder.seen == ["paraphrase here", "A passage that answers"]  # type: ignore[attr-defined]
    found = {10.0: [(1, 0.6), (2, 0.5)], 20.0: [(3, 0.7), (1, 0.65)]}

    def semantic(vec: np.ndarray, k: int, filters: Filters) -> list[tuple[int, float]]:
        return found[float(vec[0])][:k]

    engine._semantic = semantic  # type: ignore[method-assign]
    main = np.full(4, 10.0, dtype=np.float32)
    assert engine._semantic_all(main, (), 10, Filters()) == [(1, 0.6), (2, 0.5)]
    assert engine._semantic_all(main, (np.full(4, 20.0, dtype=np.float32),), 10,
                                Filters()) == [(3, 0.7), (1, 0.65), (2, 0.5)]


def test_the_daemons_search_handler_passes_the_sub_queries_on() -> None:
    import asyncio

    from ragd.daemon.ipc.protocol import parse_params
    from ragd.daemon.runtime import handlers

    asked: list[SearchRequest] = []

    def search(req: SearchRequest) -> dict[str, Any]:
        asked.append(req)
        return {"results": []}

    engine = SimpleNamespace(resolve_collection=lambda name: None, search=search)

    class Daemon:
        async def _ready(self) -> Any:
            return SimpleNamespace(search_engine=engine)

    params = parse_params("search", {"query": "q", "searches": [
        {"type": "hyde", "query": "A passage."}]}).model_dump()
    asyncio.run(handlers.search(Daemon(), params, None))  # type: ignore[arg-type]
    assert asked[0].searches == (SubQuery("hyde", "A passage."),)


def test_an_unknown_source_type_is_an_error_that_lists_the_known_ones() -> None:
    """Issue 37: `source_type="notes"` answered an empty list, which reads as "no match"."""
    from ragd.daemon.search.params import SOURCE_TYPES

    engine: Any = SimpleNamespace(resolve_collection=lambda name: None)
    assert build_request(engine, query="q", source_type=" PDF ").filters.source_type == "pdf"
    assert build_request(engine, query="q", source_type="").filters.source_type is None
    with pytest.raises(InvalidArgument) as bad:
        build_request(engine, query="q", source_type="notes")
    assert "source_type" in str(bad.value) and "'notes'" in str(bad.value)
    assert all(t in bad.value.hint for t in ("markdown", "email", "commit", "rss", "pdf"))
    # Every type a kind of source really writes is known (the formats' and the others').
    assert {"markdown", "txt", "pdf", "epub", "email", "code", "commit", "rss", "opml",
            "image"} <= set(SOURCE_TYPES)
