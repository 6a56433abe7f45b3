"""`ragd mcp --http` (`ragd-mcp --http`): the stdio server's tools over Streamable HTTP.

For MCP clients that only speak HTTP (the Streamable HTTP transport of the 2025-06-18 spec).
The same tools, toolsets and daemon link as on stdio (``ragd.mcp_bridge.server``), served at
``/mcp`` by the SDK's ``StreamableHTTPSessionManager`` in a small Starlette app run by uvicorn.
Decision 0052 says why it is guarded as it is:

- Every request carries ``Authorization: Bearer <token>``, compared in constant time; the
  token is ``mcp.http_token`` in the OS keyring (``ragd.daemon.settings.secrets``), created
  on the first start, and ``RAGD_MCP_HTTP_TOKEN`` overrides it. Without a token: 401, with a
  JSON body that says where the token is.
- A web page cannot reach it through DNS rebinding: the ``Host`` header must name the bound
  address (loopback names when bound to loopback), and a request with an ``Origin`` header
  must come from such a host too; otherwise 403. No CORS headers are ever sent.
- It listens on loopback unless told otherwise (``[http] bind``, ``--bind``); any other
  address is refused when no lasting token can be had, and warned about when used.

Like the stdio bridge it imports no part of the indexing stack (starlette and uvicorn are
the SDK's own dependencies).
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import socket
import sys
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ragd.daemon.errors import ConfigError, RagdError
from ragd.daemon.settings.secrets import MCP_HTTP_TOKEN

log = logging.getLogger(__name__)

TOKEN_ENV = "RAGD_MCP_HTTP_TOKEN"
PATH = "/mcp"
SHORT_TOKEN = 16  # characters; a token below this is warned about
GRACE_S = 2  # at shutdown, how long open streams may finish before they are cut

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
BIND_HINT = ("use 127.0.0.1 (this machine only, the default), a LAN address of this machine, "
             "or 0.0.0.0 (every interface)")
SHOW_HINT = f"`ragd secret show {MCP_HTTP_TOKEN}` prints it"


# -- the rules: addresses, hosts, origins, tokens -----------------------------------------------
def parse_bind(bind: str) -> IPAddress:
    """The address to listen on: an IP address (``localhost`` is 127.0.0.1), else ConfigError."""
    text = bind.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if text.lower() == "localhost":
        text = "127.0.0.1"
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise ConfigError(f"http.bind: {bind!r} is not an IP address", BIND_HINT) from None


def host_name(header: str | None) -> str | None:
    """The host of a ``Host`` header, lower case, without its port (``[::1]:8766`` -> ``::1``);
    None when it is missing or malformed."""
    value = (header or "").strip().lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1:] if end > 0 else "?"
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        return value[1:end]
    if value.count(":") > 1:  # an IPv6 address must be in brackets
        return None
    name, colon, port = value.partition(":")
    if colon and not port.isdigit():
        return None
    return name.rstrip(".") or None


def machine_names() -> frozenset[str]:
    """This machine's own names (``box``, ``box.local``), accepted in ``Host`` when bound
    beyond loopback. No DNS lookup: only what the system calls itself."""
    full = socket.gethostname().strip().lower().rstrip(".")
    short = full.split(".")[0]
    return frozenset(n for n in (full, short, f"{short}.local" if short else "") if n)


def allowed_host(name: str | None, bind: IPAddress, names: Collection[str] = ()) -> bool:
    """Whether a request naming host ``name`` may be answered by a server bound to ``bind``.

    Loopback (``localhost``, ``127.0.0.1``, ``::1``) always; bound beyond loopback, also the
    bound address (any IP address when bound to every interface) and this machine's ``names``.
    A DNS name of anyone else never: that is how a rebinding page would come."""
    if not name:
        return False
    if name == "localhost":
        return True
    try:
        address: IPAddress | None = ipaddress.ip_address(name)
    except ValueError:
        address = None
    if address is not None:
        if address.is_loopback:
            return True
        if bind.is_loopback:
            return False
        return bind.is_unspecified or address == bind
    return not bind.is_loopback and name in names


def allowed_origin(origin: str | None, bind: IPAddress, names: Collection[str] = ()) -> bool:
    """No ``Origin`` (a client that is not a browser) is allowed; otherwise it must be an
    http(s) origin whose host ``allowed_host`` accepts. ``null`` and other schemes are not."""
    if origin is None:
        return True
    try:
        parts = urlsplit(origin.strip())
        hostname = parts.hostname
    except ValueError:  # "http://[::1": malformed
        return False
    if parts.scheme not in ("http", "https"):
        return False
    return allowed_host(hostname, bind, names)


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    scheme, _, value = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


def token_matches(header: str | None, token: str) -> bool:
    given = bearer(header)
    # compare_digest takes as long whatever the bytes: the time says nothing of the token.
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def listen_url(bind: IPAddress, port: int) -> str:
    host = f"[{bind}]" if bind.version == 6 else str(bind)
    return f"http://{host}:{port}{PATH}"


# -- the token ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Token:
    value: str
    where: str  # where it is kept, in words
    created: bool  # made just now
    lasting: bool  # False: made for this run only (no store to keep it in)


def resolve_token(bind: IPAddress, *, new: bool = False,
                  env: Mapping[str, str] | None = None) -> Token:
    """The bearer token: RAGD_MCP_HTTP_TOKEN, else the stored one, else a new one, stored.

    Where no store works (no keyring, no RAGD_SECRETS_FILE): on loopback a token for this run
    only; on any other address a ConfigError, since nothing could keep a token to give to a
    client."""
    from ragd.daemon.settings import secrets as store_secrets

    env = os.environ if env is None else env
    given = env.get(TOKEN_ENV, "").strip()
    if given:
        if new:
            raise ConfigError(f"--new-token: {TOKEN_ENV} is set, and it overrides any stored "
                              "token", f"unset {TOKEN_ENV} to use --new-token, or give it the "
                              "new value yourself")
        return Token(given, f"the environment variable {TOKEN_ENV}", False, True)
    try:
        store = store_secrets.open_store(env)
        current = None if new else store.get(MCP_HTTP_TOKEN)
        if current:
            return Token(current, store.describe(), False, True)
        value = secrets.token_urlsafe(32)
        store.set(MCP_HTTP_TOKEN, value)
        return Token(value, store.describe(), True, True)
    except ConfigError as exc:
        if not bind.is_loopback:
            raise ConfigError(
                f"refusing to serve MCP over HTTP on {bind}, which reaches beyond this "
                f"machine, without a lasting bearer token: {exc.message}",
                f"set {TOKEN_ENV} to a long random value where ragd-mcp runs, or: "
                f"{exc.hint}") from None
        log.warning("no store for the HTTP token (%s): a token for this run only", exc.message)
        return Token(secrets.token_urlsafe(32), "this run only (nothing could keep it: "
                     f"{exc.hint})", True, False)


# -- the guard ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str
    hint: str

    def response(self) -> Response:
        """A JSON error that says what to do; a 401 names the scheme (RFC 6750). No CORS
        headers, ever."""
        headers = {"WWW-Authenticate": 'Bearer realm="ragd"'} if self.status == 401 else None
        body = {"error": self.code, "message": self.message, "hint": self.hint}
        return Response(json.dumps(body), status_code=self.status, headers=headers,
                        media_type="application/json")


TOKEN_HINT = (f"send the header `Authorization: Bearer <token>`; the token is {MCP_HTTP_TOKEN} "
              f"({SHOW_HINT}; {TOKEN_ENV}, where set for the server, overrides it). To choose "
              f"one: `ragd secret set {MCP_HTTP_TOKEN}`; for a new random one: `ragd mcp --http "
              "--new-token`; then restart the server and update the client's config")


class Guard:
    """Host, then Origin, then the bearer token, before anything reaches the MCP transport."""

    def __init__(self, app: ASGIApp, *, token: str, bind: IPAddress,
                 names: Collection[str] = ()) -> None:
        self.app, self.token, self.bind, self.names = app, token, bind, frozenset(names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # websockets: none are served
            await send({"type": "websocket.close", "code": 1008})
            return
        refused = self.check(Headers(scope=scope))
        if refused is not None:
            client = scope.get("client")
            log.warning("refused %s %s from %s: %s", scope.get("method"), scope.get("path"),
                        client[0] if client else "?", refused.message)
            await refused.response()(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def check(self, headers: Headers) -> Refusal | None:
        host = headers.get("host")
        if not allowed_host(host_name(host), self.bind, self.names):
            return Refusal(403, "forbidden_host", f"Host {host!r} is not this server's address",
                           f"connect to {self._where()}: other names are refused so that a web "
                           "page cannot reach the tools through DNS rebinding")
        origin = headers.get("origin")
        if not allowed_origin(origin, self.bind, self.names):
            return Refusal(403, "forbidden_origin", f"requests from the web origin {origin!r} "
                           "are refused", "ragd-mcp answers MCP clients, not web pages: a "
                           "client sends no Origin header, or one naming this server's address")
        authorization = headers.get("authorization")
        if not token_matches(authorization, self.token):
            what = ("no bearer token" if bearer(authorization) is None
                    else "the bearer token is not this server's")
            return Refusal(401, "unauthorized", f"{what}: every request to ragd-mcp over "
                           "HTTP needs one", TOKEN_HINT)
        return None

    def _where(self) -> str:
        if self.bind.is_loopback:
            return "127.0.0.1, [::1] or localhost"
        if self.bind.is_unspecified:
            return "an IP address of this machine, its name, or localhost"
        return f"{self.bind}, this machine's name, or localhost"


class _Transport:
    """The session manager as an ASGI app (a bound method would be taken for an endpoint)."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.manager.handle_request(scope, receive, send)


