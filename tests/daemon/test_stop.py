"""Stop means stop (issue 28, row 14; decision 0024): a real daemon busy converting a document
that takes minutes stops within 5 s, and no conversion worker outlives it, however it ends
(`ragd stop`, SIGKILL, SIGTERM)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from daemon_proc import DaemonProc, duplicate_chunks, wait_for
from slow_documents import alive, cpu_seconds, slow_latex, worker_pids
from vault_fixtures import write_vault

from ragd.daemon.runtime.app import App
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="reads processes from /proc")]

STOP_BUDGET_S = 5.0


def busy_worker(d: DaemonProc) -> int:
    """The pid of the daemon's conversion worker once it is well into converting."""
    def converting() -> int | None:
        busy = [p for p in worker_pids(d.home) if cpu_seconds(p) > 1.0]
        return busy[0] if busy else None

    return wait_for(converting, 90, "a conversion worker to be converting", interval=0.1)


def skips(home: Path) -> list[tuple[str, str]]:
    db = sqlite3.connect(f"file:{home / 'data' / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT path, skip_code FROM sources WHERE status='skipped'").fetchall()
    finally:
        db.close()


def test_stop_within_5_s_during_a_slow_conversion_and_no_worker_left(ragd_home: Path,
                                                                      tmp_path: Path) -> None:
    vault = write_vault(tmp_path / "vault")
    project = tmp_path / "project"
    project.mkdir()
    (project / "readme.md").write_text("# Readme\n\nA project with a slow paper.\n",
                                       encoding="utf-8")
    (project / "paper.tex").write_bytes(slow_latex(3.0))  # minutes of pylatexenc
    env = {**os.environ, "RAGD_HOME": str(ragd_home)}

    # `ragd stop` while the worker converts.
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon.log").start()
    d.wait_idle()
    d.call("index", {"collection": "papers", "path": str(project), "wait": False})
    worker = busy_worker(d)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "ragd.daemon.cli.main", "stop"], env=env,
                         capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    print(f"ragd stop took {took:.2f} s during a conversion")
    assert out.returncode == 0, out.stderr
    assert took < STOP_BUDGET_S, f"ragd stop took {took:.1f} s"
    assert d.proc is not None and d.proc.wait(timeout=1) == 0
    assert "stopped" in out.stdout and "killed" not in out.stderr
    assert not alive(worker), "the conversion worker outlived the daemon"
    # The cancelled conversion is not the document's failure: nothing is recorded for it.
    assert "paper.tex" not in {path for path, _ in skips(ragd_home)}, skips(ragd_home)

    # SIGKILL: the daemon runs no code at all; the worker notices (the kernel tells it).
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon2.log").start()
    worker = busy_worker(d)  # the catch-up sweep converts the paper again
    d.kill9()  # the daemon's own process group: the worker leads another
    wait_for(lambda: not alive(worker), 2.0, "the orphaned worker to exit")

    # SIGTERM, as a service manager stops it.
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon3.log").start()
    worker = busy_worker(d)
    assert d.proc is not None
    t0 = time.monotonic()
    os.kill(d.proc.pid, signal.SIGTERM)
    code = d.proc.wait(timeout=30)
    took = time.monotonic() - t0
    print(f"SIGTERM: the daemon exited in {took:.2f} s (code {code})")
    assert code == 0 and took < STOP_BUDGET_S
    assert not alive(worker)
    assert worker_pids(ragd_home) == []


def ragd_stop(home: Path) -> float:
    """Run `ragd stop`; how long it took."""
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "ragd.daemon.cli.main", "stop"],
                         env={**os.environ, "RAGD_HOME": str(home)}, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "stopped" in out.stdout, out
    return time.monotonic() - t0


def test_stop_within_5_s_while_embedding_a_big_project_and_nothing_is_lost(
        ragd_home: Path, tmp_path: Path) -> None:
    vault = write_vault(tmp_path / "vault")
    project = tmp_path / "bulk"
    project.mkdir()
    words = ["river", "stone", "lantern", "orbit", "copper", "meadow", "signal", "harbor",
             "cinder", "velvet", "quarry", "thistle", "ember", "glacier", "saddle", "prism"]
    for n in range(150):
        body = "\n\n".join(" ".join(words[(n * 7 + p * 3 + i) % len(words)] for i in range(150))
                           for p in range(8))
        (project / f"doc {n:03}.md").write_text(f"# Doc {n}\n\n{body}\n", encoding="utf-8")
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon.log").start()
    d.wait_idle()
    d.call("index", {"collection": "bulk", "path": str(project), "wait": False})
    wait_for(lambda: d.call("status")["embedding"]["chunks"] > 100, 60,
             "a backlog of chunks being embedded")
    took = ragd_stop(ragd_home)
    print(f"ragd stop took {took:.2f} s while embedding")
    assert took < STOP_BUDGET_S
    assert d.proc is not None and d.proc.wait(timeout=1) == 0
    # Whatever the stop cut short, the stores agree once the next start replays the journal.
    paths = resolve_paths()
    with App(paths, load_config(paths, {"obsidian.vaults": [str(vault)]})) as app:
        assert app.consistency()["ok"] and duplicate_chunks(app) == []
