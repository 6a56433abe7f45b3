"""Start at login on each platform: on, status, off; what is written is parsed back, and the
tray's checkbox shows the same state."""

from __future__ import annotations

import argparse
import configparser
import plistlib
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from ragd.daemon.errors import ConfigError
from ragd.tray.autostart import (
    RUN_VALUE,
    Autostart,
    cmd_autostart,
    desktop_exec,
    systemd_exec,
    templates_dir,
)
from ragd.tray.viewmodel import build_view, find_entry

TEMPLATES = Path(__file__).resolve().parents[2] / "packaging" / "autostart"
STATUS = {"state": "idle", "collections": [], "indexing": {"active": False, "remaining": 0}}


class FakeRegistry:
    """HKCU\\...\\Run as a dict (the real one is ragd.tray.autostart.WinRegistry)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    def set(self, name: str, value: str) -> None:
        self.values[name] = value

    def delete(self, name: str) -> bool:
        return self.values.pop(name, None) is not None


class FakeSystemctl:
    """`systemctl --user`, remembering what it was asked and what is enabled."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.enabled: set[str] = set()

    def __call__(self, args: Sequence[str]) -> tuple[int, str]:
        self.calls.append(list(args))
        verb, *units = args
        if verb == "enable":
            self.enabled.update(units)
        elif verb == "disable":
            self.enabled.difference_update(units)
        elif verb == "is-enabled":
            return (0, "enabled") if units[0] in self.enabled else (1, "disabled")
        return 0, ""


def no_systemctl(args: Sequence[str]) -> None:
    return None


def checkbox(auto: Autostart) -> bool | None:
    entry = find_entry(build_view(STATUS, auto.status()).menu, "Start at login")
    assert entry is not None
    return entry.checked


