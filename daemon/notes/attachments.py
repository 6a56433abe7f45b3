"""Reading a vault's attachments (reference 004's ``read``, decision 0045): what is not a note.

Reference 004 reads "a document or attachment by relative path" (its example is
``assets/diagram.pdf``): a document ragd converts (PDF, DOCX, EPUB, ...) is answered as its
markdown, from the doc store like ``rag_convert``; a text file (``.txt``, ``.canvas``,
``.json``) as its text; an image, or any other file, as base64 with its MIME type, so a
client that shows images can. Base64 is given for files up to ``MAX_INLINE_BYTES``; a larger
one is refused (``too_large``) with the limit, never cut.
"""

from __future__ import annotations

import base64
import mimetypes
import posixpath
import time
from typing import Any

from ragd.daemon.convert.formats import DOCUMENT_SUFFIXES, IMAGE_SUFFIXES
from ragd.daemon.notes import reading
from ragd.daemon.stores.catalog import Collection

MAX_INLINE_BYTES = 10 * 1024 * 1024
TEXT_SUFFIXES = (".txt", ".text", ".canvas", ".json", ".base", ".css", ".js", ".svg", ".yaml",
                 ".yml", ".csv", ".tsv", ".log")
_MIME = {".md": "text/markdown", ".canvas": "application/json", ".base": "text/yaml",
         ".webp": "image/webp", ".heic": "image/heic", ".epub": "application/epub+zip",
         ".mobi": "application/x-mobipocket-ebook", ".tex": "application/x-tex",
         ".yaml": "text/yaml", ".yml": "text/yaml"}


def is_note(rel: str) -> bool:
    return rel.lower().endswith(".md")


def mime_type(rel: str) -> str:
    """The MIME type a client is told for ``rel`` (from its extension)."""
    suffix = posixpath.splitext(rel.lower())[1]
    return _MIME.get(suffix) or mimetypes.guess_type(rel, strict=False)[0] or \
        "application/octet-stream"


def kind(rel: str) -> str:
    """How an attachment is answered: ``document`` (markdown of a conversion), ``text``,
    ``image`` or ``binary`` (both base64)."""
    lower = rel.lower()
    if lower.endswith(DOCUMENT_SUFFIXES) and not lower.endswith((".csv",)):
        return "document"
    if lower.endswith(IMAGE_SUFFIXES) or (mime_type(rel).startswith("image/")
                                          and not lower.endswith(".svg")):
        return "image"
    if lower.endswith(TEXT_SUFFIXES):
        return "text"
    return "binary"


def base(coll: Collection, rel: str, size: int, mtime: float, etag: str) -> dict[str, Any]:
    """The fields every attachment answer has, in the shape of a note read."""
    return {"vault": coll.name, "path": rel, "title": posixpath.basename(rel),
            "folder": rel.rpartition("/")[0], "kind": "attachment", "mime_type": mime_type(rel),
            "etag": etag, "size_bytes": size,
            "modified": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime)),
            "content": "", "content_base64": None, "section": None, "truncated": False,
            "total_chars": 0, "headings": [], "frontmatter": {}, "tags": [],
            "frontmatter_tags": [], "inline_tags": [], "aliases": [], "links": [],
            "backlinks": []}


def read_inline(coll: Collection, rel: str, max_chars: int) -> dict[str, Any]:
    """A text file as its text, an image or another file as base64 (``too_large`` past
    ``MAX_INLINE_BYTES``)."""
    loaded = reading.load(coll, rel, "path", max_bytes=MAX_INLINE_BYTES)
    out = base(coll, rel, loaded.size, loaded.mtime, loaded.etag)
    if kind(rel) == "text":
        try:
            text = loaded.data.decode("utf-8-sig")
        except UnicodeDecodeError:
            pass
        else:
            out.update(content=text[:max_chars], truncated=len(text) > max_chars,
                       total_chars=len(text))
            return out
    out["content_base64"] = base64.b64encode(loaded.data).decode("ascii")
    return out


def from_conversion(out: dict[str, Any], converted: dict[str, Any]) -> dict[str, Any]:
    """A document's answer: ``out`` (``base``) with the markdown ``rag_convert`` gave."""
    out.update(title=converted.get("title") or out["title"],
               content=converted.get("markdown") or "",
               truncated=bool(converted.get("truncated")),
               total_chars=int(converted.get("total_chars") or 0),
               source_type=converted.get("source_type"))
    return out
