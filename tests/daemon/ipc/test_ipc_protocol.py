"""The protocol module: framing, message shapes, errors both ways, params validation."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragd.daemon import errors
from ragd.daemon.errors import InvalidArgument, NotFound, ProtocolMismatch, RagdError
from ragd.daemon.ipc import protocol as p
from ragd.daemon.ipc.notes_params import NOTE_METHODS


def test_methods_and_version() -> None:
    assert p.PROTOCOL_VERSION == 1
    known = ("hello", "status", "search", "list_collections", "collection_info", "index",
             "pause", "resume", "shutdown", "subscribe", "skipped", "convert", "doc_store_info",
             *NOTE_METHODS, "code_search", "code_context", "code_explain", "code_status",
             "code_docs", "code_backlog", *(f"concepts_{m}" for m in (
                 "catalog_search", "broad_chunks_search", "chunks_search", "concept_search",
                 "extract_concepts", "source_concepts", "concept_sources", "category_search",
                 "list_categories", "list_concepts_in_category", "status")))
    assert known == p.METHODS


def test_encode_is_one_utf8_line_even_with_newlines_inside() -> None:
    frame = p.encode({"text": "line one\nline two\r\n", "name": "Zürich ✓"})
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1
    assert "Zürich ✓".encode() in frame  # raw UTF-8, not \u escapes
    assert p.decode(frame) == {"text": "line one\nline two\r\n", "name": "Zürich ✓"}


def test_encode_converts_the_daemons_own_types() -> None:
    @dataclass(frozen=True)
    class Hit:
        path: Path
        when: dt.date
        tags: frozenset[str]

    hit = Hit(Path("/v/a.md"), dt.date(2024, 5, 31), frozenset({"x"}))
    assert p.decode(p.encode({"hit": hit})) == {
        "hit": {"path": "/v/a.md", "when": "2024-05-31", "tags": ["x"]}}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), object()])
def test_encode_refuses_what_json_cannot_carry(value: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        p.encode({"x": value})


@pytest.mark.parametrize("frame", [
    b"\xff\xfe{}", b"{", b'{"a": NaN}', b"[" * 100_000, b"1" * 5000, b"",
])
def test_decode_rejects_bad_frames_with_value_or_recursion_error(frame: bytes) -> None:
    with pytest.raises((ValueError, RecursionError)):
        p.decode(frame)


def test_message_helpers() -> None:
    assert p.result_response(3, {"a": 1}) == {"jsonrpc": "2.0", "id": 3, "result": {"a": 1}}
    assert p.error_response("x", p.METHOD_NOT_FOUND, "nope") == {
        "jsonrpc": "2.0", "id": "x", "error": {"code": -32601, "message": "nope"}}
    assert p.notification("progress", {"done": 1}) == {
        "jsonrpc": "2.0", "method": "progress", "params": {"done": 1}}
    assert "id" not in p.request(None, "status")


def test_error_codes() -> None:
    assert (p.PARSE_ERROR, p.INVALID_REQUEST, p.METHOD_NOT_FOUND, p.INVALID_PARAMS,
            p.INTERNAL_ERROR, p.APPLICATION_ERROR, p.PROTOCOL_MISMATCH, p.FRAME_TOO_LARGE) == (
        -32700, -32600, -32601, -32602, -32603, -32000, -32001, -32002)


def test_ragd_error_travels_as_application_error_with_code_hint_and_param() -> None:
    reply = p.error_from_exception(4, InvalidArgument("top_k", "must be positive", "use 10"))
    assert reply["id"] == 4
    assert reply["error"] == {"code": -32000, "message": "top_k: must be positive",
                              "data": {"code": "invalid_argument", "hint": "use 10",
                                       "param": "top_k"}}
    rebuilt = p.exception_from_error(reply["error"])
    assert type(rebuilt) is InvalidArgument
    assert (rebuilt.param, rebuilt.message, rebuilt.hint) == (
        "top_k", "top_k: must be positive", "use 10")


def _error_classes() -> list[type[RagdError]]:
    return [cls for cls in vars(errors).values()
            if isinstance(cls, type) and issubclass(cls, RagdError)
            and cls not in (RagdError, InvalidArgument)]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_ragd_error_is_rebuilt_as_its_own_class(cls: type[RagdError]) -> None:
    about_a_param = issubclass(cls, InvalidArgument)  # constructed with the parameter first
    exc = cls("file_path", "it broke", "do this") if about_a_param else cls("it broke", "do this")
    reply = p.error_from_exception(1, exc)
    rebuilt = p.exception_from_error(reply["error"])
    assert type(rebuilt) is cls
    message = "file_path: it broke" if about_a_param else "it broke"
    assert (rebuilt.message, rebuilt.hint, rebuilt.code) == (message, "do this", cls.code)


def test_protocol_mismatch_uses_its_own_jsonrpc_code() -> None:
    reply = p.error_from_exception(1, ProtocolMismatch("old", p.RESTART_HINT))
    assert reply["error"]["code"] == p.PROTOCOL_MISMATCH
    rebuilt = p.exception_from_error(reply["error"])
    assert isinstance(rebuilt, ProtocolMismatch) and rebuilt.hint == p.RESTART_HINT


def test_unexpected_exception_is_internal_error_with_reference_and_no_details() -> None:
    try:
        raise ValueError("secret /home/me/notes path")
    except ValueError as exc:
        reply = p.error_from_exception(9, exc, reference="abcd1234")
    error = reply["error"]
    assert error["code"] == p.INTERNAL_ERROR
    assert "abcd1234" in error["message"] and error["data"]["reference"] == "abcd1234"
    text = json.dumps(reply)
    assert "secret" not in text and "Traceback" not in text
    rebuilt = p.exception_from_error(error)
    assert type(rebuilt) is RagdError and rebuilt.code == "internal"
    assert "abcd1234" in rebuilt.hint


def test_unknown_and_protocol_codes_are_kept_on_the_client_side() -> None:
    rebuilt = p.exception_from_error({"code": -32000, "message": "m",
                                      "data": {"code": "from_the_future", "hint": "h"}})
    assert type(rebuilt) is RagdError and rebuilt.code == "from_the_future"
    too_large = p.exception_from_error({"code": p.FRAME_TOO_LARGE, "message": "big"})
    assert too_large.code == "frame_too_large"
    missing = p.exception_from_error({"code": p.METHOD_NOT_FOUND, "message": "no"})
    assert isinstance(missing, p.MethodNotFound)
    assert p.exception_from_error({}).message == "unknown error"
    assert p.exception_from_error({"code": -32000, "message": "x", "data": "junk"}).message == "x"


def test_not_found_round_trip_keeps_class() -> None:
    rebuilt = p.exception_from_error(p.error_from_exception(1, NotFound("gone", "h"))["error"])
    assert isinstance(rebuilt, NotFound)


# -- request shapes --------------------------------------------------------------------------


def test_parse_request_accepts_requests_and_notifications() -> None:
    req = p.parse_request({"jsonrpc": "2.0", "id": 1, "method": "status"})
    assert req == p.Request(1, "status", {}, False)
    note = p.parse_request({"jsonrpc": "2.0", "method": "status", "params": {"a": 1}})
    assert note.is_notification and note.params == {"a": 1}


@pytest.mark.parametrize(("msg", "code", "rid"), [
    ([{"jsonrpc": "2.0", "id": 1, "method": "status"}], p.INVALID_REQUEST, None),
    (42, p.INVALID_REQUEST, None),
    ("status", p.INVALID_REQUEST, None),
    (None, p.INVALID_REQUEST, None),
    ({"jsonrpc": "2.0", "id": 7}, p.INVALID_REQUEST, 7),
    ({"jsonrpc": "2.0", "id": 7, "method": 5}, p.INVALID_REQUEST, 7),
    ({"jsonrpc": "2.0", "id": 7, "method": ""}, p.INVALID_REQUEST, 7),
    ({"jsonrpc": "1.0", "id": 7, "method": "status"}, p.INVALID_REQUEST, 7),
    ({"id": 7, "method": "status"}, p.INVALID_REQUEST, 7),
    ({"jsonrpc": "2.0", "id": True, "method": "status"}, p.INVALID_REQUEST, None),
    ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "status"}, p.INVALID_REQUEST, None),
    ({"jsonrpc": "2.0", "id": 7, "method": "status", "params": "x"}, p.INVALID_REQUEST, 7),
    ({"jsonrpc": "2.0", "id": 7, "method": "status", "params": [1]}, p.INVALID_PARAMS, 7),
])
def test_parse_request_rejects_wrong_shapes(msg: object, code: int, rid: object) -> None:
    with pytest.raises(p.BadRequest) as caught:
        p.parse_request(msg)
    reply = caught.value.response
    assert reply["error"]["code"] == code
    assert reply["id"] == rid


# -- params ----------------------------------------------------------------------------------


def test_search_params_defaults() -> None:
    params = p.parse_params("search", {"query": "kafka"})
    assert params.model_dump() == {
        "query": "kafka", "collection": None, "top_k": 10, "source_type": None,
        "date_from": None, "date_to": None, "sender": None, "author": None,
        "mode": "hybrid", "folder": None, "tags": [], "explain": False, "searches": []}


def test_parse_params_is_idempotent() -> None:
    first = p.parse_params("search", {"query": "q", "tags": ["a"], "top_k": 3})
    assert p.parse_params("search", first.model_dump()) == first


@pytest.mark.parametrize(("method", "params", "field", "words"), [
    ("search", {}, "query", "is required"),
    ("search", {"query": "q", "top_k": "ten"}, "top_k", "integer"),
    ("search", {"query": "q", "topk": 5}, "topk", "not a parameter"),
    ("search", {"query": "q", "tags": ["a", 3]}, "tags.1", "string"),
    ("index", {"wait": "yes"}, "wait", "boolean"),
    ("collection_info", {}, "collection", "is required"),
    ("hello", {"client": "x"}, "protocol", "is required"),
])
def test_parse_params_names_the_field(method: str, params: dict, field: str, words: str) -> None:
    with pytest.raises(p.InvalidParams) as caught:
        p.parse_params(method, params)
    exc = caught.value
    assert isinstance(exc, InvalidArgument)
    assert exc.param == field
    assert words in exc.message
    assert exc.hint.startswith(f"{method} accepts:")


def test_invalid_params_travel_as_32602_and_come_back() -> None:
    with pytest.raises(p.InvalidParams) as caught:
        p.parse_params("search", {"query": 1})
    reply = p.error_from_exception(2, caught.value)
    assert reply["error"]["code"] == p.INVALID_PARAMS
    assert reply["error"]["data"]["param"] == "query"
    rebuilt = p.exception_from_error(reply["error"])
    assert isinstance(rebuilt, p.InvalidParams) and rebuilt.param == "query"
    assert rebuilt.message == caught.value.message


def test_hello_ignores_extra_members_and_free_form_methods_pass_through() -> None:
    hello = p.parse_params("hello", {"client": "c", "protocol": 1, "features": ["x"]})
    assert (hello.client, hello.protocol) == ("c", 1)
    assert p.parse_params("status", {"verbose": True}) == {"verbose": True}
    assert p.parse_params("pause", None) == {}


def test_models_are_reachable_by_name() -> None:
    assert p.SearchParams is p.param_model("search")
    assert p.IndexParams(path="/x").wait is True
    with pytest.raises(AttributeError):
        _ = p.NoSuchThing


def test_lone_surrogates_in_escapes_become_replacement_characters() -> None:
    frame = b'{"method":"search","params":{"query":"a \\ud800 b","tags":["\\udfff"]}}\n'
    msg = p.decode(frame)
    assert msg["params"]["query"] == "a \ufffd\ufffd\ufffd b"
    assert msg["params"]["tags"][0].encode("utf-8")  # encodable again
    assert p.decode(b'{"q":"\\ud83d\\ude00"}') == {"q": "\U0001f600"}  # a real pair stays
