"""The blocking client of the daemon (the asyncio one is :mod:`ragd.daemon.ipc.async_client`).

Used by the CLI, the tray and the MCP bridge, so it imports only the standard library, the
protocol module and the errors module; a test checks that in a fresh interpreter.

Both clients open the connection with ``hello`` and raise the daemon's errors as the same
:class:`RagdError` subclasses the daemon raised (``InvalidArgument`` with its ``param``, ...).
Every transport failure is a :class:`DaemonUnavailable` with a hint.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ragd.daemon.errors import DaemonUnavailable, InvalidArgument, ProtocolMismatch, RagdError
from ragd.daemon.ipc import protocol as p
from ragd.daemon.ipc.address import is_pipe_address
from ragd.daemon.ipc.pipes import token_for

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
MAX_REPLY_BYTES = 64 * 1024 * 1024  # a reply larger than this means something went wrong
MAX_QUEUED_EVENTS = 10_000  # events kept for a subscriber that is not reading; older ones drop
START_HINT = "start it with `ragd start`"
GONE_HINT = "the daemon may have stopped or crashed: check `ragd status` and its log"
_ERROR_PIPE_BUSY = 231
_SUBSCRIBE_POLL = 0.25  # how long a blocked subscriber holds the lock before letting calls in


def _unavailable(address: str, exc: BaseException) -> DaemonUnavailable:
    """Translate a failed connect into a sentence and a hint."""
    if isinstance(exc, FileNotFoundError):
        return DaemonUnavailable(f"no ragd daemon is running (nothing at {address})", START_HINT)
    if isinstance(exc, ConnectionRefusedError):
        return DaemonUnavailable(f"no ragd daemon is listening on {address}", START_HINT)
    if isinstance(exc, PermissionError):
        return DaemonUnavailable(f"permission denied on {address}",
                                 "it belongs to another user: check RAGD_HOME")
    if isinstance(exc, TimeoutError):
        return DaemonUnavailable(f"the daemon at {address} did not accept the connection",
                                 "it may be overloaded or stuck: check `ragd status`")
    return DaemonUnavailable(f"cannot connect to the daemon at {address}: {exc}", START_HINT)


def _hello_params(client_name: str) -> dict[str, Any]:
    return {"client": client_name, "protocol": p.PROTOCOL_VERSION}


def _token_param(address: str) -> dict[str, Any]:
    """The hello's token for ``address``, as the status file gave it (the Windows pipe's,
    decision 0032); nothing when it gave none."""
    token = token_for(address)
    return {"token": token} if token else {}


def _check_hello(info: Any) -> dict[str, Any]:
    # A daemon of another protocol may answer hello without refusing it: check both ways.
    theirs = info.get("protocol") if isinstance(info, dict) else None
    if theirs != p.PROTOCOL_VERSION:
        raise ProtocolMismatch(
            f"protocol mismatch: client speaks {p.PROTOCOL_VERSION}, daemon speaks {theirs}",
            p.RESTART_HINT)
    return info


def _frame(rid: int, method: str, params: Mapping[str, Any] | None, limit: int | None) -> bytes:
    frame = p.encode(p.request(rid, method, params or {}))
    if limit is not None and len(frame) > limit:
        raise InvalidArgument("params", f"the request is {len(frame)} bytes, over the "
                              f"daemon's limit of {limit}", "send less at once")
    return frame


def _outcome(msg: dict[str, Any]) -> Any:
    error = msg.get("error")
    if error is not None:
        if not isinstance(error, dict):
            raise RagdError(f"the daemon sent a malformed error: {error!r:.200}", GONE_HINT)
        raise p.exception_from_error(error)
    return msg.get("result")


class _SocketStream:
    def __init__(self, address: str, timeout: float) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(address)
        except BaseException:
            sock.close()
            raise
        self._sock = sock

    def send(self, data: bytes, timeout: float | None) -> None:
        self._sock.settimeout(timeout)
        self._sock.sendall(data)

    def recv(self, timeout: float | None) -> bytes:
        self._sock.settimeout(timeout)
        return self._sock.recv(1 << 16)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in recv
        self._sock.close()


class _PipeStream:
    """A Windows named pipe opened as a file. Pipes opened this way have no timeouts."""

    def __init__(self, address: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._file = open(address, "r+b", buffering=0)  # noqa: SIM115
                return
            except OSError as exc:
                # Every instance busy: the server creates the next one right after a connect.
                if getattr(exc, "winerror", None) != _ERROR_PIPE_BUSY:
                    raise
                if time.monotonic() >= deadline:
                    raise TimeoutError("pipe busy") from exc
                time.sleep(0.01)

    def send(self, data: bytes, timeout: float | None) -> None:
        self._file.write(data)

    def recv(self, timeout: float | None) -> bytes:
        return self._file.read(1 << 16) or b""

    def close(self) -> None:
        self._file.close()


class Client:
    """A blocking connection to the daemon; ``call`` is safe to use from several threads.

    ``server_info`` holds the daemon's hello reply (``daemon_version``, ``protocol``,
    ``capabilities``, ``pid``). Raises :class:`DaemonUnavailable` or :class:`ProtocolMismatch`.
    """

    def __init__(self, address: str, *, timeout: float = DEFAULT_TIMEOUT,
                 client_name: str = "ragd-cli", max_reply_bytes: int = MAX_REPLY_BYTES) -> None:
        self.address = address
        self.timeout = timeout
        self.max_reply_bytes = max_reply_bytes
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._buffer = bytearray()
        self._events: collections.deque[dict[str, Any]] = collections.deque(
            maxlen=MAX_QUEUED_EVENTS)
        self._closed = False
        self._request_limit: int | None = None
        try:
            stream_type = _PipeStream if is_pipe_address(address) else _SocketStream
            self._stream: _SocketStream | _PipeStream = stream_type(address, timeout)
        except OSError as exc:
            raise _unavailable(address, exc) from exc
        try:
            self.server_info = _check_hello(self.call("hello", {**_hello_params(client_name),
                                                         **_token_param(address)}))
        except BaseException:
            self.close()
            raise
        limit = self.server_info.get("max_frame_bytes")
        self._request_limit = limit if isinstance(limit, int) else None

    @property
    def closed(self) -> bool:
        return self._closed

    def call(self, method: str, params: Mapping[str, Any] | None = None,
             timeout: float | None = None) -> Any:
        """Call ``method`` and return its result, or raise the daemon's error."""
        timeout = self.timeout if timeout is None else timeout
        with self._lock:
            if self._closed:
                raise DaemonUnavailable("the connection to the daemon is closed", GONE_HINT)
            rid = next(self._ids)
            deadline = time.monotonic() + timeout
            self._send(_frame(rid, method, params, self._request_limit), timeout)
            while True:
                try:
                    msg = self._read_message(deadline)
                except TimeoutError:
                    raise DaemonUnavailable(
                        f"the daemon did not answer {method} within {timeout:g} s",
                        "it may be busy or stuck: check `ragd status` and its log") from None
                if "id" not in msg:
                    self._queue_event(msg)
                elif msg["id"] == rid or (msg["id"] is None and "error" in msg):
                    # An error without id answers the only request in flight: ours.
                    return _outcome(msg)
                # Anything else answers a call that timed out earlier: drop it.

    def subscribe(self, params: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Subscribe to progress events; iterate the params of each event until disconnected.

        Calls from other threads still work meanwhile (the iterator gives up the lock every
        fraction of a second), but a dedicated client for events is simpler to reason about.
        """
        self.call("subscribe", params or {})
        return self._event_stream()

    def _event_stream(self) -> Iterator[dict[str, Any]]:
        while True:
            with self._lock:
                event = self._events.popleft() if self._events else None
                if event is None:
                    if self._closed:
                        return
                    try:
                        self._pump(time.monotonic() + _SUBSCRIBE_POLL)
                    except DaemonUnavailable:
                        return
                    continue
            yield event

    def _pump(self, deadline: float) -> None:
        try:
            msg = self._read_message(deadline)
        except TimeoutError:
            return
        if "id" not in msg:
            self._queue_event(msg)

    def _queue_event(self, msg: dict[str, Any]) -> None:
        params = msg.get("params")
        self._events.append(params if isinstance(params, dict) else {})

    def _send(self, frame: bytes, timeout: float) -> None:
        try:
            self._stream.send(frame, timeout)
        except OSError as exc:  # including a timeout: a half-sent frame ruins the stream
            raise self._broken(f"lost the connection to the daemon: {exc}") from exc

    def _read_message(self, deadline: float) -> dict[str, Any]:
        """The next frame as a dict. Raises TimeoutError at the deadline."""
        searched = 0
        while True:
            end = self._buffer.find(b"\n", searched)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                searched = 0
                if not line.strip():
                    continue
                try:
                    msg = p.decode(line)
                except (ValueError, RecursionError):
                    raise self._broken("the daemon sent an unreadable frame") from None
                if isinstance(msg, dict):
                    return msg
                raise self._broken("the daemon sent a frame that is not an object")
            searched = len(self._buffer)
            if searched > self.max_reply_bytes:
                raise self._broken(f"the daemon sent a frame over {self.max_reply_bytes} bytes")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            try:
                chunk = self._stream.recv(remaining)
            except TimeoutError:
                raise
            except OSError as exc:
                raise self._broken(f"lost the connection to the daemon: {exc}") from exc
            if not chunk:
                raise self._broken("the daemon closed the connection")
            self._buffer += chunk

    def _broken(self, message: str) -> DaemonUnavailable:
        self.close()
        return DaemonUnavailable(message, GONE_HINT)

    def close(self) -> None:
        """Close the connection. Safe to call twice, and from another thread."""
        if not self._closed:
            self._closed = True
            self._stream.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
