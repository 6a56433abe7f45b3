"""Frozen data passed between the pure cores (sources, chunking, reconcile, search).

Only the standard library is imported here, so every layer may share these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Heading:
    """A markdown heading found in a note body."""

    level: int
    text: str
    start: int  # character offset of the heading line in the text
    end: int  # character offset just after the heading line


@dataclass(frozen=True)
class Document:
    """A source file read and parsed into markdown plus metadata.

    ``text`` is the body that gets chunked (frontmatter removed); ``body_offset`` is where the
    body starts in the decoded file so chunk offsets can be mapped back to the file.
    """

    title: str
    text: str
    source_type: str
    metadata: dict[str, Any] = field(default_factory=dict)
    body_offset: int = 0
    date: str | None = None  # ISO YYYY-MM-DD used by date filters
    warnings: tuple[str, ...] = ()  # skip codes of problems that did not stop indexing


@dataclass(frozen=True)
class Skip:
    """A file that could not be indexed: a stable code plus a human-readable detail."""

    code: str
    detail: str


@dataclass(frozen=True)
class ChunkDraft:
    """A chunk before it has an id: what the chunker produces."""

    ordinal: int
    text: str  # the chunk's own text, a slice of the document text
    embed_text: str  # what is embedded: title + heading path prefix + text
    heading_path: tuple[str, ...]
    start: int  # offsets into Document.text
    end: int
    token_count: int


@dataclass(frozen=True)
class FileState:
    """What the disk says about one file (reconcile input)."""

    path: str  # relative to the collection root, '/' separated
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class SourceRecord:
    """What the catalog says about one source (reconcile input)."""

    id: int
    path: str
    size: int
    mtime_ns: int
    sha256: str
    status: str
    skip_code: str | None = None
    indexed_at: float = 0.0  # when it was last read (for a skip: when it was skipped)


@dataclass(frozen=True)
class Filters:
    """What a search is restricted to (``ragd.daemon.search.filters`` builds and translates
    it; each keyword store applies it to its own fields)."""

    collections: tuple[str, ...] | None = None  # resolved collection names; None = all
    source_type: str | None = None
    date_from: int | None = None  # YYYYMMDD, inclusive
    date_to: int | None = None
    folder: str | None = None  # relative folder; matches everything below it
    tags: tuple[str, ...] = ()  # all must match; a parent tag matches nested ones
    sender: str | None = None  # case-insensitive substring
    author: str | None = None

    @property
    def active(self) -> bool:
        return any((self.collections is not None, self.source_type, self.date_from,
                    self.date_to, self.folder, self.tags, self.sender, self.author))
