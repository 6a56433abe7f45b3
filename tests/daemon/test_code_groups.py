"""Code groups against a real daemon (decision 0030): a repository built with git, its symbols
found by name and description with their lines, its commits by author and date, a new commit
searchable within 2 s, a force-pushed commit gone, a repository added by rag_index."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import daemon_proc
import pytest
from code_fixtures import build_repo, commit_all, git
from daemon_proc import DaemonProc, wait_for

from daemon.settings.paths import resolve_paths

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform == "win32", reason="git and signals")]


@dataclass
class Env:
    root: Path
    repo: Path
    shas: dict[str, str]
    daemon: DaemonProc

    def search(self, query: str, **kw: Any) -> list[dict[str, Any]]:
        params = {"query": query, "collection": "work", "top_k": 10, **kw}
        return list(self.daemon.call("search", params)["results"])


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("code")
    repo = root / "uploader"
    shas = build_repo(repo)
    home = root / "home"
    config = resolve_paths({"RAGD_HOME": str(home)}).config_file
    config.parent.mkdir(parents=True)
    config.write_text(f"[obsidian]\nenabled = false\n\n[code]\n"
                      f"groups = {{ work = [{json.dumps(str(repo))}] }}\n"
                      "history_months = 600\n", encoding="utf-8")
    daemon = DaemonProc(home, None, root / "daemon.log").start()
    daemon_proc.STARTED.remove(daemon)  # stopped at the end of the module, not of a test
    try:
        daemon.wait_idle()
        yield Env(root, repo, shas, daemon)
    finally:
        daemon.stop()


def test_symbols_by_name_and_description_with_their_lines(env: Env) -> None:
    hits = env.search("upload_with_retry", source_type="code", mode="keyword")
    top = hits[0]["metadata"]
    assert (top["symbol_name"], top["symbol_type"], top["start_line"], top["end_line"]) == \
        ("upload_with_retry", "function", 7, 14)
    assert top["language"] == "python" and top["file_path"] == "src/upload.py"
    assert hits[0]["source_path"] == str(env.repo / "src" / "upload.py")
    described = env.search("where do we try a network transfer again after a failure",
                           source_type="code")
    assert described[0]["metadata"]["symbol_name"] == "upload_with_retry", \
        [h["metadata"].get("symbol_name") for h in described]
    ts = env.search("SessionCache remember", source_type="code", mode="keyword")
    assert ts[0]["metadata"]["file_path"] == "web/sessions.ts"  # after the rename
    assert {h["metadata"]["symbol_name"] for h in ts} >= {"SessionCache"}
    go = env.search("ParseQuota", mode="keyword")[0]["metadata"]
    assert (go["language"], go["start_line"]) == ("go", 4)


def test_gitignore_and_vendored_are_not_indexed(env: Env) -> None:
    assert not env.search("ignored_helper", mode="keyword")
    skipped = env.daemon.call("skipped", {"collection": "work"})
    codes = {(r["path"], r["skip_code"]) for r in skipped}
    assert ("uploader/node_modules", "vendored") in codes


def test_commits_by_author_and_date(env: Env) -> None:
    bob = env.search("sessions browser cache", source_type="commit", author="bob",
                     mode="keyword")
    assert bob and all(h["metadata"]["author_name"] == "Bob Stone" for h in bob)
    meta = bob[0]["metadata"]
    assert meta["commit_sha"] == env.shas["web"] and meta["commit_sha_short"] == \
        env.shas["web"][:8]
    assert meta["file_path"] == "web/session.ts" and meta["additions"] == 14
    assert meta["author_email"] == "bob@example.org"
    assert meta["author_date"].startswith("2026-10-05")
    dated = env.search("quotas rename session", source_type="commit", mode="keyword",
                       date_from="2026-11-01", date_to="2026-11-30")
    assert dated and {h["metadata"]["commit_sha"] for h in dated} == {env.shas["rename"]}
    renamed = [h["metadata"] for h in dated if h["metadata"].get("change") == "renamed"]
    assert renamed and renamed[0]["old_path"] == "web/session.ts"
    assert not env.search("quotas rename session", source_type="commit", mode="keyword",
                          date_to="2026-10-31", author="ann")


def test_new_commit_searchable_within_2s_and_force_push_removes_it(env: Env) -> None:
    (env.repo / "src" / "quokka.py").write_text(
        "def quokka_checksum(data):\n    return sum(data)\n", encoding="utf-8")
    sha = commit_all(env.repo, "Add the quokka checksum")
    t0 = time.monotonic()
    wait_for(lambda: any(h["metadata"].get("commit_sha") == sha
                         for h in env.search("quokka checksum", source_type="commit",
                                             mode="keyword")), 10, "the new commit")
    took = time.monotonic() - t0
    assert took < 2.0, f"new commit searchable after {took:.2f} s"
    assert env.search("quokka_checksum", source_type="code", mode="keyword")
    # A force-push (the branch moved back and on): the dropped commit leaves the index.
    git(env.repo, "reset", "-q", "--hard", "HEAD~1")
    (env.repo / "NOTES.md").write_text("# Notes\n\nsomething else\n", encoding="utf-8")
    other = commit_all(env.repo, "Something else entirely", date="2026-11-20T08:00:00+00:00")

    def gone() -> bool:
        shas = {h["metadata"].get("commit_sha") for h in env.search(
            "quokka checksum something else entirely", source_type="commit", mode="keyword")}
        return sha not in shas and other in shas

    wait_for(gone, 10, "the force-pushed commit to be gone")
    assert not env.search("quokka_checksum", source_type="code", mode="keyword")


def test_rag_index_adds_a_repository_to_the_group(env: Env) -> None:
    other = env.root / "tools"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    (other / "lint.sh").write_text("#!/bin/sh\n# runs the zebra linter\nzebra_lint() {\n"
                                   "  echo lint\n}\n", encoding="utf-8")
    commit_all(other, "Add the zebra linter")
    out = env.daemon.call("index", {"collection": "work", "path": str(other)}, timeout=120)
    assert out["collection"] == "work" and out["indexed"] >= 2
    (hit,) = [h for h in env.search("zebra_lint", mode="keyword", source_type="code")]
    assert hit["metadata"]["repository"] == "tools" and hit["metadata"]["start_line"] == 3
    assert hit["metadata"]["language"] == "bash"
    info = env.daemon.call("collection_info", {"collection": "work"})
    assert info["type"] == "code" and set(info["source_types"]) >= {"code", "commit"}
