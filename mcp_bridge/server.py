"""`ragd-mcp`: the stdio MCP server that desktop AI clients launch.

A thin translation layer: MCP tool calls become IPC calls to the one ragd daemon, whose answers
come back as structured content plus a JSON text block. It imports the MCP SDK and the light
IPC client only, never the indexing stack, so it starts in about the SDK's own import time.

The handshake and tools/list never touch the daemon. Once they are answered, a background
thread makes sure a daemon runs (starting one if needed) so that the first tool call finds it
ready. Every failure reaches the client as a tool error (``isError``) that says what happened
and what to do; logs go to stderr, because stdout carries the protocol.

Built on the SDK's low-level ``Server`` rather than ``FastMCP``: both import the same modules
(``import mcp`` pulls in FastMCP either way), and measured here the difference in a cold start
is within noise (FastMCP spends ~10 ms more building pydantic models for its tools). The
low-level server lets the schemas match the tool reference exactly, and the checks in
``tools`` name the parameter and the fix where pydantic's messages would not.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from ragd.daemon import __version__
from ragd.daemon.errors import (
    DaemonUnavailable,
    InvalidArgument,
    NotFound,
    ProtocolMismatch,
    RagdError,
)
from ragd.mcp_bridge import offer
from ragd.mcp_bridge.coerce import coerce_arguments
from ragd.mcp_bridge.flags import add_http_flags
from ragd.mcp_bridge.link import CallTimedOut, DaemonLink
from ragd.mcp_bridge.tools import INSTRUCTIONS, TOOLSETS, ToolSpec, as_text, select_tools
from ragd.mcp_bridge.tools_code import is_error
from ragd.mcp_bridge.tools_concepts import is_concept_error

log = logging.getLogger(__name__)

DEFAULT_TOOLSETS = ("search", "index", "notes")
WARM_UP_DELAY_S = 1.0  # for a client that never lists the tools


# -- configuration ------------------------------------------------------------------------------
def configured_mcp() -> Any:
    """The ``[mcp]`` settings (config.toml, RAGD_MCP_*); the defaults if it is unreadable."""
    from ragd.daemon.settings.config import McpConfig, load_config
    from ragd.daemon.settings.paths import resolve_paths

    try:
        # The daemon writes the default config file; a client launching us should not.
        return load_config(resolve_paths(), write_default=False).mcp
    except RagdError as exc:
        log.error("cannot read the configuration, offering the default tools: %s", exc)
        return McpConfig()


def configured_toolsets() -> list[str]:
    """``mcp.toolsets`` from config.toml / RAGD_MCP_TOOLSETS; the defaults if it is unreadable."""
    return list(configured_mcp().toolsets)


def offered_toolsets(mcp: Any) -> list[str]:
    """The toolsets to offer (``ragd.mcp_bridge.offer`` says which and why)."""
    return [name for name, _ in offer.offered_toolsets(mcp)]


def choose_tools(toolsets: Sequence[str], mcp: Any = None) -> list[ToolSpec]:
    """The tools to offer: the toolsets' tools, write tools only with ``[mcp] writes``, then
    ``tools_allow`` / ``tools_deny`` (decision 0028)."""
    specs, unknown = select_tools(list(toolsets), writes=bool(getattr(mcp, "writes", False)),
                                  allow=getattr(mcp, "tools_allow", ()),
                                  deny=getattr(mcp, "tools_deny", ()))
    for name in unknown:
        log.warning("unknown MCP toolset %r in mcp.toolsets (known: %s); ignoring it",
                    name, ", ".join(TOOLSETS))
    if not specs:
        log.warning("mcp.toolsets %s selects no tools: this server offers none",
                    list(toolsets))
    return specs


# -- errors -------------------------------------------------------------------------------------
def _sentence(text: str) -> str:
    text = text.strip().rstrip(".")
    return text[:1].upper() + text[1:] + "." if text else ""


_MARK = "ragd-param-mark-"


def tool_param(spec: ToolSpec | None, param: str) -> str:
    """The tool's own name for the daemon parameter ``param``: reference 001's ``note_path``
    for the daemon's ``path``, its ``root_path`` for ``folder``. Read from the tool's own
    argument mapping (each string argument passed a marker), so no second table can drift."""
    props = (spec.input_schema.get("properties") or {}) if spec is not None else {}
    if spec is None or param in props:
        return param
    marked = {name: _MARK + name for name, prop in props.items()
              if "string" in json.dumps(prop)}
    try:
        mapped = spec.parse(marked)
    except Exception:  # a mapping that needs real values: keep the daemon's name
        return param
    value = mapped.get(param)
    return value[len(_MARK):] if isinstance(value, str) and value.startswith(_MARK) else param


def error_text(tool: str, exc: RagdError, spec: ToolSpec | None = None) -> str:
    """What happened and what to do, in words a model can pass on to the user."""
    hint, fix = exc.hint, "What to do"
    # The code names the kind of failure (outside_reach, hidden_path, library_unreadable, ...)
    # where the class alone does not.
    code = f" ({exc.code})" if exc.code not in ("error", InvalidArgument.code) else ""
    if isinstance(exc, InvalidArgument):
        prefix = f"{exc.param}: "
        detail = exc.message[len(prefix):] if exc.message.startswith(prefix) else exc.message
        head = (f"Invalid argument `{tool_param(spec, exc.param)}` for {tool}{code}: "
                f"{detail.rstrip('.')}.")
        fix = "Fix"
    elif isinstance(exc, NotFound) and spec is not None and spec.method != "search":
        # The daemon's NotFound is about the collection named in the call.
        head = f"Invalid argument `collection` for {tool}: {exc.message.rstrip('.')}."
        fix = "Fix"
    elif isinstance(exc, CallTimedOut) and spec is not None and spec.method == "index":
        head = (f"{tool} stopped waiting after {exc.timeout:g} s, but the daemon is still "
                "indexing in the background.")
        hint = ("new results become searchable as indexing goes on (rag_search reports "
                "indexing.active); call rag_index again later to get the summary")
    elif isinstance(exc, CallTimedOut):
        head = f"{tool} timed out: {exc.message}."
        hint = ("the daemon may still be loading its model or busy; try again in a moment, and "
                "if it keeps happening check `ragd status` and the daemon's log")
    elif isinstance(exc, ProtocolMismatch):
        head = (f"{tool} failed: this ragd-mcp and the running ragd daemon are different "
                f"versions ({exc.message}).")
    elif isinstance(exc, DaemonUnavailable):
        head = f"{tool} could not reach ragd's background service (the daemon): {exc.message}."
    else:
        head = f"{tool} failed{code}: {exc.message.rstrip('.')}."
    return head + (f" {fix}: {_sentence(hint)}" if hint else "")


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                isError=True)


# -- the server ---------------------------------------------------------------------------------
def mcp_tool(spec: ToolSpec) -> types.Tool:
    # No outputSchema: the SDK's Python client validates structured content against it on every
    # call and re-checks the schema itself each time, which measured +21 ms per rag_search
    # (+7 ms with a minimal schema) against ~1 ms without. The schemas in `tools` stay the
    # executable description of the results, checked by the tests.
    return types.Tool(
        name=spec.name, title=spec.title, description=spec.description,
        inputSchema=spec.input_schema,
        annotations=types.ToolAnnotations(
            title=spec.title, readOnlyHint=spec.read_only, destructiveHint=spec.destructive,
            idempotentHint=spec.idempotent, openWorldHint=False))


def build_server(specs: Sequence[ToolSpec], link: DaemonLink,
                 on_listed: Callable[[], None] | None = None) -> Server[Any, Any]:
    """A low-level MCP server offering ``specs``, each call answered through ``link``.

    ``on_listed`` is called each time the tool list is asked for.
    """
    server: Server[Any, Any] = Server("ragd", version=__version__, instructions=INSTRUCTIONS)
    by_name = {spec.name: spec for spec in specs}
    listed = [mcp_tool(spec) for spec in specs]

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        if on_listed is not None:
            on_listed()
        return listed

    # validate_input=False: the checks in `tools` give errors that name the parameter and fix.
    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        spec = by_name.get(name)
        if spec is None:
            return _error(f"Unknown tool {name!r}. What to do: use one of "
                          f"{', '.join(by_name) or 'none (no toolset is enabled)'}.")
        token = _progress_token(server)
        if spec.method != "convert":  # answered while the model loads (decision 0032)
            await _say_if_starting(server, link, token)
        if token is None or spec.method != "index":
            return await run_tool(spec, arguments, link)
        return await _with_progress(server, spec, arguments, link, token)

    return server


async def _say_if_starting(server: Server[Any, Any], link: DaemonLink,
                           token: str | int | None) -> None:
    """Before a call that would wait on a starting daemon, tell the client why (an MCP log
    message, and a progress message when the client asked for progress). Checked until the
    daemon has once been seen ready, so a warm bridge adds no round trip."""
    if link.seen_ready:
        return
    try:
        status = await anyio.to_thread.run_sync(
            functools.partial(link.call, "status", {"brief": True}, STATUS_TIMEOUT_S),
            abandon_on_cancel=True)
    except Exception as exc:  # the call itself reports what is wrong
        log.debug("no start-up status: %s", exc)
        return
    if not isinstance(status, dict) or status.get("state") != "starting":
        link.seen_ready = True
        return
    message = (f"ragd is starting ({status.get('phase') or 'loading'}, "
               f"{float(status.get('starting_s') or 0):.0f} s so far): this call waits until "
               "it is ready")
    session = server.request_context.session
    try:
        await session.send_log_message(level="info", data=message, logger="ragd")
        if token is not None:
            await session.send_progress_notification(token, 0.0, None, message)
    except Exception as exc:  # a client that hung up: the call fails on its own
        log.debug("could not tell the client: %s", exc)


async def run_tool(spec: ToolSpec, arguments: dict[str, Any],
                   link: DaemonLink) -> types.CallToolResult:
    """Check the arguments, call the daemon on a worker thread, shape the answer."""
    try:
        params = spec.parse(coerce_arguments(spec.input_schema, arguments or {}))
        call = functools.partial(link.call, spec.method, params, spec.timeout)
        # abandon_on_cancel: a client's cancellation returns at once; the thread finishes alone.
        answer = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        meta = pending_meta(answer)
        if isinstance(answer, dict) and PENDING_KEY in answer:
            answer = {k: v for k, v in answer.items() if k != PENDING_KEY}
        value = spec.shape(answer)
    except RagdError as exc:
        log.info("%s: %s", spec.name, exc)
        return _error(error_text(spec.name, exc, spec))
    except Exception as exc:
        reference = os.urandom(3).hex()
        log.exception("%s failed unexpectedly (reference %s)", spec.name, reference)
        return _error(f"{spec.name} failed with an internal error ({type(exc).__name__}, "
                      f"reference {reference}). What to do: try again; if it persists, report "
                      "it with the ragd-mcp log (the client's MCP server log) and that reference.")
    return types.CallToolResult(content=[types.TextContent(type="text", text=as_text(value))],
                                structuredContent=spec.structured(value), _meta=meta,
                                isError=(spec.toolset == "code" and is_error(value)) or (
                                    spec.toolset == "concepts" and is_concept_error(value)))


STATUS_TIMEOUT_S = 5.0  # the start-up check before a call; the call has its own timeout
# Where a daemon answer whose contract has no place for it carries the indexing state (the
# code tools'); the bridge moves it to the result's _meta.
PENDING_KEY = "_indexing"


def pending_meta(answer: Any) -> dict[str, Any] | None:
    """The MCP result's ``_meta`` while work is pending (issue 37): ``index_stale`` (as
    reference 004 names it) and the daemon's ``indexing`` (sources to go, chunks whose vectors
    are still to come), for every tool, above all those whose result is a bare list. None
    when nothing is pending, so an up-to-date answer carries no signal."""
    if not isinstance(answer, dict):
        return None
    indexing = answer.get("indexing") or answer.get(PENDING_KEY)
    active = isinstance(indexing, dict) and bool(indexing.get("active"))
    if not active and not answer.get("pending"):
        return None
    meta: dict[str, Any] = {"index_stale": True}
    if isinstance(indexing, dict):
        meta["indexing"] = dict(indexing)
    if answer.get("pending"):
        meta["pending"] = answer["pending"]
    return meta


# -- progress of rag_index ----------------------------------------------------------------------
def _progress_token(server: Server[Any, Any]) -> str | int | None:
    try:
        meta = server.request_context.meta
    except LookupError:
        return None
    return meta.progressToken if meta is not None else None


async def _with_progress(server: Server[Any, Any], spec: ToolSpec, arguments: dict[str, Any],
                         link: DaemonLink, token: str | int) -> types.CallToolResult:
    """Run rag_index while forwarding the daemon's progress events as MCP progress."""
    session = server.request_context.session
    result: types.CallToolResult | None = None
    collection = arguments.get("collection") if isinstance(arguments, dict) else None
    async with anyio.create_task_group() as tg:
        tg.start_soon(_forward_progress, link, session, token, collection)
        result = await run_tool(spec, arguments, link)
        tg.cancel_scope.cancel()
    assert result is not None
    return result


