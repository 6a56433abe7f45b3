"""The tray app without a display: what it imports, how it fails without a display, how it
follows a daemon that is missing, mismatched, started, restarted and stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc, wait_for

from ragd.daemon.errors import DaemonUnavailable, ProtocolMismatch
from ragd.daemon.ipc.client import Client
from ragd.daemon.ipc.discovery import find_daemon
from ragd.daemon.settings.paths import resolve_paths
from ragd.tray import viewmodel as vm
from ragd.tray.app import TrayApp
from ragd.tray.autostart import Autostart
from ragd.tray.desktop import tray_lock

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "faiss", "whoosh", "sentence_transformers", "numpy", "mcp", "pystray", "PIL",
         "Xlib", "gi", "keyring")


def fresh_modules(*modules: str) -> set[str]:
    code = ("import json, sys\n" + "".join(f"import {m}\n" for m in modules)
            + "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60, cwd=REPO)
    return set(json.loads(out.stdout))


def headless_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "PYSTRAY_BACKEND")}
    return {**env, **extra}


def offline_autostart(tmp_path: Path) -> Autostart:
    return Autostart(platform="linux", home=tmp_path, env={}, systemctl=lambda args: None)


class Recorder:
    """A connector that fails as told and records when it was called."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls: list[tuple[float, bool]] = []

    def __call__(self, paths: Any, *, start: bool, **kwargs: Any) -> Client:
        self.calls.append((time.monotonic(), start))
        raise self.error


# -- imports and start-up without a display -----------------------------------------------
def test_importing_the_tray_loads_nothing_heavy() -> None:
    loaded = fresh_modules("ragd.tray.app", "ragd.tray.viewmodel", "ragd.tray.icons", "ragd.tray.autostart",
                           "ragd.tray.backend_choice", "ragd.tray.backends", "ragd.tray.desktop",
                           "ragd.daemon.settings.secrets")
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == []


def test_no_display_gives_a_clear_message() -> None:
    for argv in (["-m", "ragd.tray.app"], ["-m", "ragd.daemon.cli.main", "tray"]):
        run = subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                             timeout=60, cwd=REPO, env=headless_env())
        assert run.returncode == 1, run.stderr
        assert "error: cannot show a tray icon: there is no display" in run.stderr
        assert "hint: run ragd-tray inside your desktop session" in run.stderr
        assert "Traceback" not in run.stderr


def test_an_unreachable_display_gives_a_clear_message() -> None:
    """pystray raises Xlib's display errors at import, not ImportError: still one sentence."""
    run = subprocess.run([sys.executable, "-m", "ragd.tray.app"], capture_output=True, text=True,
                         timeout=60, cwd=REPO, env=headless_env(DISPLAY=":4095"))
    assert run.returncode == 1
    assert "error: cannot show a tray icon: Display" in run.stderr  # DisplayConnectionError
    assert "Traceback" not in run.stderr


def test_one_tray_per_ragd_home() -> None:
    paths = resolve_paths()
    first = tray_lock(paths)
    assert first is not None
    try:
        assert tray_lock(paths) is None
    finally:
        first.release()
    again = tray_lock(paths)
    assert again is not None
    again.release()


# -- following: no daemon, a mismatched one, backoff ---------------------------------------
def test_no_daemon_shows_unreachable_and_retries_with_backoff(tmp_path: Path) -> None:
    gone = Recorder(DaemonUnavailable("no ragd daemon is running", "start it"))
    app = TrayApp(resolve_paths(), start_daemon=False, connector=gone,
                  autostart=offline_autostart(tmp_path), opener=lambda p: None)
    app.start_background()
    try:
        view = app.wait_for_view(lambda v: v.state == "unreachable", 10)
        assert view.title == "ragd: Daemon not running: start it from this menu"
        assert vm.find_entry(view.menu, "Start the daemon") is not None
        wait_for(lambda: len(gone.calls) >= 4, 15, "four connection attempts")
        gaps = [b[0] - a[0] for a, b in zip(gone.calls, gone.calls[1:], strict=False)]
        assert gaps[0] >= 0.4 and gaps[1] >= 0.9 and gaps[2] >= 1.9, gaps  # doubling
        assert not any(start for _, start in gone.calls)  # start_daemon=False

        # "Start the daemon" cuts the wait short and asks the connector to start one.
        app.perform(vm.START_DAEMON)
        wait_for(lambda: any(start for _, start in gone.calls), 5, "a start request")
    finally:
        app.stop()
        app.join()


def test_protocol_mismatch_tells_to_restart(tmp_path: Path) -> None:
    app = TrayApp(resolve_paths(), start_daemon=False,
                  connector=Recorder(ProtocolMismatch("protocol mismatch: client speaks 1, "
                                                      "daemon speaks 2", "restart the daemon")),
                  autostart=offline_autostart(tmp_path), opener=lambda p: None)
    app.start_background()
    try:
        view = app.wait_for_view(lambda v: v.state == "mismatch", 10)
        assert view.icon == "error"
        assert view.title == ("ragd: Protocol mismatch: restart the daemon "
                              "(ragd stop && ragd start)")
    finally:
        app.stop()
        app.join()


