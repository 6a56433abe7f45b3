"""Which notes a note should link to (decisions 0028, 0046): links a person would accept, the
``[[Note#Section]]`` to paste and why.

Measured by taking a link out of a note of the shared vaults and asking for it back
(``bench/suggest_links.py``): text alone finds about half of the links people made; the rest
follows from what notes like theirs link. A candidate scores by five pieces of evidence:

- **sections alike**: every section of the note (its chunks, vectors from the catalog's
  cache: no embedding) asks the vector index for its nearest chunks in the vault; the
  candidate's best section pair (cosine) plus a small share of its other sections' best;
- **notes like this one link to it**: the links of the most alike notes vote, each vote
  weighted by how alike that note is;
- **notes that link where this note links also link to it** (bibliographic coupling);
- **it links here**, weighted by how few notes it links to (an index links everything);
- **this note names it** (its file name or an alias, unlinked), weighted by how rare the name
  is in the vault ("GitHub" is named in every plugin note of a plugin directory).

Each weight is an IDF, as a search engine weighs a word: a note linked from everywhere (a
settings page, a category every note carries) gets nothing from being common, only from being
alike, so it does not top every note's list. The note's own folder earns nothing. The note
itself, the notes it already links to (resolved as Obsidian does) and boilerplate chunks (a
footer many notes share, decision 0026) are left out. ``similarity`` is the cosine of the best
section pair, in [0, 1], and ``min_similarity`` filters on it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragd.daemon.models import Filters
from ragd.daemon.search.filters import to_sql
from ragd.daemon.stores import links
from ragd.daemon.stores.catalog import Collection

PER_SECTION = 100  # neighbours fetched per section of the note
MAX_SECTIONS = 24  # sections of a long note that ask (the longest ones)
SUPPORT = 0.15  # share of a note's next best section pairs added to its best one
NEIGHBOURS = 10  # most alike notes whose links vote
# Weights of the evidence, the content score counting 1: fitted by logistic regression on
# links taken out of the shared vaults and asked back (decision 0046).
VOTE = 2.0
COUPLING = 1.0
BACKLINK = 1.0
MENTION = 1.5
SAMPLE_NOTES = 1000  # notes read to learn how common a name is in a vault

_PROPERTY_KEY = re.compile(r"^[^\S\n]*[\w .-]+:[^\S\n]?", re.MULTILINE)
_LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class Candidate:
    source_id: int
    score: float
    best: float | None  # cosine of the best section pair (None: no section's neighbours)
    section: tuple[str, ...]  # the candidate's matching heading path
    because: tuple[str, ...]  # the note's own heading path that matched it
    voters: tuple[int, ...] = ()  # alike notes that link to it, most alike first
    links_here: bool = False
    named: str = ""  # the name of it the note's text mentions
    bound: float = 1.0  # its cosine is at most this (known before ``best`` is)


@dataclass(frozen=True)
class Evidence:
    """The link graph side of a note's candidates (see ``graph_evidence``)."""

    vote: dict[int, float]
    coupling: dict[int, float]
    voters: dict[int, list[int]]
    backlinks: dict[int, float]  # note linking here -> how few notes it links to (IDF)


def _note_chunks(catalog: Any, source_id: int) -> list[Any]:
    with catalog.reading() as db:
        return db.execute("SELECT id, ordinal, heading_path, text FROM chunks WHERE"
                          " source_id=? ORDER BY ordinal", (source_id,)).fetchall()


def _filters(coll: Collection, folder: str | None, tags: Sequence[str]) -> Filters:
    return Filters(collections=(coll.name,), folder=folder,
                   tags=tuple(t.strip().lstrip("#").lower() for t in tags if t.strip()))


def _allowed(catalog: Any, coll: Collection, folder: str | None, tags: Sequence[str]
             ) -> list[int] | None:
    """Chunk ids the suggestions may come from (None: the whole collection, unfiltered)."""
    where, args = to_sql(_filters(coll, folder, tags))
    return catalog.filter_chunk_ids(where, args)


def _allowed_sources(catalog: Any, coll: Collection, folder: str | None,
                     tags: Sequence[str]) -> set[int] | None:
    """Notes a folder or tag filter lets through (None: no filter), for the candidates the
    link graph brings, which the vector search did not filter."""
    if not folder and not any(t.strip() for t in tags):
        return None
    where, args = to_sql(_filters(coll, folder, tags))
    with catalog.reading() as db:
        rows = db.execute("SELECT s.id FROM sources s JOIN collections c ON"
                          f" c.id=s.collection_id WHERE {where}", tuple(args)).fetchall()
    return {r[0] for r in rows}


