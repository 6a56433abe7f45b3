"""What reading view shows of a note (decision 0038): the text the embedding model is given."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragd.daemon.text.reading import hidden, reading


def shown(text: str) -> str:
    return reading(text, hidden(text))


@pytest.mark.parametrize(("text", "expected"), [
    ("This is an %%inline%% comment.", "This is an  comment."),
    ("before\n%%\nblock\ncomment\n%%\nafter", "before\n\nafter"),
    ("a <!-- hidden --> b", "a  b"),
    ("[GitHub repository](https://github.com/a/b) or [x](<a b.md>)", "GitHub repository or x"),
    ('[t](https://e.org/a_(b) "title") end', "t end"),
    ("![GitHub Repo stars](https://img.shields.io/github/stars/a/b?style=for-the-badge)",
     "GitHub Repo stars"),
    ("[![badge](https://img.shields.io/x)](https://github.com/a)", "badge"),
    ("Mobile compatible: [[Mobile-compatible plugins|Yes]]", "Mobile compatible: Yes"),
    ("see [[Plain note]] and [[Note#Part]] and ![[diagram.png]]",
     "see Plain note and Note#Part and diagram.png"),
    ('<span class="git-footer">Edit</span> <button id=HH>Open</button><br/>', "Edit Open"),
])
def test_markup_is_left_out(text: str, expected: str) -> None:
    assert shown(text) == expected


@pytest.mark.parametrize("text", [
    "`%% not a comment %%` and `[x](y)` in code",
    "```md\n%% shown %%\n[x](https://y)\n<div>html in code</div>\n```",
    "~~~\n%% an unclosed fence runs to the end",
    "mail <john@example.org>, an autolink <https://example.org>, 3 < 4 > 2, <snip>",
    "an escaped \\%% is text \\%%",
    "100%% sure, once",  # an unclosed comment is text
    "https://example.org/a bare URL is what reading view shows",
])
def test_code_and_text_that_looks_like_markup_stay(text: str) -> None:
    assert shown(text) == text


def test_a_slice_reads_its_own_part_of_a_hidden_range() -> None:
    text = "one %%two three%% four [five](https://six) seven"
    ranges = hidden(text)
    assert reading(text, ranges, 0, 8) == "one "  # starts a comment: nothing of it
    assert reading(text, ranges, 8, 24) == " four "
    assert reading(text, ranges, 30, len(text)) == " seven"  # inside the destination


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a ", "%%", "[", "]", "(", ")", "!", "<span>", "</span>",
                                 "`", "\n", "```\n", "[[", "]]", "|", "https://x.org/"]),
                max_size=40),
       st.lists(st.integers(0, 200), max_size=4))
def test_reading_a_partition_is_reading_the_whole(parts: list[str], cuts: list[int]) -> None:
    """Chunks are slices: what is embedded of consecutive slices adds up to the whole note's
    reading text, and never holds more than its slice."""
    text = "".join(parts)
    ranges = hidden(text)
    assert all(a < b <= c for (a, b), (c, _) in zip(ranges, ranges[1:], strict=False))
    bounds = sorted({0, len(text), *(min(c, len(text)) for c in cuts)})
    pieces = [reading(text, ranges, s, e) for s, e in zip(bounds, bounds[1:], strict=False)]
    assert "".join(pieces) == reading(text, ranges)
    assert all(len(p) <= e - s for p, s, e in zip(pieces, bounds, bounds[1:], strict=False))


@pytest.mark.parametrize("hostile", [
    "<!-- x " * 100_000,  # openers with no closer: a pattern rescanned the rest from each
    "%% a \\%% " * 100_000,
    "[a](" * 200_000,
    "[" * 400_000 + "](",
    "[[a|" * 200_000,
    "<span " * 100_000,
    " ".join("`" * k + "a" for k in range(1, 1000)),
])
def test_a_hostile_note_is_read_in_one_pass(hostile: str) -> None:
    """Markup that never closes, a megabyte of it: linear, not a rescan per opener (20,000
    unclosed ``<!--`` took 9 s before)."""
    started = time.perf_counter()
    ranges = hidden(hostile)
    assert len(reading(hostile, ranges)) <= len(hostile)
    assert time.perf_counter() - started < 2.0  # ~0.1 s here; generous for loaded machines


def test_reading_every_chunk_of_a_long_note_is_linear() -> None:
    """The chunker reads each chunk's slice: 10,000 slices of a 4 MB note with 800,000 hidden
    ranges (reading them once copied the ranges after each slice: 10 s)."""
    text = "%% a %% b " * 400_000
    ranges = hidden(text)
    bounds = range(0, len(text) + 1, len(text) // 10_000)
    started = time.perf_counter()
    pieces = [reading(text, ranges, s, e) for s, e in zip(bounds, bounds[1:], strict=False)]
    assert bounds[-1] == len(text) and "".join(pieces) == reading(text, ranges)
    assert time.perf_counter() - started < 2.0  # ~0.1 s here
