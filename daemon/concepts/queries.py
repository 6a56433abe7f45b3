"""Reference 003's ten tools over the concept store (decision 0033).

Scores follow 003's weights: catalog_search 25 % vector, 25 % BM25, 20 % title, 20 % concept,
10 % expansion; chunk searches 40 % vector, 40 % BM25, 20 % expansion; concept_search 40 %
name, 30 % vector, 20 % BM25, 10 % synonyms. 003's "WordNet" leg is served by the concept
table's own neighbours (no WordNet data ships as a package: decision 0033), and its result
fields keep 003's names (``wordnet`` among the scores).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragd.daemon.concepts.extract import STOPWORDS, normalise
from ragd.daemon.concepts.names import by_name, holds_words, name_words, one_or_copies, path_like
from ragd.daemon.stores.concepts import ConceptStore, unblob

CATALOG_LIMIT = 10
CHUNK_LIMIT = 20
# How each ranking weighs its scores (the totals, the debug breakdowns and `debug.weights`).
CATALOG_WEIGHTS = {"vector": 0.25, "bm25": 0.25, "title": 0.2, "concept": 0.2, "wordnet": 0.1}
CHUNK_WEIGHTS = {"vector": 0.4, "bm25": 0.4, "wordnet": 0.2}


def weighted(raw: dict[str, float], weights: dict[str, float]) -> float:
    return sum(w * raw[k] for k, w in weights.items())


def breakdown(scores: dict[str, float], weights: dict[str, float]) -> dict[str, Any]:
    """The debug score breakdown: each weighted score's value and weight."""
    return {k: {"value": scores[k], "weight": w} for k, w in weights.items()}
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
NEIGHBOUR_COS = 0.6
SYNONYM_COS = 0.8


