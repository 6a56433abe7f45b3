"""What every kind of source provides, and the shared, careful way of reading a file."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from daemon.models import Document, Skip
from daemon.sources.files import WalkResult, read_bytes, sha256_inside, walk_vault
from daemon.sources.vault import obsidian_uri, parse_note


class SourceKind(Protocol):
    """A kind of collection: how to list its files, parse one, and link to it."""

    kind: str

    def walk(self, root: Path, *, should_stop: Callable[[], bool] | None = None,
             max_entries: int | None = None) -> WalkResult: ...

    def parse(self, rel: str, data: bytes) -> Document | Skip: ...

    def uri(self, root: Path, rel: str) -> str: ...


def read_source_bytes(root: Path, rel: str, max_bytes: int) -> bytes | Skip:
    """Read ``root/rel`` for indexing: inside the root only, size checked first, never blocking
    on a FIFO (``daemon.sources.containment``)."""
    return read_bytes(root, rel, max_bytes)


def sha256_file(root: Path, rel: str) -> str | None:
    """Content hash for reconcile; None when the file cannot be read now (or is outside)."""
    return sha256_inside(root, rel)


class VaultKind:
    """An Obsidian vault: markdown notes; links open in Obsidian."""

    kind = "vault"

    def __init__(self, exclude: Sequence[str]) -> None:
        self.exclude = tuple(exclude)

    def walk(self, root: Path, *, should_stop: Callable[[], bool] | None = None,
             max_entries: int | None = None) -> WalkResult:
        return walk_vault(root, exclude=self.exclude, should_stop=should_stop,
                          max_entries=max_entries)

    def parse(self, rel: str, data: bytes) -> Document | Skip:
        return parse_note(rel, data)

    def uri(self, root: Path, rel: str) -> str:
        return obsidian_uri(root.name, rel)


class FolderKind:
    """A project folder: markdown and plain text for now; links are file:// URIs."""

    kind = "folder"
    suffixes = (".md", ".markdown", ".txt")

    def __init__(self, exclude: Sequence[str]) -> None:
        self.exclude = tuple(exclude)

    def walk(self, root: Path, *, should_stop: Callable[[], bool] | None = None,
             max_entries: int | None = None) -> WalkResult:
        return walk_vault(root, exclude=self.exclude, suffixes=self.suffixes,
                          should_stop=should_stop, max_entries=max_entries)

    def parse(self, rel: str, data: bytes) -> Document | Skip:
        doc = parse_note(rel, data)
        if isinstance(doc, Document) and rel.lower().endswith(".txt"):
            return Document(title=doc.title, text=doc.text, source_type="txt",
                            metadata=doc.metadata, body_offset=doc.body_offset, date=doc.date,
                            warnings=doc.warnings)
        return doc

    def uri(self, root: Path, rel: str) -> str:
        return (root / rel).resolve().as_uri()


def kind_for(name: str, exclude: Sequence[str]) -> SourceKind:
    if name == "vault":
        return VaultKind(exclude)
    if name == "folder":
        return FolderKind(exclude)
    raise ValueError(f"unknown source kind {name!r}")
