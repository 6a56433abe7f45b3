"""Start ragd at login, per platform, from the templates in ``packaging/autostart/``.

| platform | method | what is written | what it starts |
|---|---|---|---|
| Linux | ``desktop`` (default) | ``$XDG_CONFIG_HOME/autostart/ragd.desktop`` | the tray |
| Linux | ``systemd`` | ``$XDG_CONFIG_HOME/systemd/user/ragd.service`` | the daemon |
| macOS | ``launchagent`` | ``~/Library/LaunchAgents/io.ragd.tray.plist`` | the tray |
| Windows | ``registry`` | ``HKCU\\...\\CurrentVersion\\Run`` value ``ragd`` | the tray |

The tray starts the daemon itself, so a desktop session needs only the tray. The systemd unit is
for machines without a panel (or people who want the daemon supervised); the tray finds and
follows that daemon just the same.

Every function takes the platform, home folder, environment, registry and ``systemctl`` runner
as parameters, so the macOS and Windows layouts are tested on Linux. Standard library only.
"""

from __future__ import annotations

import argparse
import configparser
import os
import plistlib
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import Protocol

from ragd.daemon.errors import ConfigError, RagdError

DESKTOP_FILE = "ragd.desktop"
SYSTEMD_UNIT = "ragd.service"
LAUNCH_AGENT_LABEL = "io.ragd.tray"
RUN_KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"
RUN_VALUE = "ragd"
METHODS: dict[str, tuple[str, ...]] = {"linux": ("desktop", "systemd"),
                                       "darwin": ("launchagent",), "win32": ("registry",)}
CARRIED_ENV = ("RAGD_HOME",)  # what the login entry must keep to find the same daemon

# (returncode, combined output) of `systemctl --user ARGS...`; None when it cannot run.
Systemctl = Callable[[Sequence[str]], "tuple[int, str] | None"]


class Registry(Protocol):
    """The values of one registry key (the real one is HKCU's Run key, via winreg)."""

    def get(self, name: str) -> str | None: ...

    def set(self, name: str, value: str) -> None: ...

    def delete(self, name: str) -> bool: ...


@dataclass(frozen=True)
class AutostartStatus:
    """Whether ragd starts at login, by which method, and where that is recorded."""

    enabled: bool
    method: str
    location: str
    supported: bool = True
    detail: str = ""

    def describe(self) -> str:
        state = "on" if self.enabled else "off"
        text = f"start at login is {state} ({self.method}: {self.location})"
        return f"{text}; {self.detail}" if self.detail else text


def platform_family(platform: str) -> str:
    if platform.startswith("linux") or platform.startswith("freebsd"):
        return "linux"
    return platform


def templates_dir() -> Path:
    """``packaging/autostart/`` of the source tree, or its installed copy under ``share/``."""
    candidates = [Path(__file__).resolve().parents[1] / "packaging" / "autostart",
                  Path(sys.prefix) / "share" / "ragd" / "autostart"]
    for candidate in candidates:
        if (candidate / DESKTOP_FILE).is_file():
            return candidate
    raise ConfigError("the autostart templates are missing from this installation",
                      f"looked in {', '.join(str(c) for c in candidates)}; reinstall ragd")


def _icon_path() -> str:
    for png in (Path(__file__).resolve().parents[1] / "packaging" / "icons" / "ragd.png",
                Path(sys.prefix) / "share" / "ragd" / "icons" / "ragd.png"):
        if png.is_file():
            return str(png)
    return "ragd"  # an icon-theme name: the desktop shows its generic icon if none matches


# -- quoting for each format -------------------------------------------------------------------
_DESKTOP_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")


def desktop_exec(argv: Sequence[str]) -> str:
    """An ``Exec=`` value (Desktop Entry spec: quoted arguments, then string escapes)."""
    out = []
    for arg in argv:
        arg = arg.replace("%", "%%")  # field codes
        if any(c in _DESKTOP_RESERVED for c in arg) or not arg:
            arg = '"' + "".join("\\" + c if c in '"`$\\' else c for c in arg) + '"'
        out.append(arg)
    # The key file's own string escaping applies on top of the Exec quoting.
    return " ".join(out).replace("\\", "\\\\")


def systemd_exec(argv: Sequence[str]) -> str:
    """An ``ExecStart=`` command line: C-style quoting, ``%`` and ``$`` escaped."""
    out = []
    for arg in argv:
        arg = arg.replace("%", "%%").replace("$", "$$")
        if not arg or any(c in arg for c in " \t\"'\\;"):
            arg = '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
        out.append(arg)
    return " ".join(out)


