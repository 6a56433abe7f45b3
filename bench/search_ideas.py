"""Ideas for better hybrid ranking, measured offline on the quality sets (decision 0031).

    python bench/search_ideas.py --home ~/.cache/ragd-bench/quality

Each query's legs are run once through the real `SearchEngine` (keyword and semantic 100 deep,
titles, phrases), with everything a variant needs beside them: the query vector, every chunk's
vector, the keyword index's postings of the query terms and of any term a variant adds, and a
vector of each note's title. Every variant is then a different way to build the legs or fuse
them, scored as bench/tune_fusion.py scores the engine's ranking (one result per note; nDCG@10
on BEIR SciFact, MRR@10 on the known items). Row 1 ("engine") is today's hybrid, reproduced
offline to the third decimal.

The protocol of bench/tune_fusion.py: SciFact **train** and the obsidian-help-en known items
choose; SciFact **test** and the kepano-obsidian known items only check. A variant is worth
building when it lowers no set and lifts the held-out ones; the "verdict" column says which do.

Decision 0037's ideas (a keyword note leg, a note-vector leg, BM25F title and heading fields,
a proximity bonus, leg weights from the leg's confidence, every candidate scored in every leg)
are built on the hybrid of before it, and a second table compares each with that hybrid query
by query: the mean difference, its standard error and how many queries went up and down. On a
35-question set one rank change moves MRR@10 by up to 0.014; a difference within one standard
error is noise.

Decision 0040's rows ("opening paragraphs") add a vector per paragraph of every opening or
properties chunk of two or more paragraphs (embedded here, so a run embeds a few thousand short
texts more on obsidian-hub), scored as a vector of its chunk: the semantic leg alone, and
today's hybrid with them in the semantic and note legs or in the note leg only.

It also prints, per set, the share of queries on which today's hybrid scores at least as well
as each leg, and below the better of the two on that query; and per known-item set the best
MRR@10 any fusion monotone in each leg's note score could reach, with its weights chosen per
query (a note that beats the expected one in every leg ranks above it, whatever the weights).

Reads the indexes of `bench/quality.py --home DIR` (run it first); the Whoosh backend only
(the variants read its postings). Prints tables and writes bench/results/search_ideas.json.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table, write_json  # noqa: E402
from bench.metrics import ndcg_at_k, reciprocal_rank  # noqa: E402
from bench.quality import (  # noqa: E402
    K,
    known_items_vault,
    load_known_items,
    load_scifact,
    ragd_app,
    scifact_home,
)
from bench.tune_fusion import CHECK_KNOWN, TUNE_KNOWN, opening_ordinals  # noqa: E402
from ragd.daemon.search import fusion as F  # noqa: E402
from ragd.daemon.search.boilerplate import without_boilerplate  # noqa: E402

DEPTH = 50  # what the engine fetches per leg for top_k=10
DEEP = 100  # what is kept per leg, for the variants that read deeper
WEIGHTS = (0.25, 0.4, 0.35)  # the defaults (semantic, note, keyword): decision 0010
TUNE = ("SciFact train", "obsidian-help-en")


@dataclass
class Query:
    text: str
    vec: np.ndarray
    terms: list[str]
    keyword: list[tuple[int, float]]
    semantic: list[tuple[int, float]]
    titles: list[int]
    phrase: list[tuple[int, float]]


@dataclass
class Set:
    """One query set with its index, as arrays a variant can score without the engine."""

    name: str
    queries: list[Query]
    judge: Callable[[int, list[str]], float]  # query number, ranked notes -> nDCG or RR
    note: dict[int, str]  # chunk id -> note
    ordinal: dict[int, int]
    text: dict[int, str]
    title: dict[int, str]
    ids: np.ndarray  # chunk ids with a vector, rows of V
    V: np.ndarray
    docnum_chunk: np.ndarray  # keyword document number -> chunk id (-1: deleted)
    lengths: np.ndarray  # keyword field length per document number
    avg_length: float
    postings: Any  # ragd.daemon.stores.whoosh_postings.Postings (for terms a variant adds)
    headings: dict[int, list[str]] = field(default_factory=dict)  # chunk id -> heading path
    note_titles: list[str] = field(default_factory=list)
    title_vectors: np.ndarray | None = None
    boilerplate: set[int] = field(default_factory=set)  # decision 0026: dropped from legs
    # Decision 0040: each paragraph of an opening chunk embedded on its own, as a vector of
    # that chunk (part_ids[j] is the chunk of part_V[j]).
    part_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    part_V: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), dtype=np.float32))
    cache: dict[Any, Any] = field(default_factory=dict)

    def docs(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        key = ("postings", term)
        if key not in self.cache:
            self.cache[key] = self.postings.docs(term)
        return self.cache[key]  # type: ignore[no-any-return]

    def row(self) -> dict[int, int]:
        if "row" not in self.cache:
            self.cache["row"] = {int(c): j for j, c in enumerate(self.ids)}
        return self.cache["row"]  # type: ignore[no-any-return]

    def chunks_of(self, heads: bool) -> dict[str, list[int]]:
        key = ("chunks", heads)
        if key not in self.cache:
            out: dict[str, list[int]] = {}
            row = self.row()
            for c, n in self.note.items():
                if c in row and (not heads or self.ordinal[c] <= 0):
                    out.setdefault(n, []).append(c)
            self.cache[key] = out
        return self.cache[key]  # type: ignore[no-any-return]


# -- collecting ---------------------------------------------------------------------------------
def collect(app: Any, name: str, texts: Sequence[str], judge: Callable[[int, list[str]], float],
            document: Callable[[str], str] = str) -> Set:
    from ragd.daemon.search.filters import Filters
    from ragd.daemon.stores.whoosh_postings import _segment_lengths

    engine = app.search_engine
    app.embedder.warm_up()
    none = Filters()
    queries = []
    for n, q in enumerate(texts, 1):
        query = " ".join(q.split())
        vec = app.embedder.embed_query(query)
        queries.append(Query(query, vec, engine.query_terms(query),
                             engine.keyword_hits(query, DEEP, none),
                             engine._semantic(vec, DEEP, none), engine.title_leg(query, none),
                             engine.phrase_hits(query, DEEP, none)))
        if n % 200 == 0:
            print(f"  {name}: {n:,}/{len(texts):,} queries", file=sys.stderr, flush=True)
    cat = app.catalog
    all_ids = sorted(cat.all_chunk_ids())
    rows = cat.chunks_by_id(all_ids)
    vectors = cat.chunk_vectors(app.embedder.fingerprint, all_ids)
    ids = np.array([i for i in all_ids if i in vectors], dtype=np.int64)
    # A searcher of our own: the app's closes with it, and RM3 reads terms after that.
    from whoosh import index

    from ragd.daemon.stores.whoosh_postings import Postings

    searcher = index.open_dir(str(engine.whoosh.dir)).searcher()
    postings = Postings(searcher, "text")
    docnum_chunk = np.full(postings.doc_count, -1, dtype=np.int64)
    for d in np.flatnonzero(postings.live):
        docnum_chunk[d] = int(searcher.stored_fields(int(d))["chunk_id"])
    lengths = np.concatenate([_segment_lengths(leaf, "text") for leaf, _, _ in postings.leaves])
    s = Set(name, queries, judge, {i: document(r.path) for i, r in rows.items()},
            opening_ordinals(app, rows), {i: r.text for i, r in rows.items()},
            {i: r.title for i, r in rows.items()}, ids,
            np.stack([vectors[int(i)] for i in ids]).astype(np.float32), docnum_chunk,
            lengths, float(searcher.avg_field_length("text") or 1), postings)
    s.boilerplate = cat.boilerplate(all_ids)
    s.headings = {i: list(r.heading_path) for i, r in rows.items()}
    titles: dict[str, str] = {}
    for i, r in rows.items():
        titles.setdefault(s.note[i], r.title or Path(r.path).stem)
    s.note_titles = sorted(titles)
    s.title_vectors = np.stack([app.embedder.embed_query(titles[n]) for n in s.note_titles])
    s.part_ids, s.part_V = opening_parts(app, s, rows)
    return s


def opening_parts(app: Any, s: Set, rows: dict[int, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Every opening or properties chunk of two or more paragraphs that say something: each
    such paragraph embedded on its own, with the chunk's title and heading prefix."""
    from ragd.daemon.text.chunking import embed_prefix, embed_text
    from ragd.daemon.text.reading import hidden, reading, says_something

    owners: list[int] = []
    texts: list[str] = []
    for c in s.ids:
        cid = int(c)
        if s.ordinal[cid] > 0:
            continue
        paragraphs = [reading(p, hidden(p)).strip() for p in _PARAGRAPH.split(s.text[cid])]
        paragraphs = [p for p in paragraphs if says_something(p) and not _HEADING_ONLY.fullmatch(p)]
        if len(paragraphs) < 2:
            continue
        prefix = embed_prefix(rows[cid].title, rows[cid].heading_path)
        owners += [cid] * len(paragraphs)
        texts += [embed_text(prefix, p) for p in paragraphs]
    print(f"  {s.name}: embedding {len(texts):,} opening paragraphs", file=sys.stderr, flush=True)
    vectors = app.embedder.embed(texts) if texts else np.zeros((0, s.V.shape[1]))
    return np.array(owners, dtype=np.int64), np.asarray(vectors, dtype=np.float32)