def build_app(server: Server[Any, Any], token: str, bind: IPAddress,
              names: Collection[str] = (),
              on_ready: Callable[[], None] | None = None) -> Starlette:
    """The Starlette app: ``/mcp`` served by a stateful session manager (SSE answers, so
    rag_index can report progress), behind the Guard. ``on_ready`` runs once it serves."""
    manager = StreamableHTTPSessionManager(app=server)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            if on_ready is not None:
                on_ready()
            yield

    return Starlette(routes=[Route(PATH, endpoint=_Transport(manager))],
                     middleware=[Middleware(Guard, token=token, bind=bind, names=names)],
                     lifespan=lifespan)


# -- serving ------------------------------------------------------------------------------------
def configured_http() -> Any:
    """The ``[http]`` settings (config.toml, RAGD_HTTP_*). Unlike the stdio server's
    ``[mcp]``, an unreadable config is an error: this one decides who can connect."""
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    return load_config(resolve_paths(), write_default=False).http


def open_socket(bind: IPAddress, port: int) -> socket.socket:
    """A listening socket, opened here so that a port in use is a clear error and port 0's
    choice is known before the first line is printed."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"http.port: {port} is not a port", "use 1 to 65535 (0: any free one)")
    # proto given: asyncio sets TCP_NODELAY only on sockets that say IPPROTO_TCP, and without
    # it a reply's headers and body wait out a delayed ACK (44 ms a request, measured).
    sock = socket.socket(socket.AF_INET6 if bind.version == 6 else socket.AF_INET,
                         socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        if os.name != "nt":  # on Windows SO_REUSEADDR would let two servers share a port
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((str(bind), port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {listen_url(bind, port)}: {exc.strerror or exc}",
                          "another ragd-mcp --http may be running there; choose another port "
                          "with --port (or [http] port), or stop the other one") from None
    return sock


class QuietSessionEnd(logging.Filter):
    """mcp 1.30 logs a traceback ("Error in standalone SSE writer", ClosedResourceError) each
    time a client ends its session (DELETE) while its GET stream is still open: the normal end
    of a session, not an error. Such a record is dropped; any other is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        import anyio

        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, anyio.ClosedResourceError)
                    and record.getMessage().startswith("Error in standalone SSE writer"))


