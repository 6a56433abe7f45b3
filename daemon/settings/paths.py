"""Where ragd keeps its configuration, indexes, logs and socket.

Everything lives outside the indexed sources: under platformdirs' per-user directories, or under
``$RAGD_HOME`` when that is set (tests, portable installs, several independent daemons).
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import os
import re
import stat
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from platformdirs.api import PlatformDirsABC

from ragd.daemon.errors import ConfigError

log = logging.getLogger(__name__)

APP_NAME = "ragd"
HOME_ENV = "RAGD_HOME"

# sun_path holds 108 bytes on Linux and 104 on macOS, including the terminating NUL; 100 leaves
# a margin on both.
MAX_SOCKET_PATH_BYTES = 100
# Deliberately the literal /tmp, not tempfile.gettempdir(): on macOS $TMPDIR is itself a long
# /var/folders/... path that would overflow sun_path again.
SOCKET_FALLBACK_ROOT = "/tmp"
_PRIVATE_DIR_MODE = 0o700


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):  # no login name in the environment nor in pwd
        return "user"


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def _pipe_safe(name: str) -> str:
    # A backslash would start a new path component of the pipe name; keep the name boring.
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "user"


@dataclass(frozen=True)
class Paths:
    """The four per-user directories ragd uses, and the files inside them.

    ``platform`` (a ``sys.platform`` value) and ``user`` only shape the socket address; they
    default to the running system so that the four directories are enough to build one.
    """

    config_dir: Path
    data_dir: Path
    state_dir: Path
    runtime_dir: Path
    platform: str = field(default=sys.platform)
    user: str = field(default_factory=_current_user)

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def catalog_path(self) -> Path:
        return self.data_dir / "catalog.sqlite"

    @property
    def faiss_dir(self) -> Path:
        return self.data_dir / "faiss"

    @property
    def whoosh_dir(self) -> Path:
        return self.data_dir / "whoosh"

    @property
    def docstore_dir(self) -> Path:
        return self.data_dir / "docstore"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "ragd.log"

    @property
    def status_file(self) -> Path:
        return self.runtime_dir / "daemon.json"

    @property
    def is_windows(self) -> bool:
        return self.platform == "win32"

    @property
    def socket_fallback_dir(self) -> Path | None:
        """The private ``/tmp`` directory that holds the socket when the runtime dir is too deep.

        ``None`` on Windows and whenever the socket fits in the runtime dir.
        """
        if self.is_windows:
            return None
        preferred = self.runtime_dir / "ragd.sock"
        if len(os.fsencode(str(preferred))) <= MAX_SOCKET_PATH_BYTES:
            return None
        # The uid keeps users apart in the shared /tmp; the hash keeps several RAGD_HOMEs apart.
        name = f"ragd-{os.getuid()}-{_short_hash(str(self.runtime_dir))}"
        return Path(SOCKET_FALLBACK_ROOT) / name

    @property
    def socket_path(self) -> str:
        """The address the daemon listens on: a Unix socket path, or a Windows pipe name."""
        if self.is_windows:
            # Pipes live in one machine-wide namespace: the user and the data dir tell apart
            # users and independent RAGD_HOMEs.
            user = _pipe_safe(self.user)
            return rf"\\.\pipe\ragd-{user}-{_short_hash(str(self.data_dir))}"
        fallback = self.socket_fallback_dir
        directory = fallback if fallback is not None else self.runtime_dir
        return str(directory / "ragd.sock")

    def ensure(self) -> None:
        """Create the directories; make the runtime dir (and any socket fallback dir) private.

        Raises :class:`ConfigError` when an existing runtime dir belongs to another user, since
        anyone who controls the directory of the socket can impersonate the daemon.
        """
        # The indexes hold the text of private notes and mail: new dirs are private too, but an
        # existing one keeps the mode its owner chose.
        for directory in (self.config_dir, self.data_dir, self.state_dir):
            _mkdir(directory, mode=_PRIVATE_DIR_MODE)
        _ensure_private_dir(self.runtime_dir, windows=self.is_windows, allow_symlink=True)
        fallback = self.socket_fallback_dir
        if fallback is not None:
            # In the shared /tmp another user could plant a symlink under the predictable name.
            _ensure_private_dir(fallback, windows=False, allow_symlink=False)


def _mkdir(directory: Path, mode: int) -> None:
    try:
        directory.mkdir(mode=mode, parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise ConfigError(
            f"{directory} exists but is not a directory",
            hint="move that file away, or set RAGD_HOME to another location",
        ) from exc
    except OSError as exc:
        raise ConfigError(
            f"cannot create {directory}: {exc.strerror or exc}",
            hint="check the permissions of its parent, or set RAGD_HOME to a writable location",
        ) from exc


def _ensure_private_dir(directory: Path, *, windows: bool, allow_symlink: bool) -> None:
    _mkdir(directory, mode=_PRIVATE_DIR_MODE)
    if windows:
        return  # per-user ACLs of the profile dir protect it; there is no POSIX mode to set
    info = directory.lstat()
    if stat.S_ISLNK(info.st_mode):
        if not allow_symlink:
            raise ConfigError(
                f"{directory} is a symbolic link",
                hint="remove it (it may have been planted by another user) and start again",
            )
        info = directory.stat()
    uid = os.getuid()
    if info.st_uid != uid:
        raise ConfigError(
            f"runtime directory {directory} is owned by uid {info.st_uid}, not by you (uid {uid})",
            hint="remove it, or set RAGD_HOME (or XDG_RUNTIME_DIR) to a directory you own",
        )
    # mkdir's mode is filtered by the umask and an existing dir keeps its mode: set it explicitly.
    if stat.S_IMODE(info.st_mode) != _PRIVATE_DIR_MODE:
        directory.chmod(_PRIVATE_DIR_MODE)


def _platform_dirs(platform: str | None) -> PlatformDirsABC:
    if platform is None:
        from platformdirs import PlatformDirs

        return PlatformDirs(APP_NAME)
    if platform == "win32":
        from platformdirs.windows import Windows

        return Windows(APP_NAME)
    if platform == "darwin":
        from platformdirs.macos import MacOS

        return MacOS(APP_NAME)
    from platformdirs.unix import Unix

    return Unix(APP_NAME)


def _from_platformdirs(platform: str | None) -> tuple[Path, Path, Path, Path]:
    dirs = _platform_dirs(platform)
    try:
        # platformdirs warns (RuntimeDirWarning) when it falls back to /tmp/runtime-<uid>; that
        # is an expected situation (no systemd session), worth a log line, not a Python warning.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = (
                Path(dirs.user_config_dir),
                Path(dirs.user_data_dir),
                Path(dirs.user_state_dir),
                Path(dirs.user_runtime_dir),
            )
    except NotImplementedError as exc:  # Windows folders asked for on another system
        raise ConfigError(
            f"cannot look up the {platform} user folders on {sys.platform}",
            hint=f"set {HOME_ENV} to choose where ragd keeps its files",
        ) from exc
    except OSError as exc:
        raise ConfigError(
            f"cannot determine ragd's directories: {exc}",
            hint=f"set {HOME_ENV} (or XDG_RUNTIME_DIR) to a directory you own",
        ) from exc
    for warning in caught:
        log.info("%s", warning.message)
    return found


def resolve_paths(env: Mapping[str, str] | None = None, platform: str | None = None) -> Paths:
    """Work out where ragd's files go.

    ``$RAGD_HOME`` (read from ``env``, default ``os.environ``) puts everything under one
    directory: ``config/``, ``data/``, ``state/`` and ``run/``. Otherwise the platformdirs user
    config, data, state and runtime dirs are used (platformdirs reads the XDG variables from the
    process environment itself). ``platform`` ("linux", "darwin", "win32") defaults to the
    running system and exists so other systems' layouts can be tested anywhere.
    """
    env = os.environ if env is None else env
    target = sys.platform if platform is None else platform
    user = env.get("USERNAME", "") if target == "win32" else ""
    user = user or _current_user()
    home = env.get(HOME_ENV, "").strip()
    if home:
        # Absolute, because the daemon is started detached by clients with any working directory.
        root = Path(home).expanduser().absolute()
        return Paths(
            config_dir=root / "config",
            data_dir=root / "data",
            state_dir=root / "state",
            runtime_dir=root / "run",
            platform=target,
            user=user,
        )
    config_dir, data_dir, state_dir, runtime_dir = _from_platformdirs(platform)
    return Paths(config_dir, data_dir, state_dir, runtime_dir, platform=target, user=user)
