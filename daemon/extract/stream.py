"""A container's entries read in an extraction worker, handed to the writer as an entry stream.

The worker lists each container's entries (a mailbox's messages, a feed's entries, a commit's
files, a book) and loads the ones the daemon asks for; a session thread here answers it
(``wanted``: new or changed) and queues what the writer takes, in order, as
``ragd.daemon.extract.readahead.EntryStream`` does for a kind read in the daemon.

When an item passes its deadline or its worker dies, the item is skipped with its code and
the stream goes on in a fresh worker: after the entry that failed (an mbox from its offset,
other containers by counting entries again), or, when the listing itself failed, with the next
container. A load the writer left under way when it gave way to small work is finished and
kept (``carry``) for the next pass, as a thread's would be.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from ragd.daemon.convert.process import ConversionCancelled
from ragd.daemon.errors import Interrupted
from ragd.daemon.extract.pool import (
    Abandoned,
    Clock,
    ExtractPool,
    ItemFailed,
    WorkerProc,
    receive,
)
from ragd.daemon.extract.readahead import _DONE, CARRY_MAX, STEP_S, CarryKey, Handover, Item
from ragd.daemon.extract.work import Loaded
from ragd.daemon.models import Document, FileState, Skip
from ragd.daemon.sources.entry import Entry

log = logging.getLogger(__name__)



def _never() -> Document | Skip:
    raise RuntimeError("an entry read in a worker is loaded there")


def _done(value: Loaded) -> Future[Loaded]:
    future: Future[Loaded] = Future()
    future.set_result(value)
    return future


class RemoteEntryStream(Handover[Loaded]):
    """``EntryStream``'s contract, with the reading in a worker of ``pool``."""

    def __init__(self, pool: ExtractPool, kind: Any, spec: dict[str, Any],
                 todo: Sequence[tuple[FileState, int]], *,
                 wanted: Callable[[Entry], bool], carry: dict[CarryKey, Future[Any]],
                 should_stop: Callable[[], bool], give_way: Callable[[], bool] = lambda: False,
                 urgent: bool = False, max_items: int = 512,
                 max_bytes: int = 32 * 2**20) -> None:
        super().__init__(carry, should_stop, give_way, max_items, max_bytes)
        self._pool, self._kind, self._spec, self._todo = pool, kind, spec, list(todo)
        self._appendable: Callable[[str], bool] = kind.appendable
        # Both may be set again by the next pass that takes over a parked stream.
        self.wanted = wanted
        self.urgent = urgent
        self.failures = 0  # items skipped for a deadline or a dead worker (tests)
        self._loading: tuple[int, FileState, Entry] | None = None  # the entry being loaded
        self._thread = threading.Thread(target=self._run, name="ragd-extract-stream",
                                        daemon=True)
        self._thread.start()

    # -- the session thread ----------------------------------------------------------------------
    def _run(self) -> None:
        turn = self._pool.stream_turn(str(self._spec.get("root")))
        held = False
        try:
            # After the stream of a pass that gave way, which may hold its worker up to the
            # deadline (it leaves what it learnt in ``carry``); never beside it.
            while not (held := turn.acquire(timeout=STEP_S)):
                if self._closed:
                    return
            at, start, skip = 0, self._todo[0][1] if self._todo else 0, 0
            while at < len(self._todo) and not self._closed:
                resume = self._session(at, start, skip)
                if resume is None:
                    break
                at, start, skip = resume
        except Abandoned:
            pass  # closed while it waited for a worker: nothing was read
        except ConversionCancelled:
            self._put(Interrupted("reading was interrupted: the daemon is stopping"))
        except BaseException as exc:  # handed to the writer, which raises it
            log.exception("an extraction stream failed")
            self._put(exc)
        finally:
            if held:
                turn.release()
            self._put(_DONE)

    def _session(self, at: int, start: int, skip: int) -> tuple[int, int, int] | None:
        """Read containers ``at``... in one worker; where to go on after a failure, or None
        when all are read (or the stream was closed)."""
        while at < len(self._todo) and (failed := self._carry.pop(
                _listing_key(self._todo[at][0]), None)) is not None:
            f = self._todo[at][0]  # stuck past its deadline in a pass that gave way
            self._put_skip(at, f, failed.result().doc)
            self._put(Item(at, f, end=start))
            at, skip = at + 1, 0
            if at < len(self._todo):
                start = self._todo[at][1]
        if at >= len(self._todo):
            return None
        todo: list[tuple[str, int, int]] = [
            (f.path, start if i == 0 else s, skip if i == 0 else 0)
            for i, (f, s) in enumerate(self._todo[at:])]
        counts = [0] * len(todo)
        ends = [row[1] for row in todo]
        with self._pool.lease(urgent=self.urgent, abandon=lambda: self._closed) as proc:
            listing = 0  # the container the worker is on
            try:
                proc.send({"op": "stream", "kind": self._spec, "todo": todo,
                           "state": self._state([row[0] for row in todo])})
                while True:
                    frame = proc.recv(Clock(self._pool.settings.timeout_s))
                    kind = frame.get("t")
                    if kind == "done":
                        return None
                    n = _index(frame, len(todo))
                    f = self._todo[at + n][0]
                    if n < listing:
                        raise ItemFailed(Skip("extract_crashed", "the worker went back to a "
                                              "container it had ended"))
                    listing = n
                    if kind == "end":
                        ends[n] = max(ends[n], _int(frame.get("end")))
                        self._put(Item(at + n, f, end=ends[n]))
                        listing = n + 1  # the worker lists the next: a failure is that one's
                    elif kind == "error":
                        self._put_skip(at + n, f, Skip("parse_error", str(frame.get("error"))))
                    elif kind == "entry":
                        counts[n] += 1
                        if not self._entry(proc, at + n, f, frame):
                            return None
                        ends[n] = max(ends[n], _int(frame.get("end")))
                    else:
                        raise ItemFailed(Skip("extract_crashed",
                                              f"the worker sent {kind!r} in a stream"))
            except ItemFailed as failed:
                proc.kill()  # whatever it was doing, it is not trusted with the next item
                if listing >= len(todo):
                    return None  # every container ended: only its "done" was missing
                return self._failed(failed.skip, at, listing, counts, ends)

    def _state(self, paths: list[str]) -> dict[str, Any] | None:
        """What the kind's walk learnt that its entries need (a mail file's format, a
        book's record), for the worker's own kind."""
        state = getattr(self._kind, "walk_state", None)
        return state(paths) if state is not None else None

    def _entry(self, proc: WorkerProc, n: int, f: FileState, frame: dict[str, Any]) -> bool:
        """Answer one entry (load it or not) and queue it; False once the stream is closed."""
        location = frame.get("location")
        entry = Entry(str(frame.get("key")), str(frame.get("locator") or ""),
                      str(frame.get("hash") or ""), _int(frame.get("end")), _never,
                      location if isinstance(location, dict) else {})
        if self._closed:
            self._stopping(proc, n, f)
            return False
        key = (f.path, entry.locator, entry.key, entry.content_hash)
        carried = self._carry.pop(key, None)
        future: Future[Loaded] | None = None
        if carried is not None and carried.done() and carried.exception() is None:
            proc.send({"load": False})
            future = carried
        elif self.wanted(entry):
            proc.send({"load": True})
            t0 = time.perf_counter()
            self._loading = (n, f, entry)
            loaded = receive(proc, Clock(self._pool.settings.timeout_s), entry.content_hash, t0)
            self._loading = None
            future = _done(loaded)
            if self._closed:  # the writer went on without it: for the next pass
                self._carry_as(key, future)
                self._stopping(proc, n, f)
                return False
        else:
            proc.send({"load": False})
        self._put(Item(n, f, entry, future, size=1))
        return True

    def _failed(self, skip: Skip, at: int, n: int, counts: list[int],
                ends: list[int]) -> tuple[int, int, int] | None:
        """Record the item that failed; where the next worker goes on."""
        self.failures += 1
        f = self._todo[at + n][0]
        loading, self._loading = self._loading, None
        log.warning("%s in %s: %s", skip.code, f.path, skip.detail)
        if loading is not None:
            n = loading[0] - at
            f, entry = loading[1], loading[2]
            self._put(Item(at + n, f, entry, _done(Loaded(entry.content_hash, skip, 0.0)),
                           size=1))
            if self._appendable(f.path):  # from just after it
                return at + n, max(entry.end, ends[n]), 0
            return at + n, self._todo[at + n][1], counts[n]
        # The listing itself failed (or stalled): the container is recorded as read up to the
        # last entry handed over, with the failure, and the next one is read. Closed (the
        # writer gave way meanwhile), the failure is kept for the next pass, which records it
        # instead of listing the container again.
        if self._closed:
            self._carry_as(_listing_key(f), _done(Loaded("", skip, 0.0)))
            return None
        self._put_skip(at + n, f, skip)
        self._put(Item(at + n, f, end=ends[n]))
        if at + n + 1 >= len(self._todo):
            return None
        return at + n + 1, self._todo[at + n + 1][1], 0

    def _stopping(self, proc: WorkerProc, n: int, f: FileState) -> None:
        """Stop the worker; when it was stuck listing what follows past its deadline, the
        container is carried as failed: the next pass records it instead of listing it again
        (a pass that gave way to saves would otherwise start it over each time)."""
        skip = _stop(proc, self._pool.settings.timeout_s)
        if skip is not None:
            self._carry_as(_listing_key(f), _done(Loaded("", skip, 0.0)))

    def _put_skip(self, n: int, f: FileState, skip: Skip) -> None:
        entry = Entry(f"skip:{f.path}", "", "", 0, _never)
        self._put(Item(n, f, entry, _done(Loaded("", skip, 0.0)), size=1))

    # -- the writer ------------------------------------------------------------------------------
    def result(self, item: Item[Loaded]) -> Loaded:
        """The load of ``item``, done in the worker when it was listed. An entry the writer
        wants that was not wanted when listed (the catalog changed in between) is skipped as
        ``vanished``, which the next sweep reads again."""
        if item.future is None:
            return Loaded(item.entry.content_hash if item.entry else "",
                          Skip("vanished", "it changed while it was read: read again at the "
                               "next sweep"), 0.0)
        item.used = True
        return item.future.result()

    def close(self) -> None:
        """Stop reading: the worker is told at its next entry; a load under way is finished
        and kept for the next pass."""
        for item in self._close_queue():
            if not item.used:
                self._keep(item)

    def _carry_as(self, key: CarryKey, future: Future[Any]) -> None:
        """Keep a load (or a failed listing) for the next pass under ``key``."""
        self._carry[key] = future
        while len(self._carry) > CARRY_MAX:
            self._carry.pop(next(iter(self._carry)))


def _stop(proc: WorkerProc, timeout_s: float) -> Skip | None:
    """End the worker's stream early: it answers ``stopped`` (after the entry or the end it
    may have sent meanwhile, which are dropped), so the next stream starts clean; a worker
    that does not within the deadline is killed, and why is returned."""
    try:
        proc.send({"op": "stop"})
        while proc.recv(Clock(timeout_s)).get("t") != "stopped":
            pass
    except ItemFailed as failed:
        proc.kill()
        return failed.skip
    return None


def _listing_key(f: FileState) -> CarryKey:
    return ("listing", f.path, str(f.size), str(f.mtime_ns))


def _index(frame: dict[str, Any], total: int) -> int:
    n = frame.get("n")
    if not isinstance(n, int) or not 0 <= n < total:
        raise ItemFailed(Skip("extract_crashed", "the worker named a container it was not "
                              "given"))
    return n


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ItemFailed(Skip("extract_crashed", "the worker sent a malformed frame"))
    return value
