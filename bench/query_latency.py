"""rag_search latency at 10k, 100k and 1M chunks: in process, over the socket, through MCP.

Prints a table, writes bench/results/query_latency.json (query_latency-quick.json with
--quick) and a PNG of hybrid p50 by size and path.

    python bench/query_latency.py [--quick] [--sizes 10k,100k,1m] [--home DIR] [--queries N]

Paths measured, with the same queries (the known-item questions, then SciFact test claims):
- in process: one child process opens the index and, query by query, runs each keyword
  backend in turn (--backends): its legs alone (`SearchEngine.keyword_hits` unfiltered and
  with a collection filter that holds every chunk, `phrase_hits`; top 50, as hybrid search
  asks) and a hybrid `SearchEngine.search` with it; the semantic leg once. Taking the
  backends in turn on each query shares the machine's noise between them. `legacy` is the
  keyword leg before decision 0016 (an OR over title, headings and content of a Whoosh index
  of the old schema, built once beside the size home), the baseline every other row is
  divided by; `whoosh` and `tantivy` are the two values of `index.keyword_backend` (tantivy's
  index is rebuilt from the catalog when it is behind). Memory: the RSS each backend adds
  when opened and warmed, and the process's;
- socket: a running `ragd daemon` (the default backend) answering `search` over its Unix
  socket (JSON-RPC);
- MCP: `ragd-mcp` launched over stdio and driven by the MCP SDK's ClientSession
  (`rag_search`, top_k=10), talking to that same daemon. The MCP handshake is timed too.
Memory: VmRSS / VmHWM of the in-process child and of the daemon at each size. The semantic
leg's recall@50: the vector index served (IVF-SQ8 past index.approx_vectors_from) against
exact search over the catalog's float32 vectors, with the same queries.
The previous run (bench/results/query_latency.json as it was) is printed beside this one.

How the indexes are built, all under --home (default ~/.cache/ragd-bench/latency, kept
between runs, as building is the expensive part):
1. `base/`: the distinct text, indexed through ragd's real pipeline (`App.sync_collection`
   of project collections), embedding each chunk once: help-en (obsidian-help-en) and kepano
   (kepano-obsidian) (--quick), plus SciFact (one note per document) in the full run, and obsidian-hub with
   --with-hub - about 1.8k / 12k / 48k distinct chunks. A second pipeline pass over
   obsidian-help-en under
   another collection checks that a copy costs no embedding (the cache key is the hash of
   the embedded text, "title > headings" + blank line + chunk text).
2. `size-*/`: one RAGD_HOME per size, filled with whole collections: first the distinct
   ones, then copies of them until the size is reached. Copies are made distinct without
   embedding: copy k of a chunk has its words rotated by k positions (the same words, a
   different text, so Whoosh sees new documents with the same statistics) and the base
   vector plus Gaussian noise (sigma 0.05/sqrt(384), renormalised: cosine ~0.999 to the
   original), stored in the catalog under the new text's hash. Sources and chunks are
   committed through `Catalog.commit_sources` and projected to FAISS and Whoosh by the
   indexer's journal replay (`Indexer.catch_up`), the daemon's own write path; the files'
   size, mtime and hash are kept, so the daemon's start-up sweep finds nothing to do.
Build times are reported per size (catalog + FAISS + Whoosh, no embedding, no chunking).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, RESULTS, bar_plot, corpus, pct, table, write_json  # noqa: E402

SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
TOP_K = 10
WARMUP = 5
NOISE = 0.05
BATCH_SOURCES = 200
CATCH_UP_EVERY = 50_000  # chunks committed between projections to FAISS and Whoosh
BUILD_VERSION = 2  # bump when the way size homes are built changes
RECALL_K = 50  # the semantic leg's recall is measured on hybrid search's top 50


# -- query set ----------------------------------------------------------------------------------
def load_queries(n: int) -> list[str]:
    from bench.quality import DEFAULT_KNOWN_ITEMS, load_known_items

    rows, _ = load_known_items(DEFAULT_KNOWN_ITEMS)
    out = [q for q, _ in rows]
    path = corpus("beir", "scifact") / "queries.jsonl"
    tests = set()
    with open(corpus("beir", "scifact") / "qrels" / "test.tsv", encoding="utf-8") as fh:
        tests = {line.split("\t")[0] for line in fh}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            if str(q["_id"]) in tests:
                out.append(q["text"])
    return out[:n]


# -- the distinct text --------------------------------------------------------------------------
def pool(quick: bool, base: Path, with_hub: bool = False) -> list[tuple[str, Path]]:
    """(collection, folder) of the distinct text, in fill order.

    obsidian-hub (about 35k more chunks) is opt-in: embedding it takes half an hour on two
    cores, and the 12k distinct chunks of the other three already keep the copies varied.
    """
    # Not "obsidian-...": names of ragd's own collections are reserved (decision 0012).
    units = [("help-en", corpus("vault", "obsidian-help-en")),
             ("kepano", corpus("vault", "kepano-obsidian"))]
    if not quick:
        from bench.quality import load_scifact, write_notes

        docs, _, _ = load_scifact(quick=False)
        units.append(("scifact", write_notes(docs, base / "notes" / "scifact")))
        if with_hub:
            units.append(("hub", corpus("vault", "obsidian-hub")))
    return units


def build_base(base: Path, units: list[tuple[str, Path]]) -> dict[str, Any]:
    """Index the distinct text through the real pipeline (embedding only what is new)."""
    from bench.quality import index_folder, progress_printer, ragd_app

    out: dict[str, Any] = {}
    with ragd_app(base, on_progress=progress_printer("base")) as app:
        for name, root in units:
            print(f"base: indexing {name} ({root}) ...", file=sys.stderr, flush=True)
            out[name] = index_folder(app, name, root)
        name, root = units[0]
        check = index_folder(app, f"{name}-cache-check", root)
        out["cache_check"] = {"collection": check["collection"], "chunks": check["chunks"],
                              "embedded_now": check["embedded_now"],
                              "holds": check["embedded_now"] == 0}
    return out


# -- a size home, from the base catalog ---------------------------------------------------------
@dataclass(frozen=True)
class Unit:
    collection: str
    copy: int
    chunks: int

    @property
    def name(self) -> str:
        return self.collection if self.copy == 0 else f"{self.collection}-copy{self.copy:03d}"


def plan(target: int, sizes: list[tuple[str, int]]) -> list[Unit]:
    """Whole collections: the distinct ones first (up to 1.25x the target), then copies of
    them in turn while they fit in 1.1x; stop at 95% of the target."""
    units: list[Unit] = []
    total = 0
    for name, n in sizes:
        if total + n <= target * 1.25 and total < target * 0.95:
            units.append(Unit(name, 0, n))
            total += n
    copy = 1
    while total < target * 0.95:
        added = False
        for name, n in sizes:
            if total < target * 0.95 and total + n <= target * 1.1 and n > 0:
                units.append(Unit(name, copy, n))
                total += n
                added = True
        if not added:
            break
        copy += 1
    return units


def rotate_words(text: str, k: int) -> str:
    words = text.split()
    if len(words) < 2:
        return text
    shift = k % len(words) or 1
    return " ".join(words[shift:] + words[:shift])


class BaseCatalog:
    """Read-only view of the base home's catalog: sources, chunks and cached vectors."""

    def __init__(self, path: Path, fingerprint: str) -> None:
        self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.db.row_factory = sqlite3.Row
        self.fp = fingerprint
        self.vectors: dict[str, Any] = {}

    def chunk_count(self, collection: str) -> int:
        return int(self.db.execute(
            "SELECT COUNT(*) FROM chunks ch JOIN sources s ON s.id=ch.source_id JOIN collections"
            " c ON c.id=s.collection_id WHERE c.name=?", (collection,)).fetchone()[0])

    def root(self, collection: str) -> str:
        row = self.db.execute("SELECT root FROM collections WHERE name=?", (collection,)).fetchone()
        if row is None:
            sys.exit(f"error: the base index has no collection {collection!r}")
        return str(row[0])

    def load_vectors(self) -> None:
        import numpy as np

        if not self.vectors:
            for h, blob in self.db.execute(
                    "SELECT text_hash, vector FROM embeddings WHERE fingerprint=?", (self.fp,)):
                self.vectors[h] = np.frombuffer(blob, dtype=np.float32)

    def sources(self, collection: str) -> Iterator[sqlite3.Row]:
        yield from self.db.execute(
            "SELECT s.* FROM sources s JOIN collections c ON c.id=s.collection_id WHERE c.name=?"
            " ORDER BY s.id", (collection,))

    def chunks(self, source_id: int) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM chunks WHERE source_id=? ORDER BY ordinal",
                               (source_id,)).fetchall()

    def tags(self, source_id: int) -> tuple[str, ...]:
        return tuple(r[0] for r in self.db.execute(
            "SELECT tag FROM source_tags WHERE source_id=? ORDER BY tag", (source_id,)))


