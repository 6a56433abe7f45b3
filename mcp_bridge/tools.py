"""The rag_* tools: their schemas and descriptions, argument checks, and result shapes.

Pure data and functions: no I/O, no SDK. ``server`` turns a :class:`ToolSpec` into an MCP tool
and a call into an IPC request. The names, parameters, defaults and result fields follow the
public tool reference exactly; the daemon may add keys, and only the reference's are passed on
(``metadata`` is passed as it is).

Arguments are checked here as well as in the daemon so that a mistake is reported at once, even
while the daemon is starting, and always as an error that names the parameter and the fix.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragd.daemon.errors import InvalidArgument
from ragd.daemon.ipc.protocol import (
    MAX_FILTER_CHARS,
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_QUERY_CHARS,
    MAX_SEARCHES,
    SEARCH_TYPES,
    parse_searches,
)
from ragd.daemon.settings.policy import check_name, check_path_text, hidden_part, named_document

SEARCH, INDEX = "search", "index"
TOOLSETS: dict[str, tuple[str, ...]] = {
    SEARCH: ("rag_search", "rag_convert", "rag_list_collections", "rag_collection_info",
             "rag_doc_store_info"),
    INDEX: ("rag_index",),
}

TOP_K_MAX = 100
SEARCH_TIMEOUT_S = 60.0  # the first search after a start waits for the model to load
INDEX_TIMEOUT_S = 3600.0  # past this the bridge stops waiting; the daemon keeps indexing
# Admin tools (rag_index, 004's reindex and build_embeddings) answer within this many seconds
# with what is done, the rest queued and followed through `indexing` (issue 37): a client's
# own timeout (004's was 120 s) never ends them on a busy daemon.
ADMIN_ANSWER_S = 5.0
CONVERT_TIMEOUT_S = 300.0  # the daemon stops a conversion at convert's own limit (120 s)

RESULT_FIELDS = ("title", "content", "collection", "source_type", "source_path", "source_uri",
                 "score", "metadata")
COLLECTION_FIELDS = ("name", "type", "description", "source_count", "chunk_count",
                     "last_indexed", "created_at")
INFO_FIELDS = ("name", "type", "description", "created_at", "source_count", "chunk_count",
               "last_indexed", "source_types", "sample_titles")
INDEX_FIELDS = ("collection", "indexed", "skipped", "errors", "total_found")
CONVERT_FIELDS = ("file_path", "title", "source_type", "content_hash", "cached", "markdown",
                  "metadata", "truncated", "total_chars")
DOC_STORE_FIELDS = ("source_path", "content_hash", "file_size", "file_modified_at",
                    "discovered_at")

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def passing_args(schema: dict[str, Any]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """An argument parser that passes the call's known parameters as given: for toolsets
    whose daemon side checks them and answers in its reference's own error shape."""
    known = schema["properties"]

    def parse(args: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in args.items() if k in known}

    return parse


def as_object(answer: Any) -> Any:
    """The daemon's answer as a JSON object (a bare list or value under ``result``)."""
    return answer if isinstance(answer, dict) else {"result": answer}


# -- JSON schemas -------------------------------------------------------------------------------
def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _optional_string(description: str) -> dict[str, Any]:
    # The shape pydantic gives `str | None = None`, which every MCP client understands.
    return {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None,
            "description": description}


def _object(properties: dict[str, Any], required: tuple[str, ...] = (),
            closed: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "required": list(required)}
    if closed:
        schema["additionalProperties"] = False
    return schema


_NULLABLE_STR = {"type": ["string", "null"]}
_COUNT = {"type": "integer", "minimum": 0}

