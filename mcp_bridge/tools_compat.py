"""The ``omni`` and ``vault`` toolsets (decision 0028): the tools of two vault servers users
run today (references 001 and 004), under their names, with their parameters, defaults and
result fields, served by ragd's one daemon and index.

Each tool adds at most two optional parameters to its reference's: ``vault`` (which vault,
when the user has several) and, on write tools, ``if_match`` (the etag of a read). Paths are
vault-relative as in the references. Replacing an existing note without ``if_match`` is
refused (the references overwrite blindly): the refusal says to read first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragd.daemon.errors import InvalidArgument
from ragd.daemon.ipc.protocol import MAX_FILTER_CHARS, MAX_QUERY_CHARS
from ragd.mcp_bridge.tools import ADMIN_ANSWER_S, _object, follow_fields
from ragd.mcp_bridge.tools_notes import (
    IF_MATCH,
    MAX_CONTENT_CHARS,
    VAULT,
    drop_none,
    optional,
    pick,
    read_shape,
    spec,
    string,
)

OMNI, VAULT_SET = "omni", "vault"


def _tags(value: str | None) -> list[str]:
    return [t.strip() for t in (value or "").split(",") if t.strip()]


def _list(answer: Any, key: str) -> list[Any]:
    return list(answer.get(key) or []) if isinstance(answer, Mapping) else []


# -- omni (reference 001) ---------------------------------------------------------------------
SEMANTIC_INPUT = _object({
    "query": string("The natural language search query.", limit=MAX_QUERY_CHARS),
    "n_results": optional("integer", "Number of results to return.", 5, minimum=1,
                          maximum=100),
    "folder": optional("string", "Filter results to a specific folder (e.g. "
                       "\"1-projects/trading\").", maxLength=MAX_FILTER_CHARS),
    "tags": optional("string", "Filter results by a comma-separated string of tags (e.g. "
                     "\"trading,gold\").", maxLength=MAX_FILTER_CHARS),
    "vault": VAULT,
}, required=("query",))


def _semantic_shape(answer: Any) -> list[dict[str, Any]]:
    out = []
    for r in _list(answer, "results"):
        meta = r.get("metadata") or {}
        out.append({"id": str(meta.get("chunk_id")), "content": r.get("content"),
                    # the cosine of the chunk to the query (0-1), as Omni's 1 - distance,
                    # never the rank-derived score (issue 36)
                    "similarity": meta.get("similarity"), "file_path": r.get("path"),
                    "note_title": r.get("title"),
                    "header_context": " > ".join(meta.get("heading_path") or []),
                    "folder": r.get("folder"), "tags": list(meta.get("tags") or []),
                    "chunk_index": meta.get("chunk_index"),
                    "token_count": r.get("token_count")})
    return out


SUGGEST_INPUT = _object({
    "note_path": string("Relative path to the target note (e.g. \"1-projects/trading.md\")."),
    "n_suggestions": optional("integer", "Maximum number of suggestions to return.", 5,
                              minimum=1, maximum=50),
    "min_similarity": optional("number", "Minimum similarity threshold (0 to 1).", 0.5,
                               minimum=0, maximum=1),
    "exclude_current": optional("boolean", "Whether to exclude the source note from "
                                "results.", True),
    "folder": optional("string", "Restrict suggestions to a specific folder.",
                       maxLength=MAX_FILTER_CHARS),
    "tags": optional("string", "Restrict suggestions to notes with specific tags "
                     "(comma-separated).", maxLength=MAX_FILTER_CHARS),
    "vault": VAULT,
}, required=("note_path",))


def _suggest_shape(answer: Any) -> list[dict[str, Any]]:
    return [{"file_path": s.get("path"), "note_title": s.get("title"),
             "similarity": s.get("similarity"), "reason": s.get("reason"),
             "suggested_link": s.get("suggested_link")} for s in _list(answer, "suggestions")]


NOTE_PATH_INPUT = _object({
    "note_path": string("Relative path to the note (e.g. \"1-projects/my-note.md\")."),
    "vault": VAULT,
}, required=("note_path",))
SEARCH_NOTES_INPUT = _object({
    "pattern": string("Case-insensitive regex pattern to match against file paths.",
                      limit=512),
    "root_path": optional("string", "Relative path to restrict the search.",
                          maxLength=MAX_FILTER_CHARS),
    "max_results": optional("integer", "Maximum number of files to return.", 50, minimum=1,
                            maximum=10_000),
    "vault": VAULT,
}, required=("pattern",))


def _read_note_shape(answer: Any) -> dict[str, Any]:
    a = answer if isinstance(answer, Mapping) else {}
    links = a.get("links") or []
    return {"success": True, "content": a.get("content"), "metadata": {
        "note_title": a.get("title"), "folder": a.get("folder"), "tags": a.get("tags") or [],
        "frontmatter_tags": a.get("frontmatter_tags") or [],
        "inline_tags": a.get("inline_tags") or [],
        "wikilinks": sorted({lk["target"] for lk in links if lk.get("kind") != "md"
                             and lk.get("target")}),
        "size_bytes": a.get("size_bytes"), "last_modified": a.get("modified"),
        "etag": a.get("etag")}}


WRITE_NOTE_INPUT = _object({
    "note_path": string("Relative path to the note."),
    "content": string("The full content to write.", limit=MAX_CONTENT_CHARS),
    "create_dirs": optional("boolean", "Create parent directories if they don't exist.", True),
    "if_match": IF_MATCH, "vault": VAULT,
}, required=("note_path", "content"))
APPEND_NOTE_INPUT = _object({
    "note_path": string("Relative path to the note."),
    "content": string("Content to append.", limit=MAX_CONTENT_CHARS),
    "if_match": IF_MATCH, "vault": VAULT,
}, required=("note_path", "content"))
DELETE_NOTE_INPUT = _object({
    "note_path": string("Relative path to the note."), "if_match": IF_MATCH, "vault": VAULT,
}, required=("note_path",))
STRUCTURE_INPUT = _object({
    "root_path": optional("string", "Relative path to start from.",
                          maxLength=MAX_FILTER_CHARS),
    "depth": optional("integer", "Maximum recursion depth.", 2, minimum=1, maximum=50),
    "vault": VAULT,
})
VAULT_ONLY = _object({"vault": VAULT})


def _stats_shape(answer: Any) -> dict[str, Any]:
    a = answer if isinstance(answer, Mapping) else {}
    return {"total_chunks": a.get("chunk_count"), "total_files": a.get("file_count"),
            "vault_path": a.get("vault_path"), "chromadb_path": a.get("index_path"),
            "embedding_model": a.get("embedding_model"), "collection_name": a.get("vault")}


def _omni_path(args: dict[str, Any]) -> dict[str, Any]:
    return drop_none({"path": args["note_path"], "vault": args["vault"]})


OMNI_DESCRIPTIONS = {
    "semantic_search": "Search the Obsidian vault semantically for notes matching a natural "
    "language query. Use this for open-ended questions where you don't know the exact "
    "keywords but know the general topic. Returns a list of {id, content, similarity, "
    "file_path, note_title, header_context, folder, tags, chunk_index, token_count}.",
    "suggest_links": "Suggest related notes to link to based on content similarity and on "
    "what similar notes link to, leaving out notes the note already links to. Run this on a "
    "newly created or updated note to find relevant connections. Returns a list of "
    "{file_path, note_title, similarity, reason, suggested_link} (similarity: the cosine of "
    "the best-matching section pair; reason: the sections that matched and the other "
    "evidence; suggested_link: the [[Note#Section]] to paste).",
    "index_note": "Index or re-index a specific note so it is available for search (notes "
    "are indexed on save anyway). Returns {success, file, chunks_indexed}.",
    "search_notes": "Find notes whose relative path matches a regex pattern (case-insensitive)."
    " Useful for finding files by name or navigating folders. Returns a list of paths.",
    "read_note": "Read the full content and extracted metadata of a note. Always use paths "
    "relative to the vault root. Returns {success, content, metadata: {note_title, folder, "
    "tags, frontmatter_tags, inline_tags, wikilinks, size_bytes, last_modified, etag}}.",
    "write_note": "Create a note, or overwrite one (overwriting needs if_match: the etag "
    "read_note returned). Indexes the note before returning. Returns {success, file_path, "
    "was_created, size_bytes, chunks_indexed}.",
    "append_to_note": "Append content to the end of an existing note; fails if it does not "
    "exist. Returns {success, file_path, size_bytes, chunks_indexed}.",
    "delete_note": "Delete a note from the vault and the index. Destructive: confirm with the "
    "user first. Returns {success, file_path, deleted}.",
    "get_index_stats": "Statistics of the index: chunks, files, the vault's path, where the "
    "vectors live and the embedding model. Returns {total_chunks, total_files, vault_path, "
    "chromadb_path, embedding_model, collection_name}.",
    "get_vault_structure": "The vault's folder tree: folders are objects (\"...\" past "
    "`depth`), notes the string \"file\". Use it to explore the vault's organisation.",
}


def _omni(name: str, title: str, schema: dict[str, Any], method: str, to_params: Any,
          shape: Any, kind: str = "read") -> Any:
    return spec(name, title, OMNI, OMNI_DESCRIPTIONS[name], schema, method, to_params, shape,
                kind=kind)


OMNI_TOOLS = (
    _omni("semantic_search", "Semantic search of the vault", SEMANTIC_INPUT, "note_search",
          lambda a: drop_none({"query": a["query"], "top_k": a["n_results"],
                               "mode": "semantic", "folder": a["folder"],
                               "tags": _tags(a["tags"]), "vault": a["vault"]}),
          _semantic_shape),
    _omni("suggest_links", "Suggest links for a note", SUGGEST_INPUT, "note_suggest",
          lambda a: drop_none({"path": a["note_path"], "n": a["n_suggestions"],
                               "min_similarity": a["min_similarity"],
                               "exclude_current": a["exclude_current"],
                               "folder": a["folder"], "tags": _tags(a["tags"]),
                               "vault": a["vault"]}), _suggest_shape),
    _omni("index_note", "Index a note", NOTE_PATH_INPUT, "note_index", _omni_path,
          lambda a: {"success": bool(a.get("success")), "file": a.get("path"),
                     "chunks_indexed": a.get("chunks_indexed")}, kind="admin"),
    _omni("search_notes", "Find notes by path", SEARCH_NOTES_INPUT, "note_list",
          lambda a: drop_none({"regex": a["pattern"], "folder": a["root_path"],
                               "limit": a["max_results"], "include_attachments": False,
                               "vault": a["vault"]}),
          lambda a: [n["path"] for n in _list(a, "notes")]),
    _omni("read_note", "Read a note", NOTE_PATH_INPUT, "note_read", _omni_path,
          _read_note_shape),
    _omni("write_note", "Write a note", WRITE_NOTE_INPUT, "note_write",
          lambda a: drop_none({**_omni_path(a), "content": a["content"],
                               "create_dirs": a["create_dirs"], "if_match": a["if_match"]}),
          lambda a: {"success": True, "file_path": a.get("path"),
                     "was_created": a.get("created"), "size_bytes": a.get("size_bytes"),
                     "chunks_indexed": a.get("chunks_indexed")}, kind="destroy"),
    _omni("append_to_note", "Append to a note", APPEND_NOTE_INPUT, "note_append",
          lambda a: drop_none({**_omni_path(a), "content": a["content"],
                               "if_match": a["if_match"]}),
          lambda a: {"success": True, "file_path": a.get("path"),
                     "size_bytes": a.get("size_bytes"),
                     "chunks_indexed": a.get("chunks_indexed")}, kind="append"),
    _omni("delete_note", "Delete a note", DELETE_NOTE_INPUT, "note_delete",
          lambda a: drop_none({**_omni_path(a), "if_match": a["if_match"]}),
          lambda a: {"success": True, "file_path": a.get("path"),
                     "deleted": bool(a.get("deleted"))}, kind="destroy"),
    _omni("get_index_stats", "Index statistics", VAULT_ONLY, "note_stats", drop_none,
          _stats_shape),
    _omni("get_vault_structure", "Vault folder tree", STRUCTURE_INPUT, "note_structure",
          lambda a: drop_none({"root_path": a["root_path"] or "", "depth": a["depth"],
                               "vault": a["vault"]}),
          lambda a: a.get("tree") if isinstance(a, Mapping) else {}),
)


# -- vault (reference 004) --------------------------------------------------------------------
VSEARCH_INPUT = _object({
    "query": string("Natural language or keyword query string.", limit=MAX_QUERY_CHARS),
    "limit": optional("integer", "Maximum results to return.", 10, minimum=1, maximum=100),
    "mode": optional("string", "\"keyword\" (BM25), \"semantic\" (vector similarity), or "
                     "\"hybrid\" (both fused: best for natural-language questions).", "keyword",
                     enum=["keyword", "semantic", "hybrid"]),
    "folder": optional("string", "Restrict to documents under this folder path.",
                       maxLength=MAX_FILTER_CHARS),
    "filters": optional("object", "Filter by frontmatter field values (e.g. "
                        "{\"tags\": \"pacing\"}); all must match."),
    "vault": VAULT,
}, required=("query",))


def _vsearch_shape(answer: Any) -> list[dict[str, Any]]:
    return [{"path": r.get("path"), "title": r.get("title"), "folder": r.get("folder"),
             "content": r.get("content"), "score": r.get("score"),
             "frontmatter": r.get("frontmatter") or {}} for r in _list(answer, "results")]


VREAD_INPUT = _object({
    "path": string("Relative path to the document or attachment (e.g. \"Journal/note.md\")."),
    "vault": VAULT,
}, required=("path",))
LIST_DOCS_INPUT = _object({
    "folder": optional("string", "Return only documents in this folder.",
                       maxLength=MAX_FILTER_CHARS),
    "pattern": optional("string", "Unix glob matched against relative paths (e.g. "
                        "\"Journal/*.md\").", maxLength=MAX_FILTER_CHARS),
    "include_attachments": optional("boolean", "When true, also returns non-.md files "
                                    "(PDF, DOCX, ... that ragd indexes).", False),
    "vault": VAULT,
})
LIST_TAGS_INPUT = _object({
    "field": optional("string", "Frontmatter field name to enumerate (stats lists them).",
                      "tags", maxLength=256),
    "vault": VAULT,
})
REBUILD_INPUT = _object({
    "force": optional("boolean", "When true, rebuild the vector index (from cached vectors: "
                      "nothing is embedded twice).", False),
    "vault": VAULT,
})
VWRITE_INPUT = _object({
    "path": string("Relative path. Extension determines handling (.md = note, else "
                   "attachment)."),
    "content": string("Full markdown body for .md files (excluding frontmatter). Ignored for "
                      "attachments.", limit=MAX_CONTENT_CHARS),
    "frontmatter": optional("object", "Optional YAML frontmatter dict for .md files."),
    "content_base64": optional("string", "Base64-encoded binary content for attachment "
                               "files. Required when path is not .md.",
                               maxLength=2 * MAX_CONTENT_CHARS),
    "if_match": IF_MATCH, "vault": VAULT,
}, required=("path", "content"))
VEDIT_INPUT = _object({
    "path": string("Relative path to the document."),
    "old_text": string("Exact text to replace. Must appear exactly once in the document.",
                       limit=MAX_CONTENT_CHARS),
    "new_text": string("Replacement text.", limit=MAX_CONTENT_CHARS),
    "if_match": IF_MATCH, "vault": VAULT,
}, required=("path", "old_text", "new_text"))
VDELETE_INPUT = _object({
    "path": string("Relative path to the document or attachment to delete."),
    "if_match": IF_MATCH, "vault": VAULT,
}, required=("path",))
VRENAME_INPUT = _object({
    "old_path": string("Current relative path."),
    "new_path": string("Target relative path. Fails if new_path already exists."),
    "if_match": IF_MATCH, "vault": VAULT,
}, required=("old_path", "new_path"))


def _vstats_shape(answer: Any) -> dict[str, Any]:
    a = answer if isinstance(answer, Mapping) else {}
    return {"document_count": a.get("document_count"), "chunk_count": a.get("chunk_count"),
            "folder_count": a.get("folder_count"),
            "semantic_search_available": bool(a.get("semantic_search_available")),
            "indexed_frontmatter_fields": a.get("frontmatter_fields") or [],
            "attachment_extensions": a.get("attachment_extensions") or [],
            "unembedded_chunks": a.get("unembedded_chunks")}


def _embeddings_shape(answer: Any) -> dict[str, Any]:
    a = answer if isinstance(answer, Mapping) else {}
    return {"available": bool(a.get("semantic_search_available")),
            "provider": f"{a.get('embedding_backend')}:{a.get('embedding_model')}",
            "chunk_count": a.get("chunk_count"), "path": a.get("index_path"),
            "unembedded_chunks": a.get("unembedded_chunks")}


def _read_shape(answer: Any) -> dict[str, Any]:
    return read_shape(answer, ("path", "title", "content", "frontmatter", "tags", "etag",
                               "modified", "size_bytes", "truncated"))


def _bounded(args: dict[str, Any]) -> dict[str, Any]:
    """An admin tool's params: answered within ADMIN_ANSWER_S, the rest queued (issue 37)."""
    return {**drop_none(args), "answer_within_s": ADMIN_ANSWER_S}