def _say(text: str) -> None:
    print(f"ragd-mcp: {text}", file=sys.stderr, flush=True)


def started_line(bind: IPAddress, port: int, token: Token, tools: int) -> str:
    """The line printed on start: where, and how a client authenticates."""
    if bind.is_unspecified:
        where = (f"http://<this machine's address>:{port}{PATH} (every interface; here "
                 f"http://127.0.0.1:{port}{PATH})" if bind.version == 4 else
                 f"http://[<this machine's address>]:{port}{PATH} (every interface)")
    else:
        where = listen_url(bind, port)
    if token.where.endswith(TOKEN_ENV):
        how = f"the token is the value of {TOKEN_ENV}"
    elif token.lasting:
        how = f"the token is kept in {token.where}; {SHOW_HINT}"
    else:
        how = f"the token, for {token.where}, is {token.value}"
    return (f"MCP over HTTP at {where}, {tools} tools; clients authenticate with the header "
            f"`Authorization: Bearer <token>`: {how}")


def run_http(*, verbose: bool = False, port: int | None = None, bind: str | None = None,
             new_token: bool = False) -> int:
    """Serve the stdio server's tools over HTTP until interrupted."""
    import uvicorn

    from ragd.mcp_bridge import server as stdio

    stdio._setup_logging(verbose)
    logging.getLogger("mcp.server.streamable_http").addFilter(QuietSessionEnd())
    http = configured_http()
    address = parse_bind(http.bind if bind is None else bind)
    port = http.port if port is None else port
    token = resolve_token(address, new=new_token)
    settings = stdio.configured_mcp()
    specs = stdio.choose_tools(stdio.offered_toolsets(settings), settings)
    if len(token.value) < SHORT_TOKEN:
        log.warning("the HTTP token is only %d characters long: a longer one is harder to "
                    "guess (`ragd mcp --http --new-token` makes one)", len(token.value))
    sock = open_socket(address, port)
    port = sock.getsockname()[1]
    link = stdio.DaemonLink()

    def ready() -> None:
        if token.created and token.lasting:
            _say(f"created a new bearer token for MCP over HTTP, kept in {token.where}")
        _say(started_line(address, port, token, len(specs)))
        if not address.is_loopback:
            writes = " and change your notes" if getattr(settings, "writes", False) else ""
            _say(f"warning: listening on {address}, beyond this machine: whoever has the "
                 f"token can use these tools over the network (search and read what ragd "
                 f"indexes{writes}), and plain HTTP carries the token and the answers "
                 "unencrypted. Use it on a network you trust, or keep 127.0.0.1 and tunnel "
                 "(ssh -L)")
        # A long-running server: find (or start) the daemon now, not at the first call.
        link.start_warm_up()

    app = build_app(stdio.build_server(specs, link), token.value, address,
                    machine_names() if not address.is_loopback else (), on_ready=ready)
    log.info("ragd-mcp serving %s over HTTP", ", ".join(s.name for s in specs) or "no tools")
    config = uvicorn.Config(app, lifespan="on", log_config=None, access_log=False, ws="none",
                            proxy_headers=False, server_header=False,
                            timeout_graceful_shutdown=GRACE_S)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        return 130
    finally:
        link.close()
        sock.close()
    return 0


def check_options(args: Any) -> str | None:
    """The first HTTP-only option given without --http, if any."""
    if getattr(args, "http", False):
        return None
    for flag, value in (("--port", getattr(args, "port", None)),
                        ("--bind", getattr(args, "bind", None)),
                        ("--new-token", getattr(args, "new_token", False) or None)):
        if value is not None:
            return flag
    return None


def main_http(args: Any) -> int:
    """`ragd-mcp --http`: run_http with the parsed flags; a RagdError is printed, exit 1."""
    try:
        return run_http(verbose=bool(getattr(args, "verbose", False)), port=args.port,
                        bind=args.bind, new_token=bool(args.new_token))
    except RagdError as exc:
        print(f"ragd-mcp: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return 1