def _updates(base: BaseCatalog, unit: Unit, src_rows: list[sqlite3.Row]
             ) -> tuple[list[Any], dict[str, Any]]:
    """SourceUpdates of one batch of base sources as copy ``unit.copy``, and their vectors."""
    import numpy as np

    from ragd.daemon.models import ChunkDraft
    from ragd.daemon.stores.catalog import SourceUpdate, text_hash
    from ragd.daemon.text.chunking import embed_prefix

    updates, vectors = [], {}
    rng = np.random.default_rng([unit.copy, int(src_rows[0]["id"])])
    for s in src_rows:
        drafts = []
        for ch in base.chunks(s["id"]):
            heading = tuple(json.loads(ch["heading_path"]))
            text = ch["text"] if unit.copy == 0 else rotate_words(ch["text"], unit.copy)
            prefix = embed_prefix(s["title"], heading)
            embed_text = f"{prefix}\n\n{text}" if prefix else text
            vec = base.vectors.get(ch["embed_hash"])
            if vec is None:
                raise RuntimeError(f"no cached vector for chunk {ch['id']} of the base index")
            if unit.copy:
                vec = vec + rng.normal(0.0, NOISE / math.sqrt(len(vec)), len(vec))
                vec = (vec / np.linalg.norm(vec)).astype(np.float32)
            vectors[text_hash(embed_text)] = vec
            drafts.append(ChunkDraft(ch["ordinal"], text, embed_text, heading, ch["start"],
                                     ch["end"], ch["token_count"]))
        updates.append(SourceUpdate(
            path=s["path"], size=s["size"], mtime_ns=s["mtime_ns"], sha256=s["sha256"],
            title=s["title"], source_type=s["source_type"], date=s["date"],
            metadata=json.loads(s["metadata"]), tags=base.tags(s["id"]),
            warnings=tuple(w for w in s["warnings"].split(",") if w), chunks=tuple(drafts)))
    return updates, vectors


