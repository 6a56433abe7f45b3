r"""The Windows named pipe, locked down (issue 27 item 4, decision 0032).

asyncio's ``start_serving_pipe`` creates the pipe with a NULL security descriptor, whose
default access list lets other accounts on the machine open it, and it does not reject
remote clients (FIELD-NOTES, "Windows named pipes"). So on Windows the daemon:

- creates every instance with ``PIPE_REJECT_REMOTE_CLIENTS`` (the first one also with
  ``FILE_FLAG_FIRST_PIPE_INSTANCE``: a name another process holds fails instead of being
  shared) through :func:`serve_pipe`;
- listens on a per-user name with a random part chosen at each start (:func:`pipe_name`),
  published only in the status file, so no one can create the name before the daemon does;
- writes a random token to that status file, which lies in the user's own profile
  (``%LOCALAPPDATA%``, readable by the user, SYSTEM and administrators only), and refuses a
  ``hello`` that does not carry it (:func:`token_accepted`). A client learns the token where
  it learns the address: :func:`ragd.daemon.ipc.discovery.find_daemon` hands it to
  :func:`remember_token`, and the client's hello sends :func:`token_for` the address.

On a Unix socket (mode 0600 in a 0700 directory) the kernel already does all this; the
token is not used there. Standard library only: the thin clients import it.
"""

from __future__ import annotations

import contextlib
import hmac
import importlib
import secrets
import threading
from collections.abc import Callable, Iterator
from typing import Any

# winbase.h / winnt.h values (the same as CPython's _winapi constants, which exist only on
# Windows; here so that the flags can be computed and tested anywhere).
PIPE_ACCESS_DUPLEX = 0x00000003
FILE_FLAG_OVERLAPPED = 0x40000000
FILE_FLAG_FIRST_PIPE_INSTANCE = 0x00080000
PIPE_TYPE_MESSAGE = 0x00000004
PIPE_READMODE_MESSAGE = 0x00000002
PIPE_WAIT = 0x00000000
PIPE_REJECT_REMOTE_CLIENTS = 0x00000008

TOKEN_BYTES = 32


def open_mode(first: bool) -> int:
    """``dwOpenMode`` of one instance: duplex, overlapped (the proactor needs it), and for
    the first instance the first-instance flag."""
    flags = PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED
    return flags | FILE_FLAG_FIRST_PIPE_INSTANCE if first else flags


def pipe_mode() -> int:
    """``dwPipeMode``: asyncio's message mode, plus remote clients refused."""
    return PIPE_TYPE_MESSAGE | PIPE_READMODE_MESSAGE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS


def pipe_name(base: str, nonce: str | None = None) -> str:
    r"""The name to listen on: ``base`` (``\\.\pipe\ragd-<user>-<data dir hash>``, see
    ``Paths.socket_path``) and a random part, new at each start."""
    return f"{base}-{nonce or secrets.token_hex(8)}"


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_accepted(expected: str | None, given: object) -> bool:
    """Whether a hello may proceed: no token expected (a Unix socket), or the one given
    equals it (compared in constant time)."""
    if expected is None:
        return True
    return isinstance(given, str) and hmac.compare_digest(given.encode("utf-8"),
                                                          expected.encode("utf-8"))


_tokens: dict[str, str] = {}
_tokens_lock = threading.Lock()


def remember_token(address: str, token: str | None) -> None:
    """Record the token the status file gives for ``address`` (None forgets it)."""
    with _tokens_lock:
        if token:
            _tokens[address] = token
        else:
            _tokens.pop(address, None)


def token_for(address: str) -> str | None:
    """The token to send in the hello to ``address``, if its status file gave one."""
    with _tokens_lock:
        return _tokens.get(address)


def restricted_pipe_server() -> type:
    """asyncio's ``PipeServer`` with the flags above (Windows only)."""
    # Windows-only modules, typed loosely so the checker runs anywhere.
    _winapi: Any = importlib.import_module("_winapi")
    windows_events: Any = importlib.import_module("asyncio.windows_events")
    windows_utils: Any = importlib.import_module("asyncio.windows_utils")

    class RestrictedPipeServer(windows_events.PipeServer):  # type: ignore[misc]
        def _server_pipe_handle(self, first: bool) -> Any:
            if self.closed():
                return None
            handle = _winapi.CreateNamedPipe(
                self._address, open_mode(first), pipe_mode(),
                _winapi.PIPE_UNLIMITED_INSTANCES, windows_utils.BUFSIZE,
                windows_utils.BUFSIZE, _winapi.NMPWAIT_WAIT_FOREVER, _winapi.NULL)
            pipe = windows_utils.PipeHandle(handle)
            self._free_instances.add(pipe)
            return pipe

    return RestrictedPipeServer


@contextlib.contextmanager
def _server_class(module: Any, cls: type) -> Iterator[None]:
    saved = module.PipeServer
    module.PipeServer = cls
    try:
        yield
    finally:
        module.PipeServer = saved


async def serve_pipe(loop: Any, factory: Callable[[], Any], name: str) -> list[Any]:
    """``loop.start_serving_pipe`` with :func:`restricted_pipe_server`'s class. asyncio builds its
    ``PipeServer`` by name as the coroutine starts, before its first suspension, so the name
    is swapped for that step only (no other task runs meanwhile); later instances come from
    the server's own method."""
    windows_events = importlib.import_module("asyncio.windows_events")
    with _server_class(windows_events, restricted_pipe_server()):
        # start_serving_pipe awaits nothing: it runs to its end without giving way.
        servers: list[Any] = await loop.start_serving_pipe(factory, name)
    return servers
