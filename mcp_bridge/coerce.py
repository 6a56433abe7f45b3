"""Tool arguments that a command-line MCP client sent as the wrong JSON type, put right before
the tool's own check reads them (issue 37, item 7).

The official MCP Inspector CLI (``npx @modelcontextprotocol/inspector --cli``) takes arguments
as ``--tool-arg key=value`` text. Up to 0.15.0, the newest that installs on Node 20, it keeps
every value a string unless the property's schema has a top-level ``"type"`` of number,
integer, boolean, object or array. ragd's optional parameters are declared the way pydantic
declares ``X | None = None`` (``{"anyOf": [{"type": X}, {"type": "null"}]}``), and reference
003's ``concept`` is ``string | string[]``, so that CLI sends 004's ``filters`` as the text
``{"tags": "x"}`` and 003's list of concepts as the text ``["a", "b"]``. Its 1.x and later
CLIs do the opposite: they JSON-decode every value first, so ``query=42`` arrives as the
number 42 for a string parameter.

:func:`coerce_arguments` undoes both, guided by the tool's own input schema, and nothing more:
a value that still does not fit is passed on unchanged, so the tool's check refuses it with
the error that names the parameter and the fix. Pure: the standard library only, no I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

# Text is decoded only for parameters that are not strings. A value typed on a command line is
# at most 128 KiB (Linux's MAX_ARG_STRLEN for one argument; Windows' whole command line is
# 32 K characters), so nothing such a client can send is left undecoded, while a multi-megabyte
# string sent to a number or an object (content may be 5 MB) is refused by the check unparsed.
MAX_DECODED_CHARS = 128 * 1024

_JSON_KINDS: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "integer": (int,), "number": (int, float),
    "boolean": (bool,),
}


def allowed_kinds(prop: Any) -> set[str]:
    """The non-null JSON types a property's schema allows: its ``"type"`` (a name or a list)
    or its ``anyOf`` members' types. Empty when the schema does not say."""
    if not isinstance(prop, Mapping):
        return set()
    kinds: set[str] = set()
    declared = prop.get("type")
    if isinstance(declared, str):
        kinds.add(declared)
    elif isinstance(declared, list):
        kinds.update(k for k in declared if isinstance(k, str))
    for member in prop.get("anyOf") or ():
        kinds |= allowed_kinds(member)
    kinds.discard("null")
    return kinds


def coerce_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with each value of a property in ``schema`` made the JSON type the
    property allows, where the value is that type written as text, or text where the value is
    a number or a boolean the property does not take. Never raises; unknown keys are kept for
    the check."""
    try:
        properties = schema.get("properties")
    except AttributeError:
        properties = None
    if not isinstance(properties, Mapping):
        return dict(arguments)
    return {name: _coerce(value, allowed_kinds(properties.get(name)))
            for name, value in arguments.items()}


def _coerce(value: Any, kinds: set[str]) -> Any:
    if not kinds:  # an unknown parameter, or a schema that does not say
        return value
    if isinstance(value, str):
        if "string" not in kinds:
            return _decoded(value, kinds)
        if "array" in kinds and value.strip().startswith("["):
            # 003's concept: a list written as JSON text, when every entry is a string
            decoded = _decoded(value, {"array"})
            if isinstance(decoded, list) and all(isinstance(v, str) for v in decoded):
                return decoded
        return value
    if "string" in kinds and isinstance(value, int | float) and not _fits(value, kinds):
        return json.dumps(value)  # a newer CLI decoded `query=42`; bool is an int here too
    return value


def _fits(value: Any, kinds: set[str]) -> bool:
    """Whether a decoded JSON value is of one of ``kinds`` (a bool is no number)."""
    return any(isinstance(value, _JSON_KINDS.get(kind, ()))
               and (kind == "boolean" or not isinstance(value, bool)) for kind in kinds)


def _decoded(text: str, kinds: set[str]) -> Any:
    """The JSON value ``text`` holds if it is one of ``kinds``; otherwise ``text`` itself."""
    if len(text) > MAX_DECODED_CHARS:
        return text
    if "boolean" in kinds and text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"  # the 0.15 CLI lower-cases booleans, so do we
    try:
        value = json.loads(text, parse_constant=_not_json)
    except (ValueError, RecursionError):  # not JSON, NaN, an int past 4,300 digits, too deep
        return text
    if isinstance(value, float) and not math.isfinite(value):
        return text  # 1e999
    if isinstance(value, float) and value.is_integer() and "integer" in kinds \
            and "number" not in kinds:
        value = int(value)  # JSON Schema counts 5.0 as an integer
    return value if _fits(value, kinds) else text


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")
