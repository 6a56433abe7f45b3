"""Which pystray backend the tray uses, and what a Linux desktop lacks for a menu.

pystray's own order on Linux (appindicator, gtk, xorg) takes the first that *imports*, not the
first that works: the appindicator backend imports fine on a desktop with no StatusNotifier host,
where its icon then falls back to an XEmbed icon or shows nowhere, and a missing typelib raises
a ValueError that pystray does not catch. So the tray chooses itself (decision 0017):

1. **appindicator** where a StatusNotifier host is registered (KDE Plasma, GNOME with the
   AppIndicator extension, XFCE's and LXQt's panels, Budgie, MATE): the menu is exported over
   D-Bus (``com.canonical.dbusmenu``) and the panel draws it;
2. **gtk** where only an XEmbed tray owns ``_NET_SYSTEM_TRAY_S<n>`` (older panels, i3bar,
   trayer): GTK draws the menu on a click on the docked icon;
3. when neither is up yet (the tray started at login before the panel), appindicator, then gtk:
   both wait for their host;
4. **xorg** as the last resort: an icon and its tooltip, no menu.

:func:`choose` is pure: it takes a :class:`Desktop` (what :func:`probe` found) and the configured
``[tray] backend``. :func:`probe` reads the session bus (jeepney, pure Python), the X server
(python-xlib, which pystray needs anyway) and the typelib folders, never importing ``gi``.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ragd.daemon.settings.paths import Paths

log = logging.getLogger(__name__)

AUTO = "auto"
LINUX_BACKENDS = ("appindicator", "gtk", "xorg")
CONFIG_CHOICES = (AUTO, *LINUX_BACKENDS)
MENU_BACKENDS = ("appindicator", "gtk", "darwin", "win32", "dummy")
SNI_WATCHER = "org.kde.StatusNotifierWatcher"
PYGOBJECT_PIN = "PyGObject>=3.42,<3.51"
NO_MENU_COMMANDS = "ragd status, ragd index, ragd pause, ragd resume, ragd stop"

# What each missing piece is called by each packaging family: (apt, dnf).
PACKAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # Building PyGObject (and pycairo) in ragd's environment.
    "pygobject": (("libgirepository1.0-dev", "libcairo2-dev", "pkg-config", "python3-dev", "gcc"),
                  ("gobject-introspection-devel", "cairo-gobject-devel", "pkgconf-pkg-config",
                   "python3-devel", "gcc")),
    "gtk": (("gir1.2-gtk-3.0",), ("gtk3",)),
    "appindicator": (("gir1.2-ayatanaappindicator3-0.1",), ("libayatana-appindicator-gtk3",)),
}
TYPELIBS = {"gtk": ("Gtk-3.0",), "appindicator": ("AyatanaAppIndicator3-0.1", "AppIndicator3-0.1")}


@dataclass(frozen=True)
class Desktop:
    """What the session offers a tray icon. ``None``: could not be asked (no bus, no X)."""

    platform: str = sys.platform
    display: bool = False  # DISPLAY or WAYLAND_DISPLAY
    x11: bool = False  # DISPLAY: an X server, where XEmbed and xorg work
    sni_host: bool | None = None  # a StatusNotifierWatcher with a host registered
    xembed_tray: bool | None = None  # an owner of _NET_SYSTEM_TRAY_S<screen>
    gi: bool = False  # PyGObject importable by this Python
    buildable: bool = False  # pkg-config finds what building PyGObject needs
    gtk: bool = False  # Gtk-3.0 typelib
    appindicator: bool = False  # (Ayatana)AppIndicator3 typelib
    family: str = "apt"  # "apt" (Debian, Ubuntu, …) or "dnf" (Fedora, RHEL, …)


@dataclass(frozen=True)
class Choice:
    """The backend to use, whether it has a menu, and why."""

    backend: str
    menus: bool
    reason: str
    missing: tuple[str, ...] = ()  # system packages that would give a menu
    install: str = ""  # the command that installs them (and PyGObject)


def missing_packages(desktop: Desktop) -> tuple[str, ...]:
    """The system packages (of the desktop's family) that stand between it and a menu."""
    index = 0 if desktop.family == "apt" else 1
    out: list[str] = []
    if not desktop.gi and not desktop.buildable:
        out += PACKAGES["pygobject"][index]
    if not desktop.gtk:
        out += PACKAGES["gtk"][index]
    if not desktop.appindicator:
        out += PACKAGES["appindicator"][index]
    return tuple(out)


def install_command(desktop: Desktop, python: str = sys.executable) -> str:
    """The exact commands that give this desktop a menu; empty when nothing is missing."""
    packages = missing_packages(desktop)
    manager = "apt install" if desktop.family == "apt" else "dnf install"
    commands = [f"sudo {manager} {' '.join(packages)}"] if packages else []
    if not desktop.gi:
        commands.append(f"{python} -m pip install '{PYGOBJECT_PIN}'")
    return " && ".join(commands)


def choose(configured: str, desktop: Desktop) -> Choice:
    """The backend for ``desktop``; ``configured`` is ``[tray] backend`` (``auto`` or a name)."""
    if desktop.platform in ("darwin", "win32"):
        return Choice(desktop.platform, True, f"pystray's {desktop.platform} backend "
                      "(the only one on this system)")
    can_gtk = desktop.gi and desktop.gtk
    can_indicator = can_gtk and desktop.appindicator
    missing = missing_packages(desktop)
    install = install_command(desktop)
    usable = {"appindicator": can_indicator, "gtk": can_gtk, "xorg": desktop.x11}
    if configured in LINUX_BACKENDS:
        if usable[configured] or configured == "xorg":
            return Choice(configured, configured != "xorg", "set in the configuration "
                          "([tray] backend)", missing, install)
        log.warning("[tray] backend = %s cannot run here; choosing automatically", configured)
    if can_indicator and desktop.sni_host:
        return Choice("appindicator", True, "a StatusNotifier host is running", missing,
                      install)
    if can_gtk and desktop.x11 and desktop.xembed_tray:
        return Choice("gtk", True, "an XEmbed system tray is running (no StatusNotifier host)",
                      missing, install)
    if not desktop.sni_host and not desktop.xembed_tray:
        # No host yet, e.g. started at login before the panel: both wait for theirs.
        if can_indicator:
            return Choice("appindicator", True, "no tray host is running yet; the icon "
                          "appears when a StatusNotifier host starts", missing, install)
        if can_gtk and desktop.x11:
            return Choice("gtk", True, "no tray host is running yet; the icon appears when "
                          "an XEmbed tray starts", missing, install)
    if can_gtk and desktop.x11:  # a StatusNotifier host only, but no AppIndicator typelib
        return Choice("gtk", True, "a StatusNotifier host without the AppIndicator library: "
                      "GTK's icon shows where the desktop bridges XEmbed icons", missing,
                      install)
    if not desktop.gi:
        why = "PyGObject is not installed"
    elif not desktop.gtk:
        why = "GTK's introspection data is missing"
    else:  # GTK but no AppIndicator library, and no X server for an XEmbed icon (Wayland)
        why = "no AppIndicator library, and no X display for an XEmbed icon"
    return Choice("xorg", False, f"{why}: the icon has no menu", missing, install)


def no_menu_notice(choice: Choice) -> str:
    """The sentence shown once when the icon has no menu."""
    text = (f"ragd's tray icon has no menu here ({choice.reason}). "
            f"The same actions from a terminal: {NO_MENU_COMMANDS}.")
    if choice.install:
        text += f" For a menu: {choice.install}"
    return text


# -- probing the session --------------------------------------------------------------------
def _typelib_dirs(env: Mapping[str, str]) -> list[str]:
    dirs = [d for d in env.get("GI_TYPELIB_PATH", "").split(os.pathsep) if d]
    for pattern in ("/usr/lib/*/girepository-1.0", "/usr/lib64/girepository-1.0",
                    "/usr/lib/girepository-1.0", "/usr/local/lib/girepository-1.0",
                    "/usr/local/lib/*/girepository-1.0"):
        dirs += sorted(glob.glob(pattern))
    return dirs


def _buildable() -> bool:
    """Whether pkg-config finds the libraries PyGObject (and pycairo) build against."""
    import shutil
    import subprocess

    if shutil.which("pkg-config") is None:
        return False
    try:
        return subprocess.run(["pkg-config", "--exists", "gobject-introspection-1.0", "cairo"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _has_typelib(names: tuple[str, ...], dirs: list[str]) -> bool:
    return any(Path(d, f"{name}.typelib").is_file() for d in dirs for name in names)


def _family(os_release: Path = Path("/etc/os-release")) -> str:
    try:
        text = os_release.read_text(encoding="utf-8")
    except OSError:
        return "apt"
    ids: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key in ("ID", "ID_LIKE"):
            ids.update(value.strip().strip('"').split())
    return "dnf" if ids & {"fedora", "rhel", "centos"} else "apt"


def sni_host_registered(timeout: float = 1.0) -> bool | None:
    """Whether the session bus has a StatusNotifierWatcher with a host; None: no bus."""
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS") and not os.environ.get("XDG_RUNTIME_DIR"):
        return None
    try:
        from jeepney import DBusAddress, Properties
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection
    except ImportError:
        return None
    try:
        with open_dbus_connection(bus="SESSION") as conn:
            reply = conn.send_and_get_reply(message_bus.NameHasOwner(SNI_WATCHER),
                                            timeout=timeout)
            if not reply.body[0]:
                return False
            watcher = DBusAddress("/StatusNotifierWatcher", bus_name=SNI_WATCHER,
                                  interface=SNI_WATCHER)
            msg = Properties(watcher).get("IsStatusNotifierHostRegistered")
            reply = conn.send_and_get_reply(msg, timeout=timeout)
            if reply.header.message_type.name == "error":
                return True  # a watcher that does not say: trust it
            return bool(reply.body[0][1])
    except Exception as exc:  # no session bus, a refused connection, a timeout
        log.debug("cannot ask the session bus for a StatusNotifier host: %s", exc)
        return None
    return None  # (a context manager may swallow; mypy's flow analysis wants this)


def xembed_tray_owned(display_name: str | None) -> bool | None:
    """Whether an XEmbed system tray owns its selection on the default screen; None: no X."""
    if not display_name:
        return None
    try:
        from Xlib import display

        dpy = display.Display(display_name)
    except Exception as exc:
        log.debug("cannot open the X display %s: %s", display_name, exc)
        return None
    try:
        atom = dpy.intern_atom(f"_NET_SYSTEM_TRAY_S{dpy.get_default_screen()}")
        owner = dpy.get_selection_owner(atom)
        return bool(owner) and owner != 0
    finally:
        dpy.close()


def probe(env: Mapping[str, str] | None = None, *, ask_session: bool = True) -> Desktop:
    """What this session offers; ``ask_session=False`` skips the bus and the X server."""
    env = os.environ if env is None else env
    dirs = _typelib_dirs(env)
    x11 = bool(env.get("DISPLAY"))
    gi = importlib.util.find_spec("gi") is not None
    return Desktop(
        platform=sys.platform,
        display=x11 or bool(env.get("WAYLAND_DISPLAY")),
        x11=x11,
        sni_host=sni_host_registered() if ask_session else None,
        xembed_tray=xembed_tray_owned(env.get("DISPLAY")) if ask_session and x11 else None,
        gi=gi,
        buildable=not gi and _buildable(),
        gtk=_has_typelib(TYPELIBS["gtk"], dirs),
        appindicator=_has_typelib(TYPELIBS["appindicator"], dirs),
        family=_family(),
    )


def configured(paths: Paths) -> str:
    """``[tray] backend`` from the configuration; ``auto`` when it cannot be read."""
    from ragd.daemon.errors import RagdError
    from ragd.daemon.settings.config import load_config

    try:
        return str(load_config(paths, write_default=False).tray.backend)
    except RagdError as exc:
        log.warning("cannot read [tray] backend (%s); choosing automatically", exc.message)
        return AUTO


def for_session(paths: Paths) -> Choice:
    """The choice for the session the tray runs in, as ``ragd doctor`` reports it too."""
    return choose(configured(paths), probe())