def sections(catalog: Any, fingerprint: str, source_id: int
             ) -> list[tuple[np.ndarray, tuple[str, ...]]]:
    """A note's sections as queries: each chunk's cached vector and heading path (the
    longest MAX_SECTIONS of them). Properties ask too: a category, an author or a type in
    them is what many links of a vault point at."""
    own = sorted(_note_chunks(catalog, source_id), key=lambda r: -len(r["text"]))
    own = own[:MAX_SECTIONS]
    vectors = catalog.chunk_vectors(fingerprint, [r["id"] for r in own])
    return [(vectors[r["id"]], tuple(json.loads(r["heading_path"]))) for r in own
            if r["id"] in vectors]


def _chunk_homes(catalog: Any, coll: Collection, ids: Sequence[int]
                 ) -> dict[int, tuple[int, str]]:
    """Chunk id -> (source id, heading path as stored) for the chunks of ``ids`` in ``coll``:
    the two columns the ranking needs (a full chunk row decodes its note's metadata, which
    cost more than the rest of a suggestion)."""
    out: dict[int, tuple[int, str]] = {}
    with catalog.reading() as db:
        for start in range(0, len(ids), 500):
            part = list(ids[start:start + 500])
            marks = ",".join("?" * len(part))
            for cid, sid, heading in db.execute(
                    "SELECT ch.id, ch.source_id, ch.heading_path FROM chunks ch JOIN sources s"
                    f" ON s.id=ch.source_id WHERE s.collection_id=? AND ch.id IN ({marks})",
                    (coll.id, *part)):
                out[cid] = (sid, heading)
    return out


@dataclass(frozen=True)
class Pairs:
    """What the note's sections found (see ``section_pairs``)."""

    by_note: dict[int, list[tuple[float, int, int]]]  # note -> (cosine, my section, chunk)
    homes: dict[int, tuple[int, str]]  # chunk -> (note, heading path as stored)
    floor: float  # no note left unfound has a chunk closer than this to any section


def section_pairs(catalog: Any, faiss: Any, coll: Collection, source_id: int,
                  asking: list[tuple[np.ndarray, tuple[str, ...]]], allowed: list[int] | None,
                  per_section: int = PER_SECTION) -> Pairs:
    """Each other note's (cosine, section of this note, its chunk) pairs among every
    section's ``per_section`` nearest chunks, boilerplate left out."""
    pairs: dict[int, list[tuple[float, int, int]]] = defaultdict(list)
    if not asking:
        return Pairs(pairs, {}, -1.0)
    query = np.stack([v for v, _ in asking]).astype(np.float32)
    hits_by_row = _search(faiss, query, per_section, allowed)
    found_ids = sorted({cid for hits in hits_by_row for cid, _ in hits})
    homes = _chunk_homes(catalog, coll, found_ids)
    shared = catalog.boilerplate(found_ids)
    for mine, hits in enumerate(hits_by_row):
        for cid, sim in hits:
            home = homes.get(cid)
            if home is None or cid in shared:
                continue
            if home[0] != source_id:
                pairs[home[0]].append((float(sim), mine, cid))
    # A section that got fewer than it asked for saw every chunk it may see.
    floor = max((hits[-1][1] for hits in hits_by_row if len(hits) >= per_section),
                default=-1.0)
    return Pairs(pairs, homes, float(floor))


def content_scores(pairs: Mapping[int, list[tuple[float, int, int]]], n_sections: int
                   ) -> dict[int, tuple[float, tuple[float, int, int]]]:
    """Each note's content score and its best pair: the best cosine plus SUPPORT times the
    mean of the other sections' best, so a note that matches several sections ranks above
    one that matches one sentence by luck."""
    out = {}
    for sid, found in pairs.items():
        ordered = sorted(found, reverse=True)
        seen = {ordered[0][1]}
        support = 0.0
        for sim, mine, _ in ordered[1:]:
            if mine not in seen:  # other sections of the note that agree
                seen.add(mine)
                support += sim
        out[sid] = (ordered[0][0] + SUPPORT * support / max(1, n_sections), ordered[0])
    return out


