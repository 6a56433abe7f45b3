"""Fixtures of the tray tests: an Xvfb display, a tiny system-tray host, artifacts, a vault."""

from __future__ import annotations

import os
import select
import subprocess
import threading
from collections.abc import Iterator
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
    proc = subprocess.Popen([XVFB, "-displayfd", str(write_fd), "-screen", "0", "640x200x24",
                             "-nolisten", "tcp"], pass_fds=(write_fd,),
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
def desktop_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A throwaway HOME and XDG_CONFIG_HOME, so autostart never touches the real session."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    return home
