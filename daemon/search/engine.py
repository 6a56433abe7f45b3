"""Run the legs with the filters pushed down, fuse them, and shape the results.

Searches read the last committed state of each index and never wait for the indexer.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragd.daemon.convert.formats import page_number
from ragd.daemon.embed.embedding import Embedder
from ragd.daemon.errors import InvalidArgument
from ragd.daemon.ipc.protocol import parse_searches
from ragd.daemon.models import Filters
from ragd.daemon.search.boilerplate import legs_without_boilerplate, without_boilerplate
from ragd.daemon.search.codeorder import asked, implementation_first, role
from ragd.daemon.search.filters import COLLECTION_TYPES, MODES, system_family, to_sql
from ragd.daemon.search.fusion import (
    Fused,
    best_per_note,
    collapse,
    fold_properties,
    keep_sure,
    merge_hits,
    normalise,
    rare_first,
    rrf,
    sure_hits,
    zscore_fusion,
)
from ragd.daemon.stores.boilerplate import MAX_LEAD
from ragd.daemon.stores.catalog import Catalog, ChunkRow
from ragd.daemon.stores.code_sources import source_texts
from ragd.daemon.stores.fulltext import KeywordStore
from ragd.daemon.stores.vectors import FaissStore
from ragd.daemon.text.properties import is_properties

log = logging.getLogger(__name__)

# Unfiltered neighbours checked against a filter before its full id list is built.
FILTER_OVERFETCH = 200
# A filter selecting at most EXACT_SUBSET chunks is searched exactly over all of them; at
# most SCAN_SUBSET, from their vectors in the catalog (~30 us a vector read), else through the
# index's id selector over every cell. Measured at 100k chunks (decision 0020): 100 chunks
# scanned 1.9 ms against 3.0 through the index, 1,000 31 ms against 5.4; listing the ids of
# 10,000 chunks and searching them 16 ms, of 30,000 57 ms, where the unfiltered neighbours
# answer a broad filter in ~9 ms.
EXACT_SUBSET = 10_000
SCAN_SUBSET = 64
# An approximate (8-bit) vector index returns this many times k, reranked exactly: its
# quantisation reorders near-ties. At 1M chunks the exact top 50 was always inside the
# approximate top 100, but only 95% of it inside the top 50 (decision 0019).
REFINE = 2
# A search whose results come out short of top_k asks its legs again, this many times deeper,
# up to MAX_DEPTH hits a leg: collapsing to max_per_source chunks a source takes more
# candidates rather than return fewer results (a book search's candidates can all come from
# a few books).
DEPTH_GROWTH = 4
MAX_DEPTH = 4000
# A query's keyword and phrase legs use at most this many distinct terms (questions and
# claims have 5-40): a pasted page of 20,000 words held the keyword index for seconds.
MAX_QUERY_TERMS = 64
# The note leg reads the openings and properties chunks among the semantic leg's hits. In a big
# index few of them reach its top 50 (obsidian-hub, 42k chunks: usually 2-8 notes), and a note
# missing from so short a leg is scored as a miss at the leg's weight. A note leg that found
# fewer than NOTE_LEG_MIN notes is read off a semantic search NOTE_LEG_GROWTH times deeper
# (decision 0031: obsidian-hub 0.391 -> 0.402, obsidian-help-en 0.818 -> 0.828, no set lower).
NOTE_LEG_MIN = 5
NOTE_LEG_GROWTH = 4
MAX_QUOTED = 8  # quoted phrases a query's keyword leg matches
# How a search's own hits and its sub-queries' are scaled before each chunk keeps its best
# (fusion.merge_hits). Decision 0048 measured "best" and "z" for both legs: raw scores won.
# BM25 scores of one index share a scale: a lex phrasing's few rare words rightly outscore a
# question's common ones; and so do cosines of one model.
KEYWORD_MERGE = "none"
SEMANTIC_MERGE = "none"
# Rare words (rare_terms): a term of the query (its first RARE_TERMS, of 3 letters or more)
# that at most RARE_SOURCES documents hold, and at most one in RARE_SHARE of those searched, as
# a keyword search of it alone finds them (under RARE_SCAN chunks).
RARE_TERMS = 12
RARE_SOURCES = 3
RARE_SHARE = 4
RARE_SCAN = 400
# A semantic search looks for chunks still waiting for their vectors among the first
# PENDING_SCAN keyword hits, and embeds the best PENDING_EMBED of them for itself (issue 37):
# ~30 ms a chunk with the default model on two cores, so at most ~0.25 s more, and only
# while the backlog is not empty.
PENDING_SCAN = 200
PENDING_EMBED = 8
_LEGS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ragd-leg")

_QUOTED = re.compile(r'"([^"]+)"')
_WORD = re.compile(r"[^\W_]{3,}")


@dataclass(frozen=True)
class SubQuery:
    """A phrasing the caller wrote beside the query (decision 0048): ``lex`` words join the
    keyword leg, a ``vec`` paraphrase or a ``hyde`` answer passage the semantic leg."""

    type: str  # one of SEARCH_TYPES
    query: str


@dataclass(frozen=True)
class SearchRequest:
    query: str
    top_k: int = 10
    mode: str = "hybrid"
    filters: Filters = field(default_factory=Filters)
    explain: bool = False
    searches: tuple[SubQuery, ...] = ()

    def sub_queries(self, *types: str) -> list[str]:
        """The texts of the sub-queries of these types, in the order given."""
        return [s.query for s in self.searches if s.type in types]


@dataclass(frozen=True)
class SearchSettings:
    rrf_k: int = 60
    keyword_weight: float = 1.0
    semantic_weight: float = 1.0
    exact_weight: float = 1.0
    overfetch: int = 50
    max_per_source: int = 2
    fusion: str = "zscore"  # hybrid mode: "zscore" (decision 0010) or "rrf"
    z_semantic_weight: float = 0.25  # decision 0010, retuned with the combined keyword field
    z_note_weight: float = 0.4
    z_keyword_weight: float = 0.35
    # The keyword note leg: the openings and properties chunks among the keyword leg's hits
    # (decision 0037; search.z_keyword_note_weight): 0 turns it off.
    z_keyword_note_weight: float = 0.15
    # A document holding a rare word of the query ranks above those without it (issue 36;
    # search.rare_first, off until measured: decision 0051).
    rare_first: bool = False


def validate(req: SearchRequest) -> None:
    if not isinstance(req.top_k, int) or not 1 <= req.top_k <= 100:
        raise InvalidArgument("top_k", f"must be between 1 and 100, got {req.top_k!r}",
                              "pass a whole number from 1 to 100 (default 10)")
    if req.mode not in MODES:
        raise InvalidArgument("mode", f"unknown mode {req.mode!r}",
                              f"use one of {', '.join(MODES)}")
    f = req.filters
    if f.date_from and f.date_to and f.date_from > f.date_to:
        raise InvalidArgument("date_from", "is after date_to", "swap the two dates")
    if req.searches:  # as build_request leaves them: types lower-case, queries trimmed
        given = [{"type": s.type, "query": s.query} for s in req.searches]
        if parse_searches(given) != given:
            raise InvalidArgument("searches", "an entry's type is not lower-case or its query "
                                  "is not trimmed", "build the request with "
                                  "ragd.daemon.search.params.build_request")


# Source metadata a result carries (reference/000 "Metadata by Source Type", then what a
# client needs to cite or follow up: a message's id and thread, a book's series and format).
RESULT_METADATA = ("aliases", "folder", "sender", "recipients", "date", "subject", "message_id",
                   "in_reply_to", "attachments", "authors", "pages", "series", "series_index",
                   "publisher", "languages", "identifiers", "format",
                   "feed_name", "url", "author", "feed_url")
CODE_METADATA = ("language", "symbol_name", "symbol_type", "start_line", "end_line",  # code
                 "signature", "nl_summary", "file_path", "repository", "part", "commit_sha",
                 "commit_sha_short", "author_name", "author_email", "author_date",
                 "commit_message", "additions", "deletions", "change", "old_path", "files")


@dataclass(frozen=True)
class _HybridLegs:
    """What each leg of a hybrid search found: (chunk id, score) best first."""

    vector: np.ndarray  # the query's, reused when the legs are asked again deeper
    keyword: list[tuple[int, float]]
    semantic: list[tuple[int, float]]
    phrase: list[tuple[int, float]]
    titles: list[int]
    depth: int = 0  # what each leg was asked for
    extra: tuple[np.ndarray, ...] = ()  # the vec and hyde sub-queries' vectors (0048)

    def full(self, k: int) -> bool:
        """Whether some leg gave all ``k`` it was asked for (it may hold more)."""
        return any(len(hits) >= k for hits in (self.keyword, self.semantic, self.phrase))


class SearchEngine:
    def __init__(self, catalog: Catalog, embedder: Embedder, faiss: FaissStore,
                 whoosh: KeywordStore, settings: SearchSettings,
                 indexing: Callable[[], dict[str, Any] | None] = lambda: None) -> None:
        self.catalog = catalog
        self.embedder = embedder
        self.faiss = faiss
        self.whoosh = whoosh  # the keyword index, Whoosh or tantivy
        self.settings = settings
        self.indexing = indexing

    # -- collections ---------------------------------------------------------------------------
    def resolve_collection(self, value: str | None) -> tuple[str, ...] | None:
        """A collection name (a system name means its whole family: ``email`` is also
        ``email-work``), or a collection type meaning all collections of that type."""
        if value is None or value == "":
            return None
        colls = self.catalog.collections()
        family = system_family(value, [(c.name, c.type) for c in colls])
        if family:
            return family
        if value in COLLECTION_TYPES:
            return tuple(c.name for c in colls if c.type == value)
        known = ", ".join(sorted(c.name for c in colls)) or "none yet"
        raise InvalidArgument("collection", f"unknown collection {value!r}",
                              f"use a collection name ({known}) or a type "
                              f"({', '.join(COLLECTION_TYPES)}); rag_list_collections lists them")

    # -- legs ----------------------------------------------------------------------------------
    def analyse(self, text: str) -> list[str]:
        """The keyword index's terms of ``text`` (distinct, in order)."""
        return self.whoosh.analyse(text)

    def query_terms(self, text: str) -> list[str]:
        """The first MAX_QUERY_TERMS distinct terms of a query (or of a quoted phrase)."""
        return self.analyse(text)[:MAX_QUERY_TERMS]

    def keyword_hits(self, query: str, k: int, filters: Filters) -> list[tuple[int, float]]:
        """BM25 over the combined text field, matching ANY analysed term: documents matching
        more terms rank higher. (chunk id, BM25 score), best first."""
        phrases = [self.query_terms(p) for p in _QUOTED.findall(query)[:MAX_QUOTED]]
        return self.whoosh.search_any(self.query_terms(query), phrases, k, filters)

    def keyword_leg(self, query: str, k: int, filters: Filters) -> list[int]:
        return [cid for cid, _ in self.keyword_hits(query, k, filters)]

    def semantic_hits(self, query: str, k: int, filters: Filters) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity to the query), best first: min(k, matching chunks
        with a vector) of them, whatever the filter and the kind of vector index."""
        return self._semantic(self.embedder.embed_query(query), k, filters)

    def _semantic(self, vec: np.ndarray, k: int, filters: Filters) -> list[tuple[int, float]]:
        """The semantic leg for a query vector (decision 0020).

        - A filter selecting at most EXACT_SUBSET chunks is searched exactly: every matching
          chunk is scored, read from the catalog when there are at most SCAN_SUBSET, else
          through the index's id selector probing every cell (an approximate index visits
          only some cells, and the subset may lie outside them).
        - A broader one is checked on the best FILTER_OVERFETCH unfiltered neighbours: if at
          least ``k`` match, the first k matching in score order are the filtered top k.
        - Otherwise every matching id goes to the id selector, which probes more cells until
          it has found what it was asked for.
        """
        if not filters.active:
            return self._refined(vec, k, None)
        where, args = to_sql(filters)
        ids = self.catalog.filter_chunk_ids(where, args, limit=EXACT_SUBSET + 1)
        if len(ids) <= SCAN_SUBSET:
            return self._scan(vec, k, ids)
        if len(ids) <= EXACT_SUBSET:
            return self._refined(vec, k, ids, every_cell=True)
        size = self.faiss.size
        hits = self.faiss.search(vec, min(size, max(k * 4, FILTER_OVERFETCH)), None)
        keep = self.catalog.chunks_matching([i for i, _ in hits], where, args)
        matched = [(i, score) for i, score in hits if i in keep]
        if len(matched) >= k or len(hits) >= size:  # enough, or every vector was seen
            # Only the matching ones are reranked: exact vectors are read from disk.
            return self._exact(vec, matched[: self._fetch(k)], k)
        return self._refined(vec, k, self.catalog.filter_chunk_ids(where, args))

    def _scan(self, vec: np.ndarray, k: int, ids: Sequence[int]) -> list[tuple[int, float]]:
        """The exact top k of a few chunks, scored from their vectors in the catalog (a
        chunk still waiting for its vector is left out)."""
        found = self.catalog.chunk_vectors(self.embedder.fingerprint, ids)
        if not found:
            return []
        have = np.fromiter(found, dtype=np.int64, count=len(found))
        scores = np.stack(list(found.values())) @ np.asarray(vec, dtype=np.float32).ravel()
        top = np.lexsort((have, -scores))[:k]  # best first; ties by id
        return [(int(have[j]), float(scores[j])) for j in top]

    def _fetch(self, k: int) -> int:
        """How many hits to take from the vector index for a top k."""
        return k if self.faiss.kind == "flat" else k * REFINE

    def _refined(self, vec: np.ndarray, k: int, allowed: Sequence[int] | None, *,
                 every_cell: bool = False) -> list[tuple[int, float]]:
        """The vector index's top k; from an approximate index, REFINE·k of its best
        reranked by their exact vectors from the catalog."""
        hits = self.faiss.search(vec, self._fetch(k), allowed, every_cell=every_cell)
        return self._exact(vec, hits, k)

    def _exact(self, vec: np.ndarray, hits: list[tuple[int, float]], k: int
               ) -> list[tuple[int, float]]:
        """The best k of ``hits``, by exact scores when the index is approximate."""
        if self.faiss.kind == "flat":
            return hits[:k]
        exact = self.catalog.chunk_vectors(self.embedder.fingerprint, [i for i, _ in hits])
        scored = [(i, float(np.dot(exact[i], vec)) if i in exact else s) for i, s in hits]
        scored.sort(key=lambda h: -h[1])
        return scored[:k]

    def semantic_leg(self, query: str, k: int, filters: Filters) -> list[int]:
        return [cid for cid, _ in self.semantic_hits(query, k, filters)]

    # -- sub-queries (decision 0048) -----------------------------------------------------------
    def expanded_keyword_hits(self, query: str, lex: Sequence[str], k: int, filters: Filters
                              ) -> list[tuple[int, float]]:
        """The keyword leg of ``query`` and its ``lex`` sub-queries: a chunk scored by its best
        BM25 score over them, the first ``k``. Without sub-queries, ``keyword_hits`` as it
        is."""
        hits = self.keyword_hits(query, k, filters)
        if not lex:
            return hits
        return merge_hits([hits, *(self.keyword_hits(q, k, filters) for q in lex)], k,
                          scale=KEYWORD_MERGE)

    def extra_vectors(self, searches: Sequence[SubQuery]) -> tuple[np.ndarray, ...]:
        """The vectors of the vec and hyde sub-queries, each embedded as a query is: the
        embedder's batch path is the indexer's (all threads, a passage prefix for e5)."""
        return tuple(self.embedder.embed_query(" ".join(s.query.split()))
                     for s in searches if s.type in ("vec", "hyde"))

    def _semantic_all(self, vec: np.ndarray, extra: Sequence[np.ndarray], k: int,
                      filters: Filters) -> list[tuple[int, float]]:
        """The semantic leg of the query vector and the sub-queries' vectors: a chunk scored
        by its best cosine over them (one scale), the first ``k``."""
        hits = self._semantic(vec, k, filters)
        if not extra:
            return hits
        return merge_hits([hits, *(self._semantic(v, k, filters) for v in extra)], k,
                          scale=SEMANTIC_MERGE)

    def _terms(self, query: str, req: SearchRequest) -> list[str]:
        """The terms a snippet is cut around: the query's, then its lex sub-queries'."""
        lex = req.sub_queries("lex") if req.mode != "semantic" else []
        return self.query_terms(" ".join([query, *lex]))

    def title_leg(self, query: str, filters: Filters) -> list[int]:
        """The first chunk of each note whose title or an alias equals the query."""
        ids = self.catalog.titles_equal(query, filters.collections)
        if ids and filters.active:
            where, args = to_sql(filters)
            allowed = self.catalog.chunks_matching(ids, where, args)
            ids = [i for i in ids if i in allowed]
        return ids

    def phrase_hits(self, query: str, k: int, filters: Filters) -> list[tuple[int, float]]:
        """Chunks holding the whole query as a phrase (queries of two words or more)."""
        return self.whoosh.search_phrase(self.query_terms(query), k, filters)

    def exact_leg(self, query: str, k: int, filters: Filters) -> list[int]:
        """Exact title/alias matches, then exact phrase matches: never buried by neighbours."""
        ids = self.title_leg(query, filters)
        ids += [cid for cid, _ in self.phrase_hits(query, k, filters) if cid not in ids]
        return ids[:k]

    # -- the search ----------------------------------------------------------------------------
    def search(self, req: SearchRequest) -> dict[str, Any]:
        """Results in the rag_search shape, plus timings when explaining."""
        validate(req)
        t0 = time.perf_counter()
        query = " ".join(req.query.split())
        fresh: dict[int, float] = {}
        if query and req.mode == "hybrid" and self.settings.fusion == "zscore":
            results, vec = self._hybrid(query, req)
        else:
            results, vec, fresh = self._ranked(query, req)
        monotone(results)
        if vec is not None:
            self._similarities(results, vec, fresh)
        self._whole(results)
        out: dict[str, Any] = {"results": results, "indexing": self.indexing()}
        if req.explain:
            out["timing_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        return out

    def _depths(self, top_k: int) -> Iterator[int]:
        """How many hits each leg is asked for, round after round: a search whose results
        come out short of ``top_k`` (a few sources own every candidate, and each shows at
        most ``max_per_source``) asks again, DEPTH_GROWTH times deeper, up to MAX_DEPTH."""
        k = max(self.settings.overfetch, top_k * 3)
        while True:
            yield k
            if k >= MAX_DEPTH:
                return
            k = min(MAX_DEPTH, k * DEPTH_GROWTH)

    def _whole(self, results: list[dict[str, Any]]) -> None:
        """A code symbol's or a commit's result shows the whole of it (WHOLE_TYPES), not the
        chunk that matched: its chunks put together, at most WHOLE_CHARS."""
        ids = [int(r["metadata"]["chunk_id"]) for r in results
               if r["source_type"] in WHOLE_TYPES]
        if not ids:
            return
        rows = self.catalog.chunks_by_id(ids)
        texts = source_texts(self.catalog, sorted({row.source_id for row in rows.values()}))
        for r in results:
            row = rows.get(int(r["metadata"]["chunk_id"]))
            text = texts.get(row.source_id) if row is not None else None
            if text:
                r["content"] = text if len(text) <= WHOLE_CHARS else text[:WHOLE_CHARS] + "…"

    def _similarities(self, results: list[dict[str, Any]], vec: np.ndarray,
                      fresh: dict[int, float] | None = None) -> None:
        """Give each result ``metadata.similarity``: the cosine of its chunk to the query,
        0 to 1 (a negative cosine is 0), None while the chunk waits for its vector unless this
        search embedded it (``fresh``: then explain says ``vectors_pending``). ``score`` is
        the fused rank score, comparable within one answer only; this one means the same in
        every answer, so a threshold on it means something (issue 36). In metadata: the
        result's own fields are reference 000's contract."""
        fresh = fresh or {}
        ids = [int(r["metadata"]["chunk_id"]) for r in results]
        found = self.catalog.chunk_vectors(self.embedder.fingerprint, ids) if ids else {}
        q = np.asarray(vec, dtype=np.float32).ravel()
        for r, cid in zip(results, ids, strict=True):
            v = found.get(cid)
            cosine = float(np.dot(v, q)) if v is not None else fresh.get(cid)
            r["metadata"]["similarity"] = (None if cosine is None else
                                           round(max(0.0, cosine), 4))
            if v is None and "explain" in r["metadata"]:
                r["metadata"]["explain"]["vectors_pending"] = True

    def _ranked(self, query: str, req: SearchRequest
                ) -> tuple[list[dict[str, Any]], np.ndarray | None, dict[int, float]]:
        """Keyword or semantic mode (and hybrid with ``fusion = "rrf"``): chunks by RRF, the
        query vector when a semantic leg ran, and the chunks it embedded (pending_hits)."""
        s = self.settings
        vec = (self.embedder.embed_query(query)
               if query and req.mode in ("hybrid", "semantic") else None)
        extra = self.extra_vectors(req.searches) if vec is not None else ()
        fresh = (self.pending_hits(query, vec, req.filters)
                 if vec is not None and req.mode == "semantic" else {})
        for k in self._depths(req.top_k):
            legs, rows, top = self._ranked_at(query, vec, k, req, extra, fresh)
            if len(top) >= req.top_k or all(len(ids) < k for ids in legs.values()):
                break  # enough, or every leg gave all it had
        # 1.0 means rank 1 in every leg that found anything (the exact leg only when it hit).
        main = [self._weights[leg] for leg, ids in legs.items() if ids]
        terms = self._terms(query, req)
        return [self._result(rows[f.id], f, normalise(f.score, main, s.rrf_k), req, terms)
                for f in top], vec, fresh

    def pending_hits(self, query: str, vec: np.ndarray, filters: Filters) -> dict[int, float]:
        """Chunks still waiting for their vectors are out of the semantic leg's reach (issue
        37): the best PENDING_EMBED of them by the query's words are embedded for this search,
        and scored by their cosine to the query as the semantic leg scores the rest. Nothing
        is stored: the embedding thread stores their vectors in turn. (chunk id, cosine)."""
        if not self.catalog.backlog_any():
            return {}
        hits = self.keyword_leg(query, PENDING_SCAN, filters)
        texts = self.catalog.backlog_texts(hits)
        ids = [c for c in hits if c in texts][:PENDING_EMBED]
        if not ids:
            return {}
        mat = self.embedder.embed([texts[c] for c in ids])
        q = np.asarray(vec, dtype=np.float32).ravel()
        return {c: float(np.dot(v, q)) for c, v in zip(ids, mat, strict=True)}

    def _code_only(self, filters: Filters) -> bool:
        """Whether a search is over code alone (source_type code, or only code groups):
        its implementation then goes before its tests, examples and docs (codeorder)."""
        if filters.source_type == "code":
            return True
        if not filters.collections:
            return False
        types = {c.name: c.type for c in self.catalog.collections()}
        return all(types.get(name) == "code" for name in filters.collections) and \
            filters.source_type in (None, "", "code")

    def _cap(self, row: ChunkRow) -> int:
        """How many chunks of one source an answer shows: one of a code symbol or a commit,
        which a result shows whole (WHOLE_TYPES), else ``max_per_source``."""
        return 1 if row.source_type in WHOLE_TYPES else self.settings.max_per_source

    @property
    def _weights(self) -> dict[str, float]:
        s = self.settings
        return {"keyword": s.keyword_weight, "semantic": s.semantic_weight,
                "exact": s.exact_weight}

    def _ranked_at(self, query: str, vec: np.ndarray | None, k: int, req: SearchRequest,
                   extra: Sequence[np.ndarray] = (), fresh: dict[int, float] | None = None
                   ) -> tuple[dict[str, list[int]], dict[int, ChunkRow], list[Fused]]:
        """The legs at depth ``k``, the rows of what they found, and the top results.
        ``fresh``: chunks without a stored vector, scored for this search (pending_hits),
        which join the semantic leg by their cosines."""
        s = self.settings
        legs: dict[str, list[int]] = {}
        if query:
            if req.mode in ("hybrid", "keyword"):
                legs["keyword"] = [c for c, _ in self.expanded_keyword_hits(
                    query, req.sub_queries("lex"), k, req.filters)]
            if vec is not None:
                sem = self._semantic_all(vec, extra, k, req.filters)
                if fresh:
                    sem = merge_hits([sem, list(fresh.items())], k, scale="none")
                legs["semantic"] = [c for c, _ in sem]
            if req.mode != "semantic":
                legs["exact"] = self.exact_leg(query, k, req.filters)
        ranked = legs_without_boilerplate(self.catalog.boilerplate, legs)  # decision 0026
        fused = rrf(ranked, self._weights, s.rrf_k)
        rows = self.catalog.chunks_by_id([f.id for f in fused])
        fused = [f for f in fused if f.id in rows  # not deleted since the leg ran
                 and not hidden(rows[f.id], req)]
        fused = fold_properties(fused, lambda i: rows[i].source_id,
                                lambda i: is_properties(rows[i].ordinal))
        if self._code_only(req.filters):
            fused = implementation_first(fused, lambda f: code_role(rows[f.id]),
                                         asked(query))
        top = collapse(fused, lambda i: rows[i].source_id, lambda i: self._cap(rows[i]),
                       req.top_k)
        return legs, rows, top

    def _hybrid(self, query: str, req: SearchRequest
                ) -> tuple[list[dict[str, Any]], np.ndarray | None]:
        """Hybrid mode: notes ranked by z-score fusion of their legs (decision 0010), each
        shown by its best chunks; deeper legs when that comes out short of top_k. Also the
        query vector."""
        vec: np.ndarray | None = None
        extra: tuple[np.ndarray, ...] | None = None
        rare = self.rare_terms(query, req.filters) if self.settings.rare_first else []
        for k in self._depths(req.top_k):
            legs = self._hybrid_legs(query, vec, k, req.filters, req.searches, extra)
            vec, extra = legs.vector, legs.extra
            out = self._hybrid_results(query, legs, req, rare)
            if len(out) >= req.top_k or not legs.full(k):
                return out, vec
        return out, vec

    def _hybrid_legs(self, query: str, vec: np.ndarray | None, k: int, f: Filters,
                     searches: Sequence[SubQuery] = (),
                     extra: tuple[np.ndarray, ...] | None = None) -> _HybridLegs:
        """Every leg of a hybrid search at depth ``k`` (the query vector and the sub-queries'
        are computed once). Lex sub-queries join the keyword leg, vec and hyde ones the
        semantic leg (and so the note leg read off it); the phrase and title legs are the
        query's own."""

        def semantic() -> tuple[np.ndarray, tuple[np.ndarray, ...], list[tuple[int, float]]]:
            v = self.embedder.embed_query(query) if vec is None else vec
            more = self.extra_vectors(searches) if extra is None else extra
            return v, more, self._semantic_all(v, more, k, f)

        # The semantic leg (ONNX, FAISS) releases the GIL: it runs while the keyword legs do.
        pending = _LEGS.submit(semantic)
        lex = [s.query for s in searches if s.type == "lex"]
        kw, phrase = self.expanded_keyword_hits(query, lex, k, f), self.phrase_hits(query, k, f)
        titles = self.title_leg(query, f)
        vector, more, sem = pending.result()
        return _HybridLegs(vector, kw, sem, phrase, titles, k, more)

    def rare_terms(self, query: str, filters: Filters) -> list[frozenset[int]]:
        """For each of the query's first RARE_TERMS terms that only a few of the documents
        searched hold (at most RARE_SOURCES, and at most one in RARE_SHARE of them), the
        documents that hold it: all of them, read off a keyword search of that term alone
        that ran out before RARE_SCAN chunks (issue 36, decision 0027's rule for few large
        documents: a book holding a name is many chunks, so the whole leg never runs out).
        The rarest term (fewest chunks) first."""
        named = self.name_like(query)
        terms = [t for t in self.query_terms(query)[:RARE_TERMS] if len(t) >= 3 and t in named]
        if not terms:
            return []
        where, args = to_sql(filters)
        few = min(RARE_SOURCES, self.catalog.count_sources(where, args) // RARE_SHARE)
        out: list[tuple[int, frozenset[int]]] = []
        for term in terms if few else ():
            hits = self.whoosh.search_any([term], [], RARE_SCAN, filters)
            if not hits or len(hits) >= RARE_SCAN:
                continue
            holders = self.catalog.sources_of([c for c, _ in hits])
            if len(holders) <= few:
                out.append((len(hits), frozenset(holders)))
        return [holders for _, holders in sorted(out, key=lambda h: h[0])]  # rarest first

    def name_like(self, query: str) -> set[str]:
        """The index terms of the query's words that the model's own vocabulary splits into
        pieces ("Houyhnhnms", "zqxfresh6vortex"; not "show" or "customs"): names and coined
        words, where an ordinary word that a small vault happens to hold twice is not."""
        words = sorted(set(_WORD.findall(query.lower())))
        if not words:
            return set()
        counts = self.embedder.count_tokens([*words, "a"])
        one = counts[-1]  # a word of one piece, and the counter's special tokens
        return {t for w, n in zip(words, counts, strict=False) if n > one
                for t in self.analyse(w)}

    def _hybrid_results(self, query: str, legs: _HybridLegs, req: SearchRequest,
                        rare: Sequence[frozenset[int]] = ()) -> list[dict[str, Any]]:
        s = self.settings
        rows = self.catalog.chunks_by_id(sorted({c for c, _ in [*legs.keyword, *legs.semantic,
                                                                *legs.phrase]}
                                                | set(legs.titles)))

        def live(hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
            return [(c, x) for c, x in hits if c in rows]  # not deleted since the leg ran

        def note_of(cid: int) -> int:
            return rows[cid].source_id

        kw, sem, phrase = live(legs.keyword), live(legs.semantic), live(legs.phrase)
        kw, sem, phrase = without_boilerplate(self.catalog.boilerplate, kw, sem, phrase)  # 0026
        titles = [c for c in legs.titles if c in rows]
        # The note leg: a note's opening chunk and its properties (title, aliases,
        # properties, first section) as found by the semantic search.
        opening = self.openings(rows, [c for c, _ in [*sem, *kw]])
        heads = [(c, x) for c, x in sem if c in opening]
        if (len({note_of(c) for c, _ in heads}) < NOTE_LEG_MIN
                and len(legs.semantic) >= legs.depth > 0):
            heads = self._deeper_heads(legs.vector, legs.depth * NOTE_LEG_GROWTH,
                                       req.filters, rows, legs.extra)
        # Notes read but not embedded yet: the semantic legs could not have found them.
        waiting = self.catalog.backlog_sources({note_of(c) for c, _ in [*kw, *phrase]}
                                               | {note_of(c) for c in titles})
        per_note = {"semantic": best_per_note(sem, note_of),
                    "note": best_per_note(heads, note_of),
                    "keyword": best_per_note(kw, note_of),
                    # The same by words: a note whose opening or properties hold the query's
                    # words (decision 0037).
                    "keyword_note": best_per_note([(c, x) for c, x in kw if c in opening],
                                                  note_of),
                    "phrase": best_per_note(phrase, note_of)}
        notes = zscore_fusion(
            per_note,
            {"semantic": s.z_semantic_weight, "note": s.z_note_weight,
             "keyword": s.z_keyword_weight, "keyword_note": s.z_keyword_note_weight,
             "phrase": s.z_keyword_weight * s.exact_weight},
            exact=[note_of(c) for c in titles], exact_weight=s.exact_weight,
            blind={"semantic": waiting, "note": waiting})
        # A leg's sure hit (a rare word, a best note far ahead of its second) stays on top.
        notes = keep_sure(notes, [*sure_hits(per_note["keyword"],
                                             exhausted=len(legs.keyword) < legs.depth),
                                  *sure_hits(per_note["semantic"])])
        # A document holding a rare word of the query never ranks below one without it.
        notes = rare_first(notes, rare)
        # Which chunks show a note: its chunks by RRF over the legs, body before properties.
        chunks = rrf({"keyword": [c for c, _ in kw], "semantic": [c for c, _ in sem],
                      "exact": titles + [c for c, _ in phrase]},
                     {"keyword": 1.0, "semantic": 1.0, "exact": 1.0}, s.rrf_k)
        by_note: dict[Hashable, list[Fused]] = {}
        for item in fold_properties(chunks, note_of, lambda i: is_properties(rows[i].ordinal)):
            by_note.setdefault(note_of(item.id), []).append(item)
        if self._code_only(req.filters):
            notes = implementation_first(
                notes, lambda n: code_role(rows[by_note[n.note][0].id])
                if by_note.get(n.note) else None, asked(query))
        out: list[dict[str, Any]] = []
        terms = self._terms(query, req)
        for note in notes:
            shown_rows = [i for i in by_note.get(note.note, []) if not hidden(rows[i.id], req)]
            cap = self._cap(rows[shown_rows[0].id]) if shown_rows else 0
            for item in shown_rows[:cap]:
                shown = Fused(item.id, note.score, note.ranks)
                out.append(self._result(rows[item.id], shown, note.display, req, terms))
                if len(out) >= req.top_k:
                    return out
        return out

    def _deeper_heads(self, vec: np.ndarray, k: int, filters: Filters,
                      rows: dict[int, ChunkRow], extra: Sequence[np.ndarray] = ()
                      ) -> list[tuple[int, float]]:
        """The openings and properties chunks among the semantic leg's ``k`` best (boilerplate
        dropped): a starved note leg, read deeper. ``rows`` gains the rows of new hits."""
        hits = self._semantic_all(vec, extra, k, filters)
        rows.update(self.catalog.chunks_by_id([c for c, _ in hits if c not in rows]))
        opening = self.openings(rows, [c for c, _ in hits if c in rows])
        heads = [(c, x) for c, x in hits if c in opening]
        return without_boilerplate(self.catalog.boilerplate, heads)[0]

    def openings(self, rows: dict[int, ChunkRow], ids: Sequence[int]) -> set[int]:
        """The chunks of ``ids`` that open their note: its properties, its first chunk, and
        the chunks right after first ones that say nothing (badges, a banner, comments:
        decision 0039), which the note leg reads in their place."""
        later = {rows[c].source_id for c in ids if 0 < rows[c].ordinal <= MAX_LEAD}
        leads = self.catalog.quiet_leads(later) if later else {}
        return {c for c in ids if rows[c].ordinal <= leads.get(rows[c].source_id, 0)}

    def _result(self, row: ChunkRow, f: Fused, score: float, req: SearchRequest,
                terms: Sequence[str]) -> dict[str, Any]:
        meta = row.metadata
        metadata: dict[str, Any] = {
            "tags": list(row.tags),
            "heading_path": list(row.heading_path),
            "chunk_id": row.id,
            "chunk_index": row.ordinal,
        }
        for key in RESULT_METADATA + CODE_METADATA:
            if meta.get(key) not in (None, "", [], {}):
                metadata[key] = meta[key]
        page = page_number(row.source_type, row.heading_path)  # a PDF's "## Page N" heading
        if page is not None:
            metadata["page_number"] = page
        if row.date and "date" not in metadata:
            d = str(row.date)
            metadata["date"] = f"{d[:4]}-{d[4:6]}-{d[6:]}"
        metadata["snippet"] = snippet(row.text, terms)
        if req.explain:
            metadata["explain"] = {"ranks": f.ranks, "fused": round(f.score, 6)}
        return {
            "title": row.title,
            "content": row.text,
            "collection": row.collection,
            "source_type": row.source_type,
            "source_path": meta.get("source_path") or str(Path(row.root) / row.path),
            "source_uri": meta.get("source_uri", ""),
            "score": round(score, 4),
            "metadata": metadata,
        }


# Sources a result shows whole, once (issue 36): a code symbol (a method came back four times,
# the first its 29-character opening line) and a commit. Their content is the source's text put
# together from its chunks, at most WHOLE_CHARS.
WHOLE_TYPES = frozenset({"code", "commit"})
WHOLE_CHARS = 6000

# What a search leaves out unless ``source_type`` asks for it: the feeds an OPML list
# subscribes to are records of a reader's settings, not something anyone searches for
# (issue 36: they came back dated today).
HIDDEN_TYPES = frozenset({"opml"})


def code_role(row: ChunkRow) -> str | None:
    """A code symbol's role (test, example, doc; None: the implementation or not code)."""
    if row.source_type != "code":
        return None
    return role(str(row.metadata.get("file_path") or ""),
                str(row.metadata.get("symbol_type") or ""))


def hidden(row: ChunkRow, req: SearchRequest) -> bool:
    return row.source_type in HIDDEN_TYPES and req.filters.source_type != row.source_type


def monotone(results: list[dict[str, Any]]) -> None:
    """Make ``score`` never rise down the list. A sure hit lifted above notes the fusion
    scored higher (decision 0027) takes the best score of those it passed: rank and score
    agree in every answer (issue 36)."""
    best = 0.0
    for r in reversed(results):
        best = max(best, float(r["score"]))
        r["score"] = round(best, 4)


def snippet(text: str, terms: Sequence[str], width: int = 240) -> str:
    """A short window of the chunk around the first query term, on word boundaries."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    low = flat.lower()
    positions = [low.find(t) for t in terms if t and low.find(t) >= 0]
    start = max(0, min(positions) - width // 3) if positions else 0
    if start:
        space = flat.find(" ", start)
        start = space + 1 if 0 <= space < start + 30 else start
    end = min(len(flat), start + width)
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")
