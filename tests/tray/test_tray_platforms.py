"""The same menu on every platform: what the darwin, win32 and Linux backends are handed as the
daemon's state changes (progress with ``remaining``, the last errors, skip counts, pause), and
that on macOS every change reaches AppKit through the main thread.

pystray's darwin and win32 backends cannot be imported here (they need AppKit and the Win32
API), so the app renders into pystray's dummy backend through a recording driver: a fake of
the icon, clearly named, for a unit test of the app's own logic.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ragd.daemon.settings.paths import resolve_paths
from ragd.tray import viewmodel as vm
from ragd.tray.app import TrayApp
from ragd.tray.autostart import Autostart
from ragd.tray.backends import IconDriver


class RecordingDriver(IconDriver):
    """Fake icon driver: records what the app hands pystray, in order."""

    def __init__(self) -> None:
        super().__init__(icon=None)
        self.images: list[Any] = []
        self.titles: list[str] = []
        self.menus: list[Any] = []

    def set_image(self, image: Any) -> None:
        self.images.append(image)

    def set_title(self, title: str) -> None:
        self.titles.append(title)

    def set_menu(self, menu: Any) -> None:
        self.menus.append(menu)


def status(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "state": "idle", "paused": False, "indexing": {"active": False, "remaining": 0},
        "errors": [], "paths": {"config": "/c/config.toml", "log": "/l/ragd.log"},
        "version": "0.1.0", "protocol": 1, "pid": 42,
        "collections": [{"name": "obsidian", "source_count": 1234, "chunk_count": 5678,
                         "last_indexed": None, "skipped_count": 3,
                         "skips": {"empty": 2, "binary": 1}}]}
    return {**base, **changes}


def texts(menu: Any) -> list[str]:
    out = []
    for item in menu:
        out.append(item.text)
        if item.submenu is not None:
            out += ["  " + text for text in texts(item.submenu)]
    return out


def item(menu: Any, text: str) -> Any:
    for entry in menu:
        if entry.text.startswith(text):
            return entry
        if entry.submenu is not None:
            found = item_or_none(entry.submenu, text)
            if found is not None:
                return found
    raise AssertionError(f"no {text!r} in {texts(menu)}")


def item_or_none(menu: Any, text: str) -> Any:
    try:
        return item(menu, text)
    except AssertionError:
        return None


@pytest.fixture
def dummy_pystray(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("PYSTRAY_BACKEND", "dummy")
    import pystray

    return pystray


@pytest.fixture
def app_on(dummy_pystray: Any, tmp_path: Path) -> Iterator[Callable[[str], TrayApp]]:
    made: list[TrayApp] = []

    def make(platform: str) -> TrayApp:
        autostart = Autostart(platform="linux", home=tmp_path, env={},
                              systemctl=lambda args: None)
        app = TrayApp(resolve_paths(), start_daemon=False, autostart=autostart,
                      opener=lambda p: None, platform=platform)
        app.pystray = dummy_pystray
        app._driver = RecordingDriver()
        made.append(app)
        return app

    yield make
    for app in made:
        app.stop()


@pytest.mark.parametrize(("platform", "size"), [("darwin", 44), ("win32", 32), ("linux", 64)])
def test_one_menu_follows_the_daemon_on_every_platform(
        app_on: Callable[[str], TrayApp], platform: str, size: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if platform == "darwin":  # no PyObjC here: the app then calls in place
        monkeypatch.setitem(sys.modules, "PyObjCTools", None)
    app = app_on(platform)
    driver = app._driver
    assert isinstance(driver, RecordingDriver)

    app._set_source(status())
    menu = driver.menus[-1]
    assert texts(menu)[0] == "Up to date: 1,234 sources indexed"
    collection = item(menu, "obsidian: 1,234 sources, 5,678 chunks, 3 skipped")
    assert "  Skipped: 3 files (empty 2, binary 1)" in texts(menu)
    assert item(collection.submenu, "Reindex obsidian now").enabled
    assert driver.titles[-1] == "ragd: Idle: 1,234 sources indexed"
    assert driver.images[-1].size == (size, size)

    # Indexing: progress events carry `remaining`; the status line and tooltip follow them.
    app._on_event({"type": "progress", "state": "indexing", "active": True, "remaining": 40,
                   "collection": "obsidian", "phase": "embed", "done": 10, "total": 50})
    menu = driver.menus[-1]
    assert texts(menu)[0] == "Indexing obsidian: 10 of 50 (embedding)"
    assert driver.titles[-1] == "ragd: Indexing: 40 remaining"
    assert item(menu, "Pause indexing").enabled

    # The last errors, newest first.
    app._set_source(status(errors=[{"path": "a.md", "error": "first"},
                                   {"path": "b.pdf", "error": "second"}]))
    errors = item(driver.menus[-1], "Recent errors (2)")
    assert [e.text for e in errors.submenu] == ["b.pdf: second", "a.md: first"]

    # Paused: Resume replaces Pause, and both reach the same actions on every platform.
    app._set_source(status(state="paused", paused=True,
                           indexing={"active": False, "remaining": 12}))
    menu = driver.menus[-1]
    assert texts(menu)[0] == "Indexing paused (12 remaining)"
    assert item_or_none(menu, "Pause indexing") is None
    done: list[tuple[str, str | None]] = []
    monkeypatch.setattr(app, "perform", lambda action, arg=None: done.append((action, arg)))
    item(menu, "Resume indexing")(None)  # what each backend calls on a click
    item(menu, "Reindex now")(None)
    item(menu, "Reindex obsidian now")(None)
    assert done == [(vm.RESUME, None), (vm.REINDEX, None), (vm.REINDEX, "obsidian")]

    # The daemon goes away: the menu offers to start it.
    from ragd.daemon.errors import DaemonUnavailable

    app._set_source(DaemonUnavailable("gone"))
    assert item(driver.menus[-1], "Start the daemon").enabled
    assert not item(driver.menus[-1], "Reindex now").enabled


def test_on_macos_every_change_goes_through_the_main_thread(
        app_on: Callable[[str], TrayApp], monkeypatch: pytest.MonkeyPatch) -> None:
    """AppKit objects belong to the main thread: the app hands each update to
    PyObjCTools.AppHelper.callAfter (faked here) instead of touching the icon itself."""
    deferred: list[Callable[[], None]] = []
    helper = types.SimpleNamespace(callAfter=deferred.append)
    monkeypatch.setitem(sys.modules, "PyObjCTools", types.SimpleNamespace(AppHelper=helper))
    monkeypatch.setitem(sys.modules, "PyObjCTools.AppHelper", helper)
    app = app_on("darwin")
    driver = app._driver
    assert isinstance(driver, RecordingDriver)

    app._set_source(status())
    assert len(deferred) == 1 and driver.menus == []  # nothing touched off the main thread
    deferred.pop()()  # the main run loop runs it
    assert texts(driver.menus[-1])[0] == "Up to date: 1,234 sources indexed"
    app._set_source(status(state="paused", paused=True))
    deferred.pop()()
    assert texts(driver.menus[-1])[0] == "Indexing paused (nothing waiting)"