def _vwrite_params(args: dict[str, Any]) -> dict[str, Any]:
    """004's write: the extension decides (.md is a note, anything else an attachment), so a
    path that does not end in .md needs its bytes, never becomes ``<path>.md``."""
    if not args["path"].strip().lower().endswith(".md") and args["content_base64"] is None:
        raise InvalidArgument("content_base64", f"is required: {args['path']!r} does not end "
                              "in .md, so it is written as an attachment from its bytes",
                              "pass the file's bytes base64-encoded as content_base64, or end "
                              "the path in .md to write a note")
    return drop_none(args)


VAULT_DESCRIPTIONS = {
    "search": "Find documents matching a query. mode=\"hybrid\" combines keyword precision "
    "with semantic understanding (best for questions); \"keyword\" for exact terms; "
    "\"semantic\" for meaning. Returns a list of {path, title, folder, content (the matched "
    "chunk), score, frontmatter}.",
    "read": "Read the full content of a document or attachment by relative path. Returns "
    "{path, title, content, frontmatter, tags, etag, modified, size_bytes, truncated}; an "
    "attachment also {kind, mime_type}: a document (PDF, DOCX, ...) comes as its markdown in "
    "content, an image as content_base64.",
    "list_documents": "List documents (and optionally attachments). Body content is not "
    "included: call read for the text. Returns a list of {path, title, folder, kind, tags, "
    "size_bytes, modified}.",
    "list_folders": "List every folder path that contains documents (the root is \"\"). Use it "
    "to discover folder names for search or list_documents.",
    "list_tags": "List the distinct values of a frontmatter field across the vault (default "
    "tags).",
    "stats": "The vault's size and capabilities: call it at the start of a session. Returns "
    "{document_count, chunk_count, folder_count, semantic_search_available, "
    "indexed_frontmatter_fields, attachment_extensions, unembedded_chunks} "
    "(semantic_search_available: every chunk has its vector; the unembedded_chunks still "
    "waiting are found by their words meanwhile).",
    "embeddings_status": "The embedding provider and the vector index's state. Returns "
    "{available, provider, chunk_count, path, unembedded_chunks} (available: every chunk "
    "has its vector).",
    "reindex": "Bring the index up to date with changes made outside this server (ragd also "
    "watches the vault). Returns {added, modified, deleted, unchanged} within a few seconds; "
    "if the work goes on longer the counts are null, with queued: true and follow saying how "
    "to follow it (stats).",
    "build_embeddings": "Make sure every chunk of the vault gets its vector (ragd embeds in "
    "the background); force rebuilds the vector index. Answers within a few seconds: Returns "
    "{chunks_embedded, unembedded_chunks}, with queued: true and follow while vectors are "
    "still to come (semantic search finds those chunks by their words meanwhile).",
    "write": "Create a document or attachment, or replace one (replacing needs if_match: "
    "the etag read returned; prefer edit for targeted changes). A path not ending in .md is "
    "an attachment and needs content_base64. Returns {path, created}.",
    "edit": "Replace a text span that appears exactly once in a document: read it first and "
    "copy old_text exactly. Returns {path, replacements}.",
    "delete": "Permanently delete a document or attachment. Confirm the path with the user "
    "first. Returns {path}.",
    "rename": "Rename or move a document or attachment; links and embeds to it in other "
    "notes are updated. Fails if new_path exists. Returns {old_path, new_path}.",
}


