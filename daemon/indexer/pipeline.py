"""Apply a reconcile plan: read, chunk, embed (cache first), commit, project to the indexes.

Work is done in groups: each group is one catalog transaction followed by one write to each
index, so an interrupted run resumes where it stopped and searches see progress as it happens.

``Indexer``, the single writer, starts here: ``sync`` and the pass over a folder of files.
Its other parts are the classes it inherits, one a module, each building on the next and
using the attributes set in ``Indexer.__init__``: ``container_sync`` (the pass over a
collection of containers), ``documents`` (a read document chunked into its update, a group
committed), ``embed_backlog`` (vectors for committed chunks), ``catchup`` (the journal
replayed to the indexes; save, rebuild) and ``pacing`` (when a job gives way to small work;
its group size). ``report`` holds ``Progress`` and ``IndexReport``. Their public names stay
importable from here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ragd.daemon.embed.embedding import Embedder
from ragd.daemon.errors import Interrupted
from ragd.daemon.extract.kinds import spec_of
from ragd.daemon.extract.pool import ExtractPool
from ragd.daemon.extract.readahead import CarryKey, Loader, ReadAhead
from ragd.daemon.extract.stream import RemoteEntryStream
from ragd.daemon.extract.work import Loaded, load_file
from ragd.daemon.indexer.catchup import REPLAY_SLICE, CatchUp
from ragd.daemon.indexer.container_sync import ContainerSync
from ragd.daemon.indexer.documents import Documents, _blind, _Parsed
from ragd.daemon.indexer.embed_backlog import EMBED_SLICE, EmbeddingBacklog
from ragd.daemon.indexer.pacing import (
    GROUP_SOURCES,
    SMALL_TURN_S,
    SMALL_WINDOW_S,
    WINDOW_CHUNKS,
    WINDOW_CHUNKS_BACKGROUND,
    Pacing,
)
from ragd.daemon.indexer.reconcile import Plan, RetryClock, reconcile
from ragd.daemon.indexer.report import IndexReport, Progress
from ragd.daemon.indexer.timings import Spans
from ragd.daemon.models import Document, FileState, Skip
from ragd.daemon.sources.base import ContainerKind, SourceKind, sha256_file
from ragd.daemon.stores import backlog
from ragd.daemon.stores.backlog import Counts
from ragd.daemon.stores.catalog import Catalog, Collection
from ragd.daemon.stores.projection import IndexStore

__all__ = [
    "EMBED_SLICE", "GROUP_SOURCES", "REPLAY_SLICE", "SMALL_TURN_S", "SMALL_WINDOW_S",
    "WINDOW_CHUNKS", "WINDOW_CHUNKS_BACKGROUND", "IndexReport", "Indexer", "Progress",
]


class Indexer(ContainerSync, Documents, EmbeddingBacklog, CatchUp, Pacing):
    """The single writer: owns the catalog writes and the index projections."""

    def __init__(self, catalog: Catalog, embedder: Embedder, stores: Sequence[IndexStore], *,
                 max_file_bytes: int, on_progress: Callable[[Progress], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> None:
        self.catalog = catalog
        self.embedder = embedder
        self.stores = list(stores)
        self.max_file_bytes = max_file_bytes
        self.on_progress = on_progress or (lambda p: None)
        self.should_stop = should_stop or (lambda: False)
        # Whether small work waits beside a small job (the daemon's queue): a wait on a slow
        # load gives way to it, the load going on in the background (decision 0025).
        self.give_way: Callable[[], bool] = lambda: False
        self._started = 0.0  # when the current sync began
        self._small_at = -SMALL_WINDOW_S  # when small work last ran or was waited for
        for store in self.stores:  # Whoosh: big merges only while nobody saves notes
            if hasattr(store, "quiet"):
                store.quiet = self._quiet  # type: ignore[attr-defined]
        # During a small job: the journal seq past which its ops were not yet applied to the
        # keyword index ahead of older ops (_replay); None during bulk work.
        self._ahead: int | None = None
        self.retries = RetryClock()  # when a skip of the moment is read again (decision 0026)
        # Held for every index projection (catch_up, save, rebuild): the writer and the
        # embedding thread both apply journal ops, never at the same time.
        self.lock = threading.RLock()
        # True when a thread embeds the backlog (the daemon): a sync then ends once its
        # sources are committed. False (the CLI, tests): a sync embeds its backlog before it
        # returns, with progress.
        self.background = False
        self.urgency = backlog.BULK  # of the chunks the current sync commits
        self.on_backlog: Callable[[], None] = lambda: None  # new chunks wait for vectors
        self._turn: int | None = None  # the collection embedded last (round robin)
        # Containers' documents load here, off the writer; a load a yield cut short is
        # carried to the next pass (readahead.EntryStream).
        self._loader = Loader()
        # Where files and containers are read: extraction workers under a deadline (the
        # daemon, decision 0041); None reads them on this process's threads (tests).
        self.extract: ExtractPool | None = None
        self._carried: dict[CarryKey, Future[Any]] = {}
        self._carried_files: dict[Any, Future[Any]] = {}  # a folder's loads (ReadAhead)
        # A collection's container stream that its interrupted pass took nothing from, kept
        # reading for the next pass over the same list (``_read_containers``).
        self._parked: dict[int, tuple[tuple[Any, ...], RemoteEntryStream]] = {}
        self.backlog = Counts()  # refreshed after every commit and every embedded slice
        # What the writer spends its time on (a small job's timing reads it, issue 21), and
        # when the current small job's own chunks became keyword-searchable.
        self.spans = Spans()
        self.visible_at: float | None = None
        self._yielding = False  # a replay that small work may cut short, even mid-slice
        for store in self.stores:
            if hasattr(store, "on_span"):
                store.on_span = self.spans.add  # type: ignore[attr-defined]
            if hasattr(store, "interrupt"):
                store.interrupt = self._interrupt  # type: ignore[attr-defined]

    # -- the sync pass ------------------------------------------------------------------------
    def sync(self, coll: Collection, kind: SourceKind | ContainerKind, *,
             paths: Sequence[str] | None = None,
             force: bool = False, max_entries: int | None = None) -> IndexReport:
        """Bring one collection in line with the disk (all of it, or the given paths).

        Raises ``Interrupted`` when ``should_stop`` says so during the listing or the hashing
        (nothing has been changed then), and ``TooManyFiles`` past ``max_entries``.
        """
        self._started = time.monotonic()
        self.visible_at = None
        if self.urgency != backlog.BULK:
            self._small_at = self._started
            self._ahead = self.catalog.last_op()
        try:
            return self._sync(coll, kind, paths=paths, force=force, max_entries=max_entries)
        finally:
            self._ahead = None

    def _sync(self, coll: Collection, kind: SourceKind | ContainerKind, *,
              paths: Sequence[str] | None, force: bool,
              max_entries: int | None) -> IndexReport:
        started = time.perf_counter()
        report = IndexReport(coll.name)
        root = Path(coll.root)
        self.on_progress(Progress(coll.name, "scan"))
        if isinstance(kind, ContainerKind):
            report.containers = True
            self._sync_containers(coll, kind, root, report, paths=paths, force=force,
                                  max_entries=max_entries)
            return self._finish(coll, report, started)
        t0 = time.perf_counter()
        walked = kind.walk(root, should_stop=self.should_stop, max_entries=max_entries)
        disk = walked.files
        # Paths the walk could not look into (a loop, an unreadable folder) are recorded as
        # skips; what the catalog knows below them is unknown now, not deleted.
        blind = _blind(walked.skipped)
        blind_dirs = tuple(rel + "/" for rel in blind)
        known = [r for r in self.catalog.source_records(coll.id)
                 if r.path not in blind and not r.path.startswith(blind_dirs)]
        if paths is not None:
            wanted = set(paths)
            prefixes = tuple(p.rstrip("/") + "/" for p in paths)
            disk = [f for f in disk if f.path in wanted or f.path.startswith(prefixes)]
            known = [r for r in known if r.path in wanted or r.path.startswith(prefixes)]
        forced = {f.path for f in disk} if force else set()
        plan = reconcile(disk, known, lambda rel: self._hash(root, rel), force=forced,
                         retry=self.retries.policy().due)
        report.add_stage("scan", time.perf_counter() - t0)
        self.spans.add("scan", self._started)
        report.total_found = len(disk) + len(walked.skipped)
        report.unchanged = plan.unchanged
        self._record_walk_skips(coll, walked.skipped, report, paths)
        self._apply_plan(coll, kind, root, plan, report)
        self.catalog.mark_indexed(coll.id)
        return self._finish(coll, report, started)

    def _finish(self, coll: Collection, report: IndexReport, started: float) -> IndexReport:
        # The summary shows every file that is skipped or warned about now, not only those
        # looked at in this pass, so a second run still tells the whole story.
        report.skipped_files = []
        report.warnings = []
        report.skipped = {}
        for row in self.catalog.skipped_sources(coll.id):
            if row["status"] == "skipped":
                report.skipped_files.append((row["path"], row["skip_code"], row["skip_detail"]))
                report.skipped[row["skip_code"]] = report.skipped.get(row["skip_code"], 0) + 1
            report.warnings.extend((row["path"], w) for w in row["warnings"].split(",") if w)
        if self._ahead is not None:  # a small job: older ops its own went ahead of
            self._ahead = None
            self.catch_up(report)
        if not self.background:  # no embedding thread: the vectors come now, with a bar
            self.embed_backlog(coll, report)
        t0 = time.perf_counter()
        self.save()
        report.add_stage("write_faiss", time.perf_counter() - t0)
        report.seconds = time.perf_counter() - started
        self.on_progress(Progress(coll.name, "done", report.processed, report.planned,
                                  report.embedded))
        return report

    def _hash(self, root: Path, rel: str) -> str | None:
        if self.should_stop():
            raise Interrupted(f"hashing {root} was interrupted")
        return sha256_file(root, rel)

    def _apply_plan(self, coll: Collection, kind: SourceKind, root: Path, plan: Plan,
                    report: IndexReport) -> None:
        if plan.deleted:
            report.chunks_deleted += self.catalog.delete_sources(
                coll.id, [r.path for r in plan.deleted])
            report.deleted = len(plan.deleted)
        for rec, f in plan.touched:
            self.catalog.touch_source(rec.id, f.size, f.mtime_ns)
        report.touched = len(plan.touched)
        for old, new in plan.moved:
            self._move(coll, kind, root, old.path, new, report)
        self.catch_up()
        # Newest first: what people ask about first is searchable first.
        todo = sorted(plan.to_read, key=lambda f: -f.mtime_ns)
        total = report.planned = len(todo)
        group: list[_Parsed] = []
        pending_chunks = 0
        spec = spec_of(kind, root) if self.extract is not None else None
        urgent = self.urgency != backlog.BULK
        ahead = ReadAhead(lambda f: self._load(kind, root, f, spec, urgent), todo,
                          self.should_stop,
                          lambda: self.give_way(), carry=self._carried_files,
                          key=lambda f: (coll.id, f.path, f.size, f.mtime_ns))
        try:
            for n, f in enumerate(todo, 1):
                if self._yield_now():
                    self._flush(coll, group, report)
                    raise Interrupted(f"indexing {coll.name} was interrupted")
                try:
                    with self.spans.span("read_wait"):
                        loaded = ahead.get(n - 1)
                except Interrupted:  # a slow conversion: small work goes first
                    self._flush(coll, group, report)
                    raise
                group, pending_chunks = self._take(coll, kind, root, f, loaded, report, group,
                                                   pending_chunks, n, total)
        finally:
            ahead.close()
        if group:
            self._flush(coll, group, report)
        if self.should_stop():  # the last group was cut short: its sources come next time
            raise Interrupted(f"indexing {coll.name} was interrupted")
        self.on_progress(Progress(coll.name, "index", total, total, report.embedded))

    def _take(self, coll: Collection, kind: SourceKind, root: Path, f: FileState,
              loaded: Loaded, report: IndexReport, group: list[_Parsed], pending_chunks: int,
              n: int, total: int) -> tuple[list[_Parsed], int]:
        """Add one read file to the group; commit the group when it is full."""
        parsed = self._read(coll, kind, root, f, report, loaded)
        report.processed += 1
        if parsed is not None:
            group.append(parsed)
            pending_chunks += len(parsed.update.chunks) if parsed.update else 0
        if pending_chunks >= self._window() or len(group) >= GROUP_SOURCES:
            self._flush(coll, group, report)
            group, pending_chunks = [], 0
            self.on_progress(Progress(coll.name, "index", n, total, report.embedded))
        return group, pending_chunks

    def _move(self, coll: Collection, kind: SourceKind, root: Path, old: str, new: FileState,
              report: IndexReport) -> None:
        spec = spec_of(kind, root) if self.extract is not None else None
        if spec is not None and self.extract is not None:
            loaded = self.extract.load_file(spec, new.path, self.max_file_bytes,
                                            urgent=self.urgency != backlog.BULK, chunk=False)
        else:
            loaded = load_file(kind, root, new.path, self.max_file_bytes, None)
        doc = loaded.doc
        if isinstance(doc, Exception):
            doc = self._unexpected(new.path, doc, report)
        if isinstance(doc, Skip):
            self.catalog.delete_sources(coll.id, [old])
            self.catalog.record_skip(coll.id, new.path, code=doc.code, detail=doc.detail)
            return
        self.catalog.move_source(coll.id, old, new.path, doc.title,
                                 self._metadata(kind, root, new.path, doc), new.mtime_ns)
        report.moved += 1

    def _metadata(self, kind: SourceKind, root: Path, rel: str, doc: Document) -> dict[str, object]:
        meta = dict(doc.metadata)
        meta["source_uri"] = kind.uri(root, rel)
        return meta

    def _load(self, kind: SourceKind, root: Path, f: FileState, spec: dict[str, Any] | None,
              urgent: bool) -> Loaded:
        """Read, parse (convert) and chunk one file, on the read-ahead thread: in an
        extraction worker under its deadline (decision 0041), or here for a kind a worker
        cannot rebuild (a test's)."""
        if spec is not None and self.extract is not None:
            return self.extract.load_file(spec, f.path, self.max_file_bytes, urgent=urgent)
        return load_file(kind, root, f.path, self.max_file_bytes, self.chunker)

    def _read(self, coll: Collection, kind: SourceKind, root: Path, f: FileState,
              report: IndexReport, loaded: Loaded) -> _Parsed | None:
        sha, doc = loaded.sha256, loaded.doc
        if isinstance(doc, Exception):
            doc = self._unexpected(f.path, doc, report)
        report.add_stage("read", loaded.seconds)
        if isinstance(doc, Skip):
            self.catalog.record_skip(coll.id, f.path, code=doc.code, detail=doc.detail,
                                     size=f.size, mtime_ns=f.mtime_ns, sha256=sha)
            report.skipped[doc.code] = report.skipped.get(doc.code, 0) + 1
            report.skipped_files.append((f.path, doc.code, doc.detail))
            return None
        meta = self._metadata(kind, root, f.path, doc)
        return self._build(coll, f.path, doc, meta, sha, f.size, f.mtime_ns, report,
                           chunked=loaded.chunked)
