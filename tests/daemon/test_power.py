"""Battery, mains and idle time (decision 0044): each system's reader on captured output, the
rule that holds bulk work, and the gate's cost (how often it reads the source)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from ragd.daemon.runtime import power
from ragd.daemon.runtime.power import (
    BATTERY,
    MAINS,
    FilePower,
    PowerGate,
    PowerPolicy,
    PowerState,
    linux_power,
    parse_ioreg_idle,
    parse_loginctl_idle,
    parse_pmset,
    pause_reason,
    windows_state,
)
from ragd.daemon.settings.config import Config

# -- Linux: /sys/class/power_supply, as files of a ThinkPad, a desktop and a USB-C laptop -------
AC = {"name": "AC", "type": "Mains", "online": "1"}
AC_OFF = {"name": "AC", "type": "Mains", "online": "0"}
BAT0 = {"name": "BAT0", "type": "Battery", "status": "Discharging", "capacity": "42",
        "scope": "System", "energy_now": "21000000", "energy_full": "50000000"}
BAT1 = {"name": "BAT1", "type": "Battery", "status": "Discharging", "capacity": "90",
        "energy_now": "18000000", "energy_full": "20000000"}
MOUSE = {"name": "hidpp_battery_0", "type": "Battery", "status": "Discharging",
         "capacity": "15", "scope": "Device"}
USBC = {"name": "ucsi-source-psy-USBC000:001", "type": "USB", "online": "1"}


@pytest.mark.parametrize(("supplies", "expected"), [
    ([AC, {**BAT0, "status": "Charging"}], (False, 42.0)),
    ([AC_OFF, BAT0], (True, 42.0)),  # energy-weighted: 21/50
    ([AC_OFF, BAT0, BAT1], (True, 55.7)),  # (21 + 18) / (50 + 20)
    ([], (False, None)),  # a desktop
    ([MOUSE], (False, None)),  # a mouse's battery is not the computer's
    ([AC_OFF, BAT0, MOUSE], (True, 42.0)),
    ([USBC, BAT0], (False, 42.0)),  # charging over USB-C
    ([AC, {**BAT0, "status": "Not charging"}], (False, 42.0)),  # a charge threshold
    ([{**BAT0, "status": "Discharging"}], (True, 42.0)),  # no mains entry at all
    ([AC_OFF, {"type": "Battery", "status": "Discharging", "capacity": "30"}], (True, 30.0)),
])
def test_linux_power_supplies(supplies: Sequence[dict[str, str]],
                              expected: tuple[bool, float | None]) -> None:
    assert linux_power(supplies) == expected


def test_linux_reads_the_sysfs_files(tmp_path: Path) -> None:
    for supply in (AC_OFF, BAT0):
        folder = tmp_path / supply["name"]
        folder.mkdir()
        for key, value in supply.items():
            if key != "name":
                (folder / key).write_text(value + "\n", encoding="ascii")
    idle_calls: list[int] = []

    def idle() -> float:
        idle_calls.append(1)
        return 12.0

    state = power.LinuxPower(tmp_path, idle=idle).read()
    assert state == PowerState(True, 42.0, 12.0)
    (tmp_path / "AC" / "online").write_text("1\n", encoding="ascii")
    assert power.LinuxPower(tmp_path, idle=idle).read() == PowerState(False, 42.0, None)
    assert len(idle_calls) == 1  # idle time is read on battery only
    assert power.LinuxPower(tmp_path / "absent").read() == PowerState(False, None, None)


@pytest.mark.parametrize(("text", "expected"), [
    ("IdleHint=yes\nIdleSinceHintMonotonic=100000000\n", 50.0),
    ("IdleHint=no\nIdleSinceHintMonotonic=100000000\n", 0.0),
    ("IdleHint=no\nIdleSinceHintMonotonic=0\n", None),  # nothing in the session sets it
    ("", None),
])
def test_logind_idle_hint(text: str, expected: float | None) -> None:
    assert parse_loginctl_idle(text, now_us=150_000_000) == expected


def test_logind_finds_the_users_graphical_session_when_the_daemon_has_none() -> None:
    asked: list[list[str]] = []
    answers = {"show-user": "3\n",
               "show-session": "IdleHint=yes\nIdleSinceHintMonotonic=1000000\n"}

    def run(args: Sequence[str]) -> str | None:
        asked.append(list(args))
        return answers[args[1]]

    assert power.logind_idle(run, env={}, uid=1000, now_us=lambda: 31_000_000) == 30.0
    assert asked == [["loginctl", "show-user", "1000", "-p", "Display", "--value"],
                     ["loginctl", "show-session", "3", "-p", "IdleHint", "-p",
                      "IdleSinceHintMonotonic"]]
    asked.clear()
    power.logind_idle(run, env={"XDG_SESSION_ID": "c2"}, now_us=lambda: 0)
    assert asked[0][:3] == ["loginctl", "show-session", "c2"]
    assert power.logind_idle(lambda args: None, env={}, uid=1000) is None  # no loginctl


# -- macOS: pmset -g batt and ioreg, as printed --------------------------------------------------
PMSET_BATTERY = ("Now drawing from 'Battery Power'\n"
                 " -InternalBattery-0 (id=6160483)\t72%; discharging; 5:21 remaining present: "
                 "true\n")
PMSET_AC = ("Now drawing from 'AC Power'\n"
            " -InternalBattery-0 (id=6160483)\t100%; charged; 0:00 remaining present: true\n")
PMSET_DESKTOP = "Now drawing from 'AC Power'\n"
PMSET_UPS = ("Now drawing from 'UPS Power'\n"
             " -APC Back-UPS (id=1234)\t95%; discharging; (no estimate) present: true\n")
IOREG = """+-o IOHIDSystem  <class IOHIDSystem, id 0x100000528, registered, matched, active, busy 0 (0 ms), retain 27>
    {
      "IOClass" = "IOHIDSystem"
      "HIDIdleTime" = 2140500833
      "IOProviderClass" = "IOResources"
    }
