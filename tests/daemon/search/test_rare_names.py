"""A rare name beats look-alike meaning in a library of a few large books (issue 36 item 4):
the one book that names a people ranks above a book about customs of peoples that never names
it, although the semantic and note legs prefer the latter; and ``score`` falls down the list."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from concept_fixtures import book_text, write_epub

from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search.engine import SearchRequest
from tests.daemon.search.synced_app import synced_app

pytestmark = pytest.mark.slow

QUERY = "the customs and laws of the Houyhnhnms"
CUSTOMS = "\n".join(
    f"## Chapter {n}: customs of distant peoples\n"
    + " ".join(f"The customs and laws of the {p} people shape their households and their "
               f"festivals; travellers describe the traditions of the {p} nation." for p in
               ("mountain", "river", "island", "desert", "forest", "coastal"))
    for n in range(1, 7))


def write_library(vault: Path) -> Path:
    """Five generated books, one about customs of peoples that never names the Houyhnhnms,
    and one generated book that names them once, in passing."""
    (vault / ".obsidian").mkdir(parents=True)
    for seed in range(4):  # books that speak of customs and laws, as most do
        text = book_text(seed).replace("\n## Chapter 2", "\nThe customs and laws of the "
                                       "town were old.\n## Chapter 2", 1)
        write_epub(vault / f"Book {seed}.epub", f"Book {seed}", text)
    write_epub(vault / "Peoples.epub", "Customs of Distant Peoples", CUSTOMS)
    voyages = book_text(11).replace("\n## Chapter 2", "\nThe Houyhnhnms keep horses as "
                                    "masters of the island.\n## Chapter 2", 1)
    assert "Houyhnhnms" in voyages
    write_epub(vault / "Voyages.epub", "Voyages to Remote Nations", voyages)
    return vault


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, real_embedder: Any) -> Iterator[App]:
    with synced_app(write_library(tmp_path_factory.mktemp("rare") / "Vault"),
                    real_embedder, **{"search.rare_first": True}) as a:
        yield a


def titles(app: App, mode: str = "hybrid") -> list[str]:
    req = SearchRequest(query=QUERY, mode=mode, top_k=10, filters=Filters())
    return [r["title"] for r in app.search_engine.search(req)["results"]]


def test_the_book_that_names_them_ranks_first(app: App) -> None:
    answer = app.search_engine.search(SearchRequest(query=QUERY, top_k=10, filters=Filters()))
    results = answer["results"]
    assert results[0]["title"] == "Voyages to Remote Nations", [r["title"] for r in results]
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)


def test_without_the_rule_meaning_wins(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """The case is hard: the semantic leg prefers the customs book (so the test above can
    fail), and without the rule hybrid puts it first."""
    assert titles(app, "semantic")[0] == "Customs of Distant Peoples"
    engine = app.search_engine
    monkeypatch.setattr(engine, "settings", dataclasses.replace(engine.settings,
                                                                rare_first=False))
    assert titles(app)[0] != "Voyages to Remote Nations"
