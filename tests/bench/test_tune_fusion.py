"""bench/tune_fusion.py's offline fusion must rank as the engine does."""

from __future__ import annotations

from bench.tune_fusion import fuse


def test_fuse_keeps_one_chunk_per_document_in_rrf_order() -> None:
    legs = {"keyword": [1, 2, 3], "semantic": [3, 4, 1], "exact": []}
    doc_of = {1: "a", 2: "a", 3: "b", 4: "c"}
    # 1 and 3 are found by both legs; 2 is a second chunk of "a" and is collapsed away.
    assert fuse(legs, doc_of, rrf_k=60, keyword_weight=1.0) == ["a", "b", "c"]


def test_keyword_weight_moves_keyword_only_hits() -> None:
    legs = {"keyword": [1, 2], "semantic": [3, 2], "exact": []}
    doc_of = {1: "kw-only", 2: "both", 3: "sem-only"}
    assert fuse(legs, doc_of, 1, 1.0)[0] == "both"
    assert fuse(legs, doc_of, 1, 1.0).index("kw-only") < fuse(legs, doc_of, 1, 0.0).index(
        "kw-only")
    assert fuse(legs, doc_of, 60, 1.0, k=2) == ["both", "kw-only"]


def test_chunks_deleted_since_the_legs_ran_are_dropped() -> None:
    assert fuse({"keyword": [7, 8], "semantic": [], "exact": []}, {8: "x"}, 60, 1.0) == ["x"]
