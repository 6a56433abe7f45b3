"""ragd's own note tools (toolset ``notes``, decision 0028): read a note or a section, the
passage around a search hit, folders, tags and notes by folder/tag/glob, link suggestions,
and (only with ``[mcp] writes``) safe writes.

Pure data and functions like ``ragd.mcp_bridge.tools``: the checks here name the parameter and
the fix; the daemon checks again and decides about paths (containment, hidden folders).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ragd.daemon.errors import InvalidArgument
from ragd.daemon.ipc.protocol import MAX_FILTER_CHARS, MAX_NAME_CHARS, MAX_PATH_CHARS
from ragd.mcp_bridge.tools import SEARCH_TIMEOUT_S, ToolSpec, _object, _reject_unknown

NOTES = "notes"
WRITE_TIMEOUT_S = 120.0  # a write answers once the writer committed it (seconds, usually)
MAX_CONTENT_CHARS = 5_000_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # ids are SQLite integers
_MISSING = object()


# -- schemas ----------------------------------------------------------------------------------
def string(description: str, *, limit: int = MAX_PATH_CHARS) -> dict[str, Any]:
    return {"type": "string", "description": description, "maxLength": limit}


def optional(kind: str, description: str, default: Any = None, **extra: Any) -> dict[str, Any]:
    """An optional parameter; a None default gets the ``anyOf [kind, null]`` shape pydantic
    gives ``X | None = None``, which every MCP client understands."""
    if default is None:
        return {"anyOf": [{"type": kind, **extra}, {"type": "null"}], "default": None,
                "description": description}
    return {"type": kind, "default": default, "description": description, **extra}


VAULT = optional("string", "Which vault, when the user has several: a collection name such as "
                 "\"obsidian\" or \"obsidian-work\" (rag_list_collections). Omit for the "
                 "default vault.", maxLength=MAX_NAME_CHARS)
IF_MATCH = optional("string", "The etag a read returned. The write is refused, and nothing "
                    "changes, if the note changed since (someone edited it): read it again "
                    "and redo the change.", maxLength=128)


def _kind(prop: Mapping[str, Any]) -> str:
    if "type" in prop:
        return str(prop["type"])
    return next(str(p["type"]) for p in prop["anyOf"] if p["type"] != "null")


def _bounds(prop: Mapping[str, Any]) -> Mapping[str, Any]:
    return prop if "type" in prop else next(p for p in prop["anyOf"] if p["type"] != "null")


_PY: dict[str, type | tuple[type, ...]] = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict,
       "array": list}


def check_args(tool: str, args: Mapping[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments checked against a tool's schema, defaults filled in: an error names the
    parameter and what to pass, before the daemon is asked anything."""
    _reject_unknown(tool, args, schema)
    out: dict[str, Any] = {}
    for name, prop in schema["properties"].items():
        value = args.get(name, _MISSING)
        kind = _kind(prop)
        if value is None and kind == "number" and "type" in prop:
            # Not nullable: and a NaN or an Infinity a client wrote arrives as null (the SDK
            # reads them, then passes them on in JSON), so it must not become the default.
            raise InvalidArgument(name, "must be a finite number, got null (NaN and Infinity "
                                  "arrive as null)", f"pass {name} as a number such as "
                                  f"{prop.get('default', 0.5)}, or leave it out for the default")
        if value is _MISSING or value is None:
            if name in schema.get("required", ()):
                raise InvalidArgument(name, "is required", f"pass {name} ({kind})")
            out[name] = prop.get("default")
            continue
        if kind == "number" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if kind == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        ok = isinstance(value, _PY[kind]) and (kind == "boolean" or not isinstance(value, bool))
        if not ok:
            raise InvalidArgument(name, f"must be {'an' if kind[0] in 'aeio' else 'a'} {kind}, "
                                  f"got {type(value).__name__}", f"pass {name} as a {kind}")
        bounds = _bounds(prop)
        if kind == "string" and len(value) > bounds.get("maxLength", MAX_CONTENT_CHARS):
            raise InvalidArgument(name, f"is too long ({len(value):,} characters; at most "
                                  f"{bounds['maxLength']:,})", f"pass a shorter {name}")
        if kind == "string" and "\x00" in value:
            raise InvalidArgument(name, "contains a NUL character", f"pass {name} as plain text")
        if kind in ("integer", "number"):
            _check_range(name, kind, value, bounds)
        out[name] = value
    return out


