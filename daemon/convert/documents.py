"""Documents as sources (a collection's PDFs, DOCX, ...) through the doc store.

The bytes come read already, inside the collection's root (``ragd.daemon.sources.containment``);
one document on request (rag_convert) is ``ragd.daemon.sources.on_request``.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragd.daemon.convert.bounds import TRUNCATED
from ragd.daemon.convert.docstore import Conversion, DocStore
from ragd.daemon.convert.formats import (
    DOCUMENT_SUFFIXES,
    IMAGE_SUFFIXES,
    PdfOcr,
    format_for,
)
from ragd.daemon.models import Document, Skip

if TYPE_CHECKING:
    from ragd.daemon.settings.config import Config


def file_stem(rel: str) -> str:
    """A document's name without its suffix: its title when it has none of its own."""
    name = rel.rpartition("/")[2]
    stem, suffix = os.path.splitext(name)
    return stem if suffix else name


def document_from(conv: Conversion, rel: str) -> Document:
    """The ``Document`` the pipeline chunks: the markdown, the document's own title (else the
    file name), its source type and metadata (pages, authors, ...)."""
    metadata: dict[str, Any] = {"folder": rel.rpartition("/")[0], "format": conv.format,
                                "content_hash": conv.content_hash, **conv.metadata}
    warnings = (TRUNCATED,) if TRUNCATED in conv.metadata else ()
    return Document(title=conv.title or file_stem(rel), text=conv.markdown,
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
