"""Background work at low priority (decision 0044): each system's branch as pure logic (its
system calls as arguments), and Linux for real: a thread, a whole process and the programs it
runs, the writer's reversible bulk mode, and a conversion worker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragd.daemon import priority
from ragd.daemon.priority import (
    BELOW_NORMAL_PRIORITY_CLASS,
    IOPOL_SCOPE_PROCESS,
    IOPOL_THROTTLE,
    IOPOL_TYPE_DISK,
    IOPRIO_CLASS_IDLE,
    IOPRIO_CLASS_SHIFT,
    IOPRIO_DEFAULT,
    IOPRIO_IDLE,
    IOPRIO_WHO_PROCESS,
    LOW_NICE,
    PRIO_DARWIN_BG,
    PRIO_DARWIN_THREAD,
    PROCESS_MODE_BACKGROUND_BEGIN,
    SCHED_BATCH,
    SCHED_OTHER,
    THREAD_MODE_BACKGROUND_BEGIN,
    THREAD_MODE_BACKGROUND_END,
)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
PRIORITY_PY = Path(priority.__file__)


def recorder() -> tuple[list[tuple[Any, ...]], Callable[..., None]]:
    calls: list[tuple[Any, ...]] = []
    return calls, lambda *args: calls.append(args)


def refuse(*args: Any) -> None:
    raise PermissionError(13, "Permission denied")


# -- Linux, as logic ---------------------------------------------------------------------------
def test_linux_lowers_each_thread_never_raising_a_nicer_one() -> None:
    nice = {11: 0, 12: 15}
    set_calls, setpriority = recorder()
    io_calls, ioprio_set = recorder()

    out = priority.linux_lower([11, 12], getpriority=lambda which, tid: nice[tid],
                               setpriority=setpriority, ioprio_set=ioprio_set)

    assert set_calls == [(os.PRIO_PROCESS, 11, LOW_NICE)]  # 12 is already nicer than 10
    assert io_calls == [(IOPRIO_WHO_PROCESS, 11, IOPRIO_IDLE), (IOPRIO_WHO_PROCESS, 12,
                                                               IOPRIO_IDLE)]
    assert IOPRIO_IDLE == 3 << 13
    assert (out.cpu, out.io, out.errors) == ("nice 10", "I/O idle", ())


def test_linux_refusals_are_reported_not_raised() -> None:
    out = priority.linux_lower([11], getpriority=lambda *a: 0, setpriority=refuse,
                               ioprio_set=refuse)
    assert out.cpu is None and out.io is None
    assert len(out.errors) == 2 and "Permission denied" in out.errors[0]


def test_linux_skips_a_thread_that_ended_meanwhile() -> None:
    def getpriority(which: int, tid: int) -> int:
        raise ProcessLookupError(3, "No such process")

    io_calls, ioprio_set = recorder()
    out = priority.linux_lower([99], getpriority=getpriority, setpriority=refuse,
                               ioprio_set=ioprio_set)
    assert io_calls == [] and out.errors == ()


@pytest.mark.parametrize(("on", "policy", "prio", "words"), [
    (True, SCHED_BATCH, IOPRIO_IDLE, ("SCHED_BATCH", "I/O idle")),
    (False, SCHED_OTHER, IOPRIO_DEFAULT, ("SCHED_OTHER", "I/O default")),
])
def test_linux_bulk_mode_switches_both_ways(on: bool, policy: int, prio: int,
                                            words: tuple[str, str]) -> None:
    sched_calls, set_scheduler = recorder()
    io_calls, ioprio_set = recorder()
    out = priority.linux_bulk_mode(7, on, set_scheduler=set_scheduler, ioprio_set=ioprio_set)
    assert sched_calls == [(7, policy)]
    assert io_calls == [(IOPRIO_WHO_PROCESS, 7, prio)]
    assert (out.cpu, out.io) == words


def test_linux_syscall_numbers_per_machine() -> None:
    assert priority.IOPRIO_SYSCALLS["x86_64"] == (251, 252)
    assert priority.IOPRIO_SYSCALLS["aarch64"] == (30, 31)
    assert priority._linux_ioprio_calls("sparc") is None


# -- macOS, as logic ---------------------------------------------------------------------------
def test_macos_lowers_the_process_and_throttles_its_disk_io() -> None:
    set_calls, setpriority = recorder()
    io_calls: list[tuple[int, int, int]] = []

    def setiopolicy(*args: int) -> int:
        io_calls.append(args)  # type: ignore[arg-type]
        return 0

    out = priority.darwin_lower_process(getpriority=lambda *a: 0, setpriority=setpriority,
                                        setiopolicy=setiopolicy)
    assert set_calls == [(os.PRIO_PROCESS, 0, LOW_NICE)]
    assert io_calls == [(IOPOL_TYPE_DISK, IOPOL_SCOPE_PROCESS, IOPOL_THROTTLE)]
    assert (out.cpu, out.io, out.errors) == ("nice 10", "I/O throttled", ())


def test_macos_refused_io_policy_is_reported() -> None:
    out = priority.darwin_lower_process(getpriority=lambda *a: 12, setpriority=refuse,
                                        setiopolicy=lambda *a: -1)
    assert out.cpu == "nice 10"  # already at 12: nothing to set
    assert out.io is None and out.errors == ("I/O throttle: setiopolicy_np refused",)


def test_macos_thread_enters_and_leaves_the_background_band() -> None:
    calls, setpriority = recorder()
    assert priority.darwin_thread(True, setpriority=setpriority).cpu == "background band"
    assert priority.darwin_thread(False, setpriority=setpriority).cpu == "normal band"
    assert calls == [(PRIO_DARWIN_THREAD, 0, PRIO_DARWIN_BG), (PRIO_DARWIN_THREAD, 0, 0)]


# -- Windows, as logic -------------------------------------------------------------------------
def test_windows_lowers_the_priority_class_then_enters_background_mode() -> None:
    calls: list[int] = []
    out = priority.windows_lower_process(set_priority_class=lambda v: calls.append(v) or True)
    assert calls == [BELOW_NORMAL_PRIORITY_CLASS, PROCESS_MODE_BACKGROUND_BEGIN]
    assert (out.cpu, out.io, out.errors) == ("below normal", "background mode", ())

    failed = priority.windows_lower_process(set_priority_class=lambda v: False)
    assert failed.cpu is None and len(failed.errors) == 2


def test_windows_thread_background_mode_both_ways() -> None:
    calls: list[int] = []
    ok = priority.windows_thread(True, set_thread_priority=lambda v: calls.append(v) or True)
    priority.windows_thread(False, set_thread_priority=lambda v: calls.append(v) or True)
    assert calls == [THREAD_MODE_BACKGROUND_BEGIN, THREAD_MODE_BACKGROUND_END]
    assert ok.cpu == "background mode"
    assert priority.windows_thread(True, set_thread_priority=lambda v: False).errors


def test_an_unknown_system_is_reported_not_raised() -> None:
    assert priority.lower("thread", platform="plan9").errors
    assert priority.bulk_mode(True, platform="plan9").errors


# -- Linux, for real ---------------------------------------------------------------------------
def ioprio_class(tid: int) -> int:
    return priority.linux_ioprio_get(tid) >> IOPRIO_CLASS_SHIFT


def on_thread(fn: Callable[[], Any]) -> Any:
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(fn()))
    thread.start()
    thread.join()
    return box[0]


@linux_only
def test_a_lowered_thread_is_nice_and_io_idle_and_the_others_are_not() -> None:
    main = threading.get_native_id()
    before = priority.linux_thread_nice(main)

    def lowered() -> tuple[int, int, int]:
        priority.lower_this_thread()
        tid = threading.get_native_id()
        child: list[int] = []  # a thread it starts inherits both
        t = threading.Thread(target=lambda: child.append(threading.get_native_id())
                             or child.append(priority.linux_thread_nice(child[0])))
        t.start()
        t.join()
        return priority.linux_thread_nice(tid), ioprio_class(tid), child[1]

    nice, io_class, child_nice = on_thread(lowered)
    assert nice == max(before, LOW_NICE) and child_nice == nice
    assert io_class == IOPRIO_CLASS_IDLE
    assert priority.linux_thread_nice(main) == before  # the caller's thread is untouched
    assert ioprio_class(main) != IOPRIO_CLASS_IDLE


@linux_only
def test_bulk_mode_is_taken_back_for_a_save() -> None:
    def switch() -> list[tuple[int, int]]:
        seen = []
        for on in (True, False, True, False):
            priority.bulk_mode(on)
            seen.append((os.sched_getscheduler(0), ioprio_class(threading.get_native_id())))
        return seen

    assert on_thread(switch) == [(SCHED_BATCH, IOPRIO_CLASS_IDLE), (SCHED_OTHER, 0)] * 2


_CHILD = """
import os, subprocess, sys, threading, time
sys.path.insert(0, {dir!r})
import priority
started = threading.Event()
box = []
def early():
    box.append(threading.get_native_id()); started.set(); time.sleep(2)
