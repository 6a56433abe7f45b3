"""A worker's lifeline to the daemon (decision 0024): the parent checks of every platform as
pure logic, and the polling path (what macOS and Windows rely on) with real processes."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from ragd.daemon.convert import lifeline
from ragd.daemon.convert.process import (
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOB_OBJECT_LIMIT_PROCESS_MEMORY,
    JobLimits,
    job_limits,
)

REPO = Path(__file__).resolve().parents[3]


def test_on_posix_the_parent_is_gone_when_the_parent_pid_changes() -> None:
    ppid = [4242]
    alive = lifeline.parent_check(4242, "darwin", getppid=lambda: ppid[0])
    assert alive()
    ppid[0] = 1  # adopted by launchd (or init, or a subreaper: any other pid)
    assert not alive()


def test_on_windows_the_parent_is_watched_through_a_handle_opened_at_start() -> None:
    opened: list[int] = []
    exited = {"handle-7": False}

    def open_process(pid: int) -> str:
        opened.append(pid)
        return "handle-7"

    alive = lifeline.parent_check(7, "win32", open_process=open_process,
                                  exited=lambda h: exited[str(h)])
    assert alive() and opened == [7]
    exited["handle-7"] = True  # the daemon's process ended; its pid may be reused now
    assert not alive()
    # A parent that cannot be opened is gone already.
    assert not lifeline.parent_check(8, "win32", open_process=lambda pid: None)()


def test_watch_calls_on_orphan_once_the_parent_is_gone() -> None:
    answers = iter([True, True, False])
    orphaned = threading.Event()
    lifeline.watch(lambda: next(answers), orphaned.set, poll_s=0.001)
    assert orphaned.is_set()
    stop = threading.Event()
    stop.set()
    lifeline.watch(lambda: False, lambda: pytest.fail("stopped watches do not fire"),
                   stop=stop, poll_s=0.001)


def test_a_parent_gone_before_the_watch_starts_is_noticed_at_once() -> None:
    called: list[str] = []
    thread = lifeline.die_with_parent(os.getpid() + 10_000_000, platform="darwin",
                                      on_orphan=lambda: called.append("orphan"))
    assert thread is None and called == ["orphan"]


def test_job_object_limits_kill_on_close_and_cap_memory() -> None:
    limits = job_limits(2048)
    flags = limits.BasicLimitInformation.LimitFlags
    assert flags == JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_PROCESS_MEMORY
    assert limits.ProcessMemoryLimit == 2048 * 2**20
    assert job_limits(0).BasicLimitInformation.LimitFlags == JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    if ctypes.sizeof(ctypes.c_void_p) == 8:  # JOBOBJECT_EXTENDED_LIMIT_INFORMATION on x64
        assert ctypes.sizeof(JobLimits) == 144


# The parent starts a watched child, prints its pid and dies at once; the child must follow.
_CHILD = ("import os, sys, time\n"
          "from ragd.daemon.convert.lifeline import die_with_parent\n"
          "die_with_parent(os.getppid(), platform=sys.argv[1])\n"
          "print(os.getpid(), flush=True)\n"
          "time.sleep(60)\n")
_ORPHAN = ("import os, subprocess, sys\n"
           "child = subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]],\n"
           "                         stdout=subprocess.PIPE, start_new_session=True)\n"
           "print(child.stdout.readline().decode().strip(), flush=True)\n"
           "os._exit(0)\n")


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("platform", ["darwin", "linux"])
def test_a_real_orphan_exits(platform: str) -> None:
    """"darwin" runs the polling path for real (no death signal); "linux" the kernel's."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", _ORPHAN, _CHILD, platform], capture_output=True,
                         text=True, env=env, timeout=30, check=True)
    pid = int(out.stdout.strip())
    budget = lifeline.POLL_S + 2.0 if platform == "darwin" else 1.0
    deadline = time.monotonic() + budget
    while _state(pid) not in (None, "Z", "X") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _state(pid) in (None, "Z", "X"), f"the orphan {pid} still runs"


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")
def test_a_worker_ends_what_its_programs_left_behind_but_not_itself(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import os, subprocess, sys, time
        from ragd.daemon.convert import lifeline
        lifeline.die_with_parent(os.getppid())
        left = subprocess.Popen(["sleep", "60"])  # in this worker's group
        assert lifeline.owns_group() and lifeline.end_rest_of_group()
        left.wait(timeout=10)
        print(left.returncode, flush=True)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=30, start_new_session=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(-15)  # SIGTERM for the leftover, the worker lived on
