"""Battery, mains and idle time, and the rule that holds bulk indexing on battery (0044).

A tray app runs always on, and on a laptop that means on battery too. Bulk work (a whole
collection, "Reindex now", a sync of many files) waits while the machine runs on battery
below ``[power] pause_on_battery_below`` percent, and starts again on mains power or once the
user has been away ``resume_when_idle_s`` seconds. A saved note is indexed at once either
way: the scheduler holds only bulk jobs (``ragd.daemon.runtime.scheduler``).

:class:`PowerSource` is the seam: one ``read()`` giving :class:`PowerState`. The real readers
are cheap (Linux reads a few files under ``/sys/class/power_supply``; macOS runs ``pmset`` and
``ioreg``; Windows makes two calls) and the idle time is read only on battery, where it
matters. Every parser is a pure function tested on captured output. ``RAGD_POWER_FILE`` names
a JSON file (``{"on_battery": true, "percent": 20, "idle_s": null}``) read instead of the
system, so a real daemon can be tested on any machine.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

POWER_FILE_ENV = "RAGD_POWER_FILE"
SYSFS = Path("/sys/class/power_supply")
COMMAND_TIMEOUT_S = 5.0
MIN_FRESH_S = 1.0  # a "fresh" look at the source is at most this often
BATTERY = "battery"  # the status' paused_for


@dataclass(frozen=True)
class PowerState:
    """What the power source says now. ``percent`` is the charge of the system's batteries
    (None: no battery, or unknown); ``idle_s`` how long since the user's last input (None:
    the system does not say, or it was not read)."""

    on_battery: bool
    percent: float | None = None
    idle_s: float | None = None


MAINS = PowerState(on_battery=False)


class PowerSource(Protocol):
    """Where the power state comes from: the system, or a file a test rewrites."""

    def read(self) -> PowerState: ...


# -- the rule ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PowerPolicy:
    """``[power]``: hold bulk work on battery below ``pause_below`` percent (100: on any
    battery; 0: never), unless the user has been idle ``resume_idle_s`` seconds (0: never)."""

    pause_below: float = 50.0
    resume_idle_s: float = 600.0

    @property
    def enabled(self) -> bool:
        return self.pause_below > 0


def pause_reason(state: PowerState, policy: PowerPolicy) -> str | None:
    """Why bulk work should wait now (``"battery"``), or None. An unknown charge on battery
    counts as low: the user asked to spare the battery."""
    if not policy.enabled or not state.on_battery:
        return None
    low = (policy.pause_below >= 100 or state.percent is None
           or state.percent < policy.pause_below)
    if not low:
        return None
    if policy.resume_idle_s > 0 and state.idle_s is not None \
            and state.idle_s >= policy.resume_idle_s:
        return None  # the user is away: the work gets done while nobody waits for the machine
    return BATTERY


class PowerGate:
    """The scheduler's question, "hold bulk work?", answered from a cached reading: the source
    is read at most every ``check_interval_s`` seconds, or now when asked ``fresh`` (at the
    start of a bulk job; at most every ``MIN_FRESH_S``). A reader that fails counts as mains
    power: a broken reader must never hold indexing for good. Thread-safe."""

    def __init__(self, source: PowerSource | None, policy: PowerPolicy, *,
                 check_interval_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.policy = policy
        self.check_interval_s = check_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._state: PowerState | None = None
        self._reason: str | None = None
        self._read_at = float("-inf")
        self.reads = 0  # how often the source was read (the cost of the gate)

    def reason(self, fresh: bool = False) -> str | None:
        """``"battery"`` while bulk work should wait, else None."""
        if self.source is None or not self.policy.enabled:
            return None
        now = self._clock()
        age = now - self._read_at
        if age >= self.check_interval_s or (fresh and age >= MIN_FRESH_S):
            self._refresh(now)
        return self._reason

    def _refresh(self, now: float) -> None:
        assert self.source is not None
        with self._lock:
            if now - self._read_at < MIN_FRESH_S:  # another thread just read it
                return
            try:
                state = self.source.read()
            except Exception:
                log.exception("reading the power source failed: taken as mains power")
                state = MAINS
            self.reads += 1
            self._read_at = now
            before, self._state = self._reason, state
            self._reason = pause_reason(state, self.policy)
        if self._reason != before:
            if self._reason:
                log.info("bulk indexing waits: on battery at %s (below %g %%); saves are "
                         "still indexed", _percent(state.percent), self.policy.pause_below)
            elif before:
                log.info("bulk indexing resumes: %s", "on mains power" if not state.on_battery
                         else "the user is idle" if state.idle_s else "battery charge is enough")

    def status(self) -> dict[str, Any] | None:
        """`status`'s ``power``: the last reading and the rule (None when the rule is off)."""
        if self.source is None or not self.policy.enabled:
            return None
        state = self._state
        return {"on_battery": state.on_battery if state else None,
                "percent": state.percent if state else None,
                "idle_s": round(state.idle_s, 1) if state and state.idle_s is not None else None,
                "pause_below": self.policy.pause_below,
                "resume_when_idle_s": self.policy.resume_idle_s,
                "paused_for": self._reason}


