"""How bench/query_latency.py composes its index sizes and makes copies distinct."""

from __future__ import annotations

from bench.query_latency import Unit, plan, rotate_words

FULL = [("obsidian-help-en", 1732), ("kepano-obsidian", 103), ("scifact", 10305),
        ("obsidian-hub", 36297)]


def total(units: list[Unit]) -> int:
    return sum(u.chunks for u in units)


def test_small_size_uses_distinct_collections_only() -> None:
    units = plan(10_000, FULL)
    assert [u.name for u in units] == ["obsidian-help-en", "kepano-obsidian", "scifact"]
    assert total(units) == 12_140


def test_sizes_land_near_the_target_with_copies_after_the_distinct_text() -> None:
    for target in (100_000, 1_000_000):
        units = plan(target, FULL)
        assert 0.95 * target <= total(units) <= 1.1 * target
        assert [u.copy for u in units[:4]] == [0, 0, 0, 0]
        assert len({u.name for u in units}) == len(units)


def test_quick_pool_fills_ten_thousand_with_copies() -> None:
    units = plan(10_000, FULL[:2])
    assert 9_500 <= total(units) <= 11_000
    assert units[2].name == "obsidian-help-en-copy001"  # "~" is no valid collection name


def test_rotate_words_keeps_the_words_but_changes_the_text() -> None:
    text = "alpha beta\ngamma  delta"
    assert rotate_words(text, 1) == "beta gamma delta alpha"
    assert sorted(rotate_words(text, 3).split()) == sorted(text.split())
    assert rotate_words(text, 4) != " ".join(text.split())
    assert rotate_words("single", 5) == "single"
