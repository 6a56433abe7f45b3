"""A note's properties as a chunk: rendering (pure), and findability with the real model."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from vault_fixtures import write_vault

from ragd.daemon.models import Document
from ragd.daemon.sources.vault import parse_note
from ragd.daemon.text.properties import (
    is_properties,
    properties_chunks,
    render_key,
    render_properties,
)

FILM = """---
categories:
  - "[[Movies]]"
cover: https://example.org/images/poster-tt0083658.jpg
genre:
  - "[[Sci-fi]]"
director:
  - "[[Ridley Scott]]"
cast:
  - "[[Harrison Ford]]"
aliases: [Replicant hunt]
rating: 7
year: 1982
publish: true
cssclasses: [wide]
imdbId: tt0083658
---

"""


def fake_counter(texts: Sequence[str]) -> list[int]:
    """A deterministic stand-in for the tokenizer: words plus two special tokens."""
    return [len(t.split()) + 2 for t in texts]


def parse(rel: str, text: str) -> Document:
    doc = parse_note(rel, text.encode("utf-8"))
    assert isinstance(doc, Document)
    return doc


def test_render_properties_is_readable() -> None:
    doc = parse("Films/Blade Runner.md", FILM)
    text = render_properties(doc)
    assert text.splitlines() == [
        "aliases: Replicant hunt", "categories: Movies", "genre: Sci-fi",
        "director: Ridley Scott", "cast: Harrison Ford", "rating: 7", "year: 1982",
        "imdb id: tt0083658"]
    # Link syntax, image URLs, flags and styling keys are not words anyone searches for.
    assert "[[" not in text and "poster" not in text and "publish" not in text
    assert "wide" not in text and "Blade Runner" not in text  # the title prefixes the chunk
    assert render_key("dateRead") == "date read" and render_key("isbn_13") == "isbn 13"


def test_frontmatter_only_note_gets_a_properties_chunk() -> None:
    doc = parse("Films/Blade Runner.md", FILM)
    chunks = properties_chunks(doc, has_body=False, count_tokens=fake_counter, max_tokens=64)
    assert [c.ordinal for c in chunks] == [-1] and is_properties(chunks[0].ordinal)
    assert chunks[0].embed_text.startswith("Blade Runner\n\n")
    assert "director: Ridley Scott" in chunks[0].text


def test_long_properties_are_split_to_fit() -> None:
    fm = "\n".join(f"key{i}: {' '.join(f'word{i}x{j}' for j in range(20))}" for i in range(12))
    doc = parse("Long.md", f"---\n{fm}\n---\nbody text\n")
    chunks = properties_chunks(doc, has_body=True, count_tokens=fake_counter, max_tokens=64)
    assert len(chunks) > 1 and [c.ordinal for c in chunks] == list(range(-len(chunks), 0))
    assert all(fake_counter([c.embed_text])[0] <= 64 for c in chunks)


def test_when_a_note_gets_no_properties_chunk() -> None:
    # A body and nothing beyond the title: the title already prefixes every body chunk.
    plain = parse("Plain.md", "---\ntitle: Plain\n---\nSome body text.\n")
    assert properties_chunks(plain, has_body=True, count_tokens=fake_counter,
                             max_tokens=64) == []
    # No body and no properties: the title alone, so the note can still be found.
    bare = parse("Ideas/Empty idea.md", "---\n---\n")
    chunks = properties_chunks(bare, has_body=False, count_tokens=fake_counter, max_tokens=64)
    assert [c.text for c in chunks] == ["Empty idea"]


# -- with the real model: every note is findable ---------------------------------------------

NOTES = {
    "Films/Blade Runner.md": FILM,
    "Games/Catan.md": """---
categories: ["[[Board games]]"]
aliases: [Settlers of Catan]
players: 3-4
maker: "[[Kosmos]]"
---
""",
    "Places/Fushimi Inari.md": """---
categories: ["[[Places]]"]
type: ["[[Shrines]]", "[[Parks]]"]
loc: ["[[Kyoto]]", "[[Japan]]"]
---
""",
}


@pytest.fixture
def app(tmp_path: Path, real_embedder: Any) -> Iterator[Any]:
    from ragd.daemon.runtime.app import App
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    vault = write_vault(tmp_path / "Vault")
    write_vault(vault, NOTES)
    paths = resolve_paths()
    with App(paths, load_config(paths, {"obsidian.vaults": [str(vault)]}),
             embedder=real_embedder) as a:
        yield a
        assert a.consistency()["ok"], a.consistency()


def first_title(app: Any, query: str, mode: str = "hybrid") -> str:
    from ragd.daemon.search.engine import SearchRequest

    res = app.search_engine.search(SearchRequest(query=query, mode=mode, top_k=5))
    return str(res["results"][0]["title"]) if res["results"] else ""


@pytest.mark.slow
def test_frontmatter_only_notes_are_found_and_counted(app: Any) -> None:
    from ragd.daemon.cli.main import format_report
    from ragd.daemon.cli.remote import format_status

    report = app.sync_all()[0]
    assert report.indexed == 11 and not report.skipped_files and not report.errors
    assert (report.body_notes, report.metadata_only_notes) == (8, 3)
    assert "8 with body chunks, 3 with properties only" in format_report(report)
    [listed] = app.list_collections()
    assert (listed["body_source_count"], listed["metadata_only_count"]) == (8, 3)
    assert "8 with body chunks, 3 with properties only" in format_status(
        {"collections": [{**listed, "type": "system"}]})
    assert first_title(app, "Blade Runner") == "Blade Runner"  # by title
    assert first_title(app, "Settlers of Catan") == "Catan"  # by alias
    assert first_title(app, "Ridley Scott") == "Blade Runner"  # by a property value
    assert first_title(app, "Ridley Scott", "keyword") == "Blade Runner"
    # By a paraphrase of its properties, sharing no analysed term with the note.
    query = "a sacred site to visit in the old imperial capital"
    shared = set(app.search_engine.analyse(query)) & set(app.search_engine.analyse(
        "Fushimi Inari " + NOTES["Places/Fushimi Inari.md"]))
    assert not shared
    assert first_title(app, query, "semantic") == "Fushimi Inari"
    assert first_title(app, query) == "Fushimi Inari"