def build_size(home: Path, base_home: Path, units: list[Unit],
               keyword_backend: str = "whoosh") -> dict[str, Any]:
    """Fill ``home`` with ``units`` from the base catalog; nothing is embedded or chunked."""
    from bench.quality import ragd_app

    t_start = time.perf_counter()
    stages = {"catalog": 0.0, "project": 0.0, "save": 0.0}
    with ragd_app(home, {"index.keyword_backend": keyword_backend}) as app:
        fp = app.embedder.fingerprint
        base = BaseCatalog(base_home / "data" / "catalog.sqlite", fp)
        base.load_vectors()
        pending = 0
        for n, unit in enumerate(units, 1):
            t0 = time.perf_counter()
            coll = app.create_project(unit.name, base.root(unit.collection))
            batch: list[sqlite3.Row] = []
            rows = list(base.sources(unit.collection))
            for i, s in enumerate(rows, 1):
                if s["status"] != "ok":
                    app.catalog.record_skip(coll.id, s["path"], code=s["skip_code"] or "",
                                            detail=s["skip_detail"] or "", size=s["size"],
                                            mtime_ns=s["mtime_ns"], sha256=s["sha256"])
                else:
                    batch.append(s)
                if batch and (len(batch) >= BATCH_SOURCES or i == len(rows)):
                    updates, vectors = _updates(base, unit, batch)
                    app.catalog.store_vectors(fp, vectors)
                    app.catalog.commit_sources(coll.id, updates, fp, {})
                    pending += sum(len(u.chunks) for u in updates)
                    batch = []
            app.catalog.mark_indexed(coll.id)
            stages["catalog"] += time.perf_counter() - t0
            if pending >= CATCH_UP_EVERY or n == len(units):
                t0 = time.perf_counter()
                with app.indexer.lock:
                    app.indexer.catch_up()
                stages["project"] += time.perf_counter() - t0
                pending = 0
            print(f"  {home.name}: {n}/{len(units)} collections ({unit.name})",
                  file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        app.indexer.save()
        stages["save"] += time.perf_counter() - t0
        check = app.consistency()
        chunks = len(app.catalog.all_chunk_ids())
    if not check["ok"]:
        sys.exit(f"error: the built index is inconsistent: {check}")
    return {"seconds": time.perf_counter() - t_start, "stage_seconds": stages, "chunks": chunks,
            "collections": [u.name for u in units], "consistency": check}


def ensure_size(root: Path, label: str, target: int, quick: bool,
                base_info: dict[str, Any], keyword_backend: str = "whoosh") -> dict[str, Any]:
    """The size home for ``label``: reused when its manifest matches the plan, else rebuilt.
    With ``keyword_backend = "tantivy"`` no Whoosh index is built (an hour at 1M here)."""
    import shutil

    from ragd.daemon.embed.embedding import SentenceTransformerEmbedder

    base_home = root / "base"
    fp = SentenceTransformerEmbedder().fingerprint  # read from the model folder: no torch
    base = BaseCatalog(base_home / "data" / "catalog.sqlite", fp)
    names = [n for n in base_info if n != "cache_check"]
    units = plan(target, [(n, base.chunk_count(n)) for n in names])
    suffix = ("-quick" if quick else "") + ("-tantivy" if keyword_backend != "whoosh" else "")
    home = root / f"size-{label}{suffix}"
    manifest = home / "bench-manifest.json"
    wanted = {"version": BUILD_VERSION, "units": [u.name for u in units],
              "base_chunks": {n: base.chunk_count(n) for n in names},
              "keyword_backend": keyword_backend}
    if manifest.exists():
        have = {"keyword_backend": "whoosh", **json.loads(manifest.read_text(encoding="utf-8"))}
        if {k: have.get(k) for k in wanted} == wanted:
            print(f"{home.name}: reusing the index built {have.get('built')}", file=sys.stderr)
            return have
    if home.exists():
        shutil.rmtree(home)
    print(f"{home.name}: building {sum(u.chunks for u in units):,} chunks in {len(units)} "
          "collections ...", file=sys.stderr, flush=True)
    info = build_size(home, base_home, units, keyword_backend)
    cfg = home / "config" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("[obsidian]\nenabled = false\n\n[daemon]\nsweep_interval_s = 86400.0\n\n"
                   f"[index]\nkeyword_backend = {json.dumps(keyword_backend)}\n",
                   encoding="utf-8")
    data = {**wanted, **info, "home": str(home), "label": label, "target": target,
            "built": time.strftime("%Y-%m-%d %H:%M")}
    manifest.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return data


# -- measuring ----------------------------------------------------------------------------------
def proc_memory(pid: int | str = "self") -> dict[str, float]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return {"rss_mb": out.get("VmRSS", float("nan")), "peak_mb": out.get("VmHWM", float("nan"))}


def summary(ms: list[float], queries: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"p50": pct(ms, 50), "p95": pct(ms, 95),
                           "mean": sum(ms) / len(ms) if ms else None, "n": len(ms)}
    if queries is not None:
        worst = sorted(zip(ms, queries, strict=True), reverse=True)[:5]
        out["slowest"] = [{"ms": round(t, 1), "query": q} for t, q in worst]
    return out


# -- the keyword leg before decision 0016, the baseline --------------------------------------------
LEGACY_DIR = "bench-whoosh-v1"
LEGACY_FIELDS = ("title", "headings", "content")


def _legacy_schema() -> Any:
    from whoosh.fields import ID, KEYWORD, NUMERIC, TEXT, Schema

    from ragd.daemon.stores.fulltext import _analyzer

    ana = _analyzer()
    return Schema(chunk_id=ID(stored=True, unique=True),
                  title=TEXT(analyzer=ana, field_boost=3.0),
                  headings=TEXT(analyzer=ana, field_boost=2.0),
                  content=TEXT(analyzer=ana, phrase=True),
                  collection=ID, source_type=ID, folders=KEYWORD(commas=True),
                  tags=KEYWORD(commas=True, lowercase=True), date=NUMERIC(int, bits=32),
                  sender=ID, author=ID)


def build_legacy(home: Path, catalog: Any) -> float:
    """The Whoosh index of schema 1 (three text fields) over the size home's chunks, built
    once: seconds spent, 0 when reused."""
    from whoosh import index

    from ragd.daemon.stores.fulltext import document_fields

    folder = home / LEGACY_DIR
    done = folder / "built.json"
    chunks = len(catalog.all_chunk_ids())
    if done.exists() and json.loads(done.read_text(encoding="utf-8")).get("chunks") == chunks:
        return 0.0
    t0 = time.perf_counter()
    folder.mkdir(exist_ok=True)
    ix = index.create_in(str(folder), _legacy_schema())
    writer = ix.writer(limitmb=256)
    for rows in catalog.iter_chunks():
        for r in rows:
            doc = document_fields(r)
            del doc["text"]
            writer.add_document(title=r.title, headings=" ".join(r.heading_path),
                                content=r.text, **doc)
    writer.commit(optimize=True)
    done.write_text(json.dumps({"chunks": chunks}), encoding="utf-8")
    return time.perf_counter() - t0


class LegacyKeywords:
    """Decision 0009's keyword leg on the schema-1 index: every analysed term in three fields."""

    def __init__(self, folder: Path) -> None:
        from whoosh import index

        from ragd.daemon.stores.fulltext import _analyzer

        self.searcher = index.open_dir(str(folder)).searcher()
        self.ana = _analyzer()

    def analyse(self, text: str) -> list[str]:
        return list(dict.fromkeys(t.text for t in self.ana(text)))

    def _search(self, q: Any, k: int, filters: Any) -> list[tuple[int, float]]:
        from ragd.daemon.search.filters import to_whoosh

        hits = self.searcher.search(q, limit=k, filter=to_whoosh(filters))
        return [(int(h["chunk_id"]), float(h.score)) for h in hits]

    def search_any(self, terms: list[str], phrases: list[list[str]], k: int,
                   filters: Any) -> list[tuple[int, float]]:
        from whoosh import query as Q

        parts: list[Any] = [Q.Term(f, t) for t in terms for f in LEGACY_FIELDS]
        parts += [Q.Phrase("content", p, boost=2.0) for p in phrases if len(p) > 1]
        return self._search(Q.Or(parts), k, filters) if terms else []

    def search_phrase(self, words: list[str], k: int, filters: Any) -> list[tuple[int, float]]:
        from whoosh import query as Q

        return self._search(Q.Phrase("content", words), k, filters) if len(words) > 1 else []


def timed(fn: Any, queries: list[str]) -> dict[str, Any]:
    for q in queries[:WARMUP]:
        fn(q)
    ms = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        ms.append((time.perf_counter() - t) * 1000)
    return summary(ms, queries)


def _tantivy_store(app: Any) -> Any:
    """The tantivy index of this home, rebuilt from the catalog when it is behind."""
    from ragd.daemon.indexer.pipeline import Indexer
    from ragd.daemon.stores.fulltext import open_keyword_store

    if app.config.index.keyword_backend == "tantivy":
        return app.whoosh  # the home's configured backend: already open and current
    store, rebuild = open_keyword_store("tantivy", app.paths.data_dir, app.paths.whoosh_dir,
                                        app.catalog)
    if rebuild or store.mark < app.whoosh.mark:
        # Nothing is written meanwhile, so the journal's pruning follows Whoosh's mark.
        Indexer(app.catalog, app.embedder, [store],
                max_file_bytes=app.indexer.max_file_bytes).rebuild([store.name])
    return store


def semantic_recall(app: Any, queries: list[str], k: int) -> dict[str, Any]:
    """Recall@k of the semantic leg as served (IVF-SQ8 past its threshold, its hits reranked
    exactly) and of the vector index alone, against exact search over the catalog's float32
    vectors, scanned in batches of 2,000 chunks; and recall@10 of the leg asked for 10
    (issue 22's goal: 0.99)."""
    import numpy as np

    faiss_store = app.faiss
    if faiss_store.kind == "flat":
        return {"index": "flat", "recall": 1.0, "recall@10": 1.0, "k": k,
                "queries": len(queries)}
    vecs = np.stack([app.embedder.embed_query(q) for q in queries]).astype(np.float32)
    best = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_ids = np.full((len(queries), k), -1, dtype=np.int64)
    fp = app.embedder.fingerprint
    for rows in app.catalog.iter_chunks():
        got = app.catalog.vectors_for(fp, rows)
        if not got:
            continue
        ids = np.fromiter(got.keys(), dtype=np.int64)
        scores = vecs @ np.stack(list(got.values())).astype(np.float32).T
        both = np.concatenate([best, scores], axis=1)
        both_ids = np.concatenate([best_ids, np.broadcast_to(ids, scores.shape)], axis=1)
        top = np.argpartition(-both, k - 1, axis=1)[:, :k]
        best = np.take_along_axis(both, top, axis=1)
        best_ids = np.take_along_axis(both_ids, top, axis=1)
    best_ids = np.take_along_axis(best_ids, np.argsort(-best, axis=1), axis=1)
    from ragd.daemon.search.filters import Filters

    leg, index, leg10 = [], [], []
    for q, v, e in zip(queries, vecs, best_ids, strict=True):
        exact = set(e.tolist())
        leg.append(len({i for i, _ in app.search_engine.semantic_hits(q, k, Filters())}
                       & exact) / k)
        index.append(len({i for i, _ in faiss_store.search(v, k, None)} & exact) / k)
        top10 = {i for i, _ in app.search_engine.semantic_hits(q, 10, Filters())}
        leg10.append(len(top10 & set(e[:10].tolist())) / 10)
    return {"index": faiss_store.kind, "recall": float(np.mean(leg)),
            "index_recall": float(np.mean(index)), "recall@10": float(np.mean(leg10)),
            "k": k, "queries": len(queries)}


def inprocess_worker(job: dict[str, Any]) -> dict[str, Any]:
    """In a child process: open the index once, then, query by query, time each keyword
    backend's legs and a hybrid search with it, in turn: the backends share the machine's
    noise, so their ratios to the baseline hold even when the machine is busy."""
    from bench.quality import ragd_app
    from ragd.daemon.search.filters import Filters
    from ragd.daemon.search.params import build_request

    home = Path(job["home"])
    backends: list[str] = job["backends"]
    out: dict[str, Any] = {b: {"legs": {}} for b in backends}
    with ragd_app(home) as app:  # the configured backend: Whoosh
        engine = app.search_engine
        app.embedder.warm_up()
        k = max(engine.settings.overfetch, TOP_K * 3)
        every = Filters(collections=tuple(c.name for c in app.catalog.collections()))
        queries: list[str] = job["queries"]
        stores: dict[str, Any] = {}
        for b in backends:
            rss = proc_memory()["rss_mb"]
            t0 = time.perf_counter()
            if b == "legacy":
                out[b]["legacy_build_s"] = build_legacy(home, app.catalog)
                stores[b] = LegacyKeywords(home / LEGACY_DIR)
            elif b == "tantivy":
                stores[b] = _tantivy_store(app)
            else:
                if app.config.index.keyword_backend != "whoosh":
                    sys.exit("error: this size home was built without Whoosh (--backends tantivy)")
                stores[b] = app.whoosh
            out[b]["open_s"] = time.perf_counter() - t0
            engine.whoosh = stores[b]
            for q in queries[:WARMUP]:
                engine.search(build_request(engine, query=q, top_k=TOP_K))
            out[b]["memory"] = {"delta_mb": proc_memory()["rss_mb"] - rss}
            if b != "legacy":
                out[b]["segments"] = stores[b].segments()
        legs = ("keyword", "keyword_filtered", "phrase", "hybrid")  # hybrid is timed first
        ms: dict[tuple[str, str], list[float]] = {(b, leg): [] for b in backends for leg in legs}
        sem: list[float] = []
        for q in queries:
            t = time.perf_counter()
            engine.semantic_hits(q, k, Filters())
            sem.append((time.perf_counter() - t) * 1000)
            for b in backends:
                engine.whoosh = stores[b]
                # Hybrid first: the legs after it find this query's postings decoded
                # (Whoosh's postings cache), so only hybrid is timed as a new query would be.
                calls = {
                    "hybrid": lambda: engine.search(  # noqa: B023
                        build_request(engine, query=q, top_k=TOP_K)),  # noqa: B023
                    "keyword": lambda: engine.keyword_hits(q, k, Filters()),  # noqa: B023
                    "keyword_filtered": lambda: engine.keyword_hits(q, k, every),  # noqa: B023
                    "phrase": lambda: engine.phrase_hits(q, k, Filters()),  # noqa: B023
                }
                for leg, call in calls.items():
                    t = time.perf_counter()
                    call()
                    ms[(b, leg)].append((time.perf_counter() - t) * 1000)
        rss = proc_memory()
        recall = semantic_recall(app, queries, RECALL_K)
        for b in backends:
            out[b]["legs"] = {leg: summary(ms[(b, leg)], queries) for leg in legs[:3]}
            out[b]["legs"]["semantic"] = {**summary(sem), "recall": recall}
            out[b]["hybrid"] = summary(ms[(b, "hybrid")], queries)
            out[b]["memory"].update(rss)
        for store in stores.values():
            if store is not app.whoosh and hasattr(store, "close"):
                store.close()
    return out


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    return {**env, "RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1"}


class Daemon:
    """`ragd daemon` on a size home, waited on until its start-up sweep is done."""

    def __init__(self, home: Path, log: Path) -> None:
        from ragd.daemon.ipc.client import Client
        from ragd.daemon.ipc.discovery import find_daemon
        from ragd.daemon.settings.paths import resolve_paths

        paths = resolve_paths({"RAGD_HOME": str(home)})
        if find_daemon(paths):
            sys.exit(f"error: a daemon already runs on {home}; stop it first")
        self.log = open(log, "ab")  # noqa: SIM115
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-m", "ragd.daemon.cli.main", "daemon"],
                                     env=clean_env(home), stdout=self.log, stderr=self.log,
                                     start_new_session=True, cwd=REPO)
        deadline = time.monotonic() + 1800
        while find_daemon(paths) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"error: the daemon did not start; see {log}")
            time.sleep(0.1)
        self.client = Client(find_daemon(paths) or "", timeout=1800, client_name="bench")
        while True:
            st = self.client.call("status")
            if st["state"] == "idle":
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"error: the daemon did not become idle; see {log}")
            time.sleep(0.5)
        self.ready_s = time.perf_counter() - t0
        self.status = st

    def stop(self) -> None:
        try:
            self.client.call("shutdown")
            self.client.close()
            self.proc.wait(timeout=300)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def socket_latency(d: Daemon, queries: list[str]) -> dict[str, Any]:
    for q in queries[:WARMUP]:
        d.client.call("search", {"query": q, "top_k": TOP_K})
    ms = []
    for q in queries:
        t = time.perf_counter()
        d.client.call("search", {"query": q, "top_k": TOP_K})
        ms.append((time.perf_counter() - t) * 1000)
    return summary(ms)