def test_pystray_menu_mirrors_the_view_model(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSTRAY_BACKEND", "dummy")
    import pystray

    app = TrayApp(resolve_paths(), start_daemon=False, autostart=offline_autostart(tmp_path),
                  opener=lambda p: None)
    app.pystray = pystray
    status = {"state": "idle", "paused": False, "indexing": {"active": False, "remaining": 0},
              "errors": [], "paths": {"config": "/c", "log": "/l"},
              "collections": [{"name": "obsidian", "source_count": 3, "chunk_count": 9,
                               "last_indexed": None, "skipped_count": 0, "skips": {}}]}
    view = vm.build_view(status, app.autostart.status())
    menu = app._pystray_menu(view.menu)
    shown = [item.text for item in menu]  # pystray drops the separators at the ends
    assert shown[:3] == [view.status_line, "Open ragd", "- - - -"]
    assert "Reindex now" in shown and "Quit and stop the daemon" in shown
    by_text = {item.text: item for item in menu}
    assert not by_text[view.status_line].enabled
    assert by_text["Start at login"].checked is False
    assert by_text["Reindex now"].checked is None
    sub = by_text["obsidian: 3 sources, 9 chunks"].submenu
    assert [i.text for i in sub][-1] == "Reindex obsidian now"

    done: list[tuple[str, str | None]] = []
    monkeypatch.setattr(app, "perform", lambda action, arg=None: done.append((action, arg)))
    by_text["Reindex now"](None)  # what pystray calls on a click
    [i for i in sub if i.text == "Reindex obsidian now"][0](None)
    assert done == [(vm.REINDEX, None), (vm.REINDEX, "obsidian")]


# -- a real daemon: started by the tray, restarted, stopped from the menu ---------------------
@pytest.fixture
def cleanup_daemons(ragd_home: Path) -> Iterator[None]:
    yield
    address = find_daemon(resolve_paths())
    if address is not None:  # a daemon the tray started, detached from the test
        with Client(address, client_name="test-cleanup") as client:
            client.call("shutdown")
        wait_for(lambda: find_daemon(resolve_paths()) is None, 60, "the daemon to stop")


@pytest.mark.slow
def test_open_ragd_opens_the_window_url_of_the_status_file(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The tray's "Open ragd" takes the URL (with this start's token) from the status file
    that only the user can read, never from an IPC answer (decision 0053)."""
    import webbrowser

    from ragd.daemon.errors import RagdError
    from ragd.daemon.ipc.discovery import write_status

    paths = resolve_paths()
    app = TrayApp(paths, start_daemon=False, autostart=offline_autostart(tmp_path),
                  opener=lambda p: None)
    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or True)
    write_status(paths, pid=os.getpid(), socket="s", version="v", protocol=1, started_at=0)
    with pytest.raises(RagdError, match="no window"):
        app._do(vm.OPEN_WINDOW, None)
    url = "http://127.0.0.1:5000/?token=abc"
    write_status(paths, pid=os.getpid(), socket="s", version="v", protocol=1, started_at=0,
                 window=url)
    app._do(vm.OPEN_WINDOW, None)
    assert opened == [url]


def test_starts_the_daemon_follows_a_restart_and_stops_it(
        ragd_home: Path, vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        cleanup_daemons: None) -> None:
    monkeypatch.setenv("RAGD_OBSIDIAN_VAULTS", str(vault))  # what the spawned daemon indexes
    monkeypatch.setenv("RAGD_DAEMON_DEBOUNCE_MS", "150")
    assert find_daemon(resolve_paths()) is None
    app = TrayApp(resolve_paths(), start_daemon=True, poll_interval=1.0,
                  autostart=offline_autostart(tmp_path), opener=lambda p: None)
    titles: list[str] = [app.view.title]
    app.listeners.append(lambda v: titles.append(v.title))
    app.start_background()
    second: DaemonProc | None = None
    try:
        # No daemon answered: the tray started one, and follows it to idle.
        app.wait_for_view(lambda v: v.state == "idle" and "8 sources" in v.title, 120)
        assert "ragd: Starting: starting the daemon" in titles
        with Client(find_daemon(resolve_paths()) or "") as client:
            first_pid = client.call("status")["pid"]

        # Someone stops the daemon (`ragd stop`): the tray says so and does not restart it.
        with Client(find_daemon(resolve_paths()) or "") as client:
            client.call("shutdown")
        app.wait_for_view(lambda v: v.state == "unreachable", 30)
        gone_at = len(titles)

        # A daemon comes back (a restart, systemd, `ragd start`): the tray reconnects alone.
        second = DaemonProc(ragd_home, vault, tmp_path / "daemon2.log").start()
        view = app.wait_for_view(lambda v: v.state == "idle" and "8 sources" in v.title, 120)
        assert f"pid {second.proc.pid}" in " ".join(  # type: ignore[union-attr]
            e.text for e in vm.find_entry(view.menu, "About ragd").children)  # type: ignore[union-attr]
        assert second.proc.pid != first_pid  # type: ignore[union-attr]
        # It never tried to start one itself (the daemon's own "loading the model" may show).
        assert "ragd: Starting: starting the daemon" not in titles[gone_at:]

        # "Quit and stop the daemon": the daemon exits and the tray stops following.
        app.perform(vm.QUIT_AND_STOP)
        assert second.proc.wait(timeout=60) == 0  # type: ignore[union-attr]
        app.join(10)
        assert not any(t.is_alive() for t in app._threads)
    finally:
        app.stop()
        if second is not None:
            second.stop()
