"""Run a real `ragd daemon` process for a test, and poll it with deadlines (never sleep-wait)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ragd.daemon.ipc.client import Client
from ragd.daemon.ipc.discovery import find_daemon
from ragd.daemon.settings.paths import resolve_paths

T = TypeVar("T")


def wait_for(fn: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll ``fn`` until it returns something truthy; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except Exception as exc:  # the daemon may be restarting: keep polling
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


STARTED: list[DaemonProc] = []  # conftest kills what a failed test left running


class DaemonProc:
    """A daemon subprocess bound to this test's RAGD_HOME."""

    def __init__(self, home: Path, vault: Path | None, log: Path) -> None:
        self.home, self.vault, self.log = home, vault, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> DaemonProc:
        env = {**os.environ, "RAGD_HOME": str(self.home), "HF_HUB_OFFLINE": "1",
               "RAGD_DAEMON_DEBOUNCE_MS": os.environ.get("RAGD_DAEMON_DEBOUNCE_MS", "150")}
        args = [sys.executable, "-m", "ragd.daemon.cli.main", "daemon"]
        if self.vault is not None:
            args += ["--vault", str(self.vault)]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, env=env, stdout=log, stderr=log,
                                         start_new_session=True)
        STARTED.append(self)
        wait_for(lambda: find_daemon(resolve_paths({"RAGD_HOME": str(self.home)})), 30,
                 "the daemon socket")
        return self

    def client(self, timeout: float = 60) -> Client:
        address = find_daemon(resolve_paths({"RAGD_HOME": str(self.home)}))
        assert address, "daemon not running"
        return Client(address, timeout=timeout, client_name="test")

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60) -> Any:
        with self.client(timeout) as c:
            return c.call(method, params, timeout=timeout)

    def wait_idle(self, timeout: float = 300) -> dict[str, Any]:
        def idle() -> dict[str, Any] | None:
            st = self.call("status")
            return st if st["state"] == "idle" and st["collections"] else None

        return wait_for(idle, timeout, "the daemon to be idle", interval=0.1)

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.call("shutdown", timeout=10)
            self.proc.wait(timeout=60)
        except Exception:
            self.kill9()


def start_module_daemon(root: Path, vault: Path | None, config: str) -> DaemonProc:
    """A daemon for a module's tests: its home under ``root`` with this config.toml text,
    started, and left for the module to stop (not stopped after the first test)."""
    home = root / "home"
    path = resolve_paths({"RAGD_HOME": str(home)}).config_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config, encoding="utf-8")
    d = DaemonProc(home, vault, root / "daemon.log").start()
    STARTED.remove(d)
    return d


def catalog_progress(home: Path) -> int:
    """Vectors cached plus sources committed in a daemon's catalog (read-only): grows with
    every 64-chunk slice, so a test can wait for indexing to move on before a kill."""
    import sqlite3

    db = sqlite3.connect(f"file:{home / 'data' / 'catalog.sqlite'}?mode=ro", uri=True,
                         timeout=10)
    try:
        return int(db.execute("SELECT (SELECT COUNT(*) FROM embeddings)"
                              " + (SELECT COUNT(*) FROM sources)").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        db.close()


def settle(d: DaemonProc, timeout: float = 300) -> None:
    """Let a daemon finish what it is indexing, then stop it (stopped even if it never does)."""
    try:
        d.wait_idle(timeout=timeout)
    finally:
        d.stop()


def duplicate_chunks(app: Any) -> list[Any]:
    """(source, ordinal, count) of any chunk position held twice: a crash replayed twice."""
    return list(app.catalog._db.execute(
        "SELECT source_id, ordinal, COUNT(*) FROM chunks GROUP BY source_id, ordinal"
        " HAVING COUNT(*) > 1").fetchall())
