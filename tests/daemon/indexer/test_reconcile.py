from ragd.daemon.indexer.reconcile import reconcile
from ragd.daemon.models import FileState, SourceRecord


def rec(i: int, path: str, size: int = 10, mtime: int = 1, sha: str = "h", status: str = "ok",
        code: str | None = None) -> SourceRecord:
    return SourceRecord(i, path, size, mtime, sha, status, code)


def hashes(mapping: dict[str, str]):
    calls: list[str] = []

    def h(path: str) -> str | None:
        calls.append(path)
        return mapping.get(path)

    return h, calls


def test_unchanged_stat_is_not_hashed() -> None:
    h, calls = hashes({})
    plan = reconcile([FileState("a.md", 10, 1)], [rec(1, "a.md")], h)
    assert plan.unchanged == 1 and plan.empty and calls == []


def test_new_modified_deleted() -> None:
    h, _ = hashes({"a.md": "new-a"})
    disk = [FileState("a.md", 11, 2), FileState("b.md", 5, 1)]
    plan = reconcile(disk, [rec(1, "a.md", sha="old-a"), rec(2, "gone.md")], h)
    assert [f.path for f in plan.new] == ["b.md"]
    assert [f.path for f in plan.modified] == ["a.md"]
    assert [r.path for r in plan.deleted] == ["gone.md"]
    assert plan.moved == []


def test_touch_with_same_content_is_not_a_modification() -> None:
    h, _ = hashes({"a.md": "h"})
    plan = reconcile([FileState("a.md", 10, 99)], [rec(1, "a.md")], h)
    assert plan.modified == [] and [f.path for _, f in plan.touched] == ["a.md"]


def test_rename_detected_by_content_hash() -> None:
    h, _ = hashes({"new name.md": "h"})
    plan = reconcile([FileState("new name.md", 10, 5)], [rec(1, "old.md")], h)
    assert [(o.path, n.path) for o, n in plan.moved] == [("old.md", "new name.md")]
    assert plan.new == [] and plan.deleted == []


def test_new_file_of_other_size_is_not_hashed_for_moves() -> None:
    h, calls = hashes({})
    plan = reconcile([FileState("b.md", 99, 5)], [rec(1, "old.md", size=10)], h)
    assert calls == [] and [f.path for f in plan.new] == ["b.md"]
    assert [r.path for r in plan.deleted] == ["old.md"]


def test_skipped_source_is_not_a_move_target() -> None:
    h, _ = hashes({"b.md": ""})
    plan = reconcile([FileState("b.md", 10, 5)], [rec(1, "a.md", sha="", status="skipped")], h)
    assert [f.path for f in plan.new] == ["b.md"] and plan.moved == []


def test_transient_skip_is_retried_and_force_rereads() -> None:
    h, _ = hashes({})
    disk = [FileState("a.md", 10, 1), FileState("b.md", 10, 1)]
    known = [rec(1, "a.md", status="skipped", code="unreadable"), rec(2, "b.md")]
    plan = reconcile(disk, known, h)
    assert [f.path for f in plan.modified] == ["a.md"]
    plan = reconcile(disk, known, h, force={"b.md"})
    assert sorted(f.path for f in plan.modified) == ["a.md", "b.md"]


def test_two_identical_files_moved_pair_up_once_each() -> None:
    h, _ = hashes({"x.md": "same", "y.md": "same"})
    disk = [FileState("x.md", 10, 1), FileState("y.md", 10, 1)]
    known = [rec(1, "a.md", sha="same"), rec(2, "b.md", sha="same")]
    plan = reconcile(disk, known, h)
    assert sorted((o.path, n.path) for o, n in plan.moved) == [("a.md", "x.md"), ("b.md", "y.md")]


# -- skips of the moment (decision 0026) -------------------------------------------------------
def skipped(code: str, at: float) -> SourceRecord:
    return SourceRecord(1, "a.mobi", 10, 1, "", "skipped", code, at)


def test_a_tool_skip_is_retried_once_the_tool_is_found_not_before_nor_again() -> None:
    from ragd.daemon.indexer.reconcile import RetryPolicy

    no_tool = RetryPolicy(now=100.0, started=0.0)
    assert not no_tool.due(skipped("ebook_convert_missing", 50.0))
    found = RetryPolicy(now=100.0, started=0.0, tools_since={"ebook-convert": 80.0})
    assert found.due(skipped("ebook_convert_missing", 50.0))  # skipped before it was found
    assert not found.due(skipped("ebook_convert_missing", 90.0))  # skipped since: not again
    assert not found.due(skipped("ocr_unavailable", 50.0))  # another tool's skip


def test_a_costly_skip_is_retried_in_a_new_run_or_after_the_interval() -> None:
    from ragd.daemon.indexer.reconcile import RETRY_AFTER_S, RetryPolicy

    policy = RetryPolicy(now=10_000.0, started=9_000.0)
    assert policy.due(skipped("convert_timeout", 8_000.0))  # from an earlier run
    assert not policy.due(skipped("convert_timeout", 9_500.0))  # this run, recently
    late = RetryPolicy(now=9_500.0 + RETRY_AFTER_S, started=9_000.0)
    assert late.due(skipped("convert_crashed", 9_500.0))
    assert not late.due(skipped("encrypted", 0.0))  # the file's own doing: never by time
    assert late.due(skipped("unreadable", 9_999.0)) and not late.due(rec(1, "a.md"))


def test_reconcile_reads_again_what_the_policy_says_is_due() -> None:
    from ragd.daemon.indexer.reconcile import RetryPolicy

    h, calls = hashes({})
    known = [SourceRecord(1, "old.tex", 10, 1, "", "skipped", "convert_timeout", 5.0),
             SourceRecord(2, "new.tex", 10, 1, "", "skipped", "convert_timeout", 50.0)]
    disk = [FileState("old.tex", 10, 1), FileState("new.tex", 10, 1)]
    plan = reconcile(disk, known, h, retry=RetryPolicy(now=60.0, started=10.0).due)
    assert [f.path for f in plan.modified] == ["old.tex"] and plan.unchanged == 1
    assert calls == []


def test_the_retry_clock_counts_a_tool_from_when_it_is_found() -> None:
    from ragd.daemon.indexer.reconcile import RetryClock

    now = [100.0]
    present: set[str] = set()
    clock = RetryClock(which=lambda t: t if t in present else None, clock=lambda: now[0])
    assert clock.policy().tools_since == {}
    now[0] = 200.0
    present.add("ebook-convert")
    assert clock.policy().tools_since == {"ebook-convert": 200.0}
    now[0] = 300.0
    assert clock.policy().tools_since == {"ebook-convert": 200.0}  # kept, not moved
    assert clock.started == 100.0
