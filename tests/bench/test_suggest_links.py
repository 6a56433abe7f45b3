"""The link-removal bench's cases: which link is taken out, and how (bench/suggest_links.py)."""

from __future__ import annotations

from pathlib import Path

from bench.suggest_links import pick_cases, score, sync_copy, vault_files
from ragd.daemon.stores import links

NOTES = {
    "A.md": "---\nup: \"[[Hub]]\"\n---\n# A\n\nSee [[B|the b note]] and [[B#Part]], ![[C]].\n",
    "B.md": "# B\n\nBack to [[A]].\n",
    "C.md": "# C\n\nNothing.\n",
    "Hub.md": "# Hub\n",
    ".obsidian/app.json": "{}",
}


def _vault(root: Path) -> tuple[links.Resolver, dict[str, set[int]]]:
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    files = list(vault_files(root))
    assert files == ["A.md", "B.md", "C.md", "Hub.md"]  # hidden folders left out
    res = links.Resolver(links.NoteName(i, p) for i, p in enumerate(files))
    # What the index knows: A links B and C (its property link was not read), B links A.
    return res, {"A.md": {1, 2}, "B.md": {0}}


def test_every_link_to_the_drawn_target_goes_and_only_known_links_are_drawn(
        tmp_path: Path) -> None:
    res, known = _vault(tmp_path)
    drawn = {(c.note, c.target): c for seed in range(12)
             for c in pick_cases(tmp_path, res, known, 2, seed, "drop")}
    # C is only embedded, Hub only in properties the index did not read: never drawn.
    assert set(drawn) == {("A.md", "B.md"), ("B.md", "A.md")}
    a = drawn[("A.md", "B.md")].text
    assert "[[B" not in a and "b note" not in a and "![[C]]" in a and "[[Hub]]" in a
    assert drawn[("B.md", "A.md")].text == "# B\n\nBack to .\n"


def test_unwrap_leaves_the_text_a_reader_saw(tmp_path: Path) -> None:
    res, known = _vault(tmp_path)
    cases = [c for seed in range(12) for c in pick_cases(tmp_path, res, known, 2, seed,
                                                          "unwrap") if c.note == "A.md"]
    assert cases[0].text.endswith("See the b note and B, ![[C]].\n")


def test_the_copy_is_written_only_where_it_differs(tmp_path: Path) -> None:
    _vault(tmp_path / "src")
    assert sync_copy(tmp_path / "src", tmp_path / "dst") == 4
    assert sync_copy(tmp_path / "src", tmp_path / "dst") == 0
    (tmp_path / "dst" / "B.md").write_text("changed", encoding="utf-8")
    (tmp_path / "dst" / "Stray.md").write_text("gone", encoding="utf-8")
    assert sync_copy(tmp_path / "src", tmp_path / "dst") == 1
    assert not (tmp_path / "dst" / "Stray.md").exists()


def test_scores() -> None:
    rows = [{"rank": 1}, {"rank": 4}, {"rank": 20}, {"rank": None}]
    assert score(rows) == {"n": 4, "mrr": round((1 + 0.25 + 0.05) / 4, 3), "recall10": 0.5}
