"""The desktop around the tray: whether an icon can be shown, opening files, one tray per
RAGD_HOME, and the tray's own log. Standard library only; pystray is imported on demand."""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import subprocess
import sys
from typing import Any

from ragd.daemon.errors import ConfigError, RagdError
from ragd.daemon.settings.paths import Paths

log = logging.getLogger(__name__)
LOCK_NAME = "tray.lock"
LOG_NAME = "tray.log"
NO_DISPLAY_HINT = ("run ragd-tray inside your desktop session (DISPLAY or WAYLAND_DISPLAY "
                   "must be set); `ragd status` shows the same information in a terminal")


def load_pystray(backend: str | None = None) -> Any:
    """Import pystray with ``backend`` (see :mod:`ragd.tray.backend_choice`), or raise a ConfigError
    that says why there can be no icon. ``PYSTRAY_BACKEND``, when set, wins. A backend that
    fails to load (a typelib gone, GTK unable to open the display) gives way to xorg."""
    forced = os.environ.get("PYSTRAY_BACKEND", "")
    if (sys.platform.startswith("linux") and forced != "dummy"
            and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY")):
        raise ConfigError("cannot show a tray icon: there is no display", NO_DISPLAY_HINT)
    if forced or "pystray" in sys.modules:
        backend = None  # pystray picks its backend once, when first imported
    try:
        return _import_pystray(backend)
    except Exception as exc:  # Xlib.error.DisplayNameError/DisplayConnectionError, ImportError,
        # ValueError from gi.require_version when a typelib is missing
        if backend in ("appindicator", "gtk") and os.environ.get("DISPLAY"):
            log.warning("pystray's %s backend did not load (%s: %s); using xorg (no menu)",
                        backend, type(exc).__name__, exc)
            try:
                return _import_pystray("xorg")
            except Exception as again:
                exc = again
        raise ConfigError(f"cannot show a tray icon: {type(exc).__name__}: {exc}",
                          NO_DISPLAY_HINT) from exc


def _import_pystray(backend: str | None) -> Any:
    if backend:
        os.environ["PYSTRAY_BACKEND"] = backend
    try:
        import pystray
    except BaseException:
        if backend:
            del os.environ["PYSTRAY_BACKEND"]
        raise
    return pystray


def pystray_backend(pystray: Any) -> str:
    """The backend pystray loaded: ``appindicator``, ``gtk``, ``xorg``, ``darwin``, …"""
    return str(pystray.Icon.__module__).rpartition("._")[2]


def notice_once(paths: Paths, name: str, text: str) -> bool:
    """Tell the user ``text`` once per RAGD_HOME (until the text changes): on stderr, in the
    log and as a desktop notification where a notification service runs. True when told now."""
    marker = paths.state_dir / f"{name}.notice"
    with contextlib.suppress(OSError):
        if marker.read_text(encoding="utf-8") == text:
            log.info("%s", text)
            return False
    log.warning("%s", text)
    if sys.stderr is not None:
        print(f"note: {text}", file=sys.stderr)
    desktop_notification("ragd", text)
    with contextlib.suppress(OSError):
        paths.state_dir.mkdir(parents=True, exist_ok=True)
        marker.write_text(text, encoding="utf-8")
    return True


def desktop_notification(summary: str, body: str, timeout: float = 2.0) -> bool:
    """A bubble through org.freedesktop.Notifications (the xorg backend has none of its own)."""
    try:
        from jeepney import DBusAddress, MessageType, new_method_call
        from jeepney.io.blocking import open_dbus_connection

        service = DBusAddress("/org/freedesktop/Notifications",
                              bus_name="org.freedesktop.Notifications",
                              interface="org.freedesktop.Notifications")
        message = new_method_call(service, "Notify", "susssasa{sv}i",
                                  ("ragd", 0, "", summary, body, [], {}, -1))
        with open_dbus_connection(bus="SESSION") as conn:
            reply = conn.send_and_get_reply(message, timeout=timeout)
        return bool(reply.header.message_type == MessageType.method_return)
    except Exception as exc:  # no bus, no notification service: the log and stderr remain
        log.debug("no desktop notification: %s", exc)
        return False


def open_path(path: str) -> None:
    """Open a file or folder with the desktop's default application."""
    if sys.platform == "win32":
        os.startfile(path)  # type: ignore[attr-defined]
        return
    command = ["open", path] if sys.platform == "darwin" else ["xdg-open", path]
    try:
        subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        raise RagdError(f"cannot open {path}: {command[0]} failed ({exc})",
                        f"open it yourself: {path}") from exc


def tray_lock(paths: Paths) -> Any:
    """One tray per RAGD_HOME: the held lock, or None when another tray holds it."""
    from ragd.daemon.ipc.discovery import try_lock_file

    paths.ensure()
    try:
        return try_lock_file(paths.runtime_dir / LOCK_NAME)
    except OSError:  # a file system without locks: behave as if another tray held it
        return None


def setup_logging(paths: Paths, verbose: bool) -> None:
    """A small rotating tray.log beside the daemon's log; stderr too in a terminal."""
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    with contextlib.suppress(OSError):
        paths.state_dir.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            paths.state_dir / LOG_NAME, maxBytes=1_000_000, backupCount=1, encoding="utf-8")
        handler.setFormatter(fmt)
        root.addHandler(handler)
    if sys.stderr is not None and sys.stderr.isatty():
        stream = logging.StreamHandler()
        stream.setFormatter(fmt)
        root.addHandler(stream)