async def mcp_latency(home: Path, queries: list[str], log: Path) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    bridge = Path(sys.executable).with_name("ragd-mcp")
    if not bridge.exists():
        sys.exit(f"error: {bridge} not found: install ragd in this venv (pip install -e .)")
    params = StdioServerParameters(command=str(bridge), args=[], env=clean_env(home))
    errlog = open(log, "a", encoding="utf-8")  # noqa: SIM115
    t0 = time.perf_counter()
    async with stdio_client(params, errlog=errlog) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        handshake = (time.perf_counter() - t0) * 1000
        for q in queries[:WARMUP]:
            res = await session.call_tool("rag_search", {"query": q, "top_k": TOP_K})
            if res.isError:
                sys.exit(f"error: rag_search through ragd-mcp failed: {res.content}")
        ms = []
        for q in queries:
            t = time.perf_counter()
            await session.call_tool("rag_search", {"query": q, "top_k": TOP_K})
            ms.append((time.perf_counter() - t) * 1000)
    errlog.close()
    return {**summary(ms), "handshake_ms": handshake}


def run_child(job: dict[str, Any], log: Path) -> dict[str, Any]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ragd-latency-") as tmp:
        jf, of = Path(tmp) / "job.json", Path(tmp) / "out.json"
        jf.write_text(json.dumps(job), encoding="utf-8")
        with open(log, "ab") as fh:
            code = subprocess.run([sys.executable, __file__, "--inprocess-worker", str(jf),
                                   str(of)], stdout=fh, stderr=fh,
                                  env=clean_env(Path(job["home"]))).returncode
        if code != 0 or not of.exists():
            sys.exit(f"error: the in-process measurement failed (exit {code}); see {log}")
        return json.loads(of.read_text(encoding="utf-8"))


