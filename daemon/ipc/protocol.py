"""The wire protocol every ragd client shares: JSON-RPC 2.0, one JSON object per line.

A frame is one UTF-8 JSON object followed by ``\\n``. JSON escapes newlines inside strings, so
a raw newline always ends a frame. Every connection opens with ``hello``, which returns the
daemon's version, :data:`PROTOCOL_VERSION` and its capabilities; a client speaking another
protocol version gets :data:`PROTOCOL_MISMATCH`.

Errors keep two layers: the JSON-RPC ``code`` (below) says what kind of failure it was; for
application errors (:data:`APPLICATION_ERROR`) ``data.code`` is the :class:`RagdError` code, so
:func:`exception_from_error` re-raises the same kind of error on the client side.

Light on purpose: the standard library, and pydantic only when a request's params are validated
(the models are built on first use), so that thin clients start fast.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from ragd.daemon.errors import InvalidArgument, PathRefused, ProtocolMismatch, RagdError

PROTOCOL_VERSION = 1
JSONRPC_VERSION = "2.0"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
APPLICATION_ERROR = -32000
PROTOCOL_MISMATCH = -32001
FRAME_TOO_LARGE = -32002

METHODS: tuple[str, ...] = (
    "hello", "status", "search", "list_collections", "collection_info", "index", "pause",
    "resume", "shutdown", "subscribe", "skipped", "convert", "doc_store_info",
)
from ragd.daemon.ipc.notes_params import NOTE_METHODS  # noqa: E402  (decision 0028)

METHODS += NOTE_METHODS
METHODS += ("code_search", "code_context", "code_explain", "code_status", "code_docs",
            "code_backlog")  # reference 002's tools (decision 0030)
METHODS += tuple("concepts_" + m for m in (
    "catalog_search", "broad_chunks_search", "chunks_search", "concept_search",
    "extract_concepts", "source_concepts", "concept_sources", "category_search",
    "list_categories", "list_concepts_in_category", "status"))  # reference 003 (decision 0033)

RESTART_HINT = "restart the daemon: `ragd stop && ragd start`"

# Every client accepts replies up to this size (``ragd.daemon.ipc.client.MAX_REPLY_BYTES``); the
# daemon never sends a bigger frame: such a reply becomes a ``reply_too_large`` error.
MAX_REPLY_BYTES = 64 * 1024 * 1024

# Who a connection speaks for is the name it gives in ``hello``. The command line is the user's
# own hand; every other client (the MCP bridge, whose tool calls come from a language model
# that may be steered by what it reads) gets the reach of an AI client (decision 0023). A
# tool call cannot change it: the bridge says hello itself and its tools have no such
# parameter.
USER_CLIENT = "ragd-cli"


def speaks_for_user(client: str | None) -> bool:
    """Whether a connection that said hello as ``client`` is the user's command line."""
    return client == USER_CLIENT


# Longest accepted parameters, in characters: generous for a person, refused by length before
# anything reads them (a 100,000-character `author` became a LIKE pattern SQLite refused).
MAX_QUERY_CHARS = 200_000  # a pasted page of 20,000 words is a supported query (decision 0019)
MAX_FILTER_CHARS = 1_000  # sender, author, folder, a tag
MAX_NAME_CHARS = 256  # collection, source_type, mode, rebuild, date_from/to
MAX_PATH_CHARS = 4096  # the same as ragd.daemon.settings.policy.MAX_PATH_CHARS
MAX_TAGS = 100
MAX_CONVERT_CHARS = 2_000_000  # the most one convert reply may carry: < 12 MB as JSON
# Typed sub-queries a client writes beside a search's query (qmd's shape; decision 0048): "lex"
# words for the keyword leg, a "vec" paraphrase and a "hyde" answer passage for the semantic one.
SEARCH_TYPES = ("lex", "vec", "hyde")
MAX_SEARCHES = 8  # each at most MAX_QUERY_CHARS


