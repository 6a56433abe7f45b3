"""Secrets: the OS keyring through `keyring`, a clear answer where there is none, and a 0600
file only when the user chose one. Never touches the real keyring: every test selects a
backend with PYTHON_KEYRING_BACKEND (the in-memory one below, or keyring's own fail backend)."""

from __future__ import annotations

import argparse
import io
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import keyring
import keyring.core
import pytest
from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError

from ragd.daemon.errors import ConfigError, InvalidArgument, NotFound
from ragd.daemon.settings import secrets

REPO = Path(__file__).resolve().parents[2]
FAIL = "keyring.backends.fail.Keyring"


class MemoryKeyring(KeyringBackend):
    """An in-memory keyring for tests (selected by its dotted name, like any backend)."""

    priority = 1  # type: ignore[assignment]
    store: ClassVar[dict[tuple[str, str], str]] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.store.pop((service, username), None) is None:
            raise PasswordDeleteError(username)


# pytest imports this file as tests.daemon.test_secrets (importlib mode), so keyring can load
# the class by that dotted name, as it loads any backend.
MEMORY = f"{__name__}.MemoryKeyring"


def use_backend(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", name)
    keyring.core.init_backend()


@pytest.fixture(autouse=True)
def keyring_sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No test reaches the user's keyring or keyring config, whatever the machine has."""
    before = keyring.get_keyring()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    MemoryKeyring.store.clear()
    use_backend(monkeypatch, MEMORY)
    yield
    keyring.set_keyring(before)


def run_cmd(action: str, name: str | None) -> int:
    return secrets.cmd_secret(argparse.Namespace(action=action, name=name))


# -- with a keyring ---------------------------------------------------------------------------
def test_set_get_delete_through_the_keyring(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(keyring.get_keyring(), MemoryKeyring)
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret-key\n"))
    assert run_cmd("set", "embedding.api_key") == 0
    assert "stored embedding.api_key in the OS keyring" in capsys.readouterr().out
    assert MemoryKeyring.store == {("ragd", "embedding.api_key"): "s3cret-key"}
    assert secrets.get_secret("embedding.api_key") == "s3cret-key"

    assert run_cmd("status", "embedding.api_key") == 0
    out = capsys.readouterr().out
    assert f"backend: the OS keyring ({MEMORY})" in out
    assert "embedding.api_key: set" in out
    assert "s3cret" not in out  # status never prints a value

    assert run_cmd("delete", "embedding.api_key") == 0
    assert "deleted embedding.api_key" in capsys.readouterr().out
    assert secrets.get_secret("embedding.api_key") is None
    with pytest.raises(NotFound, match="no secret named embedding.api_key"):
        run_cmd("delete", "embedding.api_key")


def test_set_prompts_with_getpass_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    prompts: list[str] = []
    monkeypatch.setattr("sys.stdin", Tty(""))
    def getpass(prompt: str) -> str:
        prompts.append(prompt)
        return "typed"

    monkeypatch.setattr("getpass.getpass", getpass)
    assert run_cmd("set", "imap.password") == 0
    assert prompts == ["imap.password (input hidden): "]
    assert secrets.get_secret("imap.password") == "typed"


def test_the_config_file_never_holds_secrets(ragd_home: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("hunter2\n"))
    run_cmd("set", "imap.password")
    leaked = [p for p in ragd_home.rglob("*") if p.is_file() and
              b"hunter2" in p.read_bytes()]
    assert leaked == []


def test_keyring_file_is_unused_while_a_keyring_works(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(secrets.FILE_ENV, str(tmp_path / "secrets.json"))
    secrets.set_secret("x", "y")
    assert not (tmp_path / "secrets.json").exists()
    run_cmd("status", None)
    assert "RAGD_SECRETS_FILE is set but unused" in capsys.readouterr().out


def test_bad_names_and_empty_values() -> None:
    with pytest.raises(InvalidArgument, match="not a secret name"):
        secrets.set_secret("../etc/passwd", "x")
    with pytest.raises(InvalidArgument, match="value: is empty"):
        secrets.set_secret("imap.password", "")
    with pytest.raises(InvalidArgument):
        run_cmd("set", None)


def test_keyring_failures_become_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from keyring.errors import KeyringLocked

    def locked(*args: Any) -> None:
        raise KeyringLocked("the collection is locked")

    monkeypatch.setattr(MemoryKeyring, "set_password", locked)
    with pytest.raises(ConfigError, match="could not store imap.password: the collection is"):
        secrets.set_secret("imap.password", "x")


# -- without a keyring (headless Linux) -------------------------------------------------------
def test_no_keyring_says_so_clearly(monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    use_backend(monkeypatch, FAIL)
    with pytest.raises(ConfigError) as caught:
        secrets.set_secret("imap.password", "x")
    assert "no keyring backend is available" in caught.value.message
    assert "RAGD_SECRETS_FILE" in caught.value.hint
    assert run_cmd("status", None) == 1
    out = capsys.readouterr().out
    assert "backend: none" in out and FAIL in out and "hint:" in out


def test_file_fallback_only_when_chosen_and_0600(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    use_backend(monkeypatch, FAIL)
    path = tmp_path / "private" / "ragd-secrets.json"
    monkeypatch.setenv(secrets.FILE_ENV, str(path))
    old = os.umask(0o022)  # a permissive umask must not matter
    try:
        store = secrets.set_secret("imap.password", "pw1")
    finally:
        os.umask(old)
    assert isinstance(store, secrets.FileStore)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text(encoding="utf-8"))["secrets"] == {"imap.password": "pw1"}
    secrets.set_secret("embedding.api_key", "k")
    assert secrets.get_secret("imap.password") == "pw1"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert run_cmd("status", "imap.password") == 0
    out = capsys.readouterr().out
    assert f"fallback: the file {path}" in out and "imap.password: set" in out
    secrets.delete_secret("imap.password")
    assert secrets.get_secret("imap.password") is None
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp files left


def test_a_file_others_can_read_is_refused(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    use_backend(monkeypatch, FAIL)
    path = tmp_path / "secrets.json"
    path.write_text('{"ragd_secrets": 1, "secrets": {"a": "b"}}', encoding="utf-8")
    path.chmod(0o644)
    monkeypatch.setenv(secrets.FILE_ENV, str(path))
    with pytest.raises(ConfigError, match="can be read by other users") as caught:
        secrets.get_secret("a")
    assert "chmod 600" in caught.value.hint
    path.chmod(0o600)
    assert secrets.get_secret("a") == "b"
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a ragd secrets file"):
        secrets.get_secret("a")


def test_keyrings_alt_is_not_a_dependency() -> None:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8").lower()
    assert "keyrings.alt" not in text and "keyrings-alt" not in text


def test_cli_end_to_end_on_a_headless_machine(tmp_path: Path) -> None:
    """`ragd secret` in a fresh process, with keyring's fail backend and the file fallback."""
    path = tmp_path / "s.json"
    env = {**os.environ, "PYTHON_KEYRING_BACKEND": FAIL, "XDG_CONFIG_HOME": str(tmp_path)}
    env.pop(secrets.FILE_ENV, None)

    def ragd(*args: str, stdin: str = "", **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ragd.daemon.cli.main", "secret", *args],
                              input=stdin, capture_output=True, text=True, timeout=60,
                              env={**env, **extra}, cwd=REPO)

    refused = ragd("set", "imap.password", stdin="Zq9-secret\n")
    assert refused.returncode == 1
    assert "error: no keyring backend is available" in refused.stderr
    assert "hint:" in refused.stderr and "RAGD_SECRETS_FILE" in refused.stderr
    assert not path.exists()

    stored = ragd("set", "imap.password", stdin="Zq9-secret\n", RAGD_SECRETS_FILE=str(path))
    assert stored.returncode == 0, stored.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    status = ragd("status", "imap.password", RAGD_SECRETS_FILE=str(path))
    assert status.returncode == 0 and "imap.password: set" in status.stdout
    assert "Zq9-secret" not in status.stdout + status.stderr