def measure(size: dict[str, Any], queries: list[str], logs: Path, backends: list[str],
            socket: bool) -> dict[str, Any]:
    home = Path(size["home"])
    print(f"{home.name}: in process, keyword backends {', '.join(backends)} ...",
          file=sys.stderr, flush=True)
    inproc = run_child({"home": str(home), "queries": queries, "backends": backends},
                       logs / "inprocess.log")
    out = {"label": size["label"], "chunks": size["chunks"], "build_s": size["seconds"],
           "build_stage_seconds": size["stage_seconds"], "collections": len(size["collections"]),
           "inprocess": inproc}
    if not socket:
        return out
    print(f"{home.name}: daemon ...", file=sys.stderr, flush=True)
    d = Daemon(home, logs / f"daemon-{home.name}.log")
    try:
        sock = socket_latency(d, queries)
        print(f"{home.name}: MCP bridge ...", file=sys.stderr, flush=True)
        mcp = asyncio.run(mcp_latency(home, queries, logs / "ragd-mcp.log"))
        mem = proc_memory(d.proc.pid)
    finally:
        d.stop()
    return {**out, "socket": sock, "mcp": mcp, "daemon_memory": mem,
            "daemon_ready_s": d.ready_s}


def _ratio(value: float | None, base: float | None) -> float | None:
    return value / base if value and base else None


