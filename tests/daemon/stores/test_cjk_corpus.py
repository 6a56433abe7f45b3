"""Keyword search in Japanese and Chinese on the shared texts (decision 0021): a Japanese book
(books/epub/idpf-mymedia_lite.epub, ガリ版の話) and the Obsidian Hub's notes written in
Chinese. Skipped, with the reason, when ../shared/corpus is absent."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chunk_fixtures import row
from conftest import corpus_path

from ragd.daemon.models import Filters
from ragd.daemon.stores.catalog import ChunkRow
from ragd.daemon.stores.fulltext import KeywordStore, WhooshStore, combined_text
from ragd.daemon.stores.tantivy_store import TantivyStore

pytestmark = pytest.mark.corpus

JAPANESE_BOOK = ("books", "epub", "idpf-mymedia_lite.epub")
CHINESE_NOTES = ("vault", "obsidian-hub")
# Words that occur many times in the book (ガリ版: 56 times), and in the Chinese notes.
JAPANESE_WORDS = ("ガリ版", "印刷", "メディア", "宮沢賢治", "技術", "新聞")
CHINESE_WORDS = ("插件", "笔记", "农历", "节气", "同步", "微信公众号")
CHUNK_CHARS = 250


def paragraphs(text: str) -> list[str]:
    """Paragraphs packed into chunks of at most CHUNK_CHARS characters (long ones cut)."""
    chunks: list[str] = []
    for para in (p.strip() for p in re.split(r"\n\s*\n", text)):
        while para:
            piece, para = para[:CHUNK_CHARS], para[CHUNK_CHARS:]
            if chunks and len(chunks[-1]) + len(piece) < CHUNK_CHARS:
                chunks[-1] += "\n\n" + piece
            else:
                chunks.append(piece)
    return chunks


def book_text() -> str:
    from ragd.daemon.convert.books import convert_epub

    return convert_epub(corpus_path(*JAPANESE_BOOK).read_bytes()).markdown


@pytest.fixture(scope="module")
def chunks() -> list[ChunkRow]:
    notes = corpus_path(*CHINESE_NOTES)
    texts = paragraphs(book_text())
    for path in sorted(notes.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        if re.search(r"[\u4e00-\u9fff]{2}", text):
            texts += paragraphs(text)
    return [row(i, text, title="") for i, text in enumerate(texts, 1)]


@pytest.fixture(scope="module", params=["whoosh", "tantivy"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
          chunks: list[ChunkRow]) -> Iterator[KeywordStore]:
    """Each store built once for the module: the tests only search it."""
    where = tmp_path_factory.mktemp(f"cjk-{request.param}")
    s: KeywordStore = (WhooshStore(where) if request.param == "whoosh"
                       else TantivyStore(where))
    s.apply(chunks, [], 1, {})
    yield s
    s.close()


@pytest.mark.parametrize("word", JAPANESE_WORDS + CHINESE_WORDS)
def test_every_chunk_holding_a_word_ranks_above_every_other(
        store: KeywordStore, chunks: list[ChunkRow], word: str) -> None:
    holding = {r.id for r in chunks if word in combined_text(r)}
    assert holding, word
    hits = [i for i, _ in store.search_any(store.analyse(word), [], len(holding) + 10,
                                           Filters())]
    assert set(hits[: len(holding)]) == holding
    if len(word) > 2:  # a phrase of two bigrams or more: exactly the chunks holding it
        phrase = store.search_phrase(store.analyse(word), 1000, Filters())
        assert {i for i, _ in phrase} == holding


def test_one_character_is_found_inside_longer_words(store: KeywordStore,
                                                    chunks: list[ChunkRow]) -> None:
    holding = {r.id for r in chunks if "版" in combined_text(r)}
    hits = store.search_any(store.analyse("版"), [], 1000, Filters())
    assert {i for i, _ in hits} == holding and len(holding) > 10


@pytest.mark.slow
def test_a_japanese_book_in_a_project_is_found_in_keyword_mode(
        tmp_path: Path, real_embedder: Any) -> None:
    from ragd.daemon.runtime.app import App
    from ragd.daemon.search.engine import SearchRequest
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    folder = tmp_path / "books"
    folder.mkdir()
    shutil.copy(corpus_path(*JAPANESE_BOOK), folder / "garibans.epub")
    paths = resolve_paths()
    with App(paths, load_config(paths, {}), embedder=real_embedder) as app:
        report = app.sync_collection(app.create_project("books", str(folder)))
        assert report.indexed == 1 and not report.skipped_files
        for query in ("ガリ版", "宮沢賢治"):
            req = SearchRequest(query=query, mode="keyword", top_k=5,
                                filters=Filters(collections=("books",)))
            results = app.search_engine.search(req)["results"]
            # One book is one source: it shows its best chunks (search.max_per_source).
            assert results and all(query in r["content"] for r in results), query
            assert query in results[0]["metadata"]["snippet"]
