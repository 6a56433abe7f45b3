"""The single writer's queue: priorities, coalescing, pause, and what `remaining` counts.

Small work before bulk work (decision 0022): a job naming a few paths (a saved note, an
explicit request for some files) runs before any job over a whole collection, and a running
bulk job yields to one at its next group boundary, then resumes where it was (the catalog
commits per group). Among jobs of one size, explicit requests (rag_index, "Reindex now") run
before watch hints, which run before sweeps. A bulk job that has run for ``TURN_S`` yields to a
bulk job of another collection at the same priority, so no collection starves another. An
explicit request of another collection waits at most ``CUT_IN_S`` behind a job of lower
priority, whatever its size (one mbox, one feed, one commit log is one path), and a new one
(a collection's first index) as long behind an explicit bulk job; a hint or sweep that names
few paths but runs for ``LONG_S`` is bulk work from its first yield on (decision 0043). Jobs
for the same collection coalesce: a burst of 1,000 hints becomes one job, and a job for the
whole collection absorbs any path hints for it.

A gate (``hold_bulk``) may hold bulk work, never small work: on battery below the configured
charge (``ragd.daemon.runtime.power``, decision 0044) bulk jobs stay queued, a running one
yields at its next group boundary, and saves are still indexed at once.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

EXPLICIT, HINT, SWEEP = 0, 1, 2
PRIORITY_NAMES = {EXPLICIT: "explicit", HINT: "hint", SWEEP: "sweep"}
SMALL_JOB = 64  # paths: a job naming at most this many is small, user-facing work
TURN_S = 60.0  # a bulk job's turn when another collection's bulk job waits
HOLD_RECHECK_S = 1.0  # a writer waiting on held bulk work looks at the gate again this often
CUT_IN_S = 2.0  # the longest turn of a job an explicit request of another collection cuts in
LONG_S = 5.0  # a hint or sweep small by its paths that has run this long is bulk work (0043)
# A small job whose files hold more than this is heavy: it goes behind light small work of its
# priority, and light work never gives way to it (a note saved beside a 63 MB feed).
LIGHT_BYTES = 256 * 1024


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
    runs: int = 0  # times the writer took it: a new request (0) cuts in (decision 0043)
    long: bool = False  # small by its paths, but it had to yield its turn: bulk from then on
    weight: int = 0  # bytes its hinted files held when hinted (0: not known, or none)

    @property
    def size(self) -> int:
        return len(self.paths) if self.paths is not None else max(1, self.estimate)

    @property
    def bulk(self) -> bool:
        """A whole collection or many paths: yields to small work (see the module doc)."""
        return self.kind == "sync" and (self.paths is None or len(self.paths) > SMALL_JOB
                                        or self.long)

    @property
    def heavy(self) -> bool:
        return self.weight > LIGHT_BYTES

    def order(self) -> tuple[bool, int, bool, int]:
        return (self.bulk, self.priority, self.heavy, self.seq)

    def outweighs(self, other: Job) -> bool:
        """Whether this job is heavy and heavier than ``other``: ``other`` waiting on a slow
        load does not give way to it."""
        return self.weight > max(other.weight, LIGHT_BYTES)

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
        self.runs = max(self.runs, other.runs)
        self.weight += other.weight
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
    """Thread-safe; `get` blocks while paused, so pausing never loses queued work.

    ``hold_bulk(fresh)`` says why bulk work must wait now (None: it need not); ``fresh`` asks
    for a new look at what it depends on, which `get` does before it hands out a bulk job. It
    is called outside the queue's lock, so it may read a file or run a command."""

    def __init__(self, hold_bulk: Callable[[bool], str | None] | None = None) -> None:
        self._hold_bulk = hold_bulk or (lambda fresh: None)
        self.held_for: str | None = None  # why bulk work waits, as last seen
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
        """The most urgent job (FIFO within a priority), or None on timeout or close. Bulk
        jobs the gate holds stay queued; the gate is looked at afresh before a bulk job is
        handed out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fresh = False
        while True:
            held = self._held(fresh)  # outside the lock: the gate may read the power source
            with self._cond:
                ready = [] if self._paused else [j for j in self._jobs
                                                 if not (held and j.bulk)]
                if ready:
                    job = min(ready, key=Job.order)
                    if job.bulk and not fresh:
                        fresh = True  # a bulk job starts: look at the gate now, then choose
                        continue
                    self._jobs.remove(job)
                    self.running = job
                    job.runs += 1
                    self.progress_left = None
                    self._running_since = time.monotonic()
                    return job
                if self._closed:
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                if held and any(j.bulk for j in self._jobs):
                    left = HOLD_RECHECK_S if left is None else min(left, HOLD_RECHECK_S)
                self._cond.wait(left)
            fresh = False

    def _held(self, fresh: bool = False) -> str | None:
        """Why bulk work waits now (the gate's answer, remembered for `status`)."""
        self.held_for = self._hold_bulk(fresh)
        return self.held_for

    def bulk_held(self) -> bool:
        """Whether bulk work waits for the gate now (the embedding thread holds its bulk
        vectors then, and a running bulk job yields)."""
        return self._held() is not None

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
        small job that gave way goes behind the small work it gave way to, and one an
        explicit request cut in on is bulk from then on, so it goes behind that request
        instead of being taken again at once (decision 0043)."""
        with self._cond:
            if self.running is job:
                self.running = None
                self.progress_left = None
            if not job.bulk and (self._cut_in(job) or self._overlong(job)):
                job.long = True
                job.seq = next(self._seq)
            elif self._turn_over(job) or not job.bulk:
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
        groups, so a saved note never waits for a library. A bulk job yields as well when the
        gate closes under it (on battery: decision 0044)."""
        if self.running is not None and self.running.bulk and self.bulk_held():
            return True
        with self._cond:
            running = self.running
            if running is None:
                return False
            rank = (running.bulk, running.priority)
            if any((j.bulk, j.priority) < rank for j in self._jobs):
                return True  # it would run before the running job: let it
            return self._turn_over(running)

    def _turn_over(self, job: Job) -> bool:
        """A bulk job has had its turn and another collection's bulk job waits for one, or
        an explicit request of another collection cuts in, or a small job turned out long."""
        if self._cut_in(job) or self._overlong(job):
            return True
        if not job.bulk or time.monotonic() - self._running_since < TURN_S:
            return False
        return any(j.bulk and j.collection != job.collection and j.priority <= job.priority
                   for j in self._jobs)

    def _overlong(self, job: Job) -> bool:
        """A hint or sweep that names few paths but has run for ``LONG_S`` (one mbox, one
        feed, one commit log): it yields once and goes on as the bulk work it is, at its own
        priority, so explicit requests and other collections' bulk jobs pass it and its
        chunks are embedded as bulk. An explicit small job (a note write) finishes first."""
        return (job.kind == "sync" and not job.bulk and job.priority > EXPLICIT
                and time.monotonic() - self._running_since >= LONG_S)

    def _cut_in(self, job: Job) -> bool:
        """Whether an explicit request of another collection waits behind ``job``, which has
        run for ``CUT_IN_S``: ``job`` is a hint or a sweep (small by its paths, yet a 1 GB
        mbox, a 100,000-entry feed or a 50,000-commit log), or ``job`` is an explicit bulk
        job and the request is new (a collection's first index, a "Reindex now"). Among
        explicit bulk jobs that have all run, turns of ``TURN_S`` hold (decision 0043)."""
        if time.monotonic() - self._running_since < CUT_IN_S:
            return False
        return any(j.priority == EXPLICIT and not (j.bulk and self.held_for)  # held: 0044
                   and j.collection != job.collection
                   and (job.priority > EXPLICIT or (job.bulk and j.runs == 0))
                   for j in self._jobs)

    def small_queued(self) -> bool:
        """Whether small work is queued: a small job waiting on a slow load (a delivered
        mail's attachments, a book's conversion) gives way to it (decision 0025)."""
        with self._cond:
            return any(not j.bulk for j in self._jobs)

    def fresh_small_queued(self) -> bool:
        """Whether small work that has not yet run is queued: what a small job waiting on a
        slow load gives way to. Not to a job that already gave way (a project's 6 MB note):
        two small jobs each waiting on a slow load would otherwise give way to each other
        every ``GIVE_WAY_S``, and a saved note's job that had to start a worker stayed
        unsearchable past 2 s while they did. Nor to a heavier one: a saved note whose
        worker took 0.2 s to start gave way to a 63 MB feed hinted with it, and waited for
        its parse."""
        with self._cond:
            mine = self.running
            return any(not j.bulk and j.runs == 0 and not (mine is not None and j.outweighs(mine))
                       for j in self._jobs)

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
