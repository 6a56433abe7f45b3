"""What every kind of source provides, and the shared, careful way of reading a file."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from daemon.models import Document, Skip
from daemon.sources.files import WalkResult, read_bytes, walk_vault
from daemon.sources.vault import obsidian_uri, parse_note


class SourceKind(Protocol):
    """A kind of collection: how to list its files, parse one, and link to it."""

    kind: str

    def walk(self, root: Path) -> WalkResult: ...

    def parse(self, rel: str, data: bytes) -> Document | Skip: ...

    def uri(self, root: Path, rel: str) -> str: ...


def read_source_bytes(path: Path, max_bytes: int) -> bytes | Skip:
    """Read a file for indexing (size checked first, never blocking on a FIFO)."""
    return read_bytes(str(path), max_bytes)


def sha256_file(path: Path) -> str | None:
    """Content hash for reconcile; None when the file cannot be read now."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


class VaultKind:
    """An Obsidian vault: markdown notes; links open in Obsidian."""

    kind = "vault"

    def __init__(self, exclude: Sequence[str]) -> None:
        self.exclude = tuple(exclude)

    def walk(self, root: Path) -> WalkResult:
        return walk_vault(root, exclude=self.exclude)

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

    def walk(self, root: Path) -> WalkResult:
        return walk_vault(root, exclude=self.exclude, suffixes=self.suffixes)

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
