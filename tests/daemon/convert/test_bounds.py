"""How much text one file may become (decision 0022): an EPUB whose spine repeats a chapter
is cut at its budget, with the warning code, in the real conversion worker."""

from __future__ import annotations

from pathlib import Path

import pytest
from document_fixtures import amplifying_epub

from ragd.daemon.convert.bounds import MAX_TEXT_CHARS, MIN_BUDGET_CHARS, TRUNCATED, cut, text_budget
from ragd.daemon.convert.converters import convert
from ragd.daemon.convert.documents import DocumentSettings, open_documents
from ragd.daemon.models import Document


def test_budget_is_absolute_and_relative_to_the_size_on_disk() -> None:
    assert text_budget(0) == MIN_BUDGET_CHARS
    assert text_budget(100_000) == 2_000_000
    assert text_budget(10**9) == MAX_TEXT_CHARS
    text = "para one.\n\npara two is longer.\n\npara three."
    assert cut(text, 1000) == (text, False)
    kept, was_cut = cut(text, 30)
    assert was_cut and kept == "para one.\n\npara two is longer." and len(kept) <= 30


def test_a_repeated_chapter_is_cut_at_the_budget_in_process() -> None:
    data = amplifying_epub(400_000, 60)  # 24 M characters from a small file
    out = convert("epub", data)
    assert len(out.markdown) <= text_budget(len(data)) < 24_000_000
    assert out.metadata[TRUNCATED] > text_budget(len(data))
    assert out.metadata["chapters"] < 60  # the rest was never converted


@pytest.mark.slow
def test_the_worker_cuts_a_500_mb_conversion_and_the_document_says_so(tmp_path: Path) -> None:
    data = amplifying_epub(5_000_000, 100)  # 500 M characters if converted whole
    docs = open_documents(tmp_path / "docstore", DocumentSettings(timeout_s=120))
    try:
        (tmp_path / "book.epub").write_bytes(data)
        doc = docs.parse(tmp_path, "book.epub", data)
        assert isinstance(doc, Document), doc
        assert TRUNCATED in doc.warnings
        assert len(doc.text) <= text_budget(len(data))
    finally:
        docs.close()
