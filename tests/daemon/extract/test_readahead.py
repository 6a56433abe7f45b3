"""Read ahead: the next item loads while this one is used; a wait gives way to should_stop;
a container's entries stream on a thread, bounded, and a load cut short is carried over."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from ragd.daemon.errors import Interrupted
from ragd.daemon.extract.readahead import EntryStream, Loader, ReadAhead
from ragd.daemon.models import FileState
from ragd.daemon.sources.entry import Entry


def test_items_come_in_order_and_the_next_one_is_already_loading() -> None:
    started: list[int] = []
    second_started = threading.Event()

    def load(i: int) -> int:
        started.append(i)
        if i == 1:
            second_started.set()
        return i * 10

    ahead = ReadAhead(load, [0, 1, 2], lambda: False)
    assert ahead.get(0) == 0
    assert second_started.wait(5)  # item 1 started before it was asked for
    assert [ahead.get(1), ahead.get(2)] == [10, 20]
    ahead.close()
    assert started == [0, 1, 2]


def test_a_slow_load_gives_way_and_finishes_in_the_background() -> None:
    release, done = threading.Event(), threading.Event()
    stop = threading.Event()

    def load(i: int) -> int:
        release.wait(10)  # a conversion running toward its time limit
        done.set()
        return i

    ahead = ReadAhead(load, [0], stop.is_set)
    threading.Timer(0.1, stop.set).start()
    with pytest.raises(Interrupted):
        ahead.get(0)
    ahead.close()
    release.set()
    assert done.wait(5)  # its result would be in the doc store's cache for the next pass


def test_a_load_a_yield_left_under_way_is_taken_up_by_the_next_pass() -> None:
    """A bulk job that gives way to saved notes while a slow document converts must not ask
    for the same conversion again at each resume (issue 28, row 8): one load, carried."""
    release = threading.Event()
    calls: list[str] = []

    def load(name: str) -> str:
        calls.append(name)
        release.wait(10)
        return name.upper()

    carry: dict[Any, Future[Any]] = {}
    for _ in range(3):  # three resumes, each giving way while the load runs
        stop = threading.Event()
        ahead = ReadAhead(load, ["slow.tex"], stop.is_set, carry=carry, key=str)
        threading.Timer(0.1, stop.set).start()
        with pytest.raises(Interrupted):
            ahead.get(0)
        ahead.close()
    release.set()
    ahead = ReadAhead(load, ["slow.tex"], lambda: False, carry=carry, key=str)
    assert ahead.get(0) == "SLOW.TEX"
    ahead.close()
    assert calls == ["slow.tex"] and not carry
    # A load that failed is tried again, not handed over failed.
    failed: Future[Any] = Future()
    failed.set_exception(OSError("gone"))
    carry["slow.tex"] = failed
    ahead = ReadAhead(load, ["slow.tex"], lambda: False, carry=carry, key=str)
    assert ahead.get(0) == "SLOW.TEX" and len(calls) == 2
    ahead.close()


# -- containers ---------------------------------------------------------------------------------


def entries(f: FileState, start: int) -> Iterator[Entry]:
    for i in range(start, 3):
        yield Entry(f"{f.path}#{i}", str(i), f"h{i}", i + 1, lambda i=i: f"doc {i}")


def test_entries_come_in_order_with_their_loads_and_container_ends() -> None:
    todo = [(FileState("a", 3, 1), 0), (FileState("b", 3, 1), 1)]
    stream: EntryStream[str] = EntryStream(
        entries, todo, wanted=lambda e: e.locator != "1", load=lambda e: e.load(),  # type: ignore[arg-type,return-value]
        loader=Loader(), carry={}, should_stop=lambda: False)
    got = []
    for item in stream:
        if item.entry is None:
            got.append((item.file.path, "end", item.end))
        else:
            got.append((item.file.path, item.entry.locator, stream.result(item)))
    stream.close()
    assert got == [("a", "0", "doc 0"), ("a", "1", "doc 1"), ("a", "2", "doc 2"),
                   ("a", "end", 3), ("b", "1", "doc 1"), ("b", "2", "doc 2"), ("b", "end", 3)]


def test_a_load_cut_short_by_a_yield_is_carried_to_the_next_pass() -> None:
    release, stop = threading.Event(), threading.Event()
    runs: list[str] = []

    def load(e: Entry) -> str:
        runs.append(e.key)
        release.wait(10)  # a mail's attachments converting toward their time limit
        return f"loaded {e.key}"

    carry: dict[Any, Future[Any]] = {}
    loader = Loader()
    todo = [(FileState("box", 3, 1), 0)]
    first: EntryStream[str] = EntryStream(entries, todo, wanted=lambda e: True, load=load,
                                          loader=loader, carry=carry, should_stop=stop.is_set)
    item = next(iter(first))
    threading.Timer(0.1, stop.set).start()
    with pytest.raises(Interrupted):
        first.result(item)  # small work arrived: the writer gives the wait up
    first.close()
    assert ("box", "0", "box#0", "h0") in carry
    stop.clear()
    release.set()
    second: EntryStream[str] = EntryStream(entries, todo, wanted=lambda e: True, load=load,
                                           loader=loader, carry=carry,
                                           should_stop=stop.is_set)
    results = [second.result(i) for i in second if i.entry is not None]
    second.close()
    assert results == ["loaded box#0", "loaded box#1", "loaded box#2"]
    assert runs.count("box#0") == 1  # picked up, not loaded again


def test_reading_ahead_is_bounded_by_bytes() -> None:
    read: list[int] = []

    def big(f: FileState, start: int) -> Iterator[Entry]:
        for i in range(10):
            read.append(i)
            yield Entry(str(i), str(i * 100), "", (i + 1) * 100, lambda: "x")

    stream: EntryStream[str] = EntryStream(
        big, [(FileState("box", 1000, 1), 0)], wanted=lambda e: False,
        load=lambda e: "x", loader=Loader(), carry={}, should_stop=lambda: False,
        max_bytes=250)
    it = iter(stream)
    next(it)
    time.sleep(0.3)  # let the reader run as far as it may
    assert len(read) <= 4  # two or three entries of 100 bytes queued, not ten
    assert sum(1 for _ in it) == 10  # the rest, and the container's end
    stream.close()
