"""Which tools an MCP client is offered, and why (decision 0049): the toolsets of ``[mcp]
toolsets`` (with ``code`` and ``concepts`` where their sources are configured, when the list is
left at its default), write tools only with ``[mcp] writes``, then ``tools_allow`` and
``tools_deny``. The bridge offers what this says; `ragd doctor` prints it. Light: no MCP SDK."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragd.mcp_bridge.tools import TOOLSETS, ToolSpec, select_tools


@dataclass(frozen=True)
class Offer:
    """The tools a client sees, each toolset with the reason it is on, and what is left out."""

    tools: list[ToolSpec]
    toolsets: list[tuple[str, str]]  # (toolset, why it is offered)
    unknown: list[str] = field(default_factory=list)  # toolset names no tool has
    hidden_writes: list[str] = field(default_factory=list)  # write tools [mcp] writes hides
    denied: list[str] = field(default_factory=list)  # tools tools_allow / tools_deny drop


def offered_toolsets(mcp: Any) -> list[tuple[str, str]]:
    """(toolset, why) for each toolset offered. ``[mcp] toolsets`` left at its default also
    offers ``code`` and ``concepts`` where their sources are configured (a code group; a
    Calibre library with ``[concepts] enabled``); a list the user wrote is taken as written, so
    ``search`` alone is the search tools alone, whatever sources there are (issue 37)."""
    from ragd.mcp_bridge.tools_code import CODE, code_toolsets
    from ragd.mcp_bridge.tools_concepts import CONCEPTS, concept_toolsets

    written = "toolsets" in getattr(mcp, "model_fields_set", ())
    why = "named in [mcp] toolsets" if written else "a default of [mcp] toolsets"
    out = [(t, why) for t in mcp.toolsets]
    if written:
        return out
    names = [t for t, _ in out]
    if CODE not in names and CODE in code_toolsets(names):
        out.append((CODE, "a [code] group is configured"))
    if CONCEPTS not in names and CONCEPTS in concept_toolsets(names):
        out.append((CONCEPTS, "a Calibre library is configured or found, and [concepts] "
                    "enabled"))
    return out


def offer(mcp: Any) -> Offer:
    """What a client launched with these ``[mcp]`` settings is offered."""
    toolsets = offered_toolsets(mcp)
    names = [t for t, _ in toolsets]
    writes = bool(getattr(mcp, "writes", False))
    allow, deny = getattr(mcp, "tools_allow", ()), getattr(mcp, "tools_deny", ())
    tools, unknown = select_tools(names, writes=writes, allow=allow, deny=deny)
    every, _ = select_tools(names, writes=True)
    shown = {t.name for t in tools}
    hidden = [t.name for t in every if t.writes and not writes]
    denied = [t.name for t in every if t.name not in shown and t.name not in hidden]
    return Offer(tools, toolsets, unknown, hidden, denied)


def describe(o: Offer) -> str:
    """One paragraph for `ragd doctor`: how many tools, the toolsets and why, what is hidden."""
    parts = [f"an MCP client sees {len(o.tools)} tools: "
             + "; ".join(f"{name} ({why})" for name, why in o.toolsets)]
    if o.hidden_writes:
        parts.append(f"{len(o.hidden_writes)} write tools hidden ([mcp] writes = false)")
    if o.denied:
        parts.append(f"left out by tools_allow/tools_deny: {', '.join(o.denied)}")
    if o.unknown:
        parts.append(f"unknown toolsets ignored: {', '.join(o.unknown)} (known: "
                     f"{', '.join(known_toolsets())})")
    return ". ".join(parts)


def known_toolsets() -> list[str]:
    from ragd.mcp_bridge.tools import registered_tools

    return list(dict.fromkeys([*TOOLSETS, *(t.toolset for t in registered_tools())]))
