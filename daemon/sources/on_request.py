"""One document on request (rag_convert, `ragd convert`), through the doc store.

The file is read only inside the folder that lets the caller read it
(``ragd.daemon.settings.policy.convert_target``), as the regular file it names
(``ragd.daemon.sources.containment``); a long document's markdown is answered in pieces.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ragd.daemon.convert.bounds import cut
from ragd.daemon.convert.docstore import Conversion, DocStore
from ragd.daemon.convert.documents import file_stem
from ragd.daemon.convert.formats import format_for, supported_list
from ragd.daemon.errors import PathRefused, RagdError
from ragd.daemon.models import Skip
from ragd.daemon.settings.policy import Reach, Target, convert_target, path_kind
from ragd.daemon.sources.files import read_bytes


class ConversionFailed(RagdError):
    """rag_convert could not convert the file: the message carries its skip code."""

    code = "conversion_failed"


# One rag_convert answer carries at most this much markdown unless the caller says otherwise
# ([convert] max_reply_chars); the command line reads a long document in pieces of this size.
REPLY_CHARS = 200_000


def _refusal(target: Target, skip: Skip) -> RagdError:
    """A read that failed, as the error the caller sees (its code is the skip's, but for a
    missing file)."""
    real = os.path.join(target.root, *target.rel.split("/"))
    named = target.named
    if skip.code in ("vanished", "broken_link"):
        dangling = skip.code == "broken_link" or os.path.islink(named)
        what = "is a link to nothing" if dangling else "does not exist"
        return PathRefused("file_path", f"{named} {what}",
                           "pass the absolute path of an existing file",
                           code="broken_link" if dangling else "not_found")
    if skip.code == "not_regular":
        kind = path_kind(real)
        hint = ("pass one document; to search a whole folder, index it with "
                "rag_index(collection, path)") if kind == "a folder" else \
            "pass the path of a regular file"
        return PathRefused("file_path", f"{named} is {kind}, not a file" if kind == "a folder"
                           else f"{named} is {kind}, not a document", hint, code="not_regular")
    if skip.code == "unreadable":
        return PathRefused("file_path", f"{named} cannot be read: {skip.detail}",
                           "check the file's permissions", code="unreadable")
    if skip.code in ("symlink_loop", "outside_root"):
        return PathRefused("file_path", f"{named}: {skip.detail}",
                           "pass the path of the document itself", code=skip.code)
    from ragd.daemon.skips import describe

    name = target.rel.rpartition("/")[2]
    return ConversionFailed(f"{name} cannot be converted ({skip.code}): {skip.detail}",
                            describe(skip.code))


def convert_file(docs: DocStore, file_path: object, *, max_bytes: int,
                 reach: Reach | None = None, keep_outside: bool = False, offset: int = 0,
                 max_chars: int = REPLY_CHARS) -> dict[str, Any]:
    """The rag_convert answer for ``file_path``: an absolute path to a regular file in a
    supported format, that ``reach`` lets the caller read (``ragd.daemon.settings.policy``; no
    reach: the command line, which reads any path). At most ``max_chars`` characters of the
    markdown from ``offset`` on; ``truncated`` says more follows, from ``next_offset``.

    The conversion is kept in the doc store when the file is in a collection or
    ``keep_outside`` says so; otherwise it is answered and forgotten (decision 0023). Every
    refusal is a ``PathRefused`` with a code, every failed conversion a ``ConversionFailed``.
    """
    target = convert_target(file_path, reach or Reach(restricted=False))
    name = target.rel.rpartition("/")[2]
    fmt = format_for(name) or format_for(target.named)
    if fmt is None:
        raise PathRefused("file_path", f"{os.path.basename(target.named)!r} is not a "
                          "supported document type", f"supported: {supported_list()}",
                          code="unsupported")
    data = read_bytes(target.root, target.rel, max_bytes)
    conv: Conversion | Skip
    if isinstance(data, Skip):
        raise _refusal(target, data)
    if not data:
        conv = Skip("empty", "file has zero bytes")
    else:
        mtime_ns = None
        with contextlib.suppress(OSError):
            mtime_ns = os.stat(os.path.join(target.root, *target.rel.split("/"))).st_mtime_ns
        keep = target.in_collection or keep_outside
        conv = docs.convert(data, fmt, source_path=target.named, mtime_ns=mtime_ns, keep=keep)
    if isinstance(conv, Skip):
        raise _refusal(target, conv)
    total = len(conv.markdown)
    start = min(max(0, offset), total)
    piece, cut_here = cut(conv.markdown[start:start + max_chars + 1], max_chars)
    end = start + len(piece)
    return {"file_path": target.named, "markdown": piece, "title": conv.title or file_stem(name),
            "source_type": conv.source_type, "content_hash": conv.content_hash,
            "cached": conv.cached, "chars": len(piece), "total_chars": total,
            "truncated": cut_here, "offset": start, "next_offset": end if cut_here else None,
            "kept": target.in_collection or keep_outside, "metadata": conv.metadata}