_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_HEADING_ONLY = re.compile(r"#{1,6}[ \t][^\n]*")


def scifact_sets(root: Path) -> list[Set]:
    home, _ = scifact_home(root, False)
    out = []
    for split in ("train", "test"):
        _, queries, qrels = load_scifact(False, split)
        qids = list(queries)

        def judge(i: int, ranked: list[str], qids: list[str] = qids,
                  qrels: dict[str, dict[str, int]] = qrels) -> float:
            return ndcg_at_k(ranked, qrels[qids[i]], K)

        with ragd_app(home) as app:
            out.append(collect(app, f"SciFact {split}", [queries[q] for q in qids], judge,
                               lambda p: Path(p).stem))
    return out


def known_set(root: Path, path: Path) -> Set:
    rows, named = load_known_items(path)
    vault = known_items_vault(rows, named, None)
    expected = [e for _, e in rows]
    with ragd_app(root / f"known-{vault.name}") as app:
        return collect(app, vault.name, [q for q, _ in rows],
                       lambda i, ranked: reciprocal_rank(ranked, [expected[i]], K))


# -- legs ---------------------------------------------------------------------------------------
def bm25(s: Set, weighted: dict[str, float], k1: float = 1.2, b: float = 0.75,
         coord: float = 0.0, k: int = DEEP) -> list[tuple[int, float]]:
    """BM25 over the keyword index's postings, as whoosh_postings.Postings scores it, with
    per-term weights (1.0 for the query's own terms) and other k1 and b."""
    n_docs = len(s.docnum_chunk)
    norm = k1 * ((1 - b) + b * s.lengths / s.avg_length)
    total = np.zeros(n_docs)
    matched = np.zeros(n_docs)
    for term, w in weighted.items():
        ids, freqs = s.docs(term)
        if not len(ids):
            continue
        idf = math.log(n_docs / (len(ids) + 1)) + 1
        tf = freqs.astype(np.float64)
        total[ids] += w * idf * tf * (k1 + 1) / (tf + norm[ids])
        matched[ids] += 1
    if coord:
        total *= (matched / max(1, len(weighted))) ** coord
    docs = np.flatnonzero((total > 0) & (s.docnum_chunk >= 0))
    if len(docs) > k:
        docs = docs[np.argpartition(-total[docs], k - 1)[:k]]
    docs = docs[np.lexsort((docs, -total[docs]))]
    return [(int(s.docnum_chunk[d]), float(total[d])) for d in docs]


def dense(s: Set, vec: np.ndarray, k: int = DEEP) -> list[tuple[int, float]]:
    scores = s.V @ vec
    top = np.argpartition(-scores, k)[:k] if len(scores) > k else np.arange(len(scores))
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(int(s.ids[j]), float(scores[j])) for j in top]


def dense_parts(s: Set, vec: np.ndarray, k: int = DEEP) -> list[tuple[int, float]]:
    """``dense`` with each chunk scored by the best of its own vector and its paragraphs'.

    A chunk in the top ``k`` by that score is in the top ``k`` by its own vector, or one of
    its paragraphs is among the best ``4 k`` (a chunk has two to a few paragraphs)."""
    best = dict(dense(s, vec, k))
    if len(s.part_ids):
        scores = s.part_V @ vec
        top = np.argsort(-scores, kind="stable")[:4 * k]
        for j in top:
            c, x = int(s.part_ids[j]), float(scores[j])
            if x > best.get(c, -np.inf):
                best[c] = x
    return sorted(best.items(), key=lambda t: -t[1])[:k]


