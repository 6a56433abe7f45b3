"""A leg's sure hit survives fusion (issue 22): a word that occurs in one note only is found by
hybrid search near the top, even when the semantic legs prefer notes holding look-alike words."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search import fusion
from ragd.daemon.search.engine import SearchRequest
from tests.daemon.search.synced_app import synced_app

pytestmark = pytest.mark.slow

TOPICS = ["sourdough starter feeding", "bicycle chain maintenance", "tax return checklist",
          "houseplant watering schedule", "marathon training plan", "kitchen renovation budget",
          "guitar chord progressions", "birdwatching at the lake", "weekly meal planning",
          "home network setup", "reading list for winter", "camping gear inventory"]


def write_lookalike_vault(root: Path) -> Path:
    """Ordinary notes, five short notes made of look-alike nonsense words, and one long note
    that holds the rare word once, deep in unrelated text."""
    root.mkdir(parents=True)
    (root / ".obsidian").mkdir()
    for i, topic in enumerate(TOPICS):
        (root / f"Note {i}.md").write_text(
            f"# {topic.title()}\n\nNotes on {topic}. " + f"Some thoughts about {topic}. " * 20,
            encoding="utf-8")
    for n in (1, 2, 3, 4, 5):
        word = f"zqxfresh{n}vortex"
        (root / f"Lookalike {n}.md").write_text(f"{word} {word}\n\n{word} zqx vortex fresh\n",
                                                encoding="utf-8")
    body = "\n\n".join(f"The quarterly review covered {t} in some detail." for t in TOPICS)
    (root / "Quarterly review.md").write_text(
        f"# Quarterly review\n\n{body}\n\nReference code zqxfresh6vortex for the archive.\n\n"
        f"{body}\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, real_embedder: Any) -> Iterator[App]:
    with synced_app(write_lookalike_vault(tmp_path_factory.mktemp("sure") / "Vault"),
                    real_embedder) as a:
        yield a


def titles(app: App, query: str, mode: str) -> list[str]:
    req = SearchRequest(query=query, mode=mode, top_k=10, filters=Filters())
    return [r["title"] for r in app.search_engine.search(req)["results"]]


@pytest.mark.parametrize("query", ["zqxfresh6vortex", "the archive reference zqxfresh6vortex"])
def test_a_word_in_one_note_keeps_that_note_in_the_top_five(app: App, query: str) -> None:
    assert titles(app, query, "keyword")[0] == "Quarterly review"
    assert "Quarterly review" in titles(app, query, "hybrid")[:5]


def test_without_the_guard_the_lookalikes_bury_it(app: App, monkeypatch: pytest.MonkeyPatch
                                                  ) -> None:
    """The case is hard: the semantic legs rank the look-alikes first, and fusion alone lets
    them push the keyword leg's only hit down (so the test above can fail)."""
    semantic = titles(app, "zqxfresh6vortex", "semantic")
    assert all(t.startswith("Lookalike") for t in semantic[:5])
    monkeypatch.setattr(fusion, "SURE_PLACE", 10_000)
    monkeypatch.setattr(fusion.keep_sure, "__defaults__", (10_000,))
    engine = app.search_engine  # and without the rare-word rule, which would lift it too
    monkeypatch.setattr(engine, "settings", dataclasses.replace(engine.settings,
                                                                rare_first=False))
    assert "Quarterly review" not in titles(app, "zqxfresh6vortex", "hybrid")[:5]


def _answer(app: App, query: str, mode: str) -> list[dict[str, Any]]:
    req = SearchRequest(query=query, mode=mode, top_k=10, filters=Filters())
    return list(app.search_engine.search(req)["results"])


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
def test_score_never_rises_down_the_list(app: App, mode: str) -> None:
    """The lifted sure hit sits above notes the fusion scored higher: it takes their score,
    so rank and score agree (issue 36)."""
    for query in ("zqxfresh6vortex", "the archive reference zqxfresh6vortex",
                  "watering plants", "a plan for the weekly meals"):
        scores = [r["score"] for r in _answer(app, query, mode)]
        assert scores == sorted(scores, reverse=True), (query, scores)


def test_the_lifted_hit_takes_the_score_of_the_notes_it_passed(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    # The guard of decision 0027 lifts it to rank 3, at the score of the notes it passed ...
    results = _answer(app, "zqxfresh6vortex", "hybrid")
    place = [r["title"] for r in results].index("Quarterly review")
    assert place > 0, "the look-alikes are fused above it: the guard lifts it to rank 3"
    assert results[place]["score"] == results[place - 1]["score"]
    # ... and the rare-word rule (search.rare_first, issue 36) puts it first.
    engine = app.search_engine
    monkeypatch.setattr(engine, "settings", dataclasses.replace(engine.settings,
                                                                rare_first=True))
    assert _answer(app, "zqxfresh6vortex", "hybrid")[0]["title"] == "Quarterly review"


def test_similarity_is_the_cosine_of_the_chunk_to_the_query(app: App,
                                                            real_embedder: Any) -> None:
    """001's semantic_search similarity (and any threshold on it) is the cosine, not a
    number derived from the rank: an unrelated query scores low, a close one high."""
    import numpy as np

    close = _answer(app, "Notes on houseplant watering schedule", "semantic")
    far = _answer(app, "quantum chromodynamics lattice gauge", "semantic")
    q = real_embedder.embed_query("Notes on houseplant watering schedule")
    (vec,) = app.catalog.chunk_vectors(real_embedder.fingerprint,
                                       [close[0]["metadata"]["chunk_id"]]).values()
    sim = [r["metadata"]["similarity"] for r in close + far]
    assert sim[0] == round(float(np.dot(vec, q)), 4)
    assert sim[0] > far[0]["metadata"]["similarity"] + 0.1, (close[0], far[0])
    assert all(0.0 <= x <= 1.0 for x in sim)
    assert all("similarity" not in r["metadata"] for r in _answer(app, "watering", "keyword"))
