"""The tray's menu in an XEmbed system tray, end to end, through the X server.

Xvfb, Debian's trayer (a real XEmbed tray) and a session bus with no StatusNotifier host: the
tray's automatic choice is pystray's gtk backend. Its icon docks in trayer; a right-click on the
icon, sent as input events through the X server (XTEST) as the user's mouse would, opens GTK's
menu, and the keyboard (Down, Return) activates "Pause indexing", "Reindex now" and "Resume
indexing" on a real daemon.
"""

from __future__ import annotations

import importlib
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from daemon_proc import DaemonProc, wait_for

from ragd.daemon.settings.paths import resolve_paths
from ragd.tray import backend_choice
from ragd.tray.app import TrayApp
from ragd.tray.autostart import Autostart

pytestmark = pytest.mark.slow
T = TypeVar("T")


def on_gtk(fn: Callable[[], T]) -> T:
    """Run ``fn`` on GLib's loop (GTK is not thread-safe) and return its result."""
    from gi.repository import GLib

    answer: queue.Queue[Any] = queue.Queue()

    def call() -> bool:
        try:
            answer.put((True, fn()))
        except Exception as exc:
            answer.put((False, exc))
        return False

    GLib.idle_add(call)
    ok, value = answer.get(timeout=10)
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


class Mouse:
    """XTEST input on the display: what a user's mouse and keyboard send."""

    def __init__(self, display_name: str) -> None:
        from Xlib import XK, X, display
        from Xlib.ext import xtest

        self.X, self.XK, self.xtest = X, XK, xtest
        self.display = display.Display(display_name)

    def right_click(self, x: int, y: int) -> None:
        self.xtest.fake_input(self.display, self.X.MotionNotify, x=x, y=y)
        self.xtest.fake_input(self.display, self.X.ButtonPress, 3)
        self.xtest.fake_input(self.display, self.X.ButtonRelease, 3)
        self.display.sync()

    def key(self, name: str) -> None:
        code = self.display.keysym_to_keycode(self.XK.string_to_keysym(name))
        self.xtest.fake_input(self.display, self.X.KeyPress, code)
        self.xtest.fake_input(self.display, self.X.KeyRelease, code)
        self.display.sync()

    def close(self) -> None:
        self.display.close()


def choose_from_menu(icon: Any, mouse: Mouse, text: str) -> None:
    """Right-click the docked icon, move down the menu to ``text`` and press Return."""
    def menu_open() -> Any:
        menu = icon._menu_handle
        return menu if menu is not None and menu.get_visible() else None

    def where() -> tuple[int, int]:
        ok, _screen, area, _orientation = icon._status_icon.get_geometry()
        assert ok, "the icon is not docked"
        return area.x + area.width // 2, area.y + area.height // 2

    # pystray rebuilds the menu when the tray's state changes: a rebuild in the middle of
    # the walk loses the selection, so the walk starts over (a user would open it again).
    for _attempt in range(3):
        mouse.right_click(*on_gtk(where))
        menu = wait_for(lambda: on_gtk(menu_open), 10, "GTK's menu to open")
        for _ in range(20):  # Down skips separators and greyed-out lines, as for a user
            mouse.key("Down")
            selected = wait_for(lambda m=menu: on_gtk(m.get_selected_item), 5, "a selected item")
            if on_gtk(selected.get_label) == text:
                mouse.key("Return")
                wait_for(lambda m=menu: not on_gtk(m.get_visible), 10, "the menu to close")
                return
        mouse.key("Escape")
        wait_for(lambda m=menu: not on_gtk(m.get_visible), 10, "the menu to close")
    raise AssertionError(f"{text!r} is not reachable in the menu")


def test_a_right_click_in_an_xembed_tray_drives_the_daemon(
        menu_libraries: None, trayer: str, session_bus: str, daemon: DaemonProc,
        desktop_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", session_bus)  # no StatusNotifier host
    monkeypatch.setenv("NO_AT_BRIDGE", "1")
    choice = backend_choice.choose("auto", backend_choice.probe())
    assert (choice.backend, choice.reason) == (
        "gtk", "an XEmbed system tray is running (no StatusNotifier host)")
    monkeypatch.setenv("PYSTRAY_BACKEND", choice.backend)
    import pystray

    if pystray.Icon.__module__ != "pystray._gtk":  # pystray picks a backend when imported
        pystray = importlib.reload(pystray)
    assert pystray.Icon.__module__ == "pystray._gtk"

    autostart = Autostart(platform="linux", home=desktop_home, env=dict(os.environ),
                          systemctl=lambda args: None)
    app = TrayApp(resolve_paths(), start_daemon=False, opener=lambda p: None,
                  autostart=autostart, poll_interval=1.0)
    loop = threading.Thread(target=app.run, name="pystray-gtk", daemon=True)
    loop.start()
    mouse = Mouse(trayer)
    try:
        wait_for(lambda: app.icon is not None and on_gtk(app.icon._status_icon.is_embedded),
                 30, "the icon to dock in trayer")
        icon = app.icon
        app.wait_for_view(lambda v: v.state == "idle" and "8 sources" in v.title, 60)
        wait_for(lambda: (on_gtk(icon._status_icon.get_tooltip_text) or "").startswith(
            "ragd: Idle: 8 sources indexed"), 10, "the tooltip")

        choose_from_menu(icon, mouse, "Pause indexing")
        wait_for(lambda: daemon.call("status")["paused"], 10, "the daemon to pause")
        app.wait_for_view(lambda v: v.state == "paused", 10)

        choose_from_menu(icon, mouse, "Reindex now")
        queue_ = wait_for(lambda: daemon.call("status")["queue"], 10, "the reindex job")
        assert [(job["collection"], job["priority"]) for job in queue_] == [(None, "explicit")]
        app.wait_for_view(lambda v: "remaining" in v.title, 10)

        choose_from_menu(icon, mouse, "Resume indexing")
        wait_for(lambda: (lambda s: s["state"] == "idle" and not s["paused"]
                          and not s["queue"])(daemon.call("status")), 60, "the reindex to run")
        app.wait_for_view(lambda v: v.state == "idle", 10)  # the menu as it stays

        choose_from_menu(icon, mouse, "Quit")
        loop.join(15)
        assert not loop.is_alive()
        assert daemon.call("status")["state"] == "idle"
    finally:
        mouse.close()
        app.stop()
        loop.join(15)
