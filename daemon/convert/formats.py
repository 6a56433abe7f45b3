"""Which files ragd converts, what each becomes, and the check of a path given to rag_convert.

Standard library only: the MCP bridge imports it to refuse a bad path before the daemon is
asked (the daemon checks again).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass

from ragd.daemon.errors import InvalidArgument


@dataclass(frozen=True)
class Format:
    """A document format: its name, the ``source_type`` its chunks get, the converter's version
    (part of the doc store key: bump it whenever the markdown produced for the same bytes
    changes), and whether it runs in the worker process (everything that parses binary or
    untrusted structure does)."""

    name: str
    source_type: str
    version: str
    in_worker: bool = True


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("pdf", "pdf", "1"),
    Format("docx", "docx", "1"),
    Format("pptx", "pptx", "1"),
    Format("xlsx", "xlsx", "1"),
    Format("html", "html", "2"),
    Format("epub", "epub", "2"),
    # Kindle books: EPUB through Calibre's ebook-convert, when it is installed, then read as
    # an EPUB (books.convert_mobi). Bump it with epub's.
    Format("mobi", "mobi", "1"),
    Format("latex", "latex", "2"),
    Format("csv", "csv", "1"),
    Format("image", "image", "1"),
    Format("markdown", "markdown", "1", in_worker=False),
    Format("txt", "txt", "1", in_worker=False),
)}

SUFFIXES: dict[str, str] = {
    ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx", ".xlsm": "xlsx",
    ".html": "html", ".htm": "html", ".xhtml": "html", ".epub": "epub", ".mobi": "mobi",
    ".azw": "mobi", ".azw3": "mobi", ".tex": "latex",
    ".latex": "latex", ".csv": "csv", ".md": "markdown", ".markdown": "markdown",
    ".txt": "txt", ".text": "txt", ".png": "image", ".jpg": "image", ".jpeg": "image",
    ".tif": "image", ".tiff": "image", ".bmp": "image", ".gif": "image", ".webp": "image",
}

# What collections index through the doc store (markdown and text are read as notes).
DOCUMENT_SUFFIXES: tuple[str, ...] = tuple(
    s for s, f in SUFFIXES.items() if f not in ("markdown", "txt", "image"))
IMAGE_SUFFIXES: tuple[str, ...] = tuple(s for s, f in SUFFIXES.items() if f == "image")

# The page heading the PDF converter writes before each page's text; search reads the page
# number back from a chunk's heading path (a chunk never spans two headings). A Calibre EPUB's
# chapters are "# Chapter N" (ragd.daemon.convert.calibrebook): its page_number is the chapter.
PAGE_HEADING = "Page {n}"
_PAGE = re.compile(r"(?:Page|Chapter) (\d{1,6})")
PAGED_SOURCE_TYPES = frozenset({"pdf", "epub"})


@dataclass(frozen=True)
class PdfOcr:
    """OCR of the pages of a PDF that have no text layer ([documents] ocr_pdfs, decision 0044):
    at most ``max_pages`` pages, and none begun after ``budget_s`` seconds of the conversion
    (the worker is killed at the conversion's time limit; what was read before is kept)."""

    max_pages: int = 50
    budget_s: float = 90.0

    @property
    def variant(self) -> str:
        """Part of the doc store key: a PDF read with OCR (or with another page limit) is
        another conversion than the same PDF read without."""
        return f"ocr{self.max_pages}"

    @property
    def worker_format(self) -> str:
        """The format the worker is sent: ``pdf+ocr:<max pages>:<budget s>``."""
        return f"{PDF_OCR_PREFIX}{self.max_pages}:{self.budget_s:g}"

    @classmethod
    def parse(cls, fmt: str) -> PdfOcr | None:
        """The options of a worker format ``pdf+ocr:<pages>:<seconds>``; None for any other."""
        if not fmt.startswith(PDF_OCR_PREFIX):
            return None
        try:
            pages, budget = fmt[len(PDF_OCR_PREFIX):].split(":")
            return cls(max(1, int(pages)), max(0.0, float(budget)))
        except ValueError:
            return None

    @classmethod
    def within(cls, timeout_s: float, max_pages: int) -> PdfOcr:
        """Options that stop OCR short of the conversion's time limit ``timeout_s``: the text
        read so far is kept, where a killed worker would keep nothing."""
        return cls(max_pages, max(timeout_s / 2, timeout_s - 20.0))


PDF_OCR_PREFIX = "pdf+ocr:"
# Why OCR of a PDF stopped before its last page without text (its metadata's ``ocr_stopped``).
# Out of time and no Tesseract depend on the moment: the doc store does not keep such a
# conversion, so the next read of the file tries the whole document again.
OCR_PAGE_LIMIT, OCR_TIME, OCR_TESSERACT_MISSING = "page_limit", "time", "tesseract_missing"
OCR_STOPPED_FOR_NOW = frozenset({OCR_TIME, OCR_TESSERACT_MISSING})


def format_for(name: str) -> Format | None:
    """The format of a file name (by suffix, ignoring case), or None when it is not supported."""
    suffix = os.path.splitext(name)[1].lower()
    key = SUFFIXES.get(suffix)
    return FORMATS[key] if key else None


def page_number(source_type: str, heading_path: tuple[str, ...] | list[str]) -> int | None:
    """The page a chunk of a paged document comes from, read from its heading path."""
    if source_type not in PAGED_SOURCE_TYPES or not heading_path:
        return None
    m = _PAGE.fullmatch(heading_path[0])
    return int(m.group(1)) if m else None


def supported_list() -> str:
    return ", ".join(sorted(SUFFIXES))


def check_convert_path(raw: object, param: str = "file_path") -> str:
    """The absolute path of a readable regular file in a supported format; else a clear
    ``InvalidArgument`` (relative, missing, a folder, a device or pipe, unreadable,
    unsupported). Returns the path with links resolved."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidArgument(param, "is required and must be a non-empty string",
                              "pass the absolute path of the document to convert")
    path = os.path.expanduser(raw.strip())
    if not os.path.isabs(path):
        raise InvalidArgument(param, f"{raw!r} is relative",
                              "pass the absolute path of the document (the MCP server's "
                              "working directory is not yours)")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InvalidArgument(param, f"{path!r} does not exist",
                              "pass the absolute path of an existing file") from None
    except OSError as exc:
        raise InvalidArgument(param, f"{path!r} cannot be read: {exc.strerror}",
                              "check the file's permissions") from None
    if stat.S_ISDIR(st.st_mode):
        raise InvalidArgument(param, f"{path!r} is a folder, not a file",
                              "pass one document; to search a whole folder, index it with "
                              "rag_index(collection, path)")
    if not stat.S_ISREG(st.st_mode):
        kind = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
                stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket"}.get(
                    stat.S_IFMT(st.st_mode), "not a regular file")
        raise InvalidArgument(param, f"{path!r} is {kind}, not a document",
                              "pass the path of a regular file")
    if format_for(path) is None:
        raise InvalidArgument(param, f"{os.path.basename(path)!r} is not a supported "
                              "document type", f"supported: {supported_list()}")
    if not os.access(path, os.R_OK):
        raise InvalidArgument(param, f"{path!r} is not readable",
                              "check the file's permissions")
    return os.path.realpath(path)
