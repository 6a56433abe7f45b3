"""The keyword index: BM25 over one text field (title, headings and text), with filter fields.

Two backends sit behind ``KeywordStore``: Whoosh (the default, pure Python) and tantivy
(opt-in, ``index.keyword_backend = "tantivy"``, daemon/stores/tantivy_store.py). Both replay
the catalog's ops journal with the same marks; decision 0016 has the measurements.

Whoosh-Reloaded (imported as ``whoosh``) deletes and updates an order of magnitude faster than
Whoosh 2.7.4 (ARCHITECTURE.md). One writer per batch: deletes and adds in the same commit.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragd.daemon.models import Filters
from ragd.daemon.stores.catalog import Catalog, ChunkRow
from ragd.daemon.stores.keyword_fields import (
    KEYWORD_ROLE,
    ancestors,
    combined_text,
    people,
    tag_ancestors,
)
from ragd.daemon.stores.projection import IndexStore, read_json, write_json_atomic
from ragd.daemon.stores.whoosh_postings import Postings, PostingsCache
from ragd.daemon.text import cjk

log = logging.getLogger(__name__)

# 2: one combined ``text`` field replaces title/headings/content (decision 0016).
# 3: ``text`` keeps frequencies only, for scoring; ``phrase`` holds the positions
#    (decision 0019).
# 4: segments are written as separate files, not one compound file (decision 0019).
# 5: CJK runs as character bigrams (+ unigrams), daemon/text/cjk.py (decision 0021).
SCHEMA_VERSION = "5"
KEYWORD_BACKENDS = ("whoosh", "tantivy")
BACKEND_META = "keyword_backend"  # catalog meta: the backend that last served the journal
FILTER_CACHE = 16  # filter id sets kept per searcher
# A query keeps its rarest terms while their postings add up to at most this share of the
# documents (and at least MIN_POSTINGS), and drops the most frequent ones past it. Scored
# with NumPy (whoosh_postings.py) a posting costs ~0.06 us, so below ~1M chunks every query
# keeps all its terms (decisions 0016, 0019).
POSTINGS_BUDGET = 0.5
MIN_POSTINGS = 500_000


class KeywordStore(IndexStore, Protocol):
    """A keyword index: analyses text its own way and answers BM25 queries over it."""

    stale: bool  # True when the index was created empty over an existing one (rebuild it)

    def analyse(self, text: str) -> list[str]:
        """The distinct index terms of ``text``, in order."""
        ...

    def search_any(self, terms: Sequence[str], phrases: Sequence[Sequence[str]], k: int,
                   filters: Filters) -> list[tuple[int, float]]:
        """Chunks holding any of ``terms`` (each phrase counts double, and so does each CJK
        word of ``terms``: ``cjk.words``), best first."""
        ...

    def search_phrase(self, words: Sequence[str], k: int, filters: Filters
                      ) -> list[tuple[int, float]]:
        """Chunks holding ``words`` as a phrase, best first."""
        ...


def _analyzer():  # type: ignore[no-untyped-def]
    from whoosh.analysis import StemmingAnalyzer
    from whoosh.lang.porter2 import stem

    # The default Porter stemmer turns "running" into "runn"; porter2 does not.
    return StemmingAnalyzer(stemfn=stem)


def _schema():  # type: ignore[no-untyped-def]
    from whoosh.fields import ID, KEYWORD, NUMERIC, TEXT, Schema

    return Schema(
        chunk_id=ID(stored=True, unique=True),
        # Scored by whoosh_postings.Postings. Without positions a block of postings decodes
        # 7x faster; phrases are matched in ``phrase``, which has them.
        text=TEXT(analyzer=_analyzer(), phrase=False),
        phrase=TEXT(analyzer=_analyzer(), phrase=True),
        collection=ID,
        source_type=ID,
        folders=KEYWORD(commas=True),
        tags=KEYWORD(commas=True, lowercase=True),
        date=NUMERIC(int, bits=32),
        sender=ID,
        author=ID,
    )


def document_fields(row: ChunkRow) -> dict[str, Any]:
    """The Whoosh document of one chunk (WhooshStore.apply adds ``phrase``)."""
    doc: dict[str, Any] = {
        "chunk_id": str(row.id),
        "text": combined_text(row),
        "collection": row.collection,
        "source_type": row.source_type,
        "folders": ",".join(ancestors(row.path)),
        "tags": ",".join(tag_ancestors(row.tags)),
    }
    if row.date is not None:
        doc["date"] = int(row.date)
    sender = people(row.metadata, "sender")
    if sender:
        doc["sender"] = sender
    author = people(row.metadata, "authors")
    if author:
        doc["author"] = author
    return doc


def within_budget(dfs: Sequence[int], doc_count: int) -> list[int]:
    """Which terms a query keeps, given their document frequencies: the rarest ones while
    their postings fit POSTINGS_BUDGET, always the rarest one. Indexes into ``dfs``, in order."""
    budget = max(POSTINGS_BUDGET * doc_count, MIN_POSTINGS)
    keep: list[int] = []
    total = 0
    for df, n in sorted((df, n) for n, df in enumerate(dfs)):
        if keep and total + df > budget:
            break
        keep.append(n)
        total += df
    return sorted(keep)


def filter_mask(searcher: Any, postings: Postings, f: Filters) -> np.ndarray:
    """Which documents pass ``f``, from the postings of its fields: the same documents as
    ``filters.to_whoosh(f)`` matches (a test checks it), at array speed."""
    mask = np.ones(postings.doc_count, dtype=bool)
    if f.collections is not None:
        mask &= postings.any_of("collection", f.collections)
    if f.source_type:
        mask &= postings.any_of("source_type", [f.source_type])
    if f.date_from is not None or f.date_to is not None:
        field = searcher.schema["date"]
        low = f.date_from if f.date_from is not None else -(2**31)
        high = f.date_to if f.date_to is not None else 2**31
        # Each date is indexed at several precisions; the full-precision terms come first.
        days = [t for t in field.sortable_terms(searcher.reader(), "date")
                if low <= field.from_bytes(t) <= high]
        mask &= postings.any_of("date", days)
    if f.folder:
        mask &= postings.any_of("folders", [f.folder])
    for tag in f.tags:
        mask &= postings.any_of("tags", [tag])
    for name, value in (("sender", f.sender), ("author", f.author)):
        if value:
            needle = value.lower().encode("utf-8")
            names = [t for t in searcher.reader().lexicon(name) if needle in t]
            mask &= postings.any_of(name, names)
    return mask


# While someone saves notes, a commit merges at most this many documents of small segments:
# Whoosh merges inside the commit, and MERGE_SMALL alone merged 21 segments of ~1,000 chunks
# (a long book's projection) in one 15 s commit, which a saved note waited for.
MERGE_CAP_DOCS = 2048
# While someone saves notes, a commit (its documents, and what it merges) aims at this many
# seconds: a saved note waits for at most the commit under way. Slices of 512 chunks and
# merges of 2,048 took 1-7 s a commit on a loaded machine (issue 21, decision 0022).
BUSY_COMMIT_S = 0.25
BUSY_DOCS_MIN = 16
BUSY_DOCS_DEFAULT = 128  # before a commit's cost per document is known
YIELD_CHECK_DOCS = 16  # documents added between two looks at ``interrupt``


class CommitYielded(Exception):
    """An apply given up before its commit, for small work that waits: nothing was written
    and the mark did not move; the same ops are applied again later."""


def _merge_bounded(writer: Any, segments: list[Any], cap: int | None = None) -> list[Any]:
    """Whoosh's MERGE_SMALL over the smallest segments only, at most ``cap`` documents in all
    (``MERGE_CAP_DOCS`` at most); bigger merges wait for a quiet commit."""
    from whoosh.writing import MERGE_SMALL

    cap = MERGE_CAP_DOCS if cap is None else min(cap, MERGE_CAP_DOCS)
    ordered = sorted(segments, key=lambda seg: seg.doc_count_all())
    small: list[Any] = []
    total = 0
    for seg in ordered:
        total += seg.doc_count_all()
        if total > cap:
            break
        small.append(seg)
    return list(MERGE_SMALL(writer, small)) + ordered[len(small):]


def _opened(searcher: Any) -> Any:
    """``searcher`` with the files it reads lazily opened now. A commit that merges segments
    deletes the merged ones' files while searches still use the searcher of the commit
    before (until ``_reopen``): a file opened before the deletion stays readable (POSIX), one
    opened after is gone, and Whoosh then read a stored field as ``None`` (an internal error
    under a stream of commits, issue 28 row 8)."""
    for leaf, _ in searcher.ixreader.leaf_readers():
        if leaf.segment() is not None and leaf.doc_count_all():
            leaf.stored_fields(0)
            for field in ("text", "phrase"):
                leaf.doc_field_length(0, field)
    return searcher


class WhooshStore:
    """Whoosh, one commit per apply; searches share one searcher, reopened after commits."""

    name = KEYWORD_ROLE
    needs_vectors = False

    def __init__(self, directory: Path) -> None:
        from whoosh import index

        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._state_file = self.dir / "ragd-state.json"
        self._lock = threading.RLock()
        # Searches are pure Python and hold the GIL: one searcher behind a lock costs no
        # parallelism, and lets a commit open the next searcher off the query path.
        self._search_lock = threading.Lock()
        self._searcher: Any = None
        self._postings: Postings | None = None
        self._postings_cache = PostingsCache()
        self._filters: OrderedDict[Filters, np.ndarray] = OrderedDict()
        self.analyse_text = _analyzer()
        # Whether nobody has saved a note lately (the indexer sets it): only then may a
        # commit make a big merge (_merge_bounded).
        self.quiet: Callable[[], bool] = lambda: True
        # Where an apply's time goes (documents, commit, reopen): the indexer's spans.
        self.on_span: Callable[[str, float, float], None] = lambda phase, start, end: None
        # Whether to give an apply up before its commit (small work waits: CommitYielded).
        self.interrupt: Callable[[], bool] = lambda: False
        # Seconds a busy (not quiet) commit took per document, smoothed: busy_docs().
        self._per_doc: float | None = None
        state = read_json(self._state_file)
        self.stale = False
        if index.exists_in(str(self.dir)) and state.get("schema") == SCHEMA_VERSION:
            self._ix = index.open_dir(str(self.dir))
            self._mark = int(state.get("mark", 0))
        else:  # new, or of an older schema: the journal may no longer hold all it needs
            self.stale = True
            self._ix = index.create_in(str(self.dir), _schema())
            self._mark = 0
            write_json_atomic(self._state_file, {"mark": 0, "schema": SCHEMA_VERSION})

    @property
    def index(self):  # type: ignore[no-untyped-def]
        return self._ix

    @property
    def mark(self) -> int:
        return self._mark

    @property
    def persisted_mark(self) -> int:
        # Every apply commits, so what is applied is on disk.
        return self._mark

    def apply(self, rows: Sequence[ChunkRow], deletes: Sequence[int], mark: int,
              vectors: Mapping[int, np.ndarray]) -> None:
        with self._lock:
            t0 = time.monotonic()
            # Not compound: Whoosh copies each sub-file of a compound segment into memory
            # when it opens it (a BytesIO over the mmap), 1 GB of postings at 1M chunks.
            # Separate files are read through the OS cache instead (decision 0019).
            writer = self._ix.writer(timeout=30, compound=False)
            try:
                for cid in [r.id for r in rows] + list(deletes):
                    writer.delete_by_term("chunk_id", str(cid))
                for n, row in enumerate(rows):
                    if n % YIELD_CHECK_DOCS == 0 and n and self.interrupt():
                        raise CommitYielded
                    writer.add_document(**self._document(row))
                if self.interrupt():  # the commit is the longer part: not now
                    raise CommitYielded
            except BaseException:
                writer.cancel()
                self.on_span("keyword_cancelled", t0, time.monotonic())
                raise
            t1 = time.monotonic()
            quiet = self.quiet()
            if quiet:
                writer.commit()
            else:
                writer.commit(mergetype=functools.partial(_merge_bounded,
                                                          cap=self.busy_docs()))
            self._mark = max(self._mark, mark)
            write_json_atomic(self._state_file, {"mark": self._mark, "schema": SCHEMA_VERSION})
            t2 = time.monotonic()
            if not quiet and len(rows) + len(deletes) >= BUSY_DOCS_MIN:
                cost = (t2 - t0) / (len(rows) + len(deletes))
                self._per_doc = cost if self._per_doc is None else (
                    0.7 * self._per_doc + 0.3 * cost)
            self._reopen()
            self.on_span("keyword_docs", t0, t1)
            self.on_span("keyword_commit", t1, t2)
            self.on_span("keyword_reopen", t2, time.monotonic())

    def busy_docs(self) -> int:
        """Documents a commit may write (or merge) while notes are saved: what its measured
        cost per document allows in BUSY_COMMIT_S."""
        if self._per_doc is None:
            return BUSY_DOCS_DEFAULT
        return max(BUSY_DOCS_MIN, int(BUSY_COMMIT_S / self._per_doc))

    def _document(self, row: ChunkRow) -> dict[str, Any]:
        """The chunk's fields, its text analysed once for both ``text`` and ``phrase``:
        Whoosh takes a list of words as already analysed (analysis is most of the cost of
        indexing). The stop filter renumbers positions, so a list's positions are the same.
        The unigrams of CJK runs are scored terms only: no phrase is made of them."""
        doc = document_fields(row)
        words, unigrams = cjk.terms(doc["text"], self._words, unigrams=cjk.INDEX_UNIGRAMS)
        doc["text"] = words + unigrams if unigrams else words
        doc["phrase"] = words
        return doc

    def _words(self, text: str) -> list[str]:
        """Whoosh's own analysis (words, stop words, porter2), for text outside CJK runs."""
        return [t.text for t in self.analyse_text(text)]

    def _reopen(self) -> None:
        """A new searcher for the new commit, opened before searches switch to it.

        Not Searcher.refresh(): it reuses segment readers whose deletion sets are stale, so
        documents deleted in an existing segment would still be found (decision 0007).
        """
        fresh = _opened(self._ix.searcher())
        postings = Postings(fresh, "text", self._postings_cache)
        with self._search_lock:
            old, self._searcher, self._postings = self._searcher, fresh, postings
            self._filters.clear()
        if old is not None:
            old.close()

    def _current(self) -> tuple[Any, Postings]:
        """The shared searcher and its scorer (call with the search lock held)."""
        if self._searcher is None or self._postings is None:
            self._searcher = _opened(self._ix.searcher())
            self._postings = Postings(self._searcher, "text", self._postings_cache)
        return self._searcher, self._postings

    def _allowed(self, searcher: Any, postings: Postings, filters: Filters
                 ) -> np.ndarray | None:
        """The filter as a mask over document numbers, kept per filter until the next
        commit. Built from the filter fields' postings (decoded once per segment and
        cached), never by listing matches through Whoosh, which costs a search."""
        if not filters.active:
            return None
        mask = self._filters.get(filters)
        if mask is None:
            mask = filter_mask(searcher, postings, filters)
            self._filters[filters] = mask
            while len(self._filters) > FILTER_CACHE:
                self._filters.popitem(last=False)
        else:
            self._filters.move_to_end(filters)
        return mask

    def analyse(self, text: str) -> list[str]:
        return list(dict.fromkeys(cjk.terms(text, self._words)[0]))

    def search(self, query: Any, k: int, filter_query: Any = None) -> list[tuple[int, float]]:
        """A Whoosh query, with an optional Whoosh filter query."""
        if k <= 0:
            return []
        with self._search_lock:
            results = self._current()[0].search(query, limit=k, filter=filter_query)
            # Iterate, never len(results): that runs the whole query a second time.
            return [(int(hit["chunk_id"]), float(hit.score)) for hit in results]

    @staticmethod
    def _chunk_ids(searcher: Any, hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
        return [(int(searcher.stored_fields(d)["chunk_id"]), score) for d, score in hits]

    @staticmethod
    def _phrase(searcher: Any, postings: Postings, words: Sequence[str], limit: int | None,
                allowed: np.ndarray | None, boost: float = 1.0) -> list[tuple[int, float]]:
        """(document, score) of the chunks holding ``words`` as a phrase. Positions are
        read only for chunks holding every word: for most queries there are none."""
        from whoosh import query as Q
        from whoosh.idsets import BitSet

        candidates = postings.containing_all(words)
        if allowed is not None:
            candidates = candidates[allowed[candidates]]
        if not len(candidates):
            return []  # also because Whoosh would read an empty filter as none at all
        only = BitSet(candidates.tolist(), size=postings.doc_count)
        found = searcher.search(Q.Phrase("phrase", list(words), boost=boost), limit=limit,
                                filter=only)
        return [(hit.docnum, float(hit.score)) for hit in found]

    def search_any(self, terms: Sequence[str], phrases: Sequence[Sequence[str]], k: int,
                   filters: Filters) -> list[tuple[int, float]]:
        """BM25 over an OR of ``terms``, scored with NumPy (whoosh_postings.py); a quoted
        phrase, and a CJK word of three characters or more, adds its own score, doubled,
        where it occurs."""
        if not terms or k <= 0:
            return []
        phrases = cjk.with_words(phrases, terms)
        with self._search_lock:
            searcher, postings = self._current()
            allowed = self._allowed(searcher, postings, filters)
            dfs = [searcher.doc_frequency("text", t) for t in terms]
            scores = postings.scores([terms[n] for n in within_budget(dfs, postings.doc_count)])
            for words in (p for p in phrases if len(p) > 1):
                for doc, score in self._phrase(searcher, postings, words, None, allowed, 2.0):
                    scores[doc] += score
            return self._chunk_ids(searcher, postings.top(scores, k, allowed))

    def search_phrase(self, words: Sequence[str], k: int, filters: Filters
                      ) -> list[tuple[int, float]]:
        """Chunks holding ``words`` as a phrase, best first."""
        if len(words) < 2 or k <= 0:
            return []
        with self._search_lock:
            searcher, postings = self._current()
            allowed = self._allowed(searcher, postings, filters)
            return self._chunk_ids(searcher,
                                   self._phrase(searcher, postings, words, k, allowed))

    def save(self) -> None:
        """Nothing to do: each apply is a commit."""

    def segments(self) -> int:
        with self._search_lock:
            return len(self._current()[0].ixreader.leaf_readers())

    def ids(self) -> set[int]:
        with self._ix.searcher() as s:
            return {int(f["chunk_id"]) for f in s.all_stored_fields()}

    def reset(self, fingerprint: str) -> None:
        from whoosh import index

        with self._lock:
            self._ix = index.create_in(str(self.dir), _schema())
            self._mark = 0
            write_json_atomic(self._state_file, {"mark": 0, "schema": SCHEMA_VERSION})
            self._reopen()
            self.stale = False

    def close(self) -> None:
        with self._search_lock:
            if self._searcher is not None:
                self._searcher.close()
                self._searcher = None
                self._postings = None


def open_keyword_store(backend: str, data_dir: Path, whoosh_dir: Path,
                       catalog: Catalog) -> tuple[KeywordStore, bool]:
    """The configured keyword store, and whether it must be rebuilt from the catalog.

    A rebuild is needed when the index is new or of an older schema, or when the other
    backend served last and got further: the journal is pruned up to what every open index
    has persisted, so ops between this store's mark and the other's may be gone.
    """
    if backend not in KEYWORD_BACKENDS:
        raise ValueError(f"unknown keyword backend {backend!r}")
    dirs = {"whoosh": whoosh_dir, "tantivy": data_dir / "tantivy"}
    store: KeywordStore
    if backend == "tantivy":
        from ragd.daemon.stores.tantivy_store import TantivyStore

        store = TantivyStore(dirs["tantivy"])
    else:
        store = WhooshStore(whoosh_dir)
    last = catalog.get_meta(BACKEND_META) or "whoosh"  # before 0016 Whoosh was the only one
    if store.stale:
        return store, True
    if last == backend:
        return store, False
    other = read_json(dirs[last] / "ragd-state.json").get("mark")
    return store, not isinstance(other, int) or store.mark < other


def record_backend(catalog: Catalog, backend: str) -> None:
    """After a rebuild: this backend now holds everything the journal has applied."""
    catalog.set_meta(BACKEND_META, backend)