def idf(count: int, n_notes: int) -> float:
    """log(N / count) scaled to (0, 1]: 1 for what no note has, near 0 for what every note
    has (links to a note, links from a note, a name in the text)."""
    return math.log((n_notes + 1) / (1 + count)) / math.log(n_notes + 2)


def graph_evidence(graph: links.Graph, source_id: int, alike: Mapping[int, float],
                   n_notes: int, neighbours: int = NEIGHBOURS) -> Evidence:
    """What the link graph says about the note's candidates (pure).

    ``vote``: the links of the ``neighbours`` most ``alike`` notes, each weighted by its
    likeness, as a share of the likeness of them all, times the target's IDF. ``coupling``:
    the links of notes that link where this note links, a shared target linked from few
    notes counting more (1 / log(2 + its in-degree)), scaled to the strongest, times IDF.
    ``backlinks``: the notes that link to this one, each by its IDF over how many notes it
    links to (an index that links every note links back to this one too)."""
    near = sorted((s for s in alike if s != source_id), key=lambda s: -alike[s])[:neighbours]
    vote: dict[int, float] = defaultdict(float)
    voters: dict[int, list[int]] = defaultdict(list)
    total = sum(max(0.0, alike[s]) for s in near) or 1.0
    for s in near:
        for target in graph.out.get(s, ()):
            vote[target] += max(0.0, alike[s]) / total
            voters[target].append(s)
    coupled: dict[int, float] = defaultdict(float)
    for shared in graph.out.get(source_id, ()):
        others = graph.into.get(shared, frozenset()) - {source_id}
        weight = 1.0 / math.log(2 + len(others))
        for other in others:
            for target in graph.out.get(other, ()):
                coupled[target] += weight
    top = max(coupled.values(), default=1.0)
    return Evidence(
        vote={t: v * idf(graph.in_degree(t), n_notes) for t, v in vote.items()},
        coupling={t: v / top * idf(graph.in_degree(t), n_notes) for t, v in coupled.items()},
        voters=dict(voters),
        backlinks={s: idf(graph.out_degree(s), n_notes)
                   for s in graph.into.get(source_id, frozenset())})


def mention_text(chunks: Iterable[Any]) -> str:
    """The note's words where a name can be mentioned, lowercased, spaces collapsed: links
    cut out (what they name is linked already) and property keys dropped (``aliases:`` is
    not the note "Aliases")."""
    parts = []
    for c in chunks:
        text = str(c["text"])
        for lk in reversed(links.parse_links(text)):
            text = text[:lk.start] + " " + text[lk.end:]
        parts.append(_PROPERTY_KEY.sub(" ", text) if c["ordinal"] < 0 else text)
    return " ".join(" ".join(parts).lower().split())


def names_in(text: str, names: Iterable[str]) -> list[str]:
    """The ``names`` that ``text`` (from ``mention_text``) says as whole words, ignoring case
    and spacing. Names without a letter (a daily note's date) or shorter than three
    characters name nothing."""
    found = []
    for name in names:
        low = " ".join(name.lower().split())
        if len(low) < 3 or not _LETTER.search(low) or low not in text:
            continue
        if re.search(r"(?<!\w)" + re.escape(low) + r"(?!\w)", text):
            found.append(name)
    return found


class NameFrequency:
    """How common a name is in a vault's text: its IDF over a sample of the vault's notes
    (every one up to SAMPLE_NOTES, then an even spread by id). A note called "Search" or
    "GitHub" is named by half the vault and says little when named; a person's handle does.
    """

    def __init__(self, texts: Sequence[str], n_notes: int) -> None:
        self.texts = list(texts)
        self.n_notes = n_notes
        self._idf: dict[str, float] = {}

    def idf(self, name: str) -> float:
        key = " ".join(name.lower().split())
        if key not in self._idf:
            seen = sum(1 for t in self.texts if names_in(t, [key]))
            share = seen / max(1, len(self.texts))
            self._idf[key] = idf(round(share * self.n_notes), self.n_notes)
        return self._idf[key]

    def mention(self, text: str, names: Iterable[str]) -> tuple[float, str]:
        """How strongly ``text`` names a note by one of ``names`` (the IDF of the rarest name
        it says), and that name."""
        return max(((self.idf(n), n) for n in names_in(text, names)), default=(0.0, ""))


_FREQUENCIES: dict[tuple[int, float, str], tuple[int, NameFrequency]] = {}


