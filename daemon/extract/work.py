"""What reading one item means, wherever it runs: read, parse, cut, chunk.

The same functions run in an extraction worker (the daemon) and on a thread (tests with a fake
embedder, kinds without a description): only where they run differs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragd.daemon.convert.bounds import MAX_TEXT_CHARS, TRUNCATED, cut
from ragd.daemon.models import ChunkDraft, Document, Skip
from ragd.daemon.sources.base import read_source_bytes
from ragd.daemon.sources.entry import Entry
from ragd.daemon.text.chunking import TokenCounter, chunk_markdown
from ragd.daemon.text.properties import properties_chunks


@dataclass(frozen=True)
class Loaded:
    """One item read and parsed, or what went wrong, and how long it took."""

    sha256: str
    doc: Document | Skip | Exception
    seconds: float
    chunked: list[ChunkDraft] | Exception | None = None  # for a Document


# A text longer than this is chunked within the chunker's time budget: first pieces of it are
# timed, and the text is cut to what the rest of the budget affords (``text_truncated``).
PROBE_CHARS = 100_000
# The pieces timed: from the first, doubled while one takes under an eighth of the budget (so
# all of them take under half of it, however slow the text: 400,000 characters of Chinese
# chunk in ~2.4 s, of English in ~0.5 s), at most the last. A piece that covers the whole
# text is the text's chunking: it is kept, not done again (bench/deadline.py measured the
# timing runs costing more than the chunking when the text was chunked again after them).
PROBE_FIRST, PROBE_LAST = 25_000, 200_000


@dataclass(frozen=True)
class Chunker:
    """Cuts a document to MAX_TEXT_CHARS and chunks it to the model's token limit; with
    ``budget_s`` (in a worker), a long text is cut to what chunking can do in that time, so a
    big book ends indexed in part rather than past its deadline (decision 0041)."""

    count_tokens: TokenCounter
    max_tokens: int
    budget_s: float | None = None

    def __call__(self, doc: Document) -> tuple[Document, list[ChunkDraft] | Exception]:
        """The document cut to MAX_TEXT_CHARS (whatever produced it, decision 0022) and its
        chunks, or the exception chunking raised."""
        text, was_cut = cut(doc.text, MAX_TEXT_CHARS)
        whole: list[ChunkDraft] | None = None
        if self.budget_s is not None and len(text) > PROBE_CHARS:
            affordable, whole = self._affordable(doc.title, text, self.budget_s)
            if affordable < len(text):
                text, was_cut = cut(text, affordable)[0], True
        if was_cut:
            doc = dataclasses.replace(doc, text=text,
                                      warnings=tuple(dict.fromkeys((*doc.warnings, TRUNCATED))))
        try:
            count, limit = self.count_tokens, self.max_tokens
            chunks = whole if whole is not None else chunk_markdown(
                doc.title, doc.text, count_tokens=count, max_tokens=limit)
            # After the body, so a new note's first chunk id is its first body chunk.
            chunks += properties_chunks(doc, has_body=bool(chunks), count_tokens=count,
                                        max_tokens=limit)
        except Exception as exc:
            return doc, exc
        return doc, chunks

    def _affordable(self, title: str, text: str, budget_s: float
                    ) -> tuple[int, list[ChunkDraft] | None]:
        """How many characters of ``text`` chunking can take within ``budget_s``, timed on
        first pieces of it (never fewer than the last piece), and the chunks of the whole
        text when a piece was all of it."""
        size, spent_all = PROBE_FIRST, 0.0
        while True:
            probe = cut(text, size)[0]
            t0 = time.perf_counter()
            try:
                chunks = chunk_markdown(title, probe, count_tokens=self.count_tokens,
                                        max_tokens=self.max_tokens)
            except Exception:
                return len(text), None  # the real chunking will say what is wrong
            spent = time.perf_counter() - t0
            spent_all += spent
            if len(probe) >= len(text):
                return len(text), chunks
            if spent >= budget_s / 8 or size >= PROBE_LAST:
                break
            size *= 2
        rate = len(probe) / max(spent, 1e-3)
        return max(len(probe), int(rate * max(0.0, budget_s - spent_all) * 0.8)), None


def load_file(kind: Any, root: Path, rel: str, max_bytes: int, chunker: Chunker | None
              ) -> Loaded:
    """Read ``root/rel`` (inside the root only), parse it with ``kind`` and chunk it (no
    chunker: parsed only, as a move needs)."""
    t0 = time.perf_counter()
    try:
        data = read_source_bytes(root, rel, kind.max_bytes(rel, max_bytes))
        sha = hashlib.sha256(data).hexdigest() if isinstance(data, bytes) else ""
        doc: Document | Skip | Exception = (kind.parse(rel, data)
                                             if isinstance(data, bytes) else data)
    except Exception as exc:  # one broken file never stops a collection
        doc, sha = exc, ""
    chunked = None
    if isinstance(doc, Document) and chunker is not None:
        doc, chunked = chunker(doc)
    return Loaded(sha, doc, time.perf_counter() - t0, chunked)


def load_entry(entry: Entry, chunker: Chunker) -> Loaded:
    """Load one document of a container and chunk it."""
    t0 = time.perf_counter()
    try:
        doc: Document | Skip | Exception = entry.load()
    except Exception as exc:  # one broken message never stops a mailbox
        doc = exc
    chunked = None
    if isinstance(doc, Document):
        doc, chunked = chunker(doc)
    return Loaded(entry.content_hash, doc, time.perf_counter() - t0, chunked)
