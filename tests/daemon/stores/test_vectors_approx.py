"""The approximate (IVF, 8-bit) vector index: built in the background past a threshold, kept in
step with deletes and updates, persisted, and safe to kill in the middle of a build."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from ragd.daemon.stores.catalog import ChunkRow
from ragd.daemon.stores.vectors import FaissStore

DIM = 32


def rows(ids: range | list[int]) -> list[ChunkRow]:
    return [ChunkRow(id=i, source_id=i, ordinal=0, text=f"t{i}", embed_hash=str(i),
                     heading_path=(), collection="c", collection_type="project", root="/v",
                     path="n.md", title="T", source_type="markdown", date=None, metadata={},
                     tags=()) for i in ids]


def clustered(n: int, seed: int = 0) -> np.ndarray:
    """Normalised vectors in 40 tight clusters: what embeddings of real text look like."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIM))
    x = centres[rng.integers(0, 40, n)] + 0.15 * rng.standard_normal((n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def filled(tmp_path: Path, n: int, approx_from: int) -> tuple[FaissStore, np.ndarray]:
    store = FaissStore(tmp_path / "faiss", "fp", DIM, approx_from=approx_from)
    x = clustered(n)
    ids = list(range(1, n + 1))
    store.apply(rows(ids), [], 1, dict(zip(ids, x, strict=True)))
    return store, x


def wait_built(store: FaissStore) -> None:
    build = store._build
    assert build is not None, "no build was started"
    build.join(timeout=60)
    assert store.kind == "ivf"


def build_held_at_its_first_copy(store: FaissStore, monkeypatch: pytest.MonkeyPatch
                                 ) -> tuple[threading.Thread, threading.Event]:
    """Start a build that waits, at its first copy, until the returned event is set."""
    entered, release = threading.Event(), threading.Event()
    original = store._copy

    def held_copy(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        entered.set()
        release.wait(30)
        return original(ids)

    monkeypatch.setattr(store, "_copy", held_copy)
    build = store.start_build()
    assert entered.wait(30)
    return build, release


def test_below_the_threshold_the_index_stays_exact(tmp_path: Path) -> None:
    store, _ = filled(tmp_path, 500, approx_from=1000)
    assert store.kind == "flat" and not store.building
    store, _ = filled(tmp_path / "never", 3000, approx_from=0)
    assert store.kind == "flat" and store._build is None


def test_past_the_threshold_it_answers_like_the_exact_index(tmp_path: Path) -> None:
    exact, x = filled(tmp_path / "exact", 3000, approx_from=0)
    approx, _ = filled(tmp_path / "approx", 3000, approx_from=2000)
    wait_built(approx)
    assert approx.size == 3000 and approx.ids() == exact.ids()
    rng = np.random.default_rng(1)
    queries = x[rng.integers(0, 3000, 50)] + 0.05 * rng.standard_normal((50, DIM)).astype(
        np.float32)
    recalls = []
    for q in queries:
        want = [i for i, _ in exact.search(q, 10)]
        got = [i for i, _ in approx.search(q, 10)]
        assert got[0] in want[:3]  # 8-bit vectors may swap near-ties (0.0003 apart)
        recalls.append(len(set(got) & set(want)) / 10)
    assert np.mean(recalls) >= 0.95
    allowed = list(range(100, 200))
    filtered = approx.search(x[150], 5, allowed)
    assert filtered[0][0] == 151 and {i for i, _ in filtered} <= set(allowed)


def test_deletes_and_updates_reach_the_approximate_index(tmp_path: Path) -> None:
    store, x = filled(tmp_path, 3000, approx_from=2000)
    wait_built(store)
    store.apply([], [5, 6, 7], 2, {})
    assert not {5, 6, 7} & {i for i, _ in store.search(x[5], 20)}
    moved = x[2500]  # chunk 10 now has the vector of chunk 2501
    store.apply(rows([10]), [], 3, {10: moved})
    top = [i for i, _ in store.search(moved, 2)]
    assert set(top) == {10, 2501}
    assert store.size == 2997 and 5 not in store.ids()


def test_ops_applied_during_a_build_are_replayed_before_the_swap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, x = filled(tmp_path, 1500, approx_from=0)
    build, release = build_held_at_its_first_copy(store, monkeypatch)
    store.apply([], [1, 2], 2, {})  # while the build copies
    new = clustered(1, seed=9)[0]
    store.apply(rows([5000]), [], 3, {5000: new})
    assert store.kind == "flat" and store.search(new, 1)[0][0] == 5000  # still served exactly
    release.set()
    build.join(60)
    assert store.kind == "ivf"
    ids = store.ids()
    assert 5000 in ids and not {1, 2} & ids and len(ids) == 1499
    assert store.search(new, 1)[0][0] == 5000


def test_the_approximate_index_is_saved_and_loaded(tmp_path: Path) -> None:
    store, x = filled(tmp_path, 3000, approx_from=2000)
    wait_built(store)
    store.save()
    again = FaissStore(tmp_path / "faiss", "fp", DIM, approx_from=2000)
    assert again.kind == "ivf" and again.ids() == store.ids() and again.mark == 1
    assert again.search(x[42], 1)[0][0] == 43


def test_a_reset_during_a_build_discards_the_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, _ = filled(tmp_path, 1500, approx_from=0)
    build, release = build_held_at_its_first_copy(store, monkeypatch)
    store.reset("fp2")
    release.set()
    build.join(60)
    assert store.kind == "flat" and store.size == 0


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_kill_9_during_a_background_build_then_reopen_converges(tmp_path: Path) -> None:
    """A child process fills a store, saves it exact, starts a build and is killed with
    SIGKILL in the middle of it. Reopened, the store is the exact one it saved, whole; the
    next apply builds the approximate index again."""
    child = textwrap.dedent(f"""
        import os, signal, sys
        sys.path[:0] = {sys.path!r}
        from test_vectors_approx import filled, FaissStore
        from pathlib import Path
        store, _ = filled(Path({str(tmp_path)!r}), 3000, approx_from=0)
        store.save()
        original = store._copy
        def dying_copy(ids):
            if len(ids) > 100:  # a slice of the fill, after training
                os.kill(os.getpid(), signal.SIGKILL)
            return original(ids)
        store._copy = dying_copy
        store.start_build().join(60)
        print("not killed")
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    proc = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    store = FaissStore(tmp_path / "faiss", "fp", DIM, approx_from=2000)
    assert store.kind == "flat" and store.ids() == set(range(1, 3001)) and store.mark == 1
    store.apply(rows([3001]), [], 2, {3001: clustered(1, seed=3)[0]})
    wait_built(store)
    assert store.ids() == set(range(1, 3002))


def test_a_restricted_search_reaches_cells_it_would_not_probe(tmp_path: Path) -> None:
    """Filtered, the approximate index returns min(k, allowed ids it holds), wherever they
    lie: it probes more cells until it has them (decision 0020)."""
    store, x = filled(tmp_path, 3000, approx_from=2000)
    wait_built(store)
    store._index.nprobe = 1  # a plain search visits one cell
    query = x[0]
    far = np.argsort(x @ query)[:40] + 1  # the 40 chunks least like the query
    allowed = [int(i) for i in far] + [999_999]  # and an id the index does not hold
    assert not set(allowed) & {i for i, _ in store.search(query, 200)}
    got = store.search(query, 10, allowed)
    assert len(got) == 10 and {i for i, _ in got} <= set(allowed)
    assert len(store.search(query, 100, allowed)) == 40
    assert store._index.nprobe == 1  # the shipped setting is left alone


def rebuild(store: FaissStore, x: np.ndarray, last: int) -> None:
    """What ``Indexer.rebuild`` does: reset, bulk applies of every chunk (no journal mark),
    one apply carrying the journal's last op, then a save."""
    store.reset("fp")
    for start in range(0, len(x), 500):
        ids = list(range(start + 1, min(len(x), start + 500) + 1))
        store.apply(rows(ids), [], 0, {i: x[i - 1] for i in ids})
    assert store._build is None and store.kind == "flat"  # not from a part of the chunks
    store.apply([], [], last, {})
    store.save()


def test_a_rebuild_past_the_threshold_saves_the_approximate_index(tmp_path: Path) -> None:
    """`ragd index --rebuild faiss` leaves what a write would: the IVF index, on disk, at
    once, built from every chunk (not an exact index until the next write)."""
    x = clustered(3000)
    store = FaissStore(tmp_path / "faiss", "fp", DIM, approx_from=2000)
    built: list[dict[str, object]] = []
    store.on_build = built.append
    rebuild(store, x, last=7)
    assert store.kind == "ivf" and len(built) == 1 and built[0]["vectors"] == 3000
    assert not store.building
    again = FaissStore(tmp_path / "faiss", "fp", DIM, approx_from=2000)
    assert again.kind == "ivf" and again.mark == 7 and again.ids() == set(range(1, 3001))
    # Below the threshold a rebuild stays exact, and a later write past it builds as usual.
    small = FaissStore(tmp_path / "small", "fp", DIM, approx_from=2000)
    rebuild(small, x[:1500], last=3)
    assert small.kind == "flat" and small._build is None
    small.apply(rows(range(1501, 2101)), [], 4, {i: x[i - 1] for i in range(1501, 2101)})
    wait_built(small)


def test_a_reembed_after_a_reset_builds_in_the_background(tmp_path: Path) -> None:
    """After a fingerprint change the index is refilled by journal writes (marks > 0), not a
    bulk load: the build starts when they cross the threshold, as for any write."""
    x = clustered(2500)
    store = FaissStore(tmp_path / "faiss", "fp", DIM, approx_from=2000)
    store.reset("fp2")
    for n, start in enumerate(range(0, 2500, 500), 1):
        ids = list(range(start + 1, start + 501))
        store.apply(rows(ids), [], n, {i: x[i - 1] for i in ids})
    wait_built(store)
    assert store.size == 2500
