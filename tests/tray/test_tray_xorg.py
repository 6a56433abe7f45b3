"""A real pystray icon (xorg backend) on Xvfb, docked in a real XEMBED tray, against a real
daemon: its menu items, invoked the way pystray invokes them, reindex, pause and resume the
daemon, and the icon on screen changes with the daemon's state."""

from __future__ import annotations

import configparser
import datetime as dt
import faulthandler
import importlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc, wait_for

from ragd.daemon.settings.paths import resolve_paths
from ragd.tray.app import TrayApp
from ragd.tray.autostart import Autostart
from ragd.tray.icons import COLOURS, icon_image

pytestmark = pytest.mark.slow


def xorg_pystray(monkeypatch: pytest.MonkeyPatch) -> Any:
    """pystray with its xorg backend: pystray picks a backend once, when first imported."""
    monkeypatch.setenv("PYSTRAY_BACKEND", "xorg")
    import pystray

    if pystray.Icon.__module__ != "pystray._xorg":
        pystray = importlib.reload(pystray)
    assert pystray.Icon.__module__ == "pystray._xorg"
    return pystray


def find_item(menu: Any, text: str) -> Any:
    """A pystray MenuItem by (the start of) its text, searching submenus depth first."""
    for item in menu.items:
        if item is menu.SEPARATOR:
            continue
        if item.text == text or item.text.startswith(text):
            return item
        if item.submenu is not None:
            found = find_item(item.submenu, text)
            if found is not None:
                return found
    return None


def click(icon: Any, text: str) -> Any:
    """Activate a menu item as pystray's backends do: call the item, then update the menu."""
    item = find_item(icon.menu, text)
    assert item is not None, f"no menu item {text!r} in:\n{icon.menu}"
    assert item.enabled, f"menu item {text!r} is disabled"
    item(icon)
    icon.update_menu()
    return item


def until(app: TrayApp, predicate: Any, timeout: float) -> Any:
    """app.wait_for_view, with every thread's stack in the report when it times out."""
    try:
        return app.wait_for_view(predicate, timeout)
    except TimeoutError:
        faulthandler.dump_traceback(all_threads=True)
        raise


def same_image(a: Any, b: Any) -> bool:
    from PIL import ImageChops

    return ImageChops.difference(a.convert("RGBA"), b.convert("RGBA")).getbbox() is None


