"""Arguments a command-line MCP client sent as the wrong JSON type (issue 37 item 7), over the
real input schemas of every tool of every toolset: each rule of ``coerce_arguments``, and the
MCP Inspector CLI's own conversions (0.15.0 and 1.x, ported from its ``tools.js``) followed by
the coercion and the tool's own argument check."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from ragd.daemon.errors import InvalidArgument
from ragd.mcp_bridge.coerce import MAX_DECODED_CHARS, allowed_kinds, coerce_arguments
from ragd.mcp_bridge.tools import ToolSpec, registered_tools

EVERY_TOOL = registered_tools()  # rag_*, notes, omni, vault, code and concepts
BY_NAME = {t.name: t for t in EVERY_TOOL}
PARAMS = [(t, name, prop) for t in EVERY_TOOL
          for name, prop in t.input_schema["properties"].items()]
TYPED = [p for p in PARAMS if allowed_kinds(p[2]) and "string" not in allowed_kinds(p[2])]
TEXT_ONLY = [p for p in PARAMS if allowed_kinds(p[2]) == {"string"}]
TEXT_OR_LIST = [p for p in PARAMS if {"string", "array"} <= allowed_kinds(p[2])]


def _id(param: tuple[ToolSpec, str, Any]) -> str:
    return f"{param[0].name}.{param[1]}"


def _member(prop: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The part of a property's schema that describes ``kind`` (its anyOf member)."""
    for member in prop.get("anyOf", ()):
        if member.get("type") == kind:
            return member
    return prop


def sample(name: str, prop: Mapping[str, Any], kind: str | None = None) -> Any:
    """A valid value of a parameter, of ``kind`` (its first non-null kind by default)."""
    kind = kind or sorted(allowed_kinds(prop))[0]
    part = _member(prop, kind)
    low, high = part.get("minimum"), part.get("maximum")
    if kind == "integer":
        return max(low if low is not None else 1, min(high if high is not None else 3, 3))
    if kind == "number":
        low = low if low is not None else 0
        return low + 0.5 if high is None or low + 0.5 <= high else low
    if kind == "boolean":
        return not prop.get("default", False)
    if kind == "object":
        return {"tags": "pacing"}
    if kind == "array":
        items = part.get("items") or {}
        if "enum" in items:
            return [items["enum"][0], items["enum"][-1]]
        if items.get("type") == "object":
            return [{"type": "lex", "query": "levain"}, {"type": "vec", "query": "a starter"}]
        return ["wild yeast", "dark matter"]
    if "enum" in part:
        return part["enum"][0]
    return {"collection": "notes", "file_path": "/srv/notes/plan.pdf",
            "date_from": "2024-01-31", "date_to": "2024-02-29"}.get(name, "Notes/plan.md")


def required_args(tool: ToolSpec) -> dict[str, Any]:
    schema = tool.input_schema
    return {n: sample(n, schema["properties"][n]) for n in schema.get("required", ())}


def test_the_parameters_cover_every_toolset_and_kind() -> None:
    assert {t.toolset for t in EVERY_TOOL} == {"search", "index", "notes", "omni", "vault",
                                               "code", "concepts"}
    kinds = set().union(*(allowed_kinds(p[2]) for p in TYPED))
    assert kinds == {"object", "array", "integer", "number", "boolean"}
    assert {_id(p) for p in TEXT_OR_LIST} == {"source_concepts.concept",
                                              "concept_sources.concept"}
    assert {"search.filters", "write.frontmatter"} <= {_id(p) for p in TYPED}
    for tool in EVERY_TOOL:  # the samples are valid: each tool's own check accepts them
        tool.parse(required_args(tool))


@pytest.mark.parametrize("param", TYPED, ids=_id)
def test_json_text_of_a_typed_parameter_is_decoded_and_passes_the_check(
        param: tuple[ToolSpec, str, Any]) -> None:
    tool, name, prop = param
    for kind in sorted(allowed_kinds(prop)):
        value = sample(name, prop, kind)
        args = {**required_args(tool), name: json.dumps(value)}
        out = coerce_arguments(tool.input_schema, args)
        assert out[name] == value and type(out[name]) is type(value), (kind, out[name])
        assert args[name] == json.dumps(value), "the caller's arguments were changed"
        tool.parse(out)


