"""Read ahead: the next item loads while this one is used; a wait gives way to should_stop."""

from __future__ import annotations

import threading

import pytest

from daemon.errors import Interrupted
from daemon.indexer.readahead import ReadAhead


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
