"""One pass of the concept analysis: which documents qualify, analyse the new and changed
ones, forget the removed ones, re-cluster the categories (decision 0033).

It reads the catalog through a read-only connection of its own (WAL: it never waits for the
writer, and the writer never waits for it) and takes chunk vectors from the catalog's
embedding cache, so a document is analysed only once its chunks are all embedded, and its
text is never embedded again: only the candidate phrases are, and a phrase already in the
concept table is not.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np

from ragd.daemon.concepts import categories as cats
from ragd.daemon.concepts import extract, languages
from ragd.daemon.embed.embedding import Embedder
from ragd.daemon.stores.concepts import ConceptStore, DocRecord

log = logging.getLogger(__name__)

DOCUMENT_TYPES = ("pdf", "epub", "docx", "mobi", "azw3", "odt", "rtf", "book", "doc", "pptx")
SKIP_KINDS = ("mail", "rss", "code")
EMBED_BATCH = 32
MAX_TEXT_CHARS = 3_000_000  # a longer document's concepts come from its first 3 M characters
TERMS_PER_DOC = 400
CHUNK_REFS = 50
# Boilerplate (a licence, a distributor's header, a running page header): a sentence found in
# SHARED_DOCS documents, or in REPEATED_CHUNKS chunks of one (and a fifth of them), is not the
# document's own text. Unless it is most of the document: then it is a copy of another one.
SHARED_DOCS = 3
REPEATED_CHUNKS = 5
MAX_BOILERPLATE_SHARE = 0.4
MIN_SENTENCE_CHARS = 20
# A phrase among the frequent ones of more than this share of the library (of at least
# COMMON_MIN_DOCS documents) says nothing about one document.
COMMON_SHARE = 0.5
COMMON_MIN_DOCS = 8
_PIECE = re.compile(r"(?<=[.!?])\s+|\n+")
_SHAPE = re.compile(r"[^\w]+|\d+")


@dataclass(frozen=True)
class Settings:
    """What qualifies and how much is kept (``[concepts]``)."""

    min_note_chars: int = 20_000
    concepts_per_doc: int = 60


@dataclass(frozen=True)
class Eligible:
    source_id: int
    sha256: str
    collection: str
    source: str
    title: str
    source_type: str
    metadata: dict[str, Any]


def open_catalog_readonly(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30, check_same_thread=False)
    db.execute("PRAGMA query_only=ON")
    return db


def full_path(root: str, path: str, container: str | None, metadata: dict[str, Any]) -> str:
    """The document's own file: a Calibre book's file, else root/path."""
    uri = metadata.get("file_uri")
    if isinstance(uri, str) and uri.startswith("file:"):
        return unquote(urlparse(uri).path)
    return os.path.join(root, container or path)


def eligible(db: sqlite3.Connection, settings: Settings, *, embedded: bool = True
             ) -> list[Eligible]:
    """Documents that qualify: books, papers and documents (by type, or any Calibre book),
    and notes of at least ``min_note_chars``; with ``embedded``, only those whose chunks are
    all embedded (what an analysis reads), else also those whose vectors are still to come."""
    marks = ",".join("?" * len(DOCUMENT_TYPES))
    kinds = ",".join("?" * len(SKIP_KINDS))
    vectors = (" AND NOT EXISTS (SELECT 1 FROM unembedded u WHERE u.source_id=s.id)"
               if embedded else "")
    rows = db.execute(
        "SELECT s.id, s.sha256, c.name, c.root, s.path, s.container, s.title, s.source_type,"
        " s.metadata FROM sources s JOIN collections c ON c.id=s.collection_id"
        f" WHERE s.status='ok' AND c.kind NOT IN ({kinds})"
        f" AND (c.kind='calibre' OR s.source_type IN ({marks}) OR s.size >= ?){vectors}"
        " AND EXISTS (SELECT 1 FROM chunks ch WHERE ch.source_id=s.id)",
        (*SKIP_KINDS, *DOCUMENT_TYPES, settings.min_note_chars)).fetchall()
    out = []
    for sid, sha, coll, root, path, container, title, stype, meta in rows:
        metadata = json.loads(meta or "{}")
        out.append(Eligible(sid, sha, coll, full_path(root, path, container, metadata),
                            title or Path(path).stem, stype, metadata))
    return out


def _sentence_hash(piece: str) -> int | None:
    """A sentence's shape (letters only, case folded) as a signed 64-bit number; None for a
    short one."""
    shape = _SHAPE.sub(" ", piece.lower()).strip()
    if len(shape) < MIN_SENTENCE_CHARS:
        return None
    return int.from_bytes(hashlib.blake2b(shape.encode(), digest_size=8).digest(), "big",
                          signed=True)


def sentence_hashes(texts: Sequence[str]) -> set[int]:
    """The document's sentence shapes, for the library's boilerplate count."""
    return {h for t in texts for p in _PIECE.split(t) if (h := _sentence_hash(p)) is not None}


def clean_texts(texts: Sequence[str], shared: set[int]) -> list[str]:
    """The chunks' text without boilerplate sentences: those ``shared`` by several documents
    of the library and those repeated in many chunks of this one. Left whole when the
    boilerplate would be most of it (an edition of a book the library holds twice)."""
    pieces = [[(p, _sentence_hash(p)) for p in _PIECE.split(t)] for t in texts]
    in_chunks: dict[int, int] = {}
    for chunk in pieces:
        for h in {h for _, h in chunk if h is not None}:
            in_chunks[h] = in_chunks.get(h, 0) + 1
    repeated = max(REPEATED_CHUNKS, len(texts) // 5)
    drop = {h for h, n in in_chunks.items() if n >= repeated} | (shared & set(in_chunks))
    total = sum(len(p) for chunk in pieces for p, _ in chunk) or 1
    dropped = sum(len(p) for chunk in pieces for p, h in chunk if h in drop)
    if not drop or dropped / total > MAX_BOILERPLATE_SHARE:
        return list(texts)
    return ["\n".join(p for p, h in chunk if h not in drop) for chunk in pieces]


def shared_sentences(db: sqlite3.Connection | Any) -> set[int]:
    """Sentence shapes found in SHARED_DOCS documents or more (a concepts.sqlite connection)."""
    return {r[0] for r in db.execute("SELECT hash FROM doc_sentences GROUP BY hash"
                                     " HAVING COUNT(*) >= ?", (SHARED_DOCS,))}


def document_stopwords(metadata: dict[str, Any], texts: Sequence[str]
                       ) -> tuple[tuple[str, ...], frozenset[str]]:
    """The document's languages (its metadata's, checked against its text, or detected) and
    the function words of other languages its candidates leave out (decision 0036)."""
    langs = languages.document_languages(languages.metadata_languages(metadata),
                                         languages.word_counts(texts))
    return langs, languages.stopwords_for(langs)


def candidate_counts(texts: Sequence[str], stops: frozenset[str] = frozenset()
                     ) -> dict[str, int]:
    """Candidate phrase -> occurrences over the (cleaned) chunks, up to MAX_TEXT_CHARS;
    ``stops``: the document's function words of other languages."""
    counts: dict[str, int] = {}
    used = 0
    for text in texts:
        if used > MAX_TEXT_CHARS:
            break
        used += len(text)
        for k, n in extract.candidates(text, stops).items():
            counts[k] = counts.get(k, 0) + n
    return counts


