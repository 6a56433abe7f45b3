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

from daemon.errors import ConfigError, RagdError
from daemon.settings.paths import Paths

LOCK_NAME = "tray.lock"
LOG_NAME = "tray.log"
NO_DISPLAY_HINT = ("run ragd-tray inside your desktop session (DISPLAY or WAYLAND_DISPLAY "
                   "must be set); `ragd status` shows the same information in a terminal")


def load_pystray() -> Any:
    """Import pystray, or raise a ConfigError that says why there can be no icon."""
    backend = os.environ.get("PYSTRAY_BACKEND", "")
    if (sys.platform.startswith("linux") and backend != "dummy"
            and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY")):
        raise ConfigError("cannot show a tray icon: there is no display", NO_DISPLAY_HINT)
    try:
        import pystray
    except Exception as exc:  # Xlib.error.DisplayNameError/DisplayConnectionError, ImportError
        raise ConfigError(f"cannot show a tray icon: {type(exc).__name__}: {exc}",
                          NO_DISPLAY_HINT) from exc
    return pystray


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
    from daemon.ipc.discovery import try_lock_file

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
