"""The daemon's side of reference 002's code tools (decision 0030): coderag_search, _context,
_explain, _status, _docs and _backlog over the code groups.

Arguments are checked here, once, against 002's limits; a failure is answered in 002's shape
``{error, message, details}`` (the bridge marks it as a tool error), never raised.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ragd.daemon.errors import RagdError
from ragd.daemon.runtime.surface import Handler, Service
from ragd.daemon.text.symbols import normalise_language

if TYPE_CHECKING:
    from ragd.daemon.ipc.server import Connection

INVALID = "Invalid input"
NOT_READY = "Search index not initialized"
FAILED = "Search failed"
NO_BACKLOG = "Backlog provider not initialized"
CHUNK_TYPES = ("function", "method", "class", "module", "interface", "type_alias", "doc")
_FENCE = re.compile(r"^\s*(```|~~~)[\w+-]*\s*$")


class Refused(Exception):
    """A call answered in 002's error shape."""

    def __init__(self, error: str, message: str, details: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.payload: dict[str, Any] = {"error": error, "message": message}
        if details is not None:
            self.payload["details"] = details


def _invalid(field: str, message: str) -> Refused:
    return Refused(INVALID, f"{field}: {message}",
                   [{"path": [field], "message": message, "code": "invalid"}])


def _str(p: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = p.get(name)
    if value is None:
        if required:
            raise _invalid(name, "Required")
        return None
    if not isinstance(value, str):
        raise _invalid(name, f"Expected string, received {type(value).__name__}")
    if required and len(value) < 1:
        raise _invalid(name, "String must contain at least 1 character(s)")
    return value


def _num(p: dict[str, Any], name: str, default: int, lo: int, hi: int) -> int:
    value = p.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise _invalid(name, "Expected integer")
    if not lo <= value <= hi:
        raise _invalid(name, f"Number must be between {lo} and {hi}")
    return int(value)


def _bool(p: dict[str, Any], name: str, default: bool) -> bool:
    value = p.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _invalid(name, "Expected boolean")
    return value


def _path(p: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = _str(p, name, required=required)
    if value is not None and ".." in value.replace("\\", "/").split("/"):
        raise _invalid(name, "Path traversal ('..') is not allowed")
    return value


def _code_groups(app: Any) -> list[str]:
    return [c.name for c in app.catalog.collections() if c.type == "code"]


def _hits(app: Any, query: str, top_k: int) -> list[dict[str, Any]]:
    """Hybrid search over every code group, over-fetched for the filters applied after."""
    from ragd.daemon.models import Filters
    from ragd.daemon.search.engine import SearchRequest

    if not _code_groups(app):
        raise Refused(NOT_READY, "no code group is indexed: add one under [code] groups in "
                      "config.toml (or RAGD_CODE_GROUPS) and run rag_index")
    req = SearchRequest(query=query, top_k=min(100, max(top_k * 5, 30)), mode="hybrid",
                        filters=Filters(collections=tuple(_code_groups(app)),
                                        source_type="code"))
    try:
        return list(app.search_engine.search(req)["results"])
    except RagdError as exc:
        raise Refused(FAILED, exc.message) from exc


def code_of(content: str) -> str:
    """A chunk's source code: without ragd's summary line and the fence around the code."""
    lines = content.split("\n")
    start = next((i + 1 for i, ln in enumerate(lines) if _FENCE.match(ln)), 0)
    body = lines[start:]
    while body and _FENCE.match(body[-1]):
        body = body[:-1]
    return "\n".join(body)


def search(app: Any, p: dict[str, Any]) -> dict[str, Any]:
    query = _str(p, "query", required=True)
    language = _str(p, "language")
    file_path = _path(p, "file_path")
    chunk_type = _str(p, "chunk_type")
    top_k = _num(p, "top_k", 10, 1, 100)
    assert query is not None
    lang = normalise_language(language) if language else None
    out = []
    seen: set[tuple[str, str, str]] = set()
    for h in _hits(app, query, top_k):
        m = h["metadata"]
        if m.get("symbol_type") == "doc" and chunk_type != "doc":
            continue
        if (lang and m.get("language") != lang) or (chunk_type and m.get("symbol_type")
                                                    != chunk_type) or \
                (file_path and file_path not in m.get("file_path", "")):
            continue
        # One result per symbol (issue 36): a definition is one source, shown whole by the
        # engine; top-level code cut into windows shares its name, and shows its best window.
        key = (m.get("repository", ""), m.get("file_path", ""), m.get("symbol_name", ""))
        if key in seen:
            continue
        seen.add(key)
        out.append({"file_path": m.get("file_path", ""), "chunk_type": m.get("symbol_type", ""),
                    "name": m.get("symbol_name", ""), "content": code_of(h["content"]),
                    "nl_summary": m.get("nl_summary", ""), "score": h["score"]})
        if len(out) == top_k:
            break
    return {"results": out}


def docs(app: Any, p: dict[str, Any]) -> dict[str, Any]:
    query = _str(p, "query", required=True)
    source = _str(p, "source") or "all"
    if source not in ("markdown", "confluence", "all"):
        raise _invalid("source", "Invalid enum value. Expected 'markdown' | 'confluence' | "
                       "'all'")
    file_path = _path(p, "file_path")
    top_k = _num(p, "top_k", 10, 1, 100)
    assert query is not None
    if source == "confluence":  # ragd reads no Confluence
        return {"results": []}
    out = []
    for h in _hits(app, query, top_k):
        m = h["metadata"]
        if m.get("symbol_type") != "doc" or (file_path and file_path not in
                                             m.get("file_path", "")):
            continue
        out.append({"file_path": m.get("file_path", ""), "heading": m.get("symbol_name", ""),
                    "content": code_of(h["content"]), "nl_summary": m.get("nl_summary", ""),
                    "score": h["score"], "source": "markdown"})
        if len(out) == top_k:
            break
    return {"results": out}


def _section(row: Any) -> str:
    m = row.metadata
    return (f"## {m.get('symbol_name', '')} ({m.get('file_path', '')}:"
            f"{m.get('start_line', '')}-{m.get('end_line', '')})\n{code_of(row.text)}\n")


@functools.cache
def _tokenizer() -> Any:
    """The default model's tokenizer, counting without truncation."""
    from tokenizers import Tokenizer

    from ragd.daemon.embed.embedding import tokenizer_file

    tok = Tokenizer.from_file(str(tokenizer_file()))
    tok.no_truncation()
    tok.no_padding()
    return tok


def count_tokens(text: str) -> int:
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


def context(app: Any, p: dict[str, Any]) -> dict[str, Any]:
    """A file's symbols, then the tests and interfaces that name them, under ``max_tokens``
    (counted with the embedding model's own tokenizer)."""
    from ragd.daemon.stores.code_sources import symbols_in_file, symbols_named

    file_path = _path(p, "file_path", required=True)
    tests = _bool(p, "include_tests", True)
    interfaces = _bool(p, "include_interfaces", True)
    max_tokens = _num(p, "max_tokens", 8000, 1, 128000)
    assert file_path is not None
    if not _code_groups(app):
        raise Refused(NOT_READY, "no code group is indexed")
    primary = symbols_in_file(app.catalog, file_path)
    if not primary:  # say so (issue 37): an empty context reads as "a file with nothing in it"
        raise _invalid("file_path", f"no indexed file {file_path!r} in the code groups; "
                       "coderag_search finds files by what they do, and file_path is relative "
                       "to the repository (as coderag_search's results give it)")
    names = [r.metadata.get("symbol_name", "").split(".")[-1] for r in primary
             if r.metadata.get("symbol_type") not in ("module", "doc")]
    related: list[Any] = []
    seen = {r.path for r in primary}
    if names and (tests or interfaces):
        for h in _hits(app, " ".join(dict.fromkeys(names))[:2000], 20):
            m = h["metadata"]
            fp = m.get("file_path", "")
            is_test = "test" in fp.lower() and tests
            is_iface = interfaces and m.get("symbol_type") in ("interface", "type_alias")
            if fp == file_path or not (is_test or is_iface):
                continue
            for row in symbols_named(app.catalog, m.get("symbol_name", ""), 5):
                if row.path not in seen and row.metadata.get("file_path") == fp:
                    seen.add(row.path)
                    related.append(row)
    parts_p = [_section(r) for r in primary]
    parts_r = [_section(r) for r in related]
    return _assemble(parts_p, parts_r, max_tokens)


def _assemble(primary: list[str], related: list[str], max_tokens: int) -> dict[str, Any]:
    kept_p: list[str] = []
    kept_r: list[str] = []
    truncated = False

    def render() -> str:
        out = ""
        if kept_p:
            out += "<primary_results>\n" + "\n".join(kept_p) + "</primary_results>\n"
        if kept_r:
            out += "<related_context>\n" + "\n".join(kept_r) + "</related_context>\n"
        return out

    for pieces, kept in ((primary, kept_p), (related, kept_r)):
        for piece in pieces:
            kept.append(piece)
            if count_tokens(render()) > max_tokens:
                kept.pop()
                truncated = True
    text = render()
    return {"context": text, "token_count": count_tokens(text) if text else 0,
            "truncated": truncated, "primary_chunks": len(kept_p),
            "related_chunks": len(kept_r)}


def explain(app: Any, p: dict[str, Any]) -> dict[str, Any]:
    from ragd.daemon.stores.code_sources import symbols_in_file, symbols_named

    file_path = _path(p, "file_path")
    name = _str(p, "name")
    level = _str(p, "detail_level") or "detailed"
    if level not in ("brief", "detailed"):
        raise _invalid("detail_level", "Invalid enum value. Expected 'brief' | 'detailed'")
    if not file_path and not name:
        raise Refused(INVALID, "At least one of file_path or name must be provided",
                      [{"path": ["file_path"], "message": "At least one of file_path or name "
                        "must be provided", "code": "custom"}])
    if not _code_groups(app):
        raise Refused(NOT_READY, "no code group is indexed")
    rows = symbols_named(app.catalog, name) if name else symbols_in_file(app.catalog,
                                                                         file_path or "")
    if name:  # a doc section is not a symbol (README's "Uploader" heading)
        rows = [r for r in rows if r.metadata.get("symbol_type") != "doc"]
    chunks = []
    for r in rows:
        m = r.metadata
        c: dict[str, Any] = {"file_path": m.get("file_path", ""),
                             "chunk_type": m.get("symbol_type", ""),
                             "name": m.get("symbol_name", ""),
                             "nl_summary": m.get("nl_summary", "")}
        if level == "detailed":
            c["code"] = code_of(r.text)
        chunks.append(c)
    explanation: dict[str, Any] = {"chunks": chunks, "detail_level": level}
    if level == "detailed":
        files = {r.metadata.get("file_path", "") for r in rows}
        own = {c["name"] for c in chunks}
        related = [s.metadata.get("symbol_name", "") for f in sorted(files)
                   for s in symbols_in_file(app.catalog, f)]
        explanation["related_symbols"] = [n for n in dict.fromkeys(related)
                                          if n and n not in own][:50]
    return {"explanation": explanation, "chunks_found": len(chunks)}


def status(app: Any, d: Any, p: dict[str, Any]) -> dict[str, Any]:
    from ragd.daemon.runtime.app import iso_time
    from ragd.daemon.stores.code_sources import code_counts

    counts = code_counts(app.catalog)
    health = ("not_initialized" if not counts["groups"] else
              "ok" if counts["chunks"] else "degraded")
    waiting = sum(app.indexer.backlog.of(c.id)[0] for c in app.catalog.collections()
                  if c.type == "code")
    out = {"total_chunks": counts["chunks"], "last_indexed": iso_time(counts["last_indexed"]),
           "model": d.config.embedding.model, "languages": counts["languages"] or "auto",
           "health": health}
    if waiting:  # 002's fields are its contract: the code chunks still waiting for their
        # vectors (found by their words meanwhile) go to the result's _meta (issue 37)
        out["_indexing"] = {**d.indexing(), "active": True, "unembedded_chunks": int(waiting)}
    return out


def backlog(app: Any, d: Any, p: dict[str, Any]) -> dict[str, Any]:
    from ragd.daemon.sources.backlog_notes import TYPES, MarkdownBacklog, select

    action = _str(p, "action", required=True)
    if action not in ("search", "get", "list"):
        raise _invalid("action", "Invalid enum value. Expected 'search' | 'get' | 'list'")
    query = _str(p, "query")
    item_id = _str(p, "id")
    limit = _num(p, "limit", 10, 1, 50)
    lists: dict[str, list[str] | None] = {}
    for name in ("types", "states", "tags"):
        value = p.get(name)
        if value is not None and (not isinstance(value, list)
                                  or not all(isinstance(v, str) for v in value)):
            raise _invalid(name, "Expected array of strings")
        lists[name] = value
    bad = [t for t in lists["types"] or () if t not in TYPES]
    if bad:
        raise _invalid("types", f"Invalid enum value {bad[0]!r}. Expected "
                       + " | ".join(f"'{t}'" for t in TYPES))
    if action == "search" and not query:
        raise _invalid("query", "Required for action 'search'")
    if action == "get" and not item_id:
        raise _invalid("id", "Required for action 'get'")
    folder = d.config.code.backlog
    if not folder:
        raise Refused(NO_BACKLOG, "no backlog folder is configured: set [code] backlog to a "
                      "folder of markdown notes with frontmatter id, type, state and tags")
    items = MarkdownBacklog(folder).items()
    if action == "get":
        found = [i for i in items if item_id in (i.id, i.external_id)]
        if not found:
            raise Refused("Item not found", f"no backlog item with id {item_id!r}")
        return {"item": found[0].as_dict(linked=True)}
    chosen = select(items, query=query if action == "search" else None,
                    types=lists["types"], states=lists["states"], tags=lists["tags"],
                    limit=limit)
    return {"items": [i.as_dict() for i in chosen]}


def _handler(fn: Callable[..., dict[str, Any]], with_daemon: bool = False
             ) -> Handler:
    async def handle(d: Service, params: dict[str, Any], conn: Connection) -> Any:
        app = await d._ready()

        def run() -> dict[str, Any]:
            try:
                out = fn(app, d, params) if with_daemon else fn(app, params)
            except Refused as exc:
                return exc.payload
            indexing = d.indexing()
            if indexing["active"]:  # 002's results have no place for it: the bridge's _meta
                out.setdefault("_indexing", indexing)
            return out

        return await asyncio.to_thread(run)

    return handle


CODE_HANDLERS = {
    "code_search": _handler(search), "code_context": _handler(context),
    "code_explain": _handler(explain), "code_status": _handler(status, True),
    "code_docs": _handler(docs), "code_backlog": _handler(backlog, True),
}
