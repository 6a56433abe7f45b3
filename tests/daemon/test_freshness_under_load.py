"""A saved note stays fresh while bulk work runs (issue 21, decision 0022): a real daemon, a
generated project big enough to keep it busy for a minute, real file-system events."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc, duplicate_chunks, settle, wait_for
from vault_fixtures import write_vault

from ragd.daemon.runtime.app import App
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths

pytestmark = pytest.mark.slow

_WORDS = ("river", "stone", "lantern", "orbit", "copper", "meadow", "signal", "harbor", "cinder",
          "velvet", "quarry", "thistle", "ember", "glacier", "saddle", "prism", "anchor",
          "willow", "falcon", "marble", "canyon", "harvest", "compass", "tundra", "beacon",
          "juniper", "lattice", "summit", "cobalt", "furnace")


def write_project(root: Path, files: int, paragraphs: int, seed: int = 21) -> None:
    """Markdown files of distinct random text: each paragraph is about one chunk."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    for n in range(files):
        body = "\n\n".join(" ".join(rng.choice(_WORDS) for _ in range(150))
                           for _ in range(paragraphs))
        (root / f"doc {n:04}.md").write_text(f"# Document {n}\n\n{body}\n", encoding="utf-8")


def keyword_paths(d: DaemonProc, query: str, mode: str = "keyword", top_k: int = 5
                  ) -> list[str]:
    answer = d.call("search", {"query": query, "mode": mode, "top_k": top_k})
    return [r["source_path"] for r in answer["results"]]


def busy(d: DaemonProc) -> dict[str, Any]:
    st = d.call("status")
    return st if st["embedding"]["chunks"] > 0 or st["queue"] or st.get("current") else {}


def check_converged(vault: Path, project: Path) -> None:
    paths = resolve_paths()
    with App(paths, load_config(paths, {"obsidian.vaults": [str(vault)]})) as app:
        c = app.consistency()
        assert c["ok"] and c["unembedded"] == 0, c
        assert duplicate_chunks(app) == []
        coll = app.collection("bulk")
        records = app.catalog.source_records(coll.id)
        assert {r.path for r in records} == {p.name for p in project.glob("*.md")}
        assert all(r.status == "ok" for r in records)


def test_ten_saves_are_searchable_while_a_big_project_indexes(ragd_home: Path,
                                                              tmp_path: Path) -> None:
    vault = write_vault(tmp_path / "vault")
    project = tmp_path / "project"
    write_project(project, files=200, paragraphs=6)  # ~1,200 chunks: half a minute or more
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon.log").start()
    try:
        d.wait_idle()
        queued = d.call("index", {"collection": "bulk", "path": str(project), "wait": False})
        assert queued["queued"]
        wait_for(lambda: busy(d), 30, "the project to be under way")
        (vault / "Inbox").mkdir()
        for n in range(10):
            word = f"zqx{n}fresh"
            t0 = time.monotonic()
            (vault / "Inbox" / f"Idea {n}.md").write_text(
                f"# Idea {n}\n\nA {word} thought, saved during the bulk job.\n", encoding="utf-8")
            wait_for(lambda w=word: keyword_paths(d, w), 2.0, f"save {n} to be searchable")
            assert time.monotonic() - t0 < 2.0
            # Hybrid finds it too, before its vectors exist (where it ranks a one-note word
            # among semantic neighbours is issue 22's fusion work).
            assert any(p.endswith(f"Idea {n}.md")
                       for p in keyword_paths(d, word, "hybrid", top_k=20))
        still = busy(d)
        assert still, "the project finished before the saves: the test proved nothing"
        assert still["indexing"]["remaining"] > 0
        # Each save's small job is timed by phase (issue 21): what it waited for, its run.
        # Recorded when the job ends, a moment after its note is searchable.
        saves = [f"Inbox/Idea {n}.md" for n in range(10)]

        def timed() -> dict[str, Any]:
            # A save's job may name its folder instead: the watcher folds the new folder's
            # event ("Inbox") and the first note written into it into one hint.
            jobs = [j for j in d.call("status")["small_jobs"]
                    if j["finished"] and j["visible_s"] is not None]
            found = {s: j for j in jobs for s in saves
                     if any(s == p or s.startswith(p + "/") for p in j["paths"])}
            return found if all(s in found for s in saves) else {}

        try:
            jobs = wait_for(timed, 60, "the saves' timing records")
        except AssertionError as exc:  # say which records there were
            raise AssertionError(f"{exc}; small jobs: {d.call('status')['small_jobs']}") from exc
        for path in saves:
            job = jobs[path]
            assert job["collection"] == "obsidian", job
            assert 0 <= job["wait_s"] <= job["visible_s"] <= job["total_s"], job
            assert job["visible_s"] < 2.0 and isinstance(job["wait"], dict) and job["run"], job
        d.wait_idle(timeout=900)
        status = d.call("status")
        project_coll = next(c for c in status["collections"] if c["name"] == "bulk")
        assert project_coll["source_count"] == 200 and project_coll["unembedded_chunks"] == 0
        # Every text embedded once: the embedder's counter equals the cached vectors.
        import sqlite3

        db = sqlite3.connect(f"file:{ragd_home / 'data' / 'catalog.sqlite'}?mode=ro", uri=True)
        vectors = db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
        db.close()
        assert status["embedded_total"] == vectors
        # The saves became semantically searchable as well.
        assert any(p.endswith("Idea 3.md")
                   for p in keyword_paths(d, "a thought saved during the bulk job",
                                          "semantic", top_k=20))
    finally:
        d.stop()
    check_converged(vault, project)


def test_kill_nine_during_an_interleaved_run_converges(ragd_home: Path, tmp_path: Path) -> None:
    vault = write_vault(tmp_path / "vault")
    project = tmp_path / "project"
    write_project(project, files=80, paragraphs=6, seed=7)
    log = tmp_path / "kills.log"
    rng = random.Random(28)
    d = DaemonProc(ragd_home, vault, log).start()
    d.wait_idle()
    d.call("index", {"collection": "bulk", "path": str(project), "wait": False})
    (vault / "Inbox").mkdir()
    for n in range(5):
        wait_for(lambda d=d: d.call("status", timeout=5)["state"] != "starting", 60,
                 "the model")
        (vault / "Inbox" / f"Kill {n}.md").write_text(f"# Kill {n}\n\nkillword{n}\n",
                                                       encoding="utf-8")
        time.sleep(rng.uniform(0.1, 2.0))  # a random instant: reading, embedding, a commit
        d.kill9()
        d = DaemonProc(ragd_home, vault, log).start()
    settle(d, timeout=900)
    check_converged(vault, project)
    paths = resolve_paths()
    with App(paths, load_config(paths, {"obsidian.vaults": [str(vault)]})) as app:
        notes = {r.path for r in app.catalog.source_records(app.collection("obsidian").id)}
        assert {f"Inbox/Kill {n}.md" for n in range(5)} <= notes
