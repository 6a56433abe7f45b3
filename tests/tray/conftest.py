"""Fixtures of the tray tests: an Xvfb display, a tiny system-tray host, artifacts, a vault."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from vault_fixtures import write_vault

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "tray"
XVFB = "/usr/bin/Xvfb"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def xserver() -> Iterator[str]:
    """A private Xvfb display (":N"), or a skip that says how to get one."""
    if not os.path.exists(XVFB):
        pytest.skip(f"{XVFB} not found: install the Debian package xvfb (apt-get install xvfb) "
                    "to run the real tray icon test")
    read_fd, write_fd = os.pipe()
    # -displayfd: Xvfb picks a free display number and writes it once it accepts connections.
    # -noreset: by default Xvfb resets when its last client leaves, and a client connecting
    # meanwhile (a probe, the tray host) is refused or cut off.
    proc = subprocess.Popen([XVFB, "-displayfd", str(write_fd), "-screen", "0", "640x200x24",
                             "-noreset", "-nolisten", "tcp"], pass_fds=(write_fd,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_fd)
    try:
        ready, _, _ = select.select([read_fd], [], [], 30)
        number = os.read(read_fd, 16).decode().strip() if ready else ""
        if not number:
            pytest.fail("Xvfb did not report its display within 30 s")
        yield f":{number}"
    finally:
        os.close(read_fd)
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


class TrayHost:
    """The smallest XEMBED system tray: owns ``_NET_SYSTEM_TRAY_S0`` and docks icon windows.

    pystray's xorg backend docks into whatever owns that selection, as into a panel's tray;
    without one its window is never mapped and a screenshot would show nothing.
    """

    SLOT = 48

    def __init__(self, display_name: str) -> None:
        from Xlib import X, display

        self.X = X
        self.display = display.Display(display_name)
        screen = self.display.screen()
        self.window = screen.root.create_window(
            0, 0, self.SLOT * 4, self.SLOT, 0, screen.root_depth,
            background_pixel=screen.white_pixel, event_mask=X.StructureNotifyMask)
        self.window.map()
        self.selection = self.display.intern_atom(
            f"_NET_SYSTEM_TRAY_S{self.display.get_default_screen()}")
        self.opcode = self.display.intern_atom("_NET_SYSTEM_TRAY_OPCODE")
        self.window.set_selection_owner(self.selection, X.CurrentTime)
        self.display.flush()
        self.docked: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tray-host", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        fd = self.display.fileno()
        while not self._stop.is_set():
            ready, _, _ = select.select([fd], [], [], 0.1)
            if not ready and not self.display.pending_events():
                continue
            while self.display.pending_events():
                event = self.display.next_event()
                if event.type == self.X.ClientMessage and event.client_type == self.opcode:
                    _fmt, data = event.data
                    if data[1] == 0:  # SYSTEM_TRAY_REQUEST_DOCK
                        self._dock(data[2])

    def _dock(self, window_id: int) -> None:
        if window_id in self.docked:
            return
        window = self.display.create_resource_object("window", window_id)
        window.reparent(self.window, self.SLOT * len(self.docked), 0)
        window.configure(width=self.SLOT, height=self.SLOT)
        window.map()
        self.display.flush()
        self.docked.append(window_id)

    def screenshot(self) -> Any:
        """The whole screen as a PIL image (what `xwd -root` would show)."""
        from PIL import Image

        root = self.display.screen().root
        geo = root.get_geometry()
        raw = root.get_image(0, 0, geo.width, geo.height, self.X.ZPixmap, 0xFFFFFFFF)
        return Image.frombytes("RGB", (geo.width, geo.height), raw.data, "raw", "BGRX")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.display.close()


@pytest.fixture
def tray_host(xserver: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TrayHost]:
    monkeypatch.setenv("DISPLAY", xserver)
    host = TrayHost(xserver)
    try:
        yield host
    finally:
        host.close()


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """The shared test vault plus two files the daemon must skip, with their reasons."""
    root = write_vault(tmp_path / "vault")
    (root / "Inbox").mkdir()
    (root / "Inbox" / "Empty note.md").write_text("", encoding="utf-8")
    (root / "Inbox" / "Corrupt.md").write_bytes(b"# Corrupt\x00\x00\x01binary junk")
    return root


@pytest.fixture
def daemon(ragd_home: Path, vault: Path, tmp_path: Path) -> Iterator[Any]:
    """A real daemon over the test vault, idle (its first pass done)."""
    from daemon_proc import DaemonProc

    d = DaemonProc(ragd_home, vault, tmp_path / "daemon.log").start()
    try:
        d.wait_idle()
        yield d
    finally:
        d.stop()


@pytest.fixture
def desktop_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A throwaway HOME and XDG_CONFIG_HOME, so autostart never touches the real session."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    return home


# -- a desktop session for the menu backends: a private session bus and a real tray host ------
DBUS_DAEMON = "/usr/bin/dbus-daemon"
SNI_HOST = "/usr/bin/gtk-sni-tray-standalone"  # Debian: haskell-gtk-sni-tray-utils
SNI_WATCHER = "/usr/bin/status-notifier-watcher"  # Debian: haskell-status-notifier-item-utils
CI_PACKAGES = ("dbus-daemon haskell-status-notifier-item-utils haskell-gtk-sni-tray-utils "
               "trayer gir1.2-ayatanaappindicator3-0.1 gir1.2-gtk-3.0 libgirepository1.0-dev "
               "libcairo2-dev pkg-config")


def require_menu_libraries() -> None:
    """Skip without PyGObject and the typelibs, naming them; fail when the system has them
    but ragd's environment has no PyGObject (then `make setup` went wrong)."""
    import importlib.util

    from ragd.tray.backend_choice import probe

    desktop = probe({}, ask_session=False)
    if importlib.util.find_spec("gi") is not None and desktop.gtk and desktop.appindicator:
        return
    built = subprocess.run(["pkg-config", "--exists", "gobject-introspection-1.0", "cairo"],
                           capture_output=True).returncode == 0 if shutil.which("pkg-config") \
        else False
    if built and desktop.gtk and desktop.appindicator:
        pytest.fail("the system has GTK, AppIndicator and PyGObject's build dependencies but "
                    "ragd's environment has no PyGObject: `make setup` should have installed "
                    "the tray-menus extra")
    pytest.skip(f"the tray menu test needs PyGObject and GTK's typelibs: apt-get install "
                f"{CI_PACKAGES}, then make setup")


