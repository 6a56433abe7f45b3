"""From a read source to a committed group: the steps the file and container passes share.

Both passes (``pipeline`` over a folder of files, ``container_sync`` over mailboxes, feeds
and the like) load a document off the writer; then, here, it is chunked into its catalog
update (``_build``) or recorded as skipped (its parser failed, the walk could not read it),
and a group of updates is committed in one catalog transaction, then caught up to the
indexes (``_flush``): keyword-searchable at once, while the chunks with no cached vector go
to the embedding backlog (decision 0022).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragd.daemon.extract.work import Chunker
from ragd.daemon.indexer.embed_backlog import EmbeddingBacklog
from ragd.daemon.indexer.report import IndexReport
from ragd.daemon.models import ChunkDraft, Document, Skip
from ragd.daemon.stores import backlog
from ragd.daemon.stores.catalog import (
    Collection,
    ContainerRecord,
    SourceUpdate,
    date_int,
    text_hash,
)

log = logging.getLogger(__name__)


@dataclass
class _Parsed:
    sha256: str
    doc: Document
    update: SourceUpdate | None = None


def _blind(skipped: Sequence[tuple[str, Skip]]) -> set[str]:
    """Paths the walk could not look into (an unreadable folder, a loop): what the catalog
    knows below them is unknown now, not deleted. A path that became a link out of the root
    is not blind: what was read there before must not stay searchable (decision 0025)."""
    return {rel for rel, skip in skipped if skip.code not in _GONE_CODES}


_GONE_CODES = frozenset({"outside_root"})


class Documents(EmbeddingBacklog):
    """What ``Indexer``'s passes (``pipeline``) do with what they read: a part of it, using
    its attributes."""

    urgency: int
    visible_at: float | None
    on_backlog: Callable[[], None]

    def _record_walk_skips(self, coll: Collection, skipped: Sequence[tuple[str, Skip]],
                           report: IndexReport, paths: Sequence[str] | None) -> None:
        for rel, skip in skipped:
            if paths is not None and rel not in paths:
                continue
            self.catalog.record_skip(coll.id, rel, code=skip.code, detail=skip.detail)
            report.skipped[skip.code] = report.skipped.get(skip.code, 0) + 1
            report.skipped_files.append((rel, skip.code, skip.detail))

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
