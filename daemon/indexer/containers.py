"""What changed in a collection of containers (decision 0015): step one of reconcile.

A container is a file that holds documents: an mbox (many messages), a Maildir message (one).
Each container on disk is compared with what the catalog recorded of it: unchanged (same size
and mtime), grown (an appendable file, longer, whose bytes up to the point read before are the
same), rewritten (anything else that changed), new, or gone. Step two, which documents each
container holds now, reads the containers and runs in the pipeline. Pure: the caller passes
the listings and the fingerprint function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ragd.daemon.models import FileState
from ragd.daemon.stores.catalog import ContainerRecord


@dataclass(frozen=True)
class ContainerPlan:
    new: list[FileState] = field(default_factory=list)
    grown: list[tuple[ContainerRecord, FileState]] = field(default_factory=list)
    rewritten: list[tuple[ContainerRecord, FileState]] = field(default_factory=list)
    gone: list[ContainerRecord] = field(default_factory=list)
    unchanged: int = 0

    @property
    def to_read(self) -> list[tuple[FileState, int]]:
        """(container, byte offset to read from), in the order they are read."""
        return ([(f, 0) for f in self.new] + [(f, r.read_to) for r, f in self.grown]
                + [(f, 0) for _, f in self.rewritten])

    @property
    def reread(self) -> set[str]:
        """Containers whose documents are all known again after this pass (read from the
        start, or gone): a document of theirs not seen in the pass was removed."""
        return {r.path for r in self.gone} | {f.path for _, f in self.rewritten}


def plan_containers(disk: Sequence[FileState], known: Sequence[ContainerRecord],
                    fingerprint: Callable[[str, int], str | None],
                    appendable: Callable[[str], bool], *, force: bool = False) -> ContainerPlan:
    """Sort the containers on ``disk`` against the ``known`` records (same scope for both).
    ``fingerprint(path, upto)`` hashes a file's first ``upto`` bytes the way the records did;
    it is called only for appendable files that are longer than what was read of them."""
    by_path = {r.path: r for r in known}
    plan = ContainerPlan()
    unchanged = 0
    for f in disk:
        rec = by_path.get(f.path)
        if rec is None:
            plan.new.append(f)
        elif force:
            plan.rewritten.append((rec, f))
        elif rec.size == f.size and rec.mtime_ns == f.mtime_ns:
            unchanged += 1
        elif (appendable(f.path) and f.size > rec.read_to
              and fingerprint(f.path, rec.read_to) == rec.fingerprint):
            plan.grown.append((rec, f))
        else:
            plan.rewritten.append((rec, f))
    on_disk = {f.path for f in disk}
    plan.gone.extend(r for r in known if r.path not in on_disk)
    return ContainerPlan(plan.new, plan.grown, plan.rewritten, plan.gone, unchanged)
