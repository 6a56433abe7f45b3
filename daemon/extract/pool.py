"""The daemon's side of extraction: workers started, fed, timed and killed.

``ExtractPool`` keeps up to ``workers`` processes (two where two cores allow). Bulk work may
hold all but one of them, so a saved note always finds a worker free of a slow book
(``lease(urgent=True)``); when urgent work holds them all, an urgent lease starts one more
after ``OVERFLOW_AFTER_S``. Bulk work's workers run at low CPU and I/O priority; urgent
work's at the user's own (a lowered process cannot raise itself again, and a saved note read
at nice 10 beside a busy compiler took seconds), so the two lanes keep workers of their own. Each item has a deadline for the worker's own work
(``timeout_s``); a conversion inside it runs on the conversion's own limit, announced by the
worker's ``phase`` frames. Past the deadline the worker is killed (with its process group)
and the item is skipped as ``extract_timeout``; a worker that dies takes only its item with it
(``extract_crashed``), one out of memory says so (``extract_memory``). The next item gets a
fresh worker.

Workers are children of the daemon like the conversion worker (``ragd.daemon.convert.process``):
started from the spawner thread, in their own process group, dying with the daemon, killed by
``stop_children``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragd.daemon.convert.process import (
    ConversionCancelled,
    _Child,
    register_cancellable,
    start_child,
)
from ragd.daemon.extract import wire
from ragd.daemon.extract.work import Loaded
from ragd.daemon.models import ChunkDraft, Skip

log = logging.getLogger(__name__)

# How long a conversion announced by a worker may run past its own limit before the worker is
# taken for hung (the conversion worker kills itself at its limit).
CONVERT_GRACE_S = 15.0
# The share of an item's deadline its chunking may take: past it a long text is indexed in
# part (``text_truncated``) rather than skipped (``ragd.daemon.extract.work.Chunker``).
CHUNK_SHARE = 0.5
IDLE_S = 300.0  # a worker idle this long is closed (a save after that pays ~0.3 s to start one)
# Urgent work can fill every worker too: a watched folder's two big notes (one read, one read
# ahead) while a note is saved elsewhere. An urgent lease that has waited this long starts one
# worker more than ``workers``, closed again when it is given back.
OVERFLOW_AFTER_S = 0.1


class Abandoned(Exception):
    """A lease given up while it waited: the stream that asked was closed."""


class ItemFailed(Exception):
    """The worker went past its deadline or died: ``skip`` says which."""

    def __init__(self, skip: Skip) -> None:
        super().__init__(skip.detail)
        self.skip = skip


@dataclass(frozen=True)
class PoolSettings:
    tokenizer: Path
    max_tokens: int
    timeout_s: float = 30.0
    memory_mb: int = 1024
    workers: int = 2


class WorkerProc:
    """One worker process: frames out on its stdin, frames in from a reader thread.
    ``lowered``: at low CPU and I/O priority, for bulk work (decision 0044)."""

    def __init__(self, settings: PoolSettings, *, lowered: bool = True) -> None:
        self.settings = settings
        self.lowered = lowered
        cmd = [sys.executable, "-m", "ragd.daemon.extract.worker",
               "--memory-mb", str(settings.memory_mb), "--parent-pid", str(os.getpid()),
               "--tokenizer", str(settings.tokenizer), "--max-tokens", str(settings.max_tokens),
               "--chunk-budget-s", str(settings.timeout_s * CHUNK_SHARE),
               "--priority", "low" if lowered else "normal"]
        self.child: _Child = start_child(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         memory_mb=settings.memory_mb)
        self.frames: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.killed = False  # by us: past a deadline, cancelled
        self.used_at = time.monotonic()
        self._reader = threading.Thread(target=self._read, name="ragd-extract-io", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.child.pid

    def alive(self) -> bool:
        return not self.killed and self.child.proc.poll() is None

    def _read(self) -> None:
        stdout = self.child.proc.stdout
        assert stdout is not None
        try:
            while (frame := wire.read_frame(stdout)) is not None:
                self.frames.put(frame)
        except (wire.FrameError, OSError, ValueError) as exc:
            self.frames.put(exc)
        self.frames.put(None)

    def send(self, frame: dict[str, Any]) -> None:
        stdin = self.child.proc.stdin
        assert stdin is not None
        try:
            wire.write_frame(stdin, frame)
        except (OSError, ValueError):
            raise ItemFailed(self.death()) from None

    def recv(self, clock: Clock) -> dict[str, Any]:
        """The next frame but ``phase`` ones, within ``clock``'s deadline. Raises
        ``ItemFailed`` (the worker is killed) past it, or when the worker died."""
        while True:
            try:
                frame = self.frames.get(timeout=clock.wait_s())
            except queue.Empty:
                if clock.expired():
                    self.kill()
                    raise ItemFailed(clock.skip()) from None
                continue
            if isinstance(frame, Exception):
                self.kill()
                raise ItemFailed(Skip("extract_crashed", f"the worker broke the protocol: "
                                      f"{frame}"))
            if frame is None:
                raise ItemFailed(self.death())
            if frame.get("t") == "phase":
                clock.phase(str(frame.get("phase")), frame.get("limit"))
                continue
            if frame.get("t") == "memory":
                self.kill()
                raise ItemFailed(Skip("extract_memory", "reading it needed more memory than "
                                      f"the worker's limit ({self.settings.memory_mb} MB)"))
            return frame

    def death(self) -> Skip:
        """Why the worker is gone (it is reaped)."""
        proc = self.child.proc
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = proc.wait()
        self.child.reap()
        if code == 3:
            return Skip("extract_memory", "reading it needed more memory than the worker's "
                        f"limit ({self.settings.memory_mb} MB)")
        what = f"signal {-code}" if code < 0 else f"exit status {code}"
        return Skip("extract_crashed", f"the worker reading it died ({what})")

    def kill(self) -> None:
        self.killed = True
        self.child.kill()
        threading.Thread(target=self.child.reap, daemon=True).start()


class Clock:
    """An item's deadline for the worker's own work; conversions run on their own limit."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.left = timeout_s
        self.since = time.monotonic()
        self.converting: float | None = None  # the conversion's limit while one runs

    def _now_left(self) -> float:
        if self.converting is not None:
            return self.converting + CONVERT_GRACE_S - (time.monotonic() - self.since)
        return self.left - (time.monotonic() - self.since)

    def wait_s(self) -> float:
        return max(0.01, min(0.5, self._now_left()))

    def expired(self) -> bool:
        return self._now_left() <= 0

    def phase(self, phase: str, limit: Any) -> None:
        now = time.monotonic()
        if phase == "convert" and self.converting is None:
            self.left -= now - self.since
            self.converting = float(limit) if isinstance(limit, int | float) else 120.0
        elif phase == "work":
            self.converting = None
        self.since = now

    def skip(self) -> Skip:
        if self.converting is not None:
            return Skip("convert_timeout", f"a conversion ran past its limit "
                        f"({self.converting:g} s) and the worker was stopped")
        return Skip("extract_timeout", f"reading it took longer than {self.timeout_s:g} s "
                    "(extract.timeout_s) and was stopped")