SEARCH_INPUT = _object({
    "query": _string(
        "What to look for: a natural-language question or a few keywords. Put an exact phrase "
        'in double quotes ("sourdough starter") to favour passages that contain it.'),
    "collection": _optional_string(
        "Search only this collection: a name from rag_list_collections (e.g. \"obsidian\"), or "
        "a collection type meaning all collections of it: \"system\" (obsidian, email, calibre, "
        "rss), \"code\" (git repository groups) or \"project\" (user-created folders). Omit to "
        "search everything."),
    "top_k": {"type": "integer", "default": 10, "minimum": 1, "maximum": TOP_K_MAX,
              "description": "How many results to return, 1 to 100 (default 10)."},
    "source_type": _optional_string(
        "Only passages from sources of this type: markdown, pdf, docx, epub, html, txt, "
        "email, code, commit or rss."),
    "date_from": _optional_string(
        "Only sources dated on or after this day, written YYYY-MM-DD (e.g. 2024-01-31). A "
        "source's date is its own (a note's date or created front matter, an email's date) "
        "or else the day its file was last modified."),
    "date_to": _optional_string(
        "Only sources dated on or before this day, written YYYY-MM-DD."),
    "sender": _optional_string(
        "Only emails whose sender contains this text, ignoring case (a name or an address, "
        "e.g. \"alice\" or \"@example.org\")."),
    "author": _optional_string(
        "Only books whose author contains this text, ignoring case (e.g. \"tolkien\")."),
    # Beyond reference 000: qmd's typed sub-queries (decision 0048).
    "searches": {
        "type": "array", "maxItems": MAX_SEARCHES, "default": [],
        "items": _object({
            "type": {"type": "string", "enum": list(SEARCH_TYPES),
                     "description": "lex: keywords for the keyword (BM25) leg; vec: a "
                     "paraphrase of the question; hyde: a short passage that answers it."},
            "query": {"type": "string", "maxLength": MAX_QUERY_CHARS,
                      "description": "The phrasing itself."},
        }, ("type", "query")),
        "description": (
            "Optional: up to 8 phrasings you write yourself, searched beside `query` and fused "
            "with it. {\"type\": \"lex\"} adds keywords to the keyword leg (names, codes, "
            "the words a note would use); {\"type\": \"vec\"} adds a paraphrase of the "
            "question; {\"type\": \"hyde\"} adds a hypothetical answer (50-100 words, "
            "written as the note itself would say it). Omit for plain lookups.")},
}, required=("query",))

_RESULT = _object({
    "title": {"type": "string"}, "content": {"type": "string"},
    "collection": {"type": "string"}, "source_type": {"type": "string"},
    "source_path": {"type": "string"}, "source_uri": {"type": "string"},
    "score": {"type": "number"}, "metadata": {"type": "object"},
}, RESULT_FIELDS)

SEARCH_OUTPUT = _object({
    "results": {"type": "array", "items": _RESULT},
    "indexing": {"anyOf": [
        _object({"active": {"type": "boolean"}, "remaining": _COUNT}, ("active", "remaining")),
        {"type": "null"}]},
}, ("results", "indexing"))

_COLLECTION = _object({
    "name": {"type": "string"}, "type": {"type": "string"}, "description": _NULLABLE_STR,
    "source_count": _COUNT, "chunk_count": _COUNT,
    "last_indexed": _NULLABLE_STR, "created_at": _NULLABLE_STR,
}, COLLECTION_FIELDS)

LIST_INPUT = _object({})
# Structured content must be an object: the list travels as {"result": [...]}, the convention
# of the SDK's own high-level server; the text block carries the bare list.
LIST_OUTPUT = _object({"result": {"type": "array", "items": _COLLECTION}}, ("result",))

INFO_INPUT = _object({
    "collection": _string("The collection's name, as rag_list_collections shows it."),
}, required=("collection",))
# Mail collections add their folders, message counts and date range (optional fields).
MAIL_INFO_FIELDS = ("message_count", "date_from", "date_to", "folders")
INFO_OUTPUT = _object({
    **_COLLECTION["properties"],
    "source_types": {"type": "array", "items": {"type": "string"}},
    "sample_titles": {"type": "array", "items": {"type": "string"}},
    "message_count": _COUNT, "date_from": _NULLABLE_STR, "date_to": _NULLABLE_STR,
    "folders": {"type": "array", "items": _object({
        "folder": {"type": "string"}, "count": _COUNT, "date_from": _NULLABLE_STR,
        "date_to": _NULLABLE_STR}, ("folder", "count", "date_from", "date_to"))},
}, INFO_FIELDS)

