"""Boilerplate leaves the ranking (issue 22 item 6, decision 0026): in a vault where 20 notes
end with the same generated footer (links to each note's own page), a query in the footer's
words is answered by notes, not by footers; a real note is still found first; and the footer
is still found when nothing else holds the query's words."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search.engine import SearchRequest
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths
from ragd.daemon.stores import boilerplate

pytestmark = pytest.mark.slow

TOPICS = ["sourdough starter feeding", "bicycle chain maintenance", "tax return checklist",
          "houseplant watering schedule", "marathon training plan", "kitchen renovation budget",
          "guitar chord progressions", "birdwatching at the lake", "weekly meal planning",
          "home network setup", "reading list for winter", "camping gear inventory",
          "pottery glaze recipes", "chess opening repertoire", "balcony tomato growing",
          "vintage camera repair", "language exchange notes", "road trip itinerary",
          "board game night", "emergency kit checklist"]


def footer(name: str) -> str:
    """obsidian-hub's generated footer: the same words, links to the note's own page."""
    page = name.replace(" ", "%20")
    return ("%% Hub footer: Please don't edit anything below this line %%\n\n"
            "# This note in GitHub\n\n"
            f'<span class="git-footer">[Edit In GitHub](https://github.dev/hub/blob/main/{page}'
            ' "git-hub-edit-note") | '
            f'[Copy this note](https://raw.githubusercontent.com/hub/main/{page} '
            '"git-hub-copy-note") | [Download this vault](https://github.com/hub/archive/'
            'refs/heads/main.zip "git-hub-download-vault") hubfooterzq </span>\n')


def write_footer_vault(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / ".obsidian").mkdir()
    for topic in TOPICS:
        name = f"{topic.title()}.md"
        (root / name).write_text(
            f"# {topic.title()}\n\nNotes on {topic}. " + f"Some thoughts about {topic}. " * 8
            + f"\n\n## Details\n\nMore on {topic}: what worked and what did not.\n\n"
            + footer(name), encoding="utf-8")
    (root / "Editing notes in GitHub.md").write_text(
        "# Editing notes in GitHub\n\nHow I edit a note in GitHub: open the file in the web "
        "editor, change it, copy the note back into the vault, and commit. Downloading the "
        "whole vault as a zip is the other way.\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, shared_models: Path, real_embedder: Any
        ) -> Iterator[App]:
    root = tmp_path_factory.mktemp("boilerplate")
    vault = write_footer_vault(root / "Vault")
    # A module fixture is set up before the per-test RAGD_HOME: give it a home of its own.
    (root / "home" / "data").mkdir(parents=True, mode=0o700)
    (root / "home" / "data" / "models").symlink_to(shared_models, target_is_directory=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGD_HOME", str(root / "home"))
        paths = resolve_paths()
        config = load_config(paths, {"obsidian.vaults": [str(vault)]})
        with App(paths, config, embedder=real_embedder) as a:
            a.sync_all()
            yield a


def results(app: App, query: str, mode: str, top_k: int = 10) -> list[dict[str, Any]]:
    req = SearchRequest(query=query, mode=mode, top_k=top_k, filters=Filters())
    return list(app.search_engine.search(req)["results"])


def footers(found: list[dict[str, Any]]) -> int:
    return sum("hubfooterzq" in r["content"] for r in found)


QUERY = "edit this note in GitHub, copy this note, download this vault"


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_a_query_in_the_footers_words_is_not_answered_by_footers(app: App, mode: str) -> None:
    found = results(app, QUERY, mode)
    assert footers(found) == 0, [(r["title"], r["content"][:40]) for r in found]
    assert found[0]["title"] == "Editing notes in GitHub"


def test_without_the_filter_footers_fill_the_results(app: App,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The case is real (so the test above can fail): the footers take most rows."""
    monkeypatch.setattr(app.search_engine.catalog, "boilerplate", lambda ids: set())
    assert footers(results(app, QUERY, "hybrid")) >= 5
    assert footers(results(app, QUERY, "keyword")) >= 5


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_a_real_note_is_still_found_first(app: App, mode: str) -> None:
    assert results(app, "guitar chord progressions", mode)[0]["title"] == \
        "Guitar Chord Progressions"


def test_the_footer_is_found_when_nothing_else_matches(app: App) -> None:
    assert footers(results(app, "hubfooterzq", "keyword")[:1]) == 1
    # Hybrid ranks the notes holding it; a note shows its footer beside the chunk the
    # semantic leg liked best (which, for a nonsense word, is any).
    found = results(app, "hubfooterzq", "hybrid")
    assert found and footers(found[:4]) >= 1


def test_the_marks_follow_deletes_and_the_threshold(app: App) -> None:
    """The shapes are kept by triggers: fewer than MIN_NOTES notes holding the block make
    it content again."""
    db = app.catalog._db
    rows = db.execute("SELECT c.id, c.source_id FROM chunks c WHERE c.text LIKE"
                      " '%hubfooterzq%' ORDER BY c.id").fetchall()
    assert len(rows) == len(TOPICS)
    ids = [r[0] for r in rows]
    assert app.catalog.boilerplate(ids) == set(ids)
    assert boilerplate.shared(db, ids, min_notes=len(TOPICS) + 1) == set()
    with app.catalog._lock:  # rolled back: the module's other tests see the whole vault
        before = db.execute("SELECT COUNT(*) FROM chunk_shapes").fetchone()[0]
        db.execute("SAVEPOINT probe")
        try:
            db.execute("DELETE FROM chunks WHERE id=?", (ids[0],))
            after = db.execute("SELECT COUNT(*) FROM chunk_shapes").fetchone()[0]
            assert after == before - 1
            assert boilerplate.shared(db, ids, min_notes=len(TOPICS)) == set()
        finally:
            db.execute("ROLLBACK TO probe")
            db.execute("RELEASE probe")
    assert app.catalog.boilerplate(ids) == set(ids)


def test_a_shape_ignores_urls_case_and_spacing() -> None:
    a = "[Edit](https://github.dev/hub/blob/main/A.md \"edit\")  |  Copy"
    b = "[edit](https://github.dev/hub/blob/main/B%20C.md \"edit\") | copy"
    assert boilerplate.shape(a) == boilerplate.shape(b)
    assert boilerplate.shape(a) != boilerplate.shape("[Edit] Paste")


