"""Which pystray backend the tray takes on each desktop, what it says when there is no menu,
and the two probes (an XEmbed tray on a real X server, a StatusNotifier host on a real bus)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ragd.daemon.settings.paths import resolve_paths
from ragd.tray import backend_choice as bc
from ragd.tray.desktop import notice_once

FULL = bc.Desktop(platform="linux", display=True, x11=True, sni_host=False, xembed_tray=False,
                  gi=True, gtk=True, appindicator=True, family="apt")
BARE = replace(FULL, gi=False, gtk=False, appindicator=False)


@pytest.mark.parametrize(("desktop", "backend", "menus", "why"), [
    (replace(FULL, sni_host=True), "appindicator", True, "a StatusNotifier host is running"),
    (replace(FULL, sni_host=True, xembed_tray=True), "appindicator", True, "StatusNotifier"),
    (replace(FULL, xembed_tray=True), "gtk", True, "an XEmbed system tray is running"),
    (FULL, "appindicator", True, "no tray host is running yet"),  # the panel starts later
    (replace(FULL, appindicator=False), "gtk", True, "no tray host is running yet"),
    (replace(FULL, appindicator=False, sni_host=True), "gtk", True, "without the AppIndicator"),
    (replace(FULL, sni_host=True, gi=False), "xorg", False, "PyGObject is not installed"),
    (replace(FULL, xembed_tray=True, gtk=False), "xorg", False, "introspection data"),
    (replace(FULL, sni_host=None, xembed_tray=None), "appindicator", True, "no tray host"),
    (replace(FULL, x11=False, sni_host=True), "appindicator", True, "StatusNotifier"),  # Wayland
    (replace(FULL, x11=False, sni_host=True, appindicator=False), "xorg", False,
     "no AppIndicator library, and no X display"),
])
def test_the_automatic_choice(desktop: bc.Desktop, backend: str, menus: bool,
                              why: str) -> None:
    choice = bc.choose("auto", desktop)
    assert (choice.backend, choice.menus) == (backend, menus)
    assert why in choice.reason


def test_a_configured_backend_wins_when_it_can_run() -> None:
    host = replace(FULL, sni_host=True)
    assert bc.choose("gtk", host).backend == "gtk"
    assert bc.choose("xorg", host) == bc.Choice("xorg", False, "set in the configuration "
                                                "([tray] backend)")
    # One that cannot run here gives way to the automatic choice.
    assert bc.choose("appindicator", replace(host, appindicator=False)).backend == "gtk"


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_macos_and_windows_have_one_backend_with_a_menu(platform: str) -> None:
    for configured in ("auto", "xorg"):
        choice = bc.choose(configured, replace(BARE, platform=platform))
        assert (choice.backend, choice.menus, choice.missing) == (platform, True, ())


def test_missing_packages_and_the_exact_install_command() -> None:
    debian = bc.choose("auto", BARE)
    assert debian.missing == ("libgirepository1.0-dev", "libcairo2-dev", "pkg-config",
                              "python3-dev", "gcc", "gir1.2-gtk-3.0",
                              "gir1.2-ayatanaappindicator3-0.1")
    assert debian.install == (
        "sudo apt install libgirepository1.0-dev libcairo2-dev pkg-config python3-dev gcc "
        f"gir1.2-gtk-3.0 gir1.2-ayatanaappindicator3-0.1 && {sys.executable} -m pip install "
        "'PyGObject>=3.42,<3.51'")
    fedora = bc.choose("auto", replace(BARE, family="dnf", gi=True))
    assert fedora.install == "sudo dnf install gtk3 libayatana-appindicator-gtk3"
    assert bc.choose("auto", replace(FULL, appindicator=False)).missing == (
        "gir1.2-ayatanaappindicator3-0.1",)
    assert bc.choose("auto", FULL).install == ""
    only_pip = bc.choose("auto", replace(FULL, gi=False, buildable=True))
    assert only_pip.missing == ()
    assert only_pip.install == f"{sys.executable} -m pip install 'PyGObject>=3.42,<3.51'"


def test_the_no_menu_notice_names_the_commands_and_the_fix() -> None:
    text = bc.no_menu_notice(bc.choose("auto", BARE))
    assert text.startswith("ragd's tray icon has no menu here (PyGObject is not installed")
    for command in ("ragd status", "ragd index", "ragd pause", "ragd resume"):
        assert command in text
    assert "sudo apt install libgirepository1.0-dev" in text


def test_the_notice_is_shown_once(capsys: pytest.CaptureFixture[str]) -> None:
    paths = resolve_paths()
    assert notice_once(paths, "tray-no-menu", "no menu here")
    assert "note: no menu here" in capsys.readouterr().err
    assert not notice_once(paths, "tray-no-menu", "no menu here")
    assert capsys.readouterr().err == ""
    assert notice_once(paths, "tray-no-menu", "no menu here, for another reason")


def test_probe_reads_typelibs_and_the_distribution(tmp_path: Path) -> None:
    (tmp_path / "Gtk-3.0.typelib").write_bytes(b"")
    assert bc._has_typelib(bc.TYPELIBS["gtk"], [str(tmp_path)])
    assert not bc._has_typelib(bc.TYPELIBS["appindicator"], [str(tmp_path)])
    (tmp_path / "AppIndicator3-0.1.typelib").write_bytes(b"")  # Ubuntu's older library
    assert bc._has_typelib(bc.TYPELIBS["appindicator"], [str(tmp_path)])
    assert str(tmp_path) in bc._typelib_dirs({"GI_TYPELIB_PATH": str(tmp_path)})
    release = tmp_path / "os-release"
    release.write_text('ID=fedora\nVERSION_ID=41\n', encoding="utf-8")
    assert bc._family(release) == "dnf"
    release.write_text('ID=linuxmint\nID_LIKE="ubuntu debian"\n', encoding="utf-8")
    assert bc._family(release) == "apt"
    release.write_text('ID="rocky"\nID_LIKE="rhel centos fedora"\n', encoding="utf-8")
    assert bc._family(release) == "dnf"
    desktop = bc.probe({}, ask_session=False)
    assert (desktop.display, desktop.sni_host, desktop.xembed_tray) == (False, None, None)


@pytest.mark.slow
def test_probe_sees_a_real_xembed_tray(xserver: str, request: pytest.FixtureRequest,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    assert bc.xembed_tray_owned(xserver) is False
    request.getfixturevalue("tray_host")  # now a tray owns _NET_SYSTEM_TRAY_S0
    assert bc.xembed_tray_owned(xserver) is True
    monkeypatch.setenv("DISPLAY", xserver)
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    desktop = bc.probe()
    assert desktop.xembed_tray is True and desktop.x11 and desktop.sni_host is None
    assert bc.xembed_tray_owned(":4095") is None  # no X server there


@pytest.mark.slow
def test_probe_sees_a_real_statusnotifier_host(session_bus: str, sni_host: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", sni_host)
    assert bc.sni_host_registered() is True


@pytest.mark.slow
def test_a_bus_without_a_host(session_bus: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", session_bus)
    assert bc.sni_host_registered() is False
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
    assert bc.sni_host_registered() is None


def test_the_tray_falls_back_to_xorg_when_its_backend_cannot_load(tmp_path: Path) -> None:
    """A chosen backend that fails to import (here: GTK cannot open an unreachable display)
    gives way to xorg, whose error then says what is wrong; never a traceback."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSTRAY_BACKEND", "WAYLAND_DISPLAY")}
    code = ("import sys\nfrom ragd.tray.desktop import load_pystray\n"
            "try:\n    load_pystray('gtk')\nexcept Exception as exc:\n    print(exc.message)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env={**env, "DISPLAY": ":4095"},
                         cwd=Path(__file__).resolve().parents[2])
    assert run.stdout.startswith("cannot show a tray icon: Display"), run.stdout + run.stderr
    if "gi" in run.stderr or "Gtk" in run.stderr:  # PyGObject installed: gtk was tried first
        assert "backend did not load" in run.stderr and "using xorg (no menu)" in run.stderr