INDEX_INPUT = _object({
    "collection": _string(
        "The collection to index. An existing collection is brought up to date; a new name "
        "together with `path` creates a project collection over that folder."),
    "path": _optional_string(
        "The folder of a project collection (absolute, or ~/...). Required to create a "
        "project; optional to re-index one. Leave it out for system collections (obsidian, "
        "email, calibre, rss) and code groups: they use their configured paths."),
}, required=("collection",))
INDEX_OUTPUT = _object({
    "collection": {"type": "string"}, "indexed": _COUNT, "skipped": _COUNT,
    "errors": _COUNT, "total_found": _COUNT,
    # Only while work goes on past the bounded answer (ADMIN_ANSWER_S): issue 37.
    "queued": {"type": "boolean"}, "follow": {"type": "string"},
}, INDEX_FIELDS)

CONVERT_INPUT = _object({
    "file_path": _string(
        "Absolute path of the document to convert (or ~/...): PDF, DOCX, PPTX, XLSX, HTML, "
        "EPUB, an image (PNG, JPEG, TIFF, ... when Tesseract OCR is installed), LaTeX, CSV, "
        "Markdown or plain text."),
}, required=("file_path",))
CONVERT_OUTPUT = _object({
    "file_path": {"type": "string"}, "title": {"type": "string"},
    "source_type": {"type": "string"}, "content_hash": {"type": "string"},
    "cached": {"type": "boolean"}, "markdown": {"type": "string"},
    "metadata": {"type": "object"}, "truncated": {"type": "boolean"},
    "total_chars": _COUNT,
}, CONVERT_FIELDS)

_DOC = _object({
    "source_path": {"type": "string"}, "content_hash": {"type": "string"},
    "file_size": _COUNT, "file_modified_at": _NULLABLE_STR, "discovered_at": _NULLABLE_STR,
}, DOC_STORE_FIELDS)
DOC_STORE_INPUT = _object({})
DOC_STORE_OUTPUT = _object({"result": {"type": "array", "items": _DOC}}, ("result",))


# -- descriptions (read by a language model) -------------------------------------------------
SEARCH_DESCRIPTION = """\
Search the user's own knowledge base: their Obsidian notes and whatever else ragd indexes \
(email, e-books, RSS feeds, code repositories, project folders). Hybrid search: keyword \
(BM25) and semantic (embedding) matches fused, so both exact terms and paraphrases are found.

Use it whenever the answer may be in the user's notes or documents: what they wrote about a \
topic, their plans, projects, people, references, decisions, or a note they half-remember. \
Search before saying you do not know, and cite `source_path` when you use a result.

Filters are optional and combine (all must hold): `collection` (a name, or a type: system, \
code, project), `source_type`, `date_from`/`date_to` (YYYY-MM-DD, inclusive), `sender` (email \
sender, case-insensitive substring) and `author` (book author, case-insensitive substring). \
Call rag_list_collections first if you need the collection names.

Optional `searches`: phrasings you write yourself, fused with `query` (at most 8), as \
[{"type": "lex", "query": "..."}, {"type": "vec", "query": "..."}, {"type": "hyde", \
"query": "..."}]. lex: keywords for the keyword leg (names, codes, the terms a note would \
use); vec: the question rephrased; hyde: 50-100 words written as the answering note itself \
would say it. They help most when the question is worded unlike the notes (the user \
describes a feature or a page without knowing its name): add a vec paraphrase and a hyde \
passage, and lex with the likely names or terms. Leave them out for plain keyword lookups.

Returns {results, indexing}. Each result is a passage: title, content (the passage text), \
collection, source_type, source_path, source_uri, score (0-1, higher is better) and metadata \
(tags, heading_path, date, snippet, ...). If `indexing.active` is true the index is still \
being built or updated (`indexing.remaining` sources to go): results may be partial, so say so \
and search again later if something seems missing."""

