"""The window's server: Starlette on uvicorn, on 127.0.0.1 and a port chosen at start.

It runs on a thread of its own with its own event loop, so a slow page never holds the daemon's
loop; each API call is handed to the daemon's loop (``run_coroutine_threadsafe``) and awaited
here. Every request passes ``ragd.daemon.web.guard`` first. The URL that opens the window (with
this start's token) goes into the daemon's status file, which only the user can read; `ragd
open`, `ragd status` and the tray take it from there.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragd.daemon.errors import InvalidArgument, NotFound, RagdError
from ragd.daemon.web import guard
from ragd.daemon.web.api import METHODS

if TYPE_CHECKING:
    from ragd.daemon.runtime.service import Daemon

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
MAX_BODY = 1 << 20  # an API call's JSON: a query of 200,000 characters fits
CALL_TIMEOUT_S = 60.0
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
REFUSED_PAGE = """<!doctype html><meta charset="utf-8"><title>ragd</title>
<p>{reason}. Open ragd from its tray icon ("Open ragd") or with <code>ragd open</code>.</p>"""

RunOnDaemon = Callable[[Coroutine[Any, Any, Any]], Any]


def build_app(call: RunOnDaemon, d: Daemon, token: str, port: int) -> Any:
    """The ASGI app: the guard, the page's files, and ``POST /api/<method>``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, RedirectResponse, Response
    from starlette.routing import Route

    cookie = guard.cookie_name(port)
    files = {f"/static/{p.name}": p for p in STATIC.iterdir() if p.suffix in TYPES} \
        if STATIC.is_dir() else {}

    def refused(request: Request, status: int, reason: str) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": {"message": reason, "code": "refused", "hint":
                                           "open ragd again with `ragd open` or the tray"}},
                                status_code=status)
        return Response(REFUSED_PAGE.format(reason=reason.capitalize()), status_code=status,
                        media_type="text/html")

    async def page(request: Request) -> Response:
        path = "/static/index.html" if request.url.path == "/" else request.url.path
        file = files.get(path)
        if file is None:
            return Response("not found", status_code=404, media_type="text/plain")
        body = await asyncio.to_thread(file.read_bytes)
        return Response(body, media_type=TYPES[file.suffix])

    async def api(request: Request) -> Response:
        method = request.path_params["method"]
        run = METHODS.get(method)
        if run is None:
            return _error(NotFound(f"no method {method!r}", "see docs/web.md"), 404)
        raw = await _bounded_body(request)
        if raw is None:  # refused before it is held, whatever Content-Length says
            return _error(InvalidArgument("body", f"is larger than {MAX_BODY:,} bytes"), 413)
        try:
            params = json.loads(raw or b"{}")
        except ValueError:
            return _error(InvalidArgument("body", "is not JSON"), 400)
        if not isinstance(params, dict):
            return _error(InvalidArgument("body", "must be a JSON object"), 400)
        try:
            result = await asyncio.wait_for(asyncio.wrap_future(call(run(d, params))),
                                            CALL_TIMEOUT_S)
        except RagdError as exc:
            return _error(exc, 404 if isinstance(exc, NotFound) else 400)
        except TimeoutError:
            return _error(RagdError(f"{method} took longer than {CALL_TIMEOUT_S:g} s",
                                    "try again; `ragd status` says what the daemon does"), 504)
        except Exception:
            log.exception("the window's %s failed", method)
            return _error(RagdError(f"{method} failed inside ragd",
                                    f"the log at {d.paths.log_file} has the details"), 500)
        return JSONResponse({"result": result})

    class Guarded:
        """Every request through ``guard.verdict``; the security headers on every answer."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await self.inner(scope, receive, send)
                return
            request = Request(scope)
            status, reason = guard.verdict(
                method=request.method, path=request.url.path,
                host=request.headers.get("host"), origin=request.headers.get("origin"),
                cookie=request.cookies.get(cookie),
                query_token=request.query_params.get(guard.TOKEN_PARAM), token=token,
                port=port)

            async def secured(message: Any) -> None:
                if message["type"] == "http.response.start":
                    headers = [(k, v) for k, v in message.get("headers", [])
                               if k.lower() not in _SECURITY_KEYS]
                    message["headers"] = headers + _SECURITY
                await send(message)

            if status == 0:
                await self.inner(scope, receive, secured)
                return
            if status == 1:  # the opening URL: its token becomes the session's cookie
                response: Response = RedirectResponse("/", status_code=303)
                response.headers["Set-Cookie"] = guard.set_cookie(cookie, token)
            else:
                response = refused(request, status, reason)
            await response(scope, receive, secured)

    routes = [Route("/", page, methods=["GET", "HEAD"]),
              Route("/static/{name}", page, methods=["GET", "HEAD"]),
              Route("/api/{method}", api, methods=["POST"])]
    return Guarded(Starlette(routes=routes))


_SECURITY = [(k.lower().encode(), v.encode()) for k, v in guard.HEADERS.items()]
_SECURITY_KEYS = {k for k, _ in _SECURITY}


async def _bounded_body(request: Any) -> bytes | None:
    """The request's body, read in pieces up to ``MAX_BODY``; None past it."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        return None
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > MAX_BODY:
            return None
    return bytes(body)


def _error(exc: RagdError, status: int) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": exc.message, "hint": exc.hint,
                                   "code": exc.code}}, status_code=status)


class WebServer:
    """The window's server on its thread: ``start`` binds and serves, ``url`` opens it."""

    def __init__(self, d: Daemon, loop: asyncio.AbstractEventLoop, *, port: int = 0) -> None:
        self._d, self._loop = d, loop
        self.token = guard.new_token()
        # IPPROTO_TCP named: asyncio turns Nagle off only for such a socket (44 ms a request)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))  # loopback only, whatever the config says
        self.port = int(self._sock.getsockname()[1])
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.started = threading.Event()

    @property
    def url(self) -> str:
        """The address that opens the window (its token is traded for a cookie at once)."""
        return f"http://127.0.0.1:{self.port}/?{guard.TOKEN_PARAM}={self.token}"

    def start(self, timeout: float = 10.0) -> None:
        import uvicorn

        def call(coro: Coroutine[Any, Any, Any]) -> Any:
            return asyncio.run_coroutine_threadsafe(coro, self._loop)

        app = build_app(call, self._d, self.token, self.port)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                server_header=False, date_header=False, loop="asyncio",
                                http="h11", ws="none", timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name="ragd-web", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started and self._thread.is_alive():
            if time.monotonic() > deadline:
                raise RagdError("the window's server did not start",
                                "see the daemon log; search over MCP is not affected")
            time.sleep(0.01)
        self.started.set()

    def _serve(self) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[self._sock]))
        except Exception:
            log.exception("the window's server stopped")

    def stop(self, timeout: float = 5.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self._sock.close()