def with_parts(note_only: bool) -> Variant:
    """Today's hybrid with opening paragraphs as vectors of their chunk (decision 0040), in
    the semantic and note legs, or in the note leg only."""
    def run(s: Set, q: Query) -> list[str]:
        hits = dense_parts(s, q.vec)
        lg = today(s, q, semantic=None if note_only else hits, note_source=hits,
                   search=dense_parts)
        return fuse(lg, extra={"keyword_note": keyword_note_weighted(s, q)})
    return run


def per_note(s: Set, hits: Sequence[tuple[int, float]],
             soft: float = 0.0) -> list[tuple[Hashable, float]]:
    """A leg's notes scored by their best chunk, plus ``soft`` times the mean of the rest."""
    if not soft:
        return F.best_per_note(hits, s.note.__getitem__)
    grouped: dict[str, list[float]] = {}
    for c, x in hits:
        grouped.setdefault(s.note[c], []).append(x)
    out = [(n, v[0] + soft * (sum(v[1:]) / len(v[1:]) if len(v) > 1 else 0.0))
           for n, v in grouped.items()]
    return sorted(out, key=lambda t: -t[1])


@dataclass
class Legs:
    """The note-level legs of one query, before fusion."""

    per_note: dict[str, list[tuple[Hashable, float]]]
    exact: list[Hashable]
    keyword_exhausted: bool


def legs(s: Set, q: Query, keyword: Sequence[tuple[int, float]] | None = None,
         semantic: Sequence[tuple[int, float]] | None = None,
         note_source: Sequence[tuple[int, float]] | None = None, depth: int = DEPTH,
         soft: float = 0.0) -> Legs:
    kw = list(keyword if keyword is not None else q.keyword)[:depth]
    exhausted = len(kw) < depth
    kw, sem, phrase, feedback = without_boilerplate(
        s.boilerplate.intersection,
        kw, list(semantic if semantic is not None else q.semantic)[:depth], q.phrase[:depth],
        list(note_source)[:depth] if note_source is not None else [])
    heads = [(c, x) for c, x in (feedback if note_source is not None else sem)
             if s.ordinal[c] <= 0]
    return Legs({"semantic": per_note(s, sem, soft), "note": per_note(s, heads, soft),
                 "keyword": per_note(s, kw, soft),
                 "phrase": F.best_per_note(phrase, s.note.__getitem__)},
                [s.note[c] for c in q.titles if c in s.note], exhausted)


def fuse(lg: Legs, weights: tuple[float, float, float] = WEIGHTS,
         extra: dict[str, tuple[list[tuple[Hashable, float]], float]] | None = None,
         bonus: Callable[[F.NoteScore], float] | None = None) -> list[str]:
    """The engine's z-score fusion and sure-hit guard, with optional extra legs and a bonus."""
    sem_w, note_w, kw_w = weights
    pn = dict(lg.per_note)
    w = {"semantic": sem_w, "note": note_w, "keyword": kw_w, "phrase": kw_w}
    for name, (hits, weight) in (extra or {}).items():
        pn[name], w[name] = hits, weight
    notes = F.zscore_fusion(pn, w, exact=lg.exact)
    if bonus is not None:
        notes.sort(key=lambda n: (-(n.score + bonus(n)), str(n.note)))
    notes = F.keep_sure(notes, [*F.sure_hits(pn["keyword"], exhausted=lg.keyword_exhausted),
                                *F.sure_hits(pn["semantic"])])
    return [str(n.note) for n in notes[:K]]


def notes_of(s: Set, hits: Sequence[tuple[int, float]]) -> list[str]:
    """A leg alone, as its mode ranks notes (boilerplate dropped, decision 0026)."""
    kept = without_boilerplate(s.boilerplate.intersection, list(hits)[:DEPTH])[0]
    return list(dict.fromkeys(s.note[c] for c, _ in kept))[:K]


# -- the ideas ----------------------------------------------------------------------------------
def engine(s: Set, q: Query) -> list[str]:
    """Today's hybrid: a note leg of fewer than NOTE_LEG_MIN notes read deeper (decision 0031),
    and a keyword note leg (decision 0037)."""
    return fuse(today(s, q), extra={"keyword_note": keyword_note_weighted(s, q)})


def keyword_note_weighted(s: Set, q: Query) -> tuple[list[tuple[Hashable, float]], float]:
    """The keyword note leg (decision 0037) with the engine's weight."""
    from ragd.daemon.search.engine import SearchSettings

    return keyword_note_leg(s, q), SearchSettings().z_keyword_note_weight


def today(s: Set, q: Query, semantic: Sequence[tuple[int, float]] | None = None,
          note_source: Sequence[tuple[int, float]] | None = None,
          search: Callable[[Set, np.ndarray, int], list[tuple[int, float]]] = dense) -> Legs:
    """The legs of the hybrid of before decision 0037 (the note leg read deeper when starved):
    ``legs`` with ``semantic`` and ``note_source``, and ``search`` for the deeper read."""
    from ragd.daemon.search.engine import NOTE_LEG_GROWTH, NOTE_LEG_MIN

    lg = legs(s, q, semantic=semantic, note_source=note_source)
    if len(lg.per_note["note"]) < NOTE_LEG_MIN:
        deep = without_boilerplate(s.boilerplate.intersection,
                                   search(s, q.vec, DEPTH * NOTE_LEG_GROWTH))[0]
        lg.per_note["note"] = F.best_per_note([(c, x) for c, x in deep if s.ordinal[c] <= 0],
                                              s.note.__getitem__)
    return lg


def before_0037(s: Set, q: Query) -> list[str]:
    """The hybrid of before decision 0037: no keyword note leg."""
    return fuse(today(s, q))


def keyword_note_leg(s: Set, q: Query, depth: int = DEPTH) -> list[tuple[Hashable, float]]:
    """The keyword note leg: the openings and properties chunks among the keyword leg's
    ``depth`` best, per note (the engine's, decision 0037)."""
    kw = without_boilerplate(s.boilerplate.intersection, q.keyword[:depth])[0]
    return F.best_per_note([(c, x) for c, x in kw if s.ordinal[c] <= 0], s.note.__getitem__)


