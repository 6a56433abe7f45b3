"""The one authority on what changed: compare the disk with the catalog and make a plan.

Start-up catch-up, periodic sweeps, watch hints and "Reindex now" all come through here, so an
editor's temp-file save, a missed event and a file changed while the daemon was off are the same
case. Pure: the caller passes the listings and a hash function.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from daemon.models import FileState, SourceRecord

# Skips that may succeed on a plain retry, even when the file's stat did not change.
TRANSIENT_SKIPS = frozenset({"unreadable", "vanished"})


@dataclass(frozen=True)
class Plan:
    new: list[FileState] = field(default_factory=list)
    modified: list[FileState] = field(default_factory=list)
    deleted: list[SourceRecord] = field(default_factory=list)
    moved: list[tuple[SourceRecord, FileState]] = field(default_factory=list)
    touched: list[tuple[SourceRecord, FileState]] = field(default_factory=list)
    unchanged: int = 0

    @property
    def to_read(self) -> list[FileState]:
        """Files whose content must be read, chunked and (where not cached) embedded."""
        return self.new + self.modified

    @property
    def empty(self) -> bool:
        return not (self.new or self.modified or self.deleted or self.moved or self.touched)


def reconcile(
    disk: Sequence[FileState],
    known: Sequence[SourceRecord],
    hash_file: Callable[[str], str | None],
    *,
    force: Collection[str] = (),
) -> Plan:
    """Plan new / modified / deleted / moved sources.

    ``disk`` and ``known`` must cover the same scope (a whole collection, or the paths a
    watch hint named). Unchanged size and mtime means unchanged; otherwise the content hash
    decides. A path in ``force`` is re-read whatever its stat says.
    """
    by_path = {r.path: r for r in known}
    on_disk = {f.path for f in disk}
    plan = Plan()
    fresh: list[FileState] = []
    unchanged = 0
    for f in disk:
        rec = by_path.get(f.path)
        if rec is None:
            fresh.append(f)
        elif f.path in force or (rec.status != "ok" and rec.skip_code in TRANSIENT_SKIPS):
            plan.modified.append(f)
        elif rec.size == f.size and rec.mtime_ns == f.mtime_ns:
            unchanged += 1
        elif rec.status == "ok" and hash_file(f.path) == rec.sha256:
            plan.touched.append((rec, f))
        else:
            plan.modified.append(f)
    gone = [r for r in known if r.path not in on_disk]
    # A source that vanished and one that appeared with the same bytes is a move or rename:
    # it keeps its chunks and vectors. Only hash new files whose size could match.
    candidates: dict[str, list[SourceRecord]] = {}
    sizes = set()
    for r in gone:
        if r.status == "ok" and r.sha256:
            candidates.setdefault(r.sha256, []).append(r)
            sizes.add(r.size)
    for f in fresh:
        digest = hash_file(f.path) if f.size in sizes else None
        if digest is not None and candidates.get(digest):
            plan.moved.append((candidates[digest].pop(0), f))
        else:
            plan.new.append(f)
    moved_from = {old.path for old, _ in plan.moved}
    plan.deleted.extend(r for r in gone if r.path not in moved_from)
    return Plan(plan.new, plan.modified, plan.deleted, plan.moved, plan.touched, unchanged)