def _systemd_env(name: str, value: str) -> str:
    return '"' + f"{name}={value}".replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"') \
        + '"'


def _rewrite(text: str, section: str, values: Mapping[str, str],
             add: Sequence[tuple[str, str]] = ()) -> str:
    """Set ``key=value`` lines of an ini-style template's ``section``; append ``add`` there."""
    lines = text.splitlines()
    pending = dict(values)
    current = None
    insert_at = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            current = stripped[1:-1]
            insert_at = i + 1 if current == section else insert_at
            continue
        if current != section or not stripped or stripped.startswith(("#", ";")):
            continue
        insert_at = i + 1
        key = stripped.split("=", 1)[0].strip()
        if "=" in stripped and key in pending:
            lines[i] = f"{key}={pending.pop(key)}"
    if insert_at is None:
        raise ConfigError(f"the autostart template has no [{section}] section",
                          "reinstall ragd")
    lines[insert_at:insert_at] = [f"{k}={v}" for k, v in [*pending.items(), *add]]
    return "\n".join(lines) + "\n"


# -- the real registry and systemctl ---------------------------------------------------------
class WinRegistry:
    """HKCU's Run key through winreg (Windows only)."""

    def __init__(self, key: str = RUN_KEY) -> None:
        try:
            import winreg
        except ImportError as exc:
            raise ConfigError("the Windows registry is not available on this system",
                              "the registry method works on Windows only") from exc
        self._winreg = winreg
        self._key = key

    def get(self, name: str) -> str | None:
        wr = self._winreg
        try:
            with wr.OpenKey(wr.HKEY_CURRENT_USER, self._key) as key:  # type: ignore[attr-defined]
                value, _kind = wr.QueryValueEx(key, name)  # type: ignore[attr-defined]
        except FileNotFoundError:
            return None
        return str(value)

    def set(self, name: str, value: str) -> None:
        wr = self._winreg
        with wr.CreateKeyEx(wr.HKEY_CURRENT_USER, self._key, 0,  # type: ignore[attr-defined]
                            wr.KEY_SET_VALUE) as key:  # type: ignore[attr-defined]
            wr.SetValueEx(key, name, 0, wr.REG_SZ, value)  # type: ignore[attr-defined]

    def delete(self, name: str) -> bool:
        wr = self._winreg
        try:
            with wr.OpenKey(wr.HKEY_CURRENT_USER, self._key, 0,  # type: ignore[attr-defined]
                            wr.KEY_SET_VALUE) as key:  # type: ignore[attr-defined]
                wr.DeleteValue(key, name)  # type: ignore[attr-defined]
        except FileNotFoundError:
            return False
        return True