def before_0031(s: Set, q: Query) -> list[str]:
    """The hybrid of before decision 0031: the note leg only from the top 50 chunks."""
    return fuse(legs(s, q))


def feedback_vector(s: Set, q: Query, m: int = 1, beta: float = 0.5) -> np.ndarray:
    """Rocchio on the query vector: plus ``beta`` times the mean vector of the best chunks of
    the fused top ``m`` notes."""
    top = fuse(legs(s, q))[:m]
    best: dict[str, int] = {}
    for c, _ in [*q.semantic, *q.keyword]:
        if s.note[c] in top and c in s.row():
            best.setdefault(s.note[c], c)
    if not best:
        return q.vec
    v = q.vec + beta * np.mean([s.V[s.row()[c]] for c in best.values()], axis=0)
    return (v / np.linalg.norm(v)).astype(np.float32)


def rm3(s: Set, q: Query, m: int = 1, lam: float = 0.2, n_terms: int = 10,
        source: str = "fused") -> dict[str, float]:
    """RM3: the query's terms (1 - lam) plus the ``n_terms`` likeliest terms of the best chunk
    of each feedback note (lam); feedback from the fused top ``m`` or the keyword top ``m``."""
    from ragd.daemon.stores.fulltext import _analyzer

    analyse = s.cache.setdefault("analyser", _analyzer())
    top = fuse(legs(s, q))[:m] if source == "fused" else notes_of(s, q.keyword)[:m]
    best: dict[str, int] = {}
    for c, _ in [*q.keyword, *q.semantic]:
        if s.note[c] in top:
            best.setdefault(s.note[c], c)
    likely: dict[str, float] = {}
    for c in best.values():
        counts = Counter(t.text for t in analyse(f"{s.title[c]}\n{s.text[c]}"))
        size = sum(counts.values()) or 1
        for t, f in counts.items():
            if len(t) > 2 and not t.isdigit():
                likely[t] = likely.get(t, 0.0) + f / size / len(best)
    expansion = dict(sorted(likely.items(), key=lambda kv: -kv[1])[:n_terms])
    total = sum(expansion.values()) or 1.0
    own = list(dict.fromkeys(q.terms))
    weights = {t: (1 - lam) / len(own) for t in own}
    for t, p in expansion.items():
        weights[t] = weights.get(t, 0.0) + lam * p / total
    return weights


def note_bm25(s: Set, q: Query, b: float = 0.75, k1: float = 1.2) -> list[tuple[Hashable, float]]:
    """BM25 over whole notes (a note's chunks' term counts and lengths summed)."""
    if "note_index" not in s.cache:
        names = sorted(set(s.note.values()))
        number = {n: j for j, n in enumerate(names)}
        of_doc = np.array([number[s.note[int(c)]] if c >= 0 else -1 for c in s.docnum_chunk])
        length = np.zeros(len(names))
        live = of_doc >= 0
        np.add.at(length, of_doc[live], s.lengths[live])
        s.cache["note_index"] = (names, of_doc, length)
    names, of_doc, length = s.cache["note_index"]
    norm = k1 * ((1 - b) + b * length / length.mean())
    total = np.zeros(len(names))
    for term in dict.fromkeys(q.terms):
        ids, freqs = s.docs(term)
        notes = of_doc[ids]
        tf = np.zeros(len(names))
        np.add.at(tf, notes[notes >= 0], freqs[notes >= 0])
        has = tf > 0
        idf = math.log(len(names) / (has.sum() + 1)) + 1
        total[has] += idf * tf[has] * (k1 + 1) / (tf[has] + norm[has])
    order = [j for j in np.argsort(-total, kind="stable")[:DEPTH] if total[j] > 0]
    return [(names[j], float(total[j])) for j in order]


def full_note_leg(s: Set, q: Query) -> list[tuple[Hashable, float]]:
    """The note leg scored on every candidate note of every leg: the best cosine of its
    opening and properties chunks, read from the vectors (not only those in the top 50)."""
    lg = legs(s, q)
    candidates = {n for hits in lg.per_note.values() for n, _ in hits} | set(lg.exact)
    heads = s.chunks_of(heads=True)
    row = s.row()
    out: list[tuple[Hashable, float]] = [
        (n, max(float(s.V[row[c]] @ q.vec) for c in heads[str(n)]))
        for n in candidates if heads.get(str(n))]
    return sorted(out, key=lambda t: -t[1])


def title_leg(s: Set, q: Query) -> list[tuple[Hashable, float]]:
    assert s.title_vectors is not None
    scores = s.title_vectors @ q.vec
    return [(s.note_titles[j], float(scores[j])) for j in np.argsort(-scores)[:DEPTH]]


STOP_WORDS = ("i me my myself our ours he him his she her its they them their what which who whom "
        "whose why how where there here than then so such too very just also only own same "
        "other others another each every all any both few more most some no nor do does did "
        "has had was were been being am would should could might must into onto over under "
        "about above below between through during before after again once off out up down "
        "while because until against among within without these those one get make want way "
        "thing")


def without_stop_words(terms: Sequence[str]) -> dict[str, float]:
    from whoosh.lang.porter2 import stem

    words = STOP_WORDS.split()
    stop = set(words) | {stem(w) for w in words}
    kept = [t for t in terms if t not in stop] or list(terms)
    return dict.fromkeys(kept, 1.0)


def rrf_bonus(lg: Legs, alpha: float, k: int) -> Callable[[F.NoteScore], float]:
    w = dict(zip(("semantic", "note", "keyword"), WEIGHTS, strict=True))
    extra: dict[Hashable, float] = {}
    for leg, weight in w.items():
        for rank, (n, _) in enumerate(lg.per_note[leg], 1):
            extra[n] = extra.get(n, 0.0) + weight * alpha * k / (k + rank)
    return lambda n: extra.get(n.note, 0.0)


def with_standardise(fn: Callable[[Sequence[float]], list[float]]
                     ) -> Callable[[Set, Query], list[str]]:
    def run(s: Set, q: Query) -> list[str]:
        saved = F._standardise
        F._standardise = fn  # type: ignore[assignment]
        try:
            return fuse(legs(s, q))
        finally:
            F._standardise = saved  # type: ignore[assignment]
    return run


def robust(values: Sequence[float]) -> list[float]:
    v = np.asarray(values, dtype=np.float64)
    med = float(np.median(v))
    mad = float(np.median(np.abs(v - med))) * 1.4826
    return list((v - med) / mad) if mad > 0 else [0.0] * len(v)


