"""Tune hybrid search's z-score fusion weights on tuning sets; check them on held-out sets.

    python bench/tune_fusion.py --home ~/.cache/ragd-bench/quality

Hybrid search ranks notes by a weighted sum of z-scores of three legs (decision 0010):
semantic (`search.z_semantic_weight`), note (`search.z_note_weight`: the semantic hits on a
note's opening chunk and properties) and keyword (`search.z_keyword_weight`). This script
sweeps the weight triples of GRID on the **tuning** sets, the train split of BEIR SciFact
(809 queries) and the known items over obsidian-help-en, and picks the triple whose worst
margin over the best single leg of a tuning set is largest ("hybrid beats each of its legs
by the most, on the set where it beats them least"); among the triples within MIN_GAIN of
that, the one with the largest mean margin. It then reports that triple, the
configured defaults and today's RRF ranking on data the choice never saw: the SciFact
**test** split (300 queries) and the known items over kepano-obsidian. The verdict says to
change the defaults only when the best triple gains at least MIN_GAIN on that criterion.

Not swept: the fourth leg, the keyword note leg of decision 0037
(`search.z_keyword_note_weight`, 0.15). It is fused with weight 0 here, so the "configured"
row is the engine without it, a little below bench/quality.py on SciFact and obsidian-hub;
bench/search_ideas.py measures that leg against the hybrid of before.

Each query's legs are run once, through the real `SearchEngine` leg methods, and every
setting is then fused from them with the real `zscore_fusion` (the RRF reference with `rrf`
and `collapse`), ranking documents as bench/quality.py scores them (one result per note).

It reads the indexes that `bench/quality.py --home DIR` builds (DIR/scifact and
DIR/known-<vault>), so run that first. Prints tables and writes bench/results/tune_fusion.json.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, table, write_json  # noqa: E402
from bench.metrics import evaluate, mrr  # noqa: E402
from bench.quality import (  # noqa: E402
    K,
    known_items_vault,
    load_known_items,
    load_scifact,
    ragd_app,
    scifact_home,
)
from ragd.daemon.search.engine import NOTE_LEG_GROWTH, NOTE_LEG_MIN  # noqa: E402

LEG_DEPTH = 50  # what the engine fetches per leg for top_k=10 (search.overfetch)
MIN_GAIN = 0.005  # criterion gain a setting must have over the defaults to replace them
TUNE_KNOWN = REPO / "bench" / "queries" / "obsidian-help-en.tsv"
CHECK_KNOWN = REPO / "bench" / "queries" / "kepano-obsidian.tsv"
# (semantic, note, keyword) weights; they sum to 1.
GRID = [(round(1 - kw - note, 2), note, kw) for kw in (0.2, 0.25, 0.3, 0.35, 0.4, 0.45)
        for note in (0.1, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5) if kw + note <= 0.9]
Setting = tuple[float, float, float]
RRF = "rrf (k=60, equal weights)"


@dataclass
class Legs:
    """One query's scored legs, as chunk ids, and the note of each chunk."""

    keyword: list[tuple[int, float]]
    semantic: list[tuple[int, float]]
    titles: list[int]
    phrase: list[tuple[int, float]]
    # The semantic leg NOTE_LEG_GROWTH times deeper: where the engine reads a starved note leg.
    deep: list[tuple[int, float]] = field(default_factory=list)


def run_legs(app: Any, queries: Sequence[str], document: Callable[[str], str] = str
             ) -> tuple[list[Legs], dict[int, str], dict[int, int]]:
    """Each query's legs, chunk id -> ``document(path relative to the collection root)`` and
    chunk id -> ordinal (negative for properties chunks, 0 for openings: ``opening_ordinals``)."""
    from ragd.daemon.search.filters import Filters

    engine = app.search_engine
    app.embedder.warm_up()
    none = Filters()
    out: list[Legs] = []
    for n, q in enumerate(queries, 1):
        query = " ".join(q.split())
        deep = engine.semantic_hits(query, LEG_DEPTH * NOTE_LEG_GROWTH, none)
        out.append(Legs(engine.keyword_hits(query, LEG_DEPTH, none), deep[:LEG_DEPTH],
                        engine.title_leg(query, none),
                        engine.phrase_hits(query, LEG_DEPTH, none), deep))
        if n % 200 == 0:
            print(f"  {n:,}/{len(queries):,} queries", file=sys.stderr, flush=True)
    ids = sorted({c for lg in out for c in [*lg.titles, *(i for i, _ in [*lg.keyword,
                                                                          *lg.deep,
                                                                          *lg.phrase])]})
    rows = app.catalog.chunks_by_id(ids)
    return out, {i: document(r.path) for i, r in rows.items()}, opening_ordinals(app, rows)