def drop_common(counts: dict[str, int], df: Callable[[str], int], n_docs: int
                ) -> dict[str, int]:
    """Without the phrases frequent in most of the library (``df`` counts this document):
    they name no document, and once the library holds several books in a language that
    STOPWORDS does not cover, they are its function words."""
    if n_docs < COMMON_MIN_DOCS:
        return counts
    return {k: n for k, n in counts.items() if df(extract.normalise(k)) / n_docs <= COMMON_SHARE}


def _chunks(db: sqlite3.Connection, source_id: int, fingerprint: str
            ) -> tuple[list[int], list[str], np.ndarray]:
    """A document's body chunks (ids, texts, vectors): its properties chunks (tags, aliases,
    the metadata shown as text) are not its text."""
    rows = db.execute("SELECT id, text, embed_hash FROM chunks WHERE source_id=? AND"
                      " ordinal >= 0 ORDER BY ordinal", (source_id,)).fetchall()
    hashes = sorted({r[2] for r in rows})
    vecs: dict[str, np.ndarray] = {}
    for start in range(0, len(hashes), 500):
        part = hashes[start:start + 500]
        q = ",".join("?" * len(part))
        for h, b in db.execute(f"SELECT text_hash, vector FROM embeddings WHERE fingerprint=?"
                               f" AND text_hash IN ({q})", (fingerprint, *part)):
            vecs[h] = np.frombuffer(b, dtype=np.float32)
    keep = [r for r in rows if r[2] in vecs]
    if not keep:
        return [], [], np.zeros((0, 0), dtype=np.float32)
    return ([r[0] for r in keep], [r[1] for r in keep],
            np.vstack([vecs[r[2]] for r in keep]).astype(np.float32))


def _norm(v: np.ndarray) -> np.ndarray:
    return (v / (np.linalg.norm(v) or 1.0)).astype(np.float32)


