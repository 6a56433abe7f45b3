"""The vector leg at scale: exact (flat) against approximate (IVF, 8-bit) FAISS, through FaissStore.

Prints a table and writes bench/results/vector_leg.json:
- recall@10 and recall@50 of the approximate index against the exact one, on real vectors: the
  SciFact chunk embeddings cached in bench/quality.py's catalog and the 300 SciFact test
  queries embedded by the configured model;
- per size (10k, 100k, 1M by default): build time (training + filling, on the background
  thread, as the daemon does it), query p50/p95 for top-50 (one thread, as the daemon searches),
  the index's own memory (its serialised size) and the process's RSS after building.

- the semantic leg as served (decision 0020): recall@10 against exact search of the index
  alone and of the leg (REFINE·k of the index's hits reranked by their exact vectors), for the
  leg asked for 10 and for 50 (what a search asks), at each nprobe of --nprobe-divisors, on
  the real vectors and at each size.

Sizes past the real vectors are made of copies of them plus Gaussian noise (sigma 0.05/sqrt(d),
renormalised), as bench/query_latency.py makes its large indexes.

--filtered SIZE measures instead where a filtered semantic search should stop scoring the
filtered subset exactly from the catalog and go through the index's id selector (decision
0020's crossover): a catalog of SIZE chunks (the same vectors) whose collections hold 100 to
30,000 chunks, each filter timed both ways (writes vector_leg_filtered.json).

--home DIR uses the vectors of another home instead (decision 0020 used one holding the
obsidian-help-en and obsidian-hub vaults: a dense collection beside a diffuse one), and adds
the known-item questions of bench/queries to the recall tables.

    python bench/vector_leg.py [--quality-home DIR] [--sizes 10k,100k,1m] [--queries N]
                               [--nprobe-divisors 4,2] [--filtered 100k] [--home DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import corpus, pct, rss_mb, table, write_json  # noqa: E402

SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
NOISE = 0.05


def real_vectors(quality_home: Path, home: Path | None = None) -> np.ndarray:
    """Every vector cached in a catalog: the SciFact home of bench/quality.py, or --home's."""
    db_path = (home or quality_home / "scifact") / "data" / "catalog.sqlite"
    if not db_path.exists():
        sys.exit(f"error: no catalog at {db_path}; run bench/quality.py "
                 f"--home {quality_home} first (it embeds SciFact once), or index --home")
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT vector FROM embeddings").fetchall()
    finally:
        db.close()
    return np.stack([np.frombuffer(v, dtype=np.float32) for (v,) in rows])


def embed_texts(texts: list[str]) -> np.ndarray:
    from ragd.daemon.embed.embedding import make_embedder
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    with tempfile.TemporaryDirectory() as home:
        paths = resolve_paths({"RAGD_HOME": home})
        embedder = make_embedder(load_config(paths, env={}).embedding, paths.data_dir)
        return np.stack([embedder.embed_query(t) for t in texts]).astype(np.float32)


def query_vectors(n: int) -> np.ndarray:
    path = corpus("beir", "scifact", "queries.jsonl")
    texts = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]
    return embed_texts(texts[:n])


def known_item_vectors() -> dict[str, np.ndarray]:
    """The questions of each known-item set (bench/queries), embedded."""
    from bench.quality import KNOWN_ITEM_SETS, load_known_items

    return {path.stem: embed_texts([q for q, _ in load_known_items(path)[0]])
            for path in KNOWN_ITEM_SETS}


