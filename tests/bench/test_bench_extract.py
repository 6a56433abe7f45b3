"""bench/extract.py's pure logic: the process tree, the stage sums and the round-by-round
ratios."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.extract import descendants, read_chunk_s, stage_order, summarise, take_in_turn


def run(mode: str, n: int, wall: float, read: float, chunk: float = 0.0,
        **extra: Any) -> dict[str, Any]:
    return {"mode": mode, "round": n, "sources": 100, "skipped": 0, "chunks": 300,
            "wall_s": wall, "stages": {"read": read, "chunk": chunk, "embed": 5.0},
            "base_mb": 200.0, "peak_mb": 250.0, "after_mb": 240.0, "workers_mb": 0.0,
            "others_mb": 0.0, **extra}


def test_descendants_follow_the_tree_and_leave_out_the_rest() -> None:
    parents = {10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 21: 20}
    assert descendants(parents, 10) == {11, 12, 13}
    assert descendants(parents, 12) == set()
    assert descendants(parents, 99) == set()


def test_descendants_survive_a_cycle() -> None:
    assert descendants({2: 3, 3: 2, 4: 1}, 2) == {3}


def test_read_chunk_adds_the_two_stages_and_ignores_the_others() -> None:
    assert read_chunk_s({"read": 1.5, "chunk": 0.25, "embed": 9.0}) == 1.75
    assert read_chunk_s({"embed": 9.0}) == 0.0


def test_stage_order_puts_the_known_stages_first() -> None:
    assert stage_order(["write_faiss", "embed", "read", "scan", "read"]) == \
        ["scan", "read", "embed", "write_faiss"]


def test_ratios_are_taken_round_by_round_then_their_median() -> None:
    runs = [run("in-process", 0, 10.0, 2.0), run("pool", 0, 12.0, 3.0),
            run("in-process", 1, 20.0, 4.0), run("pool", 1, 22.0, 4.0),
            run("in-process", 2, 10.0, 1.0, 1.0), run("pool", 2, 9.0, 2.0)]
    s = summarise(runs)
    assert s["pairs"] == 3
    assert s["wall_ratios"] == pytest.approx([1.2, 1.1, 0.9])
    assert s["wall_ratio"] == pytest.approx(1.1)
    assert s["read_chunk_ratios"] == pytest.approx([1.5, 1.0, 1.0])
    assert s["read_chunk_ratio"] == pytest.approx(1.0)
    # Not the ratio of the medians (12/10 = 1.2): the slow round weighs on both modes.
    assert s["modes"]["in-process"]["wall_s"] == 10.0
    assert s["modes"]["pool"]["wall_s"] == 12.0
    assert s["modes"]["pool"]["sources_per_s"] == pytest.approx(100 / 12.0)
    assert s["modes"]["in-process"]["read_chunk_s"] == 2.0


def test_a_round_without_its_pair_gives_no_ratio() -> None:
    s = summarise([run("in-process", 0, 10.0, 2.0), run("pool", 0, 11.0, 2.0),
                   run("in-process", 1, 10.0, 2.0)])
    assert s["pairs"] == 1
    assert s["wall_ratios"] == pytest.approx([1.1])
    assert s["modes"]["in-process"]["rounds"] == 2
    assert s["modes"]["pool"]["rounds"] == 1


def test_memory_is_the_median_per_mode() -> None:
    runs = [run("in-process", 0, 10.0, 2.0, peak_mb=300.0),
            run("pool", 0, 10.0, 2.0, peak_mb=260.0, workers_mb=80.0),
            run("in-process", 1, 10.0, 2.0, peak_mb=320.0),
            run("pool", 1, 10.0, 2.0, peak_mb=262.0, workers_mb=90.0)]
    modes = summarise(runs)["modes"]
    assert modes["in-process"]["peak_mb"] == 310.0
    assert modes["pool"]["peak_mb"] == 261.0
    assert modes["pool"]["workers_mb"] == 85.0
    assert modes["in-process"]["workers_mb"] == 0.0


def test_the_ratio_without_embedding_leaves_the_embed_stage_out() -> None:
    runs = [run("in-process", 0, 15.0, 2.0), run("pool", 0, 12.0, 2.0)]  # embed: 5 s each
    s = summarise(runs)
    assert s["rest_ratios"] == pytest.approx([7.0 / 10.0])
    assert s["modes"]["pool"]["rest_s"] == pytest.approx(7.0)


def test_books_are_taken_in_turn_from_each_format() -> None:
    epub = [Path("e1"), Path("e2"), Path("e3"), Path("e4")]
    pdf = [Path("p1"), Path("p2")]
    assert take_in_turn([epub, pdf], 5) == [Path(p) for p in ("e1", "p1", "e2", "p2", "e3")]
    assert take_in_turn([epub, pdf], 10) == [Path(p) for p in ("e1", "p1", "e2", "p2", "e3",
                                                                "e4")]
    assert take_in_turn([[], pdf], 1) == [Path("p1")]