Variant = Callable[[Set, Query], list[str]]


def variants() -> list[tuple[str, str, Variant]]:
    """(group, label, ranking function)."""
    out: list[tuple[str, str, Variant]] = [
        ("reference", "engine (today's hybrid)", engine),
        ("reference", "before decision 0037 (no keyword note leg)", before_0037),
        ("reference", "before decision 0031 (note leg never read deeper)", before_0031),
        ("reference", "semantic leg alone", lambda s, q: notes_of(s, q.semantic)),
        ("reference", "keyword leg alone", lambda s, q: notes_of(s, q.keyword)),
        ("opening paragraphs", "semantic leg alone, opening paragraphs as vectors",
         lambda s, q: notes_of(s, dense_parts(s, q.vec))),
        ("opening paragraphs", "hybrid, opening paragraphs in the semantic and note legs",
         with_parts(note_only=False)),
        ("opening paragraphs", "hybrid, opening paragraphs in the note leg only",
         with_parts(note_only=True)),
    ]
    for k1, b in ((0.9, 0.4), (0.9, 0.9), (1.5, 0.75), (2.0, 0.5)):
        out.append(("keyword leg", f"BM25 k1={k1} b={b} (today 1.2, 0.75)", bm25_variant(k1, b)))
    out += [
        ("keyword leg", "BM25 over whole notes, not chunks",
         lambda s, q: fuse(Legs({**legs(s, q).per_note, "keyword": note_bm25(s, q)},
                                legs(s, q).exact, False))),
        ("keyword leg", "coordination: BM25 x (terms matched / terms)",
         lambda s, q: fuse(legs(s, q, keyword=bm25(s, dict.fromkeys(q.terms, 1.0),
                                                   coord=1.0)))),
        ("keyword leg", "query stop list (pronouns, auxiliaries, wh-words)",
         lambda s, q: fuse(legs(s, q, keyword=bm25(s, without_stop_words(q.terms))))),
        ("keyword leg", "RM3 from the fused top note (lam 0.2)",
         lambda s, q: fuse(legs(s, q, keyword=bm25(s, rm3(s, q, 1, 0.2))))),
        ("keyword leg", "RM3 from the keyword top note (lam 0.2)",
         lambda s, q: fuse(legs(s, q, keyword=bm25(s, rm3(s, q, 1, 0.2, source="keyword"))))),
        ("keyword leg", "RM3 from the keyword top 3 notes (lam 0.2)",
         lambda s, q: fuse(legs(s, q, keyword=bm25(s, rm3(s, q, 3, 0.2, source="keyword"))))),
        ("semantic legs", "Rocchio from the fused top note (0.5): both semantic legs",
         lambda s, q: fuse(legs(s, q, semantic=dense(s, feedback_vector(s, q)),
                                note_source=dense(s, feedback_vector(s, q))))),
        ("semantic legs", "Rocchio from the fused top note (0.5): note leg only",
         lambda s, q: fuse(legs(s, q, note_source=dense(s, feedback_vector(s, q))))),
        ("semantic legs", "Rocchio from the fused top 3 notes (0.5): both legs",
         lambda s, q: fuse(legs(s, q, semantic=dense(s, feedback_vector(s, q, 3)),
                                note_source=dense(s, feedback_vector(s, q, 3))))),
        ("semantic legs", "Rocchio leg added (fused top 2, 0.5), weight 0.2",
         lambda s, q: fuse(legs(s, q), extra={"feedback": (per_note(
             s, dense(s, feedback_vector(s, q, 2))[:DEPTH]), 0.2)})),
        ("semantic legs", "note leg scored on every candidate (real cosines)",
         lambda s, q: fuse(Legs({**legs(s, q).per_note, "note": full_note_leg(s, q)},
                                legs(s, q).exact, legs(s, q).keyword_exhausted))),
        ("semantic legs", "note leg from the top 100 chunks, not 50",
         fuse_note_deep),
        ("semantic legs", "note leg: its own search of opening chunks, 50 deep",
         own_note_leg(DEPTH)),
        ("semantic legs", "note leg: its own search of opening chunks, 100 deep",
         own_note_leg(DEEP)),
        ("semantic legs", "note leg: own search (50) and today's, together",
         own_note_leg(DEPTH, union=True)),
        *[("semantic legs", f"note leg under {n} notes: its own search instead",
           own_note_leg(DEPTH, below=n)) for n in (3, 5, 10)],
        *[("semantic legs", f"note leg under {n} notes: from the top {d} chunks",
           deeper_note_leg(n, d)) for n in (3, 5, 10) for d in (200, 400)],
        *[("semantic legs", f"note leg under {n} notes: {how}", starved_note_leg(n, how))
          for n in (5, 10, 20) for how in ("scale", "blind")],
        ("semantic legs", "title-vector leg added, weight 0.1",
         lambda s, q: fuse(legs(s, q), extra={"title": (title_leg(s, q), 0.1)})),
        ("semantic legs", "title-vector leg added, weight 0.3",
         lambda s, q: fuse(legs(s, q), extra={"title": (title_leg(s, q), 0.3)})),
        ("notes from chunks", "best chunk + 0.1 x mean of the note's other chunks",
         lambda s, q: fuse(legs(s, q, soft=0.1))),
        ("notes from chunks", "best chunk + 0.3 x mean of the note's other chunks",
         lambda s, q: fuse(legs(s, q, soft=0.3))),
        ("fusion", "legs 100 deep (today 50)", lambda s, q: fuse(legs(s, q, depth=DEEP))),
        ("fusion", "legs 30 deep", lambda s, q: fuse(legs(s, q, depth=30))),
        ("fusion", "robust z (median, MAD)", with_standardise(robust)),
        ("fusion", "log(1 + BM25) before z",
         lambda s, q: fuse(legs(s, q, keyword=[(c, math.log1p(x)) for c, x in q.keyword]))),
        ("fusion", "z + 1.0 x weighted RRF (k=1)",
         lambda s, q: fuse(legs(s, q), bonus=rrf_bonus(legs(s, q), 1.0, 1))),
        ("fusion", "z + 4.0 x weighted RRF (k=1)",
         lambda s, q: fuse(legs(s, q), bonus=rrf_bonus(legs(s, q), 4.0, 1))),
    ]
    return out + variants_0037()