"""


@pytest.mark.parametrize(("text", "expected"), [
    (PMSET_BATTERY, (True, 72.0)), (PMSET_AC, (False, 100.0)),
    (PMSET_DESKTOP, (False, None)), (PMSET_UPS, (True, 95.0)), ("", (False, None)),
])
def test_pmset(text: str, expected: tuple[bool, float | None]) -> None:
    assert parse_pmset(text) == expected


def test_ioreg_idle_time_in_nanoseconds() -> None:
    assert parse_ioreg_idle(IOREG) == pytest.approx(2.140500833)
    assert parse_ioreg_idle("nothing") is None


def test_mac_reader_runs_ioreg_only_on_battery() -> None:
    asked: list[str] = []

    def run(args: Sequence[str]) -> str | None:
        asked.append(args[0])
        return {"pmset": PMSET_BATTERY, "ioreg": IOREG}[args[0]]

    assert power.MacPower(run).read() == PowerState(True, 72.0, pytest.approx(2.140500833))
    asked.clear()
    assert power.MacPower(lambda args: PMSET_AC).read() == PowerState(False, 100.0, None)
    assert power.MacPower(lambda args: None).read() == MAINS  # pmset missing


# -- Windows: SYSTEM_POWER_STATUS and GetLastInputInfo -------------------------------------------
@pytest.mark.parametrize(("ac", "flag", "pct", "expected"), [
    (0, 0, 35, PowerState(True, 35.0, 5.0)),  # on battery, 35 %
    (1, 8, 60, PowerState(False, 60.0, None)),  # charging
    (0, 128, 255, PowerState(False, None, None)),  # no system battery
    (0, 255, 255, PowerState(True, None, 5.0)),  # unknown battery, yet AC is offline
    (255, 1, 80, PowerState(False, 80.0, None)),  # AC unknown
])
def test_windows_power_status(ac: int, flag: int, pct: int, expected: PowerState) -> None:
    assert windows_state(ac, flag, pct, tick_now=10_000, last_input=5_000) == expected


def test_windows_idle_across_the_tick_wrap() -> None:
    state = windows_state(0, 0, 50, tick_now=1_000, last_input=2**32 - 2_000)
    assert state.idle_s == 3.0


# -- the rule ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("state", "policy", "expected"), [
    (PowerState(False, 10.0), PowerPolicy(50), None),  # mains
    (PowerState(True, 20.0), PowerPolicy(50), BATTERY),
    (PowerState(True, 50.0), PowerPolicy(50), None),  # not below
    (PowerState(True, 100.0), PowerPolicy(100), BATTERY),  # 100: any battery
    (PowerState(True, 1.0), PowerPolicy(0), None),  # 0: never
    (PowerState(True, None), PowerPolicy(50), BATTERY),  # unknown charge counts as low
    (PowerState(True, 20.0, idle_s=600.0), PowerPolicy(50, 600), None),  # the user is away
    (PowerState(True, 20.0, idle_s=599.0), PowerPolicy(50, 600), BATTERY),
    (PowerState(True, 20.0, idle_s=9e9), PowerPolicy(50, 0), BATTERY),  # 0: never resumes
    (PowerState(True, 20.0, idle_s=None), PowerPolicy(50, 600), BATTERY),
])
def test_pause_reason(state: PowerState, policy: PowerPolicy, expected: str | None) -> None:
    assert pause_reason(state, policy) == expected


class Counting:
    def __init__(self, state: PowerState) -> None:
        self.state, self.reads = state, 0

    def read(self) -> PowerState:
        self.reads += 1
        return self.state


def test_the_gate_reads_the_source_at_most_every_interval_or_when_asked_fresh() -> None:
    now = [0.0]
    source = Counting(PowerState(True, 20.0))
    gate = PowerGate(source, PowerPolicy(50), check_interval_s=30, clock=lambda: now[0])
    assert gate.reason() == BATTERY and source.reads == 1
    for _ in range(1000):  # the writer asks between every file
        gate.reason()
    assert source.reads == 1
    source.state = MAINS
    now[0] = 0.5
    assert gate.reason(fresh=True) == BATTERY  # a fresh look at most every MIN_FRESH_S
    now[0] = 1.5
    assert gate.reason(fresh=True) is None and source.reads == 2
    source.state = PowerState(True, 20.0)
    now[0] = 20.0
    assert gate.reason() is None  # cached until the interval passes
    now[0] = 31.5
    assert gate.reason() == BATTERY and source.reads == 3
    assert gate.status() == {"on_battery": True, "percent": 20.0, "idle_s": None,
                             "pause_below": 50, "resume_when_idle_s": 600.0,
                             "paused_for": BATTERY}


def test_a_failing_reader_counts_as_mains_and_an_off_rule_reads_nothing() -> None:
    class Broken:
        def read(self) -> PowerState:
            raise OSError("no such file")

    assert PowerGate(Broken(), PowerPolicy(50)).reason() is None
    source = Counting(PowerState(True, 1.0))
    off = PowerGate(source, PowerPolicy(0))
    assert off.reason(fresh=True) is None and source.reads == 0 and off.status() is None


def test_the_power_file_for_tests(tmp_path: Path) -> None:
    path = tmp_path / "power.json"
    path.write_text(json.dumps({"on_battery": True, "percent": 20, "idle_s": None}),
                    encoding="utf-8")
    assert FilePower(path).read() == PowerState(True, 20.0, None)
    path.write_text("{broken", encoding="utf-8")
    assert FilePower(path).read() == MAINS
    assert FilePower(tmp_path / "absent.json").read() == MAINS


def test_the_daemon_gate_follows_the_settings(tmp_path: Path) -> None:
    path = tmp_path / "power.json"
    path.write_text('{"on_battery": true, "percent": 60}', encoding="utf-8")
    env = {power.POWER_FILE_ENV: str(path)}
    gate = power.power_gate(Config(), env=env)
    assert isinstance(gate.source, FilePower) and gate.reason() is None  # 60 >= 50
    strict = Config.model_validate({"power": {"pause_on_battery_below": 100}})
    assert power.power_gate(strict, env=env).reason() == BATTERY
    never = Config.model_validate({"power": {"pause_on_battery_below": 0}})
    assert power.power_gate(never, env=env).source is None
    assert isinstance(power.system_source("linux", {}), power.LinuxPower)
    assert isinstance(power.system_source("darwin", {}), power.MacPower)
    assert isinstance(power.system_source("win32", {}), power.WindowsPower)
    assert power.system_source("plan9", {}) is None


@pytest.mark.skipif(not Path("/sys/class/power_supply").is_dir(), reason="no sysfs here")
def test_this_machine_can_be_read() -> None:
    state = power.LinuxPower().read()
    assert isinstance(state.on_battery, bool)
