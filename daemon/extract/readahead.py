"""Read ahead: the next file is read (and converted) on a thread while the writer commits.

A document's conversion runs in the worker process and may take up to its time limit. The
writer waits for it in short steps and can give up the wait when small work arrives (a saved
note): the conversion goes on, its result lands in the doc store's cache, and the bulk job
finds it there when it resumes (decision 0022). One file ahead is enough: the worker converts
one document at a time.

Containers (mail files, Calibre books) are read the same way, entry by entry
(``EntryStream``): a message is parsed, and its attachments converted, off the writer's thread.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ragd.daemon.errors import Interrupted
from ragd.daemon.models import FileState
from ragd.daemon.sources.entry import Entry

T = TypeVar("T")
S = TypeVar("S")
STEP_S = 0.05  # how often a wait looks at should_stop
# A wait on a load longer than this gives way to small work queued beside a small job (a
# saved note behind a delivered mail whose attachments convert slowly), decision 0025.
GIVE_WAY_S = 0.2


def _stop_waiting(should_stop: Callable[[], bool], give_way: Callable[[], bool],
                  since: float) -> bool:
    return should_stop() or (time.monotonic() - since >= GIVE_WAY_S and give_way())


CARRY_MAX = 8  # loads kept for the next pass; one or two in practice


class ReadAhead(Generic[S, T]):
    """``load(items[i])`` for each i in turn, the next one started before it is asked for.

    A load that a yield leaves under way is *carried* (``carry``, by ``key(item)``): the next
    pass over the same file takes it up instead of converting it again. Without that, a bulk
    job that gave way to saved notes while a slow document converted asked for the same
    conversion again at each resume, behind the first in the one worker, and never got past
    it while the user kept saving (issue 28, row 8)."""

    def __init__(self, load: Callable[[S], T], items: Sequence[S],
                 should_stop: Callable[[], bool],
                 give_way: Callable[[], bool] = lambda: False, *,
                 carry: dict[Any, Future[Any]] | None = None,
                 key: Callable[[S], Any] = id) -> None:
        self._load = load
        self._items = items
        self._should_stop = should_stop
        self._give_way = give_way
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragd-read")
        self._futures: dict[int, Future[T]] = {}
        self._carry = carry if carry is not None else {}
        self._key = key

    def _start(self, i: int) -> None:
        if i < len(self._items) and i not in self._futures:
            carried = self._carry.pop(self._key(self._items[i]), None)
            if carried is not None and (carried.cancelled() or (
                    carried.done() and carried.exception() is not None)):
                carried = None  # a load that failed or was stopped is tried again
            self._futures[i] = carried or self._pool.submit(self._load, self._items[i])

    def _keep(self, i: int, future: Future[T]) -> None:
        if future.cancelled():
            return
        self._carry[self._key(self._items[i])] = future
        while len(self._carry) > CARRY_MAX:
            self._carry.pop(next(iter(self._carry)))

    def get(self, i: int) -> T:
        """The loaded item ``i``; raises ``Interrupted`` when should_stop says so while
        waiting, or give_way after ``GIVE_WAY_S`` (the load goes on in the background)."""
        self._start(i)
        self._start(i + 1)
        future = self._futures.pop(i)
        since = time.monotonic()
        while True:
            try:
                return future.result(timeout=STEP_S)
            except FutureTimeout:
                if _stop_waiting(self._should_stop, self._give_way, since):
                    self._keep(i, future)
                    raise Interrupted("reading was interrupted") from None

    def close(self) -> None:
        """Stop reading ahead; a load under way finishes in the background, carried."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        for i, future in self._futures.items():
            self._keep(i, future)
        self._futures.clear()


# -- containers ---------------------------------------------------------------------------------


