"""A collection of containers synced: the documents that each changed container holds now.

A container is a file that holds documents (an mbox, a feed, a library). Step one
(``containers.plan_containers``) says which containers are new, grown, rewritten or gone;
step two, here, reads the ones to read, newest first: their entries are listed and the new or
changed ones loaded ahead, off the writer (``readahead.EntryStream``, or an extraction
worker's ``RemoteEntryStream``, decision 0041), then each is sorted out (unchanged, a second
copy, moved, or read and chunked) and committed in groups (decision 0015). Cut short by small
work, a pass records how far it read into an appendable container, and a stream it took
nothing from is kept for the next pass over the same list (decision 0025).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragd.daemon.errors import Interrupted
from ragd.daemon.extract.kinds import spec_of
from ragd.daemon.extract.pool import ExtractPool
from ragd.daemon.extract.readahead import CarryKey, EntryStream, Loader
from ragd.daemon.extract.stream import RemoteEntryStream
from ragd.daemon.extract.work import Loaded, load_entry
from ragd.daemon.indexer.containers import plan_containers
from ragd.daemon.indexer.documents import Documents, _blind, _Parsed
from ragd.daemon.indexer.pacing import GROUP_SOURCES
from ragd.daemon.indexer.report import IndexReport, Progress
from ragd.daemon.models import FileState, Skip
from ragd.daemon.sources.base import ContainerKind
from ragd.daemon.sources.entry import Entry
from ragd.daemon.sources.files import prefix_fingerprint
from ragd.daemon.stores import backlog
from ragd.daemon.stores.catalog import Collection, ContainerRecord, KeyedRecord


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



class ContainerSync(Documents):
    """The containers' pass of ``Indexer`` (``pipeline``): a part of it, using its
    attributes."""

    extract: ExtractPool | None
    _loader: Loader
    _carried: dict[CarryKey, Future[Any]]
    _parked: dict[int, tuple[tuple[Any, ...], RemoteEntryStream]]

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


def _parking_key(todo: Sequence[tuple[FileState, int]], force: bool) -> tuple[Any, ...]:
    """What a pass over containers reads: each container's state and where it starts."""
    return (force, *((f.path, f.size, f.mtime_ns, start) for f, start in todo))
