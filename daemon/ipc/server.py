"""The daemon's IPC server: newline-delimited JSON-RPC over a Unix socket or a Windows pipe.

The server owns the transport and the protocol rules; the daemon supplies one ``dispatch``
coroutine for the methods. Robustness is the point: whatever one client sends (garbage, a
100 MB line, half a frame), it gets an error reply or a closed connection, and every other
connection keeps being served. Each request runs in its own task, so a slow search never holds
up a status call, and replies carry ids rather than arriving in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import os
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ragd.daemon.errors import (
    AccessDenied,
    AlreadyRunning,
    ConfigError,
    ProtocolMismatch,
    RagdError,
)
from ragd.daemon.ipc import protocol as p
from ragd.daemon.ipc.address import clear_stale_socket, validate_pipe_name
from ragd.daemon.ipc.pipes import pipe_name, serve_pipe, token_accepted

if TYPE_CHECKING:
    from ragd.daemon.settings.paths import Paths

log = logging.getLogger(__name__)

Dispatch = Callable[[str, dict[str, Any], "Connection"], Awaitable[Any]]
CloseCallback = Callable[["Connection"], Any]

DEFAULT_MAX_INFLIGHT = 64  # requests one connection may have running before we stop reading it
DEFAULT_NOTIFY_BUFFER_BYTES = 1 << 20  # unsent bytes beyond which notifications are dropped
_DISCARD_CHUNK = 1 << 16
_CLOSE_GRACE = 5.0  # seconds close() waits for cancelled tasks
_SOCKET_MODE = 0o600


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


class Connection:
    """One client connection. ``dispatch`` receives it to subscribe it to events."""

    def __init__(self, server: IpcServer, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, cid: int) -> None:
        self.id = cid
        self.client: str | None = None  # the name given in hello; None until then
        self.on_close: list[CloseCallback] = []
        self.dropped_notifications = 0
        self._server = server
        self._reader = reader
        self._writer = writer
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(server.max_inflight)

    def __repr__(self) -> str:
        return f"<Connection {self.id} client={self.client!r} closed={self.closed}>"

    @property
    def closed(self) -> bool:
        return self._closed or self._writer.is_closing()

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Send an event. Returns False (and drops it) if closed or the client reads too slowly.

        Never waits for the client: a subscriber that stops reading must not stall the
        daemon nor grow its memory, so events beyond the write-buffer limit are lost.
        Call it from the server's event loop.
        """
        if self.closed:
            return False
        if self._writer.transport.get_write_buffer_size() > self._server.notify_buffer_bytes:
            if self.dropped_notifications == 0:
                log.warning("connection %d (%s) reads too slowly: dropping its notifications",
                            self.id, self.client)
            self.dropped_notifications += 1
            return False
        try:
            frame = p.encode(p.notification(method, params))
        except (TypeError, ValueError):
            log.exception("cannot encode a %s notification", method)
            return False
        self._writer.write(frame)
        return True

    # -- reading -------------------------------------------------------------------------------

    async def serve(self) -> None:
        """Read frames until the client hangs up; never raises."""
        log.debug("connection %d opened", self.id)
        try:
            while True:
                frame = await self._read_frame()
                if frame is None:
                    break
                await self._handle_frame(frame)
        except (ConnectionError, OSError) as exc:
            log.debug("connection %d lost: %s", self.id, exc)
        except asyncio.CancelledError:
            pass  # server closing
        except Exception:
            log.exception("connection %d failed; closing it", self.id)
        finally:
            await self._close()

    async def _read_frame(self) -> bytes | None:
        """The next complete line, or None at end of stream. Oversized lines are skipped."""
        while True:
            try:
                return await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    log.debug("connection %d hung up %d bytes into a frame",
                              self.id, len(exc.partial))
                return None
            except asyncio.LimitOverrunError as exc:
                limit = self._server.max_frame_bytes
                log.warning("connection %d sent a frame over %d bytes; discarding it",
                            self.id, limit)
                await self._send(p.error_response(
                    None, p.FRAME_TOO_LARGE, f"frame too large (limit {limit} bytes)",
                    {"code": "frame_too_large", "limit": limit, "hint": ""}))
                if not await self._discard_line(exc.consumed):
                    return None

    async def _discard_line(self, consumed: int) -> bool:
        """Drop the rest of an oversized line, never holding more than the reader's limit.

        ``consumed`` bytes at the head of the buffer are known to hold no newline. Returns
        False if the stream ended first.
        """
        while True:
            while consumed > 0:
                chunk = await self._reader.read(min(consumed, _DISCARD_CHUNK))
                if not chunk:
                    return False
                consumed -= len(chunk)
            try:
                await self._reader.readuntil(b"\n")  # the tail of the line, within the limit
                return True
            except asyncio.IncompleteReadError:
                return False
            except asyncio.LimitOverrunError as exc:
                consumed = exc.consumed

    async def _handle_frame(self, frame: bytes) -> None:
        line = frame.rstrip(b"\r\n")
        if not line.strip():
            return  # blank lines are keep-alives
        try:
            msg = p.decode(line)
        except (ValueError, RecursionError) as exc:
            reason = "invalid UTF-8" if isinstance(exc, UnicodeDecodeError) else "invalid JSON"
            await self._send(p.error_response(None, p.PARSE_ERROR, f"parse error: {reason}"))
            return
        try:
            req = p.parse_request(msg)
        except p.BadRequest as bad:
            await self._send(bad.response)
            return
        if req.method == "hello":
            # Answered in order, before the next frame is read, so pipelined calls see it.
            reply = self._hello(req)
        elif self.client is None:
            reply = p.error_response(req.id, p.INVALID_REQUEST, "call hello first")
        elif req.method not in p.METHODS:
            reply = p.error_response(req.id, p.METHOD_NOT_FOUND,
                                     f"method not found: {_clip(req.method)!r}")
        else:
            # Bounded per connection: a client that floods requests stops being read.
            await self._slots.acquire()
            task = asyncio.create_task(self._run(req), name=f"ipc-{self.id}-{req.method}")
            self._tasks.add(task)
            self._server._requests.add(task)
            task.add_done_callback(self._task_done)
            return
        if not req.is_notification:
            await self._send(reply)

    def _hello(self, req: p.Request) -> dict:
        theirs = req.params.get("protocol")
        if isinstance(theirs, int) and not isinstance(theirs, bool) \
                and theirs != p.PROTOCOL_VERSION:
            exc: RagdError = ProtocolMismatch(
                f"protocol mismatch: client speaks {theirs}, daemon speaks {p.PROTOCOL_VERSION}",
                p.RESTART_HINT)
            log.warning("connection %d: %s", self.id, exc.message)
            return p.error_from_exception(req.id, exc)
        try:
            hello = p.parse_params("hello", req.params)
        except RagdError as exc:
            return p.error_from_exception(req.id, exc)
        if not token_accepted(self._server.token, req.params.get("token")):
            log.warning("connection %d: hello without the daemon's token refused", self.id)
            return p.error_from_exception(req.id, AccessDenied(
                "this connection did not give the daemon's token",
                "connect as the user who runs the daemon; its status file holds the token"))
        self.client = _clip(hello.client, 100)
        log.debug("connection %d is %s", self.id, self.client)
        return p.result_response(req.id, {
            "daemon_version": self._server.version,
            "protocol": p.PROTOCOL_VERSION,
            "capabilities": list(p.METHODS),
            "pid": os.getpid(),
            "max_frame_bytes": self._server.max_frame_bytes,
        })

    async def _run(self, req: p.Request) -> None:
        try:
            params = p.parse_params(req.method, req.params)
            if not isinstance(params, dict):
                params = params.model_dump()  # complete, validated and with defaults
            result = await self._server.dispatch(req.method, params, self)
            reply = p.result_response(req.id, result)
        except RagdError as exc:
            log.info("%s failed: %s", req.method, exc)
            reply = p.error_from_exception(req.id, exc)
        except Exception as exc:
            ref = p.new_reference()
            log.error("%s raised an unexpected error (reference %s)", req.method, ref,
                      exc_info=exc)
            reply = p.error_from_exception(req.id, exc, ref)
        if not req.is_notification:
            await self._send(reply)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._server._requests.discard(task)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:
            log.error("request task failed", exc_info=task.exception())

    # -- writing and closing -------------------------------------------------------------------

    async def _send(self, message: dict) -> None:
        if self.closed:
            return  # the client left; its answer has nowhere to go
        try:
            frame = p.encode(message)
        except (TypeError, ValueError) as exc:
            ref = p.new_reference()
            log.error("cannot encode the reply to request %r (reference %s)",
                      message.get("id"), ref, exc_info=exc)
            frame = p.encode(p.error_from_exception(message.get("id"), exc, ref))
        limit = self._server.max_reply_bytes
        if len(frame) > limit:
            # A frame the client would refuse, and then drop the connection over: an error it
            # can read instead (every tool bounds its own answers; this is the last guard).
            log.warning("connection %d: a %d-byte reply to request %r is over the %d-byte "
                        "limit; sending an error instead", self.id, len(frame),
                        message.get("id"), limit)
            frame = p.encode(p.error_response(
                message.get("id"), p.APPLICATION_ERROR,
                f"the answer is {len(frame):,} bytes, over the {limit:,}-byte limit of one "
                "reply", {"code": "reply_too_large", "limit": limit,
                          "hint": "ask for less (a smaller top_k, one document at a time)"}))
        self._writer.write(frame)
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            log.debug("connection %d: reply not delivered: %s", self.id, exc)

    async def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Requests still running finish on their own (an index job should not die because the
        # CLI that asked for it went away); their replies are dropped by _send.
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()
        for callback in list(self.on_close):
            try:
                outcome = callback(self)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                log.exception("on_close callback of connection %d failed", self.id)
        self._server._forget(self)
        log.debug("connection %d closed", self.id)


class IpcServer:
    """Serves ``dispatch`` to any number of local clients.

    ``dispatch(method, params, conn)`` is awaited for every method of :data:`METHODS` but
    ``hello``, with params already validated (see :func:`protocol.parse_params`). It returns a
    JSON-serialisable result or raises: a :class:`RagdError` reaches the client with its code
    and hint; anything else is logged with a reference the client sees. To stop the server
    from inside a request, schedule :meth:`close` after replying.
    """

    def __init__(self, dispatch: Dispatch, *, max_frame_bytes: int, version: str,
                 max_inflight: int = DEFAULT_MAX_INFLIGHT,
                 notify_buffer_bytes: int = DEFAULT_NOTIFY_BUFFER_BYTES,
                 max_reply_bytes: int = p.MAX_REPLY_BYTES, token: str | None = None) -> None:
        """``token``: what a hello must carry (the Windows pipe, decision 0032); None on a
        Unix socket, whose file mode keeps other users out."""
        if max_frame_bytes < 1024:
            raise ValueError("max_frame_bytes must be at least 1024")
        self.dispatch = dispatch
        self.max_frame_bytes = max_frame_bytes
        self.max_reply_bytes = max_reply_bytes  # the largest frame we send (clients' limit)
        self.version = version
        self.token = token
        self.max_inflight = max_inflight
        self.notify_buffer_bytes = notify_buffer_bytes
        self.address: str | None = None
        self._servers: list[Any] = []  # asyncio.Server or Windows PipeServer objects
        self._connections: dict[Connection, asyncio.Task[None]] = {}
        self._requests: set[asyncio.Task[None]] = set()  # of every connection, open or gone
        self._ids = itertools.count(1)
        self._socket_identity: tuple[int, int] | None = None

    @property
    def connections(self) -> list[Connection]:
        return list(self._connections)

    async def start(self, paths: Paths) -> str:
        """Listen where ``paths`` says: a Unix socket, or a named pipe on Windows."""
        paths.ensure()
        address = paths.socket_path
        if paths.is_windows:
            address = pipe_name(address)  # a random part, published in the status file
            await self.start_pipe(address)
        else:
            await self.start_unix(address)
        return address

    async def start_unix(self, path: str) -> None:
        """Bind ``path`` (mode 0600), replacing a stale socket file that nothing answers on."""
        self._check_not_started()
        await asyncio.to_thread(clear_stale_socket, path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(path)
            # Before listen(): nobody can connect through the umask's wider mode meanwhile.
            os.chmod(path, _SOCKET_MODE)
            info = os.stat(path)
            self._socket_identity = (info.st_dev, info.st_ino)
            server = await asyncio.start_unix_server(self._on_client, sock=sock,
                                                     limit=self.max_frame_bytes)
        except OSError as exc:
            sock.close()
            raise ConfigError(f"cannot listen on {path}: {exc.strerror or exc}",
                              "check that its directory exists and is writable") from exc
        self._servers.append(server)
        self.address = path
        log.info("listening on %s", path)

    async def start_pipe(self, name: str) -> None:
        r"""Serve the named pipe ``name`` (``\\.\pipe\...``); Windows' ProactorEventLoop only."""
        self._check_not_started()
        validate_pipe_name(name)
        if sys.platform != "win32":
            raise ConfigError("named pipes exist only on Windows", "use start_unix here")
        loop = asyncio.get_running_loop()
        start_serving_pipe = getattr(loop, "start_serving_pipe", None)
        if start_serving_pipe is None:
            raise ConfigError("this event loop cannot serve named pipes",
                              "run the daemon on asyncio's ProactorEventLoop")

        def factory() -> asyncio.StreamReaderProtocol:
            reader = asyncio.StreamReader(limit=self.max_frame_bytes, loop=loop)
            return asyncio.StreamReaderProtocol(reader, self._on_client, loop=loop)

        try:
            # asyncio creates the first instance with FILE_FLAG_FIRST_PIPE_INSTANCE, so a name
            # already held by another process fails here instead of being shared.
            self._servers.extend(await serve_pipe(loop, factory, name))
        except PermissionError as exc:
            raise AlreadyRunning(f"another process already serves {name}",
                                 "use `ragd status`, or `ragd stop` first") from exc
        self.address = name
        log.info("listening on %s", name)

    def _check_not_started(self) -> None:
        if self._servers:
            raise RuntimeError(f"the server already listens on {self.address}")

    def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self, reader, writer, next(self._ids))
        self._connections[conn] = asyncio.create_task(conn.serve(), name=f"ipc-conn-{conn.id}")

    def _forget(self, conn: Connection) -> None:
        self._connections.pop(conn, None)

    async def close(self) -> None:
        """Stop listening, close every connection, cancel running requests, remove the socket."""
        for server in self._servers:
            server.close()
        # The current task is spared: close() may be awaited from inside a request.
        current = asyncio.current_task()
        tasks = [t for t in (*self._requests, *self._connections.values()) if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=_CLOSE_GRACE)
            if stuck:
                log.warning("%d IPC tasks ignored cancellation", len(stuck))
        for server in self._servers:
            wait_closed = getattr(server, "wait_closed", None)
            if wait_closed is not None:
                await wait_closed()
        self._servers.clear()
        self._remove_socket()
        log.info("stopped listening on %s", self.address)

    def _remove_socket(self) -> None:
        if self._socket_identity is None or self.address is None:
            return
        try:
            info = os.stat(self.address)
            # Only our own socket: a newer daemon may already have replaced it.
            if (info.st_dev, info.st_ino) == self._socket_identity:
                os.unlink(self.address)
        except FileNotFoundError:
            pass
        self._socket_identity = None