def grow(base: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """``n`` vectors: the base, then noisy copies of it."""
    rng = np.random.default_rng(seed)
    parts = [base[:n]]
    have = len(parts[0])
    sigma = NOISE / np.sqrt(base.shape[1])
    while have < n:
        take = base[: n - have]
        noisy = take + rng.normal(0, sigma, take.shape).astype(np.float32)
        parts.append(noisy / np.linalg.norm(noisy, axis=1, keepdims=True))
        have += len(take)
    return np.concatenate(parts)


def make_store(directory: Path, x: np.ndarray, approx: bool) -> tuple[Any, float]:
    from ragd.daemon.stores.catalog import ChunkRow
    from ragd.daemon.stores.vectors import FaissStore

    store = FaissStore(directory, "bench", x.shape[1], approx_from=0)
    ids = np.arange(1, len(x) + 1)
    for start in range(0, len(x), 100_000):
        part = ids[start:start + 100_000]
        rows = [ChunkRow(id=int(i), source_id=0, ordinal=0, text="", embed_hash="",
                         heading_path=(), collection="b", collection_type="project", root="",
                         path="", title="", source_type="", date=None, metadata={}, tags=())
                for i in part]
        store.apply(rows, [], 1, dict(zip(part.tolist(), x[start:start + 100_000],
                                          strict=True)))
    seconds = 0.0
    if approx:
        t0 = time.perf_counter()
        store.start_build().join()
        seconds = time.perf_counter() - t0
        assert store.kind == "ivf"
    return store, seconds


def search_times(store: Any, queries: np.ndarray) -> tuple[list[list[int]], list[float]]:
    found, times = [], []
    for q in queries:
        t0 = time.perf_counter()
        hits = store.search(q, 50)
        times.append((time.perf_counter() - t0) * 1000)
        found.append([i for i, _ in hits])
    return found, times


def recall(got: list[list[int]], want: list[list[int]], k: int) -> float:
    return float(np.mean([len(set(g[:k]) & set(w[:k])) / k for g, w in zip(got, want,
                                                                          strict=True)]))


def exact_top(x: np.ndarray, queries: np.ndarray, k: int) -> list[list[int]]:
    """The exact top ``k`` ids (row + 1, as make_store numbers them) of each query."""
    best = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_ids = np.full((len(queries), k), -1, dtype=np.int64)
    for start in range(0, len(x), 100_000):
        scores = queries @ x[start:start + 100_000].T
        ids = np.arange(start + 1, start + 1 + scores.shape[1])
        both = np.concatenate([best, scores], axis=1)
        both_ids = np.concatenate([best_ids, np.broadcast_to(ids, scores.shape)], axis=1)
        top = np.argpartition(-both, k - 1, axis=1)[:, :k]
        best = np.take_along_axis(both, top, axis=1)
        best_ids = np.take_along_axis(both_ids, top, axis=1)
    order = np.argsort(-best, axis=1, kind="stable")
    return np.take_along_axis(best_ids, order, axis=1).tolist()


class ExactVectors:
    """The catalog's float32 vectors, held in memory: what the served leg reranks with."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x

    def chunk_vectors(self, fingerprint: str, ids: Any) -> dict[int, np.ndarray]:
        return {int(i): self.x[int(i) - 1] for i in ids}


def leg_engine(store: Any, catalog: Any, dimension: int) -> Any:
    """A SearchEngine with only what the semantic leg uses."""
    from types import SimpleNamespace

    from ragd.daemon.search.engine import SearchEngine

    engine = SearchEngine.__new__(SearchEngine)
    engine.faiss = store
    engine.catalog = catalog
    engine.embedder = SimpleNamespace(fingerprint="bench", dimension=dimension)
    return engine


def served_recall(store: Any, x: np.ndarray, queries: np.ndarray, divisors: list[int]
                  ) -> list[dict[str, Any]]:
    """recall@10 against exact search of the IVF index alone and of the served leg (asked
    for 10, and for 50 as a search asks), at nprobe = nlist / each divisor."""
    want = exact_top(x, queries, 10)
    engine = leg_engine(store, ExactVectors(x), x.shape[1])
    index = store._index
    shipped = index.nprobe
    out = []
    for div in [0, *divisors]:  # 0: the shipped setting (nprobe_for)
        index.nprobe = shipped if div == 0 else max(16, index.nlist // div)
        alone = [[i for i, _ in store.search(q, 10)] for q in queries]
        leg10 = [[i for i, _ in engine._refined(q, 10, None)] for q in queries]
        leg50, times = [], []
        for q in queries:
            t0 = time.perf_counter()
            leg50.append([i for i, _ in engine._refined(q, 50, None)])
            times.append((time.perf_counter() - t0) * 1000)
        out.append({"nprobe": index.nprobe, "nlist": index.nlist,
                    "index_recall@10": recall(alone, want, 10),
                    "leg10_recall@10": recall(leg10, want, 10),
                    "leg50_recall@10": recall(leg50, want, 10),
                    "top1_kept": float(np.mean([w[0] in g[:10] for g, w in zip(leg50, want,
                                                                              strict=True)])),
                    "leg50_p50_ms": round(pct(times, 50), 2),
                    "leg50_p95_ms": round(pct(times, 95), 2)})
    index.nprobe = shipped
    return out


def recall_table(title: str, rows: list[dict[str, Any]]) -> str:
    return table(title, [[f"{r['nprobe']} ({r['nprobe'] / r['nlist']:.0%})", r["nlist"], f"{r['index_recall@10']:.4f}",
                          f"{r['leg10_recall@10']:.4f}", f"{r['leg50_recall@10']:.4f}",
                          f"{r['top1_kept']:.3f}", r["leg50_p50_ms"], r["leg50_p95_ms"]]
                         for r in rows],
                 ["nprobe", "nlist", "index r@10", "leg(10) r@10", "leg(50) r@10",
                  "exact top-1 kept", "leg(50) p50 ms", "p95 ms"])


def index_mb(store: Any) -> float:
    import faiss

    return len(faiss.serialize_index(store._index)) / 2**20


# -- filtered search: scan the subset exactly, or go through the id selector ----------------------
SUBSETS = (10, 100, 1_000, 3_000, 10_000, 30_000)  # chunks a filter selects
CHUNKS_PER_SOURCE = 5


def filtered_catalog(directory: Path, x: np.ndarray, subsets: Sequence[int]) -> Any:
    """A catalog of len(x) chunks holding x's vectors: a collection (and a sender) per subset
    size, the rest in one more. Chunk ids follow x's rows (id = row + 1)."""
    from ragd.daemon.models import ChunkDraft
    from ragd.daemon.stores.catalog import Catalog, SourceUpdate, text_hash

    cat = Catalog(directory / "catalog.sqlite")
    plan = [(f"sub-{n}", n) for n in subsets]
    plan.append(("rest", len(x) - sum(subsets)))
    row = 0
    for name, size in plan:
        coll = cat.ensure_collection(name, type="project", kind="folder", root=f"/{name}").id
        updates, vectors = [], {}
        for first in range(0, size, CHUNKS_PER_SOURCE):
            chunks = []
            for o in range(min(CHUNKS_PER_SOURCE, size - first)):
                text = f"chunk {row}"
                chunks.append(ChunkDraft(o, text, text, (), 0, len(text), 2))
                vectors[text_hash(text)] = x[row]
                row += 1
            updates.append(SourceUpdate(
                path=f"{first}.md", size=1, mtime_ns=1, sha256=f"{name}{first}", title="",
                source_type="markdown", date=None, metadata={"sender": f"{name}@bench"},
                tags=(), warnings=(), chunks=tuple(chunks)))
            if len(updates) == 1000 or first + CHUNKS_PER_SOURCE >= size:
                cat.commit_sources(coll, updates, "bench", vectors)
                updates, vectors = [], {}
    check = cat.chunk_vectors("bench", [1, len(x)])
    assert np.array_equal(check[1], x[0]) and np.array_equal(check[len(x)], x[-1])
    return cat


def timed_leg(fn: Any, queries: np.ndarray) -> tuple[list[list[int]], dict[str, float]]:
    got, times = [], []
    for q in queries:
        t0 = time.perf_counter()
        got.append([i for i, _ in fn(q)])
        times.append((time.perf_counter() - t0) * 1000)
    return got, {"p50": round(pct(times, 50), 2), "p95": round(pct(times, 95), 2)}


def filtered_legs(cat: Any, ivf: Any, flat: Any, where: str, args: Any, limit: int, k: int
                  ) -> dict[str, Any]:
    """The four ways of a filtered semantic leg, each listing the filter's ids as it would."""
    from ragd.daemon.search.engine import REFINE

    engine = leg_engine(ivf, cat, ivf.dimension)

    def ids() -> list[int]:
        return cat.filter_chunk_ids(where, args, limit=limit)

    def ivf_leg(q: np.ndarray, every: bool) -> Any:
        return engine._exact(q, ivf.search(q, k * REFINE, ids(), every_cell=every), k)

    return {"scan": lambda q: engine._scan(q, k, ids()),
            "ivf_all": lambda q: ivf_leg(q, True),
            "ivf_grow": lambda q: ivf_leg(q, False),
            "flat": lambda q: flat.search(q, k, ids())}


def crossover(base: np.ndarray, n: int, queries: np.ndarray, k: int = 50) -> None:
    """Time a filtered semantic leg (top ``k``, as a search asks) for each subset size, four
    ways: the subset's vectors read from the catalog and scored exactly (scan); the
    approximate index's id selector probing every cell (all), or a quarter of them and more
    only when short (grow), both reranked exactly; and the exact index's selector (flat).
    Recall@10 is against the scan."""
    from ragd.daemon.search.filters import Filters, to_sql

    x = grow(base, n)
    subsets = [s for s in SUBSETS if s * 3 <= n]
    rows, out = [], []
    with tempfile.TemporaryDirectory() as tmp:
        cat = filtered_catalog(Path(tmp), x, subsets)
        flat, _ = make_store(Path(tmp) / "flat", x, approx=False)
        ivf, _ = make_store(Path(tmp) / "ivf", x, approx=True)
        for size in subsets:
            for label, f in (("collection", Filters(collections=(f"sub-{size}",))),
                             ("sender", Filters(sender=f"sub-{size}@"))):
                where, args = to_sql(f)
                legs = filtered_legs(cat, ivf, flat, where, args, size + 1, k)
                got, times = {}, {}
                for way, fn in legs.items():
                    got[way], times[way] = timed_leg(fn, queries)
                entry = {"subset": size, "filter": label, **times,
                         "ivf_all_recall@10": recall(got["ivf_all"], got["scan"], 10),
                         "ivf_grow_recall@10": recall(got["ivf_grow"], got["scan"], 10)}
                out.append(entry)
                rows.append([size, label, *(f"{t['p50']} / {t['p95']}" for t in
                                            times.values()),
                             f"{entry['ivf_all_recall@10']:.3f}",
                             f"{entry['ivf_grow_recall@10']:.3f}"])
        cat.close()
    print(table(f"filtered semantic leg, top {k}, {n:,} chunks, {len(queries)} queries, "
                "p50 / p95 ms", rows,
                ["subset", "filter", "scan", "IVF all cells", "IVF grow", "flat",
                 "all r@10", "grow r@10"]))
    print(f"wrote {write_json('vector_leg_filtered', {'size': n, 'k': k, 'rows': out})}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quality-home", type=Path, default=Path(tempfile.gettempdir()) /
                    "ragd-quality")
    ap.add_argument("--sizes", default="10k,100k,1m")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--nprobe-divisors", default="4,2",
                    help="recall at nprobe = nlist / each, beside the shipped nprobe_for")
    ap.add_argument("--filtered", metavar="SIZE", help="the crossover of filtered search")
    ap.add_argument("--home", type=Path, help="a RAGD_HOME whose vectors to use instead of "
                    "SciFact's; its recall is also measured with the known-item questions")
    args = ap.parse_args()
    base = real_vectors(args.quality_home, args.home)
    queries = query_vectors(args.queries)
    if args.filtered:
        crossover(base, SIZES[args.filtered], queries[:50])
        return
    query_sets = {"SciFact claims": queries, **(known_item_vectors() if args.home else {})}
    divisors = [int(d) for d in args.nprobe_divisors.split(",")]
    rows, out = [], []
    with tempfile.TemporaryDirectory() as tmp:
        exact, _ = make_store(Path(tmp) / "real-flat", base, approx=False)
        approx, build_s = make_store(Path(tmp) / "real-ivf", base, approx=True)
        want, _ = search_times(exact, queries)
        got, _ = search_times(approx, queries)
        real = {"vectors": len(base), "home": str(args.home or "SciFact"),
                "recall@10": recall(got, want, 10), "recall@50": recall(got, want, 50),
                "nlist": approx._index.nlist, "nprobe": approx._index.nprobe,
                "served": {name: served_recall(approx, base, q, divisors)
                           for name, q in query_sets.items()}}
        print(f"real vectors ({len(base):,}, {real['home']}), {len(queries)} SciFact claims: "
              f"index recall@10 {real['recall@10']:.4f}, recall@50 {real['recall@50']:.4f} "
              f"(nlist {real['nlist']}, nprobe {real['nprobe']})")
        for name, served in real["served"].items():
            print(recall_table(f"semantic leg vs exact, real vectors, {name} "
                               f"({len(query_sets[name])} queries)", served))
        del exact, approx
        for label in [s.strip() for s in args.sizes.split(",") if s.strip()]:
            x = grow(base, SIZES[label])
            for kind in ("flat", "ivf"):
                before = rss_mb()
                store, build_s = make_store(Path(tmp) / f"{label}-{kind}", x, kind == "ivf")
                _, times = search_times(store, queries)
                entry = {"size": label, "vectors": len(x), "kind": kind,
                         "build_s": round(build_s, 1), "p50_ms": round(pct(times, 50), 2),
                         "p95_ms": round(pct(times, 95), 2),
                         "index_mb": round(index_mb(store), 1),
                         "rss_growth_mb": round(rss_mb() - before, 1)}
                if kind == "ivf":
                    entry["served"] = served_recall(store, x, queries, divisors)
                    print(recall_table(f"semantic leg vs exact, {label}", entry["served"]))
                out.append(entry)
                rows.append([label, kind, entry["build_s"], entry["p50_ms"], entry["p95_ms"],
                             entry["index_mb"], entry["rss_growth_mb"]])
                del store
            del x
    flat = {e["size"]: e for e in out if e["kind"] == "flat"}
    for r, e in zip(rows, out, strict=True):
        r.append(round(flat[e["size"]]["p95_ms"] / e["p95_ms"], 1) if e["p95_ms"] else "")
    print(table("FaissStore search, top-50, one thread", rows,
                ["size", "index", "build s", "p50 ms", "p95 ms", "index MB", "RSS growth MB",
                 "flat/this p95"]))
    path = write_json("vector_leg", {"real": real, "sizes": out, "queries": len(queries)})
    print(f"wrote {path}")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
