"""bench/template_lines.py's pure parts: which lines a rule calls template lines, note ranks."""

from __future__ import annotations

import numpy as np

from bench.template_lines import _label, kept_lines, mrr, note_ranks, shared_lines, without_heading


def test_a_label_is_one_to_four_words_before_a_colon_and_a_value() -> None:
    assert _label("Plugin ID: `cloze`") == "plugin id"
    assert _label("- Mobile compatible: Yes") == "mobile compatible"
    assert _label("Note: see below") == "note"
    assert _label("https://example.com") is None  # no space after the colon
    assert _label("Time: ") is None  # no value
    assert _label("this is a long sentence that ends: with a colon") is None
    assert _label("12:30 lunch") is None


def test_exact_rule_counts_notes_not_lines() -> None:
    texts = {1: "Links: repo\nBody one", 2: "Links: repo\nLinks: repo", 3: "links:   REPO\nx",
             4: "Body one"}
    note_of = {1: "a.md", 2: "b.md", 3: "c.md", 4: "a.md"}
    three = shared_lines(texts, note_of, "exact", 3)
    assert three("Links: repo") and three("LINKS: repo ")  # a, b and c hold it
    assert not three("Body one")  # twice, but both in a.md
    assert not shared_lines(texts, note_of, "exact", 4)("Links: repo")


def test_label_rule_ignores_the_value() -> None:
    texts = {1: "Developed by: ann", 2: "Developed by: bob", 3: "Body: text"}
    note_of = {1: "a.md", 2: "b.md", 3: "c.md"}
    two = shared_lines(texts, note_of, "label", 2)
    assert two("Developed by: someone else")
    assert not two("Body: text")
    assert not two("plain prose")


def test_note_ranks_rank_notes_by_their_best_chunk() -> None:
    vectors = np.array([[1, 0], [0, 1], [0.6, 0.8], [0.8, 0.6]], dtype=np.float32)
    notes = ["a", "b", "b", "c"]
    queries = np.array([[1, 0], [0, 1]], dtype=np.float32)
    # query 1: a (1.0) > c (0.8) > b (0.6); query 2: b (1.0) > c (0.6) > a (0.0)
    assert note_ranks(vectors, notes, queries, ["c", "a"]) == [2, 3]
    assert mrr([1, 2, 11]) == (1 + 0.5 + 0) / 3


def test_heading_rule_drops_the_opening_heading_the_prefix_names() -> None:
    assert without_heading("\n## Sync  settings ##\nBody", ("Guide", "Sync settings")) == [
        "", "Body"]
    assert without_heading("## Other\nBody", ("Guide", "Sync settings")) == ["## Other", "Body"]
    assert without_heading("Body\n## Sync settings", ("Sync settings",)) == [
        "Body", "## Sync settings"]  # not the opening line
    assert without_heading("# Title\nBody", ()) == ["# Title", "Body"]  # no heading path


def test_kept_lines_follow_the_rule() -> None:
    texts = {1: "# A\nLinks: x\nBody", 2: "Links: x\nOther"}
    note_of = {1: "a.md", 2: "b.md"}
    paths: dict[int, tuple[str, ...]] = {1: ("A",), 2: ()}
    assert kept_lines("exact", 2, texts, note_of, paths)(1) == ["# A", "Body"]
    assert kept_lines("heading", 0, texts, note_of, paths)(1) == ["Links: x", "Body"]
    assert kept_lines("heading", 0, texts, note_of, paths)(2) == ["Links: x", "Other"]
