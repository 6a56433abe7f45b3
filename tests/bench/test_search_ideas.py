"""bench/search_ideas.py: its offline legs and bound must say what the engine would."""

from __future__ import annotations

import math

import numpy as np

from bench.metrics import reciprocal_rank
from bench.search_ideas import (
    Query,
    Set,
    bm25,
    dense_parts,
    engine,
    legs,
    monotone_bound,
    notes_of,
)


def _set(expected: str = "a", boilerplate: set[int] | None = None) -> Set:
    # Chunks 1, 2 of note a (1 its opening), 3 of b (opening), 4 of c (opening), 5 of c.
    note = {1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}
    ordinal = {1: 0, 2: 1, 3: 0, 4: 0, 5: 1}
    ids = np.array([1, 2, 3, 4, 5])
    s = Set("known", [], lambda i, ranked: reciprocal_rank(ranked, [expected], 10), note, ordinal, dict.fromkeys(note, ""), dict.fromkeys(note, ""), ids,
            np.eye(5, dtype=np.float32), np.array([1, 2, 3, 4, 5]),
            np.array([10.0, 20.0, 10.0, 40.0, 20.0]), 20.0, None,
            boilerplate=boilerplate or set())
    return s


def _query(keyword: list[tuple[int, float]], semantic: list[tuple[int, float]]) -> Query:
    return Query("q", np.zeros(5, dtype=np.float32), ["x"], keyword, semantic, [], [])


def test_bm25_scores_as_whoosh_postings_does() -> None:
    s = _set()
    # Term "x" in documents 0 (chunk 1) twice and 3 (chunk 4) once; 5 documents.
    s.cache[("postings", "x")] = (np.array([0, 3]), np.array([2.0, 1.0], dtype=np.float32))
    k1, b = 1.2, 0.75
    idf = math.log(5 / (2 + 1)) + 1

    def one(tf: float, length: float) -> float:
        return idf * tf * (k1 + 1) / (tf + k1 * ((1 - b) + b * length / 20.0))

    hits = bm25(s, {"x": 1.0})
    assert [c for c, _ in hits] == [1, 4]
    assert math.isclose(hits[0][1], one(2.0, 10.0)) and math.isclose(hits[1][1], one(1.0, 40.0))


def test_boilerplate_leaves_the_legs_unless_it_is_all_they_found() -> None:
    s = _set(boilerplate={2, 5})
    q = _query(keyword=[(2, 9.0), (3, 5.0)], semantic=[(5, 0.9), (4, 0.8), (1, 0.7)])
    lg = legs(s, q)
    assert [n for n, _ in lg.per_note["keyword"]] == ["b"]  # chunk 2 (a footer) is gone
    assert [n for n, _ in lg.per_note["semantic"]] == ["c", "a"]  # c by chunk 4, not 5
    assert notes_of(s, [(2, 1.0)]) == ["a"]  # only boilerplate: kept, as the engine does
    assert engine(s, q)[0] in {"a", "b", "c"}


def test_monotone_bound_ranks_the_expected_note_below_what_beats_it_everywhere() -> None:
    s = _set(expected="a")
    # c and b beat a in the semantic, note and keyword legs: a is third at best.
    s.queries = [_query(keyword=[(4, 9.0), (3, 8.0), (1, 1.0)],
                        semantic=[(4, 0.9), (3, 0.85), (1, 0.8)])]
    assert monotone_bound(s) == 1 / 3
    # c beats a everywhere; b beats it only in keyword.
    s.queries = [_query(keyword=[(4, 9.0), (3, 8.0), (1, 1.0)],
                        semantic=[(4, 0.9), (1, 0.8), (3, 0.1)])]
    assert monotone_bound(s) == 0.5
    # b beats a in keyword only: some weights put a first.
    s.queries = [_query(keyword=[(3, 9.0), (1, 1.0)], semantic=[(1, 0.9), (3, 0.1)])]
    assert monotone_bound(s) == 1.0


def test_dense_parts_scores_a_chunk_by_its_best_vector() -> None:
    s = _set()
    # Chunk 3's vector is e3; one of its paragraphs points along e1, better than chunk 1 itself.
    s.part_ids = np.array([3, 3])
    s.part_V = np.array([[1.0, 0, 0, 0, 0], [0, 0, 0, 0.5, 0]], dtype=np.float32) * [[1.2], [1]]
    q = np.array([1.0, 0, 0, 0, 0], dtype=np.float32)
    hits = dense_parts(s, q, 2)
    assert hits[0][0] == 3 and math.isclose(hits[0][1], 1.2)
    assert hits[1] == (1, 1.0)
    s.part_ids, s.part_V = np.zeros(0, dtype=np.int64), np.zeros((0, 5), dtype=np.float32)
    assert [c for c, _ in dense_parts(s, q, 2)][0] == 1  # without parts: dense alone
