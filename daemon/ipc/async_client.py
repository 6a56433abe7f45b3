"""The asyncio client of the daemon: many concurrent calls on one connection, and events.

Used by the MCP bridge; like :mod:`ragd.daemon.ipc.client` it imports only the standard library,
the protocol module and the errors module.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ragd.daemon.errors import DaemonUnavailable, RagdError
from ragd.daemon.ipc import protocol as p
from ragd.daemon.ipc.address import is_pipe_address
from ragd.daemon.ipc.client import (
    _ERROR_PIPE_BUSY,
    DEFAULT_TIMEOUT,
    GONE_HINT,
    MAX_QUEUED_EVENTS,
    MAX_REPLY_BYTES,
    _check_hello,
    _frame,
    _hello_params,
    _outcome,
    _token_param,
    _unavailable,
)

log = logging.getLogger(__name__)


_END = object()


class AsyncClient:
    """An asyncio connection that carries many concurrent calls (replies matched by id).

    Create it with ``await AsyncClient.connect(address)``; use ``await client.call(...)``,
    and ``async for event in client.events()`` after ``await client.subscribe()``.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 address: str, timeout: float) -> None:
        self.address = address
        self.timeout = timeout
        self.server_info: dict[str, Any] = {}
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._events: asyncio.Queue[Any] = asyncio.Queue(maxsize=MAX_QUEUED_EVENTS)
        self._error: DaemonUnavailable | None = None
        self._request_limit: int | None = None
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def connect(cls, address: str, *, timeout: float = DEFAULT_TIMEOUT,
                      client_name: str = "ragd-cli",
                      max_reply_bytes: int = MAX_REPLY_BYTES) -> AsyncClient:
        """Connect and say hello. Raises DaemonUnavailable or ProtocolMismatch."""
        try:
            if is_pipe_address(address):
                opening = _open_pipe(address, max_reply_bytes)
            else:
                opening = asyncio.open_unix_connection(address, limit=max_reply_bytes)
            reader, writer = await asyncio.wait_for(opening, timeout)
        except OSError as exc:  # TimeoutError included
            raise _unavailable(address, exc) from exc
        client = cls(reader, writer, address=address, timeout=timeout)
        try:
            client.server_info = _check_hello(
                await client.call("hello", {**_hello_params(client_name),
                                           **_token_param(address)}))
        except BaseException:
            await client.close()
            raise
        limit = client.server_info.get("max_frame_bytes")
        client._request_limit = limit if isinstance(limit, int) else None
        return client

    @property
    def closed(self) -> bool:
        return self._error is not None

    async def call(self, method: str, params: Mapping[str, Any] | None = None,
                   timeout: float | None = None) -> Any:
        """Call ``method`` and return its result, or raise the daemon's error."""
        if self._error is not None:
            raise self._error
        timeout = self.timeout if timeout is None else timeout
        rid = next(self._ids)
        frame = _frame(rid, method, params, self._request_limit)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            self._writer.write(frame)
            await self._writer.drain()
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise DaemonUnavailable(f"the daemon did not answer {method} within {timeout:g} s",
                                    "it may be busy or stuck: check `ragd status`") from None
        except (ConnectionError, OSError) as exc:
            raise DaemonUnavailable(f"lost the connection to the daemon: {exc}",
                                    GONE_HINT) from exc
        finally:
            self._pending.pop(rid, None)

    async def subscribe(self, params: Mapping[str, Any] | None = None) -> Any:
        """Ask for progress events; read them with :meth:`events`."""
        return await self.call("subscribe", params or {})

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """The params of each event, until the connection closes."""
        while True:
            item = await self._events.get()
            if item is _END:
                self._events.put_nowait(_END)  # let any other iterator end too
                return
            yield item

    async def _read_loop(self) -> None:
        error = DaemonUnavailable("the daemon closed the connection", GONE_HINT)
        try:
            while True:
                line = await self._reader.readuntil(b"\n")
                self._route(line)
        except asyncio.IncompleteReadError:
            pass
        except asyncio.LimitOverrunError:
            error = DaemonUnavailable("the daemon sent an oversized frame", GONE_HINT)
        except (ConnectionError, OSError) as exc:
            error = DaemonUnavailable(f"lost the connection to the daemon: {exc}", GONE_HINT)
        except asyncio.CancelledError:
            error = DaemonUnavailable("the connection to the daemon is closed", GONE_HINT)
        finally:
            self._error = error
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(error)
            self._push_event(_END)
            self._writer.close()

    def _route(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            msg = p.decode(line)
        except (ValueError, RecursionError):
            log.warning("ignoring an unreadable frame from the daemon")
            return
        if not isinstance(msg, dict):
            log.warning("ignoring a frame that is not an object")
            return
        if "id" not in msg:
            params = msg.get("params")
            self._push_event(params if isinstance(params, dict) else {})
            return
        rid = msg["id"]
        if rid is None and len(self._pending) == 1:
            rid = next(iter(self._pending))  # an error without id answers the only call
        future = self._pending.get(rid) if isinstance(rid, int) else None
        if future is None or future.done():
            if "error" in msg:
                log.warning("daemon error for no pending call: %s", msg["error"])
            return
        try:
            future.set_result(_outcome(msg))
        except RagdError as exc:
            future.set_exception(exc)

    def _push_event(self, item: Any) -> None:
        while True:
            try:
                self._events.put_nowait(item)
                return
            except asyncio.QueueFull:
                self._events.get_nowait()  # the subscriber is not reading: drop the oldest

    async def close(self) -> None:
        """Close the connection; pending calls fail with DaemonUnavailable."""
        self._writer.close()
        if not self._reader_task.done():
            self._reader_task.cancel()
        await asyncio.gather(self._reader_task, return_exceptions=True)
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _open_pipe(address: str, limit: int) -> tuple[asyncio.StreamReader,
                                                        asyncio.StreamWriter]:
    """asyncio streams over a Windows named pipe (ProactorEventLoop only)."""
    loop = asyncio.get_running_loop()
    create = getattr(loop, "create_pipe_connection", None)
    if create is None:
        raise OSError("this event loop cannot open named pipes")
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    while True:
        try:
            transport, protocol = await create(
                lambda: asyncio.StreamReaderProtocol(reader, loop=loop), address)
            break
        except OSError as exc:
            if getattr(exc, "winerror", None) != _ERROR_PIPE_BUSY:
                raise
            await asyncio.sleep(0.01)  # every instance busy: the server makes another at once
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)
