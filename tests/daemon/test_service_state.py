"""The daemon's start-up state as `status` reports it (no process, no model: the bookkeeping)."""

from __future__ import annotations

import asyncio
from typing import Any

from ragd.daemon.runtime.handlers import status
from ragd.daemon.runtime.scheduler import SWEEP, Job
from ragd.daemon.runtime.service import CATCHING_UP, LOADING_MODEL, OPENING_INDEX, Daemon
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths


def _daemon() -> Daemon:
    paths = resolve_paths()
    return Daemon(paths, load_config(paths))


def test_starting_reports_the_phase_and_the_seconds_so_far() -> None:
    d = _daemon()
    st = d.brief_status()
    assert st["state"] == "starting" and st["phase"] == LOADING_MODEL
    assert st["starting_s"] >= 0 and st["ready_s"] is None
    d._set_phase(OPENING_INDEX)
    assert d.startup()["phase"] == OPENING_INDEX
    full = d.status()
    assert full["state"] == "starting" and full["phase"] == OPENING_INDEX
    assert full["collections"] == []


def test_catching_up_until_the_first_sweep_is_done_then_nothing() -> None:
    d = _daemon()
    job = Job("sync", "obsidian", SWEEP)
    d._catch_up = [job]
    d.ready_s = 1.5
    d.ready.set()
    assert d.startup() == {"phase": CATCHING_UP, "starting_s": None, "ready_s": 1.5}
    job.finish([])
    assert d.startup() == {"phase": None, "starting_s": None, "ready_s": 1.5}


def test_a_failed_start_keeps_the_phase_it_failed_in() -> None:
    d = _daemon()
    d._set_phase(OPENING_INDEX)
    d.fatal = "database disk image is malformed"
    d.ready.set()
    st = d.brief_status()
    assert st["state"] == "error" and st["phase"] == OPENING_INDEX
    info = d.ready_info()
    assert info["fatal"] == d.fatal and info["phase"] == OPENING_INDEX


def test_the_status_method_answers_brief_without_the_catalog() -> None:
    d = _daemon()
    conn: Any = None
    brief = asyncio.run(status(d, {"brief": True}, conn))
    assert set(brief) == {"state", "version", "pid", "paused", "indexing", "phase",
                          "starting_s", "ready_s"}
    full = asyncio.run(status(d, {}, conn))
    assert {"collections", "queue", "phase", "starting_s", "ready_s"} <= set(full)
