from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
import sys
from pathlib import Path

import pytest

from ragd.daemon.errors import ConfigError
from ragd.daemon.settings import paths as paths_module
from ragd.daemon.settings.paths import MAX_SOCKET_PATH_BYTES, Paths, resolve_paths

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes and uids")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _clear_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)


def _deep_dir(root: Path) -> Path:
    deep = root.joinpath(*["a-rather-long-directory-name"] * 5)
    assert len(os.fsencode(str(deep / "ragd.sock"))) > MAX_SOCKET_PATH_BYTES
    return deep


def test_ragd_home_relocates_everything(tmp_path: Path) -> None:
    p = resolve_paths(env={"RAGD_HOME": str(tmp_path)})

    assert p.config_dir == tmp_path / "config"
    assert p.data_dir == tmp_path / "data"
    assert p.state_dir == tmp_path / "state"
    assert p.runtime_dir == tmp_path / "run"
    assert p.config_file == tmp_path / "config" / "config.toml"
    assert p.catalog_path == tmp_path / "data" / "catalog.sqlite"
    assert p.faiss_dir == tmp_path / "data" / "faiss"
    assert p.whoosh_dir == tmp_path / "data" / "whoosh"
    assert p.docstore_dir == tmp_path / "data" / "docstore"
    assert p.log_file == tmp_path / "state" / "ragd.log"
    assert p.status_file == tmp_path / "run" / "daemon.json"


def test_relative_ragd_home_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    p = resolve_paths(env={"RAGD_HOME": "home"})

    assert p.data_dir == tmp_path / "home" / "data"
    assert p.data_dir.is_absolute()


def test_without_ragd_home_linux_follows_xdg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = tmp_path / "xdg-run"
    runtime.mkdir(mode=0o700)
    runtime.chmod(0o700)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))

    p = resolve_paths(env={}, platform="linux")

    assert p.config_dir == tmp_path / "xdg-config" / "ragd"
    assert p.data_dir == tmp_path / "xdg-data" / "ragd"
    assert p.state_dir == tmp_path / "xdg-state" / "ragd"
    assert p.runtime_dir == runtime / "ragd"


def test_macos_layout_via_platform_parameter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear_xdg(monkeypatch)
    monkeypatch.setenv("HOME", str(tmp_path))

    p = resolve_paths(env={}, platform="darwin")

    support = tmp_path / "Library" / "Application Support" / "ragd"
    assert p.config_dir == support
    assert p.data_dir == support
    assert p.state_dir == support
    assert p.runtime_dir == tmp_path / "Library" / "Caches" / "TemporaryItems" / "ragd"
    assert p.platform == "darwin"
    # ~/Library/Caches/TemporaryItems is deep: a socket there must still fit macOS' sun_path.
    assert p.socket_path.endswith("/ragd.sock")
    assert len(os.fsencode(p.socket_path)) <= MAX_SOCKET_PATH_BYTES


def test_windows_pipe_name_via_platform_parameter(tmp_path: Path) -> None:
    p = resolve_paths(
        env={"RAGD_HOME": str(tmp_path), "USERNAME": "Ada Lovelace"}, platform="win32"
    )

    digest = hashlib.sha256(str(tmp_path / "data").encode("utf-8")).hexdigest()[:8]
    assert p.socket_path == rf"\\.\pipe\ragd-Ada_Lovelace-{digest}"
    # A second RAGD_HOME gets its own pipe, so two daemons never collide.
    other = resolve_paths(
        env={"RAGD_HOME": str(tmp_path / "b"), "USERNAME": "Ada Lovelace"}, platform="win32"
    )
    assert other.socket_path != p.socket_path
    assert other.socket_path.startswith("\\\\.\\pipe\\ragd-Ada_Lovelace-")


def test_windows_pipe_name_has_no_path_separators_from_the_user_name(tmp_path: Path) -> None:
    p = Paths(tmp_path, tmp_path / "d", tmp_path, tmp_path, platform="win32", user=r"DOM\bob")

    name = p.socket_path.removeprefix("\\\\.\\pipe\\")
    assert "\\" not in name
    assert name.startswith("ragd-DOM_bob-")


