"""A starved note leg reads deeper (decision 0031): when few openings reach the semantic leg's
top hits (long notes whose body chunks fill them), the note leg is read off a deeper semantic
search, so it again holds enough notes to say something."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search import engine as engine_module
from ragd.daemon.search.engine import SearchEngine, SearchRequest
from tests.daemon.search.synced_app import synced_app

pytestmark = pytest.mark.slow

DISHES = ["lentil soup", "mushroom risotto", "tomato curry", "bean chili", "pumpkin stew",
          "leek gratin"]


def write_vault(root: Path) -> Path:
    """Recipes of many sections each: their body chunks, not their openings, fill the
    semantic leg's top hits for a cooking question."""
    root.mkdir(parents=True)
    (root / ".obsidian").mkdir()
    for dish in DISHES:
        sections = "\n\n".join(
            f"## Step {n}\n\n" + f"Simmer the {dish} slowly, stir the pot and taste the "
            f"sauce, then season the {dish} with salt, pepper and fresh herbs. " * 6
            for n in range(1, 7))
        (root / f"{dish.title()}.md").write_text(
            f"# {dish.title()}\n\nA {dish} recipe: how to season its sauce.\n\n{sections}\n",
            encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, real_embedder: Any) -> Iterator[App]:
    # A shallow leg (10 chunks) makes the small vault behave like a big one.
    with synced_app(write_vault(tmp_path_factory.mktemp("noteleg") / "Vault"), real_embedder,
                    **{"search.overfetch": 10}) as a:
        yield a


def note_leg(app: App, monkeypatch: pytest.MonkeyPatch, minimum: int) -> list[list[Any]]:
    """The deeper heads each hybrid search read (empty when it did not read deeper)."""
    monkeypatch.setattr(engine_module, "NOTE_LEG_MIN", minimum)
    seen: list[list[Any]] = []
    original = SearchEngine._deeper_heads

    def spy(self: SearchEngine, *args: Any) -> list[Any]:
        heads = original(self, *args)
        seen.append(heads)
        return heads

    monkeypatch.setattr(SearchEngine, "_deeper_heads", spy)
    req = SearchRequest(query="how do I season the simmering sauce", mode="hybrid", top_k=2,
                        filters=Filters())
    assert len(app.search_engine.search(req)["results"]) == 2
    return seen


def test_a_starved_note_leg_is_read_deeper(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = note_leg(app, monkeypatch, engine_module.NOTE_LEG_MIN)
    assert seen, "the shallow semantic leg held fewer than NOTE_LEG_MIN notes' openings"
    rows = app.catalog.chunks_by_id([c for c, _ in seen[0]])
    assert all(rows[c].ordinal <= 0 for c, _ in seen[0])
    assert len({rows[c].source_id for c, _ in seen[0]}) >= engine_module.NOTE_LEG_MIN


def test_a_full_note_leg_is_left_alone(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    assert note_leg(app, monkeypatch, 0) == []