def parse_searches(value: Any) -> list[dict[str, str]]:
    """A search's ``searches``: at most MAX_SEARCHES ``{"type": lex|vec|hyde, "query": text}``,
    each query non-blank and at most MAX_QUERY_CHARS. Returned with the type lower-cased and
    the query trimmed; None is no sub-query. Raises InvalidArgument naming ``searches``."""
    if value is None:
        return []
    example = 'e.g. [{"type": "vec", "query": "a paraphrase of the question"}]'
    if not isinstance(value, list | tuple):
        raise InvalidArgument("searches", f"must be a list, got {type(value).__name__}",
                              f"pass a list of {{type, query}} objects, {example}")
    if len(value) > MAX_SEARCHES:
        raise InvalidArgument("searches", f"has {len(value)} entries; at most {MAX_SEARCHES}",
                              "keep the few phrasings that differ most")
    out: list[dict[str, str]] = []
    for n, entry in enumerate(value, 1):
        where = f"entry {n}"
        if not isinstance(entry, Mapping):
            raise InvalidArgument("searches", f"{where} must be an object, got "
                                  f"{type(entry).__name__}", f"write each entry as {example}")
        extra = sorted(str(k)[:40] for k in entry if k not in ("type", "query"))
        if extra:
            raise InvalidArgument("searches", f"{where} has unknown keys: {', '.join(extra)}",
                                  "an entry has only `type` and `query`")
        kind, text = entry.get("type"), entry.get("query")
        kind = kind.strip().lower() if isinstance(kind, str) else kind
        if kind not in SEARCH_TYPES:
            raise InvalidArgument("searches", f"{where} has type {kind!r:.40}; use one of "
                                  f"{', '.join(SEARCH_TYPES)}",
                                  "lex: keywords for the keyword leg; vec: a paraphrase of the "
                                  "question; hyde: a short passage that answers it")
        if not isinstance(text, str) or not text.strip():
            raise InvalidArgument("searches", f"{where} ({kind}) needs a non-empty string "
                                  "`query`", "give the phrasing as text, or drop the entry")
        if len(text) > MAX_QUERY_CHARS:
            raise InvalidArgument("searches", f"{where} ({kind}) is too long ({len(text):,} "
                                  f"characters; at most {MAX_QUERY_CHARS:,})",
                                  "a sub-query is a phrasing, not a document")
        out.append({"type": kind, "query": text.strip()})
    return out


# The RagdError code a client sees for each protocol-level failure.
_PROTOCOL_CODES = {
    PARSE_ERROR: "parse_error",
    INVALID_REQUEST: "invalid_request",
    METHOD_NOT_FOUND: "method_not_found",
    INVALID_PARAMS: "invalid_argument",
    INTERNAL_ERROR: "internal",
    PROTOCOL_MISMATCH: ProtocolMismatch.code,
    FRAME_TOO_LARGE: "frame_too_large",
}


class InvalidParams(InvalidArgument):
    """A request's params do not fit its method: travels as :data:`INVALID_PARAMS`."""


class MethodNotFound(RagdError):
    """The daemon does not implement the method: travels as :data:`METHOD_NOT_FOUND`."""

    code = "method_not_found"


# -- framing ---------------------------------------------------------------------------------


