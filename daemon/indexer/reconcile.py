"""The one authority on what changed: compare the disk with the catalog and make a plan.

Start-up catch-up, periodic sweeps, watch hints and "Reindex now" all come through here, so an
editor's temp-file save, a missed event and a file changed while the daemon was off are the same
case. Pure: the caller passes the listings and a hash function.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ragd.daemon.models import FileState, SourceRecord

# Skips that may succeed on a plain retry, even when the file's stat did not change: cheap to
# try again (a stat and an open), so every sweep does.
TRANSIENT_SKIPS = frozenset({"unreadable", "vanished"})

# Skips that depend on a tool of the machine, not on the file: tried again once the tool is
# found (decision 0026). The command each one needs.
TOOL_SKIPS: Mapping[str, str] = {"ebook_convert_missing": "ebook-convert",
                                 "ocr_unavailable": "tesseract"}

# Skips that depend on the moment (a busy machine, the converter's limits), and cost up to the
# conversion time limit per try: tried again after RETRY_AFTER_S, or once in a new run of the
# daemon (a restart may come with a raised limit or a freer machine), never at every sweep.
COSTLY_SKIPS = frozenset({"convert_timeout", "convert_crashed", "convert_memory"})
RETRY_AFTER_S = 6 * 3600.0


@dataclass(frozen=True)
class RetryPolicy:
    """When a skip of the moment is tried again though its file did not change.

    ``tools_since`` maps a command of TOOL_SKIPS to when this process first found it (absent:
    not found now), so a skip recorded before the tool arrived is tried once, and one recorded
    after (OCR turned off, say) is not tried at every sweep.
    """

    now: float
    started: float  # when this run of the daemon (or CLI) began
    tools_since: Mapping[str, float] = field(default_factory=dict)
    retry_after_s: float = RETRY_AFTER_S

    def due(self, rec: SourceRecord) -> bool:
        """Whether the skipped ``rec`` should be read again now."""
        if rec.status == "ok" or rec.skip_code is None:
            return False
        if rec.skip_code in TRANSIENT_SKIPS:
            return True
        tool = TOOL_SKIPS.get(rec.skip_code)
        if tool is not None:
            since = self.tools_since.get(tool)
            return since is not None and rec.indexed_at <= since
        if rec.skip_code in COSTLY_SKIPS:
            return (rec.indexed_at < self.started
                    or self.now - rec.indexed_at >= self.retry_after_s)
        return False


class RetryClock:
    """This process's side of RetryPolicy: when it started, and since when it finds each tool
    (looked up at every policy: a tool installed while the daemon runs counts from then)."""

    def __init__(self, which: Callable[[str], str | None] = shutil.which,
                 clock: Callable[[], float] = time.time) -> None:
        self._which, self._clock = which, clock
        self.started = clock()
        self._since: dict[str, float] = {}

    def policy(self) -> RetryPolicy:
        now = self._clock()
        for tool in TOOL_SKIPS.values():
            if self._which(tool) is None:
                self._since.pop(tool, None)
            else:
                self._since.setdefault(tool, now)
        return RetryPolicy(now, self.started, dict(self._since))


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
    retry: Callable[[SourceRecord], bool] | None = None,
) -> Plan:
    """Plan new / modified / deleted / moved sources.

    ``disk`` and ``known`` must cover the same scope (a whole collection, or the paths a
    watch hint named). Unchanged size and mtime means unchanged; otherwise the content hash
    decides. A path in ``force`` is re-read whatever its stat says, and so is a skipped one
    ``retry`` says is due (default: the TRANSIENT_SKIPS only).
    """
    due = retry or (lambda r: r.status != "ok" and r.skip_code in TRANSIENT_SKIPS)
    by_path = {r.path: r for r in known}
    on_disk = {f.path for f in disk}
    plan = Plan()
    fresh: list[FileState] = []
    unchanged = 0
    for f in disk:
        rec = by_path.get(f.path)
        if rec is None:
            fresh.append(f)
        elif f.path in force or (rec.status != "ok" and due(rec)):
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