def _frequency(catalog: Any, coll: Collection, resolver: links.Resolver) -> NameFrequency:
    """The vault's ``NameFrequency``, read again once the vault grew or shrank by a tenth (a
    name's frequency moves little with one note, and reading the sample costs a scan)."""
    n_notes = len(resolver.path_of)
    key = (coll.id, coll.created_at, coll.root)  # this vault, not one with its id before
    cached = _FREQUENCIES.get(key)
    if cached is not None and abs(cached[0] - n_notes) <= n_notes / 10:
        return cached[1]
    ids = sorted(resolver.path_of)
    picked = ids[::max(1, math.ceil(len(ids) / SAMPLE_NOTES))]
    by_note: dict[int, list[Any]] = defaultdict(list)
    with catalog.reading() as db:
        for start in range(0, len(picked), 500):
            part = picked[start:start + 500]
            for row in db.execute("SELECT source_id, ordinal, text FROM chunks WHERE"
                                  f" source_id IN ({','.join('?' * len(part))})", part):
                by_note[row["source_id"]].append(row)
    built = NameFrequency([mention_text(rows) for rows in by_note.values()], n_notes)
    _FREQUENCIES[key] = (n_notes, built)
    return built


_GRAPHS: dict[int, tuple[links.Resolver, links.Graph, dict[int, list[str]]]] = {}


def _graph(catalog: Any, coll: Collection, resolver: links.Resolver
           ) -> tuple[links.Graph, dict[int, list[str]]]:
    """The vault's link graph and each note's names (file name, aliases), built again only
    when the resolver is (it is rebuilt whenever a note of the vault is indexed)."""
    cached = _GRAPHS.get(coll.id)
    if cached is not None and cached[0] is resolver:
        return cached[1], cached[2]
    with catalog.reading() as db:
        built = links.graph(db, coll.id, resolver)
    names: dict[int, list[str]] = {}
    for sid, path in resolver.path_of.items():
        base = path.rpartition("/")[2]
        names[sid] = [base[:-3] if base.lower().endswith(".md") else base.rpartition(".")[0]
                      or base]
    for alias, entries in resolver.by_alias.items():
        for _len, _path, sid in entries:
            names.setdefault(sid, []).append(alias)
    _GRAPHS[coll.id] = (resolver, built, names)
    return built, names


def rank(catalog: Any, faiss: Any, fingerprint: str, coll: Collection,
         resolver: links.Resolver, source_id: int, *, exclude: set[int],
         folder: str | None = None, tags: Sequence[str] = (),
         per_section: int | None = None) -> list[Candidate]:
    """Candidate notes for ``source_id``, best first (see the module doc)."""
    asking = sections(catalog, fingerprint, source_id)
    found = section_pairs(catalog, faiss, coll, source_id, asking,
                          _allowed(catalog, coll, folder, tags), per_section or PER_SECTION)
    content = content_scores(found.by_note, len(asking))
    graph, names = _graph(catalog, coll, resolver)
    ev = graph_evidence(graph, source_id, {s: v[0] for s, v in content.items()},
                        max(1, len(resolver.path_of)))
    allowed = _allowed_sources(catalog, coll, folder, tags)
    said = mention_text(_note_chunks(catalog, source_id))
    frequency = _frequency(catalog, coll, resolver)
    out = []
    for sid in set(content) | set(ev.vote) | set(ev.coupling) | set(ev.backlinks):
        if sid == source_id or sid in exclude or sid not in resolver.path_of:
            continue
        if allowed is not None and sid not in allowed:
            continue
        strength, name = frequency.mention(said, names.get(sid, ()))
        score = (VOTE * ev.vote.get(sid, 0.0) + COUPLING * ev.coupling.get(sid, 0.0)
                 + BACKLINK * ev.backlinks.get(sid, 0.0) + MENTION * strength)
        evidence = (tuple(ev.voters.get(sid, ())), sid in ev.backlinks, name)
        if sid not in content:  # the graph brought it: its cosine is below the floor
            out.append(Candidate(sid, score, None, (), (), *evidence,
                                 bound=max(0.0, found.floor)))
            continue
        alike, (cosine, mine, chunk) = content[sid]
        home = found.homes[chunk]
        out.append(Candidate(sid, alike + score, cosine, tuple(json.loads(home[1])),
                             asking[mine][1], *evidence))
    out.sort(key=lambda c: (-c.score, c.source_id))
    return out


