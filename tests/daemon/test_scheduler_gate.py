"""The scheduler's gate (decision 0044): held bulk jobs stay queued and a running one yields,
small jobs never wait for it, and it is looked at afresh before a bulk job starts."""

from __future__ import annotations

import pytest

from ragd.daemon.runtime import scheduler
from ragd.daemon.runtime.scheduler import EXPLICIT, HINT, SWEEP, Job, JobQueue


class Gate:
    def __init__(self) -> None:
        self.why: str | None = "battery"
        self.asked: list[bool] = []

    def __call__(self, fresh: bool) -> str | None:
        self.asked.append(fresh)
        return self.why


def bulk(name: str = "vault", priority: int = EXPLICIT) -> Job:
    return Job("sync", name, priority, estimate=300)


def save(name: str = "vault") -> Job:
    return Job("sync", name, HINT, paths={"Inbox/idea.md"})


def test_small_work_runs_while_bulk_work_waits_then_bulk_runs() -> None:
    gate = Gate()
    q = JobQueue(hold_bulk=gate)
    q.put(bulk())
    q.put(save())
    first = q.get(timeout=1)
    assert first is not None and not first.bulk
    q.task_done(first)
    assert q.get(timeout=0.2) is None  # bulk waits
    assert q.held_for == "battery" and q.remaining() == 300  # still counted, still queued
    assert [j["collection"] for j in q.snapshot()] == ["vault"]
    gate.why = None
    job = q.get(timeout=2)
    assert job is not None and job.bulk


def test_the_gate_is_looked_at_afresh_before_a_bulk_job_starts() -> None:
    gate = Gate()
    gate.why = None
    q = JobQueue(hold_bulk=gate)
    q.put(save())
    q.task_done(q.get(timeout=1))  # type: ignore[arg-type]
    assert True not in gate.asked  # a save needs no fresh look
    q.put(bulk())
    assert q.get(timeout=1) is not None
    assert gate.asked[-2:] == [False, True]


def test_a_bulk_job_that_finds_the_gate_closed_at_its_start_stays_queued() -> None:
    calls: list[bool] = []

    def gate(fresh: bool) -> str | None:
        calls.append(fresh)
        return "battery" if fresh else None  # the cached look is stale: mains before

    q = JobQueue(hold_bulk=gate)
    q.put(bulk())
    assert q.get(timeout=0.3) is None


def test_a_running_bulk_job_yields_when_the_gate_closes_a_save_does_not() -> None:
    gate = Gate()
    gate.why = None
    q = JobQueue(hold_bulk=gate)
    q.put(bulk())
    running = q.get(timeout=1)
    assert running is not None and not q.preempted()
    gate.why = "battery"
    assert q.preempted()
    q.requeue(running)
    q.put(save())
    small = q.get(timeout=1)
    assert small is not None and not small.bulk and not q.preempted()


def test_a_held_explicit_request_does_not_cut_in_on_a_hint(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """An explicit bulk request of another collection cuts in on a hint (decision 0043),
    but not while the gate holds it: the hint would give way to work that cannot run."""
    monkeypatch.setattr(scheduler, "CUT_IN_S", 0.0)
    gate = Gate()
    q = JobQueue(hold_bulk=gate)
    q.put(Job("sync", "mail", SWEEP, paths={"inbox.mbox"}))
    running = q.get(timeout=1)
    assert running is not None
    q.put(bulk("project"))
    assert not q.preempted()
    gate.why = None
    q.bulk_held()  # the gate opens
    assert q.preempted()


def test_no_gate_means_no_wait() -> None:
    q = JobQueue()
    q.put(bulk())
    job = q.get(timeout=1)
    assert job is not None and q.held_for is None