def opening_ordinals(app: Any, rows: dict[int, Any]) -> dict[int, int]:
    """Chunk id -> ordinal, as the note legs read it: a chunk the engine takes for its note's
    opening behind first chunks that say nothing (``SearchEngine.openings``, decision 0039)
    counts as 0, so ``<= 0`` means an opening or properties chunk here as in the engine."""
    opening = app.search_engine.openings(rows, list(rows))
    return {i: 0 if i in opening and r.ordinal > 0 else r.ordinal for i, r in rows.items()}


def fuse(lg: Legs, doc_of: dict[int, str], ordinal: dict[int, int], setting: Setting | str,
         k: int = K, guard: bool = True) -> list[str]:
    """The top ``k`` documents of one query under one setting, as the engine ranks them."""
    from ragd.daemon.search.fusion import (
        best_per_note,
        collapse,
        keep_sure,
        rrf,
        sure_hits,
        zscore_fusion,
    )

    def live(hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
        return [(c, s) for c, s in hits if c in doc_of]

    if isinstance(setting, str):  # today's ranking: RRF over chunks
        legs = {"keyword": [c for c, _ in live(lg.keyword)],
                "semantic": [c for c, _ in live(lg.semantic)],
                "exact": [c for c in lg.titles if c in doc_of]
                + [c for c, _ in live(lg.phrase)]}
        fused = rrf(legs, {"keyword": 1.0, "semantic": 1.0, "exact": 1.0}, 60)
        return [doc_of[f.id] for f in collapse(fused, doc_of.__getitem__, 1, k)]
    sem_w, note_w, kw_w = setting
    note_of: Callable[[int], Hashable] = doc_of.__getitem__
    sem = live(lg.semantic)
    heads = [(c, s) for c, s in sem if ordinal[c] <= 0]
    if len({note_of(c) for c, _ in heads}) < NOTE_LEG_MIN and len(lg.semantic) >= LEG_DEPTH:
        heads = [(c, s) for c, s in live(lg.deep) if ordinal[c] <= 0]  # as the engine does
    per_note = {"semantic": best_per_note(sem, note_of),
                "note": best_per_note(heads, note_of),
                "keyword": best_per_note(live(lg.keyword), note_of),
                "phrase": best_per_note(live(lg.phrase), note_of)}
    notes = zscore_fusion(
        per_note, {"semantic": sem_w, "note": note_w, "keyword": kw_w, "phrase": kw_w},
        exact=[doc_of[c] for c in lg.titles if c in doc_of])
    if guard:  # the engine's sure-hit guard (decision 0027)
        notes = keep_sure(notes, [*sure_hits(per_note["keyword"],
                                             exhausted=len(lg.keyword) < LEG_DEPTH),
                                  *sure_hits(per_note["semantic"])])
    return [str(n.note) for n in notes[:k]]


def single_legs(lg: Legs, doc_of: dict[int, str], k: int = K) -> dict[str, list[str]]:
    """The semantic and keyword legs alone, as documents (their modes' rankings, near enough)."""
    out = {}
    for name, hits in (("semantic", lg.semantic), ("keyword", lg.keyword)):
        docs = list(dict.fromkeys(doc_of[c] for c, _ in hits if c in doc_of))
        out[name] = docs[:k]
    return out


@dataclass
class EvalSet:
    name: str
    metric: str
    legs: list[Legs]
    doc_of: dict[int, str]
    ordinal: dict[int, int]
    score: Callable[[list[list[str]]], float]

    def of(self, setting: Setting | str, guard: bool = True) -> float:
        return self.score([fuse(lg, self.doc_of, self.ordinal, setting, guard=guard)
                           for lg in self.legs])

    def leg(self, name: str) -> float:
        return self.score([single_legs(lg, self.doc_of)[name] for lg in self.legs])


def scifact_set(home: Path, split: str) -> EvalSet:
    _, queries, qrels = load_scifact(False, split)
    qids = list(queries)
    with ragd_app(home) as app:
        print(f"SciFact {split}: {len(qids)} queries ...", file=sys.stderr, flush=True)
        legs, doc_of, ordinal = run_legs(app, [queries[q] for q in qids],
                                         lambda p: Path(p).stem)

    def score(rankings: list[list[str]]) -> float:
        return evaluate(dict(zip(qids, rankings, strict=True)), qrels, K)[f"ndcg@{K}"]

    return EvalSet(f"SciFact {split}", f"nDCG@{K}", legs, doc_of, ordinal, score)


def known_set(root: Path, path: Path) -> EvalSet:
    rows, named = load_known_items(path)
    vault = known_items_vault(rows, named, None)
    home = root / f"known-{vault.name}"
    if not (home / "data" / "catalog.sqlite").is_file():
        sys.exit(f"error: no index at {home}: run `bench/quality.py --home {root}` first")
    with ragd_app(home) as app:
        print(f"known items {vault.name}: {len(rows)} questions ...", file=sys.stderr,
              flush=True)
        legs, doc_of, ordinal = run_legs(app, [q for q, _ in rows])
    expected = [e for _, e in rows]

    def score(rankings: list[list[str]]) -> float:
        return mrr(rankings, expected, K)[f"mrr@{K}"]

    return EvalSet(f"known items {vault.name}", f"MRR@{K}", legs, doc_of, ordinal, score)


def margin(sets: Sequence[EvalSet], values: dict[str, float], legs: dict[str, float]) -> float:
    """The criterion: hybrid minus its best single leg, on the set where that is smallest."""
    return min(values[s.name] - legs[s.name] for s in sets)


def mean_margin(sets: Sequence[EvalSet], values: dict[str, float],
                legs: dict[str, float]) -> float:
    """The tie-break: hybrid minus its best single leg, averaged over the sets."""
    return sum(values[s.name] - legs[s.name] for s in sets) / len(sets)


def choose(settings: Sequence[Setting], crit: dict[Setting, float],
           mean: dict[Setting, float]) -> Setting:
    """The setting with the largest worst margin; among those within MIN_GAIN of it (the
    noise of a 35-question set is one rank change), the one with the largest mean margin."""
    top = max(crit.values())
    near = [st for st in settings if crit[st] >= top - MIN_GAIN]
    return max(near, key=lambda st: (mean[st], crit[st]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--home", type=Path, required=True,
                    help="the --home of a full bench/quality.py run")
    args = ap.parse_args()
    root = args.home.expanduser().resolve()
    home, _ = scifact_home(root, False)
    if not (home / "data" / "catalog.sqlite").is_file():
        sys.exit(f"error: no index at {home}: run `bench/quality.py --home {root}` first")
    from ragd.daemon.settings.config import SearchConfig

    c = SearchConfig()
    default: Setting = (c.z_semantic_weight, c.z_note_weight, c.z_keyword_weight)
    tune = [scifact_set(home, "train"), known_set(root, TUNE_KNOWN)]
    check = [scifact_set(home, "test"), known_set(root, CHECK_KNOWN)]
    settings: list[Setting] = list(dict.fromkeys([*GRID, default]))
    legs = {s.name: max(s.leg("semantic"), s.leg("keyword")) for s in tune + check}
    grid = {st: {s.name: s.of(st) for s in tune} for st in settings}
    crit = {st: margin(tune, v, legs) for st, v in grid.items()}
    mean = {st: mean_margin(tune, v, legs) for st, v in grid.items()}
    best = choose(settings, crit, mean)
    gain = max(crit[best] - crit[default], mean[best] - mean[default])
    verdict = ("change the defaults" if best != default and gain >= MIN_GAIN else
               f"keep the defaults (the best setting gains < {MIN_GAIN} on the criterion)")
    print(table("tuning sets: hybrid by (semantic, note, keyword) weights; criterion = worst "
                "margin over the best single leg",
                [[f"{st}", *[grid[st][s.name] for s in tune], crit[st], mean[st]]
                 for st in sorted(settings, key=lambda st: -crit[st])],
                ["weights", *[f"{s.name} {s.metric}" for s in tune], "criterion",
                 "mean margin"]))
    compare: list[Setting | str] = [RRF, default]
    if best != default:
        compare.append(best)
    rows_out = []
    for st in compare:
        label = st if isinstance(st, str) else (
            ("default " if st == default else "best on tuning ") + str(st))
        rows_out.append([label, *[s.of(st) for s in tune + check]])
    rows_out.append(["default without the sure-hit guard",
                     *[s.of(default, guard=False) for s in tune + check]])
    rows_out += [[f"{leg} leg alone", *[s.leg(leg) for s in tune + check]]
                 for leg in ("semantic", "keyword")]
    print(table("tuning and held-out sets", rows_out,
                ["setting", *[f"{s.name} {s.metric}" for s in tune + check]]))
    print(f"verdict: {verdict}")
    path = write_json("tune_fusion", {
        "grid": [{"weights": list(st), **grid[st], "criterion": crit[st],
                  "mean_margin": mean[st]} for st in settings],
        "default": list(default), "best_on_tuning": list(best), "verdict": verdict,
        "min_gain": MIN_GAIN,
        "held_out": [{"setting": st if isinstance(st, str) else list(st),
                      **{s.name: s.of(st) for s in tune + check}} for st in compare],
        "single_legs": {s.name: {leg: s.leg(leg) for leg in ("semantic", "keyword")}
                        for s in tune + check},
        "queries": {s.name: len(s.legs) for s in tune + check}})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
