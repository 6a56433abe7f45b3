"""Documents as sources (a collection's PDFs, DOCX, ...) and one document on request
(rag_convert), both through the doc store.

Every read goes through ``ragd.daemon.sources.containment.open_inside``: a collection's document
only inside the collection's root, a rag_convert file only inside the folder that lets the
caller read it (``ragd.daemon.settings.policy.convert_target``), as the regular file it names.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragd.daemon.convert.bounds import TRUNCATED, cut
from ragd.daemon.convert.docstore import Conversion, DocStore
from ragd.daemon.convert.formats import (
    DOCUMENT_SUFFIXES,
    IMAGE_SUFFIXES,
    PdfOcr,
    format_for,
    supported_list,
)
from ragd.daemon.errors import PathRefused, RagdError
from ragd.daemon.models import Document, Skip
from ragd.daemon.settings.policy import Reach, Target, convert_target, path_kind
from ragd.daemon.sources.files import read_bytes

if TYPE_CHECKING:
    from ragd.daemon.settings.config import Config


class ConversionFailed(RagdError):
    """rag_convert could not convert the file: the message carries its skip code."""

    code = "conversion_failed"


def _stem(rel: str) -> str:
    name = rel.rpartition("/")[2]
    stem, suffix = os.path.splitext(name)
    return stem if suffix else name


def document_from(conv: Conversion, rel: str) -> Document:
    """The ``Document`` the pipeline chunks: the markdown, the document's own title (else the
    file name), its source type and metadata (pages, authors, ...)."""
    metadata: dict[str, Any] = {"folder": rel.rpartition("/")[0], "format": conv.format,
                                "content_hash": conv.content_hash, **conv.metadata}
    warnings = (TRUNCATED,) if TRUNCATED in conv.metadata else ()
    return Document(title=conv.title or _stem(rel), text=conv.markdown,
                    source_type=conv.source_type, metadata=metadata, warnings=warnings)


def parse_document(docs: DocStore, root: str | os.PathLike[str], rel: str, data: bytes, *,
                   mtime_ns: int | None = None) -> Document | Skip:
    """Convert the bytes of ``root/rel`` (already read inside the root) through the doc
    store."""
    fmt = format_for(rel)
    if fmt is None:
        return Skip("parse_error", "not a supported document type")
    if not data:
        return Skip("empty", "file has zero bytes")
    conv = docs.convert(data, fmt, source_path=os.path.join(root, *rel.split("/")),
                        mtime_ns=mtime_ns)
    if isinstance(conv, Skip):
        return conv
    if not conv.markdown.strip():
        return Skip("no_text", "the document holds no text")
    return document_from(conv, rel)


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
    return {"file_path": target.named, "markdown": piece, "title": conv.title or _stem(name),
            "source_type": conv.source_type, "content_hash": conv.content_hash,
            "cached": conv.cached, "chars": len(piece), "total_chars": total,
            "truncated": cut_here, "offset": start, "next_offset": end if cut_here else None,
            "kept": target.in_collection or keep_outside, "metadata": conv.metadata}


@dataclass(frozen=True)
class DocumentSettings:
    """Limits of document conversion (decision 0013)."""

    max_file_bytes: int = 100 * 1024 * 1024  # a document over this is skipped as too_large
    timeout_s: float = 120.0  # per conversion; the worker is killed past it
    max_memory_mb: int = 2048  # the worker's address space (POSIX)
    images: bool = False  # index images found in collections (OCR, when Tesseract is there)
    ocr_pdfs: bool = False  # read a PDF's pages without a text layer by OCR (decision 0044)
    ocr_max_pages: int = 50

    @classmethod
    def from_config(cls, config: Config) -> DocumentSettings:
        """The limits of config.toml's [documents] section."""
        d = config.documents
        return cls(max_file_bytes=int(d.max_file_mb * 2**20), timeout_s=d.timeout_s,
                   max_memory_mb=d.max_memory_mb, images=d.images, ocr_pdfs=d.ocr_pdfs,
                   ocr_max_pages=d.ocr_max_pages)

    @property
    def pdf_ocr(self) -> PdfOcr | None:
        """OCR of scanned PDF pages, bounded to stop short of the conversion's time limit."""
        return PdfOcr.within(self.timeout_s, self.ocr_max_pages) if self.ocr_pdfs else None


class Documents:
    """What a source kind needs to read documents: the doc store and the limits."""

    def __init__(self, store: DocStore, settings: DocumentSettings | None = None) -> None:
        self.store = store
        self.settings = settings or DocumentSettings()

    @property
    def suffixes(self) -> tuple[str, ...]:
        """The file suffixes collections list as documents."""
        extra = IMAGE_SUFFIXES if self.settings.images else ()
        return DOCUMENT_SUFFIXES + extra

    def is_document(self, rel: str) -> bool:
        return rel.lower().endswith(self.suffixes)

    def parse(self, root: str | os.PathLike[str], rel: str, data: bytes) -> Document | Skip:
        mtime_ns = None
        with contextlib.suppress(OSError):
            mtime_ns = os.stat(os.path.join(root, *rel.split("/"))).st_mtime_ns
        return parse_document(self.store, root, rel, data, mtime_ns=mtime_ns)

    def close(self) -> None:
        self.store.close()


def open_documents(docstore_dir: Path, settings: DocumentSettings | None = None) -> Documents:
    """The doc store under ``docstore_dir`` with its conversion worker (started on first use)."""
    from ragd.daemon.convert.process import ConversionWorker

    settings = settings or DocumentSettings()
    worker = ConversionWorker(timeout_s=settings.timeout_s, memory_mb=settings.max_memory_mb)
    return Documents(DocStore(docstore_dir, worker, pdf_ocr=settings.pdf_ocr), settings)
