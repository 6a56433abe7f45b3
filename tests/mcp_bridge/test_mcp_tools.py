"""The tool table against the public reference: names, parameters, types, defaults, fields."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import shared_data

from ragd.daemon.errors import InvalidArgument
from ragd.mcp_bridge import tools
from ragd.mcp_bridge.tools import (
    ADMIN_ANSWER_S,
    DOC_STORE_FIELDS,
    MAX_QUERY_CHARS,
    RESULT_FIELDS,
    SEARCH_DESCRIPTION,
    SEARCH_INPUT,
    TOOLS,
    parse_convert,
    parse_doc_store,
    parse_index,
    parse_info,
    parse_list,
    parse_search,
    select_tools,
    shape_index,
    shape_info,
    shape_list,
    shape_search,
)

REPO = Path(__file__).resolve().parents[2]
REFERENCE_DIR = shared_data.REFERENCE

# The reference's parameter tables, as (name, type, default); "required" has no default.
REFERENCE: dict[str, list[tuple[str, str, str]]] = {
    "rag_search": [("query", "str", "required"), ("collection", "str | null", "null"),
                   ("top_k", "int", "10"), ("source_type", "str | null", "null"),
                   ("date_from", "str | null", "null"), ("date_to", "str | null", "null"),
                   ("sender", "str | null", "null"), ("author", "str | null", "null")],
    "rag_convert": [("file_path", "str", "required")],
    "rag_list_collections": [],
    "rag_collection_info": [("collection", "str", "required")],
    "rag_index": [("collection", "str", "required"), ("path", "str | null", "null")],
    "rag_doc_store_info": [],
}
# Optional parameters beyond the reference, after its own (decision 0048: qmd's sub-queries).
ADDED: dict[str, list[str]] = {"rag_search": ["searches"]}


def check_input_schema(schema: dict[str, Any], params: list[tuple[str, str, str]],
                       added: Sequence[str] = ()) -> None:
    """Assert that a JSON schema has exactly the reference's parameters, types and defaults,
    then only the optional ``added`` ones."""
    assert schema["type"] == "object"
    props = schema["properties"]
    assert list(props) == [name for name, _, _ in params] + list(added)
    assert sorted(schema.get("required", [])) == sorted(
        name for name, _, default in params if default == "required")
    for name, kind, default in params:
        prop = props[name]
        if kind == "str":
            assert prop["type"] == "string", name
        elif kind == "int":
            assert prop["type"] == "integer", name
        elif kind == "str | null":
            assert {t["type"] for t in prop["anyOf"]} == {"string", "null"}, name
        else:
            raise AssertionError(f"unexpected reference type {kind}")
        if default == "required":
            assert "default" not in prop, name
        elif default == "null":
            assert prop["default"] is None, name
        else:
            assert prop["default"] == int(default), name
        assert prop["description"], name


def test_the_tools_are_exactly_the_reference_ones() -> None:
    assert [t.name for t in TOOLS] == list(REFERENCE)
    for spec in TOOLS:
        check_input_schema(spec.input_schema, REFERENCE[spec.name], ADDED.get(spec.name, []))
        assert spec.output_schema["type"] == "object"
        assert len(spec.description) > 200  # written for a model: when and how to use it


def _reference_tables(text: str) -> dict[str, list[tuple[str, str, str]]]:
    tables: dict[str, list[tuple[str, str, str]]] = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        name = section.split("\n", 1)[0].strip()
        rows = []
        for line in section.splitlines():
            cells = [c.strip().replace("\\|", "|")
                     for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if len(cells) >= 3 and cells[0].startswith("`"):
                default = cells[2].strip("`") if len(cells) == 4 else (
                    "null" if "null" in cells[1] else "required")
                rows.append((cells[0].strip("`"), cells[1], default))
        tables[name] = rows
    return tables


def test_the_literal_table_matches_the_reference_document() -> None:
    files = sorted(REFERENCE_DIR.glob("000_*.txt"))
    if not files:
        pytest.skip(f"the tool reference is not at {REFERENCE_DIR}")
    tables = _reference_tables(files[0].read_text(encoding="utf-8"))
    for name, params in REFERENCE.items():
        assert tables[name] == params
    text = files[0].read_text(encoding="utf-8")
    fields = re.search(r"## rag_doc_store_info.*?\{ (.*?) \}", text, re.S)
    assert fields is not None
    assert tuple(f.strip() for f in fields.group(1).split(",")) == DOC_STORE_FIELDS


def test_convert_arguments_are_checked_in_the_bridge(tmp_path: Path) -> None:
    # Only the path's text: where it may lie, whether it exists and converts is the daemon's
    # to say, so that a path outside an AI client's reach learns nothing (decision 0023).
    doc = tmp_path / "a.pdf"
    assert parse_convert({"file_path": str(doc)}) == {"file_path": str(doc)}
    assert parse_convert({"file_path": "~/x/../a.pdf"}) == {
        "file_path": os.path.join(os.path.expanduser("~"), "a.pdf")}
    for bad, why in [({"file_path": "a.pdf"}, "relative"), ({}, "required"),
                     ({"file_path": 3}, "string"), ({"file_path": "/dev/null"}, "/dev"),
                     ({"file_path": "/proc/self/environ"}, "/proc"),
                     ({"file_path": "~/.aws/credentials"}, "hidden folder .aws"),
                     ({"file_path": str(tmp_path / ".notes.txt")},
                      r"is hidden \(\.notes\.txt\)"),
                     ({"file_path": str(tmp_path / "a\x00b.pdf")}, "NUL"),
                     ({"file_path": "/" + "a" * 5000}, "5,001 characters"),
                     ({"file_path": str(doc), "x": 1}, "not a parameter")]:
        with pytest.raises(InvalidArgument, match=why):
            parse_convert(bad)
    assert parse_doc_store({}) == {}


def test_toolsets_pick_groups_and_report_unknown_names() -> None:
    specs, unknown = select_tools(["search"])
    assert [s.name for s in specs] == ["rag_search", "rag_convert", "rag_list_collections",
                                       "rag_collection_info", "rag_doc_store_info"]
    specs, unknown = select_tools(["index", "Bogus", " "])
    assert [s.name for s in specs] == ["rag_index"] and unknown == ["bogus"]
    assert select_tools([])[0] == []


def test_searches_is_qmds_typed_sub_query_list() -> None:
    prop = SEARCH_INPUT["properties"]["searches"]
    assert "searches" not in SEARCH_INPUT["required"]
    assert prop["type"] == "array" and prop["maxItems"] == 8 and prop["default"] == []
    item = prop["items"]
    assert item["required"] == ["type", "query"] and item["additionalProperties"] is False
    assert item["properties"]["type"]["enum"] == ["lex", "vec", "hyde"]
    assert item["properties"]["query"]["maxLength"] == MAX_QUERY_CHARS
    assert "searches" in SEARCH_DESCRIPTION and "hyde" in SEARCH_DESCRIPTION
    jsonschema.validate({"query": "x", "searches": [{"type": "hyde", "query": "y"}]},
                        SEARCH_INPUT)
    searches = [{"type": "lex", "query": " embed "}, {"type": "Hyde", "query": "A passage."}]
    assert parse_search({"query": "x", "searches": searches})["searches"] == [
        {"type": "lex", "query": "embed"}, {"type": "hyde", "query": "A passage."}]
    assert "searches" not in parse_search({"query": "x", "searches": []})
    assert "searches" not in parse_search({"query": "x", "searches": None})


def test_search_arguments_are_normalised_and_unset_ones_dropped() -> None:
    assert parse_search({"query": " levain ", "top_k": 5, "collection": None,
                         "source_type": "Markdown", "date_from": "2024-01-31",
                         "sender": ""}) == {
        "query": "levain", "top_k": 5, "source_type": "markdown", "date_from": "2024-01-31"}
    assert parse_search({"query": "x"})["top_k"] == 10
    assert parse_search({"query": "x", "top_k": 7.0})["top_k"] == 7
    assert parse_search({"query": "x", "top_k": "12"})["top_k"] == 12


@pytest.mark.parametrize(("args", "param", "words"), [
    ({}, "query", "required"),
    ({"query": "   "}, "query", "required"),
    ({"query": 3}, "query", "string"),
    ({"query": "x", "top_k": 0}, "top_k", "between 1 and 100"),
    ({"query": "x", "top_k": 101}, "top_k", "between 1 and 100"),
    ({"query": "x", "top_k": True}, "top_k", "whole number"),
    ({"query": "x", "top_k": "ten"}, "top_k", "whole number"),
    ({"query": "x", "top_k": 2.5}, "top_k", "whole number"),
    ({"query": "x", "date_from": "31/01/2024"}, "date_from", "YYYY-MM-DD"),
    ({"query": "x", "date_to": "2024-02-30"}, "date_to", "YYYY-MM-DD"),
    ({"query": "x", "date_to": "2024-1-5"}, "date_to", "YYYY-MM-DD"),
    ({"query": "x", "date_from": "2024-05-01", "date_to": "2024-01-01"}, "date_from", "after"),
    ({"query": "x", "sender": ["a"]}, "sender", "string"),
    ({"query": "x", "limit": 3}, "limit", "not a parameter"),
    ({"query": "x", "searches": "embed"}, "searches", "must be a list"),
    ({"query": "x", "searches": [{"type": "vec", "query": "y"}] * 9}, "searches", "at most 8"),
    ({"query": "x", "searches": [{"type": "sparse", "query": "y"}]}, "searches", "lex, vec"),
    ({"query": "x", "searches": [{"type": "vec", "query": ""}]}, "searches", "non-empty"),
    ({"query": "x", "searches": [{"type": "vec", "query": "y" * 200_001}]}, "searches",
     "too long"),
])
def test_bad_search_arguments_name_the_parameter_and_the_fix(
        args: dict[str, Any], param: str, words: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_search(args)
    assert caught.value.param == param
    assert words in caught.value.message
    assert caught.value.hint


def test_index_paths_are_checked_and_made_absolute(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n", encoding="utf-8")
    assert parse_index({"collection": "p", "path": str(folder)}) == {
        "collection": "p", "wait": True, "answer_within_s": ADMIN_ANSWER_S,
        "path": str(folder.resolve())}
    for relative in ("notes", "./notes", "../notes"):
        with pytest.raises(InvalidArgument) as caught:
            parse_index({"collection": "p", "path": relative})
        assert caught.value.param == "path" and "relative" in caught.value.message
    for bad_name in ("..", "a/b", "nul\x00", "x" * 500, ""):
        with pytest.raises(InvalidArgument) as caught:
            parse_index({"collection": bad_name, "path": str(folder)})
        assert caught.value.param == "collection"
    assert parse_index({"collection": "obsidian"}) == {"collection": "obsidian", "wait": True,
                                                       "answer_within_s": ADMIN_ANSWER_S}
    for args, words in [({"collection": "p", "path": str(tmp_path / "missing")}, "not exist"),
                        ({"collection": "p", "path": str(folder / "a.md")}, "not a folder")]:
        with pytest.raises(InvalidArgument) as caught:
            parse_index(args)
        assert caught.value.param == "path" and words in caught.value.message
    with pytest.raises(InvalidArgument) as caught:
        parse_index({"path": str(folder)})
    assert caught.value.param == "collection"


def test_other_tools_check_their_few_arguments() -> None:
    assert parse_list({}) == {}
    assert parse_info({"collection": "obsidian"}) == {"collection": "obsidian"}
    with pytest.raises(InvalidArgument):
        parse_list({"collection": "x"})
    with pytest.raises(InvalidArgument):
        parse_info({})


def test_results_keep_only_the_reference_fields_and_all_of_metadata() -> None:
    raw = {"results": [{**{f: f for f in RESULT_FIELDS}, "score": 0.5, "source_uri": None,
                        "metadata": {"tags": ["a"], "chunk_id": 3, "snippet": "s"},
                        "extra": 1}],
           "indexing": {"active": True, "remaining": 4, "phase": "embed"}, "timing_ms": 3}
    shaped = shape_search(raw)
    assert list(shaped) == ["results", "indexing"]
    assert list(shaped["results"][0]) == list(RESULT_FIELDS)
    assert shaped["results"][0]["metadata"] == {"tags": ["a"], "chunk_id": 3, "snippet": "s"}
    assert shaped["results"][0]["source_uri"] == ""
    assert shaped["indexing"] == {"active": True, "remaining": 4}
    assert shape_search({"results": [], "indexing": None}) == {"results": [], "indexing": None}

    coll = {"name": "n", "type": "project", "description": "d", "source_count": 1,
            "chunk_count": 2, "last_indexed": None, "created_at": "t", "root": "/x"}
    assert shape_list([coll]) == [{k: v for k, v in coll.items() if k != "root"}]
    info = shape_info({**coll, "source_types": ["markdown"], "sample_titles": ["A"],
                       "skips": {}, "skipped_count": 0})
    assert list(info) == list(tools.INFO_FIELDS)
    assert shape_index({"collection": "p", "indexed": 1, "skipped": 0, "errors": 0,
                        "total_found": 1, "queued": False}) == {
        "collection": "p", "indexed": 1, "skipped": 0, "errors": 0, "total_found": 1}
