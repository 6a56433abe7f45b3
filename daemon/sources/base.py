"""What every kind of source provides, and the shared, careful way of reading a file."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ragd.daemon.models import Document, Skip
from ragd.daemon.sources.entry import Entry
from ragd.daemon.sources.files import WalkResult, read_bytes, sha256_inside, walk_vault
from ragd.daemon.sources.vault import obsidian_uri, parse_note

if TYPE_CHECKING:
    from ragd.daemon.convert.documents import Documents


class SourceKind(Protocol):
    """A kind of collection: how to list its files, parse one, and link to it."""

    kind: str

    def walk(self, root: Path, *, should_stop: Callable[[], bool] | None = None,
             max_entries: int | None = None) -> WalkResult: ...

    def parse(self, rel: str, data: bytes) -> Document | Skip: ...

    def uri(self, root: Path, rel: str) -> str: ...

    def max_bytes(self, rel: str, default: int) -> int: ...


@runtime_checkable
class ContainerKind(Protocol):
    """A kind whose files hold documents with keys of their own: mail (a message, keyed by
    its Message-ID), and after it books and feed entries. The vault and folder kinds are the
    case of one document per file keyed by its path, and keep ``SourceKind``."""

    kind: str

    def walk(self, root: Path, *, should_stop: Callable[[], bool] | None = None,
             max_entries: int | None = None) -> WalkResult: ...

    def appendable(self, rel: str) -> bool: ...

    def entries(self, root: Path, rel: str, start: int) -> Iterator[Entry]: ...

    def location_metadata(self, root: Path, key: str, container: str,
                          locator: str) -> dict[str, Any]: ...


def read_source_bytes(root: Path, rel: str, max_bytes: int) -> bytes | Skip:
    """Read ``root/rel`` for indexing: inside the root only, size checked first, never blocking
    on a FIFO (``ragd.daemon.sources.containment``)."""
    return read_bytes(root, rel, max_bytes)


def sha256_file(root: Path, rel: str) -> str | None:
    """Content hash for reconcile; None when the file cannot be read now (or is outside)."""
    return sha256_inside(root, rel)


class _DocumentsMixin:
    """Documents (PDF, DOCX, EPUB, ...) beside the notes, read through the doc store when the
    kind has one (``ragd.daemon.convert``); without one, only notes are listed."""

    note_suffixes: tuple[str, ...]

    def __init__(self, exclude: Sequence[str], docs: Documents | None = None,
                 root: Path | None = None) -> None:
        self.exclude = tuple(exclude)
        self.docs = docs
        self.root = root

    def walk(self, root: Path, *, should_stop: Callable[[], bool] | None = None,
             max_entries: int | None = None) -> WalkResult:
        return walk_vault(root, exclude=self.exclude, suffixes=self.suffixes,
                          should_stop=should_stop, max_entries=max_entries)

    @property
    def suffixes(self) -> tuple[str, ...]:
        docs = self.docs.suffixes if self.docs is not None and self.root is not None else ()
        return self.note_suffixes + docs

    def is_document(self, rel: str) -> bool:
        return self.docs is not None and self.root is not None and self.docs.is_document(rel)

    def max_bytes(self, rel: str, default: int) -> int:
        if self.docs is not None and self.is_document(rel):
            return self.docs.settings.max_file_bytes
        return default

    def parse_document(self, rel: str, data: bytes) -> Document | Skip:
        assert self.docs is not None and self.root is not None
        return self.docs.parse(self.root, rel, data)


class VaultKind(_DocumentsMixin):
    """An Obsidian vault: markdown notes and their attachments; links open in Obsidian."""

    kind = "vault"
    note_suffixes = (".md",)

    def parse(self, rel: str, data: bytes) -> Document | Skip:
        if self.is_document(rel):
            return self.parse_document(rel, data)
        return parse_note(rel, data)

    def uri(self, root: Path, rel: str) -> str:
        return obsidian_uri(root.name, rel)


class FolderKind(_DocumentsMixin):
    """A project folder: markdown, plain text and documents; links are file:// URIs."""

    kind = "folder"
    note_suffixes = (".md", ".markdown", ".txt")

    def parse(self, rel: str, data: bytes) -> Document | Skip:
        if self.is_document(rel):
            return self.parse_document(rel, data)
        doc = parse_note(rel, data)
        if isinstance(doc, Document) and rel.lower().endswith(".txt"):
            return Document(title=doc.title, text=doc.text, source_type="txt",
                            metadata=doc.metadata, body_offset=doc.body_offset, date=doc.date,
                            warnings=doc.warnings)
        return doc

    def uri(self, root: Path, rel: str) -> str:
        return (root / rel).resolve().as_uri()


def kind_for(name: str, exclude: Sequence[str], docs: Documents | None = None,
             root: Path | None = None, *, only: str | None = None,
             formats: Sequence[str] | None = None, rss: Any = None
             ) -> SourceKind | ContainerKind:
    """The kind of a collection; with ``docs`` (and the collection's ``root``) it also reads
    the documents beside the notes (and mail attachments). ``only`` limits a mail collection
    to one file of its root (an mbox or .eml configured by itself); ``formats`` is a Calibre
    library's order of preferred book formats; ``rss`` the ``[rss]`` settings."""
    if name == "rss":
        from ragd.daemon.sources.rss import RssKind

        if rss is None:
            return RssKind(docs, only=only)
        return RssKind(docs, only=only, max_entries=rss.max_entries,
                       max_feed_bytes=int(rss.max_feed_mb * 1024 * 1024))
    if name == "calibre":
        from ragd.daemon.sources.calibre import DEFAULT_FORMATS, CalibreKind

        return CalibreKind(docs, formats=formats or DEFAULT_FORMATS)
    if name == "mail":
        from ragd.daemon.sources.mailkind import MailKind

        return MailKind(docs, only=only)
    if name == "vault":
        return VaultKind(exclude, docs, root)
    if name == "folder":
        return FolderKind(exclude, docs, root)
    raise ValueError(f"unknown source kind {name!r}")