class Refusal(Exception):
    """A call answered in 003's error shape."""

    def __init__(self, code: str, message: str, field: str | None = None,
                 context: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        err: dict[str, Any] = {"code": code, "message": message, "context": context or {}}
        if field is not None:
            err["field"] = field
        self.code = code
        self.payload = {"error": err,
                        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}


def validation(field: str, message: str) -> Refusal:
    return Refusal("VALIDATION_ERROR", message, field)


def not_found(message: str, **context: Any) -> Refusal:
    return Refusal("RECORD_NOT_FOUND", message, None, context)


def terms(text: str) -> list[str]:
    return [normalise(t) for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


def bm25(query: Sequence[str], docs: Sequence[Sequence[str]], k1: float = 1.2,
         b: float = 0.75) -> np.ndarray:
    """BM25 of each token list against the query terms, scaled to 0..1 (best = 1)."""
    n = len(docs)
    if not n or not query:
        return np.zeros(n, dtype=np.float32)
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    avg = sum(len(d) for d in docs) / n or 1.0
    out = np.zeros(n, dtype=np.float32)
    for i, d in enumerate(docs):
        tf = Counter(d)
        s = 0.0
        for q in set(query):
            if tf[q]:
                idf = math.log(1 + (n - df[q] + 0.5) / (df[q] + 0.5))
                s += idf * tf[q] * (k1 + 1) / (tf[q] + k1 * (1 - b + b * len(d) / avg))
        out[i] = s
    top = float(out.max())
    return out / top if top > 0 else out


def overlap(query: Sequence[str], words: set[str]) -> float:
    return sum(1 for q in set(query) if q in words) / len(set(query)) if query else 0.0


@dataclass
class ConceptTable:
    """Every concept's key, name and vector, and per concept the documents that hold it."""

    ids: list[int]
    keys: list[str]
    names: list[str]
    matrix: np.ndarray
    docs: dict[int, list[int]]  # concept id -> source ids


class Library:
    """Read-side of the store for the tools; the embedder answers query vectors."""

    def __init__(self, store: ConceptStore, embed_query: Any, catalog_db: sqlite3.Connection
                 ) -> None:
        self.store = store
        self.embed_query = embed_query
        self.catalog = catalog_db

    # -- loading ------------------------------------------------------------------------------
    def table(self) -> ConceptTable:
        with self.store.reading() as db:
            rows = db.execute("SELECT id, key, name, vector FROM concepts ORDER BY id").fetchall()
            links = db.execute("SELECT concept_id, source_id FROM doc_concepts").fetchall()
        docs: dict[int, list[int]] = {}
        for cid, sid in links:
            docs.setdefault(cid, []).append(sid)
        matrix = (np.vstack([unblob(r[3]) for r in rows]) if rows
                  else np.zeros((0, 1), dtype=np.float32))
        return ConceptTable([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                            matrix, docs)

    def documents(self) -> list[dict[str, Any]]:
        with self.store.reading() as db:
            rows = db.execute("SELECT source_id, collection, source, title, source_type,"
                              " metadata, summary, vector FROM docs").fetchall()
            names = db.execute("SELECT dc.source_id, c.name FROM doc_concepts dc JOIN concepts"
                               " c ON c.id=dc.concept_id ORDER BY dc.source_id, dc.rank"
                               ).fetchall()
            cats = db.execute("SELECT cd.source_id, k.name FROM category_docs cd JOIN"
                              " categories k ON k.id=cd.category_id"
                              " ORDER BY cd.source_id, k.parent IS NOT NULL").fetchall()
        concepts: dict[int, list[str]] = {}
        for sid, name in names:
            concepts.setdefault(sid, []).append(name)
        categories: dict[int, list[str]] = {}
        for sid, name in cats:
            categories.setdefault(sid, []).append(name)
        return [{"source_id": r[0], "collection": r[1], "source": r[2], "title": r[3],
                 "source_type": r[4], "metadata": json.loads(r[5]), "summary": r[6],
                 "vector": unblob(r[7]), "concept_names": concepts.get(r[0], []),
                 "categories": categories.get(r[0], [])} for r in rows]

    # -- expansion ------------------------------------------------------------------------------
    def expand(self, text: str, qvec: np.ndarray, table: ConceptTable, limit: int = 5
               ) -> list[str]:
        """The query's related terms: the concept names nearest it in the table."""
        if not len(table.ids):
            return []
        sims = table.matrix @ qvec
        own = set(terms(text))
        out: list[str] = []
        for i in np.argsort(-sims)[:limit * 3]:
            if sims[i] < NEIGHBOUR_COS or len(out) >= limit:
                break
            if set(table.keys[i].split()) - own:
                out.append(table.names[i])
        return out

    def relations(self, idx: int, table: ConceptTable) -> dict[str, list[str]]:
        """Synonyms (near vectors), broader (a part of its words), narrower (holds its words),
        related (near): 003's WordNet fields, from the table's own neighbours."""
        key = table.keys[idx]
        words = key.split()
        sims = table.matrix @ table.matrix[idx]
        order = [int(j) for j in np.argsort(-sims) if int(j) != idx][:40]
        synonyms = [table.names[j] for j in order if sims[j] >= SYNONYM_COS][:5]
        related = [table.names[j] for j in order
                   if NEIGHBOUR_COS <= sims[j] < SYNONYM_COS][:8]
        pad = f" {key} "
        broader = [table.names[j] for j, k in enumerate(table.keys)
                   if j != idx and len(k.split()) < len(words) and f" {k} " in pad][:5]
        narrower = [table.names[j] for j, k in enumerate(table.keys)
                    if j != idx and len(k.split()) > len(words) and f" {key} " in f" {k} "][:10]
        return {"synonyms": synonyms, "broader_terms": broader, "narrower_terms": narrower,
                "related_concepts": related}

    # -- tools --------------------------------------------------------------------------------
    def catalog_search(self, text: str, debug: bool = False) -> dict[str, Any]:
        qvec = self.embed_query(text)
        table = self.table()
        docs = self.documents()
        q = terms(text)
        expanded = self.expand(text, qvec, table)
        exp_terms = sorted({t for name in expanded for t in terms(name)} - set(q))
        bodies = [terms(" ".join([d["title"], d["summary"], *d["concept_names"]])) for d in docs]
        kw = bm25(q, bodies)
        out = []
        for i, d in enumerate(docs):
            vector = max(0.0, float(d["vector"] @ qvec))
            title_words = set(terms(d["title"]))
            title = overlap(q, title_words)
            if text.strip().lower() in d["title"].lower():
                title = 1.0
            cwords = {w for n in d["concept_names"] for w in terms(n)}
            matched = [n for n in d["concept_names"] if set(terms(n)) & set(q)][:10]
            concept = overlap(q, cwords)
            wordnet = overlap(exp_terms, cwords | set(bodies[i])) if exp_terms else 0.0
            raw = {"vector": vector, "bm25": float(kw[i]), "title": title, "concept": concept,
                   "wordnet": wordnet}
            scores = {k: round(v, 4) for k, v in raw.items()}
            total = weighted(raw, CATALOG_WEIGHTS)
            item = {"source": d["source"], "title": d["title"],
                    "summary": d["summary"][:200], "score": round(total, 4),
                    "scores": scores, "matched_concepts": matched,
                    "expanded_terms": exp_terms, "categories": d["categories"],
                    "metadata": d["metadata"]}
            if debug:
                item["score_breakdown"] = breakdown(scores, CATALOG_WEIGHTS)
            out.append(item)
        out.sort(key=lambda r: -r["score"])
        answer: dict[str, Any] = {"results": out[:CATALOG_LIMIT]}
        if debug:
            answer["debug"] = {"query_terms": q, "expanded_terms": exp_terms,
                               "expanded_from_concepts": expanded,
                               "weights": dict(CATALOG_WEIGHTS),
                               "documents_scored": len(docs)}
        return answer

    def rank_chunks(self, text: str, rows: Sequence[tuple[int, str, tuple[str, str], np.ndarray]],
                    debug: bool, limit: int = CHUNK_LIMIT) -> dict[str, Any]:
        """Chunks (id, text, title, vector) by 40 % vector, 40 % BM25, 20 % expansion."""
        qvec = self.embed_query(text)
        table = self.table()
        q = terms(text)
        expanded = self.expand(text, qvec, table)
        exp_terms = sorted({t for name in expanded for t in terms(name)} - set(q))
        toks = [terms(r[1]) for r in rows]
        kw = bm25(q, toks)
        keyset = dict(zip(table.keys, table.names, strict=True))
        out: list[dict[str, Any]] = []
        for i, (cid, body, (source, title), vec) in enumerate(rows):
            vector = max(0.0, float(vec @ qvec))
            words = set(toks[i])
            wordnet = overlap(exp_terms, words) if exp_terms else 0.0
            raw = {"vector": vector, "bm25": float(kw[i]), "wordnet": wordnet}
            total = weighted(raw, CHUNK_WEIGHTS)
            low = body.lower()
            matched = [keyset[k] for k in (normalise(" ".join(q)), *q) if k in keyset
                       and k in low][:5] + [n for n in expanded if n.lower() in low][:5]
            item: dict[str, Any] = {
                "text": body, "source": source, "catalog_title": title,
                "chunk_id": cid, "score": round(total, 4),
                "scores": {"vector": round(vector, 4), "bm25": round(raw["bm25"], 4),
                           "title": 0.0, "wordnet": round(wordnet, 4)},
                "matched_concepts": list(dict.fromkeys(matched)),
                "expanded_terms": exp_terms}
            if debug:
                item["score_breakdown"] = breakdown(item["scores"], CHUNK_WEIGHTS)
            out.append(item)
        out.sort(key=lambda r: -r["score"])
        answer: dict[str, Any] = {"results": out[:limit]}
        if debug:
            answer["debug"] = {"query_terms": q, "expanded_terms": exp_terms,
                               "expanded_from_concepts": expanded,
                               "weights": dict(CHUNK_WEIGHTS),
                               "chunks_scored": len(rows)}
        return answer

    def chunk_rows(self, chunk_ids: Sequence[int], fingerprint: str
                   ) -> list[tuple[int, str, tuple[str, str], np.ndarray]]:
        """(id, text, (source, title), vector) of these chunks, those with a vector."""
        if not chunk_ids:
            return []
        docs = {d["source_id"]: d for d in self.documents()}
        out = []
        for start in range(0, len(chunk_ids), 500):
            part = list(chunk_ids[start:start + 500])
            marks = ",".join("?" * len(part))
            rows = self.catalog.execute(
                "SELECT ch.id, ch.text, ch.source_id, e.vector FROM chunks ch JOIN embeddings e"
                f" ON e.text_hash=ch.embed_hash AND e.fingerprint=? WHERE ch.id IN ({marks})",
                (fingerprint, *part)).fetchall()
            for cid, body, sid, vec in rows:
                d = docs.get(sid)
                if d is not None:
                    out.append((cid, body, (d["source"], d["title"]), unblob(vec)))
        return out

    def find_document(self, query: str) -> dict[str, Any]:
        """The document a title, path, file name, author or subject names (issue 37): by
        name first (:func:`by_name`); else the one whose concepts hold every word of the
        query but stopwords ("Captain Ahab", "Martians"). A likeness of meaning names
        no document, nor do words several documents hold (but copies of one): an unknown
        title is not found, never answered with another book. Empty and path-like input
        (``/``, ``\\``, ``..``) match only a document's own path."""
        docs = self.documents()
        found = by_name(docs, query)
        if found is not None:
            return found
        # no concept holds a stopword of the analysis ("dark matter" is the concept "dark")
        words = [w for w in name_words(query) if w not in STOPWORDS]
        if not words or path_like(query):
            raise not_found(f"no document matches {query!r}", document_query=query)
        found = one_or_copies([d for d in docs if holds_words(words, {w for n in d["concept_names"]
                                                        for w in name_words(n)}, fuzzy=False)])
        if found is None:
            raise not_found(f"no document matches {query!r}", document_query=query)
        return found

    def resolve(self, concept: str, table: ConceptTable) -> tuple[int | None, dict[str, Any]]:
        """The concept a term names: 40 % name, 30 % vector, 20 % BM25 of the name's words,
        10 % synonym (a near neighbour's name matches). (index, debug scores)."""
        if not table.ids:
            return None, {}
        key = normalise(concept.strip())
        if key in table.keys:
            return table.keys.index(key), {"match": "exact", "key": key}
        qvec = self.embed_query(concept)
        sims = table.matrix @ qvec
        q = terms(concept)
        name_tokens = [k.split() for k in table.keys]
        kw = bm25(q, name_tokens)
        cands = np.argsort(-sims)[:50]
        best: int | None = None
        best_s = 0.0
        rows: list[dict[str, Any]] = []
        for i in cands:
            i = int(i)
            name = 1.0 if key in table.keys[i] else overlap(q, set(name_tokens[i]))
            syn = 1.0 if sims[i] >= SYNONYM_COS else 0.0
            s = 0.4 * name + 0.3 * max(0.0, float(sims[i])) + 0.2 * float(kw[i]) + 0.1 * syn
            rows.append({"concept": table.names[i], "score": round(s, 4),
                         "name": round(name, 4), "vector": round(float(sims[i]), 4),
                         "bm25": round(float(kw[i]), 4), "synonym": syn})
            if s > best_s:
                best, best_s = i, s
        rows.sort(key=lambda r: -float(r["score"]))
        if best is None or best_s < 0.3:
            return None, {"match": "none", "candidates": rows[:5]}
        return best, {"match": "fuzzy", "candidates": rows[:5]}
