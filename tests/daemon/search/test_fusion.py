import pytest

from ragd.daemon.search.fusion import (
    best_per_note,
    collapse,
    fold_properties,
    normalise,
    rrf,
    zscore_fusion,
)


def test_rrf_sums_reciprocal_ranks() -> None:
    fused = rrf({"a": [1, 2, 3], "b": [3, 1]}, {"a": 1.0, "b": 1.0}, k=60)
    scores = {f.id: f.score for f in fused}
    assert scores[1] == pytest.approx(1 / 61 + 1 / 62)
    assert scores[3] == pytest.approx(1 / 63 + 1 / 61)
    assert scores[2] == pytest.approx(1 / 62)
    assert [f.id for f in fused] == [1, 3, 2]
    assert fused[0].ranks == {"a": 1, "b": 2}


def test_weights_change_the_order() -> None:
    legs = {"kw": [1, 2], "sem": [2, 1]}
    assert rrf(legs, {"kw": 2.0, "sem": 1.0})[0].id == 1
    assert rrf(legs, {"kw": 1.0, "sem": 2.0})[0].id == 2


def test_duplicate_ids_in_one_leg_count_once() -> None:
    fused = rrf({"a": [7, 7, 8]}, {"a": 1.0})
    assert {f.id: f.ranks["a"] for f in fused} == {7: 1, 8: 3}


def test_ties_are_deterministic() -> None:
    a = rrf({"x": [5], "y": [4]}, {"x": 1.0, "y": 1.0})
    b = rrf({"y": [4], "x": [5]}, {"x": 1.0, "y": 1.0})
    assert [f.id for f in a] == [f.id for f in b] == [4, 5]


def test_normalise_maps_top_of_every_leg_to_one() -> None:
    assert normalise(2 / 61, [1.0, 1.0]) == pytest.approx(1.0)
    assert normalise(1 / 61, [1.0, 1.0]) == pytest.approx(0.5)
    assert normalise(5.0, [1.0]) == 1.0
    assert normalise(0.1, []) == 0.0


def test_collapse_limits_chunks_per_source() -> None:
    fused = rrf({"a": [1, 2, 3, 4, 5]}, {"a": 1.0})
    source = {1: "x", 2: "x", 3: "x", 4: "y", 5: "z"}
    out = collapse(fused, source.__getitem__, per_source=2, limit=3)
    assert [f.id for f in out] == [1, 2, 4]


def test_fold_properties_shows_the_body_in_the_notes_place() -> None:
    # Chunk 10 is note x's properties, 11 and 12 its body; 20 is note y's properties only.
    source = {10: "x", 11: "x", 12: "x", 20: "y"}
    fused = rrf({"a": [10, 20, 11, 12], "b": [20]}, {"a": 1.0, "b": 1.0})
    assert [f.id for f in fused] == [20, 10, 11, 12]
    out = fold_properties(fused, source.__getitem__, lambda i: i in (10, 20))
    # y has no body: its properties chunk stays. x's properties chunk (2nd) lends its place,
    # score and best leg ranks to x's best body chunk, 11.
    assert [f.id for f in out] == [20, 11, 12]
    assert out[1].score == fused[1].score and out[1].ranks == {"a": 1}
    # A properties chunk below its note's body adds no second result.
    below = rrf({"a": [11, 10]}, {"a": 1.0})
    assert [f.id for f in fold_properties(below, source.__getitem__, lambda i: i == 10)] == [11]


def test_best_per_note_keeps_each_notes_best_chunk() -> None:
    note = {1: "a", 2: "b", 3: "a"}
    assert best_per_note([(1, 0.9), (2, 0.8), (3, 0.7)], note.__getitem__) == [
        ("a", 0.9), ("b", 0.8)]


def test_zscore_fusion_lets_a_confident_leg_lead() -> None:
    # The semantic leg is flat (no opinion); the keyword leg is sure about "b".
    legs = {"semantic": [("a", 0.52), ("b", 0.51), ("c", 0.50)],
            "keyword": [("b", 30.0), ("a", 2.0), ("c", 1.0)]}
    fused = zscore_fusion(legs, {"semantic": 0.5, "keyword": 0.5})
    assert [f.note for f in fused] == ["b", "a", "c"]
    assert fused[0].ranks == {"semantic": 2, "keyword": 1}
    # A note one leg did not return gets that leg's lowest z-score, not a free pass.
    fused = zscore_fusion({"semantic": [("a", 0.9), ("b", 0.5)], "keyword": [("c", 9.0),
                                                                            ("a", 1.0)]},
                          {"semantic": 0.5, "keyword": 0.5})
    assert [f.note for f in fused] == ["a", "c", "b"]


