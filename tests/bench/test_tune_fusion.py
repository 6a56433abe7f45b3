"""bench/tune_fusion.py's offline fusion must rank as the engine does."""

from __future__ import annotations

from bench.tune_fusion import RRF, Legs, fuse

DOC_OF = {1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}
ORDINAL = {1: 0, 2: 1, 3: 0, 4: 1, 5: -1}


def test_rrf_keeps_one_chunk_per_document_in_rrf_order() -> None:
    legs = Legs(keyword=[(1, 9.0), (2, 8.0), (3, 7.0)], semantic=[(3, 0.9), (4, 0.8), (1, 0.7)],
                titles=[], phrase=[])
    # 1 and 3 are found by both legs; 2 is a second chunk of "a" and is collapsed away.
    assert fuse(legs, DOC_OF, ORDINAL, RRF) == ["a", "b", "c"]


def test_zscore_ranks_notes_and_weights_move_them() -> None:
    legs = Legs(keyword=[(4, 30.0), (1, 2.0), (3, 1.0)],
                semantic=[(1, 0.60), (3, 0.59), (4, 0.40)], titles=[], phrase=[])
    assert fuse(legs, DOC_OF, ORDINAL, (1.0, 0.0, 0.0)) == ["a", "b", "c"]
    assert fuse(legs, DOC_OF, ORDINAL, (0.0, 0.0, 1.0))[0] == "c"
    # The note leg counts only opening (ordinal 0) and properties (negative) chunks.
    assert fuse(legs, DOC_OF, ORDINAL, (0.0, 1.0, 0.0))[:2] == ["a", "b"]


def test_exact_titles_first_and_deleted_chunks_dropped() -> None:
    legs = Legs(keyword=[(7, 5.0), (3, 1.0)], semantic=[(1, 0.9), (3, 0.2)], titles=[5],
                phrase=[])
    assert fuse(legs, DOC_OF, ORDINAL, (0.4, 0.3, 0.3))[0] == "c"
    assert "7" not in fuse(legs, DOC_OF, ORDINAL, (0.4, 0.3, 0.3))


def test_choice_is_the_best_worst_margin_then_the_best_mean_margin() -> None:
    from bench.tune_fusion import MIN_GAIN, choose

    a, b, c = (0.4, 0.3, 0.3), (0.25, 0.4, 0.35), (0.2, 0.4, 0.4)
    crit = {a: 0.030, b: 0.041, c: 0.044}
    mean = {a: 0.050, b: 0.064, c: 0.052}
    assert choose([a, b, c], crit, mean) == b  # within MIN_GAIN of the best, a better mean
    crit[b] = 0.044 - MIN_GAIN - 0.001
    assert choose([a, b, c], crit, mean) == c  # too far below on the worst set