@pytest.mark.parametrize("param", [p for p in TYPED if "boolean" in allowed_kinds(p[2])],
                         ids=_id)
def test_booleans_in_any_case(param: tuple[ToolSpec, str, Any]) -> None:
    tool, name, _ = param
    for text, value in (("True", True), (" FALSE ", False), ("true", True), ("false", False)):
        assert coerce_arguments(tool.input_schema, {name: text})[name] is value


@pytest.mark.parametrize("param", TEXT_OR_LIST, ids=_id)
def test_a_list_of_strings_as_text_for_string_or_list(param: tuple[ToolSpec, str, Any]
                                                      ) -> None:
    tool, name, _ = param

    def coerced(value: Any) -> Any:
        return coerce_arguments(tool.input_schema, {name: value})[name]

    assert coerced('["wild yeast", "dark matter"]') == ["wild yeast", "dark matter"]
    assert coerced('  ["one"] ') == ["one"]
    for kept in ("wild yeast", '["wild yeast", 2]', "[[Wild yeast]]", "[unclosed", '"quoted"',
                 "42", "{}"):
        assert coerced(kept) == kept
    assert coerced(["a", "b"]) == ["a", "b"]
    assert (coerced(42), coerced(True)) == ("42", "true")  # a newer CLI decoded concept=42
    tool.parse({name: coerced('["a", "b"]')})


@pytest.mark.parametrize("param", TEXT_ONLY, ids=_id)
def test_numbers_and_booleans_for_a_string_parameter_become_text(
        param: tuple[ToolSpec, str, Any]) -> None:
    tool, name, _ = param
    for value, text in ((42, "42"), (1.5, "1.5"), (-7, "-7"), (True, "true"),
                        (False, "false")):
        assert coerce_arguments(tool.input_schema, {name: value})[name] == text
    for kept in (None, "42", ["a"], {"a": 1}):  # the check reports lists and objects
        assert coerce_arguments(tool.input_schema, {name: kept})[name] == kept


@pytest.mark.parametrize(("tool", "param", "key"), [
    ("rag_search", "query", "query"), ("semantic_search", "query", "query"),
    ("search", "query", "query"), ("rag_read_note", "path", "path"),
    ("read_note", "note_path", "path"), ("search_notes", "pattern", "regex"),
    ("rag_list_notes", "tag", "tag")])
def test_a_number_sent_for_text_is_searched_as_text(tool: str, param: str, key: str) -> None:
    spec = BY_NAME[tool]
    params = spec.parse(coerce_arguments(spec.input_schema, {**required_args(spec),
                                                             param: 42}))
    assert params[key] == "42"


@pytest.mark.parametrize(("tool", "param", "text"), [
    ("semantic_search", "n_results", "abc"), ("semantic_search", "n_results", "2.5"),
    ("semantic_search", "n_results", "true"), ("semantic_search", "n_results", "9" * 5000),
    ("rag_suggest_links", "min_similarity", "NaN"),
    ("rag_suggest_links", "min_similarity", "Infinity"),
    ("rag_suggest_links", "min_similarity", "1e999"),
    ("search", "filters", '["tags", "pacing"]'), ("search", "filters", "tags=pacing"),
    ("search", "filters", "[" * 100_000), ("list_documents", "include_attachments", "yes"),
    ("list_documents", "include_attachments", "1"), ("rag_search", "searches", '{"a": 1}'),
    ("rag_note_context", "chunk_id", "")])
def test_text_that_does_not_fit_is_kept_for_the_check_to_name(tool: str, param: str,
                                                              text: str) -> None:
    spec = BY_NAME[tool]
    args = {**required_args(spec), param: text}
    out = coerce_arguments(spec.input_schema, args)
    assert out[param] == text
    with pytest.raises(InvalidArgument) as refused:
        spec.parse(out)
    assert refused.value.param == param


def test_an_integral_number_is_an_integer() -> None:
    spec = BY_NAME["semantic_search"]
    out = coerce_arguments(spec.input_schema, {"query": "q", "n_results": "7.0"})
    assert out["n_results"] == 7 and type(out["n_results"]) is int
    assert spec.parse(out)["top_k"] == 7
    number = coerce_arguments(BY_NAME["rag_suggest_links"].input_schema,
                              {"min_similarity": "1"})["min_similarity"]
    assert number == 1 and not isinstance(number, bool)