class Analyser:
    """Analyses documents into a :class:`ConceptStore`; ``pause`` is called between steps and
    returns only when the analysis may go on (it raises to give up)."""

    def __init__(self, catalog_path: Path, store: ConceptStore, embedder: Embedder,
                 settings: Settings, pause: Callable[[], None] = lambda: None) -> None:
        self.catalog_path = catalog_path
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.pause = pause
        self.analysed_total = 0
        self.last_pass: dict[str, Any] = {}

    def run_pass(self, recluster: bool = True) -> dict[str, Any]:
        """Bring the store up to date with the catalog (the categories too, with
        ``recluster``); what it did: analysed, removed, waiting (documents whose vectors are
        still to come), seconds."""
        started = time.monotonic()
        db = open_catalog_readonly(self.catalog_path)
        try:
            docs = eligible(db, self.settings)
            later = len(eligible(db, self.settings, embedded=False)) - len(docs)
            have = self.store.analysed()
            wanted = {d.source_id for d in docs}
            gone = [sid for sid in have if sid not in wanted]
            removed = self.store.remove(gone)
            self.store.keep_sentences(wanted)
            todo = [d for d in docs if have.get(d.source_id) != d.sha256]
            for doc in todo:  # every new text counts in the boilerplate before any analysis
                self.pause()
                texts = [r[0] for r in db.execute(
                    "SELECT text FROM chunks WHERE source_id=? AND ordinal >= 0",
                    (doc.source_id,))]
                self.store.put_sentences(doc.source_id, sentence_hashes(texts))
            with self.store.reading() as sdb:
                shared = shared_sentences(sdb) if todo else set()
            for doc in todo:
                self.pause()
                self.analyse(db, doc, shared)
        finally:
            db.close()
        if recluster and (removed or todo):
            self.recluster()
        self.last_pass = {"analysed": len(todo), "removed": removed, "waiting": later,
                          "seconds": round(time.monotonic() - started, 2)}
        return self.last_pass

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        out = []
        for start in range(0, len(texts), EMBED_BATCH):
            self.pause()
            out.append(np.asarray(self.embedder.embed(list(texts[start:start + EMBED_BATCH])),
                                  dtype=np.float32))
        return np.vstack(out) if out else np.zeros((0, self.embedder.dimension), np.float32)

    def analyse(self, db: sqlite3.Connection, doc: Eligible, shared: set[int]) -> None:
        t0 = time.monotonic()
        ids, texts, vecs = _chunks(db, doc.source_id, self.embedder.fingerprint)
        if not ids:
            return
        doc_vec = _norm(vecs.mean(axis=0))
        texts = clean_texts(texts, shared)
        langs, stops = document_stopwords(doc.metadata, texts)
        counts = candidate_counts(texts, stops)
        surface = extract._surface(counts)
        frequent = sorted(surface, key=lambda k: -surface[k][1])[:TERMS_PER_DOC]
        df = self.store.document_frequency(frequent)
        n_docs = self.store.doc_count() + 1
        counts = drop_common(counts, lambda k: df.get(k, 0) + 1, n_docs)
        pool = extract.tfidf_rank(counts, lambda k: df.get(k, 0) + 1, n_docs)
        known = self.store.concept_vectors([p[0] for p in pool])
        missing = [p for p in pool if p[0] not in known]
        fresh = self._embed([p[1] for p in missing])
        for p, v in zip(missing, fresh, strict=True):
            known[p[0]] = v
        phrase_vecs = (np.vstack([known[p[0]] for p in pool]) if pool
                       else np.zeros((0, len(doc_vec)), np.float32))
        ranked = extract.rank(pool, doc_vec, phrase_vecs, limit=self.settings.concepts_per_doc)
        lowered = [languages.fold(t) for t in texts]
        concepts = []
        for c in ranked:
            pattern = re.compile(r"\b" + re.escape(c.key.rstrip("y")) if c.key.endswith("y")
                                 else r"\b" + re.escape(c.key))
            refs = [ids[i] for i, t in enumerate(lowered) if pattern.search(t)][:CHUNK_REFS]
            concepts.append((c, known[c.key], refs))
        summary = extract.summary(texts, vecs, doc_vec, [c.key for c in ranked])
        meta = {k: doc.metadata.get(k) for k in ("authors", "tags", "calibre_tags", "series",
                                                 "publisher", "pages") if doc.metadata.get(k)}
        record = DocRecord(doc.source_id, doc.sha256, doc.collection, doc.source, doc.title,
                           doc.source_type, meta, summary, doc_vec,
                           round(time.monotonic() - t0, 3))
        self.store.put(record, concepts, frequent)
        self.analysed_total += 1
        log.info("concepts: %s analysed in %.2f s (%d chunks, %d concepts, languages %s)",
                 doc.title, record.seconds, len(ids), len(concepts), ",".join(langs) or "?")

    def recluster(self) -> None:
        ids, vectors = self.store.doc_vectors()
        fresh = cats.hierarchy(ids, vectors, self.store.doc_concept_keys(),
                               self.store.categories(), self.store.display_names())
        self.store.put_categories(fresh)
