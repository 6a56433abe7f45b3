"""The opt-in keyword backend: tantivy (Rust, via tantivy-py), behind the same protocol as Whoosh.

Chosen with ``index.keyword_backend = "tantivy"`` for indexes of 100k chunks and more, where the
pure-Python Whoosh leg costs hundreds of milliseconds a query (decision 0016). The same journal
is replayed with the same marks: each apply deletes and re-adds its chunks by id and commits
(tantivy's commit is atomic), then the mark is written, so a kill -9 anywhere replays at most
one batch again.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragd.daemon.models import Filters
from ragd.daemon.stores.catalog import ChunkRow
from ragd.daemon.stores.keyword_fields import (
    KEYWORD_ROLE,
    ancestors,
    combined_text,
    people,
    tag_ancestors,
)
from ragd.daemon.stores.projection import read_json, write_json_atomic
from ragd.daemon.text import cjk

log = logging.getLogger(__name__)

# 2: a numeric collection key for checking filters on hits
# 3: CJK runs as character bigrams (+ unigrams), daemon/text/cjk.py (decision 0021)
SCHEMA_VERSION = "3"
ANALYZER = "ragd_en"
WRITER_HEAP = 64_000_000  # bytes: tantivy flushes a segment when its buffer fills
# Unfiltered hits checked against a collection or date filter before the filter is run as a
# query: a broad filter intersected as a query costs more than the search (25 vs 8 ms at 1M).
FILTER_OVERFETCH = 200
# Whoosh's stop words, so that both backends drop the same query words.
STOP_WORDS = ("a", "an", "and", "are", "as", "at", "be", "by", "can", "for", "from", "have",
              "if", "in", "is", "it", "may", "not", "of", "on", "or", "tbd", "that", "the",
              "this", "to", "us", "we", "when", "will", "with", "yet", "you", "your")
_REGEX_SPECIAL = set("\\.+*?()|[]{}^$#&-~\"<>@")


def _analyzer() -> Any:
    import tantivy

    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.remove_long(40))
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.custom_stopword(list(STOP_WORDS)))
            .filter(tantivy.Filter.stemmer("english"))
            .build())


def _schema() -> Any:
    import tantivy

    b = tantivy.SchemaBuilder()
    b.add_integer_field("chunk_id", indexed=True, fast=True)
    b.add_text_field("text", tokenizer_name=ANALYZER, index_option="position")
    for name in ("collection", "source_type", "folders", "tags", "sender", "author"):
        b.add_text_field(name, tokenizer_name="raw", index_option="basic")
    b.add_integer_field("date", indexed=True, fast=True)
    b.add_integer_field("collection_key", fast=True)
    return b.build()


def collection_key(name: str) -> int:
    """A collection name as a signed 64-bit number (a fast field can be read per hit)."""
    return int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(),
                          "big", signed=True)


def _document(row: ChunkRow) -> Any:
    import tantivy

    doc = tantivy.Document()
    doc.add_integer("chunk_id", row.id)
    # CJK runs become bigrams between spaces before tantivy's analyser sees the text; any
    # other text reaches it unchanged.
    doc.add_text("text", cjk.rewrite(combined_text(row), unigrams=cjk.INDEX_UNIGRAMS))
    doc.add_text("collection", row.collection)
    doc.add_integer("collection_key", collection_key(row.collection))
    doc.add_text("source_type", row.source_type)
    for folder in ancestors(row.path):
        doc.add_text("folders", folder)
    for tag in tag_ancestors(row.tags):
        doc.add_text("tags", tag.lower())
    if row.date is not None:
        doc.add_integer("date", int(row.date))
    for field, key in (("sender", "sender"), ("author", "authors")):
        value = people(row.metadata, key)
        if value:
            doc.add_text(field, value)
    return doc


def _regex_literal(text: str) -> str:
    return "".join("\\" + c if c in _REGEX_SPECIAL else c for c in text)


class TantivyStore:
    """tantivy, one commit per apply; the reader is reloaded after each commit."""

    name = KEYWORD_ROLE
    needs_vectors = False

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._state_file = self.dir / "ragd-state.json"
        self._lock = threading.RLock()
        self._analyzer = _analyzer()
        state = read_json(self._state_file)
        self.stale = state.get("schema") != SCHEMA_VERSION
        self._mark = 0 if self.stale else int(state.get("mark", 0))
        self._open(fresh=self.stale)

    def _open(self, fresh: bool) -> None:
        import tantivy

        if fresh:
            for child in self.dir.iterdir():
                if child.is_dir():
                    shutil.rmtree(child)
                elif child.name != self._state_file.name:
                    child.unlink()
            write_json_atomic(self._state_file, {"mark": 0, "schema": SCHEMA_VERSION})
        self._schema = _schema()
        self._ix = tantivy.Index(self._schema, path=str(self.dir), reuse=not fresh)
        self._ix.register_tokenizer(ANALYZER, self._analyzer)
        # Searches see a commit when apply reloads the reader, not whenever a watcher notices.
        self._ix.config_reader(reload_policy="Manual")
        self._ix.reload()
        self._writer: Any = self._ix.writer(WRITER_HEAP, 1)

    @property
    def mark(self) -> int:
        return self._mark

    @property
    def persisted_mark(self) -> int:
        return self._mark  # every apply commits

    def apply(self, rows: Sequence[ChunkRow], deletes: Sequence[int], mark: int,
              vectors: Mapping[int, np.ndarray]) -> None:
        with self._lock:
            w = self._writer
            try:
                # A delete only reaches documents added before it: the new versions survive.
                for cid in [r.id for r in rows] + list(deletes):
                    w.delete_documents_by_term("chunk_id", int(cid))
                for row in rows:
                    w.add_document(_document(row))
                w.commit()
            except BaseException:
                w.rollback()
                raise
            self._ix.reload()
            self._mark = max(self._mark, mark)
            write_json_atomic(self._state_file, {"mark": self._mark, "schema": SCHEMA_VERSION})

    def analyse(self, text: str) -> list[str]:
        # Whoosh drops one-letter words too; tantivy indexes them, but they are never asked.
        # A one-character CJK run is a word, and is asked.
        terms = self._analyzer.analyze(cjk.rewrite(text))
        return list(dict.fromkeys(t for t in terms if len(t) > 1 or cjk.is_cjk(t)))

    def _filter(self, filters: Filters) -> Any:
        """The filters as one query, or None."""
        import tantivy

        Q, schema = tantivy.Query, self._schema
        parts: list[Any] = []
        if filters.collections is not None:
            parts.append(Q.term_set_query(schema, "collection", list(filters.collections)))
        if filters.source_type:
            parts.append(Q.term_query(schema, "source_type", filters.source_type))
        if filters.date_from is not None or filters.date_to is not None:
            parts.append(Q.range_query(schema, "date", tantivy.FieldType.Integer,
                                       filters.date_from, filters.date_to))
        if filters.folder:
            parts.append(Q.term_query(schema, "folders", filters.folder))
        parts += [Q.term_query(schema, "tags", t.lower()) for t in filters.tags]
        for field, value in (("sender", filters.sender), ("author", filters.author)):
            if value:
                parts.append(Q.regex_query(schema, field,
                                           f".*{_regex_literal(value.lower())}.*"))
        if not parts:
            return None
        return Q.boolean_query([(tantivy.Occur.Must, p) for p in parts])

    def _search(self, query: Any, k: int, filters: Filters) -> list[tuple[int, float]]:
        import tantivy

        if k <= 0:
            return []
        if filters.active:
            checked = self._checked(query, k, filters)
            if checked is not None:
                return checked
        flt = self._filter(filters)
        if flt is not None:
            # The filter restricts and adds nothing to the score.
            query = tantivy.Query.boolean_query([
                (tantivy.Occur.Must, query),
                (tantivy.Occur.Must, tantivy.Query.const_score_query(flt, 0.0))])
        searcher = self._ix.searcher()
        hits = searcher.search(query, limit=k, count=False).hits
        if not hits:
            return []
        ids: list[Any] = searcher.fast_field_values("chunk_id", [addr for _, addr in hits])
        return [(int(cid), float(score)) for (score, _), cid in zip(hits, ids, strict=True)]

    def _checked(self, query: Any, k: int, filters: Filters) -> list[tuple[int, float]] | None:
        """For a collection and/or date filter: the best unfiltered hits that pass it, when at
        least ``k`` of them do (or the index holds no more); None to run the filter as a query.
        The first k passing hits in score order are the filtered top k."""
        only = Filters(collections=filters.collections, date_from=filters.date_from,
                       date_to=filters.date_to)
        if only != filters:
            return None
        searcher = self._ix.searcher()
        fetch = max(k * 4, FILTER_OVERFETCH)
        hits = searcher.search(query, limit=fetch, count=False).hits
        addrs = [addr for _, addr in hits]
        keep = [True] * len(hits)
        if filters.collections is not None:
            allowed = {collection_key(c) for c in filters.collections}
            keys: list[Any] = searcher.fast_field_values("collection_key", addrs)
            keep = [ok and key in allowed for ok, key in zip(keep, keys, strict=True)]
        if filters.date_from is not None or filters.date_to is not None:
            lo, hi = filters.date_from, filters.date_to
            dates: list[Any] = searcher.fast_field_values("date", addrs)
            keep = [ok and d is not None and (lo is None or d >= lo) and (hi is None or d <= hi)
                    for ok, d in zip(keep, dates, strict=True)]
        passed = [(score, addr) for (score, addr), ok in zip(hits, keep, strict=True) if ok]
        if len(passed) < k and len(hits) == fetch:
            return None
        passed = passed[:k]
        ids: list[Any] = searcher.fast_field_values("chunk_id", [a for _, a in passed])
        return [(int(cid), float(score)) for (score, _), cid in zip(passed, ids, strict=True)]

    def search_any(self, terms: Sequence[str], phrases: Sequence[Sequence[str]], k: int,
                   filters: Filters) -> list[tuple[int, float]]:
        import tantivy

        Q, schema = tantivy.Query, self._schema
        if not terms:
            return []
        parts = [(tantivy.Occur.Should, Q.term_query(schema, "text", t)) for t in terms]
        # Quoted phrases, and the CJK words of the query (as in WhooshStore), count double.
        parts += [(tantivy.Occur.Should, Q.boost_query(Q.phrase_query(schema, "text", list(p)),
                                                        2.0))
                  for p in cjk.with_words(phrases, terms) if len(p) > 1]
        return self._search(Q.boolean_query(parts), k, filters)

    def search_phrase(self, words: Sequence[str], k: int, filters: Filters
                      ) -> list[tuple[int, float]]:
        import tantivy

        if len(words) < 2:
            return []
        return self._search(tantivy.Query.phrase_query(self._schema, "text", list(words)), k,
                            filters)

    def save(self) -> None:
        """Nothing to do: each apply is a commit."""

    def segments(self) -> int:
        return int(self._ix.searcher().num_segments)

    def ids(self) -> set[int]:
        import tantivy

        searcher = self._ix.searcher()
        n = searcher.num_docs
        if n == 0:
            return set()
        hits = searcher.search(tantivy.Query.all_query(), limit=n, count=False).hits
        ids: list[Any] = searcher.fast_field_values("chunk_id", [a for _, a in hits])
        return {int(c) for c in ids}

    def reset(self, fingerprint: str) -> None:
        with self._lock:
            self._writer.delete_all_documents()
            self._writer.commit()
            self._ix.reload()
            self._mark = 0
            write_json_atomic(self._state_file, {"mark": 0, "schema": SCHEMA_VERSION})
            self.stale = False

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.wait_merging_threads()
                self._writer = None
