"""Read ahead: the next file is read (and converted) on a thread while the writer commits.

A document's conversion runs in the worker process and may take up to its time limit. The
writer waits for it in short steps and can give up the wait when small work arrives (a saved
note): the conversion goes on, its result lands in the doc store's cache, and the bulk job
finds it there when it resumes (decision 0022). One file ahead is enough: the worker converts
one document at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Generic, TypeVar

from daemon.errors import Interrupted

T = TypeVar("T")
S = TypeVar("S")
STEP_S = 0.05  # how often a wait looks at should_stop


class ReadAhead(Generic[S, T]):
    """``load(items[i])`` for each i in turn, the next one started before it is asked for."""

    def __init__(self, load: Callable[[S], T], items: Sequence[S],
                 should_stop: Callable[[], bool]) -> None:
        self._load = load
        self._items = items
        self._should_stop = should_stop
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragd-read")
        self._futures: dict[int, Future[T]] = {}

    def _start(self, i: int) -> None:
        if i < len(self._items) and i not in self._futures:
            self._futures[i] = self._pool.submit(self._load, self._items[i])

    def get(self, i: int) -> T:
        """The loaded item ``i``; raises ``Interrupted`` when should_stop says so while
        waiting (the load goes on in the background)."""
        self._start(i)
        self._start(i + 1)
        future = self._futures.pop(i)
        while True:
            try:
                return future.result(timeout=STEP_S)
            except FutureTimeout:
                if self._should_stop():
                    raise Interrupted("reading was interrupted") from None

    def close(self) -> None:
        """Stop reading ahead; a load under way finishes in the background."""
        self._pool.shutdown(wait=False, cancel_futures=True)
