"""An approximate vector index's hits are reranked by their exact vectors from the catalog."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ragd.daemon.search.engine import REFINE, SearchEngine
from ragd.daemon.stores.catalog import ChunkRow
from ragd.daemon.stores.vectors import FaissStore

DIM = 32
K = 12  # not a multiple of the copies: the top k cuts through a group of near-ties


class ExactVectors:
    """Stands in for the catalog's embeddings table (a dict of float32 vectors)."""

    def __init__(self, vectors: dict[int, np.ndarray]) -> None:
        self.vectors = vectors

    def chunk_vectors(self, fingerprint: str, ids: Sequence[int]) -> dict[int, np.ndarray]:
        return {i: self.vectors[i] for i in ids if i in self.vectors}


def near_duplicates(n_base: int, copies: int, rng: np.random.Generator) -> np.ndarray:
    """Copies of each vector a little apart: closer than 8-bit quantisation can tell apart,
    as in the scale benchmark's copied collections."""
    base = rng.standard_normal((n_base, DIM))
    x = np.repeat(base, copies, axis=0) + 0.002 * rng.standard_normal((n_base * copies, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_approximate_hits_are_reranked_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    x = near_duplicates(300, 8, rng)
    ids = list(range(1, len(x) + 1))
    rows = [ChunkRow(id=i, source_id=i, ordinal=0, text="", embed_hash=str(i), heading_path=(),
                     collection="c", collection_type="project", root="/v", path="n.md",
                     title="T", source_type="markdown", date=None, metadata={}, tags=())
            for i in ids]
    store = FaissStore(tmp_path / "faiss", "fp", DIM, approx_from=1000)
    store.apply(rows, [], 1, dict(zip(ids, x, strict=True)))
    assert store._build is not None
    store._build.join(60)
    assert store.kind == "ivf"
    engine = SearchEngine.__new__(SearchEngine)  # only the parts the vector leg uses
    engine.faiss = store
    engine.catalog = ExactVectors(dict(zip(ids, x, strict=True)))  # type: ignore[assignment]
    engine.embedder = SimpleNamespace(fingerprint="fp")  # type: ignore[assignment]
    plain_found = refined_found = 0
    for q in x[rng.choice(len(x), 40, replace=False)] + 0.01 * rng.standard_normal((40, DIM)):
        q = (q / np.linalg.norm(q)).astype(np.float32)
        exact = {ids[j] for j in np.argsort(-(x @ q))[:K]}
        refined = engine._refined(q, K, None)
        scores = [s for _, s in refined]
        assert scores == sorted(scores, reverse=True)
        for cid, s in refined:  # exact scores, not the 8-bit index's
            assert abs(s - float(x[cid - 1] @ q)) < 1e-5
        plain = store.search(q, K, None)
        assert {c for c, _ in refined} <= {c for c, _ in store.search(q, K * REFINE, None)}
        plain_found += len(exact & {c for c, _ in plain})
        refined_found += len(exact & {c for c, _ in refined})
    assert refined_found > plain_found, (plain_found, refined_found)
    assert refined_found >= 0.98 * 40 * K
    store.close()
