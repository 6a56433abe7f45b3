"""The ``concepts`` toolset: reference 003's ten tools with its names, parameters, defaults
and result fields (decision 0033). The bridge passes the known parameters on; the daemon
checks them and answers a bad call in 003's ``{error: {code, message, field, context},
timestamp}`` shape, which the bridge returns as a tool error."""

from __future__ import annotations

from typing import Any

from ragd.mcp_bridge.tools import SEARCH_TIMEOUT_S, ToolSpec, as_object, passing_args

CONCEPTS = "concepts"


def _schema(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": False}


def _s(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _b(description: str, default: bool) -> dict[str, Any]:
    return {"type": "boolean", "default": default, "description": description}


def _n(description: str, default: int) -> dict[str, Any]:
    return {"type": "number", "default": default, "minimum": 1, "description": description}


_DEBUG = _b("Show query expansion and score breakdown", False)
_CONCEPTS = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
             "description": "Concept(s) to find sources for"}
INPUTS: dict[str, dict[str, Any]] = {
    "catalog_search": _schema({
        "text": _s("Search query - topics, titles, authors, or keywords"),
        "debug": _DEBUG}, ("text",)),
    "broad_chunks_search": _schema({
        "text": _s("Search query - topics, phrases, keywords"), "debug": _DEBUG}, ("text",)),
    "chunks_search": _schema({
        "text": _s("Search query within the document"),
        "source": _s("Full file path of the source document"),
        "debug": _b("Show debug information", False)}, ("text", "source")),
    "concept_search": _schema({
        "concept": _s("Conceptual term to search for (e.g., 'innovation' not "
                      "'innovation process')"),
        "limit": _n("Maximum number of sources to return", 20),
        "source_filter": _s("Filter results to documents containing this text in path"),
        "debug": _b("Show debug information", False)}, ("concept",)),
    "extract_concepts": _schema({
        "document_query": _s("Document title, author, or keywords to identify it"),
        "format": _s("Output format: \"json\" or \"markdown\"", enum=["json", "markdown"],
                     default="json"),
        "include_summary": _b("Include document summary and categories", True)},
        ("document_query",)),
    "source_concepts": _schema({
        "concept": _CONCEPTS,
        "include_metadata": _b("Include document summaries and categories", True)},
        ("concept",)),
    "concept_sources": _schema({
        "concept": _CONCEPTS, "include_metadata": _b("Include document metadata", True)},
        ("concept",)),
    "category_search": _schema({
        "category": _s("Category name, ID, or alias"),
        "includeChildren": _b("Include child categories in hierarchy", False),
        "limit": _n("Maximum documents to return", 10)}, ("category",)),
    "list_categories": _schema({
        "sortBy": _s("Sort: \"name\", \"popularity\", or \"documentCount\"",
                     enum=["name", "popularity", "documentCount"], default="popularity"),
        "limit": _n("Maximum categories to return", 50),
        "search": _s("Filter categories by name/description")}),
    "list_concepts_in_category": _schema({
        "category": _s("Category name, ID, or alias"),
        "sortBy": _s("Sort: \"name\" or \"documentCount\"", enum=["name", "documentCount"],
                     default="documentCount"),
        "limit": _n("Maximum concepts to return", 50)}, ("category",)),
}

DESCRIPTIONS = {
    "catalog_search": "Search document summaries and metadata (books, papers, long documents) "
    "to discover relevant documents by title, author or topic. Returns the top 10 with a "
    "summary preview (200 chars), hybrid scores (vector, bm25, title, concept, wordnet), "
    "matched concepts, expanded terms and the source path. Not for listing the library: use "
    "list_categories then category_search.",
    "broad_chunks_search": "Search across all chunks of the analysed documents (hybrid: 40 % "
    "vector, 40 % BM25, 20 % expansion). Top 20 chunks with text, source, catalog_title, "
    "score components, matched concepts and expanded terms.",
    "chunks_search": "Search within one known document: source is its full file path (from "
    "catalog_search). Top 20 chunks of that document only, with hybrid scores.",
    "concept_search": "Find the chunks tagged with a concept, grouped by source document: the "
    "concept's summary, synonyms, broader and narrower terms, then documents (paths, pages) "
    "and their chunks ranked by concept density. For a topic, not an exact phrase.",
    "extract_concepts": "The complete concept inventory of one document (identified by title, "
    "author or keywords): primary concepts, categories, related concepts and (optionally) its "
    "extractive summary, as JSON or markdown.",
    "source_concepts": "Which documents hold a concept (or any of several: the union); each "
    "source lists concept_indices, the positions of the concepts it matches.",
    "concept_sources": "Per concept, its own list of source documents: results[i] holds the "
    "sources of concepts_searched[i].",
    "category_search": "The documents of one category (by name, id or alias), with the "
    "category's metadata, statistics, place in the hierarchy (parent, children) and each "
    "document's summary; includeChildren adds each narrower category with its documents.",
    "list_categories": "All categories (documents clustered by their content, each named by "
    "its most distinctive concepts; a large one split into narrower children) with document "
    "counts, aliases, hierarchy path and related categories. The starting point for "
    "exploring the library.",
    "list_concepts_in_category": "The concepts found in the documents of one category, with "
    "how many of its documents hold each and related concepts.",
}
TITLES = {
    "catalog_search": "Find documents", "broad_chunks_search": "Search all document chunks",
    "chunks_search": "Search one document", "concept_search": "Find a concept's passages",
    "extract_concepts": "List a document's concepts", "source_concepts": "Documents with "
    "concepts", "concept_sources": "Documents per concept", "category_search": "Documents of a "
    "category", "list_categories": "List categories", "list_concepts_in_category": "Concepts "
    "of a category",
}



def is_concept_error(value: Any) -> bool:
    """A 003 error payload: the bridge marks the call as a tool error."""
    return isinstance(value, dict) and isinstance(value.get("error"), dict) \
        and set(value) <= {"error", "timestamp"}


CONCEPT_TOOLS: tuple[ToolSpec, ...] = tuple(
    ToolSpec(name, TITLES[name], CONCEPTS, DESCRIPTIONS[name], schema, {"type": "object"},
             "concepts_" + name, passing_args(schema), as_object, SEARCH_TIMEOUT_S)
    for name, schema in INPUTS.items())


def concept_toolsets(toolsets: list[str] | tuple[str, ...]) -> list[str]:
    """The configured toolsets, with ``concepts`` added when ``[concepts] enabled`` and a
    Calibre library is configured or found (its books are what the tools are for); with
    project PDFs or long notes only, name it in ``[mcp] toolsets``."""
    out = list(toolsets)
    if CONCEPTS in out:
        return out
    try:
        from ragd.daemon.settings.calibrelib import discover_libraries
        from ragd.daemon.settings.config import load_config
        from ragd.daemon.settings.paths import resolve_paths

        cfg = load_config(resolve_paths(), write_default=False)
        if cfg.concepts.enabled and cfg.calibre.enabled and (
                cfg.calibre.libraries or discover_libraries()):
            out.append(CONCEPTS)
    except Exception:  # an unreadable config: the configured toolsets only
        pass
    return out
