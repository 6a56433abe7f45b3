"""The daemon as users meet it: a real process, its socket, real file-system events."""

from __future__ import annotations

import os
import random
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc, catalog_progress, duplicate_chunks, settle, wait_for
from vault_fixtures import write_vault

from ragd.daemon.runtime.app import App
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths

pytestmark = pytest.mark.slow


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return write_vault(tmp_path / "vault")


@pytest.fixture
def daemon(ragd_home: Path, vault: Path, tmp_path: Path) -> Iterator[DaemonProc]:
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon.log").start()
    try:
        d.wait_idle()
        yield d
    finally:
        d.stop()


def found(d: DaemonProc, query: str, **params: Any) -> list[str]:
    answer = d.call("search", {"query": query, "mode": "keyword", **params})
    assert answer["indexing"] is None or set(answer["indexing"]) == {
        "active", "remaining", "unembedded_chunks"}
    return [r["source_path"] for r in answer["results"]]


def test_start_up_says_what_it_is_doing_and_announces_itself_once(
        ragd_home: Path, vault: Path, tmp_path: Path) -> None:
    # Holding the catalog's write lock keeps the daemon at "opening index" until released
    # (it waits up to 30 s for SQLite's lock), so the test sees a request wait, deterministically.
    catalog = ragd_home / "data" / "catalog.sqlite"
    catalog.parent.mkdir(parents=True, exist_ok=True)
    lock = sqlite3.connect(str(catalog), isolation_level=None)
    lock.execute("PRAGMA journal_mode=WAL")
    lock.execute("BEGIN EXCLUSIVE")
    log = tmp_path / "daemon.log"
    env = {**os.environ, "RAGD_HOME": str(ragd_home), "HF_HUB_OFFLINE": "1"}
    ragd = str(Path(sys.executable).with_name("ragd"))
    d = DaemonProc(ragd_home, vault, log).start()
    try:
        first = d.call("status")
        assert first["state"] == "starting"
        assert first["phase"] in ("loading model", "opening index")
        st = wait_for(lambda: (s := d.call("status", {"brief": True}))["phase"]
                      == "opening index" and s, 60, "the daemon to open its index")
        assert st["state"] == "starting" and st["starting_s"] > 0 and st["ready_s"] is None

        waiting = subprocess.Popen([ragd, "search", "telescope", "--mode", "keyword"], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert waiting.stderr is not None
        notice = waiting.stderr.readline()  # printed before the search waits
        assert notice.startswith("ragd: the daemon is starting (opening the index, "), notice
        lock.execute("COMMIT")
        out, err = waiting.communicate(timeout=120)
        assert waiting.returncode == 0, err
        assert err == ""  # one notice line, nothing more
        # Answered at once from what is indexed so far (nothing yet), and said to be partial.
        assert "results may be partial" in out, out

        d.wait_idle()
        st = d.call("status")
        assert st["phase"] is None and st["starting_s"] is None and st["ready_s"] > 0
        ready = subprocess.run([ragd, "search", "telescope", "--mode", "keyword"], env=env,
                               capture_output=True, text=True, timeout=120, check=False)
        assert ready.returncode == 0 and ready.stderr == ""  # no wait, no notice
    finally:
        lock.close()
        d.stop()
    lines = log.read_text(encoding="utf-8").splitlines()
    # (not the model pack's "int8 graph ready in", logged when the graph is built)
    announced = [line for line in lines if "ready in" in line and "answering on" in line]
    assert len(announced) == 1, lines
    assert str(resolve_paths().socket_path) in announced[0]
    assert "Ctrl-C" in announced[0] and "`ragd stop`" in announced[0]


def test_saves_deletes_and_renames_are_searchable_within_two_seconds(
        daemon: DaemonProc, vault: Path) -> None:
    note = vault / "Inbox" / "Fresh idea.md"
    note.parent.mkdir()
    t0 = time.monotonic()
    note.write_text("# Fresh idea\n\nA quixotic zeppelin timetable.", encoding="utf-8")
    wait_for(lambda: found(daemon, "zeppelin"), 2.0, "the saved note to be searchable")
    assert time.monotonic() - t0 < 2.0

    # Keyword-searchable at once; its vectors follow from the embedding thread.
    embedded = wait_for(lambda: (st := daemon.call("status"))["embedding"]["chunks"] == 0
                        and st["embedded_total"], 10.0, "the saved note's vectors")
    moved = vault / "Archive" / "Old idea.md"
    moved.parent.mkdir()
    note.rename(moved)
    wait_for(lambda: [p for p in found(daemon, "zeppelin") if p.endswith("Archive/Old idea.md")],
             2.0, "the renamed note under its new path")
    assert found(daemon, "zeppelin") == [str(moved.resolve())]
    assert daemon.call("status")["embedded_total"] == embedded  # a rename embeds nothing

    moved.unlink()
    wait_for(lambda: not found(daemon, "zeppelin"), 2.0, "the deleted note to disappear")


def test_folder_moved_in_and_out_and_atomic_saves(daemon: DaemonProc, vault: Path,
                                                  tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "Trips"
    outside.mkdir(parents=True)
    for n in range(3):
        (outside / f"Trip {n}.md").write_text(f"# Trip {n}\n\nFjord kayak {n}.", encoding="utf-8")
    os.rename(outside, vault / "Trips")  # one event for the folder, none for its files
    wait_for(lambda: len(found(daemon, "fjord")) == 3, 3.0, "the moved-in folder's notes")

    # An editor's atomic save: write a temp file, then rename it over the note.
    tmp = vault / "Trips" / ".Trip 0.md.swp"
    tmp.write_text("# Trip 0\n\nGlacier hike instead.", encoding="utf-8")
    os.replace(tmp, vault / "Trips" / "Trip 0.md")
    wait_for(lambda: found(daemon, "glacier"), 3.0, "the atomically saved note")

    os.rename(vault / "Trips", tmp_path / "outside" / "Trips again")
    wait_for(lambda: not found(daemon, "fjord") and not found(daemon, "glacier"), 3.0,
             "the moved-out folder's notes to disappear")


def test_burst_of_changes_is_coalesced(daemon: DaemonProc, vault: Path) -> None:
    burst = vault / "Burst"
    burst.mkdir()
    for n in range(300):
        (burst / f"n{n:03}.md").write_text(f"# N{n}\n\nBurstword number {n}.", encoding="utf-8")
    st = wait_for(lambda: (s := daemon.call("status"))["collections"][0]["source_count"] >= 308
                  and s["state"] == "idle" and s, 120, "the burst to be indexed")
    assert st["collections"][0]["source_count"] == 308


def test_changes_while_stopped_are_found_after_start(ragd_home: Path, vault: Path,
                                                     tmp_path: Path) -> None:
    d = DaemonProc(ragd_home, vault, tmp_path / "d.log").start()
    d.wait_idle()
    d.stop()
    (vault / "Offline.md").write_text("# Offline\n\nWritten while ragd slept: marzipan.",
                                      encoding="utf-8")
    (vault / "Music" / "Practice routine.md").unlink()
    d = DaemonProc(ragd_home, None, tmp_path / "d.log").start()  # the vault is remembered
    try:
        wait_for(lambda: found(d, "marzipan"), 60, "the offline edit")
        wait_for(lambda: not found(d, "metronome"), 60, "the offline deletion")
    finally:
        d.stop()


def test_twenty_clients_search_while_indexing(daemon: DaemonProc, vault: Path) -> None:
    bulk = vault / "Bulk"
    bulk.mkdir()
    for n in range(150):
        (bulk / f"b{n:03}.md").write_text(f"# Bulk {n}\n\n" + f"Paragraph {n} about ferns. " * 30,
                                          encoding="utf-8")
    wait_for(lambda: daemon.call("status")["indexing"]["remaining"] > 0, 10, "indexing to start")
    seen_remaining: list[int] = []
    errors: list[BaseException] = []
    latencies: list[float] = []

    def client(n: int) -> None:
        try:
            with daemon.client(timeout=20) as c:
                for _ in range(5):
                    t0 = time.monotonic()
                    answer = c.call("search", {"query": f"telescope {n}", "top_k": 3})
                    latencies.append(time.monotonic() - t0)
                    seen_remaining.append(answer["indexing"]["remaining"])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(latencies) == 100
    assert max(seen_remaining) > 0  # they ran while indexing was under way...
    assert max(latencies) < 10  # ...and none waited for it to finish (150 notes take longer)
    st = daemon.wait_idle()
    assert st["indexing"] == {"active": False, "remaining": 0, "unembedded_chunks": 0}
    assert daemon.call("search", {"query": "ferns"})["indexing"]["remaining"] == 0


def test_garbage_on_the_socket_never_stops_the_daemon(daemon: DaemonProc) -> None:
    address = daemon.call("status") and resolve_paths().socket_path
    with daemon.client() as healthy:
        def garbage(payload: bytes, hang_up: bool = True) -> None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(address)
            s.settimeout(10)
            try:
                s.sendall(payload)
                if not hang_up:
                    s.recv(4096)
            except OSError:
                pass
            finally:
                s.close()
            assert healthy.call("status")["state"] in ("idle", "indexing")

        garbage(os.urandom(4096) + b"\n", hang_up=False)
        garbage(b'{"jsonrpc": "2.0", "id": 1, "method": "search", "params": [1, 2]}\n', False)
        garbage(b'[1, 2, 3]\n{"id": 5}\n', hang_up=False)
        garbage(b'{"jsonrpc": "2.0", "id": 1, "meth')  # half a frame, then hang up
        big = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        big.connect(address)
        chunk = b"x" * (1 << 20)
        try:
            for _ in range(100):  # a 100 MB line, streamed
                big.sendall(chunk)
            big.sendall(b"\n")
            big.settimeout(10)
            assert b"too large" in big.recv(4096)
        except OSError:
            pass  # the daemon may also hang up on it: either way it keeps serving
        finally:
            big.close()
        assert healthy.call("search", {"query": "telescope"})["results"]


def test_socket_is_private(daemon: DaemonProc) -> None:
    paths = resolve_paths()
    assert stat.S_IMODE(os.stat(paths.socket_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(Path(paths.socket_path).parent).st_mode) == 0o700


def test_second_daemon_refuses_to_start(daemon: DaemonProc, ragd_home: Path,
                                        tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "ragd.daemon.cli.main", "daemon"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "RAGD_HOME": str(ragd_home)})
    assert proc.returncode != 0 and "already running" in proc.stderr


def test_kill_nine_at_twenty_points_then_restart_is_consistent(
        ragd_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A low threshold: the approximate FAISS index is built (in the background) and rebuilt
    # after restarts while the kills land, so a kill can hit a build too.
    monkeypatch.setenv("RAGD_INDEX_APPROX_VECTORS_FROM", "300")
    vault = tmp_path / "big"
    vault.mkdir()
    for n in range(240):
        (vault / f"Note {n:03}.md").write_text(
            f"# Note {n}\n\n" + f"Sentence {n} about subject {n % 17}. " * (20 + n % 60),
            encoding="utf-8")
    log = tmp_path / "kills.log"
    rng = random.Random(20)
    d = DaemonProc(ragd_home, vault, log).start()
    for point in range(20):
        wait_for(lambda d=d: d.call("status", timeout=5)["state"] != "starting", 60, "the model")
        if point % 3 == 1:  # make sure indexing moves forward between kills
            before = catalog_progress(ragd_home)
            wait_for(lambda b=before, d=d: catalog_progress(ragd_home) > b
                     or d.call("status")["state"] == "idle",
                     180, "indexing progress", interval=0.05)
        # A random instant inside a group: embedding, the catalog commit, or an index write.
        time.sleep(rng.uniform(0, 1.5))
        d.kill9()
        d = DaemonProc(ragd_home, None, log).start()
    settle(d)
    paths = resolve_paths()
    with App(paths, load_config(paths)) as app:
        c = app.consistency()
        assert c["ok"], c
        coll = app.collection("obsidian")
        records = {r.path: r for r in app.catalog.source_records(coll.id)}
        assert set(records) == {p.name for p in vault.glob("*.md")}
        assert all(r.status == "ok" for r in records.values())
        dupes = duplicate_chunks(app)
        assert dupes == []
        assert c["catalog"] > 240
        assert app.faiss.size >= 300
        app.faiss.start_build().join(60)  # converges: an approximate index of the same ids
        assert app.faiss.kind == "ivf"
        assert app.consistency()["ok"]
    assert "building the approximate index" in paths.log_file.read_text(
        encoding="utf-8", errors="replace")