LIST_DESCRIPTION = """\
List the collections ragd has indexed, with their type (system, code or project), \
description, number of sources and chunks, and when each was created and last indexed. Use it \
to learn what can be searched, to pick a `collection` filter for rag_search, or to check \
whether indexing has happened. No parameters. Returns a list of \
{name, type, description, source_count, chunk_count, last_indexed, created_at}."""

INFO_DESCRIPTION = """\
Details of one collection: its type, description, counts, when it was created and last \
indexed, the source types it holds (e.g. markdown, pdf) and a sample of recently indexed \
titles. Use it to see what a collection contains before searching it. Returns {name, type, \
description, created_at, source_count, chunk_count, last_indexed, source_types, \
sample_titles}; a mail collection (email) adds {message_count, date_from, date_to, \
folders: [{folder, count, date_from, date_to}]}, so you can pick sender and date filters."""

INDEX_DESCRIPTION = """\
Index a collection now. ragd already keeps its collections up to date by watching their \
files, so call this only when the user asks to (re)index, or to add a folder as a new \
searchable project: give a new `collection` name and the folder's `path`, then search it with \
rag_search(collection=<name>). An existing project is re-indexed (its path may be left out); \
system collections (obsidian, email, calibre, rss) and code groups use their configured \
paths, so pass no path for them. Only new or changed files are processed. Answers within a \
few seconds: Returns {collection, indexed, skipped, errors, total_found}: files indexed, \
skipped (unsupported, too large, unreadable), failed, and found in all. When the work goes \
on longer (a first index of a large folder takes minutes), the counts are those so far and \
`queued: true` with `follow` says how to follow it (rag_search's indexing.remaining); what \
is indexed is searchable meanwhile."""

CONVERT_DESCRIPTION = """\
Convert one document file to markdown and return the text: PDF (a `## Page N` heading before \
each page), Word (DOCX), PowerPoint (PPTX, by slide), Excel (XLSX, each sheet as a table), \
HTML, EPUB (chapters in reading order), images (OCR, when Tesseract is installed), LaTeX, CSV, \
Markdown and plain text. Use it to read a document the user points at, whether or not it is \
indexed. `file_path` must be an absolute path to a regular file inside one of ragd's \
collections or a folder the user allows in config.toml ([convert] allow: by default their \
Documents, Downloads and Desktop folders); hidden files and folders are never read. A \
refusal names the setting: pass it on to the user rather than trying other paths. \
Conversions are cached by content: the same file (or a copy of it) a second time answers at \
once (`cached` is true). One answer carries at most 200,000 characters of markdown (the \
user's [convert] max_reply_chars): `truncated` is true when the document is longer \
(`total_chars`); rag_search finds passages of an indexed document. Returns {file_path, \
title, source_type, content_hash, cached, markdown, metadata, truncated, total_chars} \
(metadata: pages, authors, slides, sheets, ... where the format has them)."""

DOC_STORE_DESCRIPTION = """\
List the documents in ragd's conversion cache (the doc store): every PDF, DOCX, EPUB, ... that \
was converted to markdown for indexing or by rag_convert. No parameters. Returns a list of \
{source_path, content_hash, file_size, file_modified_at, discovered_at}."""

INSTRUCTIONS = """\
ragd searches the user's local knowledge base (Obsidian notes, and any mail, e-books, feeds, \
code and project folders they indexed). Use rag_search for questions the user's own notes or \
documents may answer; rag_list_collections shows what is indexed."""


# -- argument checks --------------------------------------------------------------------------
def _reject_unknown(tool: str, args: Mapping[str, Any], schema: dict[str, Any]) -> None:
    allowed = schema["properties"]
    for name in args:
        if name not in allowed:
            known = ", ".join(allowed) or "none"
            raise InvalidArgument(name, f"is not a parameter of {tool}",
                                  f"use only these parameters: {known}")


def _text(args: Mapping[str, Any], name: str, *, required: bool = False,
          limit: int = MAX_NAME_CHARS) -> str | None:
    value = args.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise InvalidArgument(name, "is required and must not be empty",
                                  f"pass {name} as a non-empty string")
        return None
    if not isinstance(value, str):
        raise InvalidArgument(name, f"must be a string, got {type(value).__name__}",
                              f"pass {name} as a string" + ("" if required else ", or omit it"))
    if len(value) > limit:  # refused by its length, before anything reads it
        raise InvalidArgument(name, f"is too long ({len(value):,} characters; at most "
                              f"{limit:,})", f"pass a shorter {name}")
    return value.strip()


