"""Feed readers' stores are found and offered, never indexed unasked (decision 0029)."""

from __future__ import annotations

from pathlib import Path

import pytest
from feed_fixtures import Item, newsboat_db

from ragd.daemon.settings.config import Config, load_config, render_default_config
from ragd.daemon.settings.feedreaders import reader_stores, rss_checks
from ragd.daemon.settings.paths import resolve_paths


def test_newsboat_and_netnewswire_stores_are_found(tmp_path: Path) -> None:
    xdg = newsboat_db(tmp_path / ".local" / "share" / "newsboat" / "cache.db",
                      {"https://a/rss": ("A", [Item("1", "t", "b")])})
    legacy = newsboat_db(tmp_path / ".newsboat" / "cache.db", {})
    nnw = (tmp_path / "Library" / "Containers" / "com.ranchero.NetNewsWire-Evergreen" / "Data"
           / "Library" / "Application Support" / "NetNewsWire" / "Accounts" / "OnMyMac")
    nnw.mkdir(parents=True)
    (nnw / "DB.sqlite3").write_bytes(b"")
    linux = reader_stores("linux", {}, tmp_path)
    assert [(s.reader, s.path, s.readable) for s in linux] == [
        ("Newsboat", xdg, True), ("Newsboat", legacy, True)]
    mac = reader_stores("darwin", {"XDG_DATA_HOME": str(tmp_path / "nowhere")}, tmp_path)
    assert [(s.reader, s.readable) for s in mac] == [("Newsboat", True),
                                                     ("NetNewsWire", False)]

    (line,) = rss_checks(Config(), "linux", {}, tmp_path, "config.toml")
    assert line[1] == "ok" and "not indexed" in line[2] and str(xdg) in line[2]
    assert "[rss] paths" in line[3]


def test_found_stores_are_offered_in_a_new_config_but_not_indexed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    store = newsboat_db(tmp_path / ".newsboat" / "cache.db", {})
    assert f'# paths = ["{store}"]' in render_default_config()
    assert load_config(resolve_paths(), {}).rss.paths == []


def test_configured_paths_are_checked(tmp_path: Path) -> None:
    config = Config.model_validate({"rss": {"paths": [str(tmp_path), str(tmp_path / "no")]}})
    lines = rss_checks(config, "linux", {}, tmp_path, "config.toml")
    assert [line[1] for line in lines] == ["ok", "fail"]