class ExtractPool:
    """Extraction workers for the indexer, in two lanes (bulk, urgent). Thread-safe."""

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self.workers = max(1, settings.workers)
        self._idle: list[WorkerProc] = []
        self._leased: set[WorkerProc] = set()
        self._bulk = 0
        self._cond = threading.Condition()
        self._cancelled = False
        self._turns: dict[str, threading.Lock] = {}
        self.starts = 0  # processes started (tests, status)
        register_cancellable(self)
        self._reaper = threading.Thread(target=self._close_idle, name="ragd-extract-idle",
                                        daemon=True)
        self._reaper.start()

    @property
    def bulk_limit(self) -> int:
        """Workers bulk work may hold at once: all but one, so small work never waits."""
        return max(1, self.workers - 1)

    @contextlib.contextmanager
    def lease(self, *, urgent: bool, abandon: Callable[[], bool] = lambda: False
              ) -> Iterator[WorkerProc]:
        """A worker for one item or one stream. Raises ``ConversionCancelled`` once the daemon
        stops, ``Abandoned`` when ``abandon()`` turns true while it waits for one."""
        proc = self._take(urgent, abandon)
        try:
            yield proc
        finally:
            self._give_back(proc, urgent)

    def stream_turn(self, root: str) -> threading.Lock:
        """The lock a collection's container stream holds while it runs: a pass that gave way
        to a save leaves its stream finishing (or timing out on) the entry in hand, and the
        next pass's stream waits for it instead of starting a second worker on the same
        container beside it (which, pass after pass, took every worker from the save)."""
        with self._cond:
            return self._turns.setdefault(root, threading.Lock())

    def _take(self, urgent: bool, abandon: Callable[[], bool]) -> WorkerProc:
        since = time.monotonic()
        with self._cond:
            while True:
                if self._cancelled:
                    raise ConversionCancelled()
                if abandon():
                    raise Abandoned()
                busy = len(self._leased)
                if busy < self.workers and (urgent or self._bulk < self.bulk_limit):
                    break
                if urgent and busy <= self.workers and \
                        time.monotonic() - since >= OVERFLOW_AFTER_S:
                    break  # one more than workers: a save never waits for another's item
                self._cond.wait(OVERFLOW_AFTER_S / 2 if urgent else 0.5)
            proc = None
            lowered = not urgent
            for candidate in reversed(self._idle):
                if candidate.lowered == lowered:
                    self._idle.remove(candidate)
                    if candidate.alive():
                        proc = candidate
                        break
                    candidate.kill()
            if proc is None:
                proc = WorkerProc(self.settings, lowered=lowered)
                self.starts += 1
            self._leased.add(proc)
            if not urgent:
                self._bulk += 1
            return proc

    def _give_back(self, proc: WorkerProc, urgent: bool) -> None:
        with self._cond:
            self._leased.discard(proc)
            if not urgent:
                self._bulk -= 1
            proc.used_at = time.monotonic()
            # Kept for the next item: as many lowered workers as bulk work may hold, as many
            # normal ones as there are workers (a save beside a delivered mail's long read
            # finds one started, not a process to start, which under load took seconds).
            alike = [p for p in (*self._idle, *self._leased) if p.lowered == proc.lowered]
            room = self.bulk_limit if proc.lowered else self.workers
            if proc.alive() and not self._cancelled and len(alike) < room:
                self._idle.append(proc)
            else:
                proc.kill()
            self._cond.notify_all()

    def _close_idle(self) -> None:
        while not self._cancelled:
            time.sleep(5.0)
            with self._cond:
                now = time.monotonic()
                old = [p for p in self._idle if now - p.used_at >= IDLE_S]
                self._idle = [p for p in self._idle if p not in old]
            for proc in old:
                proc.kill()

    def retire_idle(self) -> None:
        """Close the idle workers: the next item starts a fresh one, which sees the tools
        installed since (Calibre's ebook-convert, Tesseract). A full "Reindex now" does this."""
        with self._cond:
            old, self._idle = self._idle, []
        for proc in old:
            proc.kill()

    def pids(self) -> list[int]:
        """The workers' pids (tests, status)."""
        with self._cond:
            return [p.pid for p in (*self._idle, *self._leased) if p.alive()]

    def busy_pids(self) -> list[int]:
        with self._cond:
            return [p.pid for p in self._leased if p.alive()]

    def cancel(self) -> None:
        """The daemon is stopping: every worker killed, every lease refused. Never waits."""
        self._cancelled = True
        for proc in list(self._idle) + list(self._leased):
            proc.kill()
        with contextlib.suppress(RuntimeError):
            if self._cond.acquire(timeout=0.1):
                try:
                    self._cond.notify_all()
                finally:
                    self._cond.release()

    def close(self) -> None:
        self.cancel()

    # -- one item --------------------------------------------------------------------------------
    def load_file(self, spec: dict[str, Any], rel: str, max_bytes: int, *, urgent: bool,
                  chunk: bool = True) -> Loaded:
        """``rel`` read, parsed and chunked in a worker; every failure is a ``Loaded`` with a
        Skip or an exception, never raised (but ``ConversionCancelled``)."""
        t0 = time.perf_counter()
        with self.lease(urgent=urgent) as proc:
            try:
                proc.send({"op": "file", "kind": spec, "rel": rel, "max_bytes": max_bytes,
                           "chunk": chunk})
                return receive(proc, Clock(self.settings.timeout_s), "", t0)
            except ItemFailed as failed:
                if self._cancelled:
                    raise ConversionCancelled() from None
                return Loaded("", failed.skip, time.perf_counter() - t0)


