"""The requests that wait for the one writer (decision 0043): a few places, `busy` past them.

Apart from the handlers (which wait here) and the daemon (which keeps one ``WriterWaits``), so
that neither imports the other for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

from ragd.daemon.errors import Interrupted, WriterBusy
from ragd.daemon.runtime.scheduler import Job, JobQueue

if TYPE_CHECKING:
    from ragd.daemon.ipc.server import Connection

WRITE_WAITERS = 4  # requests that may wait for the writer at once (decision 0043)
BUSY_AFTER_S = 2.0  # how long one more waits for a place before it is answered `busy`
RETRY_AFTER_S = 5.0  # what a `busy` answer says to wait before sending the request again
_STEP_S = 0.25  # a waiting request looks at its client this often: gone, its place is freed


class Waited(Protocol):
    """What a wait reads of the daemon: its queue, its stop flag, the embedding backlog."""

    queue: JobQueue
    _stop: threading.Event

    def unembedded(self, names: list[str] | None) -> int: ...


class WriterWaits:
    """The requests that wait for the one writer: an index with wait, the note tools' writes
    and reindex, a wait for embeddings. At most ``places`` of them wait at once, each on a
    thread of a pool of their own: six of them used to hold every thread of the event loop's
    default pool (cores + 4), and `status` timed out. One more waits ``patience_s`` for a
    place and is then answered ``busy`` (``WriterBusy``, with ``retry_after_s``) before it has
    changed anything. A wait whose client hung up gives its place back within ``_STEP_S``;
    its job stays queued (decision 0043)."""

    def __init__(self, places: int = WRITE_WAITERS, patience_s: float = BUSY_AFTER_S) -> None:
        self.places = places
        self.patience_s = patience_s
        self.waiting = 0  # requests holding a place now
        self.refused = 0  # requests answered busy since start
        self._free = asyncio.Semaphore(places)
        self._pool = ThreadPoolExecutor(max_workers=places + 1, thread_name_prefix="ragd-wait")

    @contextlib.asynccontextmanager
    async def place(self, d: Waited) -> AsyncIterator[None]:
        """Hold a place while the request waits for the writer; ``WriterBusy`` when none
        frees within ``patience_s``."""
        try:
            await asyncio.wait_for(self._free.acquire(), self.patience_s)
        except TimeoutError:
            self.refused += 1
            raise self._busy(d) from None
        self.waiting += 1
        try:
            yield
        finally:
            self.waiting -= 1
            self._free.release()

    def _busy(self, d: Waited) -> WriterBusy:
        paused = d.queue.paused
        return WriterBusy(
            f"ragd is busy: {'indexing is paused and ' if paused else ''}{self.waiting} "
            "requests already wait for its indexer, the most it lets wait at once",
            f"try again in {RETRY_AFTER_S:.0f} seconds; nothing was changed"
            + ("; `ragd resume` resumes indexing" if paused else "")
            + "; `ragd status` shows what is queued", retry_after_s=RETRY_AFTER_S)

    async def job(self, job: Job, conn: Connection, timeout: float) -> Any:
        """What ``job.wait(timeout)`` gives (its result, or its error raised), waited for on
        this pool; ``Interrupted`` if the client hangs up meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        while True:
            if await loop.run_in_executor(self._pool, job.done.wait, _STEP_S):
                if job.alias is None:  # merged into another job: its result is ours
                    break
                job = job.alias
                continue
            _still_asked(conn)
            if time.monotonic() > deadline:
                raise TimeoutError("indexing did not finish in time")
        if job.error is not None:
            raise job.error
        return job.result

    async def embedded(self, d: Waited, names: list[str] | None, conn: Connection,
                       timeout: float) -> None:
        """Return once these collections' backlog is embedded (rag_index with wait=true
        answers when its collection is searchable in every mode), or at ``timeout``;
        ``Interrupted`` if the client hangs up meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        while not d._stop.is_set() and time.monotonic() <= deadline:
            left: int = await loop.run_in_executor(self._pool, d.unembedded, names)
            if not left:
                return
            _still_asked(conn)
            await asyncio.sleep(0.1)

    async def settled(self, d: Waited, job: Job, names: list[str] | None, conn: Connection,
                      within: float) -> tuple[Any, bool]:
        """Wait up to ``within`` seconds for ``job`` and then for these collections' vectors
        (an admin tool's bounded answer: issue 37). (the job's result, or None if it has not
        finished; whether the vectors are all there too)."""
        deadline = time.monotonic() + within
        try:
            result = await self.job(job, conn, within)
        except TimeoutError:
            return None, False
        await self.embedded(d, names, conn, max(0.0, deadline - time.monotonic()))
        left = await asyncio.get_running_loop().run_in_executor(self._pool, d.unembedded,
                                                                 names)
        return result, not left


def _still_asked(conn: Connection) -> None:
    if conn.closed:
        raise Interrupted("the client hung up while it waited for the indexer; "
                          "what it asked for stays queued")