def bm25_variant(k1: float, b: float) -> Variant:
    def run(s: Set, q: Query) -> list[str]:
        return fuse(legs(s, q, keyword=bm25(s, dict.fromkeys(q.terms, 1.0), k1, b)))
    return run


def head_search(s: Set, q: Query, k: int = DEPTH) -> list[tuple[int, float]]:
    """The best ``k`` opening and properties chunks over the whole index (a search of its
    own, where the engine reads them off the semantic leg's top 50 chunks)."""
    if "heads" not in s.cache:
        rows = np.array([j for j, c in enumerate(s.ids) if s.ordinal[int(c)] <= 0])
        s.cache["heads"] = (rows, s.V[rows])
    rows, vectors = s.cache["heads"]
    scores = vectors @ q.vec
    top = np.argpartition(-scores, k)[:k] if len(scores) > k else np.arange(len(scores))
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(int(s.ids[rows[j]]), float(scores[j])) for j in top]


def own_note_leg(k: int = DEPTH, union: bool = False, below: int = 0) -> Variant:
    """The note leg from its own search of opening chunks (with today's, when ``union``);
    with ``below``, only when today's found fewer notes than that."""
    def run(s: Set, q: Query) -> list[str]:
        lg = legs(s, q)
        if below and len(lg.per_note["note"]) >= below:
            return fuse(lg)
        hits = head_search(s, q, k)
        if union:
            hits = sorted({*hits, *((c, x) for c, x in q.semantic[:DEPTH] if s.ordinal[c] <= 0)},
                          key=lambda h: -h[1])
        kept = without_boilerplate(s.boilerplate.intersection, hits)[0]
        lg.per_note["note"] = F.best_per_note(kept, s.note.__getitem__)
        return fuse(lg)
    return run


def starved_note_leg(n: int, how: str) -> Variant:
    """A note leg that found fewer than ``n`` notes (a big index: few opening chunks reach
    the semantic top 50) weighs less ("scale": by found / n) or says nothing of the notes it
    did not find ("blind")."""
    def run(s: Set, q: Query) -> list[str]:
        lg = legs(s, q)
        found = len(lg.per_note["note"])
        if found >= n:
            return fuse(lg)
        sem_w, note_w, kw_w = WEIGHTS
        pn = lg.per_note
        w = {"semantic": sem_w, "note": note_w * (found / n if how == "scale" else 1.0),
             "keyword": kw_w, "phrase": kw_w}
        seen = {m for m, _ in pn["note"]}
        every = {m for hits in pn.values() for m, _ in hits} | set(lg.exact)
        blind = {"note": every - seen} if how == "blind" else None
        notes = F.zscore_fusion(pn, w, exact=lg.exact, blind=blind)
        notes = F.keep_sure(notes, [*F.sure_hits(pn["keyword"], exhausted=lg.keyword_exhausted),
                                    *F.sure_hits(pn["semantic"])])
        return [str(m.note) for m in notes[:K]]
    return run


def deeper_note_leg(below: int, depth: int) -> Variant:
    """A note leg that found fewer than ``below`` notes is read off a deeper semantic search
    (its ``depth`` best chunks), the other legs unchanged."""
    def run(s: Set, q: Query) -> list[str]:
        lg = legs(s, q)
        if len(lg.per_note["note"]) >= below:
            return fuse(lg)
        deep = without_boilerplate(s.boilerplate.intersection, dense(s, q.vec, depth))[0]
        lg.per_note["note"] = F.best_per_note([(c, x) for c, x in deep if s.ordinal[c] <= 0],
                                              s.note.__getitem__)
        return fuse(lg)
    return run


def fuse_note_deep(s: Set, q: Query) -> list[str]:
    lg = legs(s, q)
    heads = [(c, x) for c, x in q.semantic[:DEEP] if s.ordinal[c] <= 0]
    lg.per_note["note"] = F.best_per_note(heads, s.note.__getitem__)
    return fuse(lg)


# -- decision 0037: built on the hybrid of before it (``today``) ---------------------------------
def with_keyword_notes(weight: float, depth: int = DEPTH) -> Variant:
    def run(s: Set, q: Query) -> list[str]:
        return fuse(today(s, q), extra={"keyword_note": (keyword_note_leg(s, q, depth), weight)})
    return run


def note_vectors(s: Set) -> tuple[list[str], np.ndarray]:
    """One vector per note: the mean of its chunks' vectors, normalised."""
    if "note_vectors" not in s.cache:
        rows: dict[str, list[int]] = {}
        row = s.row()
        for c, n in s.note.items():
            if c in row:
                rows.setdefault(n, []).append(row[c])
        names = sorted(rows)
        M = np.stack([s.V[rows[n]].mean(0) for n in names])
        M /= np.linalg.norm(M, axis=1, keepdims=True)
        s.cache["note_vectors"] = (names, M.astype(np.float32))
    return s.cache["note_vectors"]  # type: ignore[no-any-return]


def note_vector_leg(s: Set, q: Query, lg: Legs | None = None) -> list[tuple[Hashable, float]]:
    """The notes nearest the query by their mean vector: the best DEPTH of all notes, or,
    given ``lg``, every candidate note of its legs (no search of its own)."""
    names, M = note_vectors(s)
    if lg is not None:
        index = s.cache.setdefault("note_vector_row", {n: j for j, n in enumerate(names)})
        found = {n for hits in lg.per_note.values() for n, _ in hits} | set(lg.exact)
        out = [(n, float(M[index[n]] @ q.vec)) for n in found if n in index]
        return sorted(out, key=lambda t: -t[1])
    scores = M @ q.vec
    top = np.argpartition(-scores, DEPTH)[:DEPTH] if len(scores) > DEPTH else np.arange(len(scores))
    return [(names[j], float(scores[j])) for j in top[np.argsort(-scores[top], kind="stable")]]


def with_note_vectors(weight: float, candidates: bool = False) -> Variant:
    def run(s: Set, q: Query) -> list[str]:
        lg = today(s, q)
        return fuse(lg, extra={"note_vector": (note_vector_leg(s, q, lg if candidates else None),
                                               weight)})
    return run


