import threading

import pytest

from ragd.daemon.runtime import scheduler
from ragd.daemon.runtime.scheduler import EXPLICIT, HINT, SMALL_JOB, SWEEP, Job, JobQueue


def test_priority_order_and_fifo_within_a_priority() -> None:
    q = JobQueue()
    q.put(Job("sync", "a", SWEEP))
    q.put(Job("sync", "b", HINT, paths={"x.md"}))
    q.put(Job("sync", "c", HINT, paths={"y.md"}))
    q.put(Job("sync", "d", EXPLICIT))
    # Small work (the hints) first, then bulk work by priority.
    assert [q.get(0).collection for _ in range(4)] == ["b", "c", "d", "a"]  # type: ignore[union-attr]
    assert q.get(0) is None


def test_hints_coalesce_and_full_jobs_coalesce_but_never_with_each_other() -> None:
    q = JobQueue()
    first = q.put(Job("sync", "v", HINT, paths={"a.md"}))
    assert q.put(Job("sync", "v", HINT, paths={"b.md"})) is first
    assert first.paths == {"a.md", "b.md"} and q.remaining() == 2
    # A saved note merged into a sweep of its vault would wait with it behind bulk work.
    sweep = q.put(Job("sync", "v", SWEEP, estimate=40))
    assert sweep is not first and q.remaining() == 42
    assert q.put(Job("sync", "v", EXPLICIT, estimate=40)) is sweep
    assert sweep.priority == EXPLICIT and len(q.snapshot()) == 2
    assert q.get(0) is first and q.get(0) is sweep


def test_a_preempted_sweep_does_not_swallow_the_hint_that_preempted_it() -> None:
    q = JobQueue()
    q.put(Job("sync", "v", SWEEP, estimate=40))
    running = q.get(0)
    assert running is not None
    hint = q.put(Job("sync", "v", HINT, paths={"note.md"}))
    assert q.preempted()
    q.requeue(running)
    assert q.get(0) is hint and hint.paths == {"note.md"}
    assert q.get(0) is running


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


def test_a_bulk_job_yields_to_small_work_and_resumes_first_among_bulk() -> None:
    q = JobQueue()
    q.put(Job("sync", "books", EXPLICIT, estimate=500))
    q.put(Job("sync", "mail", SWEEP, estimate=900))
    running = q.get(0)
    assert running is not None and running.collection == "books" and running.bulk
    assert not q.preempted()
    q.put(Job("sync", "obsidian", HINT, paths={"note.md"}))
    assert q.preempted() and q.small_waiting()
    q.requeue(running)
    nxt = q.get(0)
    assert nxt is not None and nxt.collection == "obsidian" and not nxt.bulk
    assert q.small_waiting()  # running small work also holds the embedding thread
    q.task_done(nxt)
    assert not q.small_waiting()
    assert q.get(0) is running  # the interrupted bulk job before the sweep


def test_an_explicit_request_for_many_files_is_bulk() -> None:
    many = Job("sync", "p", EXPLICIT, paths={f"{n}.md" for n in range(SMALL_JOB + 1)})
    few = Job("sync", "p", EXPLICIT, paths={"a.md"})
    assert many.bulk and not few.bulk and not Job("rebuild", "all", EXPLICIT).bulk


def test_bulk_jobs_of_two_collections_take_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(scheduler.time, "monotonic", lambda: clock[0])
    q = JobQueue()
    q.put(Job("sync", "mail", SWEEP, estimate=10_000))
    running = q.get(0)
    assert running is not None
    q.put(Job("sync", "books", SWEEP, estimate=100))
    assert not q.preempted()  # its turn is not over
    clock[0] += scheduler.TURN_S + 1
    assert q.preempted()
    q.requeue(running)
    other = q.get(0)
    assert other is not None and other.collection == "books"
    clock[0] += scheduler.TURN_S + 1
    assert q.preempted()  # mail waits for its turn again
    q.task_done(other)
    assert q.get(0) is running
    clock[0] += 10 * scheduler.TURN_S
    assert not q.preempted()  # nobody else waits for a turn: it keeps going


