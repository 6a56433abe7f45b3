"""A note's opening behind chunks that say nothing (decision 0039): how many first body chunks
of a note hold only badges, a banner, comments or markup."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from ragd.daemon.runtime.app import App
from ragd.daemon.stores import boilerplate
from tests.daemon.search.synced_app import fused_legs, source_of, synced_app

BADGES = ("![GitHub all releases](https://img.shields.io/github/downloads/a/b/total?style=x)\n"
          "![GitHub Repo stars](https://img.shields.io/github/stars/a/b?style=x)")
COMMENTS = "%% ----- Badges ----- %%\n\n%% ----- Do not edit this section ----- %%"
BANNER = "![[banner.png]]\n<br>"
PROSE = "# Double row toolbar\n\nAdds a second row to the toolbar on mobile devices."


def catalog(notes: dict[int, list[str]]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE chunks (source_id INTEGER, ordinal INTEGER, text TEXT)")
    for source_id, texts in notes.items():
        db.execute("INSERT INTO chunks VALUES (?, -1, ?)", (source_id, "aliases: x"))
        db.executemany("INSERT INTO chunks VALUES (?, ?, ?)",
                       [(source_id, n, t) for n, t in enumerate(texts)])
    return db


def test_chunks_that_only_show_or_hide_lead_to_the_opening() -> None:
    db = catalog({1: [BADGES, COMMENTS, PROSE, "more"],  # obsidian-hub's plugin notes
                  2: [PROSE, BADGES],  # a note that says something first
                  3: [BANNER, PROSE],
                  4: [BADGES] * 6,  # nothing to read at all: looked for only so far
                  5: ["`![not an image](x)` in code", BADGES]})
    assert boilerplate.quiet_leads(db, [1, 2, 3, 4, 5, 6]) == {1: 2, 3: 1,
                                                               4: boilerplate.MAX_LEAD}


def test_no_sources_no_query() -> None:
    assert boilerplate.quiet_leads(catalog({}), []) == {}


# Plugin ids that say nothing of what the plugin does: only the description tells.
PLUGINS = {
    "kestrel": "Adds a second row to the toolbar on mobile devices, allowing for "
                          "more quick access buttons.",
    "juniper": "Shows the remaining battery charge of your laptop in the status bar.",
    "quartzline": "Renders go game positions from a code block written in SGF notation.",
    "mossbank": "Converts miles, pounds and degrees into metric units inline.",
    "tidewater": "Colours each sentence by its length so you can hear your prose.",
}


def plugin_note(plugin: str, description: str) -> str:
    """An obsidian-hub plugin note: badges and editor comments first, then what it does."""
    badges = "   \n".join(
        f"![{label}](https://img.shields.io/github/{kind}/someone/{plugin}/total?color=573E7A"
        f"&logo=github&style=for-the-badge&label={label.replace(' ', '%20')})"
        for label, kind in [("GitHub all releases", "downloads"),
                            ("GitHub manifest version", "manifest-json/v"),
                            ("GitHub issues by-label", "issues"),
                            ("GitHub Repo stars", "stars")])
    return (f"---\nplugin-id: {plugin}\npublish: true\n---\n\n%% ----- Badges ----- %%\n\n"
            f"{badges}\n\n%% ----- Badges ----- %%\n\n%% ----- Do not edit this section ----- %%"
            f"\n\n# {plugin}\n\nPlugin ID: `{plugin}`\nLinks: [GitHub repository]"
            f"(https://github.com/someone/{plugin}) or [<button id=HH>Open in Obsidian</button>]"
            f"(obsidian://show-plugin?id={plugin})\nDeveloped by: [[someone]]\n\n{description}\n\n"
            "%% ----- Do not edit anything above this line ----- %%\n")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, real_embedder: Any) -> Iterator[App]:
    root = tmp_path_factory.mktemp("openings") / "Vault"
    (root / ".obsidian").mkdir(parents=True)
    for plugin, description in PLUGINS.items():
        (root / f"{plugin}.md").write_text(plugin_note(plugin, description), encoding="utf-8")
    (root / "Garden.md").write_text("# Garden\n\nWater the tomatoes at dusk.\n", encoding="utf-8")
    with synced_app(root, real_embedder) as a:
        yield a


@pytest.mark.slow
def test_the_note_legs_read_the_description_behind_the_badges(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    battery = source_of(app, "juniper.md")
    rows = sorted((r for r in app.catalog.chunks_by_id(sorted(app.catalog.all_chunk_ids()))
                   .values() if r.source_id == battery and r.ordinal >= 0),
                  key=lambda r: r.ordinal)
    # The premise: the note's first chunk is its badges, the description comes later.
    assert "img.shields.io" in rows[0].text
    opening = next(r for r in rows if "remaining battery charge" in r.text)
    assert opening.ordinal > 0
    assert app.catalog.quiet_leads([battery]) == {battery: opening.ordinal}

    legs, _ = fused_legs(app, "how much charge my laptop has left", monkeypatch)
    assert [n for n, _ in legs["note"]][0] == battery  # by meaning, from the description
    legs, _ = fused_legs(app, "remaining battery charge", monkeypatch)
    assert battery in {n for n, _ in legs["keyword_note"]}  # by its words
