"""Which notes a note should link to (decision 0028): sections compared, notes already linked
left out, the ``[[Note#Section]]`` to paste and why.

Every body section of the note (its chunks, with their vectors from the catalog's cache: no
embedding) asks the vector index for its nearest chunks in the same vault. A candidate note
scores by its best section pairs: the best similarity plus a small share of its next best
ones, so a note that matches several sections ranks above one that matches one sentence by
luck. The note itself, the notes it already links to (resolved as Obsidian does) and
boilerplate chunks (a footer many notes share, decision 0026) are left out. The link points at
the candidate's best-matching section, the reason names the pair of headings.

``chunk_similarity`` is reference 001's method, kept for the bench: the whole note embedded as
one query, chunks ranked by similarity and grouped by file, each file scored by its best chunk.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragd.daemon.search.filters import Filters, to_sql
from ragd.daemon.stores import links
from ragd.daemon.stores.catalog import Collection

PER_SECTION = 40  # neighbours fetched per section of the note
MAX_SECTIONS = 24  # sections of a long note that ask (the longest ones)
SUPPORT = 0.15  # share of a note's next best section pairs added to its best one


@dataclass(frozen=True)
class Candidate:
    source_id: int
    score: float
    best: float
    section: tuple[str, ...]  # the candidate's matching heading path
    because: tuple[str, ...]  # the note's own heading path that matched it


def _note_chunks(catalog: Any, source_id: int) -> list[Any]:
    with catalog.reading() as db:
        return db.execute("SELECT id, ordinal, heading_path, text FROM chunks WHERE"
                          " source_id=? ORDER BY ordinal", (source_id,)).fetchall()


def _allowed(catalog: Any, coll: Collection, folder: str | None, tags: Sequence[str]
             ) -> list[int] | None:
    """Chunk ids the suggestions may come from (None: the whole collection, unfiltered)."""
    where, args = to_sql(Filters(collections=(coll.name,), folder=folder,
                                 tags=tuple(t.strip().lstrip("#").lower() for t in tags
                                            if t.strip())))
    return catalog.filter_chunk_ids(where, args)


def sections(catalog: Any, fingerprint: str, source_id: int
             ) -> list[tuple[np.ndarray, tuple[str, ...]]]:
    """A note's sections as queries: each body chunk's cached vector and heading path (the
    longest MAX_SECTIONS of them); its properties chunks when it has no body."""
    own = [r for r in _note_chunks(catalog, source_id) if r["ordinal"] >= 0] or \
        _note_chunks(catalog, source_id)
    own = sorted(own, key=lambda r: -len(r["text"]))[:MAX_SECTIONS]
    vectors = catalog.chunk_vectors(fingerprint, [r["id"] for r in own])
    return [(vectors[r["id"]], tuple(json.loads(r["heading_path"]))) for r in own
            if r["id"] in vectors]


def rank(catalog: Any, faiss: Any, fingerprint: str, coll: Collection, source_id: int, *,
         exclude: set[int], folder: str | None = None, tags: Sequence[str] = (),
         per_section: int = PER_SECTION,
         queries: list[tuple[np.ndarray, tuple[str, ...]]] | None = None) -> list[Candidate]:
    """Candidate notes for ``source_id``, best first (see the module doc). ``queries``
    replaces the note's own sections (the bench asks with its links taken out)."""
    asking = queries if queries is not None else sections(catalog, fingerprint, source_id)
    if not asking:
        return []
    allowed = _allowed(catalog, coll, folder, tags)
    query = np.stack([v for v, _ in asking]).astype(np.float32)
    pairs: dict[int, list[tuple[float, int, int]]] = defaultdict(list)  # note -> (sim, mine, theirs)
    hits_by_row = _search(faiss, query, per_section, allowed)
    found_ids = sorted({cid for hits in hits_by_row for cid, _ in hits})
    rows = catalog.chunks_by_id(found_ids)
    shared = catalog.boilerplate(found_ids)
    for mine, hits in enumerate(hits_by_row):
        for cid, sim in hits:
            row = rows.get(cid)
            if row is None or row.collection != coll.name or cid in shared:
                continue
            if row.source_id == source_id or row.source_id in exclude:
                continue
            pairs[row.source_id].append((float(sim), mine, cid))
    mine_paths = {i: path for i, (_, path) in enumerate(asking)}
    out = []
    for sid, found in pairs.items():
        found.sort(reverse=True)
        best = found[0]
        seen_mine: set[int] = {best[1]}
        support = 0.0
        for sim, mine_id, _ in found[1:]:
            if mine_id not in seen_mine:  # other sections of the note that agree
                seen_mine.add(mine_id)
                support += sim
        score = best[0] + SUPPORT * support / max(1, len(asking))
        out.append(Candidate(sid, score, best[0], rows[best[2]].heading_path,
                             mine_paths.get(best[1], ())))
    out.sort(key=lambda c: -c.score)
    return out


