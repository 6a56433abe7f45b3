"""The daemon's side of reference 003's ten tools (decision 0033).

Arguments are checked here against 003's parameters; a failure is answered in 003's shape
``{error: {code, message, field, context}, timestamp}`` (the bridge marks it as a tool error).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ragd.daemon.concepts import browse
from ragd.daemon.concepts.analysis import eligible, open_catalog_readonly
from ragd.daemon.concepts.names import by_name
from ragd.daemon.concepts.queries import Library, Refusal, validation
from ragd.daemon.runtime.surface import Handler, Service

if TYPE_CHECKING:
    from ragd.daemon.ipc.server import Connection

MAX_TEXT = 2000


def _text(p: dict[str, Any], name: str, required: bool = True) -> str | None:
    v = p.get(name)
    if v is None or (isinstance(v, str) and not v.strip()):
        if required:
            raise validation(name, f"{name} is required")
        return None
    if not isinstance(v, str):
        raise validation(name, f"{name} must be a string")
    if len(v) > MAX_TEXT:
        raise validation(name, f"{name} is too long (at most {MAX_TEXT} characters)")
    return v.strip()


def _bool(p: dict[str, Any], name: str, default: bool) -> bool:
    v = p.get(name, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise validation(name, f"{name} must be a boolean")
    return v


def _int(p: dict[str, Any], name: str, default: int, hi: int = 1000) -> int:
    v = p.get(name, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v) or not 1 <= v <= hi:
        raise validation(name, f"{name} must be a whole number from 1 to {hi}")
    return int(v)


def _choice(p: dict[str, Any], name: str, default: str, allowed: tuple[str, ...]) -> str:
    v = p.get(name, default)
    if v is None:
        return default
    if v not in allowed:
        raise validation(name, f"{name} must be one of: {', '.join(allowed)}")
    return str(v)


def catalog_search(lib: Library, fp: str, p: dict[str, Any]) -> dict[str, Any]:
    return lib.catalog_search(_text(p, "text") or "", _bool(p, "debug", False))


def broad_chunks_search(lib: Library, fp: str, p: dict[str, Any], d: Service
                        ) -> dict[str, Any]:
    """Candidates from the hybrid index (rag_search's, over-fetched), re-scored by 003's
    weights; only chunks of the analysed documents."""
    from ragd.daemon.search.params import build_request

    app = d.app
    text = _text(p, "text") or ""
    found = app.search_engine.search(build_request(app.search_engine, query=text, top_k=100))
    ids = [r["metadata"]["chunk_id"] for r in found.get("results", [])]
    rows = lib.chunk_rows(ids, fp)
    return lib.rank_chunks(text, rows, _bool(p, "debug", False))


def chunks_search(lib: Library, fp: str, p: dict[str, Any]) -> dict[str, Any]:
    text = _text(p, "text") or ""
    source = _text(p, "source") or ""
    with lib.store.reading() as db:
        row = db.execute("SELECT source_id FROM docs WHERE source=?", (source,)).fetchone()
    if row is None:
        from ragd.daemon.concepts.queries import not_found

        raise not_found(f"no analysed document at {source!r}; catalog_search gives the exact "
                        "source path", source=source)
    ids = [r[0] for r in lib.catalog.execute("SELECT id FROM chunks WHERE source_id=?",
                                             (row[0],))]
    return lib.rank_chunks(text, lib.chunk_rows(ids, fp), _bool(p, "debug", False))


def concept_search(lib: Library, fp: str, p: dict[str, Any]) -> dict[str, Any]:
    return browse.concept_search(lib, _text(p, "concept") or "", _int(p, "limit", 20),
                                 _text(p, "source_filter", False), _bool(p, "debug", False))


def extract_concepts(lib: Library, fp: str, p: dict[str, Any], d: Service) -> dict[str, Any]:
    """003's extract_concepts; a document that is indexed but not analysed yet is answered
    as pending, with no concepts, rather than not found (issue 37)."""
    query = _text(p, "document_query") or ""
    fmt = _choice(p, "format", "json", ("json", "markdown"))
    try:
        return browse.extract_concepts(lib, query, fmt, _bool(p, "include_summary", True))
    except Refusal as exc:
        if exc.code != "RECORD_NOT_FOUND":
            raise
        doc = waiting_document(lib, d, query)
        if doc is None:
            raise
    message = (f"{doc['title']!r} is indexed; its concepts come once its vectors are in and "
               f"it is analysed ({d.concepts.waiting if d.concepts else 0} documents wait): "
               "ask again in a minute")
    return {"document": doc["title"], "source": doc["source"], "total_concepts": 0,
            "primary_concepts": [], "categories": [], "related_concepts": [], "format": fmt,
            "pending": True, "message": message}


def waiting_document(lib: Library, d: Service, query: str) -> dict[str, Any] | None:
    """The document ``query`` names by title or path among those the analysis will read but
    has not (their vectors are still to come, or their turn)."""
    if d.concepts is None:
        return None
    analysed = lib.store.analysed()
    docs = [{"title": e.title, "source": e.source}
            for e in eligible(lib.catalog, d.concepts.analyser.settings, embedded=False)
            if analysed.get(e.source_id) != e.sha256]
    return by_name(docs, query)


def source_concepts(lib: Library, fp: str, p: dict[str, Any]) -> dict[str, Any]:
    return browse.source_concepts(lib, p.get("concept"), _bool(p, "include_metadata", True))


def concept_sources(lib: Library, fp: str, p: dict[str, Any]) -> dict[str, Any]:
    return browse.concept_sources(lib, p.get("concept"), _bool(p, "include_metadata", True))


def category_search(lib: Library, fp: str, p: dict[str, Any]) -> dict[str, Any]:
    return browse.category_search(lib, _text(p, "category") or "",
                                  _bool(p, "includeChildren", False), _int(p, "limit", 10))


def list_categories(lib: Library, fp: str, p: dict[str, Any]) -> dict[str, Any]:
    return browse.list_categories(lib, _choice(p, "sortBy", "popularity", browse.SORTS),
                                  _int(p, "limit", 50), _text(p, "search", False))


def list_concepts_in_category(lib: Library, fp: str, p: dict[str, Any]) -> dict[str, Any]:
    return browse.list_concepts_in_category(
        lib, _text(p, "category") or "", _choice(p, "sortBy", "documentCount",
                                                 ("name", "documentCount")),
        _int(p, "limit", 50))


def _handler(fn: Callable[..., dict[str, Any]], with_daemon: bool = False
             ) -> Handler:
    async def handle(d: Service, params: dict[str, Any], conn: Connection) -> Any:
        app = await d._ready()

        def run() -> dict[str, Any]:
            if d.concepts is None:
                return Refusal("DATABASE_ERROR", "concept analysis is off: set [concepts] "
                               "enabled = true in config.toml").payload
            db = open_catalog_readonly(d.paths.catalog_path)
            try:
                lib = Library(d.concepts.store, app.embedder.embed_query, db)
                fp = app.embedder.fingerprint
                out = fn(lib, fp, params, d) if with_daemon else fn(lib, fp, params)
            except Refusal as exc:
                return exc.payload
            finally:
                db.close()
            status, indexing = d.concepts.status(), d.indexing()
            if status["waiting"] or status["busy"] or indexing["active"]:  # the bridge's _meta
                out["_indexing"] = {**indexing, "active": True,
                                    "concepts_waiting": status["waiting"]}
            return out

        return await asyncio.to_thread(run)

    return handle


async def concepts_status(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """The concept thread's passes and counts (tests and the bench wait on it)."""
    await d._ready()
    return d.concepts.status() if d.concepts is not None else {"enabled": False}


CONCEPT_HANDLERS = {
    "concepts_catalog_search": _handler(catalog_search),
    "concepts_broad_chunks_search": _handler(broad_chunks_search, True),
    "concepts_chunks_search": _handler(chunks_search),
    "concepts_concept_search": _handler(concept_search),
    "concepts_extract_concepts": _handler(extract_concepts, True),
    "concepts_source_concepts": _handler(source_concepts),
    "concepts_concept_sources": _handler(concept_sources),
    "concepts_category_search": _handler(category_search),
    "concepts_list_categories": _handler(list_categories),
    "concepts_list_concepts_in_category": _handler(list_concepts_in_category),
    "concepts_status": concepts_status,
}