def _check_range(name: str, kind: str, value: int | float, bounds: Mapping[str, Any]) -> None:
    """A number must be finite (JSON has no NaN, but a client's encoder may write one) and
    inside its bounds; an integer without bounds inside int64, what SQLite stores."""
    if kind == "number" and not math.isfinite(value):
        raise InvalidArgument(name, f"must be a finite number, got {value}",
                              f"pass {name} as a number such as 0.5")
    low = bounds.get("minimum", INT64_MIN if kind == "integer" else None)
    high = bounds.get("maximum", INT64_MAX if kind == "integer" else None)
    if (low is not None and value < low) or (high is not None and value > high):
        shown = f"{value}" if abs(value) < 10**30 else "a far larger number"
        raise InvalidArgument(name, f"must be between {low} and {high}, got {shown}",
                              f"pass a {kind} from {low} to {high}")


def pick(value: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    value = value if isinstance(value, Mapping) else {}
    return {f: value.get(f) for f in fields}


def spec(name: str, title: str, toolset: str, description: str, schema: dict[str, Any],
         method: str, to_params: Callable[[dict[str, Any]], dict[str, Any]],
         shape: Callable[[Any], Any], *, kind: str = "read",
         timeout: float = SEARCH_TIMEOUT_S) -> ToolSpec:
    """A tool whose arguments are checked against ``schema`` and mapped by ``to_params``.
    ``kind``: read; write (changes a note, idempotent); append (not idempotent); destroy
    (deletes or replaces what was there); admin (indexing, changes no note)."""
    def parse(args: Mapping[str, Any]) -> dict[str, Any]:
        return to_params(check_args(name, args, schema))

    writes = kind in ("write", "append", "destroy")
    return ToolSpec(name, title, toolset, description, schema, _object({}, closed=False),
                    method, parse, shape, WRITE_TIMEOUT_S if writes or kind == "admin"
                    else timeout, read_only=kind == "read", destructive=kind == "destroy",
                    idempotent=kind not in ("append",), writes=writes)


def drop_none(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


# -- ragd's own tools -------------------------------------------------------------------------
READ_NOTE_INPUT = _object({
    "path": string("The note's path relative to the vault, as search results and "
                   "rag_list_notes give it (e.g. \"Projects/Plan.md\"; .md may be left out)."),
    "section": optional("string", "Read only this section: a heading of the note (its text, "
                        "without #). Omit for the whole note.", maxLength=MAX_FILTER_CHARS),
    "vault": VAULT,
}, required=("path",))
READ_FIELDS = ("vault", "path", "title", "folder", "etag", "size_bytes", "modified", "content",
               "section", "truncated", "total_chars", "headings", "frontmatter", "tags",
               "aliases", "links", "backlinks")
ATTACHMENT_FIELDS = ("kind", "mime_type", "content_base64")  # only in an attachment's answer


def read_shape(answer: Any, fields: tuple[str, ...] = READ_FIELDS) -> dict[str, Any]:
    """A read's ``fields``; an attachment's answer also says its kind and MIME type, and
    carries an image's (or another binary file's) bytes as base64."""
    out = pick(answer, fields)
    if isinstance(answer, Mapping) and answer.get("kind") == "attachment":
        out.update({f: answer.get(f) for f in ATTACHMENT_FIELDS if answer.get(f) is not None})
    return out


CONTEXT_INPUT = _object({
    "chunk_id": {"type": "integer", "description": "A search result's metadata.chunk_id.",
                 "minimum": INT64_MIN, "maximum": INT64_MAX},
    "before": optional("integer", "Passages before the hit (0 to 20).", 1, minimum=0,
                       maximum=20),
    "after": optional("integer", "Passages after the hit (0 to 20).", 1, minimum=0,
                      maximum=20),
}, required=("chunk_id",))

LIST_NOTES_INPUT = _object({
    "folder": optional("string", "Only notes in this folder and below it (e.g. \"Projects\").",
                       maxLength=MAX_PATH_CHARS),
    "tag": optional("string", "Only notes with this tag (a parent tag matches nested ones: "
                    "\"area\" matches #area/health).", maxLength=MAX_FILTER_CHARS),
    "glob": optional("string", "Only paths matching this Unix glob (e.g. \"Journal/2024-*\"; "
                     "* crosses folders).", maxLength=MAX_PATH_CHARS),
    "limit": optional("integer", "Most notes listed (1 to 1000).", 100, minimum=1,
                      maximum=1000),
    "vault": VAULT,
})
VAULT_ONLY_INPUT = _object({"vault": VAULT})

SUGGEST_INPUT = _object({
    "path": string("The note to find links for, relative to the vault."),
    "top_k": optional("integer", "Most suggestions (1 to 50).", 5, minimum=1, maximum=50),
    "min_similarity": optional("number", "Leave out notes less alike than this (0 to 1).",
                               0.3, minimum=0, maximum=1),
    "folder": optional("string", "Only suggest notes in this folder.",
                       maxLength=MAX_PATH_CHARS),
    "vault": VAULT,
}, required=("path",))

WRITE_INPUT = _object({
    "path": string("Where to write, relative to the vault (\".md\" is added if missing)."),
    "content": string("The note's whole new text (front matter included, if any).",
                      limit=MAX_CONTENT_CHARS),
    "if_match": IF_MATCH, "vault": VAULT,
}, required=("path", "content"))
EDIT_INPUT = _object({
    "path": string("The note to edit, relative to the vault."),
    "old_text": string("Text to replace: copied exactly from a read of the note, and found "
                       "exactly once in it.", limit=MAX_CONTENT_CHARS),
    "new_text": string("What replaces it.", limit=MAX_CONTENT_CHARS),
    "if_match": IF_MATCH, "vault": VAULT,
}, required=("path", "old_text", "new_text"))
APPEND_INPUT = _object({
    "path": string("The note to add to, relative to the vault."),
    "content": string("Text added at the end of the note (on a new line).",
                      limit=MAX_CONTENT_CHARS),
    "if_match": IF_MATCH, "vault": VAULT,
}, required=("path", "content"))
RENAME_INPUT = _object({
    "old_path": string("The note's current path, relative to the vault."),
    "new_path": string("Its new path (another folder moves it); must not exist yet."),
    "if_match": IF_MATCH, "vault": VAULT,
}, required=("old_path", "new_path"))
DELETE_INPUT = _object({
    "path": string("The note to delete, relative to the vault."),
    "if_match": IF_MATCH, "vault": VAULT,
}, required=("path",))

WRITE_FIELDS = ("vault", "path", "etag", "created", "size_bytes", "chunks_indexed")


def _write_shape(answer: Any) -> dict[str, Any]:
    return pick(answer, WRITE_FIELDS)


READ_DESCRIPTION = """\
Read one note of the user's Obsidian vault in full (or one section of it, by heading): its \
text, front matter, tags, aliases, headings, outgoing links (each with the note it resolves \
to) and backlinks (the notes that link to it). Use it after rag_search when a passage is not \
enough: pass the result's path relative to the vault (the part of source_path after the \
vault folder; rag_list_notes lists them). Returns {vault, path, title, folder, etag, \
size_bytes, modified, content, section, truncated, total_chars, headings, frontmatter, tags, \
aliases, links, backlinks}; `etag` is what a write tool's if_match wants. An attachment \
(a PDF, an image) is read too: a document as its markdown, an image as content_base64 with \
its mime_type."""
CONTEXT_DESCRIPTION = """\
The passages around one search hit: the hit's chunk with the chunks before and after it in \
the same note, in order, with their heading paths. Cheaper than reading the whole note when \
a hit is cut mid-thought. Pass rag_search's metadata.chunk_id. Returns {collection, path, \
title, chunk_id, chunk_count, chunks: [{chunk_id, chunk_index, heading_path, text, hit}]}."""
LIST_NOTES_DESCRIPTION = """\
List the notes of the vault, optionally only those in a folder, with a tag, or whose path \
matches a glob (filters combine). Use it to browse or to find a note by name; use rag_search \
to find notes by what they say. Returns {vault, notes: [{path, title, folder, kind, tags, \
size_bytes, modified}], total, truncated}."""
FOLDERS_DESCRIPTION = """\
List the vault's folders (\"\" is the root) with how many notes each holds directly and \
below it. Returns {vault, folders: [{folder, notes, notes_below}]}."""
TAGS_DESCRIPTION = """\
List the vault's tags (front matter and inline #tags, lowercased) with how many notes carry \
each, most used first. Returns {vault, tags: [{tag, count}]}."""
SUGGEST_DESCRIPTION = """\
Which notes this note should link to: its sections are compared with every other note's \
sections, and what notes like it link to, notes that link here and names in its text count \
too (a note linked from everywhere counts less); notes it already links to are left out. \
Each suggestion comes with the [[Note#Section]] to paste and a reason naming the pair of \
sections that matched and the other evidence; similarity is that pair's cosine (0 to 1). \
Use it after writing or editing a note. Returns {vault, path, suggestions: [{path, title, \
similarity, reason, suggested_link, section}]}."""
WRITE_DESCRIPTION = """\
Create a note, or replace an existing note's whole text. Replacing needs `if_match`: the \
etag from rag_read_note, so a change made since is never lost (prefer rag_edit_note for a \
targeted change); a note another call created first is never replaced (`exists`). The note \
is searchable when this returns. Returns {vault, path, etag, created, size_bytes, \
chunks_indexed}."""
EDIT_DESCRIPTION = """\
Replace one exact piece of a note's text: `old_text` must occur exactly once (read the note \
first and copy it). Zero or several matches change nothing and say where the nearest \
matches are; a note over 20 MB is refused (`too_large`), never cut. The note is searchable \
when this returns. Returns {vault, path, etag, created, size_bytes, chunks_indexed}."""
APPEND_DESCRIPTION = """\
Add text at the end of an existing note (a log, a list). Returns {vault, path, etag, \
created, size_bytes, chunks_indexed}."""
RENAME_DESCRIPTION = """\
Rename or move a note or an attachment, and update every link to it in other notes \
([[Old]], [[Old|alias]], [[Old#Heading]], ![[Old]], ![[image.jpg]] and markdown links), \
keeping aliases and headings, as Obsidian does. Never replaces a file (`exists`). Returns \
{vault, old_path, new_path, etag, links_updated, notes_updated: [{path, links}], \
notes_not_updated: [{path, reason}]}."""
DELETE_DESCRIPTION = """\
Delete a note from the vault (and so from search). Irreversible unless the vault is backed \
up: confirm with the user first. Returns {vault, path, deleted}."""


def _note_params(args: dict[str, Any]) -> dict[str, Any]:
    return drop_none(args)


NOTES_TOOLS: tuple[ToolSpec, ...] = (
    spec("rag_read_note", "Read a note", NOTES, READ_DESCRIPTION, READ_NOTE_INPUT,
         "note_read", _note_params, read_shape),
    spec("rag_note_context", "Passages around a search hit", NOTES, CONTEXT_DESCRIPTION,
         CONTEXT_INPUT, "note_chunks", _note_params,
         lambda a: pick(a, ("collection", "path", "title", "chunk_id", "chunk_count",
                            "chunks"))),
    spec("rag_list_notes", "List notes", NOTES, LIST_NOTES_DESCRIPTION, LIST_NOTES_INPUT,
         "note_list", _note_params, lambda a: pick(a, ("vault", "notes", "total",
                                                        "truncated"))),
    spec("rag_list_folders", "List the vault's folders", NOTES, FOLDERS_DESCRIPTION,
         VAULT_ONLY_INPUT, "note_folders", _note_params,
         lambda a: pick(a, ("vault", "folders"))),
    spec("rag_list_tags", "List the vault's tags", NOTES, TAGS_DESCRIPTION, VAULT_ONLY_INPUT,
         "note_tags", _note_params, lambda a: pick(a, ("vault", "tags"))),
    spec("rag_suggest_links", "Suggest links for a note", NOTES, SUGGEST_DESCRIPTION,
         SUGGEST_INPUT, "note_suggest",
         lambda a: drop_none({"path": a["path"], "n": a["top_k"],
                              "min_similarity": a["min_similarity"], "folder": a["folder"],
                              "vault": a["vault"]}),
         lambda a: pick(a, ("vault", "path", "suggestions"))),
    spec("rag_write_note", "Create or replace a note", NOTES, WRITE_DESCRIPTION, WRITE_INPUT,
         "note_write", _note_params, _write_shape, kind="destroy"),
    spec("rag_edit_note", "Edit a note", NOTES, EDIT_DESCRIPTION, EDIT_INPUT, "note_edit",
         _note_params, _write_shape, kind="write"),
    spec("rag_append_note", "Append to a note", NOTES, APPEND_DESCRIPTION, APPEND_INPUT,
         "note_append", _note_params, _write_shape, kind="append"),
    spec("rag_rename_note", "Rename a note and its links", NOTES, RENAME_DESCRIPTION,
         RENAME_INPUT, "note_rename", _note_params,
         lambda a: pick(a, ("vault", "old_path", "new_path", "etag", "links_updated",
                            "notes_updated", "notes_not_updated")), kind="write"),
    spec("rag_delete_note", "Delete a note", NOTES, DELETE_DESCRIPTION, DELETE_INPUT,
         "note_delete", _note_params, lambda a: pick(a, ("vault", "path", "deleted")),
         kind="destroy"),
)