def test_small_work_is_not_preempted_by_bulk_work_of_any_priority() -> None:
    q = JobQueue()
    q.put(Job("sync", "obsidian", HINT, paths={"note.md"}))
    running = q.get(0)
    assert running is not None
    q.put(Job("sync", "books", EXPLICIT, estimate=500))
    assert not q.preempted()  # the hint finishes first: no livelock
    q.put(Job("sync", "notes", EXPLICIT, paths={"a.md"}))
    assert q.preempted()  # an explicit request of the same size outranks a hint


def test_a_small_job_that_gives_way_goes_behind_the_small_work_it_let_through() -> None:
    """A job over one mbox is small, yet may hold 600,000 messages: after its turn, or while
    it waits on a slow conversion, it lets a saved note go first (decision 0025)."""
    q = JobQueue()
    q.put(Job("sync", "email", HINT, paths={"archive.mbox"}))
    running = q.get(0)
    assert running is not None and not running.bulk
    assert not q.small_queued()
    q.put(Job("sync", "obsidian", HINT, paths={"note.md"}))
    assert q.small_queued() and not q.preempted()  # only a yield asks for it
    q.requeue(running)
    note = q.get(0)
    assert note is not None and note.collection == "obsidian"
    q.task_done(note)
    assert q.get(0) is running  # then the mbox goes on


def test_a_small_job_gives_way_to_fresh_small_work_only() -> None:
    """Two small jobs each waiting on a slow load (a project's 6 MB note, a saved note whose
    worker is starting) gave way to each other every 0.2 s: only work that has not run yet
    is given way to."""
    q = JobQueue()
    q.put(Job("sync", "proj", HINT, paths={"big.md"}))
    proj = q.get(0)
    assert proj is not None and not q.fresh_small_queued()
    q.put(Job("sync", "vault", HINT, paths={"Saved.md"}))
    assert q.fresh_small_queued()  # the project's job waits on its load: it gives way
    q.requeue(proj)
    save = q.get(0)
    assert save is not None and save.collection == "vault"
    assert q.small_queued() and not q.fresh_small_queued()  # the save does not give way back
    q.task_done(save)
    assert q.get(0) is proj


def test_a_saved_note_never_gives_way_to_a_heavy_file_hinted_beside_it() -> None:
    """A note saved as a 63 MB feed was written came in one batch of hints with it; the note's
    worker took 0.2 s to start, the note gave way to the fresh feed job, and waited for its
    parse. Light work goes first among small jobs of a priority and never gives way to a
    heavier job; a heavy job still gives way to it."""
    q = JobQueue()
    q.put(Job("sync", "rss", HINT, paths={"flood.xml"}, weight=63 * 2**20))
    q.put(Job("sync", "vault", HINT, paths={"Saved.md"}, weight=120))
    note = q.get(0)
    assert note is not None and note.collection == "vault"  # light before heavy
    assert not q.fresh_small_queued()  # the feed outweighs it: the note waits for its worker
    q.task_done(note)
    feed = q.get(0)
    assert feed is not None and feed.collection == "rss"
    q.put(Job("sync", "vault", HINT, paths={"Next.md"}, weight=80))
    assert q.fresh_small_queued()  # the feed's parse gives way to the next save


def test_small_jobs_of_like_weight_give_way_as_before() -> None:
    """Two light jobs, or a heavy job and a fresh lighter heavy one, keep decision 0025's
    rule: what has not run yet goes first; weights add up when hints coalesce."""
    q = JobQueue()
    q.put(Job("sync", "mail", HINT, paths={"big.mbox"}, weight=900 * 2**20))
    mbox = q.get(0)
    assert mbox is not None
    q.put(Job("sync", "rss", HINT, paths={"feed.xml"}, weight=5 * 2**20))
    assert q.fresh_small_queued()
    q.put(Job("sync", "rss", HINT, paths={"other.xml"}, weight=2**30))
    assert not q.fresh_small_queued()  # together the feeds outweigh the mbox
    light = Job("sync", "a", HINT, paths={"a.md"}, weight=10)
    assert not light.heavy and not light.outweighs(Job("sync", "b", HINT, paths={"b.md"}))
