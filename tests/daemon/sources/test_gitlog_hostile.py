"""Git history that cannot be forged or escape (decision 0042), with real git on tmp_path: a
message imitating separators, fields too big to hold, ``.git`` files and folders that point
out of the code group."""

from __future__ import annotations

import os
import shutil
import subprocess
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import pytest
from code_fixtures import build_repo, commit_all, git
from hostile_git import (
    forged_header_repo,
    forged_message_repo,
    gitfile_pointing_out,
    huge_author_repo,
)

from ragd.daemon.models import Document, Skip
from ragd.daemon.settings.codegroups import CodeConfig
from ragd.daemon.sources import gitlog
from ragd.daemon.sources.code import CodeKind
from ragd.daemon.sources.gitlog import (
    MAX_EMAIL_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_NAME_CHARS,
    GitError,
    GitOutside,
    Repo,
    list_commits,
    locate,
    read_commits,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _read(repos: dict[str, Path]) -> tuple[dict[str, str], list[Document]]:
    """Every container of a group walked and loaded: its skips by path, its documents."""
    kind = CodeKind({a: str(p) for a, p in repos.items()}, CodeConfig(history_months=600))
    root = next(iter(repos.values()))
    walked = kind.walk(root)
    docs: list[Document] = []
    for f in walked.files:
        docs += [d for e in kind.entries(root, f.path, 0)
                 if isinstance(d := e.load(), Document)]
    kind.close()
    return {p: s.code for p, s in walked.skipped}, docs


def _commits(docs: Sequence[Document]) -> dict[str, list[Document]]:
    out: dict[str, list[Document]] = {}
    for d in docs:
        if d.source_type == "commit":
            out.setdefault(d.metadata["commit_sha"], []).append(d)
    return out


@pytest.fixture
def git_calls(monkeypatch: pytest.MonkeyPatch) -> list[Repo]:
    """Every repository git is run on, as gitlog tells it where to look."""
    calls: list[Repo] = []
    cmd = gitlog._cmd

    def spy(repo: Repo, args: Sequence[str]) -> list[str]:
        calls.append(repo)
        return cmd(repo, args)

    monkeypatch.setattr(gitlog, "_cmd", spy)
    return calls


def test_a_message_imitating_separators_leaves_other_commits_intact(tmp_path: Path) -> None:
    repo = tmp_path / "forge"
    shas = forged_message_repo(repo)
    _, docs = _read({"r": repo})
    commits = _commits(docs)
    assert set(commits) == {shas["victim"], shas["forger"]}
    victim = commits[shas["victim"]]
    assert [d.metadata["file_path"] for d in victim] == ["victim.py"]
    assert {(d.metadata["author_name"], d.metadata["author_email"],
             d.metadata["commit_message"], d.metadata["author_date"]) for d in victim} == \
        {("Ann Lee", "ann@example.org", "Add the victim module", "2026-09-01T10:00:00+00:00")}
    forger = commits[shas["forger"]]
    assert [d.metadata["file_path"] for d in forger] == ["forger.py"]
    assert {d.metadata["author_name"] for d in forger} == {"Bob Stone"}
    assert {d.metadata["commit_message"] for d in forger} == {shas["message"].strip()}
    assert not any("stolen" in d.metadata["file_path"] or "Mallory" in d.metadata["author_name"]
                   for d in docs if d.source_type == "commit")
    # read on its own, in either order, each commit is what its own object says
    for order in ([shas["forger"], shas["victim"]], [shas["victim"], shas["forger"]]):
        got = {c.sha: c for c in read_commits(str(repo), order, max_files=10)}
        assert got[shas["victim"]].message == "Add the victim module"
        assert got[shas["forger"]].message == shas["message"].strip()


def test_huge_address_and_patch_line_are_cut_while_streaming(tmp_path: Path) -> None:
    repo = tmp_path / "wide-fields"
    sha = huge_author_repo(repo, author_mb=0.001, message_mb=5, email_mb=5, line_mb=5)
    tracemalloc.start()
    try:
        (commit,) = read_commits(str(repo), [sha], max_files=10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"{peak:,} bytes of Python allocations"
    assert commit.author_name.startswith("Huge n") and len(commit.author_name) == MAX_NAME_CHARS
    assert commit.author_email.startswith("hugeeee") and \
        len(commit.author_email) == MAX_EMAIL_CHARS
    assert commit.author_date == "2026-09-21T16:13:20+02:00"
    assert commit.message.startswith("A subject before a flood\n\nAll work")
    assert len(commit.message) == MAX_MESSAGE_CHARS
    (big,) = commit.files
    assert (big.path, big.additions, big.deletions) == ("big.py", 2, 0)
    assert max(len(line) for line in big.excerpt) == gitlog.EXCERPT_LINE_CHARS


@pytest.mark.slow
def test_a_5_mb_author_and_100_mb_message_are_read_in_bounded_memory(tmp_path: Path) -> None:
    """Measured before decision 0042: 442 MB of Python allocations and 11 s in read_commits
    alone, 5.8 GB in the daemon; now a few hundred kilobytes."""
    repo = tmp_path / "huge"
    sha = huge_author_repo(repo, author_mb=5, message_mb=100, line_mb=20)
    tracemalloc.start()
    try:
        _, docs = _read({"huge": repo})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak:,} bytes of Python allocations"
    (doc,) = _commits(docs)[sha]
    assert len(doc.metadata["author_name"]) == MAX_NAME_CHARS
    assert doc.metadata["author_email"] == "huge@example.org"
    assert doc.metadata["author_date"] == "2026-09-21T16:13:20+02:00"
    assert len(doc.metadata["commit_message"]) == MAX_MESSAGE_CHARS
    assert doc.metadata["file_path"] == "big.py"


def test_a_git_file_pointing_out_of_the_group_reads_nothing(tmp_path: Path,
                                                            git_calls: list[Repo]) -> None:
    other = tmp_path / "private"
    other_shas = build_repo(other)
    folder = gitfile_pointing_out(tmp_path / "group" / "pointer", other)
    skips, docs = _read({"p": folder})
    assert skips == {"p": "git_outside"}
    assert docs == []
    assert git_calls == []  # git would follow the file: it is never run
    # a container named by an older pass (or another process) is not read either
    kind = CodeKind({"p": str(folder)}, CodeConfig(history_months=600))
    loaded = [e.load() for rel in (f"p/@commits/{other_shas['first']}", "p/inside.py")
              for e in kind.entries(folder, rel, 0)]
    assert [s.code for s in loaded if isinstance(s, Skip)] == ["git_outside", "git_outside"]
    assert not [d for d in loaded if isinstance(d, Document)]
    assert git_calls == []


def test_a_link_or_a_commondir_out_of_the_group_is_outside(tmp_path: Path) -> None:
    other = tmp_path / "private"
    build_repo(other)
    linked = tmp_path / "linked"
    linked.mkdir()
    os.symlink(other / ".git", linked / ".git")
    with pytest.raises(GitOutside):
        locate(str(linked))
    # a .git file naming a folder inside the repository, whose commondir leads out
    borrowed = tmp_path / "borrowed"
    (borrowed / "store").mkdir(parents=True)
    (borrowed / ".git").write_text("gitdir: store\n", encoding="utf-8")
    (borrowed / "store" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (borrowed / "store" / "commondir").write_text(f"{other / '.git'}\n", encoding="utf-8")
    with pytest.raises(GitOutside):
        locate(str(borrowed))
    skips, docs = _read({"b": borrowed})
    assert skips == {"b": "git_outside"} and docs == []
    # inside the group, the same pointers are followed
    assert locate(str(linked), inside=[str(other)]).git_dir == str((other / ".git").resolve())


def test_a_worktree_in_the_group_is_read_and_one_alone_is_outside(tmp_path: Path) -> None:
    main = tmp_path / "main"
    build_repo(main)
    tree = tmp_path / "feature"
    git(main, "worktree", "add", "-q", "-b", "feature", str(tree))
    (tree / "feature.py").write_text("def new_feature():\n    return 2\n", encoding="utf-8")
    sha = commit_all(tree, "Add the new feature", date="2026-11-03T08:00:00+00:00")
    assert (tree / ".git").is_file()
    skips, docs = _read({"main": main, "feature": tree})
    assert "git_outside" not in skips.values()
    assert [d.metadata["file_path"] for d in _commits(docs)[sha]] == ["feature.py"]
    assert {d.metadata["repository"] for d in _commits(docs)[sha]} == {"feature"}
    assert "new_feature" in {d.metadata.get("symbol_name") for d in docs}
    skips, docs = _read({"feature": tree})  # its git folder lies in main, not in the group
    assert skips == {"feature": "git_outside"} and docs == []


def test_a_folder_without_git_never_reads_the_repository_above(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = tmp_path / "parent"
    build_repo(parent)
    plain = parent / "plain"
    plain.mkdir()
    (plain / "tool.py").write_text("def plain_tool():\n    pass\n", encoding="utf-8")
    skips, docs = _read({"plain": plain})
    assert skips == {"plain/@commits": "git_unreadable"}
    assert not _commits(docs)
    assert {d.metadata.get("symbol_name") for d in docs} == {"plain_tool"}
    # nor does a GIT_DIR in the daemon's environment lead git elsewhere
    own = tmp_path / "own"
    own.mkdir()
    git(own, "init", "-q", "-b", "main")
    (own / "mine.py").write_text("def mine():\n    pass\n", encoding="utf-8")
    mine = commit_all(own, "Mine alone")
    monkeypatch.setenv("GIT_DIR", str(parent / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(parent))
    _, docs = _read({"own": own})
    assert set(_commits(docs)) == {mine}
    with pytest.raises(GitError):
        gitlog.list_files(str(plain))


def test_an_ordinary_repository_reads_as_git_log_prints_it(tmp_path: Path) -> None:
    """What ragd reads of an ordinary repository is what git log prints of it."""
    repo = tmp_path / "plain"
    shas = build_repo(repo)
    got = {c.sha: c for c in read_commits(str(repo), list(shas.values()), max_files=10)}
    for sha in shas.values():
        fmt = "%an%x00%ae%x00%aI%x00%P%x00%B"
        out = subprocess.run(["git", "-C", str(repo), "log", "-1", f"--format={fmt}", sha],
                             capture_output=True, text=True, check=True).stdout
        name, email, date, parents, message = out.split("\0")
        c = got[sha]
        assert (c.author_name, c.author_email, c.author_date, c.parents, c.message) == \
            (name, email, date, tuple(parents.split()), message.strip())
    assert [(f.old_path, f.path) for f in got[shas["rename"]].files
            if f.old_path] == [("web/session.ts", "web/sessions.ts")]


def test_a_signature_header_cannot_pass_for_author_or_parent(tmp_path: Path) -> None:
    repo = tmp_path / "signed"
    sha = forged_header_repo(repo)
    (commit,) = read_commits(str(repo), [sha], max_files=10)
    fmt = "%an%x00%ae%x00%aI%x00%P%x00%B"
    name, email, date, parents, message = subprocess.run(
        ["git", "-C", str(repo), "log", "-1", f"--format={fmt}", sha], capture_output=True,
        check=True).stdout.decode("utf-8").split("\0")
    assert (commit.author_name, commit.author_email, commit.parents) == \
        ("Ann Lee", "ann@example.org", ()) == (name, email, tuple(parents.split()))
    assert commit.author_date == date.strip() == "2026-09-21T14:13:20+00:00"
    assert commit.message == message.strip() == "Caf\u00e9 cr\u00e8me"


def test_a_window_reaching_before_1973_lists_old_commits(tmp_path: Path) -> None:
    """git reads ``--since=1`` as the first of this month, not as 1970."""
    repo = tmp_path / "old"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("A = 1\n", encoding="utf-8")
    sha = commit_all(repo, "An old change", date="2001-01-01T00:00:00+00:00")
    assert [s for s, _ in list_commits(str(repo), 1, 10)] == [sha]


def test_a_submodule_is_read_when_its_superproject_is_in_the_group(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    git(lib, "init", "-q", "-b", "main")
    (lib / "parse.py").write_text("def parse_quota():\n    pass\n", encoding="utf-8")
    sha = commit_all(lib, "Parse quotas in the library")
    app = tmp_path / "app"
    build_repo(app)
    git(app, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    sub = app / "lib"
    assert (sub / ".git").is_file()  # gitdir: ../.git/modules/lib
    skips, docs = _read({"app": app, "lib": sub})
    assert "git_outside" not in skips.values()
    assert [d.metadata["file_path"] for d in _commits(docs)[sha]] == ["parse.py"]
    skips, docs = _read({"lib": sub})
    assert skips == {"lib": "git_outside"} and docs == []
