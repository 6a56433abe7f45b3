"""Apply a reconcile plan: read, chunk, embed (cache first), commit, project to the indexes.

Work is done in groups: each group is one catalog transaction followed by one write to each
index, so an interrupted run resumes where it stopped and searches see progress as it happens.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragd.daemon.embed.embedding import Embedder
from ragd.daemon.errors import Interrupted
from ragd.daemon.extract.kinds import spec_of
from ragd.daemon.extract.pool import ExtractPool
from ragd.daemon.extract.stream import RemoteEntryStream
from ragd.daemon.extract.work import Chunker, Loaded, load_entry, load_file
from ragd.daemon.indexer.containers import plan_containers
from ragd.daemon.indexer.readahead import CarryKey, EntryStream, Loader, ReadAhead
from ragd.daemon.indexer.reconcile import Plan, RetryClock, reconcile
from ragd.daemon.indexer.timings import Spans
from ragd.daemon.models import ChunkDraft, Document, FileState, Skip
from ragd.daemon.sources.base import ContainerKind, Entry, SourceKind, sha256_file
from ragd.daemon.sources.files import prefix_fingerprint
from ragd.daemon.stores import IndexStore, backlog
from ragd.daemon.stores.backlog import Counts
from ragd.daemon.stores.catalog import (
    Catalog,
    Collection,
    ContainerRecord,
    KeyedRecord,
    SourceUpdate,
    date_int,
    text_hash,
)
from ragd.daemon.stores.fulltext import CommitYielded

log = logging.getLogger(__name__)

# Chunks read ahead and committed together (one catalog transaction, one write to each index).
# With an embedding thread (the daemon) a group is smaller: a bulk job yields to a saved note
# only once its current group is written, so the group bounds that wait (decision 0022).
WINDOW_CHUNKS = 512
WINDOW_CHUNKS_BACKGROUND = 128
# How long after the last small work a bulk job keeps committing small groups: saves come in
# bursts while someone writes.
SMALL_WINDOW_S = 60.0
# Journal ops per keyword commit when a projection replays a backlog of them: between two,
# small work that waits goes first. While notes are saved, fewer: what the keyword store can
# commit in its time budget (WhooshStore.busy_docs, issue 21).
REPLAY_SLICE = 512
GROUP_SOURCES = 200
EMBED_SLICE = 64  # ~4 s of embedding on two cores
SMALL_TURN_S = 1.0  # a job's turn before it lets other small work go first


@dataclass
class Progress:
    """A snapshot for progress bars and `indexing.remaining`."""

    collection: str
    phase: str  # scan | index | done
    done: int = 0
    total: int = 0
    chunks_embedded: int = 0


@dataclass
class IndexReport:
    """The summary of one sync pass over a collection."""

    collection: str
    total_found: int = 0  # files found (mail: the files that hold messages)
    indexed: int = 0
    containers: bool = False  # a collection of containers (mail): documents are messages
    unchanged: int = 0
    touched: int = 0
    moved: int = 0
    deleted: int = 0
    chunks_written: int = 0
    body_notes: int = 0  # sources read this pass that gave body chunks
    metadata_only_notes: int = 0  # ... that gave only properties chunks (no body text)
    chunks_deleted: int = 0
    embedded: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    skipped_files: list[tuple[str, str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    planned: int = 0  # sources this pass reads (new + modified)
    processed: int = 0  # of those, read so far (indexed, skipped or failed)
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)

    def add_stage(self, stage: str, seconds: float) -> None:
        self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + seconds

    def as_dict(self) -> dict[str, object]:
        return {
            "collection": self.collection, "total_found": self.total_found,
            "indexed": self.indexed, "unchanged": self.unchanged, "moved": self.moved,
            "deleted": self.deleted, "chunks_written": self.chunks_written,
            "chunks_deleted": self.chunks_deleted, "embedded": self.embedded,
            "body_notes": self.body_notes, "metadata_only_notes": self.metadata_only_notes,
            "skipped": dict(self.skipped),
            "skipped_files": [{"path": p, "code": c, "detail": d}
                              for p, c, d in self.skipped_files],
            "warnings": [{"path": p, "code": c} for p, c in self.warnings],
            "errors": [{"path": p, "error": e} for p, e in self.errors],
            "seconds": round(self.seconds, 3),
            "stage_seconds": {k: round(v, 3) for k, v in self.stage_seconds.items()},
        }


@dataclass
class _Parsed:
    sha256: str
    doc: Document
    update: SourceUpdate | None = None


@dataclass
class _Pass:
    """A group of documents read from containers, not committed yet."""

    group: list[_Parsed] = field(default_factory=list)
    done: list[ContainerRecord] = field(default_factory=list)  # recorded with the group
    copies: list[tuple[str, str, str]] = field(default_factory=list)  # second sightings
    chunks: int = 0

    def add(self, parsed: _Parsed) -> None:
        self.group.append(parsed)
        self.chunks += len(parsed.update.chunks) if parsed.update else 0

    def full(self, window: int) -> bool:
        return self.chunks >= window or len(self.group) >= GROUP_SOURCES


def _blind(skipped: Sequence[tuple[str, Skip]]) -> set[str]:
    """Paths the walk could not look into (an unreadable folder, a loop): what the catalog
    knows below them is unknown now, not deleted. A path that became a link out of the root
    is not blind: what was read there before must not stay searchable (decision 0025)."""
    return {rel for rel, skip in skipped if skip.code not in _GONE_CODES}


_GONE_CODES = frozenset({"outside_root"})


class Indexer:
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

    def _sync_containers(self, coll: Collection, kind: ContainerKind, root: Path,
                         report: IndexReport, *, paths: Sequence[str] | None, force: bool,
                         max_entries: int | None) -> None:
        """Reconcile a collection of containers in two steps (decision 0015): which containers
        changed, then which documents the changed ones hold now. A document whose key is known
        with the same content is not embedded again, wherever it is found."""
        t0 = time.perf_counter()
        scope = getattr(kind, "hint_scope", None)  # a kind may widen a hint (Calibre: all)
        if paths is not None and scope is not None:
            paths = scope(paths)
        walked = kind.walk(root, should_stop=self.should_stop, max_entries=max_entries)
        blind = _blind(walked.skipped)
        blind_dirs = tuple(rel + "/" for rel in blind)
        disk = walked.files
        known = [c for c in self.catalog.container_records(coll.id)
                 if c.path not in blind and not c.path.startswith(blind_dirs)]
        if paths is not None:
            wanted = set(paths)
            prefixes = tuple(p.rstrip("/") + "/" for p in paths if p) or ("",)
            disk = [f for f in disk if f.path in wanted or f.path.startswith(prefixes)]
            known = [c for c in known if c.path in wanted or c.path.startswith(prefixes)]

        def fingerprint(rel: str, upto: int) -> str | None:
            if self.should_stop():
                raise Interrupted(f"checking {root} was interrupted")
            return prefix_fingerprint(root, rel, upto)

        plan = plan_containers(disk, known, fingerprint, kind.appendable, force=force)
        report.add_stage("scan", time.perf_counter() - t0)
        report.total_found = len(disk) + len(walked.skipped)
        report.unchanged = plan.unchanged
        self._record_walk_skips(coll, walked.skipped, report, paths)
        self.catch_up()
        # The keys of the containers read again from the start or gone, whose losses are
        # counted at the end; any other key is looked up when it is met (_entry). Loading every
        # key of a 600,000-message mbox at each resume cost seconds on the writer.
        reread = plan.reread
        keyed = self.catalog.keyed_sources(coll.id, sorted(reread))
        self.catalog.forget_copies(coll.id, [f.path for _, f in plan.rewritten])
        todo = sorted(plan.to_read, key=lambda t: -t[0].mtime_ns)  # newest first
        report.planned = len(todo)
        seen: set[str] = set()
        last = self._read_containers(coll, kind, root, todo, keyed, seen, reread, report,
                                     force)
        if self.should_stop():
            raise Interrupted(f"indexing {coll.name} was interrupted")
        lost = [k for k, r in keyed.items() if r.container in reread and k not in seen]
        keep = getattr(kind, "keeps_lost", None)  # a saved feed keeps what left it (0029)
        if keep is not None:
            gone = {c.path for c in plan.gone}
            lost = [k for k in lost if keyed[k].container in gone
                    or not keep(keyed[k].container, k)]
        moved, deleted, chunks = self.catalog.finish_containers(
            coll.id, lost, [c.path for c in plan.gone], last,
            lambda key, c, loc: kind.location_metadata(root, key, c, loc))
        report.moved += moved
        report.deleted += deleted
        report.chunks_deleted += chunks
        self.catch_up(report)
        self.on_progress(Progress(coll.name, "index", len(todo), len(todo), report.embedded))
        self.catalog.mark_indexed(coll.id)

    def _read_containers(self, coll: Collection, kind: ContainerKind, root: Path,
                         todo: Sequence[tuple[FileState, int]], keyed: dict[str, KeyedRecord],
                         seen: set[str], reread: set[str], report: IndexReport, force: bool
                         ) -> list[ContainerRecord]:
        """Step two for every container to read, in order: their entries are read and the
        new or changed ones loaded ahead, off this thread (``EntryStream``); here they are
        only sorted out and committed in groups. Returns the records of the containers read
        again from the start, which ``finish_containers`` writes with their losses.

        Interrupted, it commits what it has, and a container it was in the middle of (a
        large mbox, new or grown) is recorded as read up to there: the next pass goes on from
        that offset instead of parsing it all again."""
        def wanted(entry: Entry) -> bool:  # on the reader thread: is it new or changed?
            rec = keyed.get(entry.key) or self.catalog.keyed_source(coll.id, entry.key)
            return force or rec is None or rec.status != "ok" or not entry.content_hash \
                or rec.sha256 != entry.content_hash

        spec = spec_of(kind, root) if self.extract is not None else None
        stream: EntryStream[Loaded] | RemoteEntryStream
        parked = self._parked.pop(coll.id, None)
        key = _parking_key(todo, force)
        if parked is not None and (parked[0] != key or parked[1].urgent
                                   != (self.urgency != backlog.BULK)):
            parked[1].close()  # another pass: what it read is not what this one needs
            parked = None
        if parked is not None:
            stream = parked[1]
            stream.wanted = wanted
        elif spec is not None and self.extract is not None:  # decision 0041
            stream = RemoteEntryStream(
                self.extract, kind, spec, todo, wanted=wanted,
                carry=self._carried, should_stop=self.should_stop,
                give_way=lambda: self.give_way(), urgent=self.urgency != backlog.BULK)
        else:
            stream = EntryStream(
                lambda f, start: kind.entries(root, f.path, start), todo, wanted=wanted,
                load=self._load_entry, loader=self._loader, carry=self._carried,
                should_stop=self.should_stop, give_way=lambda: self.give_way())
        state = _Pass()
        last: list[ContainerRecord] = []  # rewritten: recorded when their losses are
        current: tuple[FileState, int] | None = None  # (container, end of what is handled)
        items = iter(stream)
        taken = keep = False
        try:
            while True:
                with self.spans.span("read_wait"):
                    item = next(items, None)
                if item is None:
                    break
                taken = True
                f = item.file
                if item.entry is None:  # the end of a container
                    record = ContainerRecord(f.path, f.size, f.mtime_ns,
                                             prefix_fingerprint(root, f.path, item.end) or "",
                                             item.end)
                    (last if f.path in reread else state.done).append(record)
                    report.processed += 1
                    current = None
                    continue
                if self._yield_now():
                    raise Interrupted(f"indexing {coll.name} was interrupted")
                entry = item.entry
                parsed = self._entry(coll, kind, root, f, entry, keyed, seen, reread, report,
                                     force, state.copies, functools.partial(stream.result, item))
                current = (f, max(entry.end, current[1] if current else 0))
                if parsed is not None:
                    state.add(parsed)
                if state.full(self._window()):
                    self._flush(coll, state.group, report, state.done, state.copies)
                    state = _Pass()
                    self.on_progress(Progress(coll.name, "index", item.n, len(todo),
                                              report.embedded))
        except Interrupted:
            if not taken and isinstance(stream, RemoteEntryStream):
                # Nothing was taken, so the next pass has the same list to read: it goes on
                # with this stream, whose worker reads on meanwhile (up to the handover's
                # bound). A container that takes longer to list than saves come (a 63 MB
                # feed, a 100 MB commit message) is otherwise started over at every save.
                self._parked[coll.id] = (key, stream)
                keep = True
                raise
            if current is not None and current[0].path not in reread \
                    and kind.appendable(current[0].path):
                f, upto = current
                state.done.append(ContainerRecord(
                    f.path, upto, f.mtime_ns, prefix_fingerprint(root, f.path, upto) or "",
                    upto))
            self._flush(coll, state.group, report, state.done, state.copies)
            raise
        finally:
            if not keep:
                stream.close()
        self._flush(coll, state.group, report, state.done, state.copies)
        return last

    def close_parked(self) -> None:
        """Close the streams that interrupted passes left for their next pass."""
        while self._parked:
            self._parked.popitem()[1][1].close()

    def _load_entry(self, entry: Entry) -> Loaded:
        """Load one document of a container and chunk it, on the loader thread (a kind read
        in the daemon: a test's, or without an extraction pool)."""
        return load_entry(entry, self.chunker)

    def _entry(self, coll: Collection, kind: ContainerKind, root: Path, f: FileState,
               entry: Entry, keyed: dict[str, KeyedRecord], seen: set[str], reread: set[str],
               report: IndexReport, force: bool, copies: list[tuple[str, str, str]],
               load: Callable[[], Loaded] | None = None) -> _Parsed | None:
        """Step two for one document: unchanged, a copy, a move, or read and chunked
        (``load``: the load started ahead; raises ``Interrupted`` while it runs when small
        work arrives)."""
        rec = keyed.get(entry.key)
        if rec is None and entry.key not in seen:
            rec = self.catalog.keyed_source(coll.id, entry.key)
            if rec is not None:
                keyed[entry.key] = rec
        if entry.key in seen:  # the same document twice in one pass (two folders)
            if rec is None:  # new in this pass: recorded with the group that commits it
                copies.append((entry.key, f.path, entry.locator))
            elif (rec.container, rec.locator) != (f.path, entry.locator):
                self.catalog.add_copy(rec.id, f.path, entry.locator)
            return None
        seen.add(entry.key)
        if rec is not None and not force and rec.status == "ok" and entry.content_hash \
                and rec.sha256 == entry.content_hash:
            if (rec.container, rec.locator) == (f.path, entry.locator):
                return None  # unchanged
            if rec.container != f.path and rec.container not in reread and \
                    os.path.lexists(os.path.join(root, *rec.container.split("/"))):
                # Its own container still holds it (or was not looked at in this pass).
                self.catalog.add_copy(rec.id, f.path, entry.locator)
                return None
            self.catalog.relocate_source(rec.id, f.path, entry.locator, entry.location)
            report.moved += 1
            return None
        with self.spans.span("read_wait"):
            loaded = load() if load is not None else self._load_entry(entry)
        doc = loaded.doc
        if isinstance(doc, Exception):
            doc = self._unexpected(entry.key, doc, report)
        report.add_stage("read", loaded.seconds)
        if isinstance(doc, Skip):
            self.catalog.record_skip(coll.id, entry.key, code=doc.code, detail=doc.detail,
                                     size=f.size, mtime_ns=f.mtime_ns, container=f.path,
                                     locator=entry.locator)
            report.skipped[doc.code] = report.skipped.get(doc.code, 0) + 1
            report.skipped_files.append((entry.key, doc.code, doc.detail))
            return None
        return self._build(coll, entry.key, doc, dict(doc.metadata), entry.content_hash,
                           f.size, f.mtime_ns, report, container=f.path,
                           locator=entry.locator,
                           by_date=getattr(kind, "newest_by_date", False),
                           chunked=loaded.chunked)

    def _hash(self, root: Path, rel: str) -> str | None:
        if self.should_stop():
            raise Interrupted(f"hashing {root} was interrupted")
        return sha256_file(root, rel)

    def _record_walk_skips(self, coll: Collection, skipped: Sequence[tuple[str, Skip]],
                           report: IndexReport, paths: Sequence[str] | None) -> None:
        for rel, skip in skipped:
            if paths is not None and rel not in paths:
                continue
            self.catalog.record_skip(coll.id, rel, code=skip.code, detail=skip.detail)
            report.skipped[skip.code] = report.skipped.get(skip.code, 0) + 1
            report.skipped_files.append((rel, skip.code, skip.detail))

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

    def _build(self, coll: Collection, path: str, doc: Document, meta: dict[str, object],
               sha: str, size: int, mtime_ns: int, report: IndexReport, *,
               container: str | None = None, locator: str = "",
               by_date: bool = False,
               chunked: list[ChunkDraft] | Exception | None = None) -> _Parsed | None:
        """Chunk a parsed document into its catalog update (None when chunking failed: the
        source is recorded as skipped). ``chunked``: the document already cut and chunked
        (``_chunk``, on the read-ahead thread)."""
        t0 = time.perf_counter()
        if chunked is None:
            doc, chunked = self.chunker(doc)
        report.warnings.extend((path, w) for w in doc.warnings)
        try:
            if isinstance(chunked, Exception):
                raise chunked
            chunks = chunked
        except Exception as exc:
            skip = self._unexpected(path, exc, report)
            self.catalog.record_skip(coll.id, path, code=skip.code, detail=skip.detail,
                                     size=size, mtime_ns=mtime_ns, sha256=sha,
                                     container=container, locator=locator)
            return None
        report.add_stage("chunk", time.perf_counter() - t0)
        if chunks and chunks[0].ordinal >= 0:
            report.body_notes += 1
        elif chunks:
            report.metadata_only_notes += 1
        date = date_int(doc.date) or _mtime_date(mtime_ns)
        update = SourceUpdate(
            path=path, size=size, mtime_ns=mtime_ns, sha256=sha, title=doc.title,
            source_type=doc.source_type, date=date, metadata=meta,
            tags=tuple(str(t) for t in doc.metadata.get("tags", ())), warnings=doc.warnings,
            chunks=tuple(chunks), container=container, locator=locator,
            recency=_recency(doc.date if by_date else None, mtime_ns))
        return _Parsed(sha, doc, update)

    @property
    def chunker(self) -> Chunker:
        """Chunks for the embedder's model (``ragd.daemon.extract.work``)."""
        return Chunker(self.embedder.count_tokens, self.embedder.max_tokens)

    @staticmethod
    def _unexpected(path: str, exc: Exception, report: IndexReport) -> Skip:
        ref = uuid.uuid4().hex[:8]
        log.error("unexpected error indexing %s [%s]\n%s", path, ref,
                  "".join(traceback.format_exception(exc)))
        report.errors.append((path, f"{type(exc).__name__}: {exc} [{ref}]"))
        return Skip("parse_error", f"{type(exc).__name__}: {exc} (log ref {ref})")

    def _flush(self, coll: Collection, group: Sequence[_Parsed], report: IndexReport,
               containers: Sequence[ContainerRecord] = (),
               copies: Sequence[tuple[str, str, str]] = ()) -> None:
        """Commit a group of read sources: keyword-searchable at once; chunks whose text has
        no cached vector go to the embedding backlog (decision 0022)."""
        fp = self.embedder.fingerprint
        updates = [p.update for p in group if p.update is not None]
        hashes = {text_hash(ch.embed_text) for up in updates for ch in up.chunks}
        start = time.monotonic()
        cached = self.catalog.cached_vectors(fp, sorted(hashes))
        t0 = time.perf_counter()
        written, deleted = self.catalog.commit_sources(
            coll.id, updates, fp, {}, containers, copies,
            unembedded=frozenset(hashes - cached.keys()), urgency=self.urgency)
        report.add_stage("commit", time.perf_counter() - t0)
        self.spans.add("commit", start)
        report.chunks_written += written
        report.chunks_deleted += deleted
        report.indexed += len(updates)
        self.catch_up(report)
        if self.urgency != backlog.BULK and self.visible_at is None and updates:
            self.visible_at = time.monotonic()
        if len(hashes) > len(cached):
            self.refresh_backlog()
            self.on_backlog()

    def _yield_now(self) -> bool:
        """Whether to stop at this boundary: should_stop, or small work waiting beside a
        job that has had its turn. A job over one mbox names one path, so it is small, yet
        may hold 600,000 messages: after ``SMALL_TURN_S`` it lets the saved note go first
        and resumes where it stopped (decision 0025)."""
        if self.should_stop() or (time.monotonic() - self._started >= SMALL_TURN_S
                                  and self.give_way()):
            self._small_at = time.monotonic()
            return True
        return False

    def _quiet(self) -> bool:
        return time.monotonic() - self._small_at >= SMALL_WINDOW_S

    def _window(self) -> int:
        """Chunks per commit. A group is committed before small work runs, so while someone
        saves notes a bulk job commits small groups (a save waits for little); otherwise big
        ones: Whoosh's cost per commit (a segment, merges) made 128-chunk groups cost twice the
        keyword time of 512-chunk groups (bench/ingest.py: 92 vs 106 chunks/s end to end)."""
        if self.background and not self._quiet():
            return WINDOW_CHUNKS_BACKGROUND
        return WINDOW_CHUNKS

    # -- the embedding backlog ----------------------------------------------------------------
    def refresh_backlog(self) -> Counts:
        self.backlog = self.catalog.backlog_counts()
        return self.backlog

    def embed_some(self, limit: int = EMBED_SLICE) -> int:
        """Embed the next ``limit`` backlog chunks (cache first), store their vectors and
        project them to the vector index. Returns how many chunks left the backlog."""
        todo = self.catalog.backlog_take(limit, self._turn)
        if not todo:
            return 0
        self._turn = todo[0].collection_id
        fp = self.embedder.fingerprint
        texts = {text_hash(p.embed_text): p.embed_text for p in todo}
        vectors = self.catalog.cached_vectors(fp, sorted(texts))
        missing = sorted((h for h in texts if h not in vectors), key=lambda h: len(texts[h]))
        if missing:
            with self.spans.span("embed"):
                mat = self.embedder.embed([texts[h] for h in missing])
            fresh = dict(zip(missing, mat, strict=True))
        else:
            fresh = {}
        with self.spans.span("vectors_commit"):
            self.catalog.vectors_arrived(fp, fresh, [p.chunk_id for p in todo])
        self.catch_up(vectors_only=True)
        self.refresh_backlog()
        return len(todo)

    def embed_backlog(self, coll: Collection, report: IndexReport) -> None:
        """Embed the whole backlog now (no embedding thread), with progress events."""
        total = self.refresh_backlog().chunks
        done = 0
        while total and not self.should_stop():
            t0 = time.perf_counter()
            n = self.embed_some()
            if not n:
                break
            report.add_stage("embed", time.perf_counter() - t0)
            done += n
            report.embedded += n
            self.on_progress(Progress(coll.name, "embed", done, total, report.embedded))
        if self.should_stop():
            raise Interrupted(f"embedding {coll.name} was interrupted")

    # -- projections --------------------------------------------------------------------------
    def catch_up(self, report: IndexReport | None = None, *,
                 vectors_only: bool = False) -> None:
        """Apply journal ops to every index past its mark (idempotent: safe to replay). A
        chunk still in the embedding backlog is not in the vector index yet."""
        start = time.monotonic()
        with self.lock:
            self.spans.add("lock_wait", start)
            for store in self.stores:
                if vectors_only and not store.needs_vectors:
                    continue
                t0 = time.perf_counter()
                self._replay(store)
                if report is not None:
                    report.add_stage(f"write_{store.name}", time.perf_counter() - t0)

    def _replay(self, store: IndexStore) -> None:
        """Apply the ops past the store's mark, in slices. A big document's keyword
        projection costs seconds (~0.7 ms a chunk in Whoosh on an idle machine, 5 on a
        loaded one): before each slice, and within one until its commit starts, it gives way
        to small work waiting; while notes are saved a slice is what the store commits in its
        time budget. A small job applies its own ops first and the older ones when it ends
        (``_finish``); what a job leaves is replayed by the next catch_up, which every job
        makes when it commits (decisions 0022, 0025)."""
        mark = store.mark
        if self._ahead is not None and not store.needs_vectors and mark < self._ahead:
            self._apply_ahead(store)  # the older ops wait for the end of the small job
            return
        self._yielding = True
        try:
            while not self.give_way():
                new_mark, ids = self.catalog.ops_after(mark, self._slice(store),
                                                       vector_ops=store.needs_vectors)
                if new_mark == mark:
                    return
                try:
                    self._apply_ids(store, ids, new_mark)
                except CommitYielded:
                    return
                mark = new_mark
        finally:
            self._yielding = False

    def _interrupt(self) -> bool:
        """Whether a keyword apply under way should be given up before its commit."""
        return self._yielding and self.give_way()

    def _slice(self, store: IndexStore) -> int:
        """Ops per apply: REPLAY_SLICE, or while notes are saved what the store can commit
        in its time budget."""
        busy = getattr(store, "busy_docs", None)
        if busy is None or self._quiet():
            return REPLAY_SLICE
        return max(1, min(REPLAY_SLICE, int(busy())))

    def _apply_ahead(self, store: IndexStore) -> None:
        """A small job's own ops, applied to a keyword index that is behind with older
        ones, without moving its mark: every op upserts or deletes a chunk as the catalog has
        it now, so applying it again when the replay reaches it changes nothing."""
        assert self._ahead is not None
        after = self._ahead
        while True:
            new_mark, ids = self.catalog.ops_after(after, REPLAY_SLICE, vector_ops=False)
            if new_mark == after:
                break
            self._apply_ids(store, ids, store.mark)
            after = new_mark
        self._ahead = after

    def _apply_ids(self, store: IndexStore, ids: Sequence[int], mark: int) -> None:
        start = time.monotonic()
        rows = self.catalog.chunks_by_id(ids)
        present = [rows[i] for i in ids if i in rows]
        absent = [i for i in ids if i not in rows]
        vectors: dict[int, np.ndarray] = {}
        if store.needs_vectors:
            vectors = self.catalog.vectors_for(self.embedder.fingerprint, present)
            absent += [r.id for r in present if r.id not in vectors]
            present = [r for r in present if r.id in vectors]
        applying = time.monotonic()
        self.spans.add("ops_read", start, applying)
        store.apply(present, absent, mark, vectors)
        if not hasattr(store, "on_span"):  # a store that does not time its own steps
            self.spans.add(f"{store.name}_apply", applying)

    def save(self) -> None:
        """Persist every index, then forget the ops all of them have on disk."""
        with self.lock:
            for store in self.stores:
                with self.spans.span(f"{store.name}_save"):
                    store.save()
            if self.stores:
                with self.spans.span("prune_ops"):
                    self.catalog.prune_ops(min(s.persisted_mark for s in self.stores))

    def rebuild(self, names: Sequence[str]) -> dict[str, int]:
        """Rebuild the named indexes from the catalog alone: nothing is embedded again."""
        counts: dict[str, int] = {}
        with self.lock:
            last = self.catalog.last_op()
            for store in self.stores:
                if store.name not in names:
                    continue
                store.reset(self.embedder.fingerprint)
                n = 0
                for rows in self.catalog.iter_chunks():
                    vectors: dict[int, np.ndarray] = {}
                    if store.needs_vectors:  # a chunk in the backlog has no vector yet
                        vectors = self.catalog.vectors_for(self.embedder.fingerprint, rows)
                        rows = [r for r in rows if r.id in vectors]
                    store.apply(rows, [], 0, vectors)
                    n += len(rows)
                store.apply([], [], last, {})
                store.save()
                counts[store.name] = n
            self.catch_up()
            self.save()
        return counts


def _recency(iso: str | None, mtime_ns: int) -> int:
    """Seconds since the epoch of a document's own date (mail: when it was sent) or else of
    its file: the backlog embeds larger values first."""
    if iso:
        try:
            return int(dt.datetime.fromisoformat(iso[:10]).replace(tzinfo=dt.UTC).timestamp())
        except ValueError:
            pass
    return mtime_ns // 1_000_000_000


def _mtime_date(mtime_ns: int) -> int | None:
    if not mtime_ns:
        return None
    d = dt.datetime.fromtimestamp(mtime_ns / 1e9, tz=dt.UTC).date()
    return d.year * 10000 + d.month * 100 + d.day


def _parking_key(todo: Sequence[tuple[FileState, int]], force: bool) -> tuple[Any, ...]:
    """What a pass over containers reads: each container's state and where it starts."""
    return (force, *((f.path, f.size, f.mtime_ns, start) for f, start in todo))
