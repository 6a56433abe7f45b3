"""The data helpers of bench/quality.py: notes from SciFact documents, known-item files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bench.quality import load_known_items, note_text, write_notes


def test_note_text_keeps_any_title_as_valid_frontmatter() -> None:
    title = 'A "quoted": title\nwith # and: colons'
    text = note_text(title, "  The abstract.  ")
    head, body = text.split("\n---\n", 1)
    assert yaml.safe_load(head.removeprefix("---\n"))["title"] == " ".join(title.split())
    assert body.strip() == "The abstract."


def test_write_notes_leaves_unchanged_files_and_removes_stale_ones(tmp_path: Path) -> None:
    write_notes({"1": ("T1", "x"), "2": ("T2", "y")}, tmp_path)
    before = (tmp_path / "1.md").stat().st_mtime_ns
    write_notes({"1": ("T1", "x")}, tmp_path)
    assert (tmp_path / "1.md").stat().st_mtime_ns == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.md"]


def test_load_known_items_reads_rows_and_the_vault_line(tmp_path: Path) -> None:
    f = tmp_path / "k.tsv"
    f.write_text("# comment\n# vault: my-vault\n\nwhere is x\tA/x.md\n", encoding="utf-8")
    rows, vault = load_known_items(f)
    assert rows == [("where is x", "A/x.md")] and vault == "my-vault"


def test_load_known_items_rejects_a_malformed_line(tmp_path: Path) -> None:
    f = tmp_path / "k.tsv"
    f.write_text("no tab here\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="expected"):
        load_known_items(f)


def test_the_shipped_example_names_notes_of_its_vault() -> None:
    from bench.common import CORPUS
    from bench.quality import DEFAULT_KNOWN_ITEMS

    rows, vault = load_known_items(DEFAULT_KNOWN_ITEMS)
    assert vault == "obsidian-help-en" and len(rows) >= 30
    assert len({e for _, e in rows}) == len(rows)
    corpus = CORPUS / "vault" / vault
    if corpus.is_dir():  # the shared corpus is optional for this test
        assert all((corpus / e).is_file() for _, e in rows)