def _search(faiss: Any, query: np.ndarray, k: int, allowed: Sequence[int] | None
            ) -> list[list[tuple[int, float]]]:
    """Each query row's top ``k`` chunks (id, similarity), within ``allowed`` when given."""
    return [faiss.search(q, k, allowed) for q in query]


def chunk_similarity(catalog: Any, faiss: Any, embed: Callable[[list[str]], np.ndarray],
                     coll: Collection, source_id: int, text: str, *, exclude: set[int],
                     k: int = 200) -> list[int]:
    """Reference 001's method: the note's text embedded as one query (the model cuts it at
    its token limit, as theirs does), chunks ranked by similarity, grouped by file, each file
    ranked by its best chunk. Returns source ids, best first."""
    vec = embed([text])[0]
    allowed = _allowed(catalog, coll, None, ())
    hits = _search(faiss, np.asarray([vec], dtype=np.float32), k, allowed)[0]
    rows = catalog.chunks_by_id([cid for cid, _ in hits])
    order: list[int] = []
    for cid, _sim in hits:
        row = rows.get(cid)
        if row is None or row.source_id == source_id or row.source_id in exclude:
            continue
        if row.source_id not in order:
            order.append(row.source_id)
    return order


def suggestions(catalog: Any, faiss: Any, fingerprint: str, coll: Collection,
                resolver: links.Resolver, source: Any, *, n: int, min_similarity: float,
                exclude_current: bool, exclude_linked: bool, folder: str | None,
                tags: Sequence[str]) -> list[dict[str, Any]]:
    """The ragd ``note_suggest`` answer rows: {path, title, similarity, reason,
    suggested_link, section}."""
    with catalog.reading() as db:
        linked = links.linked_ids(db, source["id"], resolver) if exclude_linked else set()
    ranked = rank(catalog, faiss, fingerprint, coll, source["id"], exclude=linked,
                  folder=folder, tags=tags)
    if not exclude_current:
        ranked.insert(0, Candidate(source["id"], 1.0, 1.0, (), ()))
    out = []
    for cand in ranked:
        if cand.best < min_similarity:
            continue
        path = resolver.path_of.get(cand.source_id)
        if path is None:
            continue
        name = _link_name(path, resolver)
        heading = cand.section[-1] if cand.section else ""
        link = f"[[{name}#{heading}]]" if heading else f"[[{name}]]"
        why = (f"its section \"{' > '.join(cand.section) or 'opening'}\" is close to this "
               f"note's \"{' > '.join(cand.because) or 'opening'}\" "
               f"(similarity {cand.best:.2f})")
        out.append({"path": path, "title": _title(catalog, cand.source_id),
                    "similarity": round(cand.score, 4), "reason": why,
                    "suggested_link": link, "section": heading})
        if len(out) >= n:
            break
    return out


def _link_name(path: str, resolver: links.Resolver) -> str:
    """The shortest name that resolves to ``path``: its name, or its path when another note
    shares the name (Obsidian's "shortest path when possible")."""
    stem = path[:-3] if path.lower().endswith(".md") else path
    name = stem.rpartition("/")[2]
    twins = resolver.by_name.get(links.link_key(path), [])
    return name if len(twins) <= 1 else stem


def _title(catalog: Any, source_id: int) -> str:
    with catalog.reading() as db:
        row = db.execute("SELECT title FROM sources WHERE id=?", (source_id,)).fetchone()
    return str(row[0]) if row else ""
