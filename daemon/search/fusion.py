"""Reciprocal Rank Fusion and result shaping: pure functions over ranked id lists."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Fused:
    id: int
    score: float  # raw RRF sum
    ranks: dict[str, int] = field(default_factory=dict)  # leg -> 1-based rank


def rrf(legs: Mapping[str, Sequence[int]], weights: Mapping[str, float], k: int = 60
        ) -> list[Fused]:
    """Fuse ranked lists: score(d) = sum over legs of weight / (k + rank).

    Ties are broken by the best single rank, then by id, so the order is deterministic.
    """
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for leg, ids in legs.items():
        w = weights.get(leg, 1.0)
        seen: set[int] = set()
        for rank, doc in enumerate(ids, 1):
            if doc in seen:
                continue
            seen.add(doc)
            scores[doc] = scores.get(doc, 0.0) + w / (k + rank)
            ranks.setdefault(doc, {})[leg] = rank
    fused = [Fused(d, s, ranks[d]) for d, s in scores.items()]
    fused.sort(key=lambda f: (-f.score, min(f.ranks.values()), f.id))
    return fused


def normalise(score: float, weights: Sequence[float], k: int = 60) -> float:
    """Map an RRF sum to 0-1: 1.0 is rank 1 in every leg that ran."""
    best = sum(w / (k + 1) for w in weights)
    return 0.0 if best <= 0 else min(1.0, score / best)


def collapse(items: Sequence[Fused], source_of: Callable[[int], Hashable], per_source: int,
             limit: int) -> list[Fused]:
    """Keep at most ``per_source`` chunks of any one source, then the first ``limit``."""
    counts: dict[Hashable, int] = {}
    out: list[Fused] = []
    for item in items:
        src = source_of(item.id)
        if counts.get(src, 0) >= per_source:
            continue
        counts[src] = counts.get(src, 0) + 1
        out.append(item)
        if len(out) >= limit:
            break
    return out


def fold_properties(items: Sequence[Fused], source_of: Callable[[int], Hashable],
                    is_properties: Callable[[int], bool]) -> list[Fused]:
    """Show a note's body rather than its properties chunk when both were found.

    A properties chunk (daemon.properties) that ranks above its note's body chunks lends its
    place, score and leg ranks to the note's best body chunk; one below them adds nothing. A
    note with no body chunk among ``items`` is shown by its properties chunk.
    """
    best_body: dict[Hashable, Fused] = {}
    for item in items:
        if not is_properties(item.id):
            best_body.setdefault(source_of(item.id), item)
    out: list[Fused] = []
    shown: set[int] = set()
    for item in items:
        body = best_body.get(source_of(item.id)) if is_properties(item.id) else item
        if body is None:
            out.append(item)
        elif body.id not in shown:
            shown.add(body.id)
            ranks = {leg: min(r, body.ranks.get(leg, r)) for leg, r in item.ranks.items()}
            out.append(body if body is item else Fused(body.id, item.score,
                                                       {**body.ranks, **ranks}))
    return out