threading.Thread(target=early, daemon=True).start()
started.wait()
print(priority.lower_this_process())
proc = subprocess.Popen(["sleep", "2"])
print(priority.linux_thread_nice(threading.get_native_id()),
      priority.linux_thread_nice(box[0]),
      priority.linux_thread_nice(proc.pid, proc.pid),
      priority.linux_ioprio_get(proc.pid) >> 13)
proc.kill()
"""


@linux_only
def test_a_lowered_process_takes_its_threads_and_its_programs_along(tmp_path: Path) -> None:
    """What a worker does first thing: every thread (even one started before) and every
    program it runs (Tesseract, ebook-convert) are at nice 10 and I/O idle."""
    out = subprocess.run([sys.executable, "-c", _CHILD.format(dir=str(PRIORITY_PY.parent))],
                         capture_output=True, text=True, timeout=60, check=True)
    lines = out.stdout.split("\n")
    assert lines[0] == "nice 10, I/O idle", out.stderr
    assert lines[1].split() == ["10", "10", "10", str(IOPRIO_CLASS_IDLE)]


_UNPRIVILEGED = """
import os, sys, threading, types
priority = sys.modules["priority"] = types.ModuleType("priority")
exec(sys.stdin.read(), priority.__dict__)
tid = threading.get_native_id()
out = []
for on in (True, False):
    out.append(str(priority.bulk_mode(on)))