@pytest.fixture
def session_bus() -> Iterator[str]:
    """A private D-Bus session bus: its address."""
    if not os.path.exists(DBUS_DAEMON):
        pytest.skip(f"{DBUS_DAEMON} not found: apt-get install dbus-daemon")
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([DBUS_DAEMON, "--session", "--nofork", "--nopidfile",
                             f"--print-address={write_fd}"], pass_fds=(write_fd,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_fd)
    try:
        ready, _, _ = select.select([read_fd], [], [], 30)
        address = os.read(read_fd, 4096).decode().strip() if ready else ""
        if not address:
            pytest.fail("dbus-daemon did not print its address within 30 s")
        yield address
    finally:
        os.close(read_fd)
        stop_process(proc)


@pytest.fixture(name="stop_process")
def stop_process_fixture() -> Any:
    """:func:`stop_process`, for test modules (they cannot import conftest)."""
    return stop_process


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """Terminate ``proc`` and reap it; kill it when it does not end within 10 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def sni_host(xserver: str, session_bus: str, tmp_path: Path) -> Iterator[str]:
    """A real StatusNotifierWatcher (status-notifier-watcher) and a real host drawing its bar
    on the Xvfb display (gtk-sni-tray-standalone), on the private bus; yields the bus address
    once the host is registered. The watcher runs first, on its own: the host's --watcher
    option starts one too, but then calls it before it owns its name, one start in four."""
    require_menu_libraries()
    for program, package in ((SNI_WATCHER, "haskell-status-notifier-item-utils"),
                             (SNI_HOST, "haskell-gtk-sni-tray-utils")):
        if not os.path.exists(program):
            pytest.skip(f"{program} not found: apt-get install {package}")
    from daemon_proc import wait_for

    env = {**os.environ, "DISPLAY": xserver, "DBUS_SESSION_BUS_ADDRESS": session_bus,
           "NO_AT_BRIDGE": "1"}
    procs: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], name: str) -> subprocess.Popen[bytes]:
        with open(tmp_path / f"{name}.log", "wb") as log:
            procs.append(subprocess.Popen(args, env=env, stdout=log, stderr=log))
        return procs[-1]

    def wait(what: str, proc: subprocess.Popen[bytes], name: str, ready: Any) -> None:
        try:
            wait_for(ready, 30, what)
        except AssertionError as exc:
            log_text = (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:]
            raise AssertionError(f"{exc}; exit status {proc.poll()}; its log:\n"
                                 f"{log_text}") from None

    try:
        with Bus(session_bus) as bus:
            watcher = start([SNI_WATCHER], "sni-watcher")
            wait("the StatusNotifierWatcher", watcher, "sni-watcher",
                 lambda: bus.has_owner(WATCHER))
            host = start([SNI_HOST, "--bottom"], "sni-host")
            wait("the StatusNotifier host to register", host, "sni-host", bus.host_registered)
        yield session_bus
    finally:
        for proc in reversed(procs):
            stop_process(proc)


WATCHER = "org.kde.StatusNotifierWatcher"
ITEM = "org.kde.StatusNotifierItem"
DBUSMENU = "com.canonical.dbusmenu"


@dataclass(frozen=True)
class MenuNode:
    """One item of a menu exported over com.canonical.dbusmenu."""

    id: int
    label: str
    enabled: bool
    toggle_state: int | None
    children: tuple[MenuNode, ...]

    def walk(self) -> Iterator[MenuNode]:
        yield self
        for child in self.children:
            yield from child.walk()

    def find(self, text: str) -> MenuNode | None:
        return next((n for n in self.walk() if n.label.startswith(text)), None)

    def labels(self) -> list[str]:
        return [n.label for n in self.walk() if n.label]


class Bus:
    """The desktop's side of the StatusNotifierItem and dbusmenu protocols, over jeepney: what
    a panel reads from the watcher and the item, and the events it sends when a user clicks."""

    def __init__(self, address: str) -> None:
        from jeepney.io.blocking import open_dbus_connection

        self.conn = open_dbus_connection(bus=address)

    def __enter__(self) -> Bus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def call(self, bus_name: str, path: str, interface: str, method: str,
             signature: str | None = None, body: tuple[Any, ...] = ()) -> tuple[Any, ...]:
        from jeepney import DBusAddress, MessageType, new_method_call

        address = DBusAddress(path, bus_name=bus_name, interface=interface)
        reply = self.conn.send_and_get_reply(new_method_call(address, method, signature, body),
                                             timeout=10)
        if reply.header.message_type == MessageType.error:
            raise RuntimeError(f"{interface}.{method}: {reply.body}")
        return tuple(reply.body)

    def prop(self, bus_name: str, path: str, interface: str, name: str) -> Any:
        [(_sig, value)] = self.call(bus_name, path, "org.freedesktop.DBus.Properties", "Get",
                                    "ss", (interface, name))
        return value

    def has_owner(self, name: str) -> bool:
        [owned] = self.call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                            "org.freedesktop.DBus", "NameHasOwner", "s", (name,))
        return bool(owned)

    def host_registered(self) -> bool:
        try:
            return bool(self.prop(WATCHER, "/StatusNotifierWatcher", WATCHER,
                                  "IsStatusNotifierHostRegistered"))
        except RuntimeError:  # the watcher is not up yet
            return False

    def items(self) -> list[tuple[str, str]]:
        """(bus name, object path) of every registered item, as the watcher lists them."""
        names = self.prop(WATCHER, "/StatusNotifierWatcher", WATCHER,
                          "RegisteredStatusNotifierItems")
        out = []
        for name in names:
            # "service/path", or a bare bus name (the item at the path it registered)
            service, _, path = name.partition("/")
            out.append((service, "/" + path if path else self._item_path(service)))
        return out

    def _item_path(self, service: str) -> str:
        entries = self.prop(WATCHER, "/StatusNotifierWatcher", WATCHER, "RegisteredSNIEntries")
        return next(path for name, path in entries if name == service)

    def menu(self, service: str, menu_path: str) -> MenuNode:
        _revision, layout = self.call(service, menu_path, DBUSMENU, "GetLayout", "iias",
                                      (0, -1, []))
        return self._node(layout)

    def _node(self, layout: tuple[int, dict[str, Any], list[Any]]) -> MenuNode:
        item_id, props, children = layout

        def value(key: str, default: Any) -> Any:
            return props[key][1] if key in props else default

        # GTK's exporter keeps mnemonics: "__" stands for a literal underscore.
        label = str(value("label", "")).replace("__", "\0").replace("_", "").replace("\0", "_")
        toggle = value("toggle-state", None)
        return MenuNode(item_id, label, bool(value("enabled", True)),
                        None if toggle is None else int(toggle),
                        tuple(self._node(child[1]) for child in children))

    def click(self, service: str, menu_path: str, item_id: int) -> None:
        """What a panel sends when the user clicks a menu item."""
        self.call(service, menu_path, DBUSMENU, "AboutToShow", "i", (0,))
        self.call(service, menu_path, DBUSMENU, "Event", "isvu",
                  (item_id, "clicked", ("i", 0), 0))


@pytest.fixture
def desktop_bus(sni_host: str) -> Iterator[Bus]:
    with Bus(sni_host) as bus:
        yield bus


TRAYER = "/usr/bin/trayer"  # Debian: trayer, a standalone XEmbed system tray


@pytest.fixture
def trayer(xserver: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """trayer, a real XEmbed system tray, along the top of the Xvfb screen; yields DISPLAY."""
    if not os.path.exists(TRAYER):
        pytest.skip(f"{TRAYER} not found: apt-get install trayer")
    from daemon_proc import wait_for

    from ragd.tray.backend_choice import xembed_tray_owned

    monkeypatch.setenv("DISPLAY", xserver)
    with open(tmp_path / "trayer.log", "wb") as log:
        proc = subprocess.Popen([TRAYER, "--edge", "top", "--align", "left", "--widthtype",
                                 "pixel", "--width", "240", "--height", "48"],
                                env={**os.environ, "NO_AT_BRIDGE": "1"}, stdout=log, stderr=log)
    try:
        wait_for(lambda: xembed_tray_owned(xserver), 30, "trayer to own the tray selection")
        yield xserver
    finally:
        stop_process(proc)


@pytest.fixture
def menu_libraries() -> None:
    """PyGObject and GTK's typelibs, or a skip (or failure) that says why; see
    :func:`require_menu_libraries`."""
    require_menu_libraries()
