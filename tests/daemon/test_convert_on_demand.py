"""A client's conversions never hold the worker indexing needs (issue 28, row 20; decision
0024): while two rag_convert calls on a document that always times out keep the on-demand
worker busy, a PDF saved into a project is searchable as soon as it alone is converted."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc, wait_for
from document_fixtures import pdf_bytes
from slow_documents import cpu_seconds, slow_latex, worker_pids
from vault_fixtures import write_vault

from ragd.daemon.errors import RagdError

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="reads processes from /proc")]

TIMEOUT_S = 4  # documents.timeout_s: each rag_convert of the slow paper times out after it
SAVE_BUDGET_S = 3.0  # a PDF's conversion in a worker started for it, then its commit


def keyword_hit(d: DaemonProc, word: str) -> bool:
    answer = d.call("search", {"query": word, "mode": "keyword", "top_k": 3})
    return bool(answer["results"])


def test_a_project_save_does_not_wait_behind_two_timing_out_conversions(
        ragd_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGD_DOCUMENTS_TIMEOUT_S", str(TIMEOUT_S))
    vault = write_vault(tmp_path / "vault")
    project = tmp_path / "project"
    (project / "node_modules").mkdir(parents=True)  # inside the project, never indexed
    (project / "readme.md").write_text("# Readme\n\nNotes on the project.\n", encoding="utf-8")
    slow = project / "node_modules" / "paper.tex"
    slow.write_bytes(slow_latex(1.5))  # ~15 s of parsing: past the limit every time
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon.log").start()
    try:
        d.call("index", {"collection": "proj", "path": str(project)}, timeout=120)
        d.wait_idle()
        assert worker_pids(ragd_home) == []  # markdown only so far: no worker yet

        answers: list[tuple[float, Any]] = []
        t_calls = time.monotonic()

        def rag_convert() -> None:
            try:
                result: Any = d.call("convert", {"file_path": str(slow)}, timeout=120)
            except RagdError as exc:
                result = exc
            answers.append((time.monotonic() - t_calls, result))

        calls = [threading.Thread(target=rag_convert) for _ in range(2)]
        for call in calls:
            call.start()
        wait_for(lambda: [p for p in worker_pids(ragd_home) if cpu_seconds(p) > 0.5], 30,
                 "the on-demand worker to be converting")

        t0 = time.monotonic()
        tmp = tmp_path / "report.pdf"
        tmp.write_bytes(pdf_bytes(["Quarterly zorblaxian figures for the board."]))
        os.replace(tmp, project / "report.pdf")  # an atomic save, as applications do
        wait_for(lambda: keyword_hit(d, "zorblaxian"), 60, "the saved PDF to be searchable")
        waited = time.monotonic() - t0
        busy_then = len(answers) < 2
        print(f"the PDF was searchable {waited:.2f} s after its save; "
              f"{len(answers)} of 2 rag_convert calls had answered")
        for call in calls:
            call.join(120)
        assert busy_then, "the client's conversions ended before the save was indexed"
        assert waited < SAVE_BUDGET_S, f"the save waited {waited:.1f} s"
        # Both calls timed out, one after the other, in their own worker.
        assert len(answers) == 2
        for _, answer in answers:
            assert isinstance(answer, RagdError) and "convert_timeout" in str(answer), answer
        assert max(t for t, _ in answers) >= 2 * TIMEOUT_S
    finally:
        d.stop()
