"""Step one of reconcile for containers (decision 0015): pure, on listings."""

from __future__ import annotations

from ragd.daemon.indexer.containers import plan_containers
from ragd.daemon.models import FileState
from ragd.daemon.stores.catalog import ContainerRecord


def rec(path: str, size: int, mtime: int = 1, fp: str = "fp", read_to: int | None = None
        ) -> ContainerRecord:
    return ContainerRecord(path, size, mtime, fp, size if read_to is None else read_to)


def test_each_outcome() -> None:
    disk = [FileState("same.mbox", 10, 1), FileState("grew.mbox", 30, 2),
            FileState("rewritten.mbox", 30, 2), FileState("new/1:2,", 5, 1),
            FileState("cur/2:2,S", 6, 9), FileState("fresh.mbox", 3, 1)]
    known = [rec("same.mbox", 10), rec("grew.mbox", 20), rec("rewritten.mbox", 20),
             rec("new/1:2,", 5), rec("cur/2:2,S", 6, 1), rec("gone.mbox", 7)]
    prints = {("grew.mbox", 20): "fp", ("rewritten.mbox", 20): "other"}
    asked: list[str] = []

    def fingerprint(path: str, upto: int) -> str | None:
        asked.append(path)
        return prints.get((path, upto))

    plan = plan_containers(disk, known, fingerprint, lambda p: p.endswith(".mbox"))
    assert plan.unchanged == 2
    assert [f.path for f in plan.new] == ["fresh.mbox"]
    assert [(r.path, f.size) for r, f in plan.grown] == [("grew.mbox", 30)]
    # A one-message file with a new mtime is read again (it costs one parse, no embedding).
    assert sorted(f.path for _, f in plan.rewritten) == ["cur/2:2,S", "rewritten.mbox"]
    assert [r.path for r in plan.gone] == ["gone.mbox"]
    assert sorted(asked) == ["grew.mbox", "rewritten.mbox"]  # only appendable, longer files
    assert plan.to_read == [(disk[5], 0), (disk[1], 20), (disk[2], 0), (disk[4], 0)]
    assert plan.reread == {"gone.mbox", "rewritten.mbox", "cur/2:2,S"}


def test_shorter_or_unreadable_is_rewritten_and_force_rereads_all() -> None:
    known = [rec("a.mbox", 20), rec("b.mbox", 20)]
    disk = [FileState("a.mbox", 10, 2), FileState("b.mbox", 40, 2)]
    plan = plan_containers(disk, known, lambda p, n: None, lambda p: True)
    assert sorted(f.path for _, f in plan.rewritten) == ["a.mbox", "b.mbox"]
    same = [FileState("a.mbox", 20, 1)]
    assert plan_containers(same, known[:1], lambda p, n: "fp", lambda p: True).unchanged == 1
    forced = plan_containers(same, known[:1], lambda p, n: "fp", lambda p: True, force=True)
    assert [f.path for _, f in forced.rewritten] == ["a.mbox"]