@pytest.mark.skipif(sys.platform == "win32", reason="checks the behaviour on other systems")
def test_windows_folders_without_ragd_home_on_another_system(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in list(os.environ):
        if name.startswith("WIN_PD_OVERRIDE_"):
            monkeypatch.delenv(name)

    with pytest.raises(ConfigError) as info:
        resolve_paths(env={}, platform="win32")

    assert "RAGD_HOME" in info.value.hint


def test_short_runtime_dir_holds_the_socket(tmp_path: Path) -> None:
    p = resolve_paths(env={"RAGD_HOME": str(tmp_path)}, platform="linux")

    assert p.socket_fallback_dir is None
    assert p.socket_path == str(tmp_path / "run" / "ragd.sock")


@posix_only
def test_ensure_creates_dirs_and_makes_runtime_private(tmp_path: Path) -> None:
    p = resolve_paths(env={"RAGD_HOME": str(tmp_path)}, platform="linux")
    # A runtime dir left world-readable (by an older version, or by hand) is tightened.
    p.runtime_dir.mkdir(mode=0o755)
    p.runtime_dir.chmod(0o755)
    old_umask = os.umask(0)
    try:
        p.ensure()
    finally:
        os.umask(old_umask)

    for directory in (p.config_dir, p.data_dir, p.state_dir, p.runtime_dir):
        assert directory.is_dir()
    assert _mode(p.runtime_dir) == 0o700
    # New directories holding indexed text are private too, whatever the umask.
    assert _mode(p.data_dir) == 0o700
    p.ensure()  # idempotent
    assert _mode(p.runtime_dir) == 0o700


@posix_only
def test_ensure_refuses_a_runtime_dir_owned_by_someone_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = resolve_paths(env={"RAGD_HOME": str(tmp_path)}, platform="linux")
    p.runtime_dir.mkdir()
    if os.geteuid() == 0:
        os.chown(p.runtime_dir, 54321, -1)
    else:  # cannot give a file away without root: pretend to be another user instead
        real_uid = os.getuid()
        monkeypatch.setattr(paths_module.os, "getuid", lambda: real_uid + 1)

    with pytest.raises(ConfigError) as info:
        p.ensure()

    assert str(p.runtime_dir) in info.value.message
    assert "owned by uid" in info.value.message
    assert "RAGD_HOME" in info.value.hint


@posix_only
def test_long_runtime_dir_falls_back_to_a_private_tmp_dir(tmp_path: Path) -> None:
    deep = _deep_dir(tmp_path)
    p = Paths(tmp_path / "c", tmp_path / "d", tmp_path / "s", deep, platform="linux")
    digest = hashlib.sha256(str(deep).encode("utf-8")).hexdigest()[:8]

    expected_dir = Path(f"/tmp/ragd-{os.getuid()}-{digest}")
    assert p.socket_fallback_dir == expected_dir
    assert p.socket_path == str(expected_dir / "ragd.sock")
    assert len(os.fsencode(p.socket_path)) <= MAX_SOCKET_PATH_BYTES
    other = Paths(tmp_path, tmp_path, tmp_path, deep / "other", platform="linux")
    assert other.socket_path != p.socket_path

    shutil.rmtree(expected_dir, ignore_errors=True)
    try:
        p.ensure()
        assert _mode(expected_dir) == 0o700
        assert _mode(deep) == 0o700
        # The whole point: a real Unix socket can be bound at that address.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(p.socket_path)
            assert stat.S_ISSOCK(os.stat(p.socket_path).st_mode)
    finally:
        shutil.rmtree(expected_dir, ignore_errors=True)


@posix_only
def test_ensure_refuses_a_symlink_planted_at_the_tmp_fallback(tmp_path: Path) -> None:
    p = Paths(tmp_path / "c", tmp_path / "d", tmp_path / "s", _deep_dir(tmp_path), platform="linux")
    fallback = p.socket_fallback_dir
    assert fallback is not None
    shutil.rmtree(fallback, ignore_errors=True)
    (tmp_path / "attacker").mkdir()
    fallback.symlink_to(tmp_path / "attacker")
    try:
        with pytest.raises(ConfigError) as info:
            p.ensure()
        assert "symbolic link" in info.value.message
    finally:
        fallback.unlink()


def test_ensure_reports_a_file_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("not a dir", encoding="utf-8")
    p = resolve_paths(env={"RAGD_HOME": str(tmp_path)})

    with pytest.raises(ConfigError) as info:
        p.ensure()

    assert str(tmp_path / "data") in info.value.message
