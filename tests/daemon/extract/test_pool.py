"""Extraction workers (decision 0041), real processes: a file read in a worker gives what the
daemon's own reading gives; an item past its deadline, or whose worker is killed, is skipped
with its code and the next item goes on in a fresh worker; a container's entries are streamed
and loaded there; a long text is indexed in part within the chunking budget."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragd.daemon.embed.embedding import tokenizer_file
from ragd.daemon.extract import pool as pool_module
from ragd.daemon.extract.kinds import spec_of
from ragd.daemon.extract.pool import ExtractPool, PoolSettings
from ragd.daemon.extract.stream import RemoteEntryStream
from ragd.daemon.extract.work import Chunker, load_file
from ragd.daemon.models import Document, FileState, Skip
from ragd.daemon.sources.base import kind_for
from ragd.daemon.text.chunking import tokenizer_counter

pytestmark = pytest.mark.slow

NOTE = """---
tags: [birds, lakes]
---
# Herons

Herons wait at the edge of the lake.

## Feeding

They eat fish and frogs.
"""


def _pool(timeout_s: float = 30.0, workers: int = 2) -> ExtractPool:
    return ExtractPool(PoolSettings(tokenizer_file(), 256, timeout_s, 1024, workers))


@pytest.fixture
def pool() -> Iterator[ExtractPool]:
    p = _pool()
    yield p
    p.close()


def _slow_note(folder: Path, name: str) -> None:
    rng = random.Random(3)
    body = "".join(chr(0x4E00 + rng.randint(0, 5000)) for _ in range(1_200_000))
    (folder / name).write_text(f"# Slow\n\n{body}\n", encoding="utf-8")


def test_a_note_read_in_a_worker_is_what_the_daemon_reads(tmp_path: Path,
                                                         pool: ExtractPool) -> None:
    (tmp_path / "Herons.md").write_text(NOTE, encoding="utf-8")
    kind = kind_for("vault", (), None, tmp_path)
    spec = spec_of(kind, tmp_path)
    assert spec is not None
    remote = pool.load_file(spec, "Herons.md", 10 * 2**20, urgent=True)
    here = load_file(kind, tmp_path, "Herons.md", 10 * 2**20,
                     Chunker(tokenizer_counter(tokenizer_file()), 256))
    assert isinstance(remote.doc, Document) and isinstance(here.doc, Document)
    assert remote.sha256 == here.sha256
    assert (remote.doc.title, remote.doc.metadata, remote.doc.warnings) == \
        (here.doc.title, here.doc.metadata, here.doc.warnings)
    assert remote.chunked == here.chunked


def test_an_item_past_its_deadline_is_skipped_and_the_next_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_note(tmp_path, "slow.md")
    (tmp_path / "next.md").write_text(NOTE, encoding="utf-8")
    # Chunking may take 20 deadlines here, so the 1.2 M characters of Chinese (~7 s) are not
    # cut to the budget and outlast the deadline, as a parser stuck on a hostile file would.
    monkeypatch.setattr(pool_module, "CHUNK_SHARE", 20.0)
    pool = _pool(timeout_s=1.0)
    try:
        spec = spec_of(kind_for("vault", (), None, tmp_path), tmp_path)
        assert spec is not None
        slow = pool.load_file(spec, "slow.md", 10 * 2**20, urgent=False)
        assert isinstance(slow.doc, Skip) and slow.doc.code == "extract_timeout", slow
        after = pool.load_file(spec, "next.md", 10 * 2**20, urgent=False)
        assert isinstance(after.doc, Document) and after.chunked
        assert pool.starts == 2  # the stopped worker was replaced
    finally:
        pool.close()


def test_a_worker_killed_mid_item_costs_only_that_item(tmp_path: Path,
                                                      pool: ExtractPool) -> None:
    _slow_note(tmp_path, "victim.md")
    (tmp_path / "next.md").write_text(NOTE, encoding="utf-8")
    spec = spec_of(kind_for("vault", (), None, tmp_path), tmp_path)
    assert spec is not None
    box: list[object] = []
    reader = threading.Thread(target=lambda: box.append(
        pool.load_file(spec, "victim.md", 10 * 2**20, urgent=False)))
    reader.start()
    deadline = time.monotonic() + 30
    while not pool.busy_pids() and time.monotonic() < deadline:
        time.sleep(0.02)
    (victim,) = pool.busy_pids()
    os.kill(victim, signal.SIGKILL)
    reader.join(30)
    (loaded,) = box
    assert isinstance(loaded.doc, Skip) and loaded.doc.code == "extract_crashed"  # type: ignore[attr-defined]
    after = pool.load_file(spec, "next.md", 10 * 2**20, urgent=True)
    assert isinstance(after.doc, Document)


def test_a_long_text_is_indexed_in_part_within_the_budget() -> None:
    rng = random.Random(5)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 9)))
             for _ in range(2000)]
    text = "\n\n".join(" ".join(rng.choice(words) for _ in range(60)) for _ in range(3000))
    # A budget the first pieces timed already spend: the text is cut to the last of them.
    chunker = Chunker(tokenizer_counter(tokenizer_file()), 256, budget_s=0.05)
    doc, chunks = chunker(Document("Long", text, "markdown"))
    assert isinstance(chunks, list) and chunks
    assert "text_truncated" in doc.warnings
    assert len(text) > 1_000_000 and len(doc.text) <= 200_000


def test_a_text_the_timing_covers_whole_is_chunked_once_and_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A text that the budget's timing runs chunk whole (under 200,000 characters) keeps
    those chunks: no second chunking, and the same chunks as chunking it directly."""
    from ragd.daemon.extract import work
    from ragd.daemon.text.chunking import chunk_markdown

    rng = random.Random(6)
    text = "\n\n".join(" ".join(rng.choice(["heron", "ibis", "lake", "reed", "fish"])
                                for _ in range(50)) for _ in range(600))
    assert 100_000 < len(text) < 200_000
    count = tokenizer_counter(tokenizer_file())
    chunked: list[int] = []

    def recorded(title: str, body: str, **kw: Any) -> Any:
        chunked.append(len(body))
        return chunk_markdown(title, body, **kw)

    monkeypatch.setattr(work, "chunk_markdown", recorded)
    doc, chunks = Chunker(count, 256, budget_s=60.0)(Document("Birds", text, "markdown"))
    assert "text_truncated" not in doc.warnings
    assert chunked[-1] == len(text) and chunked.count(len(text)) == 1, chunked
    assert chunks == chunk_markdown("Birds", text, count_tokens=count, max_tokens=256)


