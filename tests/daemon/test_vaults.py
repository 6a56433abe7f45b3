from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from ragd.daemon.settings.vaults import discover_vaults, obsidian_config_candidates, vault_name

FLATPAK = Path(".var/app/md.obsidian.Obsidian/config/obsidian/obsidian.json")
SNAP = Path("snap/obsidian/current/.config/obsidian/obsidian.json")


def _vault(root: Path, name: str) -> Path:
    path = root / "vaults" / name
    path.mkdir(parents=True)
    return path


def _obsidian_json(path: Path, vaults: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"vaults": vaults}), encoding="utf-8")


def test_linux_candidates(tmp_path: Path) -> None:
    home = tmp_path / "home"

    found = obsidian_config_candidates("linux", {}, home)

    assert found == [
        home / ".config/obsidian/obsidian.json",
        home / FLATPAK,
        home / SNAP,
    ]


def test_linux_candidates_follow_xdg_config_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    xdg = tmp_path / "xdg"

    found = obsidian_config_candidates("linux", {"XDG_CONFIG_HOME": str(xdg)}, home)
    relative = obsidian_config_candidates("linux", {"XDG_CONFIG_HOME": "rel/cfg"}, home)
    same = obsidian_config_candidates("linux", {"XDG_CONFIG_HOME": str(home / ".config")}, home)

    assert found[0] == xdg / "obsidian" / "obsidian.json"
    assert relative[0] == home / ".config/obsidian/obsidian.json"  # the spec says ignore it
    assert len(same) == 3  # no duplicate when XDG_CONFIG_HOME is the default


def test_macos_and_windows_candidates(tmp_path: Path) -> None:
    home = tmp_path / "home"
    appdata = tmp_path / "AppData" / "Roaming"

    mac = obsidian_config_candidates("darwin", {}, home)
    win = obsidian_config_candidates("win32", {"APPDATA": str(appdata)}, home)
    win_no_env = obsidian_config_candidates("win32", {}, home)

    assert mac == [home / "Library/Application Support/obsidian/obsidian.json"]
    assert win == [appdata / "obsidian" / "obsidian.json"]
    assert win_no_env == [home / "AppData/Roaming/obsidian/obsidian.json"]


@pytest.mark.parametrize(
    ("platform", "env_key", "relative"),
    [
        ("linux", None, Path(".config/obsidian/obsidian.json")),
        ("linux", "XDG_CONFIG_HOME", Path("obsidian/obsidian.json")),
        ("linux", None, FLATPAK),
        ("linux", None, SNAP),
        ("darwin", None, Path("Library/Application Support/obsidian/obsidian.json")),
        ("win32", "APPDATA", Path("obsidian/obsidian.json")),
    ],
)
def test_discovery_on_every_platform(
    tmp_path: Path, platform: str, env_key: str | None, relative: Path
) -> None:
    home = tmp_path / "home"
    env: dict[str, str] = {}
    base = home
    if env_key is not None:
        base = tmp_path / "custom-config"
        env[env_key] = str(base)
    vault = _vault(tmp_path, "Notes")
    _obsidian_json(base / relative, {"a1": {"path": str(vault), "ts": 1700000000000}})

    assert discover_vaults(platform=platform, env=env, home=home) == [vault]


def test_open_vaults_first_then_most_recent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    old, recent, opened_old, opened_recent = (
        _vault(tmp_path, name) for name in ("old", "recent", "opened-old", "opened-recent")
    )
    _obsidian_json(
        home / ".config/obsidian/obsidian.json",
        {
            "1": {"path": str(old), "ts": 1000},
            "2": {"path": str(opened_old), "ts": 2000, "open": True},
            "3": {"path": str(recent), "ts": 5000},
            "4": {"path": str(opened_recent), "ts": 3000, "open": True},
        },
    )

    found = discover_vaults(platform="linux", env={}, home=home)

    assert found == [opened_recent, opened_old, recent, old]


def test_missing_and_relative_vault_dirs_are_dropped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    kept = _vault(tmp_path, "kept")
    a_file = tmp_path / "not-a-dir.md"
    a_file.write_text("x", encoding="utf-8")
    _obsidian_json(
        home / ".config/obsidian/obsidian.json",
        {
            "gone": {"path": str(tmp_path / "deleted-vault"), "ts": 9},
            "file": {"path": str(a_file), "ts": 8},
            "relative": {"path": "vaults/kept", "ts": 7},
            "nopath": {"ts": 6},
            "notdict": "oops",
            "kept": {"path": str(kept), "ts": 1},
        },
    )

    assert discover_vaults(platform="linux", env={}, home=home) == [kept]


def test_same_vault_in_two_installs_is_listed_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    vault = _vault(tmp_path, "Shared")
    other = _vault(tmp_path, "Other")
    link = tmp_path / "link-to-shared"
    link.symlink_to(vault, target_is_directory=True)
    _obsidian_json(
        home / ".config/obsidian/obsidian.json",
        {"x": {"path": str(vault), "ts": 10}, "y": {"path": str(other), "ts": 20}},
    )
    # The Flatpak install saw the same vault (through a symlink) more recently, and open.
    _obsidian_json(home / FLATPAK, {"z": {"path": str(link), "ts": 5, "open": True}})

    found = discover_vaults(platform="linux", env={}, home=home)

    assert found == [vault, other]


def test_broken_obsidian_json_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    vault = _vault(tmp_path, "Flat")
    native = home / ".config/obsidian/obsidian.json"
    native.parent.mkdir(parents=True)
    native.write_text('{"vaults": {"a": {"path": ', encoding="utf-8")
    _obsidian_json(home / FLATPAK, {"b": {"path": str(vault)}})

    with caplog.at_level(logging.WARNING, logger="ragd.daemon.settings.vaults"):
        found = discover_vaults(platform="linux", env={}, home=home)

    assert found == [vault]
    assert str(native) in caplog.text


@pytest.mark.parametrize(
    "content",
    [b"[1, 2, 3]", b'{"vaults": []}', b'{"other": {}}', b"\xff\xfe not utf-8", b""],
)
def test_malformed_obsidian_json_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    home = tmp_path / "home"
    native = home / ".config/obsidian/obsidian.json"
    native.parent.mkdir(parents=True)
    native.write_bytes(content)

    with caplog.at_level(logging.WARNING, logger="ragd.daemon.settings.vaults"):
        assert discover_vaults(platform="linux", env={}, home=home) == []

    assert "ignoring Obsidian's vault list" in caplog.text


def test_no_obsidian_installed(tmp_path: Path) -> None:
    assert discover_vaults(platform="darwin", env={}, home=tmp_path) == []


@pytest.mark.skipif(sys.platform != "linux", reason="uses the running system's defaults")
def test_defaults_come_from_the_running_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = _vault(tmp_path, "Mine")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    _obsidian_json(tmp_path / "cfg/obsidian/obsidian.json", {"v": {"path": str(vault)}})

    assert discover_vaults() == [vault]


def test_vault_name_is_the_folder_name(tmp_path: Path) -> None:
    assert vault_name(tmp_path / "My Vault") == "My Vault"
    assert vault_name(Path("/home/u/Notes/")) == "Notes"
