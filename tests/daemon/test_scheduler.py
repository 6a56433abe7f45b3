import threading

from daemon.runtime.scheduler import EXPLICIT, HINT, SWEEP, Job, JobQueue


def test_priority_order_and_fifo_within_a_priority() -> None:
    q = JobQueue()
    q.put(Job("sync", "a", SWEEP))
    q.put(Job("sync", "b", HINT, paths={"x.md"}))
    q.put(Job("sync", "c", HINT, paths={"y.md"}))
    q.put(Job("sync", "d", EXPLICIT))
    assert [q.get(0).collection for _ in range(4)] == ["d", "b", "c", "a"]  # type: ignore[union-attr]
    assert q.get(0) is None


def test_hints_coalesce_and_a_full_job_absorbs_them() -> None:
    q = JobQueue()
    first = q.put(Job("sync", "v", HINT, paths={"a.md"}))
    assert q.put(Job("sync", "v", HINT, paths={"b.md"})) is first
    assert first.paths == {"a.md", "b.md"} and q.remaining() == 2
    full = q.put(Job("sync", "v", EXPLICIT, estimate=40))
    assert full is first and first.paths is None and first.priority == EXPLICIT
    assert q.remaining() == 40
    assert len(q.snapshot()) == 1


def test_remaining_counts_queued_and_running() -> None:
    q = JobQueue()
    q.put(Job("sync", "a", HINT, paths={"1", "2", "3"}))
    q.put(Job("sync", "b", SWEEP, estimate=10))
    job = q.get(0)
    assert job is not None and q.remaining() == 13
    q.progress_left = 1
    assert q.remaining() == 11
    q.task_done(job)
    assert q.remaining() == 10 and not q.idle()


def test_pause_keeps_the_queue_and_blocks_get() -> None:
    q = JobQueue()
    q.put(Job("sync", "a", HINT, paths={"x"}))
    q.pause()
    assert q.get(timeout=0.05) is None and q.remaining() == 1
    got: list[Job | None] = []
    t = threading.Thread(target=lambda: got.append(q.get(timeout=5)))
    t.start()
    q.resume()
    t.join(5)
    assert got and got[0] is not None and got[0].collection == "a"


def test_interrupted_job_goes_back_to_the_front() -> None:
    q = JobQueue()
    q.put(Job("sync", "later", EXPLICIT))
    job = Job("sync", "now", SWEEP)
    q.put(job)
    running = q.get(0)
    assert running is not None and running.collection == "later"
    q.requeue_front(running)
    assert q.get(0) is running


def test_close_fails_waiters() -> None:
    q = JobQueue()
    job = q.put(Job("sync", "a", EXPLICIT))
    q.close()
    assert q.get(0) is None
    try:
        job.wait(1)
    except RuntimeError as exc:
        assert "shutting down" in str(exc)
    else:
        raise AssertionError("wait() should raise")
