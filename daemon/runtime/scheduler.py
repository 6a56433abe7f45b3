"""The single writer's queue: priorities, coalescing, pause, and what `remaining` counts.

Small work before bulk work (decision 0022): a job naming a few paths (a saved note, an
explicit request for some files) runs before any job over a whole collection, and a running
bulk job yields to one at its next group boundary, then resumes where it was (the catalog
commits per group). Among jobs of one size, explicit requests (rag_index, "Reindex now") run
before watch hints, which run before sweeps. A bulk job that has run for ``TURN_S`` yields to a
bulk job of another collection at the same priority, so no collection starves another. Jobs
for the same collection coalesce: a burst of 1,000 hints becomes one job, and a job for the
whole collection absorbs any path hints for it.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

EXPLICIT, HINT, SWEEP = 0, 1, 2
PRIORITY_NAMES = {EXPLICIT: "explicit", HINT: "hint", SWEEP: "sweep"}
SMALL_JOB = 64  # paths: a job naming at most this many is small, user-facing work
TURN_S = 60.0  # a bulk job's turn when another collection's bulk job waits


@dataclass
class Job:
    """One unit of writer work. ``paths`` None means the whole collection."""

    kind: str  # "sync" | "rebuild"
    collection: str | None  # None: every collection
    priority: int
    paths: set[str] | None = None
    force: bool = False
    estimate: int = 1  # sources this job will look at, for `remaining`
    seq: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None
    alias: Job | None = None  # the queued job this one was merged into when requeued
    queued_at: float = field(default_factory=time.monotonic)  # a small job's timing starts here

    @property
    def size(self) -> int:
        return len(self.paths) if self.paths is not None else max(1, self.estimate)

    @property
    def bulk(self) -> bool:
        """A whole collection or many paths: yields to small work (see the module doc)."""
        return self.kind == "sync" and (self.paths is None or len(self.paths) > SMALL_JOB)

    def order(self) -> tuple[bool, int, int]:
        return (self.bulk, self.priority, self.seq)

    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        self.result, self.error = result, error
        self.done.set()

    def wait(self, timeout: float | None = None) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self.done.wait(timeout):
            raise TimeoutError("indexing did not finish in time")
        if self.alias is not None:  # merged into another job: its result is ours
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            return self.alias.wait(left)
        if self.error is not None:
            raise self.error
        return self.result

    def absorb(self, other: Job) -> None:
        """Merge a newer job for the same target into this queued one."""
        self.priority = min(self.priority, other.priority)
        self.force = self.force or other.force
        if self.paths is None or other.paths is None:
            self.paths = None
            self.estimate = max(self.estimate, other.estimate)
        else:
            self.paths |= other.paths


def _mergeable(queued: Job, job: Job) -> bool:
    """Jobs for the same target coalesce, but small work never joins a bulk job: a saved note
    merged into a queued sweep of its vault would wait with it behind a library."""
    return (queued.kind == job.kind and queued.collection == job.collection
            and queued.bulk == job.bulk)


class JobQueue:
    """Thread-safe; `get` blocks while paused, so pausing never loses queued work."""

    def __init__(self) -> None:
        self._jobs: list[Job] = []
        self._cond = threading.Condition()
        self._seq = itertools.count(1)
        self._paused = False
        self._closed = False
        self.running: Job | None = None
        self.progress_left: int | None = None  # sources left in the running job, once known
        self._running_since = 0.0

    @property
    def paused(self) -> bool:
        return self._paused

    def put(self, job: Job) -> Job:
        """Queue a job, or merge it into a queued one; returns the job to wait on."""
        with self._cond:
            for queued in self._jobs:
                if _mergeable(queued, job):
                    queued.absorb(job)
                    self._cond.notify_all()
                    return queued
            job.seq = next(self._seq)
            self._jobs.append(job)
            self._cond.notify_all()
            return job

    def get(self, timeout: float | None = None) -> Job | None:
        """The most urgent job (FIFO within a priority), or None on timeout or close."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._paused or not self._jobs:
                if self._closed:
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            job = min(self._jobs, key=Job.order)
            self._jobs.remove(job)
            self.running = job
            self.progress_left = None
            self._running_since = time.monotonic()
            return job

    def requeue_front(self, job: Job) -> None:
        """Put an interrupted job back so it runs first after resume."""
        with self._cond:
            job.priority = min(job.priority, EXPLICIT)
            job.seq = 0
            self._jobs.append(job)
            if self.running is job:
                self.running = None
            self._cond.notify_all()

    def requeue(self, job: Job) -> None:
        """Put a preempted job back at its own priority (merged into a newer one if queued).
        A bulk job whose turn is over goes behind the other bulk jobs of its priority; a
        small job that gave way goes behind the small work it gave way to."""
        with self._cond:
            if self.running is job:
                self.running = None
                self.progress_left = None
            if self._turn_over(job) or not job.bulk:
                job.seq = next(self._seq)
            for queued in self._jobs:
                if _mergeable(queued, job):
                    queued.absorb(job)
                    queued.seq = min(queued.seq, job.seq)
                    job.alias = queued
                    job.done.set()  # its waiters follow the alias
                    break
            else:
                self._jobs.append(job)
            self._cond.notify_all()

    def preempted(self) -> bool:
        """Whether the running job should yield: small work waits behind a bulk job, an
        explicit request behind a job of lower priority, or another collection's bulk job
        behind one whose turn is over. Walks and indexing look at this between files and
        groups, so a saved note never waits for a library."""
        with self._cond:
            running = self.running
            if running is None:
                return False
            rank = (running.bulk, running.priority)
            if any((j.bulk, j.priority) < rank for j in self._jobs):
                return True  # it would run before the running job: let it
            return self._turn_over(running)

    def _turn_over(self, job: Job) -> bool:
        """A bulk job has had its turn and another collection's bulk job waits for one."""
        if not job.bulk or time.monotonic() - self._running_since < TURN_S:
            return False
        return any(j.bulk and j.collection != job.collection and j.priority <= job.priority
                   for j in self._jobs)

    def small_queued(self) -> bool:
        """Whether small work is queued: a small job waiting on a slow load (a delivered
        mail's attachments, a book's conversion) gives way to it (decision 0025)."""
        with self._cond:
            return any(not j.bulk for j in self._jobs)

    def small_waiting(self) -> bool:
        """Whether small work is queued (the embedding thread gives the cores to it)."""
        with self._cond:
            return any(not j.bulk for j in self._jobs) or (
                self.running is not None and not self.running.bulk)

    def task_done(self, job: Job) -> None:
        with self._cond:
            if self.running is job:
                self.running = None
                self.progress_left = None
            self._cond.notify_all()

    def pause(self) -> None:
        with self._cond:
            self._paused = True
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            for job in self._jobs:
                job.finish(error=RuntimeError("the daemon is shutting down"))
            self._jobs.clear()

    def remaining(self) -> int:
        """Sources queued or in progress."""
        with self._cond:
            queued = sum(j.size for j in self._jobs)
            if self.running is None:
                return queued
            left = self.progress_left
            return queued + (self.running.size if left is None else left)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._cond:
            jobs = sorted(self._jobs, key=Job.order)
            return [{"kind": j.kind, "collection": j.collection, "size": j.size,
                     "priority": PRIORITY_NAMES.get(j.priority, str(j.priority))} for j in jobs]

    def idle(self) -> bool:
        with self._cond:
            return self.running is None and not self._jobs