class Loader:
    """One daemon thread that runs loads in the order they are given (a mail's attachments,
    a book's conversion), so they never hold the writer. It outlives a job: a load cut short
    by a yield is picked up by the next pass (``EntryStream``'s carry) instead of done again.
    A daemon thread: a conversion under way never keeps the process from exiting."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ragd-load", daemon=True)
                self._thread.start()
        self._queue.put((future, fn))
        return future

    def _run(self) -> None:
        while True:
            future, fn = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue  # cancelled before it started
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to whoever waits for it
                future.set_exception(exc)


@dataclass
class Item(Generic[T]):
    """What the stream hands the writer: an entry of container ``n`` (with its load, when it
    will probably be needed), or the end of that container (``entry`` None, ``end`` set)."""

    n: int
    file: FileState
    entry: Entry | None = None
    future: Future[T] | None = None
    end: int = 0
    size: int = 0
    used: bool = False


_DONE = object()
CarryKey = tuple[str, str, str, str]


class Handover(Generic[T]):
    """The queue between a thread that reads containers and the writer: items in order,
    bounded by ``max_items`` and ``max_bytes`` of container bytes; loads the writer did not
    take when it closes are kept in ``carry`` for the next pass. ``EntryStream`` reads on a
    thread here, ``ragd.daemon.extract.stream`` in a worker process."""

    def __init__(self, carry: dict[CarryKey, Future[Any]], should_stop: Callable[[], bool],
                 give_way: Callable[[], bool], max_items: int, max_bytes: int) -> None:
        self._carry = carry
        self._should_stop, self._give_way = should_stop, give_way
        self._max_bytes, self._max_items = max_bytes, max_items
        self._items: deque[Item[T] | BaseException | object] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self._closed = False

    def _put(self, item: Item[T] | BaseException | object) -> None:
        size = item.size if isinstance(item, Item) else 0
        with self._cond:
            while not self._closed and self._items and (
                    self._bytes + size > self._max_bytes or len(self._items) >= self._max_items):
                self._cond.wait(STEP_S)
            if self._closed and isinstance(item, Item):
                self._keep(item)
                return
            self._items.append(item)
            self._bytes += size
            self._cond.notify_all()

    def __iter__(self) -> Iterator[Item[T]]:
        while True:
            item = self._next()
            if item is None:
                return
            yield item

    def _next(self) -> Item[T] | None:
        """The next item; raises ``Interrupted`` when should_stop says so while waiting (or
        give_way, after ``GIVE_WAY_S``: a 40 MB message being parsed)."""
        since = time.monotonic()
        with self._cond:
            while not self._items:
                self._cond.wait(STEP_S)
                if not self._items and _stop_waiting(self._should_stop, self._give_way, since):
                    raise Interrupted("reading was interrupted")
            item = self._items.popleft()
            if isinstance(item, Item):
                self._bytes -= item.size
            self._cond.notify_all()
        if item is _DONE:
            return None
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, Item)
        self._handed(item)
        return item

    def _handed(self, item: Item[T]) -> None:
        """Called for each item the writer takes."""

    def _close_queue(self) -> list[Item[T]]:
        """Stop taking items; the ones still queued."""
        with self._cond:
            self._closed = True
            left = [i for i in self._items if isinstance(i, Item)]
            self._items.clear()
            self._cond.notify_all()
        return left

    def _keep(self, item: Item[T]) -> None:
        future, entry = item.future, item.entry
        if future is None or entry is None or future.cancel():
            return
        self._carry[(item.file.path, entry.locator, entry.key, entry.content_hash)] = future
        while len(self._carry) > CARRY_MAX:  # loads no pass came back for
            self._carry.pop(next(iter(self._carry)))


class EntryStream(Handover[T]):
    """The entries of containers read on a thread ahead of the writer (mail parsed, a book's
    record looked up), and the documents that will be needed loaded on the ``Loader``: the
    writer only decides and commits, so a saved note never waits behind one message or book
    (decision 0025). Reading ahead is bounded by ``max_bytes`` of container bytes and
    ``max_items`` entries; loads by ``max_loads`` not yet taken by the writer.

    ``wanted(entry)`` says whether an entry will probably be loaded (the writer decides for
    sure); ``load(entry)`` loads it. Loads under way or done when the stream is closed are kept
    in ``carry`` (by container, locator, key and content) for the next stream over the same
    containers."""

    def __init__(self, read: Callable[[FileState, int], Iterator[Entry]],
                 todo: Sequence[tuple[FileState, int]], *, wanted: Callable[[Entry], bool],
                 load: Callable[[Entry], T], loader: Loader,
                 carry: dict[CarryKey, Future[Any]], should_stop: Callable[[], bool],
                 give_way: Callable[[], bool] = lambda: False,
                 max_bytes: int = 32 * 2**20, max_items: int = 512, max_loads: int = 4) -> None:
        super().__init__(carry, should_stop, give_way, max_items, max_bytes)
        self._read, self._todo = read, todo
        self._wanted, self._load, self._loader = wanted, load, loader
        self._loads = threading.Semaphore(max_loads)
        self._taken: Item[T] | None = None
        self._thread = threading.Thread(target=self._run, name="ragd-entries", daemon=True)
        self._thread.start()

    # -- the reader thread ------------------------------------------------------------------
    def _run(self) -> None:
        try:
            for n, (f, start) in enumerate(self._todo):
                prev = end = start
                for entry in self._read(f, start):
                    if self._closed:
                        return
                    future = self._submit(f, entry) if self._wanted(entry) else None
                    self._put(Item(n, f, entry, future, size=max(entry.end - prev, 1)))
                    prev = end = max(end, entry.end)
                self._put(Item(n, f, end=end))
        except BaseException as exc:  # handed to the writer, which raises it
            self._put(exc)
        finally:
            self._put(_DONE)

    def _submit(self, f: FileState, entry: Entry) -> Future[T] | None:
        while not self._loads.acquire(timeout=STEP_S):
            if self._closed:
                return None
        carried = self._carry.pop((f.path, entry.locator, entry.key, entry.content_hash), None)
        return carried if carried is not None else self._loader.submit(
            lambda: self._load(entry))

    # -- the writer -------------------------------------------------------------------------
    def _handed(self, item: Item[T]) -> None:
        if item.future is not None:
            self._loads.release()
            self._taken = item

    def result(self, item: Item[T]) -> T:
        """The load of ``item``: the one started ahead, or one started now. Raises
        ``Interrupted`` when should_stop says so while waiting, or give_way after
        ``GIVE_WAY_S`` (the load goes on, and is carried to the next pass)."""
        if item.future is None:
            assert item.entry is not None
            entry = item.entry
            item.future = self._loader.submit(lambda: self._load(entry))
            self._taken = item
        since = time.monotonic()
        while True:
            try:
                value = item.future.result(timeout=STEP_S)
            except FutureTimeout:
                if _stop_waiting(self._should_stop, self._give_way, since):
                    raise Interrupted("reading was interrupted") from None
                continue
            item.used = True
            return value

    def close(self) -> None:
        """Stop reading; keep the loads under way or done for the next pass, drop the rest."""
        left = self._close_queue()
        if self._taken is not None and not self._taken.used:
            self._keep(self._taken)
        for item in left:
            self._keep(item)
