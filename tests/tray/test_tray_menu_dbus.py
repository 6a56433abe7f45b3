"""The tray's menu on a StatusNotifier desktop, end to end.

Xvfb, a private session bus, a real StatusNotifier host and watcher (Debian's
gtk-sni-tray-standalone), a real daemon and the real ``ragd-tray`` process, which chooses
pystray's appindicator backend by itself. The test plays the panel: it finds the item through
the watcher, reads the menu the item exports over com.canonical.dbusmenu, and sends the
"clicked" events a panel sends, then checks the daemon's state.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc, wait_for

from ragd.daemon.settings.paths import resolve_paths

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
ITEM = "org.kde.StatusNotifierItem"


@pytest.fixture
def tray(daemon: DaemonProc, xserver: str, sni_host: str, desktop_home: Path, tmp_path: Path,
         stop_process: Any) -> Iterator[subprocess.Popen[bytes]]:
    """`ragd-tray --no-start` in the desktop session, with [tray] backend left on auto."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYSTRAY_BACKEND", "WAYLAND_DISPLAY")}
    env.update(DISPLAY=xserver, DBUS_SESSION_BUS_ADDRESS=sni_host, NO_AT_BRIDGE="1")
    with open(tmp_path / "tray.out", "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ragd.tray.app", "--no-start", "--verbose"],
                                env=env, cwd=REPO, stdout=out, stderr=out)
    try:
        yield proc
    finally:
        stop_process(proc)


def test_the_exported_menu_drives_the_daemon(desktop_bus: Any, daemon: DaemonProc,
                                             tray: subprocess.Popen[bytes],
                                             tmp_path: Path) -> None:
    def alive() -> None:
        assert tray.poll() is None, (tmp_path / "tray.out").read_text(errors="replace")

    # The tray registers its item with the watcher, as on a KDE or GNOME desktop.
    def registered() -> list[tuple[str, str]]:
        alive()
        return desktop_bus.items()

    [(service, path)] = wait_for(registered, 30, "the tray's item at the watcher")
    assert desktop_bus.prop(service, path, ITEM, "Id") == "ragd"
    menu_path = desktop_bus.prop(service, path, ITEM, "Menu")

    def press(text: str) -> None:
        """Click the item labelled ``text`` in the menu as exported now. pystray builds a new
        menu (new ids) on every change, and a panel then reads the layout again: so do we."""
        def clicked() -> bool:
            node = desktop_bus.menu(service, menu_path).find(text)
            assert node is not None and node.enabled, f"no enabled {text!r}"
            desktop_bus.click(service, menu_path, node.id)  # raises for a replaced id
            return True

        wait_for(clicked, 10, f"a click on {text!r}")

    def menu_with(*texts: str) -> Any:
        alive()
        menu = desktop_bus.menu(service, menu_path)
        return menu if all(menu.find(t) for t in texts) else None

    # Idle: the status line, the collection with its skip counts, the actions.
    menu = wait_for(lambda: menu_with("Up to date: 8 sources indexed",
                                      "obsidian: 8 sources", "Reindex now", "Pause indexing"),
                    60, "the idle menu")
    collection = menu.find("obsidian: 8 sources")
    assert collection.label.endswith("2 skipped"), collection.label
    assert collection.find("Skipped: 2 files (").label.startswith("Skipped: 2 files (")
    assert collection.find("Reindex obsidian now").enabled
    assert menu.find("Start at login").toggle_state == 0  # a check box, exported unticked
    assert not menu.find("Up to date").enabled  # the status line is information only
    assert desktop_bus.prop(service, path, ITEM, "Status") == "Active"
    assert str(desktop_bus.prop(service, path, ITEM, "Title")).startswith(
        "ragd: Idle: 8 sources indexed")
    log = resolve_paths().state_dir / "tray.log"
    assert "backend appindicator: a StatusNotifier host is running" in \
        log.read_text(encoding="utf-8")

    # "Pause indexing", clicked on the panel: the daemon pauses, the menu offers Resume.
    press("Pause indexing")
    wait_for(lambda: daemon.call("status")["paused"], 10, "the daemon to pause")
    menu = wait_for(lambda: menu_with("Indexing paused", "Resume indexing"), 10,
                    "the paused menu")
    assert menu.find("Pause indexing") is None

    # "Reindex now" while paused: the job waits in the daemon's queue, the menu counts it.
    before = daemon.call("status")["collections"][0]["last_indexed"]
    press("Reindex now")
    queue = wait_for(lambda: daemon.call("status")["queue"], 10, "a reindex job in the queue")
    assert [(job["collection"], job["priority"]) for job in queue] == [(None, "explicit")]
    wait_for(lambda: menu_with("Indexing paused (1 remaining)")
             or menu_with("Indexing paused (8 remaining)"), 10, "remaining in the menu")

    # "Resume indexing": the reindex runs, the menu is back to idle.
    done_at = dt.datetime.fromisoformat(before).timestamp()
    wait_for(lambda: time.time() > done_at + 1.05, 5, "the next second")  # 1 s resolution
    press("Resume indexing")
    wait_for(lambda: (lambda s: s["state"] == "idle" and not s["paused"] and not s["queue"]
                      and s["collections"][0]["last_indexed"] != before)(
        daemon.call("status")), 60, "the reindex to run")
    wait_for(lambda: menu_with("Up to date", "Pause indexing"), 20, "the idle menu")

    # Quit from the panel: the tray ends, the daemon keeps serving.
    press("Quit")
    assert tray.wait(timeout=15) == 0
    assert daemon.call("status")["state"] == "idle"