def read_desktop(path: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(path, encoding="utf-8")
    return parser["Desktop Entry"]


def validate_desktop(path: Path) -> None:
    if shutil.which("desktop-file-validate") is None:
        pytest.skip("desktop-file-validate not installed (Debian package desktop-file-utils): "
                    "the .desktop file was checked with configparser only")
    check = subprocess.run(["desktop-file-validate", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


# -- Linux: XDG autostart -----------------------------------------------------------------
def test_linux_desktop_entry(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "RAGD_HOME": str(tmp_path / "my ragd")}
    auto = Autostart(platform="linux", home=home, env=env, python="/opt/ragd/bin/python3",
                     systemctl=no_systemctl)
    assert not auto.status().enabled and checkbox(auto) is False

    result = auto.enable()
    path = tmp_path / "xdg" / "autostart" / "ragd.desktop"  # XDG_CONFIG_HOME is respected
    assert result.enabled and result.method == "desktop" and result.location == str(path)
    entry = read_desktop(path)
    assert entry["Type"] == "Application" and entry["Name"] == "ragd"
    # RAGD_HOME is carried so the tray at login finds the same daemon.
    assert entry["Exec"] == (f'env "RAGD_HOME={tmp_path}/my ragd" /opt/ragd/bin/python3 '
                             "-m ragd.tray.app")
    assert auto.status().enabled and checkbox(auto) is True

    off = auto.disable()
    assert not off.enabled and not path.exists() and checkbox(auto) is False
    auto.enable()
    validate_desktop(path)


def test_linux_default_config_home_and_disabled_entries(tmp_path: Path) -> None:
    auto = Autostart(platform="linux", home=tmp_path, env={"XDG_CONFIG_HOME": "relative/x"},
                     systemctl=no_systemctl)
    assert auto.location("desktop") == str(tmp_path / ".config" / "autostart" / "ragd.desktop")
    auto.enable()
    path = Path(auto.location("desktop"))
    # A session that switched the entry off keeps it off.
    path.write_text(path.read_text(encoding="utf-8").replace(
        "X-GNOME-Autostart-enabled=true", "X-GNOME-Autostart-enabled=false"), encoding="utf-8")
    assert not auto.status().enabled
    path.write_text("[Desktop Entry]\nType=Application\nHidden=true\n", encoding="utf-8")
    assert not auto.status().enabled


# -- Linux: systemd user unit ---------------------------------------------------------------
def test_systemd_unit_with_systemctl(tmp_path: Path) -> None:
    systemctl = FakeSystemctl()
    auto = Autostart(platform="linux", home=tmp_path, env={"RAGD_HOME": "/data/r%d"},
                     python="/usr/bin/python3", systemctl=systemctl)
    result = auto.enable("systemd")
    unit = tmp_path / ".config" / "systemd" / "user" / "ragd.service"
    assert result.enabled and result.location == str(unit)
    assert ["enable", "ragd.service"] in systemctl.calls
    assert "systemctl --user start ragd.service" in result.detail
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read(unit, encoding="utf-8")
    assert parser["Service"]["ExecStart"] == "/usr/bin/python3 -m ragd.daemon.cli.main daemon"
    assert parser["Service"]["Restart"] == "on-failure"
    assert parser["Install"]["WantedBy"] == "default.target"
    assert '"RAGD_HOME=/data/r%%d"' in unit.read_text(encoding="utf-8")  # % is a specifier
    assert auto.status().enabled and auto.status().method == "systemd"
    assert checkbox(auto) is True

    off = auto.disable("systemd")
    assert not off.enabled and not unit.exists()
    assert ["disable", "ragd.service"] in systemctl.calls
    assert checkbox(auto) is False


def test_systemd_unit_without_systemctl_links_by_hand(tmp_path: Path) -> None:
    auto = Autostart(platform="linux", home=tmp_path, env={}, systemctl=no_systemctl)
    result = auto.enable("systemd")
    assert result.enabled
    assert "systemctl --user is not available" in result.detail
    link = tmp_path / ".config" / "systemd" / "user" / "default.target.wants" / "ragd.service"
    assert link.is_symlink() and link.resolve() == Path(result.location).resolve()
    off = auto.disable("systemd")
    assert not off.enabled and not link.exists() and not Path(result.location).exists()
    assert "removed the files by hand" in off.detail


def test_systemd_on_real_machine_if_available(tmp_path: Path) -> None:
    """The default runner: None here when no user manager answers (containers, CI)."""
    from ragd.tray.autostart import run_systemctl

    answer = run_systemctl(["is-enabled", "ragd-test-nonexistent.service"])
    assert answer is None or answer[0] != 0


# -- macOS: LaunchAgent ---------------------------------------------------------------------
def test_macos_launch_agent(tmp_path: Path) -> None:
    home = tmp_path / "Users" / "ann"
    auto = Autostart(platform="darwin", home=home, env={"RAGD_HOME": "/Volumes/x/ragd"},
                     python="/Applications/ragd/bin/python3")
    assert not auto.status().enabled and checkbox(auto) is False
    result = auto.enable()
    path = home / "Library" / "LaunchAgents" / "io.ragd.tray.plist"
    assert result.method == "launchagent" and result.location == str(path) and result.enabled
    plist = plistlib.loads(path.read_bytes())
    assert plist["Label"] == "io.ragd.tray"
    assert plist["ProgramArguments"] == ["/Applications/ragd/bin/python3", "-m", "ragd.tray.app"]
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] is False
    assert plist["EnvironmentVariables"]["RAGD_HOME"] == "/Volumes/x/ragd"
    assert plist["StandardErrorPath"] == str(home / "Library" / "Logs" / "ragd-tray.log")
    assert checkbox(auto) is True
    assert not auto.disable().enabled and not path.exists() and checkbox(auto) is False


# -- Windows: the Run key -------------------------------------------------------------------
def test_windows_run_key() -> None:
    registry = FakeRegistry()
    auto = Autostart(platform="win32", home=Path("C:/Users/ann"), env={},
                     python=r"C:\Program Files\Python311\python.exe", registry=registry)
    assert not auto.status().enabled and checkbox(auto) is False
    result = auto.enable()
    assert result.method == "registry" and result.enabled
    assert result.location == (r"HKEY_CURRENT_USER\Software\Microsoft\Windows"
                               r"\CurrentVersion\Run\ragd")
    # pythonw: no console window at login.
    assert registry.values[RUN_VALUE] == r'"C:\Program Files\Python311\pythonw.exe" -m ragd.tray.app'
    assert checkbox(auto) is True
    assert not auto.disable().enabled and registry.values == {} and checkbox(auto) is False


def test_windows_warns_that_ragd_home_is_not_carried() -> None:
    auto = Autostart(platform="win32", env={"RAGD_HOME": r"D:\ragd"}, registry=FakeRegistry(),
                     python=r"C:\Python\python.exe")
    assert "RAGD_HOME" in auto.enable().detail


# -- methods, quoting, templates, the command -----------------------------------------------
def test_methods_are_checked() -> None:
    with pytest.raises(ConfigError, match="not available on darwin"):
        Autostart(platform="darwin", env={}).enable("systemd")
    with pytest.raises(ConfigError, match="not supported"):
        Autostart(platform="sunos5", env={}).status()


def test_exec_quoting() -> None:
    assert desktop_exec(["/usr/bin/ragd-tray"]) == "/usr/bin/ragd-tray"
    assert desktop_exec(["/opt/my apps/python", "-m", "ragd.tray.app"]) == \
        '"/opt/my apps/python" -m ragd.tray.app'
    assert desktop_exec(["/x/100%"]) == "/x/100%%"
    assert desktop_exec(['/a "b"']) == '"/a \\\\"b\\\\""'  # Exec quoting, then string escaping
    assert systemd_exec(["/opt/my apps/python", "-m", "ragd.daemon.cli.main"]) == \
        '"/opt/my apps/python" -m ragd.daemon.cli.main'
    assert systemd_exec(["/x/%h$"]) == "/x/%%h$$"


def test_templates_are_valid_as_shipped() -> None:
    assert templates_dir() == TEMPLATES
    plistlib.loads((TEMPLATES / "io.ragd.tray.plist").read_bytes())
    assert read_desktop(TEMPLATES / "ragd.desktop")["Type"] == "Application"
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.read(TEMPLATES / "ragd.service", encoding="utf-8")
    assert unit["Install"]["WantedBy"] == "default.target"
    validate_desktop(TEMPLATES / "ragd.desktop")


def test_cmd_autostart_on_status_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setattr("ragd.tray.autostart.run_systemctl", no_systemctl)
    if not sys.platform.startswith("linux"):
        pytest.skip("the command is exercised on Linux; other layouts are unit-tested above")
    entry = tmp_path / "cfg" / "autostart" / "ragd.desktop"

    assert cmd_autostart(argparse.Namespace(action="on", method=None)) == 0
    assert f"ragd will start at login (desktop): {entry}" in capsys.readouterr().out
    assert cmd_autostart(argparse.Namespace(action="status", method=None)) == 0
    out = capsys.readouterr().out
    assert "start at login: on" in out and str(entry) in out and "systemd: off" in out
    assert cmd_autostart(argparse.Namespace(action="off", method=None)) == 0
    assert "will not start at login" in capsys.readouterr().out
    assert not entry.exists()
    assert cmd_autostart(argparse.Namespace(action="status", method=None)) == 0
    assert "start at login: off" in capsys.readouterr().out

    assert cmd_autostart(argparse.Namespace(action="on", method="systemd")) == 0
    out = capsys.readouterr().out
    assert "(systemd)" in out and "note: systemctl --user is not available" in out
    assert cmd_autostart(argparse.Namespace(action="off", method="systemd")) == 0