def field_bm25(s: Set, field_name: str, key: Hashable, terms: Sequence[str]) -> float:
    """BM25 of one note's title (``field_name`` "title", ``key`` a note) or one chunk's
    headings ("headings", a chunk id) as a field of its own (BM25F's extra fields)."""
    from ragd.daemon.stores.fulltext import _analyzer

    cache_key = ("field", field_name)
    if cache_key not in s.cache:
        analyse = s.cache.setdefault("analyser", _analyzer())
        docs: dict[Hashable, Counter[str]] = {}
        for c, n in s.note.items():
            if field_name == "title":
                if n not in docs:
                    docs[n] = Counter(t.text for t in analyse(s.title[c] or ""))
            else:
                docs[c] = Counter(t.text for t in analyse(" ".join(s.headings.get(c, []))))
        df: Counter[str] = Counter()
        for d in docs.values():
            df.update(d.keys())
        avg = sum(sum(d.values()) for d in docs.values()) / max(1, len(docs)) or 1.0
        s.cache[cache_key] = (docs, df, avg)
    docs, df, avg = s.cache[cache_key]
    d = docs.get(key)
    if not d:
        return 0.0
    norm = 1.2 * (0.25 + 0.75 * sum(d.values()) / avg)
    return sum((math.log(len(docs) / (df[t] + 1)) + 1) * d[t] * 2.2 / (d[t] + norm)
               for t in terms if d.get(t))


def field_boost(title: float, headings: float) -> Variant:
    """BM25F: each keyword hit plus ``title`` x its note's title BM25 and ``headings`` x its
    headings' BM25 (the combined field already holds both once)."""
    def run(s: Set, q: Query) -> list[str]:
        kw = sorted(((c, x + title * field_bm25(s, "title", s.note[c], q.terms)
                      + headings * field_bm25(s, "headings", c, q.terms)) for c, x in q.keyword),
                    key=lambda h: -h[1])
        lg = today(s, q)
        lg.per_note["keyword"] = legs(s, q, keyword=kw).per_note["keyword"]
        return fuse(lg)
    return run


def proximity(beta: float, window: int) -> Variant:
    """Each keyword hit plus ``beta`` x the smaller idf of every pair of consecutive query
    terms that occur within ``window`` words of each other in the chunk."""
    from ragd.daemon.stores.fulltext import _analyzer

    def run(s: Set, q: Query) -> list[str]:
        analyse = s.cache.setdefault("analyser", _analyzer())
        words = s.cache.setdefault("chunk_words", {})
        n_docs = len(s.docnum_chunk)
        pairs = list(zip(q.terms, q.terms[1:], strict=False))
        kw = []
        for c, x in q.keyword:
            if c not in words:
                text = "\n".join(p for p in (s.title[c], " ".join(s.headings.get(c, [])),
                                             s.text[c]) if p)
                at: dict[str, list[int]] = {}
                for i, t in enumerate(t.text for t in analyse(text)):
                    at.setdefault(t, []).append(i)
                words[c] = at
            at = words[c]
            bonus = sum(min(math.log(n_docs / (len(s.docs(a)[0]) + 1)),
                            math.log(n_docs / (len(s.docs(b)[0]) + 1))) + 1
                        for a, b in pairs if a in at and b in at
                        and any(abs(i - j) <= window for i in at[a] for j in at[b]))
            kw.append((c, x + beta * bonus))
        kw.sort(key=lambda h: -h[1])
        lg = today(s, q)
        lg.per_note["keyword"] = legs(s, q, keyword=kw).per_note["keyword"]
        return fuse(lg)
    return run


def confidence_weights(how: str, a: float) -> Variant:
    """Each leg's weight x (1 + a x its confidence): the z-score of its best note ("top") or
    that note's lead over the second in z ("gap")."""
    def run(s: Set, q: Query) -> list[str]:
        lg = today(s, q)
        w = dict(zip(("semantic", "note", "keyword"), WEIGHTS, strict=True))
        for leg in w:
            hits = lg.per_note[leg]
            if len(hits) >= 3:
                z = F._standardise([x for _, x in hits])
                w[leg] *= 1 + a * (z[0] if how == "top" else z[0] - z[1])
        return fuse(lg, (w["semantic"], w["note"], w["keyword"]))
    return run


def every_candidate(found_bonus: float, which: Sequence[str]) -> Variant:
    """The legs in ``which`` score every candidate note of every leg with its real score (best
    chunk cosine, best opening cosine, best chunk BM25), standardised over the candidates,
    plus ``found_bonus`` for the notes the leg itself returned."""
    def run(s: Set, q: Query) -> list[str]:
        lg = today(s, q)
        found = {n for hits in lg.per_note.values() for n, _ in hits} | set(lg.exact)
        row = s.row()
        chunks, heads = s.chunks_of(heads=False), s.chunks_of(heads=True)
        bm = {}
        if "keyword" in which:
            for c, x in bm25(s, dict.fromkeys(q.terms, 1.0), k=len(s.docnum_chunk)):
                if c not in s.boilerplate:
                    bm.setdefault(s.note[c], x)
        for leg in which:
            own = {n for n, _ in lg.per_note[leg]}
            scores: dict[Hashable, float] = {}
            for n in found:
                if leg == "keyword":
                    scores[n] = bm.get(str(n), 0.0)
                    continue
                cs = (chunks if leg == "semantic" else heads).get(str(n))
                if cs:
                    scores[n] = max(float(s.V[row[c]] @ q.vec) for c in cs)
            if scores:
                z = dict(zip(scores, F._standardise(list(scores.values())), strict=True))
                lg.per_note[leg] = sorted(((n, z[n] + (found_bonus if n in own else 0.0))
                                           for n in scores), key=lambda t: -t[1])
        return fuse(lg)
    return run


