"""The doc store: converted markdown cached by content hash + converter version.

The same bytes convert once, whatever their path or collection: the key is the file's sha256,
the format and the converter's version (``ragd.daemon.convert.formats``), so a new converter
version converts again and an old result is never served for it. Layout under the data
folder's ``docstore/``:

- ``objects/ab/<sha256>.<format>-<version>.json``: ``{"title", "markdown", "metadata"}``, or
  ``{"skip": {"code", "detail"}}`` for a file that can never convert (damaged, encrypted, no
  text). Written to a temp file and renamed, so a crash leaves the old entry or none.
- ``index.sqlite``: which path was last seen with which hash (``rag_doc_store_info``).

Rebuildable from the files: deleting the folder costs conversions, nothing else.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import sqlite3
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ragd.daemon.convert.formats import OCR_STOPPED_FOR_NOW, Format, PdfOcr
from ragd.daemon.models import Skip

log = logging.getLogger(__name__)

# Failures that depend on the moment (a busy machine, a missing tool), not on the bytes:
# never cached, so the next sweep tries again.
_TRANSIENT = frozenset({"convert_timeout", "convert_crashed", "convert_memory",
                        "ocr_unavailable", "ebook_convert_missing"})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    source_path TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    format TEXT NOT NULL,
    file_size INTEGER NOT NULL,
    file_modified_at REAL,
    discovered_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_hash ON documents (content_hash);
"""


class Converter(Protocol):
    """What turns bytes into markdown (the worker process, or a fake in tests)."""

    def convert(self, fmt: str, data: bytes) -> dict[str, Any] | Skip: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Conversion:
    """A document as markdown, and whether it came from the cache."""

    content_hash: str
    format: str
    source_type: str
    title: str
    markdown: str
    metadata: dict[str, Any] = field(default_factory=dict)
    cached: bool = False
    seconds: float = 0.0


