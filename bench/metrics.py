"""Ranking metrics as pure functions: nDCG@k, Recall@k and MRR@k over ranked id lists.

Definitions follow BEIR / pytrec_eval, so figures compare with published ones:

- nDCG@k = DCG@k / IDCG@k with DCG = sum over ranks r (from 1) of rel / log2(r + 1), the
  linear gain of trec_eval (the same as 2^rel - 1 for SciFact's binary grades); IDCG is the
  DCG of the judged documents sorted by grade. A query without a relevant judgement is
  skipped.
- Recall@k = relevant documents in the top k / all relevant documents of the query.
- MRR@k = 1 / rank of the first relevant document in the top k, else 0.

A ranking that repeats an id counts it once, at its first rank (a result list is a set in
order). The mean over queries is the plain average over the queries evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

Qrels = Mapping[str, Mapping[str, int]]  # query id -> doc id -> grade (> 0 = relevant)
Run = Mapping[str, Sequence[str]]  # query id -> ranked doc ids, best first


def _dedupe(ranked: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain of grades in rank order (rank 1 first)."""
    return sum(g / math.log2(r + 2) for r, g in enumerate(gains))


def ndcg_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k of one ranking against the graded judgements of its query."""
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    best = dcg(ideal)
    if best <= 0:
        return 0.0
    gains = [max(0, grades.get(d, 0)) for d in _dedupe(ranked)[:k]]
    return dcg(gains) / best


def recall_at_k(ranked: Sequence[str], grades: Mapping[str, int], k: int = 10) -> float:
    """Share of the relevant documents that appear in the top k."""
    relevant = {d for d, g in grades.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(_dedupe(ranked)[:k])) / len(relevant)


def reciprocal_rank(ranked: Sequence[str], relevant: Iterable[str], k: int = 10) -> float:
    """1 / rank of the first relevant id in the top k (0 when none is there)."""
    wanted = set(relevant)
    for rank, doc in enumerate(_dedupe(ranked)[:k], 1):
        if doc in wanted:
            return 1.0 / rank
    return 0.0


def evaluate(run: Run, qrels: Qrels, k: int = 10) -> dict[str, float]:
    """Mean nDCG@k and Recall@k over the judged queries (a query missing from the run
    scores 0, as an empty ranking would)."""
    judged = [q for q, grades in qrels.items() if any(g > 0 for g in grades.values())]
    if not judged:
        return {f"ndcg@{k}": float("nan"), f"recall@{k}": float("nan"), "queries": 0}
    nd = [ndcg_at_k(run.get(q, ()), qrels[q], k) for q in judged]
    rc = [recall_at_k(run.get(q, ()), qrels[q], k) for q in judged]
    return {f"ndcg@{k}": sum(nd) / len(nd), f"recall@{k}": sum(rc) / len(rc),
            "queries": len(judged)}


def mrr(rankings: Sequence[Sequence[str]], expected: Sequence[str], k: int = 10
        ) -> dict[str, float]:
    """Known-item MRR@k: ``rankings[i]`` should find ``expected[i]``; also hits@1 and @k."""
    if len(rankings) != len(expected):
        raise ValueError("one ranking per expected item")
    if not expected:
        return {f"mrr@{k}": float("nan"), "hits@1": float("nan"), f"hits@{k}": float("nan"),
                "queries": 0}
    rr = [reciprocal_rank(r, [e], k) for r, e in zip(rankings, expected, strict=True)]
    n = len(rr)
    return {f"mrr@{k}": sum(rr) / n, "hits@1": sum(1 for x in rr if x == 1.0) / n,
            f"hits@{k}": sum(1 for x in rr if x > 0) / n, "queries": n}