def test_a_mailbox_is_streamed_and_loaded_in_a_worker(tmp_path: Path,
                                                     pool: ExtractPool) -> None:
    from mail_fixtures import maildir, mbox_bytes, message

    root = maildir(tmp_path / "Mail")
    (root / "Birds.mbox").write_bytes(mbox_bytes(
        [message(f"Bird {w}", f"Seen today: a {w}.") for w in ("heron", "ibis", "jacana")]))
    kind = kind_for("mail", (), None, root)
    walked = kind.walk(root)
    spec = spec_of(kind, root)
    assert spec is not None
    todo = [(f, 0) for f in walked.files]
    stream = RemoteEntryStream(pool, kind, spec, todo, wanted=lambda e: True, carry={},
                               should_stop=lambda: False)
    titles, ends = [], []
    for item in stream:
        if item.entry is None:
            ends.append((item.file.path, item.end))
            continue
        loaded = stream.result(item)
        assert isinstance(loaded.doc, Document), loaded
        titles.append(loaded.doc.title)
    stream.close()
    assert sorted(titles) == ["Bird heron", "Bird ibis", "Bird jacana"]
    assert ends == [("Birds.mbox", (root / "Birds.mbox").stat().st_size)]
    assert isinstance(walked.files[0], FileState)


def _nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[16])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads nice values from /proc")
def test_bulk_work_has_lowered_workers_and_a_saved_note_does_not(tmp_path: Path,
                                                                 pool: ExtractPool) -> None:
    """A lowered process cannot raise itself again: a save read at nice 10 beside a busy
    compiler takes seconds. So each lane keeps workers of its own; when urgent work holds
    every worker, an urgent lease starts one more, closed when it is given back."""
    own = _nice(os.getpid())
    with pool.lease(urgent=False) as bulk, pool.lease(urgent=True) as save:
        assert bulk.lowered and not save.lowered
        wait = time.monotonic() + 10
        while _nice(bulk.pid) == own and time.monotonic() < wait:
            time.sleep(0.02)  # the worker lowers itself first thing
        assert _nice(bulk.pid) >= max(own, 10) and _nice(save.pid) == own
        with pool.lease(urgent=True) as extra:  # both workers are taken
            assert not extra.lowered and extra.pid not in (bulk.pid, save.pid)
    # Kept: one lowered worker (bulk work holds at most workers - 1) and two normal ones.
    assert sorted(pool.pids()) == sorted([bulk.pid, save.pid, extra.pid])
    with pool.lease(urgent=True) as again:
        assert again.pid in (save.pid, extra.pid)  # a save finds a worker started