async def _forward_progress(link: DaemonLink, session: Any, token: str | int,
                            collection: Any) -> None:
    from ragd.daemon.ipc.async_client import AsyncClient

    # The index call itself opens the connection (and starts the daemon if needed).
    with anyio.move_on_after(60):
        while link.address is None:
            await anyio.sleep(0.05)
    if link.address is None:
        return
    try:
        client = await AsyncClient.connect(link.address, client_name="ragd-mcp-progress",
                                           timeout=10)
    except RagdError as exc:
        log.debug("no progress for rag_index: %s", exc)
        return
    last = -1
    try:
        await client.subscribe()
        async for event in client.events():
            if event.get("type") != "progress" or event.get("collection") not in (collection,
                                                                                  None):
                continue
            done, total = int(event.get("done") or 0), int(event.get("total") or 0)
            if done <= last:
                continue  # MCP progress must grow; a new phase restarts the daemon's count
            last = done
            await session.send_progress_notification(
                token, float(done), float(total) if total else None,
                f"indexing {event.get('collection') or collection}: {done}/{total} files")
    except RagdError as exc:
        log.debug("progress forwarding stopped: %s", exc)
    finally:
        with anyio.CancelScope(shield=True):
            await client.close()


# -- entry points -------------------------------------------------------------------------------
async def serve(specs: Sequence[ToolSpec], link: DaemonLink) -> None:
    """Serve MCP on stdin/stdout until the client closes them."""
    listed = anyio.Event()
    server = build_server(specs, link, on_listed=listed.set)
    options = server.create_initialization_options()
    async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as tg:
        tg.start_soon(_warm_up_after, listed, link)
        await server.run(read_stream, write_stream, options)
        tg.cancel_scope.cancel()


