"""The daemon's side of the conversion worker when it must stop (decision 0024): a cancel
ends the conversion under way at once and for good, kills what the worker started, a
client's converter is bounded, and a worker outlives the thread that started it."""

from __future__ import annotations

import os
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from slow_documents import alive, slow_latex

from ragd.daemon.convert.process import ConversionCancelled, ConversionWorker
from ragd.daemon.errors import ConverterBusy, Interrupted
from ragd.daemon.models import Skip

pytestmark = pytest.mark.slow


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``fn`` on a thread; its result, or what it raised (BaseException too), lands in the
    list."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:  # ConversionCancelled is one
            box.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def tiny_mobi() -> bytes:
    """The smallest bytes the worker hands to ebook-convert (a Mobipocket header)."""
    first = 78 + 8 + 2
    header = (b"tiny".ljust(32, b"\0") + b"\0" * 28 + b"BOOKMOBI" + b"\0" * 8
              + struct.pack(">H", 1))
    entries = struct.pack(">IB3s", first, 0, b"\0\0\0") + b"\0\0"
    record0 = struct.pack(">HHIHHHH", 1, 0, 0, 0, 4096, 0, 0) + b"MOBI" + b"\0" * 228
    return header + entries + record0


def converting(worker: ConversionWorker) -> int:
    deadline = time.monotonic() + 30
    while not (worker.running and worker.calls) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker.pid is not None
    return worker.pid


def test_a_cancel_ends_the_conversion_at_once_and_for_good() -> None:
    worker = ConversionWorker(timeout_s=120, idle_s=0)
    thread, box = in_thread(lambda: worker.convert("latex", slow_latex(2.0)))
    pid = converting(worker)
    t0 = time.monotonic()
    worker.cancel()
    thread.join(10)
    assert time.monotonic() - t0 < 1.0
    assert box and isinstance(box[0], ConversionCancelled)
    assert not alive(pid)
    with pytest.raises(ConversionCancelled):  # no new worker after a stop
        worker.convert("html", b"<p>late</p>")
    assert worker.starts == 1
    worker.close()


def test_a_client_converter_is_bounded_and_says_interrupted_on_stop() -> None:
    worker = ConversionWorker(timeout_s=120, idle_s=0, max_calls=1, name="on-demand",
                              cancel_error=lambda: Interrupted("the daemon is stopping"))
    thread, box = in_thread(lambda: worker.convert("latex", slow_latex(2.0)))
    converting(worker)
    with pytest.raises(ConverterBusy) as busy:
        worker.convert("html", b"<p>one too many</p>")
    assert "on-demand" in str(busy.value) and busy.value.code == "converter_busy"
    worker.cancel()
    thread.join(10)
    assert box and isinstance(box[0], Interrupted)
    worker.close()


def test_a_worker_outlives_the_thread_that_started_it() -> None:
    """On Linux the death signal follows the thread that forked a child: read-ahead threads
    end with their sync, and their worker must not die with them."""
    worker = ConversionWorker(timeout_s=60, idle_s=0)
    try:
        thread, box = in_thread(lambda: worker.convert("html", b"<p>first</p>"))
        thread.join(30)
        assert not isinstance(box[0], Skip | BaseException), box
        time.sleep(0.3)  # let a wrongly delivered death signal land before looking
        assert worker.running
        answer = worker.convert("html", b"<p>second</p>")
        assert not isinstance(answer, Skip) and "second" in answer["markdown"]
        assert worker.starts == 1
    finally:
        worker.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_cancelled_worker_takes_ebook_convert_and_its_children_along(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pidfile = tmp_path / "grandchild.pid"
    exe = bin_dir / "ebook-convert"
    # ebook-convert starting a program of its own, as Calibre's may.
    exe.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pidfile}\nwait\n", encoding="utf-8")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    worker = ConversionWorker(timeout_s=120, idle_s=0)
    thread, box = in_thread(lambda: worker.convert("mobi", tiny_mobi()))
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    grandchild = int(pidfile.read_text())
    worker.cancel()
    thread.join(10)
    assert box and isinstance(box[0], ConversionCancelled)
    deadline = time.monotonic() + 2
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(grandchild), "ebook-convert's own child outlived the worker"
    worker.close()