def test_zscore_fusion_puts_exact_titles_first_and_scores_0_to_1() -> None:
    legs = {"semantic": [("a", 0.9), ("b", 0.5)], "keyword": [("a", 9.0), ("b", 1.0)]}
    fused = zscore_fusion(legs, {"semantic": 0.5, "keyword": 0.5}, exact=["z", "b"])
    assert [f.note for f in fused] == ["z", "b", "a"]
    assert fused[0].display == 1.0 and fused[0].ranks == {"exact": 1}
    plain = zscore_fusion(legs, {"semantic": 0.5, "keyword": 0.5})
    assert plain[0].display == pytest.approx(1.0) and plain[1].display == pytest.approx(0.0)
    assert zscore_fusion({}, {"semantic": 1.0}) == []


def test_a_leg_that_finds_one_note_still_counts() -> None:
    # Two rare words only one note holds: the keyword and phrase legs find just it. Their
    # z-scores are 0 (one value each), but the notes they missed are worse than found.
    legs = {"semantic": [("pdf", 0.50), ("trip", 0.49)], "note": [("trip", 0.6), ("pdf", 0.5)],
            "keyword": [("pdf", 3.0)], "phrase": [("pdf", 2.0)]}
    weights = {"semantic": 0.25, "note": 0.4, "keyword": 0.35, "phrase": 0.35}
    assert [n.note for n in zscore_fusion(legs, weights)][0] == "pdf"
    alone = {k: v for k, v in legs.items() if k in ("semantic", "note")}
    assert [n.note for n in zscore_fusion(alone, weights)][0] == "trip"


def test_a_leg_blind_to_a_note_does_not_count_it_as_missed() -> None:
    # "new" is read but not embedded yet: the semantic legs could not have found it.
    legs = {"semantic": [("a", 0.9), ("b", 0.5), ("c", 0.4)],
            "keyword": [("new", 9.0), ("a", 1.0), ("b", 0.5)]}
    weights = {"semantic": 0.5, "keyword": 0.5}
    penalised = zscore_fusion(legs, weights)
    fair = zscore_fusion(legs, weights, blind={"semantic": {"new"}})
    rank = {f.note: n for n, f in enumerate(fair)}
    assert rank["new"] == 0  # the keyword leg's clear best, judged by the leg that saw it
    assert [f.note for f in penalised].index("new") > 0
    # A note the blind leg did find is scored as usual.
    seen = zscore_fusion(legs, weights, blind={"semantic": {"a"}})
    assert [f.note for f in seen] == [f.note for f in penalised]


def test_sure_hits_are_a_few_notes_of_an_exhausted_leg_or_a_best_far_ahead() -> None:
    from ragd.daemon.search.fusion import sure_hits

    assert sure_hits([("a", 3.0), ("b", 2.0)], exhausted=True) == ["a", "b"]
    assert sure_hits([("a", 3.0), ("b", 2.0)], exhausted=False) == []  # more may follow
    spread = [("a", 1.0), ("b", 0.9), ("c", 0.8), ("d", 0.7)]
    assert sure_hits(spread) == []
    ahead = [("a", 10.0), *[(str(i), 1.0 + i / 100) for i in range(20)]]
    assert sure_hits(ahead) == ["a"]
    assert sure_hits([]) == []


def test_keep_sure_lifts_a_sure_note_to_its_place_and_leaves_the_rest() -> None:
    from ragd.daemon.search.fusion import NoteScore, keep_sure

    notes = [NoteScore(n, 10 - i, 0.5) for i, n in enumerate("abcdefg")]
    order = [n.note for n in keep_sure(notes, ["f", "g"], place=3)]
    assert order == ["a", "b", "f", "g", "c", "d", "e"]
    assert [n.note for n in keep_sure(notes, ["b", "zz"], place=3)] == list("abcdefg")