def _vault(name: str, title: str, schema: dict[str, Any], method: str, to_params: Any,
           shape: Any, kind: str = "read") -> Any:
    return spec(name, title, VAULT_SET, VAULT_DESCRIPTIONS[name], schema, method, to_params,
                shape, kind=kind)


VAULT_TOOLS = (
    _vault("search", "Search the vault", VSEARCH_INPUT, "note_search",
           lambda a: drop_none({"query": a["query"], "top_k": a["limit"], "mode": a["mode"],
                                "folder": a["folder"], "filters": a["filters"],
                                "vault": a["vault"]}), _vsearch_shape),
    _vault("read", "Read a document", VREAD_INPUT, "note_read", drop_none, _read_shape),
    _vault("list_documents", "List documents", LIST_DOCS_INPUT, "note_list",
           lambda a: drop_none({"folder": a["folder"], "glob": a["pattern"],
                                "include_attachments": a["include_attachments"],
                                "vault": a["vault"]}),
           lambda a: _list(a, "notes")),
    _vault("list_folders", "List folders", VAULT_ONLY, "note_folders", drop_none,
           lambda a: [f["folder"] for f in _list(a, "folders")]),
    _vault("list_tags", "List frontmatter values", LIST_TAGS_INPUT, "note_tags",
           lambda a: drop_none({"field": a["field"], "vault": a["vault"]}),
           lambda a: list(a.get("values") or []) if isinstance(a, Mapping) else []),
    _vault("stats", "Vault statistics", VAULT_ONLY, "note_stats", drop_none, _vstats_shape),
    _vault("embeddings_status", "Embedding status", VAULT_ONLY, "note_stats", drop_none,
           _embeddings_shape),
    _vault("reindex", "Update the index", VAULT_ONLY, "note_reindex", _bounded,
           lambda a: {**pick(a, ("added", "modified", "deleted", "unchanged")),
                      **follow_fields(a)}, kind="admin"),
    _vault("build_embeddings", "Build embeddings", REBUILD_INPUT, "note_embeddings", _bounded,
           lambda a: {**pick(a, ("chunks_embedded", "unembedded_chunks")),
                      **follow_fields(a)}, kind="admin"),
    _vault("write", "Write a document", VWRITE_INPUT, "note_write", _vwrite_params,
           lambda a: {"path": a.get("path"), "created": bool(a.get("created"))},
           kind="destroy"),
    _vault("edit", "Edit a document", VEDIT_INPUT, "note_edit", drop_none,
           lambda a: pick(a, ("path", "replacements")), kind="write"),
    _vault("delete", "Delete a document", VDELETE_INPUT, "note_delete", drop_none,
           lambda a: pick(a, ("path",)), kind="destroy"),
    _vault("rename", "Rename a document", VRENAME_INPUT, "note_rename", drop_none,
           lambda a: pick(a, ("old_path", "new_path")), kind="write"),
)

COMPAT_TOOLS = OMNI_TOOLS + VAULT_TOOLS
