"""A pasted page as a query: its keyword and phrase legs use a bounded number of terms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragd.daemon.models import Filters
from ragd.daemon.search.engine import MAX_QUERY_TERMS, MAX_QUOTED, SearchEngine


class Recorder:
    """Stands in for the keyword store: splits on spaces and records what it is asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def analyse(self, text: str) -> list[str]:
        return list(dict.fromkeys(text.replace('"', " ").split()))

    def search_any(self, terms: Sequence[str], phrases: Sequence[Sequence[str]], k: int,
                   filters: Filters) -> list[tuple[int, float]]:
        self.calls.append(("any", list(terms), [list(p) for p in phrases]))
        return []

    def search_phrase(self, words: Sequence[str], k: int, filters: Filters
                      ) -> list[tuple[int, float]]:
        self.calls.append(("phrase", list(words)))
        return []


def test_long_queries_keep_their_first_terms_and_phrases() -> None:
    engine = SearchEngine.__new__(SearchEngine)  # only the parts the keyword legs use
    engine.whoosh = Recorder()  # type: ignore[assignment]
    page = " ".join(f"w{i}" for i in range(20_000))
    quoted = " ".join(f'"q{i} r{i}"' for i in range(200))
    engine.keyword_hits(page + " " + quoted, 50, Filters())
    engine.phrase_hits(page, 50, Filters())
    (_, terms, phrases), (_, words) = engine.whoosh.calls  # type: ignore[attr-defined]
    assert terms == [f"w{i}" for i in range(MAX_QUERY_TERMS)]
    assert len(phrases) == MAX_QUOTED and phrases[0] == ["q0", "r0"]
    assert words == terms
    engine.keyword_hits("a short question", 50, Filters())
    assert engine.whoosh.calls[-1][1] == ["a", "short", "question"]  # type: ignore[attr-defined]


def test_an_undecodable_command_line_query_is_made_encodable() -> None:
    from types import SimpleNamespace

    from ragd.daemon.search.params import build_request

    engine = SimpleNamespace(resolve_collection=lambda name: None)
    req = build_request(engine, query="caf\udcc3 menu")  # type: ignore[arg-type]
    assert req.query.encode("utf-8") and req.query.endswith(" menu")