def _search(faiss: Any, query: np.ndarray, k: int, allowed: Sequence[int] | None
            ) -> list[list[tuple[int, float]]]:
    """Each query row's top ``k`` chunks (id, similarity), within ``allowed`` when given."""
    return [faiss.search(q, k, allowed) for q in query]


def _best_pair(catalog: Any, fingerprint: str,
               asking: list[tuple[np.ndarray, tuple[str, ...]]], cand: Candidate
               ) -> Candidate:
    """``cand`` with its best section pair computed from the cached vectors, for a
    candidate the link graph brought that no section's nearest chunks held."""
    theirs = _note_chunks(catalog, cand.source_id)
    shared = catalog.boilerplate([r["id"] for r in theirs])
    ids = [r["id"] for r in theirs if r["id"] not in shared]
    vectors = catalog.chunk_vectors(fingerprint, ids)
    if not asking or not vectors:
        return dataclasses.replace(cand, best=0.0)
    mine = np.stack([v for v, _ in asking]).astype(np.float32)
    order = [i for i in ids if i in vectors]
    sims = mine @ np.stack([vectors[i] for i in order]).astype(np.float32).T
    a, b = np.unravel_index(int(np.argmax(sims)), sims.shape)
    heading = {r["id"]: tuple(json.loads(r["heading_path"])) for r in theirs}
    return dataclasses.replace(cand, best=float(sims[a, b]), section=heading[order[b]],
                               because=asking[a][1])


def reason(cand: Candidate, resolver: links.Resolver) -> str:
    """Why a person would make this link: the pair of sections that matched (always), then
    the link graph's evidence and the name in the text, when there is some."""
    parts = [f"its section \"{' > '.join(cand.section) or 'opening'}\" is close to this "
             f"note's \"{' > '.join(cand.because) or 'opening'}\" "
             f"(similarity {max(0.0, cand.best or 0.0):.2f})"]
    if cand.voters:
        shown = [_stem(resolver.path_of.get(v, "")) for v in cand.voters[:2]]
        more = len(cand.voters) - len(shown)
        parts.append(f"notes like this one link to it ({', '.join(shown)}"
                     f"{f' and {more} more' if more > 0 else ''})")
    if cand.links_here:
        parts.append("it links to this note")
    if cand.named:
        parts.append(f"this note names it (\"{cand.named}\") without a link")
    return "; ".join(parts)


def _stem(path: str) -> str:
    name = path.rpartition("/")[2]
    return name[:-3] if name.lower().endswith(".md") else name


def suggestions(catalog: Any, faiss: Any, fingerprint: str, coll: Collection,
                resolver: links.Resolver, source: Any, *, n: int, min_similarity: float,
                exclude_current: bool, exclude_linked: bool, folder: str | None,
                tags: Sequence[str]) -> list[dict[str, Any]]:
    """The ragd ``note_suggest`` answer rows: {path, title, similarity (the cosine of the
    best section pair, 0-1), reason, suggested_link, section}, best first."""
    with catalog.reading() as db:
        linked = links.linked_ids(db, source["id"], resolver) if exclude_linked else set()
    ranked = rank(catalog, faiss, fingerprint, coll, resolver, source["id"], exclude=linked,
                  folder=folder, tags=tags)
    if not exclude_current:
        ranked.insert(0, Candidate(source["id"], math.inf, 1.0, (), ()))
    asking: list[tuple[np.ndarray, tuple[str, ...]]] | None = None
    out = []
    for cand in ranked:
        if cand.best is None:
            if cand.bound < min_similarity:
                continue
            if asking is None:
                asking = sections(catalog, fingerprint, source["id"])
            cand = _best_pair(catalog, fingerprint, asking, cand)
        similarity = min(1.0, max(0.0, cand.best or 0.0))
        if similarity < min_similarity:
            continue
        path = resolver.path_of.get(cand.source_id)
        if path is None:
            continue
        name = _link_name(path, resolver)
        heading = cand.section[-1] if cand.section else ""
        link = f"[[{name}#{heading}]]" if heading else f"[[{name}]]"
        why = reason(cand, resolver) if cand.source_id != source["id"] else "this note"
        out.append({"path": path, "title": _title(catalog, cand.source_id),
                    "similarity": round(similarity, 4), "reason": why,
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