def _percent(p: float | None) -> str:
    return "an unknown charge" if p is None else f"{p:g} %"


# -- a file, for tests -------------------------------------------------------------------------
class FilePower:
    """``RAGD_POWER_FILE``: a JSON object with ``on_battery``, ``percent`` and ``idle_s``, read
    at every look. A missing or unreadable file is mains power."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def read(self) -> PowerState:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.warning("%s %s: %s; taken as mains power", POWER_FILE_ENV, self.path, exc)
            return MAINS
        if not isinstance(raw, dict):
            return MAINS
        return PowerState(bool(raw.get("on_battery")), _number(raw.get("percent")),
                          _number(raw.get("idle_s")))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


# -- Linux -------------------------------------------------------------------------------------
_SUPPLY_FILES = ("type", "online", "status", "capacity", "scope", "energy_now", "energy_full",
                 "charge_now", "charge_full")


def linux_supplies(root: Path = SYSFS) -> list[dict[str, str]]:
    """The files of each power supply that say what it is and how full it is."""
    out: list[dict[str, str]] = []
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return out
    for entry in entries:
        props = {"name": entry.name}
        for name in _SUPPLY_FILES:
            try:
                props[name] = (entry / name).read_text(encoding="ascii").strip()
            except (OSError, UnicodeDecodeError):
                continue
        out.append(props)
    return out


def linux_power(supplies: Sequence[Mapping[str, str]]) -> tuple[bool, float | None]:
    """(on battery, charge %) from ``/sys/class/power_supply``: on battery when no mains or
    USB supply is online and a system battery discharges. A peripheral's battery (a mouse:
    ``scope`` Device) does not count. The charge is weighted by each battery's capacity."""
    batteries = [s for s in supplies if s.get("type") == "Battery"
                 and s.get("scope", "System") != "Device"]
    if not batteries:
        return False, None
    external = [s for s in supplies if s.get("type") in ("Mains", "USB", "USB_C", "USB_PD")]
    if any(s.get("online") == "1" for s in external):
        on_battery = False
    else:
        on_battery = any(s.get("status") == "Discharging" for s in batteries)
    return on_battery, _linux_percent(batteries)


def _linux_percent(batteries: Sequence[Mapping[str, str]]) -> float | None:
    for now, full in (("energy_now", "energy_full"), ("charge_now", "charge_full")):
        try:
            total = sum(int(b[full]) for b in batteries)
            if total > 0:
                return round(100.0 * sum(int(b[now]) for b in batteries) / total, 1)
        except (KeyError, ValueError):
            continue
    caps = []
    for b in batteries:
        try:
            caps.append(float(b["capacity"]))
        except (KeyError, ValueError):
            continue
    return round(sum(caps) / len(caps), 1) if caps else None


def parse_loginctl_idle(text: str, now_us: int) -> float | None:
    """Seconds idle from ``loginctl show-session -p IdleHint -p IdleSinceHintMonotonic``: 0
    when the session is in use, None when nothing in the session reports idleness (a hint
    never set since login)."""
    props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    try:
        since = int(props.get("IdleSinceHintMonotonic", "0"))
    except ValueError:
        return None
    if props.get("IdleHint") == "yes" and since > 0:
        return max(0.0, (now_us - since) / 1e6)
    if props.get("IdleHint") == "no" and since > 0:
        return 0.0
    return None


Run = Callable[[Sequence[str]], str | None]


