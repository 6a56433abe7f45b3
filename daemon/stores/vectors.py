"""FAISS vector store: inner product over normalised vectors, keyed by chunk id.

Below ``approx_from`` vectors the index is ``IndexIDMap2(IndexFlatIP)``: exact, removal by id
(top-10 in ~18 ms at 100k vectors on two cores, ~180 ms at 1M, 1.5 GB). Past it, an IVF index
with 8-bit scalar-quantised vectors and a hash-table direct map takes over (removal by id too,
a quarter of the memory, a few ms per query): it is trained and filled on a background thread
from the live index while the exact one keeps serving, the ops applied meanwhile are replayed on
it, and it is swapped in under the lock (docs/decisions/0014). Saved by write-to-temp, fsync,
rename; the journal mark is written after the index, so a crash can only make the mark older
than the data, and replay is idempotent. A crash during a background build loses only the build:
the saved index is still the exact one, and the next apply starts the build again.

Decision 0020: a query probes every cell up to SCAN_BUDGET vectors (``nprobe_for``); a search
restricted to some ids probes more cells until it has found them; and a rebuild from the
catalog (reset, bulk applies, save) builds the approximate index at its save, from every
chunk, so that what it leaves on disk is what a write would have made.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragd.daemon.stores.catalog import ChunkRow
from ragd.daemon.stores.projection import fsync_dir, read_json, write_json_atomic

log = logging.getLogger(__name__)


class FaissStore:
    name = "faiss"
    needs_vectors = True

    def __init__(self, directory: Path, fingerprint: str, dimension: int, *,
                 approx_from: int = 0) -> None:
        import faiss

        self._faiss = faiss
        # One query at a time is ~3x faster single-threaded on small machines (FIELD-NOTES).
        faiss.omp_set_num_threads(1)
        self._index: Any
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dimension = dimension
        self._lock = threading.RLock()
        self._file = self.dir / "index.faiss"
        self._state_file = self.dir / "state.json"
        state = read_json(self._state_file)
        self.fingerprint = fingerprint
        self.stale = False  # True when the stored index belongs to another fingerprint
        self.approx_from = approx_from  # 0: always exact
        self._build: threading.Thread | None = None
        self._log: list[tuple[np.ndarray, np.ndarray | None, np.ndarray | None]] | None = None
        self._closing = False
        self._generation = 0  # bumped by reset: a build of an older generation is discarded
        # After a reset, a rebuild's bulk applies (mark 0: no journal position) arrive until
        # the next save: the approximate index is built once they are all in (``save``), not
        # from the first ``approx_from`` chunk ids. A journal write with rows ends it early.
        self._bulk = False
        self.on_build: Callable[[dict[str, Any]], None] | None = None  # for status and tests
        if self._file.exists() and state.get("fingerprint") == fingerprint:
            self._index = faiss.read_index(str(self._file))
            self._set_nprobe()
            self._mark = self._saved = int(state.get("mark", 0))
        else:
            if self._file.exists():
                log.warning("FAISS index was built with %s, not %s: it will be rebuilt",
                            state.get("fingerprint"), fingerprint)
                self.stale = True
            self._index = self._empty()
            self._mark = self._saved = 0
        self._dirty = False

    def _empty(self) -> Any:
        return self._faiss.IndexIDMap2(self._faiss.IndexFlatIP(self.dimension))

    @property
    def mark(self) -> int:
        return self._mark

    @property
    def persisted_mark(self) -> int:
        return self._saved

    @property
    def size(self) -> int:
        return int(self._index.ntotal)

    @property
    def kind(self) -> str:
        """'flat' (exact) or 'ivf' (approximate)."""
        return "ivf" if isinstance(self._index, self._faiss.IndexIVF) else "flat"

    @property
    def building(self) -> bool:
        return self._build is not None and self._build.is_alive()

    def apply(self, rows: Sequence[ChunkRow], deletes: Sequence[int], mark: int,
              vectors: Mapping[int, np.ndarray]) -> None:
        """Upsert ``rows`` (their vectors from ``vectors``) and remove ``deletes``."""
        ids = np.array([r.id for r in rows] + list(deletes), dtype=np.int64)
        with self._lock:
            if len(ids):
                self._index.remove_ids(ids)
            have = [r.id for r in rows if r.id in vectors]
            if len(have) < len(rows):
                log.error("%d chunks have no cached vector; run `ragd index --rebuild`",
                          len(rows) - len(have))
            mat = (np.stack([vectors[i] for i in have]).astype(np.float32, copy=False)
                   if have else None)
            have_ids = np.array(have, dtype=np.int64)
            if mat is not None:
                self._index.add_with_ids(mat, have_ids)
            if self._log is not None:  # a build is running: it replays these before the swap
                self._log.append((ids, have_ids if mat is not None else None, mat))
            self._mark = max(self._mark, mark)
            self._dirty = True
            if rows and mark > 0:  # a write from the journal (a re-embed after a reset)
                self._bulk = False
            self._set_nprobe()
            if self._wants_approximate() and not self._bulk and not self.building:
                self.start_build()

    def _set_nprobe(self) -> None:
        """The cells a query probes follow the index's size (``nprobe_for``)."""
        if isinstance(self._index, self._faiss.IndexIVF):
            self._index.nprobe = nprobe_for(self._index.nlist, int(self._index.ntotal))

    def _wants_approximate(self) -> bool:
        return bool(self.approx_from) and self.kind == "flat" and self.size >= self.approx_from

    # -- the approximate index ------------------------------------------------------------------
    def start_build(self) -> threading.Thread:
        """Build the IVF index from the live one on a background thread (see the module doc)."""
        with self._lock:
            if self.building:
                assert self._build is not None
                return self._build
            self._log = []
            ids = self.ids_array()
            self._build = threading.Thread(target=self._run_build,
                                           args=(ids, self._generation),
                                           name="ragd-faiss-build", daemon=True)
            self._build.start()
            return self._build

    def _run_build(self, ids: np.ndarray, generation: int) -> None:
        faiss = self._faiss
        try:
            started = time.perf_counter()
            log.info("FAISS: building the approximate index from %d vectors", len(ids))
            nlist = nlist_for(len(ids))
            train_ids = ids[np.linspace(0, len(ids) - 1, min(len(ids), nlist * 40)).astype(int)]
            ivf = faiss.IndexIVFScalarQuantizer(
                faiss.IndexFlatIP(self.dimension), self.dimension, nlist,
                faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
            ivf.train(self._copy(train_ids)[1])
            ivf.set_direct_map_type(faiss.DirectMap.Hashtable)
            for start in range(0, len(ids), _BUILD_SLICE):
                if self._closing or generation != self._generation:
                    return  # stopping, or reset meanwhile: the build would be discarded
                present, mat = self._copy(ids[start:start + _BUILD_SLICE])
                if len(present):
                    ivf.add_with_ids(mat, present)
            with self._lock:
                if generation != self._generation or self._log is None:
                    return  # reset meanwhile: this build is of an index that is gone
                for removed, added, vecs in self._log:
                    if len(removed):
                        ivf.remove_ids(removed)
                    if added is not None and vecs is not None:
                        ivf.add_with_ids(vecs, added)
                self._index = ivf
                self._set_nprobe()
                self._log = None
                self._dirty = True
                info = {"kind": "ivf", "nlist": nlist, "nprobe": ivf.nprobe,
                        "vectors": int(ivf.ntotal),
                        "seconds": round(time.perf_counter() - started, 2)}
            log.info("FAISS: approximate index built (%s)", info)
            if self.on_build is not None:
                self.on_build(info)
        except Exception:
            log.exception("FAISS: building the approximate index failed; staying exact")
        finally:
            with self._lock:
                self._log = None

    def _copy(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The vectors of those ``ids`` still present, copied under the lock a slice at a time
        (searches wait at most one slice)."""
        with self._lock:
            try:
                return ids, self._index.reconstruct_batch(ids)
            except RuntimeError:  # some were removed since the build started
                present = np.array(sorted(set(ids.tolist()) & set(self.ids_array().tolist())),
                                   dtype=np.int64)
                if not len(present):
                    return present, np.empty((0, self.dimension), dtype=np.float32)
                return present, self._index.reconstruct_batch(present)

    def search(self, query: np.ndarray, k: int, allowed: Sequence[int] | None = None, *,
               every_cell: bool = False) -> list[tuple[int, float]]:
        """Top ``k`` chunk ids by inner product; ``allowed`` restricts the candidates.

        Restricted, an approximate index returns min(k, allowed ids it holds): it probes
        more cells until it has found that many, all of them if need be (decision 0020),
        since the allowed ids may lie in cells a plain search would not visit. With
        ``every_cell`` it probes them all at once: every allowed id is scored, as a small
        filter needs to be exact (the cost is a membership check per indexed vector).
        """
        faiss = self._faiss
        with self._lock:
            if self._index.ntotal == 0 or k <= 0:
                return []
            q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
            if allowed is None:
                scores, ids = self._index.search(q, min(k, self._index.ntotal))
            elif not len(allowed):
                return []
            elif self.kind == "flat":
                sel = faiss.IDSelectorBatch(np.asarray(allowed, dtype=np.int64))
                scores, ids = self._index.search(q, min(k, len(allowed)),
                                                 params=faiss.SearchParameters(sel=sel))
            else:
                scores, ids = self._search_ivf_within(q, k, allowed, every_cell)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]

    def _search_ivf_within(self, q: np.ndarray, k: int, allowed: Sequence[int],
                           every_cell: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """An IVF search restricted to ``allowed``: from every cell with ``every_cell``, else
        from ``nprobe`` cells and PROBE_GROWTH times more each round until it has
        min(k, len(allowed)) hits or has probed every cell. Ids not in the index (deleted,
        or still waiting for a vector) make it probe them all."""
        faiss = self._faiss
        index = self._index
        sel = faiss.IDSelectorBatch(np.asarray(allowed, dtype=np.int64))
        want = min(k, len(allowed), int(index.ntotal))
        nprobe = index.nlist if every_cell else index.nprobe
        while True:
            params = faiss.SearchParametersIVF(sel=sel, nprobe=nprobe)
            scores, ids = index.search(q, want, params=params)
            if int((ids[0] >= 0).sum()) >= want or nprobe >= index.nlist:
                return scores, ids
            nprobe = min(index.nlist, nprobe * PROBE_GROWTH)

    def save(self) -> None:
        """Persist the index, then the mark (never the other way round).

        The first save after a reset ends a rebuild's bulk load. If the index is past the
        threshold, the approximate index is built there and then and saved too, so a rebuild
        leaves what a write would have, rather than an exact index until the next write
        (decision 0020). The exact one is saved first: a crash during the build keeps it.
        """
        with self._lock:
            self._write()
            ended_bulk, self._bulk = self._bulk, False
            if not (ended_bulk and self._wants_approximate()):
                return
        # Outside the lock: searches go on over the exact index while the build runs.
        stale = self._build
        if stale is not None:  # one started before the reset: it will discard itself
            stale.join()
        self.start_build().join()
        with self._lock:
            self._write()

    def _write(self) -> None:
        if not self._dirty and self._file.exists():
            return
        tmp = self._file.with_suffix(".tmp")
        self._faiss.write_index(self._index, str(tmp))
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self._file)
        fsync_dir(self.dir)
        write_json_atomic(self._state_file, {"mark": self._mark,
                                             "fingerprint": self.fingerprint,
                                             "count": int(self._index.ntotal)})
        self._saved = self._mark
        self._dirty = False

    def ids(self) -> set[int]:
        return {int(i) for i in self.ids_array()}

    def ids_array(self) -> np.ndarray:
        """Every chunk id in the index (an int64 array)."""
        faiss = self._faiss
        with self._lock:
            index = self._index
            if index.ntotal == 0:
                return np.empty(0, dtype=np.int64)
            if self.kind == "flat":
                return faiss.vector_to_array(index.id_map).astype(np.int64, copy=False)
            lists = index.invlists
            parts = [faiss.rev_swig_ptr(lists.get_ids(n), lists.list_size(n)).copy()
                     for n in range(index.nlist) if lists.list_size(n)]
            return np.concatenate(parts).astype(np.int64, copy=False)

    def reset(self, fingerprint: str) -> None:
        """Drop everything (before a rebuild from the catalog)."""
        with self._lock:
            self._index = self._empty()
            self._generation += 1
            self._log = None
            self.fingerprint = fingerprint
            self._mark = 0
            self._saved = 0
            self._dirty = True
            self.stale = False
            self._bulk = True

    def close(self) -> None:
        self._closing = True
        build = self._build
        if build is not None:
            build.join(timeout=5)
        self.save()


_BUILD_SLICE = 65_536  # vectors copied per lock hold while building


def nlist_for(n: int) -> int:
    """IVF cells for ``n`` vectors: ~4·sqrt(n), at least 64 (~40 training points each)."""
    return max(64, min(16_384, int(4 * math.sqrt(max(n, 1)))))


def nprobe_for(nlist: int, vectors: int) -> int:
    """Cells searched per query (decision 0020): every cell in an index of up to SCAN_BUDGET
    vectors; past it, the share of cells that holds about that many, but never fewer than
    a quarter (nlist/4 is what 1M chunks had, decision 0014) nor than 16.

    A quarter of the cells kept recall@10 at 0.99 for questions near the indexed text, but
    not for queries far from all of it. In a home of 45k Obsidian chunks (a dense generated
    vault beside a small diffuse one) it was 0.87 for SciFact claims and 0.94 for questions
    about notes the home does not hold, whose neighbours lie in cells that do not rank among
    the first. Every cell of 100k 8-bit vectors costs 7.7 ms a query here (a quarter: 1.5 ms),
    so below SCAN_BUDGET coverage is bought whole.
    """
    if vectors <= SCAN_BUDGET:
        return nlist
    share = math.ceil(nlist * SCAN_BUDGET / vectors)
    return min(nlist, max(16, nlist // 4, share))


SCAN_BUDGET = 200_000  # vectors a query's probed cells hold, about (~15 ms)
PROBE_GROWTH = 4  # a restricted search that came back short probes this many times more cells
