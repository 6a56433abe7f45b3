"""A source kind as a plain description, and the kind a worker rebuilds from it.

The daemon's kind objects hold what a worker cannot share (the doc store's connection, the
conversion worker): a worker gets what they were made from and makes its own. A kind this
module does not know (a test's fake) has no description and is read in the daemon, as before.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragd.daemon.convert.documents import Documents


def spec_of(kind: object, root: Path) -> dict[str, Any] | None:
    """The description of ``kind`` (a collection at ``root``), or None for one read here."""
    from ragd.daemon.sources.base import FolderKind, VaultKind

    name = type(kind).__name__
    spec: dict[str, Any]
    if isinstance(kind, VaultKind | FolderKind):
        spec = {"name": kind.kind, "exclude": list(kind.exclude),
                "docs": _docs_spec(kind.docs) if kind.root is not None else None}
    elif name == "MailKind" and getattr(kind, "html_to_text", None) is None:
        spec = {"name": "mail", "only": kind.only,  # type: ignore[attr-defined]
                "docs": _docs_spec(kind.docs)}  # type: ignore[attr-defined]
    elif name == "CalibreKind" and getattr(kind, "html_to_text", None) is None:
        spec = {"name": "calibre", "formats": list(kind.formats),  # type: ignore[attr-defined]
                "ebook_convert": kind.ebook_convert,  # type: ignore[attr-defined]
                "docs": _docs_spec(kind.docs)}  # type: ignore[attr-defined]
    elif name == "RssKind" and getattr(kind, "html_to_text", None) is None:
        spec = {"name": "rss", "only": kind.only,  # type: ignore[attr-defined]
                "max_entries": kind.max_entries,  # type: ignore[attr-defined]
                "max_feed_bytes": kind.max_feed_bytes,  # type: ignore[attr-defined]
                "docs": _docs_spec(kind.docs)}  # type: ignore[attr-defined]
    elif name == "CodeKind":
        spec = {"name": "code", "repos": dict(kind.repos),  # type: ignore[attr-defined]
                "settings": kind.settings.model_dump()}  # type: ignore[attr-defined]
    else:
        return None
    spec["root"] = str(root)
    return spec


def _docs_spec(docs: Documents | None) -> dict[str, Any] | None:
    if docs is None:
        return None
    return {"docstore": str(docs.store.root), "settings": dataclasses.asdict(docs.settings)}


class DocsCache:
    """One ``Documents`` per doc store in a worker (with its own conversion worker, started
    on first use), kept across items."""

    def __init__(self) -> None:
        self._docs: dict[str, Documents] = {}

    def get(self, spec: Mapping[str, Any] | None) -> Documents | None:
        if spec is None:
            return None
        key = json.dumps(spec, sort_keys=True)
        docs = self._docs.get(key)
        if docs is None:
            from ragd.daemon.convert.documents import DocumentSettings, open_documents

            settings = DocumentSettings(**spec["settings"])
            docs = self._docs[key] = open_documents(Path(spec["docstore"]), settings)
        return docs

    def close(self) -> None:
        for docs in self._docs.values():
            docs.close()
        self._docs.clear()


def kind_from_spec(spec: Mapping[str, Any], docs: DocsCache) -> Any:
    """The kind ``spec`` describes, made in this (worker) process."""
    name = spec["name"]
    root = Path(spec["root"])
    if name == "code":
        from ragd.daemon.settings.codegroups import CodeConfig
        from ragd.daemon.sources.code import CodeKind

        return CodeKind(spec["repos"], CodeConfig(**spec["settings"]))
    documents = docs.get(spec.get("docs"))
    if name == "calibre":
        from ragd.daemon.sources.calibre import CalibreKind

        return CalibreKind(documents, formats=spec["formats"],
                           ebook_convert=spec["ebook_convert"])
    if name == "rss":
        from ragd.daemon.sources.rss import RssKind

        return RssKind(documents, only=spec.get("only"), max_entries=spec["max_entries"],
                       max_feed_bytes=spec["max_feed_bytes"])
    from ragd.daemon.sources.base import kind_for

    return kind_for(name, spec.get("exclude") or (), documents, root, only=spec.get("only"))
