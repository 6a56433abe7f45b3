"""The tray app: ragd's state at a glance, Reindex now, pause, and start at login.

Threads: pystray's icon loop on the main thread (macOS requires it); a follower that keeps a
connection to the daemon (starting one when none answers, reconnecting with backoff when it
goes away), reads its progress events on a second connection and polls ``status`` as a
fallback; and an action thread, so no IPC call ever blocks the menu.

Everything shown comes from :func:`ragd.tray.viewmodel.build_view`; this module only renders that
view with pystray and maps its action ids to IPC calls. Light on purpose: the IPC client and
the standard library; pystray and Pillow are imported when the icon is made (``import pystray``
without a display raises Xlib's DisplayNameError, which :func:`load_pystray` turns into a
sentence).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ragd.daemon import __version__
from ragd.daemon.errors import DaemonUnavailable, RagdError
from ragd.daemon.ipc.client import Client
from ragd.daemon.runtime.launch import connect
from ragd.daemon.settings.paths import Paths, resolve_paths
from ragd.tray import backend_choice
from ragd.tray import viewmodel as vm
from ragd.tray.autostart import Autostart, AutostartStatus
from ragd.tray.backends import CALL_TIMEOUT_S as ICON_CALL_TIMEOUT_S
from ragd.tray.backends import IconDriver, driver_for
from ragd.tray.desktop import (
    load_pystray,
    notice_once,
    open_path,
    pystray_backend,
    setup_logging,
    tray_lock,
)
from ragd.tray.icons import icon_image, platform_size

log = logging.getLogger(__name__)

CLIENT_NAME = "ragd-tray"
POLL_S = 5.0  # status poll while connected: the fallback when an event is missed
BACKOFF_MIN_S, BACKOFF_MAX_S = 0.5, 30.0  # reconnect delays after the daemon goes away
CALL_TIMEOUT_S = 15.0

Connector = Callable[..., Client]
Opener = Callable[[str], None]


class TrayApp:
    """The follower, the actions and (in :meth:`run`) the pystray icon.

    Every collaborator can be injected, so tests drive it with a real daemon and pystray's
    own menu items, and the benchmark runs it without an icon.
    """

    def __init__(self, paths: Paths | None = None, *, start_daemon: bool = True,
                 autostart: Autostart | None = None, opener: Opener = open_path,
                 connector: Connector = connect, poll_interval: float = POLL_S,
                 platform: str = sys.platform) -> None:
        self.paths = paths or resolve_paths()
        self.autostart = autostart or Autostart()
        self.opener = opener
        self.connector = connector
        self.poll_interval = poll_interval
        self.platform = platform
        self.icon: Any = None
        self.pystray: Any = None
        self.listeners: list[Callable[[vm.TrayView], None]] = []
        self._local_paths = {"config": str(self.paths.config_file),
                             "log": str(self.paths.log_file), "data": str(self.paths.data_dir)}
        self._source: Mapping[str, Any] | BaseException | None = None
        self._skipped: dict[str, list[dict[str, Any]]] = {}
        self._skipped_key: Any = None
        self._autostart_state = self._read_autostart()
        self._lock = threading.RLock()
        self._publish_lock = threading.Lock()
        self._icon_lock = threading.Lock()
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._start_requested = start_daemon
        self._ctl: Client | None = None
        self._sub: Client | None = None
        self._actions: queue.Queue[tuple[str, str | None] | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self.view = self._build()

    # -- lifecycle --------------------------------------------------------------------------
    def start_background(self) -> None:
        """Start following the daemon and serving actions (no icon needed)."""
        for name, target in (("ragd-tray-follow", self._follow),
                             ("ragd-tray-actions", self._serve_actions)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def run(self) -> int:
        """Show the icon and block in pystray's loop until Quit (call on the main thread)."""
        self.pystray = pystray = load_pystray()
        view = self.view
        self.icon = pystray.Icon("ragd", icon=self._image(view), title=view.title,
                                 menu=self._pystray_menu(view.menu))
        try:
            self.icon.run(setup=self._setup)
        except Exception:
            if not self._stop.is_set():
                raise
            # pystray's gtk and appindicator backends close their notification on the way out
            # and raise when the session has no notification service: the loop is over anyway.
            log.info("pystray's loop ended with an error after Quit", exc_info=True)
        finally:
            self.stop()
            if self._driver is not None:
                self._driver.close()
        return 0

    def _setup(self, icon: Any) -> None:
        self._driver = driver = driver_for(icon)
        with self._icon_lock:
            driver.show()
        self._render(None, self.view)  # whatever changed while the loop was starting
        self.start_background()

    def stop(self) -> None:
        """Stop following, close the connections and end the icon's loop."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._wake.set()
        self._actions.put(None)
        for client in (self._sub, self._ctl):
            if client is not None:
                client.close()
        if self.icon is not None:
            driver = self._driver or IconDriver(self.icon)
            # After any update in flight, never beside one (see ragd.tray.backends).
            locked = self._icon_lock.acquire(timeout=ICON_CALL_TIMEOUT_S)
            try:
                driver.stop()
            finally:
                if locked:
                    self._icon_lock.release()

    def join(self, timeout: float = 5.0) -> None:
        for thread in self._threads:
            thread.join(timeout)

    def wait_for_view(self, predicate: Callable[[vm.TrayView], bool],
                      timeout: float) -> vm.TrayView:
        """Block until the view satisfies ``predicate``; raise TimeoutError at the deadline."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.view):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"the tray view is still {self.view.status_line!r}")
                self._changed.wait(left)
            return self.view

    # -- following the daemon ---------------------------------------------------------------
    def _follow(self) -> None:
        backoff = BACKOFF_MIN_S
        while not self._stop.is_set():
            start, self._start_requested = self._start_requested, False
            if start:
                self._set_source(None)  # "Starting the daemon…"
            try:
                ctl = self.connector(self.paths, start=start, client_name=CLIENT_NAME,
                                     call_timeout=CALL_TIMEOUT_S)
            except RagdError as exc:
                log.info("daemon not reachable: %s", exc)
                self._set_source(exc)
                self._sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            backoff = BACKOFF_MIN_S
            try:
                self._session(ctl)
            except RagdError as exc:
                log.info("lost the daemon: %s", exc)
                self._set_source(exc)
            finally:
                ctl.close()
            if not self._stop.is_set() and isinstance(self._source, Mapping):
                self._set_source(DaemonUnavailable("lost the connection to the daemon",
                                                   "it stopped or restarted"))

    def _sleep(self, seconds: float) -> None:
        """Wait before the next attempt; "Start the daemon" or Quit cut it short."""
        self._wake.wait(seconds)
        self._wake.clear()

    def _session(self, ctl: Client) -> None:
        sub = self.connector(self.paths, start=False, client_name=CLIENT_NAME,
                             call_timeout=CALL_TIMEOUT_S)
        self._sub = sub
        over = threading.Event()
        try:
            events = sub.subscribe()  # before the first poll: no change falls in between
            pump = threading.Thread(target=self._pump, args=(events, over),
                                    name="ragd-tray-events", daemon=True)
            pump.start()
            self._ctl = ctl
            while not self._stop.is_set() and not over.is_set():
                try:
                    self._poll(ctl)
                except DaemonUnavailable as exc:
                    if ctl.closed:
                        raise
                    # A slow answer, not a lost daemon (the client stays usable): keep the
                    # last view and ask again at the next poll.
                    log.info("status poll: %s", exc)
                self._wake.wait(self.poll_interval)
                self._wake.clear()
        finally:
            self._ctl = self._sub = None
            sub.close()
        pump.join(2.0)

    def _pump(self, events: Any, over: threading.Event) -> None:
        try:
            for event in events:
                self._on_event(event)
        except RagdError as exc:
            log.info("event stream ended: %s", exc)
        finally:
            over.set()
            self._wake.set()

    def _on_event(self, event: Mapping[str, Any]) -> None:
        with self._lock:
            if not isinstance(self._source, Mapping):
                return
            before = self._source.get("state")
            self._source = vm.apply_event(self._source, event)
            after = self._source.get("state")
        self._refresh()
        if before != after or event.get("type") != "progress" or after == "idle":
            self._wake.set()  # a state change: let a status poll fill in the details

    def _poll(self, ctl: Client) -> None:
        status = ctl.call("status")
        with self._lock:
            self._source = status
        key = tuple((c.get("name"), c.get("skipped_count"), c.get("last_indexed"))
                    for c in status.get("collections") or [])
        if status.get("state") in ("idle", "indexing", "paused") and key != self._skipped_key:
            rows = ctl.call("skipped", {})
            grouped: dict[str, list[dict[str, Any]]] = {}
            for row in rows or []:
                grouped.setdefault(str(row.get("collection")), []).append(row)
            with self._lock:
                self._skipped, self._skipped_key = grouped, key
        self._refresh()

    def _set_source(self, source: Mapping[str, Any] | BaseException | None) -> None:
        with self._lock:
            self._source = source
        self._refresh()

    # -- the view -----------------------------------------------------------------------------
    def _read_autostart(self) -> AutostartStatus | None:
        try:
            return self.autostart.status()
        except RagdError as exc:
            log.info("start at login unavailable: %s", exc)
            return None

    def _build(self) -> vm.TrayView:
        with self._lock:
            return vm.build_view(self._source, self._autostart_state, skipped=self._skipped,
                                 local_paths=self._local_paths, tray_version=__version__)

    def _refresh(self) -> None:
        with self._publish_lock:
            view = self._build()
            old = self.view
            if view == old:
                return
            self._render(old, view)
            self.view = view  # after rendering: whoever sees this view finds it on the icon
        for listener in list(self.listeners):
            listener(view)
        with self._changed:
            self._changed.notify_all()

    _driver: IconDriver | None = None

    def _render(self, old: vm.TrayView | None, view: vm.TrayView) -> None:
        driver = self._driver
        if driver is None or self._stop.is_set():
            return

        def apply() -> None:
            if old is None or (old.icon, old.progress) != (view.icon, view.progress):
                driver.set_image(self._image(view))
            if old is None or old.title != view.title:
                driver.set_title(view.title)
            if old is None or old.menu != view.menu:
                driver.set_menu(self._pystray_menu(view.menu))

        with self._icon_lock:  # one caller into pystray at a time
            if self._stop.is_set():
                return
            try:
                self._on_gui_thread(apply)
            except Exception:  # a backend hiccup must not kill the follower
                log.exception("could not update the tray icon")

    def _on_gui_thread(self, fn: Callable[[], None]) -> None:
        if self.platform == "darwin":
            try:
                from PyObjCTools import AppHelper  # AppKit objects belong to the main thread
            except ImportError:
                fn()
            else:
                AppHelper.callAfter(fn)
            return
        fn()  # the gtk and xorg backends marshal to their loop themselves

    def _image(self, view: vm.TrayView) -> Any:
        return icon_image(view.icon, platform_size(self.platform), view.progress)

    def _pystray_menu(self, entries: tuple[vm.MenuEntry, ...]) -> Any:
        pystray = self.pystray
        items = []
        for entry in entries:
            if entry.separator:
                items.append(pystray.Menu.SEPARATOR)
            elif entry.children:
                items.append(pystray.MenuItem(entry.text, self._pystray_menu(entry.children),
                                              enabled=entry.enabled))
            else:
                checked = entry.checked
                items.append(pystray.MenuItem(
                    entry.text,
                    functools.partial(self._invoke, entry) if entry.action else None,
                    checked=None if checked is None else (lambda _item, c=checked: c),
                    enabled=entry.enabled))
        return pystray.Menu(*items)

    # -- actions ------------------------------------------------------------------------------
    def _invoke(self, entry: vm.MenuEntry, icon: Any = None, item: Any = None) -> None:
        """What a menu item does when clicked: queue its action (never block the menu)."""
        if entry.action is not None:
            self.perform(entry.action, entry.arg)

    def perform(self, action: str, arg: str | None = None) -> None:
        if action == vm.QUIT:
            self.stop()  # at once, from any thread
            return
        self._actions.put((action, arg))

    def _serve_actions(self) -> None:
        while True:
            job = self._actions.get()
            if job is None or self._stop.is_set():
                return
            action, arg = job
            try:
                self._do(action, arg)
            except RagdError as exc:
                log.warning("%s failed: %s", action, exc)
                self._notify(f"{exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
            except Exception:
                log.exception("%s failed", action)

    def _do(self, action: str, arg: str | None) -> None:
        if action == vm.REINDEX:
            params: dict[str, Any] = {"wait": False}
            if arg:
                params["collection"] = arg
            self._call("index", params)
        elif action in (vm.PAUSE, vm.RESUME):
            self._call(action)
        elif action == vm.OPEN_WINDOW:
            self._open_window()
        elif action == vm.OPEN_CONFIG:
            self._open(self._path("config"))
        elif action == vm.OPEN_LOG:
            self._open(self._path("log"))
        elif action == vm.AUTOSTART:
            current = self._read_autostart()
            if current is not None and current.enabled:
                self.autostart.disable()
            else:
                self.autostart.enable()
            with self._lock:
                self._autostart_state = self._read_autostart()
            self._refresh()
        elif action == vm.START_DAEMON:
            self._start_requested = True
            self._wake.set()
        elif action == vm.QUIT_AND_STOP:
            with contextlib.suppress(DaemonUnavailable):
                self._call("shutdown")
            self.stop()
        else:
            log.warning("unknown action %r", action)

    def _open_window(self) -> None:
        """ragd's window: the URL with this start's token from the status file, which only
        the user can read (decision 0053)."""
        import webbrowser

        from ragd.daemon.ipc.discovery import read_status

        url = (read_status(self.paths) or {}).get("window")
        if not url:
            raise RagdError("ragd serves no window", "[daemon] window is off in config.toml, "
                            "or it could not start: see the log")
        webbrowser.open(str(url))

    def _call(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        ctl = self._ctl
        if ctl is None:
            raise DaemonUnavailable("the daemon is not connected", "start it from the menu")
        result = ctl.call(method, params or {})
        self._wake.set()  # show the effect without waiting for the next poll
        return result

    def _path(self, key: str) -> Path:
        with self._lock:
            source = self._source
        paths = dict(self._local_paths)
        if isinstance(source, Mapping):
            paths.update({k: v for k, v in (source.get("paths") or {}).items() if v})
        return Path(paths[key])

    def _open(self, path: Path) -> None:
        # A fresh install has no config file or log yet: open the folder that will hold it.
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path = path.parent
        self.opener(str(path))

    def _notify(self, message: str) -> None:
        driver = self._driver
        if driver is not None:
            with self._icon_lock:
                driver.notify(message)


# -- entry points -------------------------------------------------------------------------------
def run_tray(*, start_daemon: bool = True, verbose: bool = False) -> int:
    """Run the tray until Quit. Raises RagdError when no icon can be shown."""
    paths = resolve_paths()
    choice = backend_choice.for_session(paths)
    linux = sys.platform.startswith("linux")
    pystray = load_pystray(choice.backend if linux else None)  # fail before the lock
    lock = tray_lock(paths)
    if lock is None:
        print("the ragd tray is already running", file=sys.stderr)
        return 0
    try:
        setup_logging(paths, verbose)
        loaded = pystray_backend(pystray)
        log.info("ragd tray %s starting (RAGD_HOME: %s); backend %s: %s", __version__,
                 os.environ.get("RAGD_HOME", "unset"), loaded, choice.reason)
        if linux and loaded == "xorg":
            if choice.backend != "xorg":
                choice = backend_choice.Choice("xorg", False, f"the {choice.backend} backend "
                                               "did not load, see tray.log", choice.missing,
                                               choice.install)
            notice_once(paths, "tray-no-menu", backend_choice.no_menu_notice(choice))
        return TrayApp(paths, start_daemon=start_daemon).run()
    finally:
        lock.release()


def cmd_tray(args: argparse.Namespace) -> int:
    """`ragd tray`."""
    return run_tray(start_daemon=not getattr(args, "no_start", False),
                    verbose=bool(getattr(args, "verbose", False)))


def main(argv: list[str] | None = None) -> int:
    """The `ragd-tray` console script."""
    parser = argparse.ArgumentParser(prog="ragd-tray",
                                     description="ragd's status icon in the system tray.")
    parser.add_argument("--version", action="version", version=f"ragd-tray {__version__}")
    parser.add_argument("--no-start", action="store_true",
                        help="do not start the daemon when none is running")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    args = parser.parse_args(argv)
    try:
        return cmd_tray(args)
    except RagdError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