def _top_k(value: Any) -> int:
    if value is None:
        return 10
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 9:
        number = int(value.strip())  # (int() refuses strings past 4,300 digits)
    if number is None:
        raise InvalidArgument("top_k", f"must be a whole number, got {value!r:.60}",
                              "pass a number from 1 to 100 (default 10)")
    if not 1 <= number <= TOP_K_MAX:
        raise InvalidArgument("top_k", f"must be between 1 and {TOP_K_MAX}, got {number}",
                              "pass a number from 1 to 100 (default 10)")
    return number


def _date(args: Mapping[str, Any], name: str) -> str | None:
    value = _text(args, name)
    if value is None:
        return None
    try:
        if not _DATE.fullmatch(value):
            raise ValueError(value)
        dt.date.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(name, f"{value!r:.40} is not a date of the form YYYY-MM-DD",
                              "write the day as YYYY-MM-DD, e.g. 2024-05-31") from None
    return value


def parse_search(args: Mapping[str, Any]) -> dict[str, Any]:
    """rag_search arguments -> the daemon's ``search`` params."""
    _reject_unknown("rag_search", args, SEARCH_INPUT)
    params: dict[str, Any] = {
        "query": _text(args, "query", required=True, limit=MAX_QUERY_CHARS),
        "collection": _text(args, "collection"),
        "top_k": _top_k(args.get("top_k")),
        "source_type": _text(args, "source_type"),
        "date_from": _date(args, "date_from"),
        "date_to": _date(args, "date_to"),
        "sender": _text(args, "sender", limit=MAX_FILTER_CHARS),
        "author": _text(args, "author", limit=MAX_FILTER_CHARS),
        "searches": parse_searches(args.get("searches")) or None,
    }
    if params["date_from"] and params["date_to"] and params["date_from"] > params["date_to"]:
        raise InvalidArgument("date_from", f"{params['date_from']} is after date_to "
                              f"{params['date_to']}", "swap the two dates")
    if params["source_type"]:
        params["source_type"] = params["source_type"].lower()
    return {k: v for k, v in params.items() if v is not None}


def parse_list(args: Mapping[str, Any]) -> dict[str, Any]:
    _reject_unknown("rag_list_collections", args, LIST_INPUT)
    return {}


def parse_info(args: Mapping[str, Any]) -> dict[str, Any]:
    _reject_unknown("rag_collection_info", args, INFO_INPUT)
    return {"collection": _text(args, "collection", required=True)}


def parse_convert(args: Mapping[str, Any]) -> dict[str, Any]:
    """rag_convert arguments -> the daemon's ``convert`` params: an absolute path, not hidden,
    not a system file. Only its text is checked here: whether it lies where an AI client may
    read, exists and converts is the daemon's to say (``ragd.daemon.settings.policy``), so a path
    outside that reach learns nothing, not even whether it exists."""
    _reject_unknown("rag_convert", args, CONVERT_INPUT)
    raw = args.get("file_path")
    if raw is not None and not isinstance(raw, str):
        raise InvalidArgument("file_path", f"must be a string, got {type(raw).__name__}",
                              "pass the absolute path of the document as a string")
    return {"file_path": named_document(raw, "file_path", hidden=True)}


def parse_doc_store(args: Mapping[str, Any]) -> dict[str, Any]:
    _reject_unknown("rag_doc_store_info", args, DOC_STORE_INPUT)
    return {}