def colour_on_screen(host: Any, slot: int = 0) -> tuple[int, int, int]:
    """The colour of the docked icon's disc, near its top edge, on the real X screen."""
    size = host.SLOT
    return host.screenshot().getpixel((slot * size + size // 2, round(size * 0.12)))


def close_to(actual: tuple[int, ...], wanted: tuple[int, ...], tolerance: int = 40) -> bool:
    return all(abs(a - w) <= tolerance for a, w in zip(actual, wanted, strict=False))


def test_real_icon_follows_and_drives_the_daemon(
        tray_host: Any, daemon: DaemonProc, vault: Path, desktop_home: Path, artifacts: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    xorg_pystray(monkeypatch)
    opened: list[str] = []
    autostart = Autostart(platform="linux", home=desktop_home, env=dict(os.environ),
                          systemctl=lambda args: None)
    app = TrayApp(resolve_paths(), start_daemon=False, opener=opened.append,
                  autostart=autostart, poll_interval=1.0)
    states: list[str] = []
    app.listeners.append(lambda view: states.append(view.state))
    loop = threading.Thread(target=app.run, name="pystray-loop", daemon=True)
    loop.start()
    try:
        wait_for(lambda: app.icon is not None and tray_host.docked, 30, "the icon to dock")
        icon = app.icon
        # (The daemon may say idle for a moment before its start-up sweep is queued.)
        until(app, lambda v: v.state == "idle" and "8 sources" in v.title, 60)

        # Idle: the image, the tooltip and the screen agree.
        assert icon.title.startswith("ragd: Idle: 8 sources indexed"), icon.title
        assert same_image(icon.icon, icon_image("idle", 64))
        wait_for(lambda: close_to(colour_on_screen(tray_host), COLOURS["idle"]), 10,
                 "the idle colour on screen")
        icon.icon.save(artifacts / "icon-idle.png")
        tray_host.screenshot().save(artifacts / "screen-root-idle.png")  # as `xwd -root`
        tray_host.screenshot().crop((0, 0, 200, 48)).save(artifacts / "screen-idle.png")

        # The collection line and its skipped files, with their reasons, from `skipped`.
        coll = find_item(icon.menu, "obsidian: 8 sources")
        assert coll is not None and coll.submenu is not None, str(icon.menu)
        listing = str(coll.submenu)
        assert "Inbox/Empty note.md: empty" in listing, listing
        assert "Inbox/Corrupt.md: binary" in listing, listing
        assert "Skipped: 2 files" in listing

        # Pause from the menu: the daemon pauses, the icon turns amber.
        click(icon, "Pause indexing")
        wait_for(lambda: daemon.call("status")["paused"], 10, "the daemon to pause")
        until(app, lambda v: v.state == "paused", 10)
        assert same_image(icon.icon, icon_image("paused", 64))
        assert icon.title.startswith("ragd: Paused")
        wait_for(lambda: close_to(colour_on_screen(tray_host), COLOURS["paused"]), 10,
                 "the paused colour on screen")
        icon.icon.save(artifacts / "icon-paused.png")
        tray_host.screenshot().crop((0, 0, 200, 48)).save(artifacts / "screen-paused.png")
        assert find_item(icon.menu, "Pause indexing") is None  # it became Resume

        # Reindex while paused: both jobs wait in the daemon's queue.
        before = daemon.call("status")["collections"][0]["last_indexed"]
        click(icon, "Reindex now")
        click(icon, "Reindex obsidian now")
        queue = wait_for(lambda: len(daemon.call("status")["queue"]) >= 2 and
                         daemon.call("status")["queue"], 10, "two reindex jobs in the queue")
        assert {job["collection"] for job in queue} == {None, "obsidian"}
        assert all(job["priority"] == "explicit" for job in queue)
        until(app, lambda v: v.state == "paused" and "remaining" in v.title, 10)

        # last_indexed has one-second resolution: let the clock pass the first run's second.
        done_at = dt.datetime.fromisoformat(before).timestamp()
        wait_for(lambda: time.time() > done_at + 1.05, 5, "the next second")
        click(icon, "Resume indexing")
        status = wait_for(lambda: (lambda s: s if s["state"] == "idle" and not s["queue"] and
                                   s["collections"][0]["last_indexed"] != before else None)(
            daemon.call("status")), 60, "the reindex to run")
        assert status["paused"] is False
        until(app, lambda v: v.state == "idle", 20)
        assert "indexing" in states[states.index("paused"):], states
        wait_for(lambda: close_to(colour_on_screen(tray_host), COLOURS["idle"]), 10,
                 "the idle colour again")

        # A note saved in the watched vault: the icon shows indexing, then idle again.
        seen = len(states)
        (vault / "Inbox" / "Tray note.md").write_text("# Tray note\n\nZebra crossings.",
                                                      encoding="utf-8")
        wait_for(lambda: "indexing" in states[seen:], 10, "the tray to show indexing")
        until(app, lambda v: v.state == "idle" and "9 sources" in v.title, 30)
        icon_image("indexing", 64, 0.6).save(artifacts / "icon-indexing.png")
        for state in ("error", "unreachable", "starting"):
            icon_image(state, 64).save(artifacts / f"icon-{state}.png")

        # Open configuration / Open log go through the opener (a folder if the file is new).
        click(icon, "Open configuration")
        click(icon, "Open log")
        paths = resolve_paths()
        wait_for(lambda: len(opened) == 2, 10, "both paths opened")
        assert opened[0] in (str(paths.config_file), str(paths.config_dir))
        assert opened[1] == str(paths.log_file)

        # Start at login: the checkbox shows what is really on disk.
        entry = Path(desktop_home / ".config" / "autostart" / "ragd.desktop")
        assert find_item(icon.menu, "Start at login").checked is False
        click(icon, "Start at login")
        wait_for(lambda: entry.is_file(), 10, "the autostart entry")
        until(app, lambda v: any(e.checked for e in v.menu if e.text == "Start at login"),
                          10)
        assert find_item(icon.menu, "Start at login").checked is True
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(entry, encoding="utf-8")
        assert "ragd.tray.app" in parser["Desktop Entry"]["Exec"] or \
            "ragd-tray" in parser["Desktop Entry"]["Exec"]
        if shutil.which("desktop-file-validate"):
            check = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True,
                                   text=True)
            assert check.returncode == 0, check.stdout + check.stderr
        click(icon, "Start at login")
        wait_for(lambda: not entry.exists(), 10, "the autostart entry to go")
        until(app, lambda v: not any(e.checked for e in v.menu
                                            if e.text == "Start at login"), 10)

        # Quit: the icon's loop ends; the daemon keeps running for the other clients.
        click(icon, "Quit")
        loop.join(15)
        assert not loop.is_alive()
        assert daemon.call("status")["state"] == "idle"
    finally:
        app.stop()
        loop.join(15)