@pytest.mark.slow
def test_an_icon_without_a_menu_says_so_once(tray_host: Any, tmp_path: Path,
                                             stop_process: Any) -> None:
    """The real tray on the xorg backend ([tray] backend = xorg), started twice: the first
    start tells the user there is no menu and which commands do the same; the second does not."""
    from daemon_proc import wait_for

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSTRAY_BACKEND", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS")}
    env["RAGD_TRAY_BACKEND"] = "xorg"
    log = resolve_paths().state_dir / "tray.log"
    outputs = []

    def started(times: int) -> bool:
        text = log.read_text(encoding="utf-8") if log.exists() else ""
        # Past the notice: the icon runs and follows the (absent) daemon. A second start may
        # dock a window with the first one's id, so `docked` is not counted.
        starts = text.split("; backend xorg: set in the configuration")
        return len(starts) == times + 1 and "daemon not reachable" in starts[-1] and bool(
            tray_host.docked)

    for run in (1, 2):
        out = tmp_path / f"tray-{run}.err"
        with open(out, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "ragd.tray.app", "--no-start"], env=env,
                                    cwd=Path(__file__).resolve().parents[2],
                                    stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_for(lambda n=run: started(n), 30, f"start {run} to dock")
        finally:
            stop_process(proc)
        outputs.append(out.read_text(encoding="utf-8"))
    assert ("note: ragd's tray icon has no menu here (set in the configuration ([tray] "
            "backend)). The same actions from a terminal: ragd status, ragd index, ragd pause, "
            "ragd resume, ragd stop.") in outputs[0]
    assert "note:" not in outputs[1]
    assert "Traceback" not in outputs[0] + outputs[1]