def variants_0037() -> list[tuple[str, str, Variant]]:
    """The ideas of decision 0037, each on the hybrid of before it."""
    return [
        *[("0037 keyword note leg", f"keyword note leg, weight {w}", with_keyword_notes(w))
          for w in (0.05, 0.1, 0.15, 0.2, 0.25, 0.3)],
        ("0037 keyword note leg", "keyword note leg 0.15, from the top 100 chunks",
         with_keyword_notes(0.15, DEEP)),
        *[("0037 note vector", f"note vector (mean of its chunks) leg, weight {w}",
           with_note_vectors(w)) for w in (0.05, 0.1, 0.2)],
        *[("0037 note vector", f"note vector leg over the candidates only, weight {w}",
           with_note_vectors(w, candidates=True)) for w in (0.1, 0.2)],
        *[("0037 BM25F", f"title field x{t}, headings field x{h}", field_boost(t, h))
          for t, h in ((0.5, 0), (1, 0), (0, 0.5), (0, 1))],
        *[("0037 proximity", f"pair within {w} words, x{b}", proximity(b, w))
          for b, w in ((0.5, 1), (1, 1), (1, 3))],
        *[("0037 confidence", f"leg weight x (1 + {a} x {how})", confidence_weights(how, a))
          for how, a in (("top", 0.1), ("top", 0.25), ("top", 1.0), ("gap", 0.25))],
        ("0037 every candidate", "note leg on every candidate", every_candidate(0, ["note"])),
        ("0037 every candidate", "note leg on every candidate, found +1",
         every_candidate(1, ["note"])),
        ("0037 every candidate", "semantic and note legs on every candidate",
         every_candidate(0, ["semantic", "note"])),
        ("0037 every candidate", "all three legs on every candidate",
         every_candidate(0, ["semantic", "note", "keyword"])),
    ]


def difference(variant: np.ndarray, engine: np.ndarray) -> dict[str, float | int]:
    """A variant's per-query scores against the engine's: the mean difference, its standard
    error, and how many queries went up and down. On a 35-question set one rank change moves
    MRR@10 by up to 0.014: a difference within one standard error is noise."""
    d = variant - engine
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0
    return {"mean": float(d.mean()), "se": se, "up": int((d > 1e-9).sum()),
            "down": int((d < -1e-9).sum())}


# -- the bound and the per-query comparison -------------------------------------------------------
def monotone_bound(s: Set) -> float | None:
    """Known items: the MRR@10 of the best fusion monotone in each leg's note score, chosen
    per query (the expected note ranks below every note that scores at least as high in every
    leg and higher in one). None for graded sets."""
    if s.name.startswith("SciFact"):
        return None
    total = 0.0
    for i, q in enumerate(s.queries):
        per = [dict(h) for name, h in legs(s, q).per_note.items() if name != "phrase"]
        candidates = set().union(*per)
        best = 0.0
        for target in candidates:
            above = sum(1 for n in candidates if n != target
                        and all(p.get(n, -1e9) >= p.get(target, -1e9) for p in per)
                        and any(p.get(n, -1e9) > p.get(target, -1e9) for p in per))
            if above < K:
                ranked = [f"?{j}" for j in range(above)] + [str(target)]
                best = max(best, s.judge(i, ranked))
        total += best
    return total / len(s.queries)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--home", type=Path, required=True,
                    help="the --home of a full bench/quality.py run")
    ap.add_argument("--check-known", type=Path, action="append", default=[],
                    help="another known-item TSV, held out (its index: quality.py "
                         "--known-items FILE --home DIR); repeatable")
    args = ap.parse_args()
    root = args.home.expanduser().resolve()
    home, _ = scifact_home(root, False)
    if not (home / "data" / "catalog.sqlite").is_file():
        sys.exit(f"error: no index at {home}: run `bench/quality.py --home {root}` first")
    train, test = scifact_sets(root)
    sets = [train, known_set(root, TUNE_KNOWN), test, known_set(root, CHECK_KNOWN),
            *[known_set(root, path) for path in args.check_known]]
    check = [s.name for s in sets[2:]]
    names = [s.name for s in sets]
    results: list[dict[str, Any]] = []
    base: dict[str, float] = {}
    each_of: dict[str, dict[str, np.ndarray]] = {}
    for group, label, fn in variants():
        each = {s.name: np.array([s.judge(i, fn(s, q)) for i, q in enumerate(s.queries)])
                for s in sets}
        each_of[label] = each
        scores = {n: float(v.mean()) for n, v in each.items()}
        if label.startswith("engine"):
            base = scores
        lowers = [n for n in names if scores[n] < base[n] - 1e-9]
        lifts = all(scores[n] > base[n] + 1e-9 for n in check)
        verdict = ("-" if group == "reference" else
                   "lands" if not lowers and lifts else
                   f"lowers {', '.join(lowers)}" if lowers else "lifts no held-out set")
        results.append({"group": group, "variant": label, **scores, "verdict": verdict})
        print(f"  {label}: " + "  ".join(f"{scores[n]:.3f}" for n in names),
              file=sys.stderr, flush=True)
    print(table("hybrid ranking variants (nDCG@10 on SciFact, MRR@10 on the known items); "
                "tuning sets first, then held-out",
                [[r["group"], r["variant"], *[r[n] for n in names], r["verdict"]]
                 for r in results], ["group", "variant", *names, "verdict"]))
    # Decision 0037's ideas are built on the hybrid of before it, and judged per query there.
    before = next(e for label, e in each_of.items() if label.startswith("before decision 0037"))
    paired_rows = []
    for r in results:
        if r["group"].startswith("0037") or r["variant"].startswith("engine"):
            r["paired_vs_before_0037"] = paired = {
                n: difference(each_of[r["variant"]][n], before[n]) for n in names}
            paired_rows.append([r["variant"], *[f"{p['mean']:+.4f} ±{p['se']:.4f} "
                                                f"({p['up']}/{p['down']})"
                                                for p in paired.values()]])
    print(table("against the hybrid of before decision 0037, per query: mean difference ± its "
                "standard error (queries up/down)", paired_rows, ["variant", *names]))
    bound_rows = []
    for s in sets:
        per_query = [(s.judge(i, engine(s, q)), s.judge(i, notes_of(s, q.semantic)),
                      s.judge(i, notes_of(s, q.keyword))) for i, q in enumerate(s.queries)]
        n = len(per_query)
        bound = monotone_bound(s)
        bound_rows.append([s.name, base[s.name], "-" if bound is None else bound,
                           sum(h >= x for h, x, _ in per_query) / n,
                           sum(h >= y for h, _, y in per_query) / n,
                           sum(h < max(x, y) for h, x, y in per_query) / n, n])
    print(table("today's hybrid per query, and what fusing these legs can reach",
                bound_rows, ["set", "hybrid", "monotone-fusion bound", ">= semantic",
                             ">= keyword", "< the better leg", "queries"]))
    path = write_json("search_ideas", {
        "variants": results,
        "per_query": [dict(zip(("set", "hybrid", "monotone_bound", "share_ge_semantic",
                                "share_ge_keyword", "share_below_better_leg", "queries"),
                               r, strict=True))
                  for r in bound_rows],
        "tuning": list(TUNE), "held_out": check})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
