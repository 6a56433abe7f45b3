"""The calibre collection's kind: a book is a document keyed by its Calibre id (decision 0018).

Each book's folder is a container (decision 0015) holding one document, ``calibre:<id>``. The
walk is one read of ``metadata.db`` (``ragd.daemon.sources.calibredb``); a book's container size and
mtime come from the file of its chosen format and from its ``last_modified``, so an edit in
Calibre or a file replaced in place marks it changed and nothing else is looked at. What is
embedded is the chosen format's text, converted through the doc store (cached by the file's
bytes), then the description; the metadata (authors, tags, series, ...) lives on the source,
so an edit that leaves the text alone re-embeds nothing but the small properties chunk.

Nothing of a book is parsed here (decision 0025): its file, converted by ``ebook-convert`` when
ragd cannot read its format, becomes chapters in the conversion worker
(``ragd.daemon.convert.calibrebook``), and its HTML description becomes text there too, bounded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragd.daemon.convert.bounds import TRUNCATED, cut, text_budget
from ragd.daemon.convert.calibrebook import book_format
from ragd.daemon.convert.formats import Format, format_for
from ragd.daemon.convert.htmltext import html_text
from ragd.daemon.models import Document, FileState, Skip
from ragd.daemon.sources.calibredb import Book, book_uri, pub_day, read_library, timestamp_ns
from ragd.daemon.sources.containment import open_inside
from ragd.daemon.sources.entry import Entry
from ragd.daemon.sources.files import WalkResult, read_bytes
from ragd.daemon.sources.mailkind import cut_text_bytes

if TYPE_CHECKING:
    from ragd.daemon.convert.documents import Documents

log = logging.getLogger(__name__)

DEFAULT_FORMATS = ("EPUB", "AZW3", "MOBI", "PDF", "TXT")
# Formats Calibre's ebook-convert turns into EPUB when no format we read is there.
CONVERTIBLE = ("AZW3", "AZW", "MOBI", "KFX", "FB2", "LIT", "PDB", "LRF", "RTF", "ODT", "CBZ",
               "DJVU", "SNB", "TCR")
# A description is a blurb of a few hundred words; what a hostile metadata.db holds is cut.
MAX_DESCRIPTION_HTML = 1_000_000
MAX_DESCRIPTION_CHARS = 100_000
SERIES_TAG = "series/"  # a book in series S also has the tag "series/s" (the tag filter)


def book_tags(book: Book) -> list[str]:
    """The book's tags as the tag filter matches them (lower case), with its series as the
    nested tag ``series/<name>``: ``tags=["series/foundation"]`` finds the series."""
    tags = [t.strip().lower() for t in book.tags if t.strip()]
    if book.series.strip():
        tags.append(SERIES_TAG + book.series.strip().lower().replace(",", " "))
    return list(dict.fromkeys(tags))


class CalibreKind:
    """One Calibre library: ``metadata.db`` and the book folders beside it."""

    kind = "calibre"

    def __init__(self, docs: Documents | None = None, *,
                 formats: Sequence[str] = DEFAULT_FORMATS,
                 ebook_convert: str | None = None,
                 html_to_text: Callable[[str], str] | None = None) -> None:
        self.docs = docs
        self.formats = tuple(f.strip().upper() for f in formats if f.strip())
        self.ebook_convert = ebook_convert if ebook_convert is not None else (
            shutil.which("ebook-convert") or "")
        self.html_to_text = html_to_text  # None: the conversion worker (bounded)
        self._books: dict[str, tuple[Book, str | None]] = {}  # folder -> (book, format)

    # -- containers -----------------------------------------------------------------------------
    def walk(self, root: Path, *, should_stop: Callable[[], bool] | None = None,
             max_entries: int | None = None) -> WalkResult:
        """One container per book: its folder, with a size and mtime that change when the
        chosen file or the book's ``last_modified`` does. Raises ``LibraryBusy`` while
        Calibre holds a write lock (nothing is changed then)."""
        self._books = {}
        files: list[FileState] = []
        for book in read_library(root):
            if not book.path:
                continue
            fmt = self.choose_format(book)
            size = mtime = 0
            if fmt is not None:
                st = _stat(root, book.file_rel(fmt))
                if st is None:
                    fmt = None
                else:
                    size, mtime = st
            mtime = max(mtime, timestamp_ns(book.last_modified))
            self._books[book.path] = (book, fmt)
            files.append(FileState(book.path, size, mtime))
        return WalkResult(files, [])

    @staticmethod
    def hint_scope(paths: Sequence[str]) -> None:
        """Any change under the library (``metadata.db`` above all) means: read the list of
        books again. That is one query, and unchanged books are not looked at."""
        return None

    def appendable(self, rel: str) -> bool:
        return False

    def walk_state(self, paths: Sequence[str]) -> dict[str, Any]:
        """The books ``paths`` name as the walk read them from metadata.db: an extraction
        worker reads them with a kind of its own (decision 0041)."""
        return {p: [dataclasses.asdict(self._books[p][0]), self._books[p][1]]
                for p in paths if p in self._books}

    def take_walk_state(self, state: dict[str, Any]) -> None:
        self._books = {}
        for path, (fields, fmt) in state.items():
            for name in ("authors", "tags", "languages"):
                fields[name] = tuple(fields.get(name) or ())
            self._books[path] = (Book(**fields), fmt)

    def choose_format(self, book: Book) -> str | None:
        """The first format of the configured order the book has; else one ebook-convert
        can read (when it is installed); else None (metadata and description only)."""
        readable = [f for f in book.formats if self._readable(f)]
        for fmt in self.formats:
            if fmt in readable:
                return fmt
        for fmt in sorted(readable):
            if fmt not in CONVERTIBLE:  # one the doc store reads (DOCX, HTML, ...)
                return fmt
        return next((f for f in CONVERTIBLE if f in readable), None)

    def _readable(self, fmt: str) -> bool:
        if fmt in CONVERTIBLE:  # MOBI and AZW3 too, although the doc store knows them
            return bool(self.ebook_convert)
        known = format_for("x." + fmt.lower())
        return known is not None and known.name != "image"

    def entries(self, root: Path, rel: str, start: int) -> Iterator[Entry]:
        found = self._books.get(rel)
        if found is None:
            return
        book, fmt = found
        file_state = _stat(root, book.file_rel(fmt)) if fmt else None
        digest = hashlib.sha256(json.dumps(
            [book.metadata_key(), fmt, file_state, self.formats], ensure_ascii=False,
            default=str).encode("utf-8")).hexdigest()
        location = self.location_metadata(root, f"calibre:{book.id}", rel, "")
        yield Entry(f"calibre:{book.id}", "", digest, 0,
                    lambda: self.document(root, book, fmt), location)

    def location_metadata(self, root: Path, key: str, container: str,
                          locator: str) -> dict[str, Any]:
        return {"folder": container}

    # -- documents ------------------------------------------------------------------------------
    def document(self, root: Path, book: Book, fmt: str | None) -> Document:
        """The book as the pipeline chunks it: its text, then its description; the metadata
        on the source. A book whose text cannot be read is still found by its metadata."""
        warnings: list[str] = []
        body, source_type = "", "book"
        extra: dict[str, Any] = {}
        if fmt is None:
            if book.formats:
                warnings.append("calibre_no_readable_format")
        else:
            text = self._text(root, book, fmt, warnings)
            if text is not None:
                body, source_type, extra = text
        parts = [body.strip()]
        description = self.description(book.comments, warnings)
        if description:
            parts.append("# Description\n\n" + description)
        file_uri = ""
        if fmt is not None:
            file_uri = (root / book.file_rel(fmt)).resolve().as_uri()
        metadata: dict[str, Any] = {
            **extra, "calibre_id": book.id, "uuid": book.uuid, "authors": list(book.authors),
            "tags": book_tags(book), "calibre_tags": list(book.tags),
            "series": book.series or None,
            "series_index": book.series_index if book.series else None,
            "publisher": book.publisher or None, "languages": list(book.languages),
            "identifiers": dict(book.identifiers), "format": fmt, "formats": sorted(book.formats),
            "folder": book.path, "library": str(root),
            "source_uri": book_uri(root, book.id, fmt), "file_uri": file_uri or None,
            # What the properties chunk shows: found by a search for the author or series
            # even when the text is not readable.
            "frontmatter": {"authors": list(book.authors),
                            "series": (f"{book.series} #{book.series_index:g}"
                                       if book.series else None),
                            "publisher": book.publisher or None},
        }
        return Document(title=book.title.strip() or f"Book {book.id}",
                        text="\n\n".join(p for p in parts if p), source_type=source_type,
                        metadata=metadata, date=pub_day(book.pubdate),
                        warnings=tuple(dict.fromkeys(warnings)))

    def description(self, html: str, warnings: list[str]) -> str:
        """A book's HTML description as text: in the conversion worker, bounded
        (``description_truncated``, ``description_stripped``)."""
        if not html.strip():
            return ""
        if len(html) > MAX_DESCRIPTION_HTML:
            html = html[:MAX_DESCRIPTION_HTML]
            warnings.append("description_truncated")
        if self.html_to_text is not None:
            text = self.html_to_text(html)
        else:
            converter = self.docs.store.converter if self.docs is not None else None
            text = html_text(html, converter, warnings=warnings, stripped="description_stripped")
        text, was_cut = cut(text.strip(), MAX_DESCRIPTION_CHARS)
        if was_cut:
            warnings.append("description_truncated")
        return text

    def _text(self, root: Path, book: Book, fmt: str, warnings: list[str]
              ) -> tuple[str, str, dict[str, Any]] | None:
        """(markdown, source type, conversion metadata) of one format, or None (a warning
        says why). An EPUB, or a format ebook-convert turns into one, is read as chapters."""
        if self.docs is None:
            return None
        rel = book.file_rel(fmt)
        data = read_bytes(root, rel, self.docs.settings.max_file_bytes)
        if isinstance(data, Skip):
            warnings.append("text_" + data.code)
            return None
        target: Format | None = format_for(rel)
        if target is None or fmt in CONVERTIBLE:
            if not self.ebook_convert:
                warnings.append("calibre_no_readable_format")
                return None
            target = book_format(fmt)
        elif target.name == "epub":
            target = book_format("epub")
        elif not target.in_worker:  # a TXT book is decoded here: never past its budget
            budget_bytes = 4 * text_budget(len(data))
            if len(data) > budget_bytes:
                data = cut_text_bytes(data, budget_bytes)
                warnings.append(TRUNCATED)
        conv = self.docs.store.convert(data, target, source_path=str(root / rel))
        if isinstance(conv, Skip):
            warnings.append("text_" + conv.code)
            return None
        if not conv.markdown.strip():
            warnings.append("text_no_text")
            return None
        if TRUNCATED in conv.metadata:
            warnings.append(TRUNCATED)
        meta = {k: v for k, v in conv.metadata.items() if k in ("pages", "chapters")}
        return conv.markdown, conv.source_type, {**meta, "content_hash": conv.content_hash}


def _stat(root: Path, rel: str) -> tuple[int, int] | None:
    """(size, mtime_ns) of a file inside the library; None when it is missing or outside."""
    opened = open_inside(root, rel)
    if isinstance(opened, Skip):
        return None
    fd, st = opened
    os.close(fd)
    return int(st.st_size), int(st.st_mtime_ns)
