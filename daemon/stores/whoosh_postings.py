"""BM25 over a Whoosh index with NumPy: Whoosh's own scores, without its matcher tree.

Whoosh scores an OR query one posting at a time in Python, ~3 us a posting (FIELD-NOTES,
"Whoosh at scale"), which made the keyword leg most of hybrid latency from 100k chunks up.
This module reads each query term's postings a block at a time (128 postings, one zlib
decompress and one unpickle), and scores them with array arithmetic: ~0.06 us a posting.
The scores are Whoosh's BM25F to float rounding: the same idf (``log(N / (df + 1)) + 1``,
deleted documents counted, as Whoosh does), the same byte-quantised field lengths, the same
B and K1. Deleted documents are masked out. Decision 0019 has the measurements.

It reads the Whoosh 3 codec's block layout (``W3LeafMatcher``), which is not public API.
whoosh-reloaded is pinned in pyproject.toml, and tests/daemon/stores/test_whoosh_postings.py
checks the scores against Whoosh's own searcher, so an upgrade that changes the layout fails
there, not in a user's results.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

B = 0.75  # whoosh.scoring.BM25F defaults, which WhooshStore's searcher uses
K1 = 1.2
CACHE_BYTES = 64 * 2**20  # decoded postings kept across queries and commits (see Postings)

_LENGTHS: np.ndarray | None = None


def _length_table() -> np.ndarray:
    """Whoosh stores a field's length in a byte; this maps the byte back to the length."""
    global _LENGTHS
    if _LENGTHS is None:
        from whoosh.util.numeric import byte_to_length

        _LENGTHS = np.array([byte_to_length(b) for b in range(256)], dtype=np.float64)
    return _LENGTHS


def _segment_lengths(leaf: Any, field: str) -> np.ndarray:
    """The length of ``field`` in each document of one segment, as Whoosh scores it."""
    from whoosh.codec.whoosh3 import LENGTHS_COLUMN, _lenfield

    out = np.zeros(leaf.doc_count_all(), dtype=np.uint8)
    column = leaf._perdoc._cached_reader(_lenfield(field), LENGTHS_COLUMN)
    if column is not None and column._count:
        # The column holds one byte per document up to the last non-zero one.
        raw = column._dbfile.get(column._basepos, column._count)
        out[: column._count] = np.frombuffer(raw, dtype=np.uint8)
    return _length_table()[out]


def _decode(leaf: Any, field: str, term: bytes) -> tuple[np.ndarray, np.ndarray]:
    """One segment's postings of ``term``: (document numbers in the segment, frequencies)."""
    from whoosh.matching import ListMatcher

    matcher = leaf._terms.matcher(field, term, leaf.schema[field].format)
    if isinstance(matcher, ListMatcher):  # a rare term's postings live in its term info
        ids = np.asarray(matcher._ids, dtype=np.int32)
        weights = matcher._weights
        freqs = (np.asarray(weights, dtype=np.float32) if weights is not None
                 else np.ones(len(ids), dtype=np.float32))
        return ids, freqs
    id_blocks: list[np.ndarray] = []
    freq_blocks: list[np.ndarray] = []
    position = matcher._baseoffset
    while True:
        matcher._goto(position)  # reads the block's header: length, count, compression
        matcher._read_data()  # decompresses and unpickles (ids, weights, values)
        deltas, weights = matcher._data[0], matcher._data[1]
        count = matcher._blocklength
        id_blocks.append(np.cumsum(np.asarray(deltas, dtype=np.int32), dtype=np.int32))
        if weights is None:  # every weight 1.0
            freq_blocks.append(np.ones(count, dtype=np.float32))
        elif isinstance(weights, float):  # every weight the same
            freq_blocks.append(np.full(count, weights, dtype=np.float32))
        else:
            freq_blocks.append(np.asarray(weights, dtype=np.float32))
        if matcher._lastblock:
            break
        position = matcher._nextoffset
    return np.concatenate(id_blocks), np.concatenate(freq_blocks)


class PostingsCache:
    """Decoded postings by (segment, term), least recently used out past ``limit`` bytes.

    A segment never changes once written (deletions are a separate mask), so its postings
    stay valid across commits; a merged-away segment's entries age out. Frequent terms are
    the expensive ones and recur across queries, and the keyword and phrase legs of one
    query ask for the same terms.
    """

    def __init__(self, limit: int = CACHE_BYTES) -> None:
        self.limit = limit
        self.size = 0
        self._items: OrderedDict[tuple[str, str, bytes], tuple[np.ndarray, np.ndarray]] = \
            OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, bytes]) -> tuple[np.ndarray, np.ndarray] | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key: tuple[str, str, bytes], value: tuple[np.ndarray, np.ndarray]) -> None:
        nbytes = value[0].nbytes + value[1].nbytes
        if nbytes > self.limit:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.size -= old[0].nbytes + old[1].nbytes
            self._items[key] = value
            self.size += nbytes
            while self.size > self.limit:
                _, (ids, freqs) = self._items.popitem(last=False)
                self.size -= ids.nbytes + freqs.nbytes


