"""The ``code`` toolset: reference 002's six tools, with its names, parameters, defaults and
limits (decision 0030). The bridge passes the known parameters on; the daemon checks them and
answers a bad call in 002's ``{error, message, details}`` shape, which the bridge returns as a
tool error."""

from __future__ import annotations

from typing import Any

from ragd.mcp_bridge.tools import SEARCH_TIMEOUT_S, ToolSpec, as_object, passing_args

CODE = "code"


def _schema(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": False}


_TYPES = ["epic", "story", "task", "bug", "feature"]
SEARCH_INPUT = _schema({
    "query": {"type": "string", "minLength": 1,
              "description": "Natural language or code search query"},
    "language": {"type": "string", "description": "Filter results by programming language"},
    "file_path": {"type": "string",
                  "description": "Filter results to files containing this substring"},
    "chunk_type": {"type": "string",
                   "description": "Filter by chunk type (e.g., function, class)"},
    "top_k": {"type": "number", "minimum": 1, "maximum": 100, "default": 10,
              "description": "Number of results to return"},
}, ("query",))
CONTEXT_INPUT = _schema({
    "file_path": {"type": "string", "minLength": 1,
                  "description": "File path to gather context for"},
    "include_tests": {"type": "boolean", "default": True,
                      "description": "Include test files in the context"},
    "include_interfaces": {"type": "boolean", "default": True,
                           "description": "Include interface and type alias definitions"},
    "max_tokens": {"type": "number", "minimum": 1, "maximum": 128000, "default": 8000,
                   "description": "Maximum token budget for assembled context"},
}, ("file_path",))
EXPLAIN_INPUT = _schema({
    "file_path": {"type": "string", "description": "File path to explain"},
    "name": {"type": "string", "description": "Symbol name to explain (function, class)"},
    "detail_level": {"type": "string", "enum": ["brief", "detailed"], "default": "detailed",
                     "description": "Level of detail in the explanation"},
})
STATUS_INPUT = _schema({})
BACKLOG_INPUT = _schema({
    "action": {"type": "string", "enum": ["search", "get", "list"],
               "description": "Operation to perform"},
    "query": {"type": "string", "description": "Search query text (required for search)"},
    "id": {"type": "string", "description": "Item ID to retrieve (required for get)"},
    "types": {"type": "array", "items": {"type": "string", "enum": _TYPES},
              "description": "Filter by item types"},
    "states": {"type": "array", "items": {"type": "string"},
               "description": "Filter by item states (e.g., [\"Active\"])"},
    "tags": {"type": "array", "items": {"type": "string"}, "description": "Filter by tags"},
    "limit": {"type": "number", "minimum": 1, "maximum": 50, "default": 10,
              "description": "Maximum items to return"},
}, ("action",))
DOCS_INPUT = _schema({
    "query": {"type": "string", "minLength": 1,
              "description": "Search query for documentation"},
    "source": {"type": "string", "enum": ["markdown", "confluence", "all"], "default": "all",
               "description": "Filter by documentation source"},
    "file_path": {"type": "string",
                  "description": "Filter results to files containing this substring"},
    "top_k": {"type": "number", "minimum": 1, "maximum": 100, "default": 10,
              "description": "Number of results to return"},
})
DOCS_INPUT["required"] = ["query"]



def is_error(value: Any) -> bool:
    """A 002 error payload: the bridge marks the call as a tool error."""
    return isinstance(value, dict) and isinstance(value.get("error"), str) \
        and set(value) <= {"error", "message", "details"}


_OUT = {"type": "object"}


def _tool(name: str, title: str, description: str, schema: dict[str, Any],
          method: str) -> ToolSpec:
    return ToolSpec(name, title, CODE, description, schema, _OUT, method, passing_args(schema),
                    as_object, SEARCH_TIMEOUT_S)


CODE_TOOLS: tuple[ToolSpec, ...] = (
    _tool("coderag_search", "Search code", "Hybrid semantic + keyword search across the "
          "indexed code groups (symbols split by tree-sitter): results with file_path, "
          "chunk_type, name, content, nl_summary and a 0-1 score. Filter by language, a "
          "file_path substring or chunk_type (function, method, class, module, interface, "
          "type_alias).", SEARCH_INPUT, "code_search"),
    _tool("coderag_context", "Assemble code context", "Assembles the symbols of one file, "
          "with the tests and interfaces that name them, into <primary_results> and "
          "<related_context> sections under max_tokens (counted with the embedding model's "
          "tokenizer).", CONTEXT_INPUT, "code_context"),
    _tool("coderag_explain", "Explain a symbol or file", "The natural-language summaries "
          "(signature, docstring or leading comment) of a symbol by name, or of a file's "
          "symbols; detailed adds the code and the related symbols. name wins over "
          "file_path.", EXPLAIN_INPUT, "code_explain"),
    _tool("coderag_status", "Code index status", "Chunks indexed in the code groups, when "
          "they were last indexed, the embedding model, the languages found and the health "
          "(ok, degraded, not_initialized).", STATUS_INPUT, "code_status"),
    _tool("coderag_backlog", "Search the backlog", "Search, get or list backlog items "
          "(epic, story, task, bug, feature) from the local backlog: markdown notes with "
          "frontmatter id, type, state and tags in the folder [code] backlog names.",
          BACKLOG_INPUT, "code_backlog"),
    _tool("coderag_docs", "Search code documentation", "Searches the markdown documentation "
          "of the code groups (README, docs/), section by section: file_path, heading, "
          "content, nl_summary, score, source.", DOCS_INPUT, "code_docs"),
)
CODE_TOOLSET = tuple(t.name for t in CODE_TOOLS)


def code_toolsets(toolsets: list[str] | tuple[str, ...]) -> list[str]:
    """The configured toolsets, with ``code`` added when a code group is configured (the
    toolset is on by default then; ``[mcp] tools_deny`` removes its tools)."""
    out = list(toolsets)
    if CODE in out:
        return out
    try:
        from ragd.daemon.settings.config import load_config
        from ragd.daemon.settings.paths import resolve_paths

        if load_config(resolve_paths(), write_default=False).code.groups:
            out.append(CODE)
    except Exception:  # an unreadable config: the configured toolsets only
        pass
    return out
