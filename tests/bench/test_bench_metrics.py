"""The ranking metrics of the quality benchmarks, checked against hand-computed values."""

from __future__ import annotations

import math

import pytest

from bench.metrics import dcg, evaluate, mrr, ndcg_at_k, recall_at_k, reciprocal_rank


def test_dcg_discounts_by_log2_of_rank_plus_one() -> None:
    assert dcg([1, 1, 1]) == pytest.approx(1 + 1 / math.log2(3) + 1 / math.log2(4))
    assert dcg([]) == 0.0


def test_ndcg_is_one_for_the_ideal_ranking_and_zero_without_hits() -> None:
    grades = {"a": 1, "b": 1}
    assert ndcg_at_k(["a", "b", "x"], grades) == pytest.approx(1.0)
    assert ndcg_at_k(["b", "a"], grades) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "y"], grades) == 0.0
    assert ndcg_at_k([], grades) == 0.0


def test_ndcg_one_relevant_document_at_rank_three() -> None:
    assert ndcg_at_k(["x", "y", "a"], {"a": 1}) == pytest.approx(1 / math.log2(4))


def test_ndcg_uses_the_ideal_dcg_of_all_judged_documents_cut_at_k() -> None:
    grades = {"a": 1, "b": 1, "c": 1}
    # Only "a" found, at rank 1: DCG = 1; IDCG@2 = 1 + 1/log2(3).
    assert ndcg_at_k(["a", "x"], grades, k=2) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_ndcg_graded_judgements_use_linear_gain() -> None:
    grades = {"a": 2, "b": 1}
    worse = ndcg_at_k(["b", "a"], grades)
    assert worse == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert ndcg_at_k(["a", "b"], grades) == pytest.approx(1.0)


def test_ndcg_ignores_documents_past_k_and_counts_repeats_once() -> None:
    ranked = ["x"] * 3 + [f"n{i}" for i in range(9)] + ["a"]
    assert ndcg_at_k(ranked, {"a": 1}, k=10) == 0.0
    assert ndcg_at_k(["a", "a", "b"], {"a": 1, "b": 1}) == pytest.approx(1.0)


def test_ndcg_ignores_non_positive_grades() -> None:
    assert ndcg_at_k(["z"], {"z": 0, "a": 1}) == 0.0
    assert ndcg_at_k(["a"], {"z": 0}) == 0.0


def test_recall_counts_the_share_of_relevant_documents_found() -> None:
    grades = {"a": 1, "b": 1, "c": 1, "d": 1}
    assert recall_at_k(["a", "x", "c"], grades) == pytest.approx(0.5)
    assert recall_at_k(["a", "b"], grades, k=1) == pytest.approx(0.25)
    assert recall_at_k([], grades) == 0.0


def test_reciprocal_rank() -> None:
    assert reciprocal_rank(["x", "a", "b"], ["a"]) == pytest.approx(0.5)
    assert reciprocal_rank(["x", "a", "b"], ["b", "a"]) == pytest.approx(0.5)
    assert reciprocal_rank([f"n{i}" for i in range(12)] + ["a"], ["a"], k=10) == 0.0
    # A repeated id (two chunks of one note) keeps its first rank and takes no extra slot.
    assert reciprocal_rank(["x", "x", "a"], ["a"]) == pytest.approx(0.5)


def test_evaluate_averages_over_judged_queries_only() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1, "c": 1}, "q3": {"z": 0}}
    run = {"q1": ["a"], "q2": ["x", "b"]}
    out = evaluate(run, qrels)
    assert out["queries"] == 2
    idcg2 = 1 + 1 / math.log2(3)
    assert out["ndcg@10"] == pytest.approx((1.0 + (1 / math.log2(3)) / idcg2) / 2)
    assert out["recall@10"] == pytest.approx((1.0 + 0.5) / 2)


def test_evaluate_scores_a_missing_query_as_zero() -> None:
    out = evaluate({}, {"q1": {"a": 1}})
    assert out["ndcg@10"] == 0.0 and out["recall@10"] == 0.0


def test_mrr_with_hits_at_one_and_at_k() -> None:
    out = mrr([["a"], ["x", "b"], ["y"]], ["a", "b", "c"])
    assert out["mrr@10"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert out["hits@1"] == pytest.approx(1 / 3)
    assert out["hits@10"] == pytest.approx(2 / 3)
    assert out["queries"] == 3


def test_mrr_needs_one_ranking_per_item() -> None:
    with pytest.raises(ValueError):
        mrr([["a"]], ["a", "b"])
    assert math.isnan(mrr([], [])["mrr@10"])