class DocStore:
    """Cached conversions plus the register of documents seen. Thread-safe."""

    def __init__(self, root: Path, converter: Converter, *,
                 pdf_ocr: PdfOcr | None = None) -> None:
        """``pdf_ocr``: read PDF pages without a text layer by OCR ([documents] ocr_pdfs);
        such a conversion is kept under its own key (``pdf-1+ocr<pages>``)."""
        self.root = root
        self.converter = converter
        self.pdf_ocr = pdf_ocr
        (root / "objects").mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(root / "index.sqlite"), timeout=30,
                                   check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.RLock()
        self.convert_seconds = 0.0  # time spent converting (cache misses), for reports
        self._recent: tuple[Path, dict[str, Any]] | None = None  # the last one not kept

    def close(self) -> None:
        self.converter.close()
        with self._lock:
            self._db.close()

    # -- conversions -------------------------------------------------------------------------
    def object_path(self, content_hash: str, fmt: Format, variant: str = "") -> Path:
        plus = f"+{variant}" if variant else ""
        return self.root / "objects" / content_hash[:2] / \
            f"{content_hash}.{fmt.name}-{fmt.version}{plus}.json"

    def convert(self, data: bytes, fmt: Format, *, source_path: str | None = None,
                mtime_ns: int | None = None, keep: bool = True) -> Conversion | Skip:
        """The markdown of ``data``: from the cache when these bytes were converted before by
        this converter version, else converted now (and cached unless the failure may pass).
        ``source_path`` is recorded for ``rag_doc_store_info``.

        With ``keep=False`` (a document outside the collections, decision 0023) nothing is
        written: neither the path nor the conversion. The last such conversion stays in
        memory only, so that reading a long one in pieces converts it once."""
        content_hash = hashlib.sha256(data).hexdigest()
        if source_path is not None and keep:
            self.record(source_path, content_hash, fmt, len(data), mtime_ns)
        ocr = self.pdf_ocr if fmt.name == "pdf" else None
        path = self.object_path(content_hash, fmt, ocr.variant if ocr else "")
        stored = self._load(path)
        if stored is None and not keep and self._recent is not None \
                and self._recent[0] == path:
            stored = self._recent[1]
        if stored is not None:
            return self._result(stored, content_hash, fmt, cached=True, seconds=0.0)
        t0 = time.perf_counter()
        answer = self._convert(fmt, data, ocr)
        seconds = time.perf_counter() - t0
        self.convert_seconds += seconds
        if isinstance(answer, Skip):
            if answer.code not in _TRANSIENT and keep:
                self._store(path, {"skip": {"code": answer.code, "detail": answer.detail}})
            return answer
        entry = {"title": str(answer.get("title") or ""),
                 "markdown": str(answer.get("markdown") or ""),
                 "metadata": answer.get("metadata") or {}}
        if keep and not _for_now(entry["metadata"]):
            self._store(path, entry)
        else:
            self._recent = (path, entry)
        return self._result(entry, content_hash, fmt, cached=False, seconds=seconds)

    def _convert(self, fmt: Format, data: bytes, ocr: PdfOcr | None = None
                 ) -> dict[str, Any] | Skip:
        if fmt.in_worker:
            return self.converter.convert(ocr.worker_format if ocr else fmt.name, data)
        from ragd.daemon.convert.converted import ConvertSkip
        from ragd.daemon.convert.converters import convert

        try:
            out = convert(fmt.name, data)
        except ConvertSkip as skip:
            return Skip(skip.code, skip.detail)
        return {"title": out.title, "markdown": out.markdown, "metadata": out.metadata}

    @staticmethod
    def _result(entry: dict[str, Any], content_hash: str, fmt: Format, *, cached: bool,
                seconds: float) -> Conversion | Skip:
        skip = entry.get("skip")
        if isinstance(skip, dict):
            return Skip(str(skip.get("code")), str(skip.get("detail") or ""))
        return Conversion(content_hash, fmt.name, fmt.source_type, entry["title"],
                          entry["markdown"], dict(entry.get("metadata") or {}), cached, seconds)

    @staticmethod
    def _load(path: Path) -> dict[str, Any] | None:
        try:
            with open(path, encoding="utf-8") as fh:
                entry = json.load(fh)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # a damaged entry is converted again
            log.warning("doc store entry %s is unreadable (%s): converting again", path, exc)
            return None
        return entry if isinstance(entry, dict) and ("markdown" in entry or "skip" in entry) \
            else None

    @staticmethod
    def _store(path: Path, entry: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(entry, fh, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    # -- the register ------------------------------------------------------------------------
    def record(self, source_path: str, content_hash: str, fmt: Format, size: int,
               mtime_ns: int | None) -> None:
        """Remember that ``source_path`` holds these bytes now (first sighting kept)."""
        now = time.time()
        modified = mtime_ns / 1e9 if mtime_ns else None
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO documents (source_path, content_hash, format, file_size,"
                " file_modified_at, discovered_at) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT(source_path) DO UPDATE SET content_hash=excluded.content_hash,"
                " format=excluded.format, file_size=excluded.file_size,"
                " file_modified_at=excluded.file_modified_at",
                (source_path, content_hash, fmt.name, size, modified, now))

    def info(self) -> list[dict[str, Any]]:
        """The rag_doc_store_info answer: every document seen, by path."""
        with self._lock:
            rows = self._db.execute(
                "SELECT source_path, content_hash, file_size, file_modified_at, discovered_at"
                " FROM documents ORDER BY source_path").fetchall()
        return [{"source_path": p, "content_hash": h, "file_size": s,
                 "file_modified_at": iso_time(m), "discovered_at": iso_time(d)}
                for p, h, s, m, d in rows]


def _for_now(metadata: Any) -> bool:
    """A conversion whose OCR stopped for a reason of the moment (out of time, no Tesseract):
    answered, not kept, so the next read of the file tries the whole document again."""
    return isinstance(metadata, dict) and metadata.get("ocr_stopped") in OCR_STOPPED_FOR_NOW


def iso_time(ts: float | None) -> str | None:
    """Seconds since the epoch -> ISO 8601 in UTC, as the other tools return times."""
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).isoformat(timespec="seconds")
