"""Skips of the moment are tried again (decision 0026), against a real daemon: a MOBI skipped
while ebook-convert was missing is indexed after a restart that finds it; a document that times
out is tried again once in a new run of the daemon, not at every sweep."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc, wait_for
from document_fixtures import calibre_mobi
from slow_documents import slow_latex
from vault_fixtures import write_vault

pytestmark = pytest.mark.slow


def skip_rows(home: Path) -> dict[str, tuple[str, float]]:
    """path -> (skip code, when skipped), read from the daemon's catalog."""
    db = sqlite3.connect(f"file:{home / 'data' / 'catalog.sqlite'}?mode=ro", uri=True,
                         timeout=10)
    try:
        rows = db.execute("SELECT path, skip_code, indexed_at FROM sources"
                          " WHERE status='skipped'").fetchall()
    finally:
        db.close()
    return {path: (code, at) for path, code, at in rows}


def hits(d: DaemonProc, query: str) -> list[dict[str, Any]]:
    return list(d.call("search", {"query": query, "mode": "keyword", "top_k": 3})["results"])


@pytest.mark.skipif(shutil.which("ebook-convert") is None,
                    reason="Calibre's ebook-convert is not installed (apt install calibre)")
def test_a_mobi_skipped_without_ebook_convert_is_indexed_after_a_restart_with_it(
        ragd_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vault = write_vault(tmp_path / "vault")
    project = tmp_path / "project"
    project.mkdir()
    calibre_mobi(project / "alice.mobi")  # one chapter by Calibre: no novel to embed
    empty_bin = tmp_path / "no-calibre"
    empty_bin.mkdir()
    path = os.environ.get("PATH", "")
    monkeypatch.setenv("PATH", str(empty_bin))  # the daemon and its worker lack ebook-convert
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon.log").start()
    try:
        d.call("index", {"collection": "books", "path": str(project)}, timeout=120)
        d.wait_idle()
        assert skip_rows(ragd_home)["alice.mobi"][0] == "ebook_convert_missing"
        d.call("index", {"collection": "books"}, timeout=120)  # a sweep: still no tool
        d.wait_idle()
        assert skip_rows(ragd_home)["alice.mobi"][0] == "ebook_convert_missing"
    finally:
        d.stop()
    monkeypatch.setenv("PATH", path)  # Calibre installed; the file itself did not change
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon2.log").start()
    try:
        found = wait_for(lambda: hits(d, "rabbit hole"), 120, "the book to be indexed")
        assert found[0]["source_path"].endswith("alice.mobi")
        assert "alice.mobi" not in skip_rows(ragd_home)
    finally:
        d.stop()


TIMEOUT_S = 3  # documents.timeout_s: the slow paper times out after it, every time


def test_a_timed_out_document_is_tried_again_once_per_run_not_at_every_sweep(
        ragd_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGD_DOCUMENTS_TIMEOUT_S", str(TIMEOUT_S))
    vault = write_vault(tmp_path / "vault")
    project = tmp_path / "project"
    project.mkdir()
    (project / "paper.tex").write_bytes(slow_latex(1.5))  # ~15 s to parse: past the limit
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon.log").start()
    try:
        d.call("index", {"collection": "proj", "path": str(project)}, timeout=120)
        d.wait_idle()
        code, first = skip_rows(ragd_home)["paper.tex"]
        assert code == "convert_timeout"
        d.call("index", {"collection": "proj"}, timeout=120)  # a sweep in the same run
        d.wait_idle()
        assert skip_rows(ragd_home)["paper.tex"] == (code, first)  # not tried again
    finally:
        d.stop()
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon2.log").start()
    try:
        wait_for(lambda: skip_rows(ragd_home)["paper.tex"][1] > first, 120,
                 "the timed-out paper to be tried again in the new run")
        d.wait_idle()
        again = skip_rows(ragd_home)["paper.tex"]
        assert again[0] == "convert_timeout"
        d.call("index", {"collection": "proj"}, timeout=120)
        d.wait_idle()
        assert skip_rows(ragd_home)["paper.tex"] == again  # once per run
    finally:
        d.stop()
