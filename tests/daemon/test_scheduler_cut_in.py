"""Explicit requests cut in on long scans (decision 0043): a hint or sweep over one mbox, feed
or commit log is small by its paths yet may run for minutes; a new explicit request waits
behind an explicit bulk job for seconds, not a turn."""

from __future__ import annotations

import pytest

from ragd.daemon.runtime import scheduler
from ragd.daemon.runtime.scheduler import EXPLICIT, HINT, SWEEP, Job, JobQueue


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(scheduler.time, "monotonic", lambda: now[0])
    return now


def test_a_new_collection_cuts_in_on_a_long_scan_of_one_mbox(clock: list[float]) -> None:
    q = JobQueue()
    q.put(Job("sync", "email", HINT, paths={"archive.mbox"}))
    mbox = q.get(0)
    assert mbox is not None and not mbox.bulk
    q.put(Job("sync", "newbie", EXPLICIT, estimate=1))  # a first index: bulk, explicit
    assert not q.preempted()  # the scan has its first seconds
    clock[0] += scheduler.CUT_IN_S
    assert q.preempted()
    q.requeue(mbox)
    assert mbox.bulk and mbox.long  # the scan is bulk work from now on...
    first = q.get(0)
    assert first is not None and first.collection == "newbie"  # ...so it goes behind
    clock[0] += 1
    q.put(Job("sync", "obsidian", HINT, paths={"note.md"}))
    assert q.preempted()  # a saved note still goes first
    q.requeue(first)
    note = q.get(0)
    assert note is not None and note.collection == "obsidian"
    q.task_done(note)
    assert q.get(0) is first  # then the new collection, then the mbox
    q.task_done(first)
    assert q.get(0) is mbox and mbox.priority == HINT


def test_a_hint_that_runs_long_goes_on_as_bulk_work(clock: list[float]) -> None:
    q = JobQueue()
    q.put(Job("sync", "rss", HINT, paths={"big.xml"}))
    feed = q.get(0)
    assert feed is not None
    clock[0] += scheduler.LONG_S - 0.1
    assert not q.preempted()
    clock[0] += 0.1
    assert q.preempted()  # nothing waits, yet it yields once...
    q.requeue(feed)
    again = q.get(0)
    assert again is feed and feed.bulk and feed.runs == 2  # ...and goes on as bulk
    clock[0] += 10 * scheduler.LONG_S
    assert not q.preempted()  # and then keeps going while nothing waits
    q.put(Job("sync", "books", EXPLICIT, estimate=500))
    assert q.preempted()  # an explicit bulk request passes it at once


def test_an_explicit_small_job_is_never_cut_in_on(clock: list[float]) -> None:
    q = JobQueue()
    q.put(Job("sync", "obsidian", EXPLICIT, paths={"Big.pdf"}))  # a note write's job
    write = q.get(0)
    assert write is not None
    q.put(Job("sync", "newbie", EXPLICIT, estimate=1))
    clock[0] += 10 * scheduler.LONG_S
    assert not q.preempted()


def test_a_new_explicit_request_cuts_in_on_an_explicit_bulk_job_once(
        clock: list[float]) -> None:
    q = JobQueue()
    q.put(Job("sync", "big", EXPLICIT, estimate=100_000))
    big = q.get(0)
    assert big is not None
    q.put(Job("sync", "newbie", EXPLICIT, estimate=1))
    assert not q.preempted()
    clock[0] += scheduler.CUT_IN_S
    assert q.preempted()  # seconds, not a turn of TURN_S
    q.requeue(big)
    newbie = q.get(0)
    assert newbie is not None and newbie.collection == "newbie"
    clock[0] += scheduler.TURN_S - 1
    assert not q.preempted()  # big has run already: it waits for a turn, no ping-pong
    clock[0] += 1
    assert q.preempted()
    q.requeue(newbie)
    assert q.get(0) is big


def test_a_request_for_the_collection_being_scanned_does_not_cut_in(
        clock: list[float]) -> None:
    q = JobQueue()
    q.put(Job("sync", "email", SWEEP))
    sweep = q.get(0)
    assert sweep is not None
    q.put(Job("sync", "email", EXPLICIT, paths={"archive.mbox"}))
    assert q.preempted()  # small explicit work passes bulk work, as before
    q.requeue(sweep)
    small = q.get(0)
    assert small is not None and not small.bulk
    q.put(Job("sync", "email", EXPLICIT))  # "Reindex now" of the same collection
    clock[0] += 10 * scheduler.LONG_S
    assert not q.preempted()  # the running job does that work already


def test_a_merged_job_keeps_having_run(clock: list[float]) -> None:
    q = JobQueue()
    q.put(Job("sync", "big", EXPLICIT))
    big = q.get(0)
    assert big is not None
    q.put(Job("sync", "big", SWEEP))  # queued behind it, never run
    q.put(Job("sync", "newbie", EXPLICIT))
    clock[0] += scheduler.CUT_IN_S
    q.requeue(big)  # merged into the queued sweep of the same collection
    assert big.alias is not None and big.alias.runs == 1
