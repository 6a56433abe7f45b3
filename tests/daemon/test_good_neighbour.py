"""A good neighbour on a laptop (decision 0044), against a real daemon started as `ragd
daemon` is (no systemd unit to lower it): bulk work waits on battery while saves are indexed,
background threads and the conversion worker run at low priority while the threads that
answer requests do not, and scanned PDFs become searchable once OCR is turned on."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from daemon_proc import DaemonProc, catalog_progress, wait_for
from document_fixtures import pdf_bytes
from scan_fixtures import need_tesseract, scanned_pdf
from vault_fixtures import write_plain_notes, write_vault

from ragd.daemon.cli.remote import format_status
from ragd.daemon.priority import (
    IOPRIO_CLASS_IDLE,
    IOPRIO_CLASS_SHIFT,
    LOW_NICE,
    linux_ioprio_get,
    linux_thread_nice,
)
from ragd.daemon.runtime.app import App

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="reads /proc; the other systems' branches are "
                                 "tested as logic")]


def keyword_paths(d: DaemonProc, query: str) -> list[str]:
    answer = d.call("search", {"query": query, "mode": "keyword", "top_k": 5})
    return [r["source_path"] for r in answer["results"]]


def check_converged(vault: Path, project: Path) -> None:
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    paths = resolve_paths()
    with App(paths, load_config(paths, {"obsidian.vaults": [str(vault)]})) as app:
        c = app.consistency()
        assert c["ok"] and c["unembedded"] == 0, c
        records = app.catalog.source_records(app.collection("bulk").id)
        assert {r.path for r in records} == {p.name for p in project.glob("*.md")}
        assert all(r.status == "ok" for r in records)


def set_power(path: Path, on_battery: bool, percent: float) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"on_battery": on_battery, "percent": percent, "idle_s": None}),
                   encoding="utf-8")
    os.replace(tmp, path)


def bulk_sources(d: DaemonProc) -> int:
    colls = d.call("status")["collections"]
    return next((c["source_count"] for c in colls if c["name"] == "bulk"), 0)


def test_bulk_work_waits_on_battery_while_a_save_is_searchable(
        ragd_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    power = tmp_path / "power.json"
    set_power(power, on_battery=False, percent=100)
    monkeypatch.setenv("RAGD_POWER_FILE", str(power))
    monkeypatch.setenv("RAGD_POWER_CHECK_INTERVAL_S", "1")  # [power] pause_on_battery_below 50
    vault = write_vault(tmp_path / "vault")
    project = tmp_path / "project"
    write_plain_notes(project, files=200)  # ~400 chunks
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon.log").start()
    try:
        d.wait_idle()
        set_power(power, on_battery=True, percent=20)
        wait_for(lambda: d.call("status")["paused_for"] == "battery", 10, "the gate to close")

        # A bulk sync of a new collection: queued, and it does not progress.
        assert d.call("index", {"collection": "bulk", "path": str(project),
                                "wait": False})["queued"]
        before = catalog_progress(ragd_home)
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline:
            st = d.call("status")
            assert bulk_sources(d) == 0 and st["paused_for"] == "battery"
            time.sleep(0.5)
        assert catalog_progress(ragd_home) == before
        assert st["indexing"]["remaining"] >= 1 and st["state"] == "indexing"
        assert st["power"] == {"on_battery": True, "percent": 20.0, "idle_s": None,
                               "pause_below": 50.0, "resume_when_idle_s": 600.0,
                               "paused_for": "battery"}
        assert [q["collection"] for q in st["queue"]] == ["bulk"]
        line = format_status(st).splitlines()[1]
        assert line.startswith("  bulk indexing waits: on battery at 20 % (below 50 %); "
                               "saves are still indexed"), line

        # A note saved meanwhile is searchable within a few seconds.
        (vault / "Inbox").mkdir()
        t0 = time.monotonic()
        (vault / "Inbox" / "Idea.md").write_text(
            "# Idea\n\nA zqxbattery thought, saved while on battery.\n", encoding="utf-8")
        wait_for(lambda: keyword_paths(d, "zqxbattery"), 5.0, "the save to be searchable")
        saved_s = time.monotonic() - t0
        assert bulk_sources(d) == 0
        print(f"\nsave searchable in {saved_s:.2f} s while bulk work waited on battery")

        # Mains power: bulk work resumes ...
        set_power(power, on_battery=False, percent=21)
        wait_for(lambda: catalog_progress(ragd_home) > before + 100, 60, "bulk work to resume")
        # ... and waits again, mid-run, when the battery is back below the threshold.
        set_power(power, on_battery=True, percent=19)
        wait_for(lambda: d.call("status")["paused_for"] == "battery", 10, "the gate to close")
        time.sleep(2.0)  # the slice under way ends; then nothing moves
        held = catalog_progress(ragd_home)
        time.sleep(3.0)
        assert catalog_progress(ragd_home) == held
        left = d.call("status")
        assert left["embedding"]["chunks"] > 0 or bulk_sources(d) < 200, \
            "the bulk work finished before the battery came back: the test proved nothing"

        set_power(power, on_battery=False, percent=22)
        st = d.wait_idle(timeout=600)
        assert st["paused_for"] is None
        bulk = next(c for c in st["collections"] if c["name"] == "bulk")
        assert bulk["source_count"] == 200 and bulk["unembedded_chunks"] == 0
    finally:
        d.stop()
    check_converged(vault, project)


def threads(pid: int) -> dict[int, tuple[int, int]]:
    """(nice, I/O class) of each thread of a process."""
    out = {}
    for name in os.listdir(f"/proc/{pid}/task"):
        tid = int(name)
        try:
            out[tid] = (linux_thread_nice(tid, pid), linux_ioprio_get(tid) >> IOPRIO_CLASS_SHIFT)
        except OSError:  # ended meanwhile
            continue
    return out


def children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", encoding="ascii") as fh:
                    ppid = int(fh.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError):
                continue
            if ppid == pid:
                found.append(int(name))
    return found


def descendants(pid: int) -> list[int]:
    found = children(pid)
    for child in list(found):
        found += descendants(child)
    return found


def test_background_work_runs_low_and_requests_do_not(ragd_home: Path, tmp_path: Path
                                                      ) -> None:
    """Started as `ragd daemon`, not by the systemd unit: the workers that read and convert
    files (and every thread and program of theirs) are at low priority; so are the daemon's
    background threads (embedding, its model's thread pool, concepts); the main thread and
    the threads that answer requests are not."""
    vault = write_vault(tmp_path / "vault")
    (vault / "Attachments").mkdir()
    (vault / "Attachments" / "guide.pdf").write_bytes(pdf_bytes())
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon.log").start()
    try:
        d.wait_idle()
        assert keyword_paths(d, "zebrafish lighthouse")  # the PDF was converted
        pid = d.proc.pid  # type: ignore[union-attr]
        workers = descendants(pid)
        assert workers, "no worker left (idle for 60 s?)"
        for worker in workers:
            assert set(threads(worker).values()) == {(LOW_NICE, IOPRIO_CLASS_IDLE)}, worker
        d.call("search", {"query": "telescope", "mode": "hybrid"})  # a request thread works
        mine = threads(pid)
        low = [t for t, v in mine.items() if v == (LOW_NICE, IOPRIO_CLASS_IDLE)]
        assert mine[pid] == (0, 0)  # the main thread (IPC)
        assert len(low) >= 3, mine  # embedding, its model's pool thread, concepts
        assert sum(1 for v in mine.values() if v[0] == 0) >= 3, mine  # main, requests, writer
    finally:
        d.stop()
    print(f"\npriorities: {len(workers)} worker process(es) low; daemon threads: {len(low)} "
          f"low of {len(mine)}")


def test_a_scan_is_searchable_once_ocr_is_on(ragd_home: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    need_tesseract()
    vault = write_vault(tmp_path / "vault")
    (vault / "Attachments").mkdir()
    (vault / "Attachments" / "harbour scan.pdf").write_bytes(scanned_pdf())
    d = DaemonProc(ragd_home, vault, tmp_path / "off.log").start()
    try:
        st = d.wait_idle()
        obsidian = next(c for c in st["collections"] if c["name"] == "obsidian")
        assert obsidian["skips"] == {"no_text": 1}, obsidian
        assert keyword_paths(d, "zanzibar") == []
    finally:
        d.stop()

    monkeypatch.setenv("RAGD_DOCUMENTS_OCR_PDFS", "true")
    d = DaemonProc(ragd_home, vault, tmp_path / "on.log").start()
    try:
        found = wait_for(lambda: keyword_paths(d, "zanzibar harbour ledger"), 120,
                         "the scan to be read by OCR")
        assert found[0].endswith("harbour scan.pdf")
        answer = d.call("search", {"query": "lighthouse keepers copper kettle",
                                   "mode": "keyword", "top_k": 1})
        assert answer["results"][0]["metadata"].get("page_number") == 2
    finally:
        d.stop()