def run_command(args: Sequence[str]) -> str | None:
    """A command's output, or None when it is missing, fails or takes too long."""
    try:
        proc = subprocess.run(list(args), capture_output=True, timeout=COMMAND_TIMEOUT_S,
                              check=False, encoding="utf-8", errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def logind_idle(run: Run = run_command, env: Mapping[str, str] = os.environ,
                uid: int | None = None,
                now_us: Callable[[], int] = lambda: time.monotonic_ns() // 1000
                ) -> float | None:
    """The user's idle time as logind knows it (GNOME and others set the session's
    IdleHint): the daemon's own session, else the user's graphical one."""
    session = env.get("XDG_SESSION_ID")
    if not session:
        user = str(os.getuid() if uid is None and hasattr(os, "getuid") else uid)
        out = run(["loginctl", "show-user", user, "-p", "Display", "--value"])
        session = out.strip() if out else ""
    if not session:
        return None
    out = run(["loginctl", "show-session", session, "-p", "IdleHint",
               "-p", "IdleSinceHintMonotonic"])
    return parse_loginctl_idle(out, now_us()) if out else None


class LinuxPower:
    def __init__(self, root: Path = SYSFS, idle: Callable[[], float | None] = logind_idle
                 ) -> None:
        self.root, self.idle = root, idle

    def read(self) -> PowerState:
        on_battery, percent = linux_power(linux_supplies(self.root))
        return PowerState(on_battery, percent, self.idle() if on_battery else None)


# -- macOS -------------------------------------------------------------------------------------
_PMSET_SOURCE = re.compile(r"drawing from '([^']+)'")
_PMSET_PERCENT = re.compile(r"\t(\d{1,3})%;")
_HID_IDLE = re.compile(r'"HIDIdleTime"\s*=\s*(\d+)')


def parse_pmset(text: str) -> tuple[bool, float | None]:
    """(on battery, charge %) from ``pmset -g batt``: "Now drawing from 'Battery Power'" (or
    a UPS's), then one line per battery with its percentage."""
    source = _PMSET_SOURCE.search(text)
    on_battery = source is not None and source.group(1) in ("Battery Power", "UPS Power")
    percents = [float(p) for p in _PMSET_PERCENT.findall(text)]
    return on_battery, (round(sum(percents) / len(percents), 1) if percents else None)


def parse_ioreg_idle(text: str) -> float | None:
    """Seconds since the last input from ``ioreg -c IOHIDSystem`` (HIDIdleTime, in ns)."""
    m = _HID_IDLE.search(text)
    return int(m.group(1)) / 1e9 if m else None


class MacPower:
    def __init__(self, run: Run = run_command) -> None:
        self.run = run

    def read(self) -> PowerState:
        out = self.run(["pmset", "-g", "batt"])
        if out is None:
            return MAINS
        on_battery, percent = parse_pmset(out)
        idle = None
        if on_battery:
            hid = self.run(["ioreg", "-r", "-c", "IOHIDSystem", "-d", "1"])
            idle = parse_ioreg_idle(hid) if hid else None
        return PowerState(on_battery, percent, idle)


# -- Windows -----------------------------------------------------------------------------------
AC_OFFLINE, NO_SYSTEM_BATTERY, UNKNOWN = 0, 128, 255  # SYSTEM_POWER_STATUS values


def windows_state(ac_line: int, battery_flag: int, percent: int, tick_now: int,
                  last_input: int | None) -> PowerState:
    """A ``SYSTEM_POWER_STATUS`` (GetSystemPowerStatus) and GetLastInputInfo's tick, read:
    both ticks are GetTickCount's milliseconds, which wrap at 2^32."""
    # 255 is "unknown", whose bits would read as "no system battery": AC offline decides.
    has_battery = battery_flag == UNKNOWN or not battery_flag & NO_SYSTEM_BATTERY
    on_battery = ac_line == AC_OFFLINE and has_battery
    charge = None if percent == UNKNOWN or not has_battery else float(percent)
    idle = None if last_input is None else ((tick_now - last_input) & 0xFFFFFFFF) / 1000.0
    return PowerState(on_battery, charge, idle if on_battery else None)


class WindowsPower:
    def read(self) -> PowerState:  # pragma: no cover - Windows only
        import ctypes
        from ctypes import wintypes

        class SystemPowerStatus(ctypes.Structure):
            _fields_ = [("ACLineStatus", ctypes.c_ubyte), ("BatteryFlag", ctypes.c_ubyte),
                        ("BatteryLifePercent", ctypes.c_ubyte),
                        ("SystemStatusFlag", ctypes.c_ubyte),
                        ("BatteryLifeTime", wintypes.DWORD),
                        ("BatteryFullLifeTime", wintypes.DWORD)]

        class LastInputInfo(ctypes.Structure):
            _fields_ = [("cbSize", wintypes.UINT), ("dwTime", wintypes.DWORD)]

        kernel32 = ctypes.WinDLL("kernel32")  # type: ignore[attr-defined]
        user32 = ctypes.WinDLL("user32")  # type: ignore[attr-defined]
        status = SystemPowerStatus()
        if not kernel32.GetSystemPowerStatus(ctypes.byref(status)):
            return MAINS
        info = LastInputInfo(ctypes.sizeof(LastInputInfo), 0)
        last = info.dwTime if user32.GetLastInputInfo(ctypes.byref(info)) else None
        kernel32.GetTickCount.restype = wintypes.DWORD
        return windows_state(status.ACLineStatus, status.BatteryFlag,
                             status.BatteryLifePercent, kernel32.GetTickCount(), last)


# -- the composition -------------------------------------------------------------------------
def system_source(platform: str = sys.platform,
                  env: Mapping[str, str] = os.environ) -> PowerSource | None:
    """The power source of this machine (``RAGD_POWER_FILE`` first), or None where there is
    no reader (bulk work then never waits for power)."""
    path = env.get(POWER_FILE_ENV, "").strip()
    if path:
        return FilePower(path)
    if platform.startswith("linux"):
        return LinuxPower()
    if platform == "darwin":
        return MacPower()
    if platform == "win32":
        return WindowsPower()
    return None


def power_gate(config: Any, env: Mapping[str, str] = os.environ,
               platform: str = sys.platform) -> PowerGate:
    """The daemon's gate from ``[power]`` (``config.power``)."""
    p = config.power
    policy = PowerPolicy(pause_below=p.pause_on_battery_below,
                         resume_idle_s=p.resume_when_idle_s)
    source = system_source(platform, env) if policy.enabled else None
    return PowerGate(source, policy, check_interval_s=p.check_interval_s)
