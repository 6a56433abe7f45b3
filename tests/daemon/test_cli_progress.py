"""The `ragd index` bar: every embedded batch moves it, it never moves back, it ends at 100 %."""

from __future__ import annotations

import pytest

from ragd.daemon.cli.progress import BarPosition, EmbedProgress, IndexBar
from ragd.daemon.indexer.pipeline import Progress


def test_first_group_counts_chunks_without_a_total() -> None:
    model = EmbedProgress()
    # No group committed yet: chunks per file are unknown, so is the total.
    assert model.update(0, 100, 64) == BarPosition(64, None, "chunk")
    assert model.update(0, 100, 128) == BarPosition(128, None, "chunk")


def test_each_batch_moves_the_bar_between_groups() -> None:
    model = EmbedProgress()
    model.update(0, 100, 64)
    first = model.update(20, 100, 200)  # a group of 20 files: 10 chunks a file
    assert first == BarPosition(200, 1000, "chunk")
    fractions = [first.n / first.total]  # type: ignore[operator]
    for embedded in (264, 328, 392):  # slices of the next group: files done stays at 20
        pos = model.update(20, 100, embedded)
        assert pos.n == embedded and pos.total is not None
        fractions.append(pos.n / pos.total)
    assert fractions == sorted(fractions) and len(set(fractions)) == len(fractions)


def test_never_moves_back_and_reaches_100_only_at_the_end() -> None:
    model = EmbedProgress()
    last = 0.0
    # The second group is much denser than the first: the estimate grows, the bar must not
    # jump back.
    for done, embedded in ((10, 20), (10, 84), (20, 600), (20, 664), (29, 700)):
        pos = model.update(done, 30, embedded)
        assert pos.total is not None and pos.n < pos.total
        assert pos.n / pos.total >= last
        last = pos.n / pos.total
    assert model.update(30, 30, 720) == BarPosition(720, 720, "chunk")


def test_files_when_nothing_is_embedded() -> None:
    model = EmbedProgress()
    assert model.update(0, 8, 0) == BarPosition(0, 8, "file")
    assert model.update(5, 8, 0) == BarPosition(5, 8, "file")
    assert model.update(5, 8, 0, final=True) == BarPosition(8, 8, "file")


def test_the_bar_draws_batches_and_closes_full(capsys: pytest.CaptureFixture[str]) -> None:
    bar = IndexBar(enabled=True)
    bar(Progress("notes", "scan"))
    for p in (Progress("notes", "index", 0, 10, 64), Progress("notes", "index", 4, 10, 100),
              Progress("notes", "index", 4, 10, 164), Progress("notes", "index", 10, 10, 230),
              Progress("notes", "done", 10, 10, 230)):
        bar(p)
    err = capsys.readouterr().err
    assert "indexing notes" in err and "64chunk" in err and "164/" in err
    assert "100%" in err and "230/230" in err and "files 10/10" in err


def test_daemon_events_and_a_completed_remote_job(capsys: pytest.CaptureFixture[str]) -> None:
    bar = IndexBar(enabled=True)
    bar.event({"type": "progress", "state": "indexing", "phase": None, "collection": None})
    bar.event({"type": "progress", "phase": "index", "collection": "a", "done": 3,
               "total": 6, "embedded": 30})
    bar.event({"type": "progress", "phase": "index", "collection": "a", "done": 3,
               "total": 6, "embedded": 50})
    # The "done" event was missed (the answer came first): completing draws 100 % anyway.
    bar.close(complete=True)
    bar.event({"type": "progress", "phase": "index", "collection": "a", "done": 6,
               "total": 6, "embedded": 60})  # too late: ignored
    err = capsys.readouterr().err
    assert "100%" in err and "50/50" in err and "60/60" not in err


def test_no_bar_for_a_pass_with_nothing_to_read(capsys: pytest.CaptureFixture[str]) -> None:
    bar = IndexBar(enabled=True)
    bar(Progress("notes", "index", 0, 0, 0))
    bar(Progress("notes", "done", 0, 0, 0))
    IndexBar(enabled=False)(Progress("notes", "index", 1, 2, 3))
    assert capsys.readouterr().err == ""
