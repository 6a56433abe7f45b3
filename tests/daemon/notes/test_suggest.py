"""Link suggestions a person would accept (decision 0046): hubs do not top every list, notes
already linked stay out, the reason names the sections that matched, and ``similarity`` is the
best section pair's cosine that ``min_similarity`` filters on. In process, real model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from vault_fixtures import write_vault

from ragd.daemon.notes import reading, suggest
from ragd.daemon.runtime.app import App
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths
from ragd.daemon.stores import links

# Every note of the vault links to Hub, as every help page links its settings page; the
# notes under New/ link nothing yet.
NOTES = {
    "Hub.md": "# Hub\n\nThe index of this vault: conventions, settings and where things go.\n",
    "Baking/Sourdough.md": "# Sourdough\n\n## Levain\n\nFeed the levain with flour and water "
                           "every day; a ripe levain doubles and smells sour.\n\n## Bake\n\n"
                           "Bake the loaf at 250 degrees in a covered pot.\n\n[[Hub]]\n",
    "Baking/Rye bread.md": "# Rye bread\n\n## Dough\n\nRye flour, water and a spoon of ripe "
                           "levain; rye dough ferments fast and stays sticky.\n\n"
                           "[[Hub]] [[Sourdough]]\n",
    "Baking/Focaccia.md": "# Focaccia\n\n## Dough\n\nFlour, water, olive oil and a little "
                          "yeast, dimpled with fingers before baking.\n\n[[Hub]] [[Sourdough]]\n",
    "Garden/Tomatoes.md": "# Tomatoes\n\n## Planting\n\nPlant tomatoes after the last frost, "
                          "deep, in rich soil, and stake them.\n\n[[Hub]] [[Compost]]\n",
    "Garden/Compost.md": "# Compost\n\n## Heap\n\nLayer green kitchen scraps and brown "
                         "leaves, keep the heap damp and turn it every week.\n\n[[Hub]]\n",
    "Garden/Beans.md": "# Beans\n\n## Sowing\n\nSow climbing beans by poles once the soil is "
                       "warm; they feed the soil with nitrogen.\n\n[[Hub]] [[Compost]]\n",
    "Bikes/Tyres.md": "# Tyres\n\n## Pressure\n\nPump road tyres to six bar, check them for "
                      "cuts and replace a worn tread.\n\n[[Hub]]\n",
    "Bikes/Chain.md": "# Chain\n\n## Cleaning\n\nDegrease the bicycle chain, then oil each link "
                      "and wipe off the rest.\n\n[[Hub]] [[Tyres]]\n",
    "New/Bread log.md": "# Bread log\n\n## Tuesday\n\nMy levain doubled overnight after I fed "
                        "the starter flour and water.\n\n## Saturday\n\nBaked the loaf in the "
                        "covered pot; the crust was dark and sour.\n",
    "New/Garden plan.md": "# Garden plan\n\n## Spring\n\nAfter the last frost: tomatoes in "
                          "the south bed, beans by the fence, scraps onto the heap.\n",
    "New/Ride notes.md": "# Ride notes\n\n## Sunday ride\n\nA long ride; the chain squeaked "
                         "and the front tyre lost pressure.\n",
}
NEW = ("New/Bread log.md", "New/Garden plan.md", "New/Ride notes.md")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, real_embedder: Any) -> Iterator[App]:
    root = tmp_path_factory.mktemp("suggest")
    vault = write_vault(root / "vault", NOTES)
    paths = resolve_paths({"RAGD_HOME": str(root / "home")})
    config = load_config(paths, {"obsidian.vaults": [str(vault)]}, env={},
                         write_default=False)
    with App(paths, config, embedder=real_embedder) as a:
        a.sync_all()
        while a.indexer.embed_some():
            pass
        yield a


def ask(app: App, path: str, **options: Any) -> list[dict[str, Any]]:
    coll = app.collection("obsidian")
    row = reading.source_row(app.catalog, coll, path)
    assert row is not None, path
    params: dict[str, Any] = {"n": 10, "min_similarity": 0.0, "exclude_current": True,
                              "exclude_linked": True, "folder": None, "tags": ()}
    params.update(options)
    return suggest.suggestions(app.catalog, app.faiss, app.embedder.fingerprint, coll,
                               reading.resolver(app.catalog, coll), row, **params)


def test_a_hub_linked_from_everywhere_does_not_top_every_list(app: App) -> None:
    # Every alike note links Hub: counted as they come, its votes would put it first on
    # every list; weighed by its IDF it does not come near the top.
    for path, topic in zip(NEW, ("Baking/", "Garden/", "Bikes/"), strict=True):
        got = [s["path"] for s in ask(app, path)]
        assert got[0].startswith(topic), (path, got)
        assert "Hub.md" not in got[:3], (path, got)


def test_notes_already_linked_and_the_note_itself_are_left_out(app: App) -> None:
    got = [s["path"] for s in ask(app, "Baking/Rye bread.md")]
    assert got and not {"Hub.md", "Baking/Sourdough.md", "Baking/Rye bread.md"} & set(got)
    again = [s["path"] for s in ask(app, "Baking/Rye bread.md", exclude_linked=False)]
    assert "Baking/Sourdough.md" in again[:3]
    mine = ask(app, "Baking/Rye bread.md", exclude_current=False)
    assert mine[0]["path"] == "Baking/Rye bread.md" and mine[0]["similarity"] == 1.0


def test_the_reason_names_the_sections_that_matched(app: App) -> None:
    top = ask(app, "New/Bread log.md")[0]
    assert top["path"] == "Baking/Sourdough.md"
    assert top["section"] in ("Levain", "Bake")
    assert top["suggested_link"] == f"[[Sourdough#{top['section']}]]"
    assert f"its section \"Sourdough > {top['section']}\"" in top["reason"]
    assert "this note's \"Bread log > Tuesday\"" in top["reason"] or \
        "this note's \"Bread log > Saturday\"" in top["reason"]
    # Rye bread and Focaccia, alike to this note, both link Sourdough.
    assert "notes like this one link to it" in top["reason"]


def test_a_name_in_the_text_is_evidence_and_said(app: App) -> None:
    got = {s["path"]: s for s in ask(app, "New/Garden plan.md")}
    assert "this note names it (\"Tomatoes\")" in got["Garden/Tomatoes.md"]["reason"]
    assert "Garden/Tomatoes.md" in list(got)[:3]


def test_similarity_is_the_best_section_pairs_cosine_and_min_similarity_filters_it(
        app: App) -> None:
    got = ask(app, "New/Ride notes.md")
    assert got and all(0.0 <= s["similarity"] <= 1.0 for s in got)
    cat, fp = app.catalog, app.embedder.fingerprint
    coll = app.collection("obsidian")

    def vectors(path: str) -> np.ndarray:
        row = reading.source_row(cat, coll, path)
        with cat.reading() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM chunks WHERE source_id=?",
                                            (row["id"],))]
        found = cat.chunk_vectors(fp, ids)
        return np.stack([found[i] for i in ids])

    mine = vectors("New/Ride notes.md")
    for s in got:
        cosine = float(np.max(mine @ vectors(s["path"]).T))
        assert s["similarity"] == pytest.approx(max(0.0, cosine), abs=1e-3), s["path"]
    cut = sorted(s["similarity"] for s in got)[len(got) // 2]
    kept = ask(app, "New/Ride notes.md", min_similarity=cut)
    assert kept and all(s["similarity"] >= cut for s in kept)
    assert {s["path"] for s in kept} == {s["path"] for s in got if s["similarity"] >= cut}


def test_folder_filter_holds_for_notes_the_link_graph_brings(app: App) -> None:
    got = ask(app, "New/Bread log.md", folder="Garden")
    assert got and all(s["path"].startswith("Garden/") for s in got)


# -- pure parts -------------------------------------------------------------------------------
def test_votes_of_alike_notes_are_weighed_by_idf() -> None:
    # Notes 1..4 all link the hub 9; notes 1 and 2 also link 7, which nobody else links.
    out = {1: frozenset({9, 7}), 2: frozenset({9, 7}), 3: frozenset({9}), 4: frozenset({9}),
           5: frozenset({9})}
    into: dict[int, set[int]] = {}
    for s, ts in out.items():
        for t in ts:
            into.setdefault(t, set()).add(s)
    graph = links.Graph(out, {t: frozenset(v) for t, v in into.items()})
    ev = suggest.graph_evidence(graph, 0, {1: 0.9, 2: 0.8, 3: 0.2}, n_notes=10)
    # Every alike note links the hub (a full share of the votes), but half the vault links
    # it: the target only alike notes link comes first.
    assert ev.vote[7] > 1.5 * ev.vote[9]
    assert ev.voters[7] == [1, 2]
    assert suggest.idf(graph.in_degree(8), 10) == pytest.approx(np.log(11) / np.log(12))
    assert suggest.idf(10, 10) < 0.02  # what every note has says nothing


def test_coupling_and_backlinks() -> None:
    # Note 0 links 5; note 1 also links 5, and 6; note 6 links back to 0, and so does the
    # index 7, which links every note.
    out = {0: frozenset({5}), 1: frozenset({5, 6}), 6: frozenset({0}),
           7: frozenset({0, 1, 2, 3, 4, 5, 6})}
    into: dict[int, set[int]] = {}
    for s, ts in out.items():
        for t in ts:
            into.setdefault(t, set()).add(s)
    graph = links.Graph(out, {t: frozenset(v) for t, v in into.items()})
    ev = suggest.graph_evidence(graph, 0, {}, n_notes=8)
    # 1 and the index link where 0 links (5); both link 6, which comes first.
    assert max((t for t in ev.coupling if t != 0), key=ev.coupling.__getitem__) == 6
    assert set(ev.backlinks) == {6, 7}
    assert ev.backlinks[6] > 3 * ev.backlinks[7]  # an index's link back says little


@pytest.mark.parametrize(("text", "names", "expected"), [
    ("plant the tomatoes after frost", ["Tomatoes"], ["Tomatoes"]),
    ("open the command palette and type", ["Command palette", "Type"],
     ["Command palette", "Type"]),
    ("created 2023-09-12 at noon", ["2023-09-12"], []),  # a date names nothing
    ("tomatoey soup", ["Tomato"], []),  # whole words only
    ("an ox", ["ox"], []),  # too short to mean it
    ("see the obsidian sync page", ["Obsidian  Sync", "Sync"], ["Obsidian  Sync", "Sync"]),
    ("github.com/lucasmelin/red-pen", ["lucasmelin"], ["lucasmelin"]),
])
def test_a_mention_is_a_whole_name(text: str, names: list[str], expected: list[str]) -> None:
    assert suggest.names_in(text, names) == expected


def test_a_name_said_everywhere_counts_less_than_a_rare_one() -> None:
    texts = [f"note {i} about github and more" for i in range(99)] + ["lucasmelin wrote it"]
    freq = suggest.NameFrequency(texts, n_notes=100)
    assert freq.idf("lucasmelin") > 0.7 > 0.1 > freq.idf("GitHub")
    said = "a plugin by lucasmelin on github"
    assert freq.mention(said, ["GitHub"])[1] == "GitHub"
    assert freq.mention(said, ["Lucas Melin", "lucasmelin"]) == (freq.idf("lucasmelin"),
                                                                 "lucasmelin")
    assert freq.mention(said, ["Nobody"]) == (0.0, "")


def test_mention_text_leaves_out_links_and_property_keys() -> None:
    chunks = [{"text": "aliases: Start\nstatus: draft", "ordinal": -1},
              {"text": "See [[Search]] and the Tags page.", "ordinal": 0}]
    said = suggest.mention_text(chunks)
    assert "aliases" not in said and "start" in said and "search" not in said
    assert "the tags page" in said


def test_the_link_graph_resolves_each_pair_once(tmp_path: Path) -> None:
    import sqlite3

    db = sqlite3.connect(tmp_path / "g.sqlite")
    db.execute("CREATE TABLE note_links (source_id INTEGER, chunk_id INTEGER, collection_id"
               " INTEGER, kind TEXT, target TEXT, heading TEXT, alias TEXT, key TEXT)")
    rows = [(1, "B", "link"), (1, "b#Part", "link"), (1, "B", "embed"), (2, "A", "link"),
            (2, "Nowhere", "link"), (2, "Two", "link"), (3, "B", "link")]
    db.executemany("INSERT INTO note_links VALUES (?, 0, 7, ?, ?, '', '', '')",
                   [(s, k, t.partition("#")[0]) for s, t, k in rows])
    res = links.Resolver([links.NoteName(1, "A.md"), links.NoteName(2, "Two.md"),
                          links.NoteName(3, "B.md")])
    graph = links.graph(db, 7, res)
    assert graph.out == {1: frozenset({3}), 2: frozenset({1})}  # no self-link, none lost
    assert graph.in_degree(3) == 1 and graph.in_degree(1) == 1 and graph.in_degree(2) == 0