class Postings:
    """BM25 scoring of one field over one Whoosh searcher's segments (built per commit)."""

    def __init__(self, searcher: Any, field: str, cache: PostingsCache | None = None) -> None:
        self.searcher = searcher
        self.field = field
        self.cache = cache if cache is not None else PostingsCache()
        # An empty index has one reader without a segment, and nothing to read.
        self.leaves: list[tuple[Any, int, str]] = [
            (leaf, offset, leaf.segment().segment_id())
            for leaf, offset in searcher.ixreader.leaf_readers()
            if leaf.segment() is not None]
        self.doc_count = searcher.doc_count_all()  # deleted documents included, as in idf
        lengths = [_segment_lengths(leaf, field) for leaf, _, _ in self.leaves]
        fl = np.concatenate(lengths) if lengths else np.zeros(0)
        avgfl = searcher.avg_field_length(field) or 1
        # The length part of BM25's denominator, per document.
        self.norm = K1 * ((1 - B) + B * fl / avgfl)
        self.live = np.ones(self.doc_count, dtype=bool)
        for leaf, offset, _ in self.leaves:
            if leaf.has_deletions():
                dead = np.fromiter(leaf.deleted_docs_set, dtype=np.int64)
                self.live[dead + offset] = False

    def docs(self, term: str | bytes, field: str | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
        """Every posting of ``term`` in ``field`` (default: the scored one) in this
        searcher: (document numbers, frequencies)."""
        field = field or self.field
        tbytes = term.encode("utf-8") if isinstance(term, str) else term
        id_parts: list[np.ndarray] = []
        freq_parts: list[np.ndarray] = []
        for leaf, offset, segment in self.leaves:
            if not leaf.doc_frequency(field, tbytes):
                continue
            key = (segment, field, tbytes)
            hit = self.cache.get(key)
            if hit is None:
                hit = _decode(leaf, field, tbytes)
                self.cache.put(key, hit)
            id_parts.append(hit[0] + offset if offset else hit[0])
            freq_parts.append(hit[1])
        if not id_parts:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
        if len(id_parts) == 1:
            return id_parts[0], freq_parts[0]
        return np.concatenate(id_parts), np.concatenate(freq_parts)

    def any_of(self, field: str, terms: Iterable[str | bytes]) -> np.ndarray:
        """A mask of the documents holding at least one of ``terms`` in ``field``."""
        mask = np.zeros(self.doc_count, dtype=bool)
        for term in terms:
            mask[self.docs(term, field)[0]] = True
        return mask

    def idf(self, term: str) -> float:
        df = self.searcher.doc_frequency(self.field, term)
        return math.log(self.doc_count / (df + 1)) + 1

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """Each document's BM25 score for an OR of ``terms`` (0 where none occurs)."""
        total = np.zeros(self.doc_count, dtype=np.float64)
        for term in dict.fromkeys(terms):
            ids, freqs = self.docs(term)
            if len(ids):
                tf = freqs.astype(np.float64)
                total[ids] += self.idf(term) * (tf * (K1 + 1)) / (tf + self.norm[ids])
        return total

    def containing_all(self, terms: Sequence[str]) -> np.ndarray:
        """The live documents holding every one of ``terms``, in order."""
        common: np.ndarray | None = None
        # Rarest first (by document frequency, without decoding): the intersection shrinks
        # fastest, and it stops at the first term that leaves nothing.
        by_df = sorted(dict.fromkeys(terms),
                       key=lambda t: self.searcher.doc_frequency(self.field, t))
        for term in by_df:
            ids = self.docs(term)[0]
            common = ids if common is None else np.intersect1d(common, ids, assume_unique=True)
            if not len(common):
                break
        if common is None:
            return np.zeros(0, dtype=np.int32)
        return common[self.live[common]]

    def top(self, scores: np.ndarray, k: int, allowed: np.ndarray | None = None
            ) -> list[tuple[int, float]]:
        """The ``k`` best live documents with a score above 0, best first; a tie goes to the
        lower document number, as in Whoosh's collector."""
        keep = scores > 0
        keep &= self.live
        if allowed is not None:
            keep &= allowed
        docs = np.flatnonzero(keep)
        if len(docs) > k:
            docs = docs[np.argpartition(-scores[docs], k - 1)[:k]]
        docs = docs[np.lexsort((docs, -scores[docs]))]
        return [(int(d), float(scores[d])) for d in docs]
