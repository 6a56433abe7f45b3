"""The keyword note leg (decision 0037): the notes whose opening or properties chunk holds the
query's words, fused beside the note leg that finds the same chunks by meaning."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragd.daemon.runtime.app import App
from ragd.daemon.search import engine as engine_module
from tests.daemon.search.synced_app import fused_legs, source_of, synced_app

pytestmark = pytest.mark.slow

QUERY = "sourdough starter"


def write_vault(root: Path) -> Path:
    """A note that says what it is about in its properties, and a long log that mentions the
    same words only in a later section (a body chunk, not an opening)."""
    root.mkdir(parents=True)
    (root / ".obsidian").mkdir()
    (root / "Starter.md").write_text(
        "---\ndescription: feeding a sourdough starter every morning\n---\n"
        "# Starter\n\nKeep the jar warm and discard half before each feed.\n", encoding="utf-8")
    days = "\n\n".join(
        f"## Day {n}\n\n" + ("The oven ran hot and the crust came out dark and thick. " * 12
                             if n != 4 else "Fed the sourdough starter with rye flour. " * 12)
        for n in range(1, 7))
    (root / "Bakery log.md").write_text(f"# Bakery log\n\nWhat I baked.\n\n{days}\n",
                                        encoding="utf-8")
    (root / "Garden.md").write_text("# Garden\n\nWater the tomatoes at dusk.\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, real_embedder: Any) -> Iterator[App]:
    with synced_app(write_vault(tmp_path_factory.mktemp("kwnote") / "Vault"),
                    real_embedder) as a:
        yield a


def test_the_leg_holds_the_notes_whose_opening_has_the_words(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    legs, weights = fused_legs(app, QUERY, monkeypatch)
    keyword = {n for n, _ in legs["keyword"]}
    starter, log = source_of(app, "Starter.md"), source_of(app, "Bakery log.md")
    assert {starter, log} <= keyword  # both hold the words
    assert [n for n, _ in legs["keyword_note"]] == [starter]  # only one in its opening
    assert weights["keyword_note"] == engine_module.SearchSettings().z_keyword_note_weight > 0


def test_weight_zero_turns_it_off(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = app.search_engine
    monkeypatch.setattr(engine, "settings",
                        dataclasses.replace(engine.settings, z_keyword_note_weight=0.0))
    _, weights = fused_legs(app, QUERY, monkeypatch)
    assert weights["keyword_note"] == 0.0