def previous_rows(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(size, backend) -> that run's in-process figures, from the last results file."""
    try:
        prev = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out = {}
    for r in prev.get("sizes", []):
        inproc = r.get("inprocess", {})
        if "hybrid" in inproc:  # before 0016: one backend, no legs
            inproc = {"whoosh": inproc}
        for backend, ip in inproc.items():
            out[(r["label"], backend)] = ip
    return out


def _recall(r: dict[str, Any] | None) -> str:
    if not r:
        return "-"
    alone = f", index alone {r['index_recall']:.3f}" if "index_recall" in r else ""
    at10 = f", leg r@10 {r['recall@10']:.3f}" if "recall@10" in r else ""
    return f"{r['recall']:.3f} ({r['index']}{alone}{at10})"


def leg_table(results: list[dict[str, Any]], prev: dict[tuple[str, str], dict[str, Any]]
              ) -> str:
    rows = []
    for r in results:
        base = r["inprocess"].get("legacy")
        for backend, ip in r["inprocess"].items():
            legs, before = ip["legs"], prev.get((r["label"], backend), {})
            kw95 = legs["keyword"]["p95"]
            rows.append([
                r["label"], backend, legs["keyword"]["p50"], kw95,
                legs["keyword_filtered"]["p95"], legs["phrase"]["p95"], legs["semantic"]["p95"],
                _recall(legs["semantic"].get("recall")), ip["hybrid"]["p50"], ip["hybrid"]["p95"],
                _ratio(kw95, base and base["legs"]["keyword"]["p95"]),
                _ratio(ip["hybrid"]["p95"], base and base["hybrid"]["p95"]),
                ip["memory"].get("delta_mb"),
                before.get("legs", {}).get("keyword", {}).get("p95"),
                before.get("hybrid", {}).get("p95")])
    return table(f"per leg, in process, top 50 per leg, top_k={TOP_K} searches (ms), backends "
                 "in turn on each query; ratios: this row / legacy; +MB: RSS added by opening "
                 "and warming the backend", rows,
                 ["size", "keyword", "kw p50", "kw p95", "kw+filter p95", "phrase p95",
                  "sem p95", f"sem recall@{RECALL_K}", "hybrid p50", "hybrid p95",
                  "kw p95 ratio", "hybrid p95 ratio",
                  "+MB open", "prev kw p95", "prev hybrid p95"])


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--inprocess-worker":
        job = json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))
        Path(sys.argv[3]).write_text(json.dumps(inprocess_worker(job)), encoding="utf-8")
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10k only, from two small vaults")
    ap.add_argument("--sizes", default="10k,100k,1m", help="comma-separated: 10k, 100k, 1m")
    ap.add_argument("--home", type=Path, default=Path(os.environ.get(
        "XDG_CACHE_HOME", Path.home() / ".cache")) / "ragd-bench" / "latency")
    ap.add_argument("--queries", type=int, default=100, help="queries per path")
    ap.add_argument("--with-hub", action="store_true",
                    help="add obsidian-hub to the distinct text (about 35k chunks to embed)")
    ap.add_argument("--backends", default="legacy,whoosh,tantivy",
                    help="keyword backends measured in process (legacy: the baseline); "
                    "tantivy alone builds size homes without Whoosh (size-1m-tantivy)")
    ap.add_argument("--no-socket", action="store_true",
                    help="in process only: no daemon, no MCP bridge")
    args = ap.parse_args()
    labels = ["10k"] if args.quick else [s.strip().lower() for s in args.sizes.split(",")]
    unknown = [s for s in labels if s not in SIZES]
    if unknown:
        sys.exit(f"error: unknown size {unknown[0]!r}; use {', '.join(SIZES)}")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not set(backends) <= {"legacy", "whoosh", "tantivy"}:
        sys.exit("error: --backends takes legacy, whoosh and tantivy")
    root = args.home.expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    name = "query_latency-quick" if args.quick else "query_latency"
    prev = previous_rows(RESULTS / f"{name}.json")
    queries = load_queries(args.queries)
    units = pool(args.quick, root / "base", args.with_hub)
    t0 = time.perf_counter()
    base_info = build_base(root / "base", units)
    base_s = time.perf_counter() - t0
    results = []
    for label in labels:
        # Without Whoosh among the backends, the size home is built without it.
        build = "tantivy" if backends == ["tantivy"] else "whoosh"
        size = ensure_size(root, label, SIZES[label], args.quick, base_info, build)
        results.append(measure(size, queries, logs, backends, not args.no_socket))
    print(leg_table(results, prev))
    for r in results:
        for backend, ip in r["inprocess"].items():
            extra = (f"legacy index built in {ip['legacy_build_s']:.0f} s"
                     if backend == "legacy" else f"{ip['segments']} segments")
            print(f"{r['label']} {backend}: opened in {ip['open_s']:.1f} s; {extra}; process "
                  f"RSS {ip['memory']['rss_mb']:.0f} MB (peak {ip['memory']['peak_mb']:.0f})")
    rows = [[r["label"], r["chunks"], r["build_s"], r["socket"]["p50"], r["socket"]["p95"],
             r["mcp"]["p50"], r["mcp"]["p95"], r["daemon_memory"]["rss_mb"]]
            for r in results if "socket" in r]
    if rows:
        print(table(f"rag_search latency through the default daemon, top_k={TOP_K}, "
                    f"{len(queries)} queries per path (ms)", rows,
                    ["size", "chunks", "build s", "socket p50", "socket p95", "MCP p50",
                     "MCP p95", "daemon MB"]))
        for r in results:
            if "socket" in r:
                print(f"{r['label']}: {r['collections']} collections; MCP handshake "
                      f"{r['mcp']['handshake_ms']:.0f} ms; daemon ready in "
                      f"{r['daemon_ready_s']:.1f} s")
    check = base_info["cache_check"]
    print(f"cache check: a second pipeline pass over {units[0][0]} ({check['chunks']:,} chunks) "
          f"embedded {check['embedded_now']} chunks")
    labels_plot = [f"{r['label']} {b}" for r in results for b in r["inprocess"]]
    values = [ip["hybrid"]["p95"] for r in results for ip in r["inprocess"].values()]
    bar_plot(name, "rag_search hybrid p95 in process, by keyword backend (ms)", labels_plot,
             values, "ms")
    out = write_json(name, {"quick": args.quick, "home": str(root), "queries": len(queries),
                            "top_k": TOP_K, "base": base_info, "base_seconds": base_s,
                            "sizes": results})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
