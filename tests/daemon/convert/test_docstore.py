"""The doc store: one conversion per content and converter version, whatever the path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from document_fixtures import pdf_bytes

from ragd.daemon.convert.docstore import DocStore
from ragd.daemon.convert.documents import parse_document
from ragd.daemon.convert.formats import FORMATS, Format
from ragd.daemon.errors import InvalidArgument
from ragd.daemon.models import Document, Skip
from ragd.daemon.sources.on_request import ConversionFailed, convert_file


class CountingConverter:
    """A stand-in for the worker process that counts its calls (unit tests of the cache)."""

    def __init__(self, answer: dict[str, Any] | Skip | None = None) -> None:
        self.calls: list[tuple[str, int]] = []
        self.answer = answer

    def convert(self, fmt: str, data: bytes) -> dict[str, Any] | Skip:
        self.calls.append((fmt, len(data)))
        if self.answer is not None:
            return self.answer
        return {"title": "T", "markdown": f"## Page 1\n\n{data.decode('latin-1')}\n",
                "metadata": {"pages": 1}}

    def close(self) -> None:
        pass


def test_same_bytes_convert_once_under_any_path(tmp_path: Path) -> None:
    conv = CountingConverter()
    store = DocStore(tmp_path / "docstore", conv)
    first = store.convert(b"hello", FORMATS["pdf"], source_path="/a/x.pdf", mtime_ns=10**18)
    again = store.convert(b"hello", FORMATS["pdf"], source_path="/b/copy.pdf")
    assert not isinstance(first, Skip) and not isinstance(again, Skip)
    assert (first.cached, again.cached) == (False, True)
    assert again.markdown == first.markdown and again.metadata == {"pages": 1}
    assert len(conv.calls) == 1
    # A new converter version converts again, and never serves the old result.
    newer = Format("pdf", "pdf", "2")
    assert not store.convert(b"hello", newer).cached  # type: ignore[union-attr]
    assert len(conv.calls) == 2
    info = store.info()
    assert [d["source_path"] for d in info] == ["/a/x.pdf", "/b/copy.pdf"]
    assert set(info[0]) == {"source_path", "content_hash", "file_size", "file_modified_at",
                            "discovered_at"}
    assert info[0]["content_hash"] == first.content_hash and info[0]["file_size"] == 5
    assert info[0]["file_modified_at"].startswith("2001-09-09")
    store.close()
    reopened = DocStore(tmp_path / "docstore", CountingConverter())
    assert reopened.convert(b"hello", FORMATS["pdf"]).cached  # type: ignore[union-attr]
    assert len(reopened.info()) == 2


def test_lasting_failures_are_cached_and_passing_ones_are_not(tmp_path: Path) -> None:
    broken = CountingConverter(Skip("parse_error", "damaged"))
    store = DocStore(tmp_path / "a", broken)
    assert store.convert(b"x", FORMATS["pdf"]) == Skip("parse_error", "damaged")
    assert store.convert(b"x", FORMATS["pdf"]) == Skip("parse_error", "damaged")
    assert len(broken.calls) == 1
    slow = CountingConverter(Skip("convert_timeout", "too slow"))
    store = DocStore(tmp_path / "b", slow)
    store.convert(b"x", FORMATS["pdf"])
    store.convert(b"x", FORMATS["pdf"])
    assert len(slow.calls) == 2  # a busy machine today is no reason to give up for good


def test_a_damaged_cache_entry_is_converted_again(tmp_path: Path) -> None:
    conv = CountingConverter()
    store = DocStore(tmp_path, conv)
    store.convert(b"x", FORMATS["pdf"])
    for entry in (tmp_path / "objects").rglob("*.json"):
        entry.write_text("{not json", encoding="utf-8")
    assert not store.convert(b"x", FORMATS["pdf"]).cached  # type: ignore[union-attr]
    assert len(conv.calls) == 2


def test_parse_document_builds_the_source(tmp_path: Path) -> None:
    store = DocStore(tmp_path / "ds", CountingConverter())
    doc = parse_document(store, tmp_path, "papers/x.pdf", b"words")
    assert isinstance(doc, Document)
    assert doc.source_type == "pdf" and doc.title == "T" and doc.text.startswith("## Page 1")
    assert doc.metadata["folder"] == "papers" and doc.metadata["pages"] == 1
    assert parse_document(store, tmp_path, "x.pdf", b"") == Skip("empty", "file has zero bytes")


def test_convert_file_checks_the_path(tmp_path: Path) -> None:
    store = DocStore(tmp_path / "ds", CountingConverter())
    (tmp_path / "folder.pdf").mkdir()
    (tmp_path / "notes.xyz").write_text("x", encoding="utf-8")
    (tmp_path / "empty.pdf").write_bytes(b"")
    cases = {"relative.pdf": "relative", str(tmp_path / "missing.pdf"): "does not exist",
             str(tmp_path / "folder.pdf"): "is a folder", "/dev/null": "character device",
             str(tmp_path / "notes.xyz"): "not a supported"}
    for path, why in cases.items():
        with pytest.raises(InvalidArgument) as info:
            convert_file(store, path, max_bytes=1 << 20)
        assert info.value.param == "file_path" and why in info.value.message, path
    with pytest.raises(ConversionFailed, match="empty"):
        convert_file(store, str(tmp_path / "empty.pdf"), max_bytes=1 << 20)
    big = tmp_path / "big.pdf"
    big.write_bytes(pdf_bytes())
    with pytest.raises(ConversionFailed, match="too_large"):
        convert_file(store, str(big), max_bytes=100)
    answer = convert_file(store, str(big), max_bytes=1 << 20)
    assert answer["cached"] is False and answer["file_path"] == str(big)
    assert convert_file(store, str(big), max_bytes=1 << 20)["cached"] is True
