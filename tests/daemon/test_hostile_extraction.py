"""Untrusted files read outside the daemon (issue 34, decision 0041), against a real daemon:
while a hostile item is read in an extraction worker, searches answer, the daemon stays under
1 GB, and the item ends skipped with its code."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
from code_fixtures import commit_all, git
from daemon_proc import DaemonProc
from hostile_daemon import GB, Hostile, environment
from vault_fixtures import write_vault

pytestmark = pytest.mark.slow

TIMEOUT_S = 4  # extract.timeout_s here: the hostile items take far longer


def _children(pid: int) -> set[int]:
    """The daemon's child processes (the extraction and conversion workers)."""
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text(encoding="ascii").split()
        out.update(int(p) for p in text)
    return out


def _workers(pid: int) -> set[int]:
    found = set()
    for child in _children(pid):
        try:
            cmd = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"ragd.daemon.extract.worker" in cmd:
            found.add(child)
    return found


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory, shared_models: Path
            ) -> Iterator[Hostile]:
    root = tmp_path_factory.mktemp("hostile-extract")
    vault = write_vault(root / "vault")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "ok.py").write_text("def fine():\n    '''An ordinary kiwiword function.'''\n",
                                encoding="utf-8")
    commit_all(repo, "An ordinary first commit")
    home = root / "home"
    (home / "data").mkdir(parents=True, mode=0o700)
    (home / "data" / "models").symlink_to(shared_models, target_is_directory=True)
    with environment(RAGD_CODE_GROUPS=f"grp={repo}", RAGD_EXTRACT_TIMEOUT_S=str(TIMEOUT_S)):
        d = DaemonProc(home, vault, root / "daemon.log").start()
    try:
        d.wait_idle(timeout=300)
        project = root / "project"
        project.mkdir()
        (project / "start.md").write_text("# Start\n\nThe project's first note.\n",
                                          encoding="utf-8")
        d.call("index", {"collection": "proj", "path": str(project)}, timeout=120)
        yield Hostile(d, vault, home, project)
    finally:
        d.stop()


def _saves_during(h: Hostile, busy: str, n: int = 5) -> list[float]:
    """``n`` notes saved into the vault while the daemon reads ``busy``: their seconds."""
    h.busy_with(busy, timeout=60)
    return [h.save_note() for _ in range(n)]


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


def test_nested_templates_stop_at_the_deadline(hostile: Hostile) -> None:
    """Was: tree-sitter's tag query ran 275 s on 900 KB of nested ``template<`` with the GIL
    held, freezing every daemon thread. Now the worker is stopped at the deadline."""
    repo = hostile.root.parent / "repo"
    (repo / "deep.cpp").write_text("template<\n" * 60_000, encoding="ascii")
    commit_all(repo, "Add a deep template file")
    hostile.busy_with("grp", timeout=60)  # the commit is seen by the watcher
    answered = hostile.keyword("kiwiword")  # searches answer while it is read
    row = hostile.source("skip:repo/deep.cpp", timeout=120)
    assert (row["status"], row["skip_code"]) == ("skipped", "extract_timeout"), row
    assert hostile.sources("path LIKE 'code:repo/ok.py#%'"), "the ordinary file is indexed"
    assert answered, "a search during the case"
    assert hostile.peak_rss() < GB, f"peak RSS {hostile.peak_rss() / 2**20:.0f} MB"
    # Saves while such a container stalls its worker are issue 34's open row (decision 0041).
    print(f"nested templates: peak {hostile.peak_rss() / 2**20:.0f} MB")
