"""Reciprocal Rank Fusion and result shaping: pure functions over ranked id lists."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
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


def merge_hits(lists: Sequence[Sequence[tuple[int, float]]], k: int, *, scale: str = "none"
               ) -> list[tuple[int, float]]:
    """One leg out of several searches' hits (decision 0048): each chunk scored by its best
    score over the lists, the first ``k`` by that score. ``scale`` first puts each list on a
    common scale: "best" divides it by its best score, "z" standardises it over its hits (a
    list whose best hit stands far above the rest then counts more); "none" takes scores as
    they are. Ties keep the order of the lists (the main query's first)."""
    best: dict[int, float] = {}
    for hits in lists:
        for cid, value in zip((c for c, _ in hits), _scaled([s for _, s in hits], scale),
                              strict=True):
            if cid not in best or value > best[cid]:
                best[cid] = value
    return sorted(best.items(), key=lambda h: -h[1])[:k]  # stable: the first seen first


def _scaled(values: list[float], scale: str) -> list[float]:
    if not values or scale == "none":
        return values
    if scale == "z":
        return _standardise(values)
    top = max(values)
    return [v / top for v in values] if top > 0 else values


def normalise(score: float, weights: Sequence[float], k: int = 60) -> float:
    """Map an RRF sum to 0-1: 1.0 is rank 1 in every leg that ran."""
    best = sum(w / (k + 1) for w in weights)
    return 0.0 if best <= 0 else min(1.0, score / best)


def collapse(items: Sequence[Fused], source_of: Callable[[int], Hashable],
             per_source: int | Callable[[int], int], limit: int) -> list[Fused]:
    """Keep at most ``per_source`` chunks of any one source (a number, or one for each chunk
    id's source), then the first ``limit``."""
    cap = per_source if callable(per_source) else (lambda _: per_source)
    counts: dict[Hashable, int] = {}
    out: list[Fused] = []
    for item in items:
        src = source_of(item.id)
        if counts.get(src, 0) >= cap(item.id):
            continue
        counts[src] = counts.get(src, 0) + 1
        out.append(item)
        if len(out) >= limit:
            break
    return out


def fold_properties(items: Sequence[Fused], source_of: Callable[[int], Hashable],
                    is_properties: Callable[[int], bool]) -> list[Fused]:
    """Show a note's body rather than its properties chunk when both were found.

    A properties chunk (ragd.daemon.text.properties) that ranks above its note's body chunks lends its
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


# A note a leg did not return scores this far (in that leg's standard deviations) below the
# leg's lowest hit: not found is worse than found last. Without it, a leg that finds a single
# note (a rare word only one document holds) gives it z = 0, the same as every note it missed,
# and says nothing. 0.5 leaves the quality sets where they were (decision 0010) and makes such
# a leg count.
MISSING_GAP = 0.5


@dataclass(frozen=True)
class NoteScore:
    """A note's fused evidence: ``score`` orders notes, ``display`` is the 0-1 result score."""

    note: Hashable
    score: float
    display: float
    ranks: dict[str, int] = field(default_factory=dict)  # leg -> 1-based rank of the note


def best_per_note(hits: Sequence[tuple[int, float]], note_of: Callable[[int], Hashable]
                  ) -> list[tuple[Hashable, float]]:
    """A leg's chunk hits (best first) as notes, each scored by its best chunk."""
    seen: dict[Hashable, float] = {}
    for cid, score in hits:
        seen.setdefault(note_of(cid), score)
    return list(seen.items())


def _standardise(values: Sequence[float]) -> list[float]:
    """z-scores; a leg whose scores are all equal contributes nothing to the order."""
    n = len(values)
    mean = sum(values) / n
    sd = (sum((v - mean) ** 2 for v in values) / n) ** 0.5
    return [(v - mean) / sd if sd > 0 else 0.0 for v in values]


def zscore_fusion(legs: Mapping[str, Sequence[tuple[Hashable, float]]],
                  weights: Mapping[str, float], exact: Sequence[Hashable] = (),
                  exact_weight: float = 1.0,
                  blind: Mapping[str, Collection[Hashable]] | None = None) -> list[NoteScore]:
    """Fuse per-note leg scores by their standardised values (decision 0010).

    Each leg's scores are turned into z-scores over the notes it returned, so a leg whose best
    note stands far above the rest (a confident leg) moves the order more than one whose
    scores are flat. A note missing from a leg gets MISSING_GAP below that leg's lowest
    z-score. Notes of the exact leg (title or alias equal to the query, then the query as a
    phrase) go on top, in its order, scaled by ``exact_weight``. ``display`` maps each leg's scores to 0-1 (best
    note 1) and averages them by weight: 1.0 means "best in every leg that found anything".
    ``blind`` names, per leg, notes that leg could not have found (not embedded yet: decision
    0022): a blind leg says nothing of them, and their score is the weighted mean over the
    legs that could see them, instead of a penalty for being missed.
    """
    blind = blind or {}
    ran = {leg: hits for leg, hits in legs.items() if hits and weights.get(leg, 0) > 0}
    notes: dict[Hashable, None] = {n: None for hits in ran.values() for n, _ in hits}
    notes.update({n: None for n in exact})
    total = sum(weights[leg] for leg in ran) or 1.0
    score = dict.fromkeys(notes, 0.0)
    display = dict.fromkeys(notes, 0.0)
    ranks: dict[Hashable, dict[str, int]] = {n: {} for n in notes}
    for leg, hits in ran.items():
        w = weights[leg]
        z = dict(zip((n for n, _ in hits), _standardise([s for _, s in hits]), strict=True))
        floor = min(z.values())
        top, low = hits[0][1], min(s for _, s in hits)
        for rank, (n, s) in enumerate(hits, 1):
            ranks[n].setdefault(leg, rank)
            display[n] += w / total * ((s - low) / (top - low) if top > low else 1.0)
        for n in notes:
            if n not in z and n in blind.get(leg, ()):
                continue
            score[n] += w * z.get(n, floor - MISSING_GAP)
    found = {leg: {n for n, _ in hits} for leg, hits in ran.items()}
    for n in notes:
        seen = sum(weights[leg] for leg in ran
                   if n in found[leg] or n not in blind.get(leg, ()))
        if 0 < seen < total:
            score[n] *= total / seen
    if exact:
        span = (max(score.values()) - min(score.values())) + 1.0
        for rank, n in enumerate(dict.fromkeys(exact), 1):
            score[n] += exact_weight * span * (len(exact) - rank + 1)
            display[n] = max(display[n], 1.0 / rank)
            ranks[n]["exact"] = rank
    out = [NoteScore(n, score[n], min(1.0, display[n]), ranks[n]) for n in notes]
    out.sort(key=lambda f: (-f.score, min(f.ranks.values(), default=0), str(f.note)))
    return out


# A leg's sure hit (issue 22): a note the fusion must show near the top whatever the other legs
# say. SURE_GAP: a leg's best note stands this many of the leg's standard deviations above its
# second. SURE_FEW: a keyword leg that ran out of matches found at most this many notes (the
# query's words occur nowhere else: a rare word). SURE_PLACE: the rank a sure hit is lifted to
# when the fusion put it lower. On the shared sets (bench/tune_fusion.py, "guard" rows;
# decision 0027) the guard at place 3 moves no score by more than 0.001: it protects the
# cases they lack without moving what they measure.
SURE_GAP = 2.0
SURE_FEW = 3
SURE_PLACE = 3


def sure_hits(hits: Sequence[tuple[Hashable, float]], *, exhausted: bool = False
              ) -> list[Hashable]:
    """The notes of one leg's per-note hits (best first) that are sure: all of them when an
    ``exhausted`` leg (it returned fewer than it was asked for) found at most SURE_FEW, else
    its best note when it stands SURE_GAP deviations above the second."""
    if not hits:
        return []
    if exhausted and len(hits) <= SURE_FEW:
        return [n for n, _ in hits]
    if len(hits) < 3:
        return []
    values = [s for _, s in hits]
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return [hits[0][0]] if sd > 0 and (values[0] - values[1]) / sd >= SURE_GAP else []


def keep_sure(notes: Sequence[NoteScore], sure: Sequence[Hashable],
              place: int = SURE_PLACE) -> list[NoteScore]:
    """``notes`` with each sure note that ranks below ``place`` lifted to it (in the order
    given: the first sure note ends highest)."""
    out = list(notes)
    index = {n.note: n for n in out}
    for note in reversed(list(dict.fromkeys(sure))):
        item = index.get(note)
        if item is None or out.index(item) < place:
            continue
        out.remove(item)
        out.insert(place - 1, item)
    return out


def rare_first(notes: Sequence[NoteScore], rare: Sequence[frozenset[Hashable]]
               ) -> list[NoteScore]:
    """``notes`` with those holding the query's rare words first (each set in ``rare``: the
    documents that hold one rare word, the rarest word first), in their order otherwise: a
    document holding a rare word never ranks below one without it; where two rare words are
    held by different documents, the rarer word's go first (issue 36)."""
    if not rare:
        return list(notes)
    held = {n.note: tuple(n.note not in holders for holders in rare) for n in notes}
    return sorted(notes, key=lambda n: held[n.note])  # stable: the fused order within
