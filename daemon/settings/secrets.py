"""Credentials (a remote embedding provider's key, an IMAP password): never in config.toml.

They live in the OS keyring through ``keyring`` (service name ``ragd``, one entry per name such
as ``embedding.api_key``). Where no keyring backend exists, as on a headless Linux machine
where keyring falls back to its "fail" backend, ragd says so, and uses a file only when the
user chose one explicitly with ``RAGD_SECRETS_FILE``; that file is created readable by its owner
only (0600) and refused when others can read it. ``keyrings.alt`` is never used: it would store
plain text somewhere the user did not choose.

One secret is ragd's own rather than the user's: ``mcp.http_token``, the bearer token an MCP
client sends to ``ragd mcp --http`` (created on its first start). The user pastes it into the
client's config, so it is the one name ``ragd secret show`` prints; every other secret is only
ever stored, never shown.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import re
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from ragd.daemon.errors import ConfigError, InvalidArgument, NotFound

SERVICE = "ragd"
FILE_ENV = "RAGD_SECRETS_FILE"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}$")
_FILE_FORMAT = 1
MCP_HTTP_TOKEN = "mcp.http_token"  # the bearer token of `ragd mcp --http`
# The names `ragd secret show` prints: tokens ragd made for the user to paste into a client.
# A key or password the user typed in stays write-only.
SHOWN = (MCP_HTTP_TOKEN,)
NO_KEYRING_HINT = ("unlock or install a keyring service (GNOME Keyring, KWallet, the macOS "
                   f"Keychain), or set {FILE_ENV}=/path/to/file to keep secrets in a file only "
                   "you can read")


class SecretStore(Protocol):
    def describe(self) -> str: ...

    def get(self, name: str) -> str | None: ...

    def set(self, name: str, value: str) -> None: ...

    def delete(self, name: str) -> bool: ...


def check_name(name: str | None) -> str:
    if not name or not _NAME.match(name):
        raise InvalidArgument("name", f"{name!r} is not a secret name",
                              "use letters, digits, '.', '_' or '-', e.g. embedding.api_key")
    return name


# -- the OS keyring ---------------------------------------------------------------------------
def keyring_backend() -> Any | None:
    """The active keyring backend, or None when keyring has none that can store anything."""
    import keyring
    from keyring.backends import fail, null

    backend = keyring.get_keyring()
    if isinstance(backend, (fail.Keyring, null.Keyring)):
        return None
    return backend


def backend_name(backend: Any) -> str:
    cls = type(backend)
    return f"{cls.__module__}.{cls.__qualname__}"


class KeyringStore:
    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def describe(self) -> str:
        return f"the OS keyring ({backend_name(self.backend)})"

    def get(self, name: str) -> str | None:
        with _keyring_errors("read", name):
            return self.backend.get_password(SERVICE, name)

    def set(self, name: str, value: str) -> None:
        with _keyring_errors("store", name):
            self.backend.set_password(SERVICE, name, value)

    def delete(self, name: str) -> bool:
        from keyring.errors import PasswordDeleteError

        with _keyring_errors("delete", name):
            try:
                self.backend.delete_password(SERVICE, name)
            except PasswordDeleteError:
                return False
        return True


@contextlib.contextmanager
def _keyring_errors(verb: str, name: str) -> Any:
    from keyring.errors import KeyringError, PasswordDeleteError

    try:
        yield
    except PasswordDeleteError:
        raise
    except KeyringError as exc:  # locked, no backend after all, D-Bus gone...
        raise ConfigError(f"the keyring could not {verb} {name}: {exc or type(exc).__name__}",
                          NO_KEYRING_HINT) from exc


# -- the file the user chose ------------------------------------------------------------------
class FileStore:
    """A JSON file of secrets, 0600, replaced atomically on every change."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def describe(self) -> str:
        return f"the file {self.path} (from {FILE_ENV})"

    def _read(self) -> dict[str, str]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return {}
        if os.name == "posix":
            if info.st_uid != os.getuid():
                raise ConfigError(f"{self.path} belongs to another user",
                                  f"point {FILE_ENV} at a file of your own")
            if stat.S_IMODE(info.st_mode) & 0o077:
                raise ConfigError(f"{self.path} can be read by other users",
                                  f"run `chmod 600 {self.path}`, then try again")
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the secrets file {self.path}: {exc}",
                              "fix or remove it, then store the secrets again") from exc
        secrets = data.get("secrets") if isinstance(data, dict) else None
        if not isinstance(secrets, dict):
            raise ConfigError(f"{self.path} is not a ragd secrets file",
                              f"point {FILE_ENV} at another path")
        return {str(k): str(v) for k, v in secrets.items()}

    def _write(self, secrets: Mapping[str, str]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        payload = json.dumps({"ragd_secrets": _FILE_FORMAT, "secrets": dict(secrets)},
                             indent=2, sort_keys=True)
        # Created 0600 from the first byte: never briefly readable by others.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(payload + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if os.name == "posix":
            os.chmod(self.path, 0o600)

    def get(self, name: str) -> str | None:
        return self._read().get(name)

    def set(self, name: str, value: str) -> None:
        secrets = self._read()
        secrets[name] = value
        self._write(secrets)

    def delete(self, name: str) -> bool:
        secrets = self._read()
        if name not in secrets:
            return False
        del secrets[name]
        self._write(secrets)
        return True


def chosen_file(env: Mapping[str, str] | None = None) -> Path | None:
    value = (os.environ if env is None else env).get(FILE_ENV, "").strip()
    return Path(value).expanduser().absolute() if value else None


def open_store(env: Mapping[str, str] | None = None) -> SecretStore:
    """The keyring when it works; else the file the user chose; else a clear ConfigError."""
    backend = keyring_backend()
    if backend is not None:
        return KeyringStore(backend)
    path = chosen_file(env)
    if path is not None:
        return FileStore(path)
    import keyring

    raise ConfigError("no keyring backend is available to store secrets "
                      f"(keyring chose {backend_name(keyring.get_keyring())})", NO_KEYRING_HINT)


def get_secret(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The secret ``name``, or None when it was never stored. For the daemon's own use."""
    return open_store(env).get(check_name(name))


def set_secret(name: str, value: str, env: Mapping[str, str] | None = None) -> SecretStore:
    if not value:
        raise InvalidArgument("value", "is empty", "type or paste the secret")
    store = open_store(env)
    store.set(check_name(name), value)
    return store


def delete_secret(name: str, env: Mapping[str, str] | None = None) -> SecretStore:
    store = open_store(env)
    if not store.delete(check_name(name)):
        raise NotFound(f"no secret named {name} in {store.describe()}",
                       "`ragd secret status NAME` tells whether one is stored")
    return store


# -- the command line -------------------------------------------------------------------------
def _read_value(name: str) -> str:
    if sys.stdin is not None and sys.stdin.isatty():
        return getpass.getpass(f"{name} (input hidden): ")
    # Piped in (`pass show x | ragd secret set imap.password`): the first line.
    return (sys.stdin.readline() if sys.stdin is not None else "").rstrip("\r\n")


def cmd_secret(args: argparse.Namespace) -> int:
    """`ragd secret set|delete|status|show [NAME]`: the value is prompted for, never an
    argument; `show` prints only the names in SHOWN."""
    if args.action == "status":
        return _status(args.name)
    name = check_name(args.name)
    if args.action == "show":
        return _show(name)
    if args.action == "set":
        store = set_secret(name, _read_value(name))
        print(f"stored {name} in {store.describe()}")
    else:
        store = delete_secret(name)
        print(f"deleted {name} from {store.describe()}")
    return 0


def _show(name: str) -> int:
    if name not in SHOWN:
        raise InvalidArgument("name", f"{name} is never shown: a key or password you stored "
                              "stays in the store", f"only {', '.join(SHOWN)} can be shown; "
                              f"`ragd secret status {name}` tells whether it is set")
    store = open_store()
    value = store.get(name)
    if not value:
        raise NotFound(f"no secret named {name} in {store.describe()}",
                       "`ragd mcp --http` creates it on its first start")
    print(value)
    return 0


def _status(name: str | None) -> int:
    import keyring

    backend = keyring_backend()
    path = chosen_file()
    if backend is not None:
        print(f"backend: {KeyringStore(backend).describe()}")
        if path is not None:
            print(f"note: {FILE_ENV} is set but unused while a keyring works")
    else:
        print(f"backend: none: keyring has no usable backend here "
              f"({backend_name(keyring.get_keyring())})")
        if path is None:
            print(f"hint: {NO_KEYRING_HINT}")
            return 1
        print(f"fallback: {FileStore(path).describe()}")
    if name is not None:
        stored = open_store().get(check_name(name)) is not None
        print(f"{name}: {'set' if stored else 'not set'}")
    return 0
