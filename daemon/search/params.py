"""Tool-style search parameters -> a validated SearchRequest (one place for CLI, IPC, MCP)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragd.daemon.convert.formats import FORMATS
from ragd.daemon.errors import InvalidArgument
from ragd.daemon.ipc.protocol import parse_searches
from ragd.daemon.models import Filters
from ragd.daemon.search.engine import SearchEngine, SearchRequest, SubQuery
from ragd.daemon.search.filters import clean_folder, parse_date

# Every source_type a source can have: the document formats' and those of the other kinds
# (mail, code symbols, commits, feed entries and OPML subscriptions).
SOURCE_TYPES = tuple(sorted({f.source_type for f in FORMATS.values()}
                            | {"email", "code", "commit", "rss", "opml"}))


def clean_source_type(value: str | None) -> str | None:
    """``value`` lowercased, or None when empty; an unknown type is an error that lists the
    known ones (it used to answer an empty list, which reads as "nothing matches")."""
    cleaned = (value or "").strip().lower() or None
    if cleaned is not None and cleaned not in SOURCE_TYPES:
        raise InvalidArgument("source_type", f"unknown source type {value!r}",
                              "use one of: " + ", ".join(SOURCE_TYPES) + ", or omit it")
    return cleaned


def build_request(engine: SearchEngine, *, query: str, collection: str | None = None,
                  top_k: Any = 10, source_type: str | None = None, date_from: str | None = None,
                  date_to: str | None = None, sender: str | None = None,
                  author: str | None = None, mode: str = "hybrid", folder: str | None = None,
                  tags: Sequence[str] = (), explain: bool = False,
                  searches: Sequence[Mapping[str, Any]] | None = None) -> SearchRequest:
    """Validate and normalise; every problem is an InvalidArgument naming its parameter.
    ``searches``: typed sub-queries, ``{"type": "lex" | "vec" | "hyde", "query": text}``."""
    if not isinstance(query, str):
        raise InvalidArgument("query", "must be a string", "pass the question or keywords")
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise InvalidArgument("top_k", f"must be a whole number, got {top_k!r}",
                              "pass a number from 1 to 100 (default 10)")
    filters = Filters(
        collections=engine.resolve_collection(collection),
        source_type=clean_source_type(source_type),
        date_from=parse_date("date_from", date_from),
        date_to=parse_date("date_to", date_to),
        folder=clean_folder(folder),
        tags=tuple(t.strip().lstrip("#").lower() for t in tags if t.strip()),
        sender=(sender or "").strip() or None,
        author=(author or "").strip() or None,
    )
    # A command line can carry lone surrogates (undecodable bytes); no index can encode them.
    query = query.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    subs = tuple(SubQuery(s["type"], s["query"].encode("utf-8", "surrogatepass")
                          .decode("utf-8", "replace")) for s in parse_searches(searches))
    return SearchRequest(query=query, top_k=top_k, mode=mode, filters=filters, explain=explain,
                         searches=subs)