os.setpriority(os.PRIO_PROCESS, tid, 10)
try:
    os.setpriority(os.PRIO_PROCESS, tid, 0)
    out.append("nice restored")
except PermissionError:
    out.append("nice not restored")
print("|".join(out))
"""


@linux_only
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv")
                    or not os.access("/usr/bin/python3", os.X_OK),
                    reason="needs root, setpriv and /usr/bin/python3 to run as nobody")
def test_why_the_writer_switches_policy_not_nice() -> None:
    """As an ordinary user: a nice value once raised cannot be taken back (RLIMIT_NICE 0), so
    the writer cannot use it for bulk work and still serve a save at normal priority; its
    bulk mode (SCHED_BATCH, I/O idle) is taken back without privileges."""
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          "/usr/bin/python3", "-c", _UNPRIVILEGED],
                         input=PRIORITY_PY.read_text(encoding="utf-8"), capture_output=True,
                         text=True, timeout=60, check=True, cwd="/")
    assert out.stdout.strip().split("|") == [
        "SCHED_BATCH, I/O idle", "SCHED_OTHER, I/O default", "nice not restored"], out.stderr


@linux_only
@pytest.mark.slow
def test_a_conversion_worker_runs_at_low_priority(tmp_path: Path) -> None:
    from ragd.daemon.convert.process import ConversionWorker

    worker = ConversionWorker(timeout_s=60)
    try:
        assert not isinstance(worker.convert("csv", b"a,b\n1,2\n"), type(None))
        pid = worker.pid
        assert pid is not None
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        assert {priority.linux_thread_nice(t, pid) for t in tids} == {LOW_NICE}
        assert {ioprio_class(t) for t in tids} == {IOPRIO_CLASS_IDLE}
    finally:
        worker.close()


_SPIN = """
import os, sys, time
sys.path.insert(0, {dir!r})
os.sched_setaffinity(0, {{0}})
if sys.argv[1] == "low":
    import priority
    priority.lower_this_process()
sys.stdin.readline()  # start together
n, end = 0, time.monotonic() + 3.0
while time.monotonic() < end:
    n += 1
print(n)
"""


def shares(low: bool) -> float:
    """The share of one core a background process gets against a foreground one."""
    code = _SPIN.format(dir=str(PRIORITY_PY.parent))
    procs = [subprocess.Popen([sys.executable, "-c", code, role], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
             for role in ("normal", "low" if low else "normal")]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    fore, back = (int(p.communicate(timeout=60)[0]) for p in procs)
    return back / (fore + back)


@linux_only
@pytest.mark.slow
def test_a_lowered_process_gives_way_on_a_shared_core() -> None:
    """Two busy processes on one core: the background one's share, at normal priority and
    lowered (CFS weights for nice 0 and 10 give 50 % and 9.7 %)."""
    normal, lowered = shares(low=False), shares(low=True)
    print(f"\nbackground share of a shared core: normal {normal:.1%}, lowered {lowered:.1%}")
    assert 0.3 < normal < 0.7
    assert lowered < 0.2