def _json_default(obj: Any) -> Any:
    # Results are built from frozen dataclasses and pydantic models inside the daemon.
    if hasattr(obj, "__dataclass_fields__") and not isinstance(obj, type):
        import dataclasses  # not at the top: clients never encode dataclasses

        return dataclasses.asdict(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if hasattr(obj, "isoformat"):  # date, datetime, time
        return obj.isoformat()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def encode(obj: Any) -> bytes:
    """One frame: compact UTF-8 JSON and a newline. Raises ``ValueError``/``TypeError``."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                      default=_json_default)
    return text.encode("utf-8") + b"\n"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def decode(frame: bytes) -> Any:
    """Parse one frame (with or without its newline).

    Raises ``ValueError`` for invalid UTF-8, malformed JSON, NaN/Infinity and oversized
    integers, and ``RecursionError`` for absurdly nested input.
    """
    text = frame.decode("utf-8")
    obj = json.loads(text, parse_constant=_reject_constant)
    # An escape can spell a lone surrogate ("\ud800"), which no index, SQL query or reply
    # can encode: such strings get U+FFFD in its place.
    return _without_surrogates(obj) if "\\u" in text else obj


def _without_surrogates(obj: Any) -> Any:
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            return obj.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        return obj
    if isinstance(obj, list):
        return [_without_surrogates(v) for v in obj]
    if isinstance(obj, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in obj.items()}
    return obj


# -- messages --------------------------------------------------------------------------------


def request(id: int | str | None, method: str, params: Mapping[str, Any] | None = None) -> dict:
    """A request; ``id=None`` makes it a notification (no id member, no response)."""
    msg: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "method": method}
    if params is not None:
        msg["params"] = dict(params)
    if id is not None:
        msg["id"] = id
    return msg


def result_response(id: int | str | None, result: Any) -> dict:
    return {"jsonrpc": JSONRPC_VERSION, "id": id, "result": result}


def error_response(id: int | str | None, code: int, message: str,
                   data: Mapping[str, Any] | None = None) -> dict:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = dict(data)
    return {"jsonrpc": JSONRPC_VERSION, "id": id, "error": error}


def notification(method: str, params: Mapping[str, Any] | None = None) -> dict:
    """A server-to-client event (progress, state changes): no id, never answered."""
    return request(None, method, params if params is not None else {})


def new_reference() -> str:
    """A short id that ties an internal error reply to its traceback in the daemon log."""
    return os.urandom(4).hex()


def error_from_exception(id: int | str | None, exc: BaseException,
                         reference: str | None = None) -> dict:
    """The error response for ``exc``.

    A :class:`RagdError` keeps its message, code, hint and (for :class:`InvalidArgument`) the
    parameter. Anything else is a bug: the reply says only "internal error" and a reference
    that the caller should log with the traceback; it never carries the traceback itself.
    """
    if isinstance(exc, RagdError):
        data: dict[str, Any] = {"code": exc.code, "hint": exc.hint}
        if isinstance(exc, InvalidArgument):
            data["param"] = exc.param
        retry = getattr(exc, "retry_after_s", None)  # busy: when to send it again (0043)
        if isinstance(retry, int | float) and not isinstance(retry, bool):
            data["retry_after_s"] = retry
        if isinstance(exc, InvalidParams):
            code = INVALID_PARAMS
        elif isinstance(exc, ProtocolMismatch):
            code = PROTOCOL_MISMATCH
        elif isinstance(exc, MethodNotFound):
            code = METHOD_NOT_FOUND
        else:
            code = APPLICATION_ERROR
        return error_response(id, code, exc.message, data)
    reference = reference or new_reference()
    return error_response(
        id, INTERNAL_ERROR, f"internal error (reference {reference})",
        {"code": "internal", "reference": reference,
         "hint": f"this is a bug in ragd; the daemon log has the details under {reference}"})


def _error_classes() -> dict[str, type[RagdError]]:
    """Every loaded RagdError class by the code it defines itself (parents before children)."""
    found: dict[str, type[RagdError]] = {}
    queue: list[type[RagdError]] = [RagdError]
    while queue:
        cls = queue.pop(0)
        if "code" in cls.__dict__:
            found.setdefault(cls.code, cls)
        queue.extend(cls.__subclasses__())
    return found


def exception_from_error(error: Mapping[str, Any]) -> RagdError:
    """Rebuild the daemon's exception from a response's ``error`` member."""
    raw_data = error.get("data")
    data: Mapping[str, Any] = raw_data if isinstance(raw_data, Mapping) else {}
    message = str(error.get("message") or "unknown error")
    hint = str(data.get("hint") or "")
    rpc_code = error.get("code")
    code = data.get("code") or (_PROTOCOL_CODES.get(rpc_code) if isinstance(rpc_code, int)
                                else None)
    raw_param = data.get("param")
    if rpc_code == INVALID_PARAMS or code == InvalidArgument.code or \
            (isinstance(raw_param, str) and raw_param):
        # An error about a parameter, whatever its code (path_refused, outside_reach, ...).
        param = raw_param if isinstance(raw_param, str) and raw_param else "params"
        # The daemon's message already starts with "param: "; the constructor adds it again.
        prefix = f"{param}: "
        text = message[len(prefix):] if message.startswith(prefix) else message
        known = _error_classes().get(code) if isinstance(code, str) else None
        kind: type[InvalidArgument]
        if rpc_code == INVALID_PARAMS:
            kind = InvalidParams
        elif known is not None and issubclass(known, InvalidArgument):
            kind = known
        else:  # a refusal with a code of its own (outside_reach, not_regular, ...)
            kind = PathRefused
        exc_param = kind(param, text, hint)
        if isinstance(code, str) and code != exc_param.code and rpc_code != INVALID_PARAMS:
            exc_param.code = code
        return exc_param
    if rpc_code == PROTOCOL_MISMATCH:
        return ProtocolMismatch(message, hint or RESTART_HINT)
    if rpc_code == METHOD_NOT_FOUND:
        return MethodNotFound(message, hint)
    cls = _error_classes().get(code) if isinstance(code, str) else None
    exc: RagdError
    try:
        exc = cls(message, hint) if cls is not None else RagdError(message, hint)
    except TypeError:  # a subclass with another constructor
        exc = RagdError(message, hint)
    if isinstance(code, str) and code != exc.code:
        exc.code = code  # keep the daemon's code even when this side lacks the class
    retry = data.get("retry_after_s")
    if isinstance(retry, int | float) and not isinstance(retry, bool):
        exc.retry_after_s = float(retry)  # type: ignore[attr-defined]
    return exc


class Request(NamedTuple):
    """A request that passed :func:`parse_request`; ``id`` is None for a notification."""

    id: int | str | None
    method: str
    params: dict[str, Any]
    is_notification: bool


class BadRequest(Exception):
    """A frame that is not a usable JSON-RPC request; ``response`` is the reply to send."""

    def __init__(self, response: dict) -> None:
        super().__init__(response["error"]["message"])
        self.response = response


def parse_request(msg: Any) -> Request:
    """Check the JSON-RPC shape of a decoded frame. Raises :class:`BadRequest`.

    Only named params (an object) are supported. A valid id is echoed in the error so a
    client can match it; an undetectable one is ``null``, as JSON-RPC requires.
    """
    if isinstance(msg, list):
        raise BadRequest(error_response(None, INVALID_REQUEST,
                                        "batch requests are not supported"))
    if not isinstance(msg, dict):
        raise BadRequest(error_response(None, INVALID_REQUEST,
                                        "a request must be a JSON object"))
    raw_id = msg.get("id")
    id_ok = raw_id is None or (isinstance(raw_id, (int, str)) and not isinstance(raw_id, bool))
    rid = raw_id if id_ok else None
    if not id_ok:
        raise BadRequest(error_response(None, INVALID_REQUEST,
                                        "id must be a string, an integer or null"))
    if msg.get("jsonrpc") != JSONRPC_VERSION:
        raise BadRequest(error_response(rid, INVALID_REQUEST, 'jsonrpc must be "2.0"'))
    method = msg.get("method")
    if not isinstance(method, str) or not method:
        raise BadRequest(error_response(rid, INVALID_REQUEST,
                                        "method must be a non-empty string"))
    params = msg.get("params", {})
    if params is None:
        params = {}
    if isinstance(params, list):
        raise BadRequest(error_from_exception(
            rid, InvalidParams("params", "must be an object (named parameters)")))
    if not isinstance(params, dict):
        raise BadRequest(error_response(rid, INVALID_REQUEST, "params must be an object"))
    return Request(rid, method, params, is_notification="id" not in msg)


# -- params ----------------------------------------------------------------------------------

_MODELS: dict[str, Any] = {}


def _build_models() -> dict[str, Any]:
    # Built on first use: importing pydantic and building the schemas costs a thin client
    # ~0.2 s it never needs, since only the daemon validates params.
    from typing import Annotated, Literal

    from pydantic import BaseModel, ConfigDict, Field

    class _Params(BaseModel):
        # Strict: a JSON client sends real ints and strings; a typo'd field name is an error.
        model_config = ConfigDict(extra="forbid", strict=True)

    Query = Annotated[str, Field(max_length=MAX_QUERY_CHARS)]
    Filter = Annotated[str, Field(max_length=MAX_FILTER_CHARS)]
    Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
    PathText = Annotated[str, Field(max_length=MAX_PATH_CHARS)]

    class SubQueryParams(_Params):
        """One of a search's ``searches`` (SEARCH_TYPES; decision 0048)."""

        type: Literal["lex", "vec", "hyde"]
        query: Query

    class SearchParams(_Params):
        """Search; ``mode`` and ``top_k`` ranges are checked by the search engine."""

        query: Query
        collection: Name | None = None
        top_k: int = 10
        source_type: Name | None = None
        date_from: Name | None = None  # YYYY-MM-DD
        date_to: Name | None = None
        sender: Filter | None = None
        author: Filter | None = None
        mode: Name = "hybrid"
        folder: Filter | None = None
        tags: Annotated[list[Filter], Field(max_length=MAX_TAGS)] = []
        explain: bool = False
        searches: Annotated[list[SubQueryParams], Field(max_length=MAX_SEARCHES)] = []

    class IndexParams(_Params):
        collection: Name | None = None
        path: PathText | None = None  # absolute: the daemon's working directory means nothing
        wait: bool = True
        # With wait: answer after this many seconds with what is done so far, the rest going
        # on in the background (an MCP client's admin call: issue 37). None: until done.
        answer_within_s: Annotated[float, Field(ge=0, le=3600)] | None = None
        rebuild: Name | None = None
        allow_large: bool = False  # lift index.max_files for this project (a terminal's call)

    class SkippedParams(_Params):
        collection: Name | None = None

    class CollectionInfoParams(_Params):
        collection: Name

    class ConvertParams(_Params):
        file_path: PathText  # absolute; where it may lie: ragd.daemon.settings.policy.convert_target
        # A long document in pieces (the command line; rag_convert has only file_path).
        offset: Annotated[int, Field(ge=0)] = 0
        max_chars: Annotated[int, Field(ge=1, le=MAX_CONVERT_CHARS)] | None = None

    class DocStoreInfoParams(_Params):
        pass

    class HelloParams(_Params):
        # Extra members are ignored so a newer client still gets a clean protocol mismatch.
        model_config = ConfigDict(extra="ignore", strict=True)
        client: str
        protocol: int

    from ragd.daemon.ipc.notes_params import build_models as note_models

    return {"search": SearchParams, "index": IndexParams,
            "collection_info": CollectionInfoParams, "hello": HelloParams,
            "skipped": SkippedParams, "convert": ConvertParams,
            "doc_store_info": DocStoreInfoParams, **note_models(_Params, Name, Filter, PathText)}


def param_model(method: str) -> Any:
    """The pydantic model for ``method``'s params, or None when they are free-form."""
    if not _MODELS:
        _MODELS.update(_build_models())
    return _MODELS.get(method)


def __getattr__(name: str) -> Any:  # SearchParams, IndexParams, ... on first access
    by_name = {"SearchParams": "search", "IndexParams": "index",
               "CollectionInfoParams": "collection_info", "HelloParams": "hello"}
    if name in by_name:
        return param_model(by_name[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_params(method: str, params: Mapping[str, Any] | None) -> Any:
    """Validate ``params`` for ``method``: its model instance, or a plain dict.

    Raises :class:`InvalidParams` naming the first offending field (``a.b`` for nested ones).
    Idempotent: ``parse_params(m, parse_params(m, p).model_dump())`` gives the same model.
    """
    raw = dict(params or {})
    model = param_model(method)
    if model is None:
        return raw
    from pydantic import ValidationError

    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        field = ".".join(str(p) for p in first["loc"]) or "params"
        message = _describe(first)
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        fields = ", ".join(sorted(model.model_fields))
        raise InvalidParams(field, message, f"{method} accepts: {fields}") from None


def _describe(error: Mapping[str, Any]) -> str:
    kind = error.get("type", "")
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a parameter of this method"
    ctx = error.get("ctx") or {}
    if kind in ("string_too_long", "too_long"):
        # Never the value itself: it may be 100,000 characters long.
        got = error.get("input")
        size = f"{len(got):,} " if isinstance(got, str | list) else ""
        unit = "characters" if kind == "string_too_long" else "items"
        return f"is too long ({size}{unit}; at most {ctx.get('max_length', '?'):,})"
    return str(error.get("msg", "is invalid")).lower()