def test_long_text_is_not_decoded() -> None:
    spec = BY_NAME["write"]
    fits = json.dumps({"tags": "x" * (MAX_DECODED_CHARS - 20)})
    assert coerce_arguments(spec.input_schema, {"frontmatter": fits})["frontmatter"] == \
        json.loads(fits)
    big = json.dumps({"tags": "x" * MAX_DECODED_CHARS})
    assert coerce_arguments(spec.input_schema, {"frontmatter": big})["frontmatter"] == big


def test_unknown_keys_odd_schemas_and_odd_values_never_raise() -> None:
    spec = BY_NAME["search"]
    args = {"query": "q", "surprise": "[1]", "limit": object()}
    out = coerce_arguments(spec.input_schema, args)
    assert out["surprise"] == "[1]" and out["limit"] is args["limit"]
    with pytest.raises(InvalidArgument) as refused:
        spec.parse({"query": "q", "surprise": "[1]"})
    assert refused.value.param == "surprise"
    odd: list[tuple[dict[str, Any], Any]] = [
        ({}, "3"), ({"properties": None}, "3"), ({"properties": {"a": None}}, "3"),
        ({"properties": {"a": {}}}, "3"), ({"properties": {"a": {"anyOf": [None, 3]}}}, "3"),
        ({"properties": {"a": {"type": ["integer", 5, "null"]}}}, 3),
        ({"properties": {"a": {"anyOf": [{"type": "null"}]}}}, "3")]
    for schema, value in odd:
        assert coerce_arguments(schema, {"a": "3"}) == {"a": value}, schema
    assert coerce_arguments({}, {}) == {}


def test_without_the_coercion_the_checks_refuse_what_the_inspector_sends() -> None:
    """Why it exists: 004's filters and 003's list of concepts as text."""
    spec = BY_NAME["search"]
    args = {"query": "q", "filters": '{"tags": "pacing"}'}
    with pytest.raises(InvalidArgument):
        spec.parse(args)
    assert spec.parse(coerce_arguments(spec.input_schema, args))["filters"] == \
        {"tags": "pacing"}
    concepts = BY_NAME["concept_sources"]
    passed = concepts.parse(coerce_arguments(concepts.input_schema,
                                             {"concept": '["a", "b"]'}))
    assert passed["concept"] == ["a", "b"]


# -- the Inspector CLI's own conversions, ported from its build/client/tools.js ---------------
def inspector_0_15(text: str, prop: Mapping[str, Any]) -> Any:
    """0.15.0's convertParameterValue: by the property's top-level "type" only."""
    kind = prop.get("type")
    if not text:
        return text
    if kind in ("number", "integer"):
        number = float(text)  # JavaScript's Number(); NaN would travel as null
        return None if math.isnan(number) else int(number) if number.is_integer() else number
    if kind == "boolean":
        return text.lower() == "true"
    if kind in ("object", "array"):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def inspector_1_x(text: str, prop: Mapping[str, Any]) -> Any:
    """1.x: JSON.parse every value first, then 0.15's conversion for what stayed text."""
    try:
        return json.loads(text)
    except ValueError:
        return inspector_0_15(text, prop)


def typed_on_the_command_line(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@pytest.mark.parametrize("cli", [inspector_0_15, inspector_1_x], ids=["0.15", "1.x"])
def test_every_parameter_through_the_inspector_cli_arrives_as_meant(
        cli: Callable[[str, Mapping[str, Any]], Any]) -> None:
    checked = 0
    for tool, name, prop in PARAMS:
        for kind in sorted(allowed_kinds(prop)):
            values = [sample(name, prop, kind)] + (["42", "true"] if kind == "string" and
                                                   "enum" not in _member(prop, kind) else [])
            for value in values:
                sent = cli(typed_on_the_command_line(value), prop)
                args = {**required_args(tool), name: sent}
                out = coerce_arguments(tool.input_schema, args)
                assert out[name] == value and type(out[name]) is type(value), \
                    (tool.name, name, cli.__name__, sent)
                checked += 1
    assert checked > 150