class WorkerError(Exception):
    """An unexpected exception in the worker, reported as that item's parse error."""


def receive(proc: WorkerProc, clock: Clock, content_hash: str, t0: float) -> Loaded:
    """One item's answer: a document and its chunks, a skip, or an error."""
    frame = proc.recv(clock)
    kind = frame.get("t")
    if kind == "skip":
        return Loaded(str(frame.get("sha256") or content_hash), wire.skip_from(frame),
                      time.perf_counter() - t0)
    if kind == "error":
        return Loaded(content_hash, WorkerError(str(frame.get("error"))[:600]),
                      time.perf_counter() - t0)
    if kind != "doc":
        proc.kill()
        raise ItemFailed(Skip("extract_crashed", f"the worker answered {kind!r}"))
    try:
        doc = wire.document_from(frame.get("doc"))
        total = frame.get("chunks")
        if not isinstance(total, int) or total < 0:
            raise wire.FrameError("no chunk count")
        chunks: list[ChunkDraft] = []
        while len(chunks) < total:
            more = proc.recv(clock)
            if more.get("t") != "chunks":
                raise wire.FrameError(f"expected chunks, got {more.get('t')!r}")
            chunks += wire.chunks_from(more.get("chunks"))
    except wire.FrameError as exc:
        proc.kill()
        raise ItemFailed(Skip("extract_crashed", f"the worker broke the protocol: {exc}")) \
            from None
    sha = str(frame.get("sha256") or content_hash)
    return Loaded(sha, doc, time.perf_counter() - t0, chunks)


def tokenizer_of(embedder: object) -> Path | None:
    """The tokenizer.json a worker counts tokens with: the embedder's own (the shipped graph's
    or the model folder's), or None for an embedder without one (a test's fake: read here)."""
    directory = getattr(embedder, "directory", None) or getattr(embedder, "model_path", None)
    if directory is None:
        return None
    path = Path(directory) / "tokenizer.json"
    return path if path.is_file() else None


def open_pool(embedder: Any, *, timeout_s: float, memory_mb: int, workers: int
              ) -> ExtractPool | None:
    """The daemon's extraction pool for ``embedder``'s model (None: read in this process)."""
    tokenizer = tokenizer_of(embedder)
    if tokenizer is None:
        return None
    count = workers or min(2, os.cpu_count() or 1)
    return ExtractPool(PoolSettings(tokenizer, int(embedder.max_tokens), timeout_s, memory_mb,
                                    count))