def parse_index(args: Mapping[str, Any]) -> dict[str, Any]:
    """rag_index arguments -> the daemon's ``index`` params.

    A relative path is refused: the bridge's working directory is whatever the desktop client
    chose, not a folder the user named. The daemon applies the folder policy
    (``ragd.daemon.settings.policy.check_root``) to the rest.
    """
    _reject_unknown("rag_index", args, INDEX_INPUT)
    params: dict[str, Any] = {"collection": check_name(_text(args, "collection", required=True)),
                              "wait": True, "answer_within_s": ADMIN_ANSWER_S}
    raw = _text(args, "path", limit=MAX_PATH_CHARS)
    if raw is not None:
        path = Path(check_path_text(raw, "path")).expanduser()
        if not path.is_absolute():
            raise InvalidArgument("path", f"{raw!r} is relative",
                                  "pass the absolute path of the folder to index (the MCP "
                                  "server's working directory is not yours)")
        part = hidden_part(os.path.normpath(path))
        if part:  # refused before it is looked at; the daemon refuses it too
            raise InvalidArgument("path", f"{str(path)!r} is or lies in a hidden folder "
                                  f"({part})", "hidden folders hold settings and keys, so an "
                                  "AI client may not index them")
        try:
            if not path.exists():
                raise InvalidArgument("path", f"{str(path)!r} does not exist",
                                      "pass the absolute path of an existing folder")
            if not path.is_dir():
                raise InvalidArgument("path", f"{str(path)!r} is a file, not a folder",
                                      "pass the folder that holds the documents")
        except OSError as exc:  # /proc/1/cwd/x as another user: PermissionError
            raise InvalidArgument("path", f"{str(path)!r} cannot be looked at: "
                                  f"{exc.strerror or exc}", "pass a folder of yours") from None
        # As written, links and all: the daemon refuses /proc/self/cwd by its name as well
        # as by what it leads to (ragd.daemon.settings.policy.check_root).
        params["path"] = os.path.normpath(path)
    return params


