"""Thunderbird's local folders are found on every platform and offered, never indexed unasked."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragd.daemon.settings.config import Config
from ragd.daemon.settings.mailfolders import discover_mail_folders, thunderbird_roots


def profile(root: Path, ini: str, folders: list[str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "profiles.ini").write_text(ini, encoding="utf-8")
    for folder in folders:
        (root / folder).mkdir(parents=True, exist_ok=True)


def test_linux_native_and_flatpak_profiles_relative_and_absolute(tmp_path: Path) -> None:
    home = tmp_path / "home"
    native = home / ".thunderbird"
    elsewhere = tmp_path / "disk" / "tb-profile"
    profile(native, "[General]\nStartWithLastProfile=1\n\n[Profile0]\nName=default\n"
            "IsRelative=1\nPath=abcd.default-release\n\n[Profile1]\nName=old\nIsRelative=0\n"
            f"Path={elsewhere}\n\n[Install4F96D1932A9F858E]\nDefault=abcd.default-release\n",
            ["abcd.default-release/Mail/Local Folders", "abcd.default-release/Mail/pop.example.org",
             "abcd.default-release/ImapMail/imap.example.org"])
    (elsewhere / "Mail" / "Local Folders").mkdir(parents=True)
    flatpak = home / ".var" / "app" / "org.mozilla.Thunderbird" / ".thunderbird"
    profile(flatpak, "[Profile0]\nPath=flat.default\n", ["flat.default/Mail/Local Folders"])

    found = discover_mail_folders("linux", {}, home)

    assert found == [
        native / "abcd.default-release" / "Mail" / "Local Folders",
        native / "abcd.default-release" / "Mail" / "pop.example.org",
        native / "abcd.default-release" / "ImapMail" / "imap.example.org",
        elsewhere / "Mail" / "Local Folders",
        flatpak / "flat.default" / "Mail" / "Local Folders",
    ]


def test_missing_or_broken_profile_lists_find_nothing_and_never_raise(tmp_path: Path) -> None:
    assert discover_mail_folders("linux", {}, tmp_path) == []
    (tmp_path / ".thunderbird").mkdir()
    (tmp_path / ".thunderbird" / "profiles.ini").write_bytes(b"\xff\xfe[[[not ini\x00")
    assert discover_mail_folders("linux", {}, tmp_path) == []


def test_windows_and_macos_locations() -> None:
    home = Path("/Users/ada")
    assert thunderbird_roots("darwin", {}, home) == [home / "Library" / "Thunderbird"]
    assert thunderbird_roots("win32", {"APPDATA": "C:/Users/ada/AppData/Roaming"}, home) == [
        Path("C:/Users/ada/AppData/Roaming/Thunderbird")]
    assert thunderbird_roots("win32", {}, home) == [
        home / "AppData" / "Roaming" / "Thunderbird"]


def test_doctor_offers_the_folders_found_and_checks_configured_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragd.daemon.cli.doctor import _mail_checks

    home = tmp_path / "home"
    profile(home / ".thunderbird", "[Profile0]\nPath=p\n", ["p/Mail/Local Folders"])
    monkeypatch.setattr(Path, "home", lambda: home)
    monkeypatch.setattr("sys.platform", "linux")

    offered = _mail_checks(Config())
    assert [c["status"] for c in offered] == ["ok"]
    assert "Local Folders" in offered[0]["detail"] and "[email] paths" in offered[0]["hint"]
    configured = _mail_checks(Config(email={"paths": [str(tmp_path / "nope")]}))
    assert configured[0]["status"] == "fail" and "does not exist" in configured[0]["detail"]
