"""The frames between the daemon and an extraction worker, and the bounds of what comes back.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. JSON, not pickle:
what a worker sends was parsed out of a hostile file, and the daemon must never run code a
frame names. The daemon refuses a frame over ``MAX_FRAME_BYTES`` (the worker is killed), so a
broken worker cannot make the daemon hold more than that at once.

Every field is bounded in the worker before it is sent (``bounded_document``,
``bounded_chunks``): a title, a heading, each metadata string, list and depth. A chunk's own
text is already bounded by the chunker (``max_tokens`` × 8 characters) and a document's text by
``MAX_TEXT_CHARS``; chunks travel in frames of at most ``CHUNKS_PER_FRAME``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import IO, Any

from ragd.daemon.models import ChunkDraft, Document, Skip

MAX_FRAME_BYTES = 48 * 2**20
CHUNKS_PER_FRAME = 256
MAX_TITLE_CHARS = 1_000
MAX_HEADING_CHARS = 500
MAX_HEADINGS = 16
# Metadata: what a note's frontmatter keeps (decision 0012), for every kind of source.
MAX_META_STRING = 16_000
MAX_META_ITEMS = 1_000
MAX_META_DEPTH = 16
MAX_META_NODES = 20_000
META_TRUNCATED = "metadata_truncated"

_LEN = struct.Struct(">I")


class FrameError(Exception):
    """A frame that breaks the protocol (too large, not JSON, cut short)."""


def write_frame(out: IO[bytes], obj: Any) -> None:
    """Send one frame and flush it."""
    data = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str).encode(
        "utf-8", "surrogatepass")
    out.write(_LEN.pack(len(data)) + data)
    out.flush()


def read_frame(inp: IO[bytes], max_bytes: int = MAX_FRAME_BYTES) -> Any:
    """The next frame, or None at the end of the stream. Raises ``FrameError``."""
    head = _read_exactly(inp, _LEN.size)
    if head is None:
        return None
    (size,) = _LEN.unpack(head)
    if size > max_bytes:
        raise FrameError(f"a frame of {size:,} bytes, over the limit of {max_bytes:,}")
    data = _read_exactly(inp, size)
    if data is None:
        raise FrameError("the stream ended inside a frame")
    try:
        return json.loads(data.decode("utf-8", "surrogatepass"))
    except ValueError as exc:
        raise FrameError(f"a frame that is not JSON: {exc}") from None


def _read_exactly(inp: IO[bytes], n: int) -> bytes | None:
    parts: list[bytes] = []
    left = n
    while left:
        piece = inp.read(left)
        if not piece:
            if left == n and not parts:
                return None
            raise FrameError("the stream ended inside a frame")
        parts.append(piece)
        left -= len(piece)
    return b"".join(parts)


# -- bounds (in the worker) ----------------------------------------------------------------------
class _Budget:
    def __init__(self) -> None:
        self.nodes = 0
        self.cut = False


def bounded_value(value: Any, budget: _Budget | None = None, depth: int = 0) -> Any:
    """``value`` as JSON-able data within the metadata bounds (strings, items, depth, nodes)."""
    budget = budget if budget is not None else _Budget()
    budget.nodes += 1
    if budget.nodes > MAX_META_NODES or depth > MAX_META_DEPTH:
        budget.cut = True
        return None
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        if len(value) > MAX_META_STRING:
            budget.cut = True
            return value[:MAX_META_STRING]
        return value
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for n, (key, item) in enumerate(value.items()):
            if n >= MAX_META_ITEMS:
                budget.cut = True
                break
            out[str(key)[:MAX_HEADING_CHARS]] = bounded_value(item, budget, depth + 1)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value)
        if len(items) > MAX_META_ITEMS:
            budget.cut = True
            items = items[:MAX_META_ITEMS]
        return [bounded_value(item, budget, depth + 1) for item in items]
    return bounded_value(str(value), budget, depth)


def bounded_document(doc: Document) -> dict[str, Any]:
    """What the daemon needs of a parsed document (its text travels as chunks), bounded."""
    budget = _Budget()
    metadata = bounded_value(dict(doc.metadata), budget)
    warnings = list(dict.fromkeys(doc.warnings))[:64]
    if budget.cut and META_TRUNCATED not in warnings:
        warnings.append(META_TRUNCATED)
    return {"title": doc.title[:MAX_TITLE_CHARS], "source_type": doc.source_type[:64],
            "metadata": metadata, "body_offset": int(doc.body_offset),
            "date": doc.date[:32] if doc.date else None,
            "warnings": [str(w)[:64] for w in warnings]}


def bounded_chunks(chunks: Sequence[ChunkDraft]) -> list[list[Any]]:
    return [[c.ordinal, c.text, c.embed_text,
             [h[:MAX_HEADING_CHARS] for h in c.heading_path[:MAX_HEADINGS]],
             c.start, c.end, c.token_count] for c in chunks]


# -- decoding (in the daemon: a frame is checked before it is used) -----------------------------
def document_from(d: Any) -> Document:
    """The ``Document`` a worker described (without its text: chunks carry it)."""
    if not isinstance(d, dict):
        raise FrameError("a document that is not an object")
    meta = d.get("metadata")
    return Document(title=str(d.get("title") or "")[:MAX_TITLE_CHARS], text="",
                    source_type=str(d.get("source_type") or "")[:64],
                    metadata=meta if isinstance(meta, dict) else {},
                    body_offset=_int(d.get("body_offset")),
                    date=str(d["date"])[:32] if d.get("date") else None,
                    warnings=tuple(str(w)[:64] for w in (d.get("warnings") or ())[:64]))


def chunks_from(rows: Any) -> list[ChunkDraft]:
    if not isinstance(rows, list):
        raise FrameError("chunks that are not a list")
    out: list[ChunkDraft] = []
    for row in rows:
        if not isinstance(row, list) or len(row) != 7:
            raise FrameError("a chunk that is not a 7-item list")
        ordinal, text, embed, heads, start, end, tokens = row
        if not isinstance(text, str) or not isinstance(embed, str) \
                or not isinstance(heads, list):
            raise FrameError("a chunk with fields of the wrong type")
        out.append(ChunkDraft(_int(ordinal), text, embed,
                              tuple(str(h)[:MAX_HEADING_CHARS] for h in heads[:MAX_HEADINGS]),
                              _int(start), _int(end), _int(tokens)))
    return out


def skip_from(d: dict[str, Any]) -> Skip:
    return Skip(str(d.get("code") or "parse_error")[:64], str(d.get("detail") or "")[:2000])


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FrameError(f"expected an integer, got {type(value).__name__}")
    return value