# -- result shapes ----------------------------------------------------------------------------
def _pick(item: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    item = item if isinstance(item, Mapping) else {}
    return {name: item.get(name) for name in fields}


def shape_search(answer: Any) -> dict[str, Any]:
    answer = answer if isinstance(answer, Mapping) else {}
    results = []
    for raw in answer.get("results") or []:
        result = _pick(raw, RESULT_FIELDS)
        result["source_uri"] = result["source_uri"] or ""
        result["metadata"] = result["metadata"] if isinstance(result["metadata"], dict) else {}
        results.append(result)
    indexing = answer.get("indexing")
    if isinstance(indexing, Mapping):
        indexing = {"active": bool(indexing.get("active")),
                    "remaining": int(indexing.get("remaining") or 0)}
    else:
        indexing = None
    return {"results": results, "indexing": indexing}


def shape_list(answer: Any) -> list[dict[str, Any]]:
    return [_pick(c, COLLECTION_FIELDS) for c in answer or []]


def shape_info(answer: Any) -> dict[str, Any]:
    info = _pick(answer, INFO_FIELDS)
    info["source_types"] = list(info["source_types"] or [])
    info["sample_titles"] = list(info["sample_titles"] or [])
    if isinstance(answer, dict) and "folders" in answer:
        info.update({k: answer.get(k) for k in MAIL_INFO_FIELDS})
    return info


def shape_index(answer: Any) -> dict[str, Any]:
    return {**_pick(answer, INDEX_FIELDS), **follow_fields(answer)}


def follow_fields(answer: Any) -> dict[str, Any]:
    """``queued`` and ``follow`` of an admin tool's answer whose work goes on past
    ADMIN_ANSWER_S; nothing when it is done."""
    if not isinstance(answer, Mapping) or not answer.get("queued"):
        return {}
    return {"queued": True, "follow": str(answer.get("follow") or "")}


def shape_convert(answer: Any) -> dict[str, Any]:
    out = _pick(answer, CONVERT_FIELDS)
    out["cached"] = bool(out["cached"])
    out["markdown"] = out["markdown"] or ""
    out["metadata"] = out["metadata"] if isinstance(out["metadata"], dict) else {}
    out["truncated"] = bool(out["truncated"])
    total = out["total_chars"]
    out["total_chars"] = total if isinstance(total, int) else len(out["markdown"])
    return out


def shape_doc_store(answer: Any) -> list[dict[str, Any]]:
    return [_pick(d, DOC_STORE_FIELDS) for d in answer or []]


def as_text(value: Any) -> str:
    """The JSON text block that accompanies structured content."""
    return json.dumps(value, ensure_ascii=False, default=str)


# -- the table --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolSpec:
    """One tool: what the client sees, and how a call maps to a daemon method."""

    name: str
    title: str
    toolset: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    method: str
    parse: Callable[[Mapping[str, Any]], dict[str, Any]]
    shape: Callable[[Any], Any]
    timeout: float
    read_only: bool = True
    destructive: bool = False  # may delete or overwrite what the user wrote
    idempotent: bool = True  # calling it twice with the same arguments does no more
    writes: bool = False  # changes the vault: listed only with [mcp] writes (decision 0028)

    def structured(self, value: Any) -> dict[str, Any]:
        """Structured content is always an object: a list is wrapped as {"result": [...]}."""
        return value if isinstance(value, dict) else {"result": value}


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("rag_search", "Search notes and documents", SEARCH, SEARCH_DESCRIPTION,
             SEARCH_INPUT, SEARCH_OUTPUT, "search", parse_search, shape_search,
             SEARCH_TIMEOUT_S),
    ToolSpec("rag_convert", "Convert a document to markdown", SEARCH, CONVERT_DESCRIPTION,
             CONVERT_INPUT, CONVERT_OUTPUT, "convert", parse_convert, shape_convert,
             CONVERT_TIMEOUT_S),
    ToolSpec("rag_list_collections", "List indexed collections", SEARCH, LIST_DESCRIPTION,
             LIST_INPUT, LIST_OUTPUT, "list_collections", parse_list, shape_list,
             SEARCH_TIMEOUT_S),
    ToolSpec("rag_collection_info", "Describe a collection", SEARCH, INFO_DESCRIPTION,
             INFO_INPUT, INFO_OUTPUT, "collection_info", parse_info, shape_info,
             SEARCH_TIMEOUT_S),
    ToolSpec("rag_index", "Index a collection or a folder", INDEX, INDEX_DESCRIPTION,
             INDEX_INPUT, INDEX_OUTPUT, "index", parse_index, shape_index, INDEX_TIMEOUT_S,
             read_only=False),
    ToolSpec("rag_doc_store_info", "List converted documents", SEARCH, DOC_STORE_DESCRIPTION,
             DOC_STORE_INPUT, DOC_STORE_OUTPUT, "doc_store_info", parse_doc_store,
             shape_doc_store, SEARCH_TIMEOUT_S),
)


def registered_tools() -> tuple[ToolSpec, ...]:
    """Every tool of every toolset: the rag_* tools above, then those of other modules."""
    from ragd.mcp_bridge.tools_code import CODE_TOOLS
    from ragd.mcp_bridge.tools_compat import COMPAT_TOOLS
    from ragd.mcp_bridge.tools_concepts import CONCEPT_TOOLS  # decision 0033
    from ragd.mcp_bridge.tools_notes import NOTES_TOOLS

    return TOOLS + NOTES_TOOLS + COMPAT_TOOLS + CODE_TOOLS + CONCEPT_TOOLS


def select_tools(toolsets: list[str] | tuple[str, ...], *, writes: bool = False,
                 allow: list[str] | tuple[str, ...] = (), deny: list[str] | tuple[str, ...] = ()
                 ) -> tuple[list[ToolSpec], list[str]]:
    """The tools of the chosen toolsets, in reference order, and the unknown toolset names.
    Write tools only with ``writes``; a non-empty ``allow`` keeps only the tools it names,
    and ``deny`` drops those it names (decision 0028)."""
    wanted = {t.strip().lower() for t in toolsets if t.strip()}
    every = registered_tools()
    unknown = sorted(wanted - TOOLSETS.keys() - {t.toolset for t in every})
    allowed = {a.strip() for a in allow if a.strip()}
    denied = {a.strip() for a in deny if a.strip()}
    return [t for t in every if t.toolset in wanted and (writes or not t.writes)
            and (not allowed or t.name in allowed) and t.name not in denied], unknown
