"""Where the writer's time goes, and how long each small job (a saved note) took, by phase.

The writer and the indexes record *spans*: (phase, start, end) on the monotonic clock, a few
per group of sources (a catalog commit, a keyword commit, a searcher reopen, a FAISS save),
kept in a bounded ring. A small job's timing splits its wait in the queue by what the writer
did meanwhile (the bulk job's last group, the keyword commit that followed it) and its run by
phase, so a slow save says what made it slow. `ragd status` lists the last ones under
``small_jobs``; the debug log has each (issue 21, decision 0022).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

SPANS_KEPT = 4096  # minutes of a bulk job's groups; a small job looks back seconds
SMALL_JOBS_KEPT = 32
EMBEDDING_TAG = "embedding/"  # the embedding thread's phases: beside the writer, not in it


class Spans:
    """A ring of (phase, start, end). Thread-safe; a thread may tag its phases (the embedding
    thread's run beside the writer's, competing for the cores, not holding the writer)."""

    def __init__(self, kept: int = SPANS_KEPT) -> None:
        self._spans: deque[tuple[str, float, float]] = deque(maxlen=kept)
        self._lock = threading.Lock()
        self._local = threading.local()

    def tag_thread(self, prefix: str) -> None:
        """Phases recorded from the calling thread are named ``prefix + phase``."""
        self._local.prefix = prefix

    def add(self, phase: str, start: float, end: float | None = None) -> None:
        end = time.monotonic() if end is None else end
        name = getattr(self._local, "prefix", "") + phase
        with self._lock:
            self._spans.append((name, start, end))

    @contextmanager
    def span(self, phase: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.add(phase, start)

    def between(self, t0: float, t1: float) -> dict[str, float]:
        """Seconds of each phase that fell between ``t0`` and ``t1``."""
        with self._lock:
            spans = list(self._spans)
        out: dict[str, float] = {}
        for name, start, end in spans:
            overlap = min(end, t1) - max(start, t0)
            if overlap > 0:
                out[name] = out.get(name, 0.0) + overlap
        return out


def job_timing(*, collection: str | None, paths: Sequence[str], queued: float, started: float,
               visible: float | None, ended: float, spans: Spans,
               finished: bool = True) -> dict[str, Any]:
    """One small job's timing (seconds; ``at`` is wall-clock time): ``wait_s`` in the queue,
    ``visible_s`` from queued until its own chunks were keyword-searchable, ``total_s`` until
    it ended (``finished`` False: it gave way and runs again), and each phase during the wait
    and the run. ``other`` is the writer's time that no span covers (the bulk job's
    bookkeeping, waiting for the GIL, Python)."""
    now_wall, now_mono = time.time(), time.monotonic()
    wait = spans.between(queued, started)
    run = spans.between(started, ended)
    for phases, length in ((wait, started - queued), (run, ended - started)):
        writer = sum(s for name, s in phases.items() if "/" not in name)
        phases["other"] = max(0.0, length - writer)
    return {
        "collection": collection, "paths": sorted(paths)[:3], "path_count": len(paths),
        "at": round(now_wall - (now_mono - queued), 3),
        "wait_s": round(started - queued, 3),
        "visible_s": None if visible is None else round(visible - queued, 3),
        "total_s": round(ended - queued, 3), "finished": finished,
        "wait": {k: round(v, 3) for k, v in sorted(wait.items()) if v >= 0.0005},
        "run": {k: round(v, 3) for k, v in sorted(run.items()) if v >= 0.0005},
    }


def summary(jobs: Sequence[dict[str, Any]]) -> str:
    """One line for the log: the wait and run phases that took the most."""
    if not jobs:
        return ""
    j = jobs[-1]
    top = sorted(((v, f"{part}.{k}") for part in ("wait", "run")
                  for k, v in j[part].items()), reverse=True)[:4]
    return (f"{j['collection']} ({j['path_count']} paths): visible {j['visible_s']} s, "
            f"queued {j['wait_s']} s, total {j['total_s']} s; "
            + ", ".join(f"{name} {v:.3f}" for v, name in top))
