"""A symbol's text put together from its chunks: each character once, in order."""

from __future__ import annotations

from ragd.daemon.stores.code_sources import joined


def slices(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int, str]]:
    return [(a, b, text[a:b]) for a, b in spans]


def test_overlapping_chunks_give_the_text_once() -> None:
    text = "def send(self):\n    first line\n    second line\n    third line\n"
    pieces = slices(text, [(0, 30), (16, 46), (40, len(text))])
    assert joined(pieces) == text
    assert joined(list(reversed(pieces))) == text  # whatever order the rows come in


def test_a_chunk_inside_another_and_a_gap() -> None:
    text = "0123456789abcdefghij"
    assert joined(slices(text, [(0, 10), (2, 6)])) == "0123456789"
    assert joined(slices(text, [(0, 5), (10, 20)])) == "01234\n…\nabcdefghij"
    assert joined([]) == ""
