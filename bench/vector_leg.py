"""The vector leg at scale: exact (flat) against approximate (IVF, 8-bit) FAISS, through FaissStore.

Prints a table and writes bench/results/vector_leg.json:
- recall@10 and recall@50 of the approximate index against the exact one, on real vectors: the
  SciFact chunk embeddings cached in bench/quality.py's catalog and the 300 SciFact test
  queries embedded by the configured model;
- per size (10k, 100k, 1M by default): build time (training + filling, on the background
  thread, as the daemon does it), query p50/p95 for top-50 (one thread, as the daemon searches),
  the index's own memory (its serialised size) and the process's RSS after building.

Sizes past the real vectors are made of copies of them plus Gaussian noise (sigma 0.05/sqrt(d),
renormalised), as bench/query_latency.py makes its large indexes; recall is reported on the
real vectors only, where it means something.

    python bench/vector_leg.py [--quality-home DIR] [--sizes 10k,100k,1m] [--queries N]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import corpus, pct, rss_mb, table, write_json  # noqa: E402

SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
NOISE = 0.05


def real_vectors(quality_home: Path) -> np.ndarray:
    db_path = quality_home / "scifact" / "data" / "catalog.sqlite"
    if not db_path.exists():
        sys.exit(f"error: no SciFact catalog at {db_path}; run bench/quality.py "
                 f"--home {quality_home} first (it embeds SciFact once)")
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT vector FROM embeddings").fetchall()
    finally:
        db.close()
    return np.stack([np.frombuffer(v, dtype=np.float32) for (v,) in rows])


def query_vectors(n: int) -> np.ndarray:
    from daemon.embed.embedding import make_embedder
    from daemon.settings.config import load_config
    from daemon.settings.paths import resolve_paths

    path = corpus("beir", "scifact", "queries.jsonl")
    texts = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]
    with tempfile.TemporaryDirectory() as home:
        paths = resolve_paths({"RAGD_HOME": home})
        embedder = make_embedder(load_config(paths, env={}).embedding, paths.data_dir)
        return np.asarray(embedder.embed(texts[:n]), dtype=np.float32)


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
    from daemon.stores.catalog import ChunkRow
    from daemon.stores.vectors import FaissStore

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


def index_mb(store: Any) -> float:
    import faiss

    return len(faiss.serialize_index(store._index)) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quality-home", type=Path, default=Path(tempfile.gettempdir()) /
                    "ragd-quality")
    ap.add_argument("--sizes", default="10k,100k,1m")
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    base = real_vectors(args.quality_home)
    queries = query_vectors(args.queries)
    rows, out = [], []
    with tempfile.TemporaryDirectory() as tmp:
        exact, _ = make_store(Path(tmp) / "real-flat", base, approx=False)
        approx, build_s = make_store(Path(tmp) / "real-ivf", base, approx=True)
        want, _ = search_times(exact, queries)
        got, _ = search_times(approx, queries)
        real = {"vectors": len(base), "recall@10": recall(got, want, 10),
                "recall@50": recall(got, want, 50), "nlist": approx._index.nlist,
                "nprobe": approx._index.nprobe}
        print(f"real SciFact vectors ({len(base):,}), {len(queries)} real queries: "
              f"recall@10 {real['recall@10']:.4f}, recall@50 {real['recall@50']:.4f} "
              f"(nlist {real['nlist']}, nprobe {real['nprobe']})")
        del exact, approx
        for label in [s.strip() for s in args.sizes.split(",")]:
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