def run_systemctl(args: Sequence[str]) -> tuple[int, str] | None:
    """``systemctl --user ARGS``, or None when there is no systemctl or no user manager."""
    exe = shutil.which("systemctl")
    if exe is None:
        return None
    try:
        probe = subprocess.run([exe, "--user", "show-environment"], capture_output=True,
                               text=True, timeout=10)
        if probe.returncode != 0:  # no user bus: a container, a chroot, an ssh session
            return None
        done = subprocess.run([exe, "--user", *args], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.returncode, (done.stdout + done.stderr).strip()


# -- the autostart of one user ---------------------------------------------------------------
class Autostart:
    """Start-at-login for one user on one platform; every collaborator can be injected."""

    def __init__(self, *, platform: str | None = None, home: Path | None = None,
                 env: Mapping[str, str] | None = None, python: str | None = None,
                 registry: Registry | None = None, systemctl: Systemctl | None = None) -> None:
        self.platform = platform_family(platform or sys.platform)
        self.home = home if home is not None else Path.home()
        self.env = os.environ if env is None else env
        self.python = python or sys.executable
        self._registry = registry
        self.systemctl: Systemctl = systemctl or run_systemctl

    # where things go
    def default_method(self) -> str:
        methods = METHODS.get(self.platform)
        if not methods:
            raise ConfigError(f"start at login is not supported on {self.platform}",
                              "start `ragd-tray` from your session's own autostart settings")
        return methods[0]

    def check_method(self, method: str | None) -> str:
        method = method or self.default_method()
        if method not in METHODS.get(self.platform, ()):
            allowed = ", ".join(METHODS.get(self.platform, ())) or "none"
            raise ConfigError(f"--method {method} is not available on {self.platform}",
                              f"methods here: {allowed}")
        return method

    def config_home(self) -> Path:
        xdg = self.env.get("XDG_CONFIG_HOME", "").strip()
        # The XDG spec: a relative value is invalid and must be ignored.
        return Path(xdg) if xdg and os.path.isabs(xdg) else self.home / ".config"

    def location(self, method: str) -> str:
        if method == "desktop":
            return str(self.config_home() / "autostart" / DESKTOP_FILE)
        if method == "systemd":
            return str(self.config_home() / "systemd" / "user" / SYSTEMD_UNIT)
        if method == "launchagent":
            return str(self.home / "Library" / "LaunchAgents" / f"{LAUNCH_AGENT_LABEL}.plist")
        return f"HKEY_CURRENT_USER\\{RUN_KEY}\\{RUN_VALUE}"

    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = WinRegistry()
        return self._registry

    # what is started
    def tray_command(self) -> list[str]:
        if self.platform == "win32":
            # pythonw: no console window at every login.
            exe = PureWindowsPath(self.python)
            if exe.name.lower() == "python.exe":
                exe = exe.with_name("pythonw.exe")
            return [str(exe), "-m", "ragd.tray.app"]
        script = Path(self.python).with_name("ragd-tray")
        if script.is_file() and os.access(script, os.X_OK):
            return [str(script)]
        return [self.python, "-m", "ragd.tray.app"]

    def daemon_command(self) -> list[str]:
        return [self.python, "-m", "ragd.daemon.cli.main", "daemon"]

    def carried_env(self) -> dict[str, str]:
        return {k: self.env[k] for k in CARRIED_ENV if self.env.get(k)}

    # the three operations
    def status(self, method: str | None = None) -> AutostartStatus:
        """The real state. On Linux without ``method``: on if either method is on."""
        if method is None and self.platform == "linux":
            states = [self._status(m) for m in METHODS["linux"]]
            return next((s for s in states if s.enabled), states[0])
        return self._status(self.check_method(method))

    def enable(self, method: str | None = None) -> AutostartStatus:
        method = self.check_method(method)
        if method == "desktop":
            return self._write(method, self.render_desktop())
        if method == "launchagent":
            return self._write(method, self.render_plist())
        if method == "systemd":
            return self._enable_systemd()
        self.registry().set(RUN_VALUE, self.render_run_value())
        detail = ""
        if self.carried_env():
            detail = "the Run key cannot carry RAGD_HOME: set it as a user environment variable"
        return self._status(method, detail)

    def disable(self, method: str | None = None) -> AutostartStatus:
        """Turn it off; on Linux without ``method``, every method that is on."""
        if method is None and self.platform == "linux":
            for m in METHODS["linux"]:
                if self._status(m).enabled:
                    self.disable(m)
            return self.status()
        method = self.check_method(method)
        if method == "systemd":
            return self._disable_systemd()
        if method == "registry":
            self.registry().delete(RUN_VALUE)
        else:
            Path(self.location(method)).unlink(missing_ok=True)
        return self._status(method)

    # rendering
    def render_desktop(self) -> str:
        argv = self.tray_command()
        carried = self.carried_env()
        if carried:
            argv = ["env", *(f"{k}={v}" for k, v in carried.items()), *argv]
        text = (templates_dir() / DESKTOP_FILE).read_text(encoding="utf-8")
        return _rewrite(text, "Desktop Entry", {"Exec": desktop_exec(argv),
                                                "Icon": _icon_path()})

    def render_unit(self) -> str:
        text = (templates_dir() / SYSTEMD_UNIT).read_text(encoding="utf-8")
        env = [("Environment", _systemd_env(k, v)) for k, v in self.carried_env().items()]
        return _rewrite(text, "Service", {"ExecStart": systemd_exec(self.daemon_command())},
                        add=env)

    def render_plist(self) -> bytes:
        with open(templates_dir() / f"{LAUNCH_AGENT_LABEL}.plist", "rb") as fh:
            plist = plistlib.load(fh)
        plist["ProgramArguments"] = self.tray_command()
        plist.setdefault("EnvironmentVariables", {}).update(self.carried_env())
        logs = self.home / "Library" / "Logs"
        plist["StandardOutPath"] = plist["StandardErrorPath"] = str(logs / "ragd-tray.log")
        return plistlib.dumps(plist)

    def render_run_value(self) -> str:
        text = (templates_dir() / "windows-run.txt").read_text(encoding="utf-8")
        template = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(";")][-1]
        exe, *rest = self.tray_command()
        return template.replace("{exe}", exe).replace("{args}", subprocess.list2cmdline(rest))

    # internals
    def _write(self, method: str, content: str | bytes) -> AutostartStatus:
        path = Path(self.location(method))
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8") if isinstance(content, str) else content
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return self._status(method, "it starts at your next login")

    def _wants_link(self) -> Path:
        return self.config_home() / "systemd" / "user" / "default.target.wants" / SYSTEMD_UNIT

    def _enable_systemd(self) -> AutostartStatus:
        unit = Path(self.location("systemd"))
        unit.parent.mkdir(parents=True, exist_ok=True)
        unit.write_text(self.render_unit(), encoding="utf-8")
        if self.systemctl(["daemon-reload"]) is not None:
            result = self.systemctl(["enable", SYSTEMD_UNIT])
            if result is not None and result[0] != 0:
                raise RagdError(f"systemctl --user enable {SYSTEMD_UNIT} failed: {result[1]}",
                                f"the unit file is at {unit}")
            return self._status("systemd", "it starts at your next login; start it now with "
                                f"`systemctl --user start {SYSTEMD_UNIT}`")
        # No user manager to ask: do what `systemctl --user enable` does, a wants/ link.
        link = self._wants_link()
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(unit)
        return self._status("systemd", "systemctl --user is not available here: wrote the unit "
                            "and linked it into default.target.wants by hand")

    def _disable_systemd(self) -> AutostartStatus:
        unit = Path(self.location("systemd"))
        detail = ""
        if self.systemctl(["daemon-reload"]) is not None:
            self.systemctl(["disable", SYSTEMD_UNIT])
        else:
            detail = "systemctl --user is not available here: removed the files by hand"
        link = self._wants_link()
        if link.is_symlink() or link.exists():
            link.unlink()
        unit.unlink(missing_ok=True)
        if not detail:
            self.systemctl(["daemon-reload"])
        return self._status("systemd", detail)

    def _status(self, method: str, detail: str = "") -> AutostartStatus:
        location = self.location(method)
        if method == "registry":
            enabled = self.registry().get(RUN_VALUE) is not None
        elif method == "systemd":
            answer = self.systemctl(["is-enabled", SYSTEMD_UNIT])
            if answer is not None:
                enabled = answer[1].strip().splitlines()[:1] == ["enabled"]
            else:
                enabled = Path(location).is_file() and self._wants_link().exists()
        elif method == "desktop":
            enabled = _desktop_enabled(Path(location))
        else:
            enabled = _plist_enabled(Path(location))
        return AutostartStatus(enabled=enabled, method=method, location=location, detail=detail)


