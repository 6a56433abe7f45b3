"""Where the daemon listens: a Unix socket file, or a Windows named pipe name.

Standard library only: the thin clients import it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import stat

from ragd.daemon.errors import AlreadyRunning, ConfigError, InvalidArgument

log = logging.getLogger(__name__)

PIPE_PREFIX = "\\\\.\\pipe\\"
PIPE_MAX_CHARS = 256  # the whole name, prefix included (CreateNamedPipe)


def is_pipe_address(address: str) -> bool:
    return address.lower().startswith(PIPE_PREFIX)


def validate_pipe_name(name: str) -> str:
    r"""Check a local Windows pipe name (``\\.\pipe\<name>``) and return it."""
    hint = r"use the form \\.\pipe\<name>, without further backslashes"
    if not isinstance(name, str) or not is_pipe_address(name):
        raise InvalidArgument("pipe", f"{name!r} is not a local pipe name", hint)
    rest = name[len(PIPE_PREFIX):]
    if not rest or "\\" in rest or "\0" in rest:
        raise InvalidArgument("pipe", f"{name!r} is not a valid pipe name", hint)
    if len(name) > PIPE_MAX_CHARS:
        raise InvalidArgument("pipe", f"pipe name longer than {PIPE_MAX_CHARS} characters",
                              hint)
    return name


def socket_answers(path: str, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on the Unix socket ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except TimeoutError:
        return True  # a live but overloaded listener: never steal its address
    except OSError:
        return False
    finally:
        sock.close()
    return True


def clear_stale_socket(path: str) -> None:
    """Remove a socket file that nothing answers on; refuse to touch anything else.

    Raises :class:`AlreadyRunning` if a process listens there, :class:`ConfigError` if the
    path is not a socket.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise ConfigError(f"{path} exists and is not a socket",
                          "move that file away; ragd needs the name for its socket")
    if socket_answers(path):
        raise AlreadyRunning(f"another process is already listening on {path}",
                             "use `ragd status`, or `ragd stop` first")
    log.info("removing stale socket %s", path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
