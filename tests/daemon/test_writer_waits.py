"""The requests that wait for the writer (decision 0043), in process: a bounded number of
places, `busy` past them, places given back by clients that hang up, and the `busy` error as
the wire, the command line and the MCP bridge carry it."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

import pytest

from ragd.daemon.errors import Interrupted, WriterBusy
from ragd.daemon.ipc import protocol as p
from ragd.daemon.runtime.scheduler import EXPLICIT, Job, JobQueue
from ragd.daemon.runtime.writer_waits import WriterWaits


@dataclass
class FakeDaemon:
    """What WriterWaits reads of the daemon: its queue, its stop flag, the backlog."""

    queue: JobQueue = field(default_factory=JobQueue)
    _stop: threading.Event = field(default_factory=threading.Event)
    left: int = 0

    def unembedded(self, names: list[str] | None) -> int:
        return self.left


@dataclass
class FakeConn:
    closed: bool = False


def run(coro_fn):  # type: ignore[no-untyped-def]
    return asyncio.run(coro_fn())


def test_past_its_places_a_request_is_answered_busy_before_it_starts() -> None:
    d = FakeDaemon()

    async def main() -> None:
        waits = WriterWaits(places=2, patience_s=0.2)
        held = asyncio.Event()

        async def hold() -> None:
            async with waits.place(d):  # type: ignore[arg-type]
                await held.wait()

        holders = [asyncio.create_task(hold()) for _ in range(2)]
        await asyncio.sleep(0.05)
        assert waits.waiting == 2
        t0 = time.monotonic()
        with pytest.raises(WriterBusy) as busy:
            async with waits.place(d):  # type: ignore[arg-type]
                raise AssertionError("no place should be free")
        assert 0.2 <= time.monotonic() - t0 < 1.0
        assert busy.value.code == "busy" and busy.value.retry_after_s == 5.0
        assert "2 requests already wait" in busy.value.message
        assert "try again in 5 seconds" in busy.value.hint
        assert waits.refused == 1
        held.set()
        await asyncio.gather(*holders)
        assert waits.waiting == 0
        async with waits.place(d):  # type: ignore[arg-type]
            assert waits.waiting == 1

    run(main)


def test_a_place_that_frees_within_the_patience_is_taken() -> None:
    d = FakeDaemon()

    async def main() -> None:
        waits = WriterWaits(places=1, patience_s=2.0)

        async def brief() -> None:
            async with waits.place(d):  # type: ignore[arg-type]
                await asyncio.sleep(0.2)

        first = asyncio.create_task(brief())
        await asyncio.sleep(0.05)
        async with waits.place(d):  # type: ignore[arg-type]
            assert waits.refused == 0
        await first

    run(main)


def test_a_job_wait_follows_its_alias_and_raises_its_error() -> None:
    d = FakeDaemon()

    async def main() -> None:
        waits = WriterWaits(places=2)
        job, other = Job("sync", "a", EXPLICIT), Job("sync", "a", EXPLICIT)
        job.alias = other
        job.done.set()
        threading.Timer(0.1, lambda: other.finish(["report"])).start()
        assert await waits.job(job, FakeConn(), 5) == ["report"]  # type: ignore[arg-type]
        failed = Job("sync", "b", EXPLICIT)
        failed.finish(error=Interrupted("stopping"))
        with pytest.raises(Interrupted):
            await waits.job(failed, FakeConn(), 5)  # type: ignore[arg-type]
        with pytest.raises(TimeoutError):
            await waits.job(Job("sync", "c", EXPLICIT), FakeConn(), 0.3)  # type: ignore[arg-type]

    run(main)
    assert d.queue.idle()


def test_a_client_that_hangs_up_stops_waiting_and_its_job_stays() -> None:
    d = FakeDaemon(left=10)

    async def main() -> None:
        waits = WriterWaits(places=1)
        conn = FakeConn()
        job = d.queue.put(Job("sync", "a", EXPLICIT))
        asyncio.get_running_loop().call_later(0.2, lambda: setattr(conn, "closed", True))
        with pytest.raises(Interrupted):
            async with waits.place(d):  # type: ignore[arg-type]
                await waits.job(job, conn, 60)  # type: ignore[arg-type]
        assert waits.waiting == 0 and not job.done.is_set()
        with pytest.raises(Interrupted):
            await waits.embedded(d, ["a"], conn, 60)  # type: ignore[arg-type]

    run(main)
    assert d.queue.snapshot()[0]["collection"] == "a"


def test_an_embedding_wait_ends_when_the_backlog_is_empty_or_at_its_timeout() -> None:
    d = FakeDaemon(left=3)

    async def main() -> None:
        waits = WriterWaits()
        threading.Timer(0.2, lambda: setattr(d, "left", 0)).start()
        t0 = time.monotonic()
        await waits.embedded(d, None, FakeConn(), 30)  # type: ignore[arg-type]
        assert time.monotonic() - t0 < 5
        d.left = 1
        t0 = time.monotonic()
        await waits.embedded(d, None, FakeConn(), 0.3)  # type: ignore[arg-type]
        assert time.monotonic() - t0 < 5

    run(main)


def test_busy_travels_with_its_code_and_retry_hint() -> None:
    exc = WriterBusy("ragd is busy: 4 requests already wait for its indexer",
                     "try again in 5 seconds", retry_after_s=5.0)
    reply = p.error_from_exception(7, exc)
    assert reply["error"]["code"] == p.APPLICATION_ERROR
    assert reply["error"]["data"] == {"code": "busy", "hint": "try again in 5 seconds",
                                      "retry_after_s": 5.0}
    back = p.exception_from_error(reply["error"])
    assert isinstance(back, WriterBusy) and back.retry_after_s == 5.0
    assert (back.message, back.hint) == (exc.message, exc.hint)


def test_the_bridge_and_the_command_line_say_what_to_do(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from ragd.daemon.cli import main as cli
    from ragd.mcp_bridge.server import error_text

    exc = WriterBusy("ragd is busy: 4 requests already wait for its indexer",
                     "try again in 5 seconds; nothing was changed", retry_after_s=5.0)
    text = error_text("rag_index", exc)
    assert text.startswith("rag_index failed (busy): ragd is busy")
    assert "What to do: Try again in 5 seconds" in text

    def busy(args: object) -> int:
        raise exc

    monkeypatch.setitem(cli.COMMANDS, "status", busy)
    assert cli.main(["status"]) != 0
    err = capsys.readouterr().err
    assert "error: ragd is busy" in err and "hint: try again in 5 seconds" in err
