"""bench/deadline.py's pure logic: the figures of a corpus, the room, the sampling."""

from __future__ import annotations

from bench.deadline import Item, Longest, room, sampled, short, slowest, summarise


def test_summarise_names_the_slowest_item_and_its_room() -> None:
    items = [Item("a.md", 0.5, chunk_s=0.4),
             Item("b.pdf", 3.0, convert_s=9.0, chunk_s=2.5, cpu_s=6.0, truncated=True),
             Item("c.md", 0.1, outcome="empty"), Item("d.md", 0.2, outcome="error: ValueError")]
    s = summarise(items, 30.0)
    assert s["items"] == 4 and s["total_s"] == 3.8
    assert (s["max_s"], s["max_item"], s["room"]) == (3.0, "b.pdf", 10.0)
    assert (s["max_chunk_s"], s["max_chunk_item"]) == (2.5, "b.pdf")
    assert (s["convert_total_s"], s["max_convert_item"]) == (9.0, "b.pdf")
    assert (s["skipped"], s["errors"], s["truncated"]) == (1, 1, 1)
    assert s["p50_s"] == 0.5 and s["p99_s"] == 3.0
    assert (s["max_cpu_s"], s["max_cpu_item"], s["cpu_room"]) == (6.0, "b.pdf", 5.0)


def test_summarise_of_nothing_has_no_room_and_no_slowest() -> None:
    s = summarise([], 30.0)
    assert s["items"] == 0 and s["max_s"] is None and s["room"] is None
    assert s["cpu_room"] is None


def test_no_conversion_names_no_item() -> None:
    assert summarise([Item("a.md", 0.1)], 30.0)["max_convert_item"] == ""


def test_room_is_the_deadline_over_the_slowest() -> None:
    assert room(30.0, 12.0) == 2.5
    assert room(30.0, 0.0) is None


def test_sampled_takes_one_in_step_from_the_first() -> None:
    assert [n for n in range(25) if sampled(n, 10)] == [0, 10, 20]
    assert all(sampled(n, 1) for n in range(5))


def test_slowest_and_short() -> None:
    items = [Item(str(n), float(n)) for n in range(10)]
    assert [i.name for i in slowest(items, 3)] == ["9", "8", "7"]
    assert short("abc") == "abc"
    cut = short("x" * 30 + "y" * 30 + "z" * 30, 21)
    assert len(cut) == 21 and cut.startswith("x") and cut.endswith("z") and "…" in cut


class _Doc:
    def __init__(self, n: int) -> None:
        self.text = "x" * n


def test_longest_keeps_the_n_longest_texts_longest_first() -> None:
    keep = Longest(2)
    for n in (5, 50, 1, 20, 50):
        keep.offer(f"t{n}", _Doc(n))
    assert [(name, len(doc.text)) for name, doc in keep.rows()] == [("t50", 50), ("t50", 50)]