def _desktop_enabled(path: Path) -> bool:
    if not path.is_file():
        return False
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    try:
        parser.read(path, encoding="utf-8")
        entry = parser["Desktop Entry"]
    except (configparser.Error, KeyError, UnicodeDecodeError):
        return False
    return (entry.get("Hidden", "false").strip().lower() != "true"
            and entry.get("X-GNOME-Autostart-enabled", "true").strip().lower() != "false")


def _plist_enabled(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        with open(path, "rb") as fh:
            plist = plistlib.load(fh)
    except (plistlib.InvalidFileException, ValueError, OSError):
        return False
    return not plist.get("Disabled", False)


def current_status() -> AutostartStatus | None:
    """This user's state for the tray's checkbox; None where start at login is unsupported."""
    try:
        return Autostart().status()
    except RagdError:
        return None


def cmd_autostart(args: argparse.Namespace) -> int:
    """`ragd autostart on|off|status [--method desktop|systemd]`."""
    auto = Autostart()
    method = getattr(args, "method", None)
    if method is not None and auto.platform != "linux":
        raise ConfigError("--method applies to Linux only",
                          f"on {auto.platform} ragd uses {auto.default_method()}")
    if args.action == "on":
        result = auto.enable(method)
        print(f"ragd will start at login ({result.method}): {result.location}")
    elif args.action == "off":
        result = auto.disable(method)
        if result.enabled:
            print(f"still on: {result.location}")
            return 1
        print(f"ragd will not start at login ({result.method} removed: {result.location})"
              if method else "ragd will not start at login")
    else:
        result = auto.status(method)
        print(f"start at login: {'on' if result.enabled else 'off'}")
        print(f"  method: {result.method}")
        print(f"  {'where' if result.enabled else 'would be'}: {result.location}")
        if auto.platform == "linux" and method is None:
            other = [auto.status(m) for m in METHODS["linux"] if m != result.method]
            for o in other:
                print(f"  {o.method}: {'on' if o.enabled else 'off'} ({o.location})")
    if result.detail:
        print(f"note: {result.detail}")
    return 0