async def _warm_up_after(listed: anyio.Event, link: DaemonLink) -> None:
    # Look for (or start) the daemon once the handshake and tools/list are answered: neither
    # waits for it, nor competes with a starting daemon for the CPU. The client then takes
    # seconds to send its first tool call, time enough to connect, or to start a daemon.
    with anyio.move_on_after(WARM_UP_DELAY_S):
        await listed.wait()
    link.start_warm_up()


def _setup_logging(verbose: bool) -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                            format="ragd-mcp %(levelname)s %(name)s: %(message)s")
    logging.getLogger("ragd.mcp_bridge").setLevel(logging.DEBUG if verbose else logging.INFO)


def run(verbose: bool = False) -> int:
    _setup_logging(verbose)
    settings = configured_mcp()
    specs = choose_tools(offered_toolsets(settings), settings)
    link = DaemonLink()
    log.info("ragd-mcp %s serving %s", __version__, ", ".join(s.name for s in specs) or "no tools")
    try:
        anyio.run(serve, specs, link)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        pass  # the client went away mid-reply
    finally:
        link.close()  # wakes any call still waiting, so the process can exit
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """`ragd mcp`: the same server as `ragd-mcp` (`--http`: ``ragd.mcp_bridge.http``)."""
    from ragd.mcp_bridge import http

    flag = http.check_options(args)
    if flag is not None:
        raise InvalidArgument(flag, "only applies with --http", f"add --http, or leave {flag} out")
    if getattr(args, "http", False):
        return http.run_http(verbose=bool(getattr(args, "verbose", False)), port=args.port,
                             bind=args.bind, new_token=bool(args.new_token))
    return run(verbose=bool(getattr(args, "verbose", False)))


def main(argv: Sequence[str] | None = None) -> int:
    """`ragd-mcp`: what an MCP client launches (see `ragd mcp-config`)."""
    parser = argparse.ArgumentParser(
        prog="ragd-mcp", description="ragd's MCP server on stdio, for desktop AI clients "
        "(--http: over Streamable HTTP, for clients that only speak HTTP). "
        "Tools come from config.toml [mcp] toolsets (or RAGD_MCP_TOOLSETS).")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    parser.add_argument("--version", action="version", version=f"ragd-mcp {__version__}")
    add_http_flags(parser)
    args = parser.parse_args(argv)
    if args.http:
        from ragd.mcp_bridge import http

        return http.main_http(args)
    if args.port is not None or args.bind is not None or args.new_token:
        parser.error("--port, --bind and --new-token apply only with --http")
    return run(verbose=args.verbose)


if __name__ == "__main__":
    sys.exit(main())
