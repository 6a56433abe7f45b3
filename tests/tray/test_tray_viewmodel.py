"""The pure view model: every state, the menu tree, progress events, the autostart checkbox."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from ragd.daemon.errors import DaemonUnavailable, ProtocolMismatch, RagdError
from ragd.tray.autostart import AutostartStatus
from ragd.tray.icons import ICON_STATES, TOOLTIP_MAX
from ragd.tray.viewmodel import (
    AUTOSTART,
    OPEN_CONFIG,
    OPEN_LOG,
    OPEN_WINDOW,
    PAUSE,
    QUIT,
    QUIT_AND_STOP,
    REINDEX,
    RESUME,
    SKIPPED_MENU_CAP,
    START_DAEMON,
    STATES,
    MenuEntry,
    TrayView,
    apply_event,
    build_view,
    find_entry,
)

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC).timestamp()
ON = AutostartStatus(True, "desktop", "/home/ann/.config/autostart/ragd.desktop")
OFF = AutostartStatus(False, "desktop", "/home/ann/.config/autostart/ragd.desktop")


def status(**changes: Any) -> dict[str, Any]:
    """A `status` answer as the daemon sends it (daemon/runtime/service.py: Daemon.status)."""
    base: dict[str, Any] = {
        "state": "idle", "version": "0.1.0", "protocol": 1, "pid": 4242,
        "started_at": NOW - 7200, "uptime_s": 7200.0, "paused": False,
        "indexing": {"active": False, "remaining": 0}, "queue": [], "errors": [],
        "paths": {"config": "/home/ann/.config/ragd/config.toml",
                  "log": "/home/ann/.local/state/ragd/ragd.log",
                  "data": "/home/ann/.local/share/ragd"},
        "watching": ["obsidian"], "fatal": None,
        "collections": [
            {"name": "obsidian", "type": "system", "source_count": 1234, "chunk_count": 5678,
             "last_indexed": "2026-03-01T11:57:00+00:00", "skipped_count": 3,
             "skips": {"empty": 2, "binary": 1}},
            {"name": "recipes", "type": "project", "source_count": 12, "chunk_count": 40,
             "last_indexed": None, "skipped_count": 0, "skips": {}},
        ],
    }
    base.update(changes)
    return base


def indexing(remaining: int = 1234, done: int = 120, total: int = 1234) -> dict[str, Any]:
    return status(state="indexing", indexing={"active": True, "remaining": remaining},
                  current={"collection": "obsidian", "phase": "index", "done": done,
                           "total": total, "embedded": 300})


SKIPPED: dict[str, list[dict[str, Any]]] = {"obsidian": [
    {"collection": "obsidian", "path": "Inbox/Empty.md", "status": "skipped",
     "skip_code": "empty", "skip_detail": "", "warnings": ""},
    {"collection": "obsidian", "path": "Inbox/Other empty.md", "status": "skipped",
     "skip_code": "empty", "skip_detail": "", "warnings": ""},
    {"collection": "obsidian", "path": "Files/blob.md", "status": "skipped",
     "skip_code": "binary", "skip_detail": "contains NUL bytes", "warnings": ""},
    {"collection": "obsidian", "path": "Notes/Latin.md", "status": "ok", "skip_code": None,
     "skip_detail": None, "warnings": "invalid_utf8"},
]}


def entry(view: TrayView, text: str) -> MenuEntry:
    found = find_entry(view.menu, text)
    assert found is not None, f"no {text!r} in {[e.text for e in view.menu]}"
    return found


def texts(entries: tuple[MenuEntry, ...]) -> list[str]:
    return [e.text for e in entries if not e.separator]


# -- every state -----------------------------------------------------------------------------
def test_idle() -> None:
    view = build_view(status(), OFF, skipped=SKIPPED, now=NOW)
    assert (view.state, view.icon) == ("idle", "idle")
    assert view.title == "ragd: Idle: 1,246 sources indexed"
    assert view.status_line == "Up to date: 1,246 sources indexed"
    assert view.progress is None
    assert entry(view, "Reindex now").enabled and entry(view, "Pause indexing").enabled
    assert find_entry(view.menu, "Resume indexing") is None
    assert find_entry(view.menu, "Start the daemon") is None
    assert entry(view, "Quit and stop the daemon").enabled


def test_indexing_shows_progress_and_remaining() -> None:
    view = build_view(indexing(), OFF, now=NOW)
    assert (view.state, view.icon) == ("indexing", "indexing")
    assert view.title == "ragd: Indexing: 1,234 remaining"
    assert view.status_line == "Indexing obsidian: 120 of 1,234 (indexing)"
    assert view.progress == pytest.approx(120 / 1234)
    assert entry(view, "Pause indexing").enabled


def test_paused_offers_resume() -> None:
    view = build_view(status(state="paused", paused=True,
                             indexing={"active": True, "remaining": 40}), OFF, now=NOW)
    assert (view.state, view.icon) == ("paused", "paused")
    assert view.title == "ragd: Paused: 40 remaining"
    assert entry(view, "Resume indexing").action == RESUME
    assert find_entry(view.menu, "Pause indexing") is None
    assert entry(view, "Reindex now").enabled  # queued, runs after resume


def test_fatal_error_state() -> None:
    view = build_view(status(state="error", fatal="disk full", collections=[]), OFF, now=NOW)
    assert (view.state, view.icon) == ("error", "error")
    assert view.title == "ragd: Error: disk full"
    assert not entry(view, "Reindex now").enabled
    assert not entry(view, "Pause indexing").enabled
    assert entry(view, "Open log").enabled


def test_unreachable_offers_to_start_the_daemon() -> None:
    err = DaemonUnavailable("no ragd daemon is running (nothing at /run/ragd.sock)",
                            "start it with `ragd start`")
    view = build_view(err, OFF, local_paths={"config": "/c/config.toml", "log": "/s/ragd.log"},
                      now=NOW)
    assert (view.state, view.icon) == ("unreachable", "unreachable")
    assert view.title == "ragd: Daemon not running: start it from this menu"
    assert entry(view, "Start the daemon").action == START_DAEMON
    assert not entry(view, "Reindex now").enabled
    assert not entry(view, "Quit and stop the daemon").enabled
    # The local paths still open the configuration and the log.
    assert entry(view, "Open configuration").enabled and entry(view, "Open log").enabled
    about = texts(entry(view, "About ragd").children)
    assert "Configuration: /c/config.toml" in about


def test_protocol_mismatch_tells_to_restart_the_daemon() -> None:
    err = ProtocolMismatch("protocol mismatch: client speaks 1, daemon speaks 2",
                           "restart the daemon: `ragd stop && ragd start`")
    view = build_view(err, OFF, now=NOW)
    assert view.state == "mismatch"
    assert view.icon == "error"
    assert "restart the daemon" in view.title
    assert "ragd stop && ragd start" in " ".join(texts(view.menu))
    assert not entry(view, "Reindex now").enabled


def test_starting_daemon_and_loading_model() -> None:
    view = build_view(None, OFF, now=NOW)
    assert (view.state, view.icon) == ("starting", "starting")
    assert view.title == "ragd: Starting: starting the daemon"
    loading = build_view(status(state="starting", collections=[]), OFF, now=NOW)
    assert loading.state == "starting"
    assert loading.title == "ragd: Starting: loading the embedding model"
    assert not entry(loading, "Reindex now").enabled
    opening = build_view(status(state="starting", phase="opening index", starting_s=4.7,
                                collections=[]), OFF, now=NOW)
    assert opening.title == "ragd: Starting: opening the index"
    assert opening.status_line == "Starting: opening the index (4 s so far)"


def test_another_error_while_asking() -> None:
    view = build_view(RagdError("status failed", "see the log"), OFF, now=NOW)
    assert view.state == "error" and view.title == "ragd: Error: status failed"
    assert "see the log" in texts(view.menu)


def test_every_state_has_an_icon() -> None:
    sources: list[Any] = [status(), indexing(), status(state="paused", paused=True),
                          status(state="error", fatal="x"), DaemonUnavailable("x"),
                          ProtocolMismatch("x"), None]
    views = [build_view(s, OFF, now=NOW) for s in sources]
    assert [v.state for v in views] == list(STATES)
    assert all(v.icon in ICON_STATES for v in views)


# -- the menu ---------------------------------------------------------------------------------
def test_menu_order_and_actions() -> None:
    view = build_view(status(), ON, skipped=SKIPPED, now=NOW)
    assert texts(view.menu) == [
        "Up to date: 1,246 sources indexed", "Open ragd",
        "obsidian: 1,234 sources, 5,678 chunks, 3 skipped",
        "recipes: 12 sources, 40 chunks",
        "Reindex now", "Pause indexing", "Open configuration", "Open log", "Start at login",
        "About ragd", "Quit", "Quit and stop the daemon"]
    actions = {e.text: e.action for e in view.menu}
    assert actions["Reindex now"] == REINDEX and actions["Pause indexing"] == PAUSE
    assert actions["Open configuration"] == OPEN_CONFIG and actions["Open log"] == OPEN_LOG
    assert actions["Start at login"] == AUTOSTART and actions["Open ragd"] == OPEN_WINDOW
    assert actions["Quit"] == QUIT and actions["Quit and stop the daemon"] == QUIT_AND_STOP
    assert not view.menu[0].enabled  # the status line is information


def test_collection_submenu_lists_skipped_files_and_why() -> None:
    view = build_view(status(), OFF, skipped=SKIPPED, now=NOW)
    obsidian = entry(view, "obsidian:")
    lines = texts(obsidian.children)
    assert lines[0] == "Last indexed: 3 min ago"
    assert lines[1] == "Skipped: 3 files (empty 2, binary 1)"
    files = entry(view, "Skipped files (3), with warnings (1)")
    listed = texts(files.children)
    assert listed[0].startswith("Inbox/Empty.md: empty: file is empty")
    assert listed[2] == "Files/blob.md: binary: contains NUL bytes"
    assert listed[3].startswith("Notes/Latin.md: invalid_utf8: indexed with a warning")
    reindex = obsidian.children[-1]
    assert (reindex.text, reindex.action, reindex.arg) == ("Reindex obsidian now", REINDEX,
                                                          "obsidian")
    recipes = entry(view, "recipes:")
    assert texts(recipes.children)[:2] == ["Last indexed: never", "Skipped: none"]


def test_skipped_list_is_capped() -> None:
    rows = [{"collection": "obsidian", "path": f"big/{n:04}.pdf", "status": "skipped",
             "skip_code": "too_large", "skip_detail": "", "warnings": ""} for n in range(500)]
    view = build_view(status(), OFF, skipped={"obsidian": rows}, now=NOW)
    files = entry(view, "Skipped files (500)")
    assert len(files.children) == SKIPPED_MENU_CAP + 1
    assert files.children[-1].text == f"… and {500 - SKIPPED_MENU_CAP} more"


def test_recent_errors_submenu_and_tooltip() -> None:
    errors = [{"time": NOW, "path": "Broken.md", "error": "decode failed"},
              {"time": NOW, "error": "RuntimeError('boom')"}]
    view = build_view(status(errors=errors), OFF, now=NOW)
    assert view.title == "ragd: Idle: 1,246 sources indexed, 2 errors"
    recent = entry(view, "Recent errors (2)")
    assert texts(recent.children) == ["RuntimeError('boom')", "Broken.md: decode failed"]


def test_no_collection_points_at_the_configuration() -> None:
    view = build_view(status(collections=[]), OFF, now=NOW)
    assert view.title == "ragd: Idle: no collection configured"
    assert "open the configuration" in view.status_line


def test_about_has_versions_and_paths() -> None:
    view = build_view(status(), ON, now=NOW, tray_version="9.9")
    about = texts(entry(view, "About ragd").children)
    assert about[:3] == ["ragd tray 9.9", "Daemon 0.1.0, protocol 1, pid 4242",
                         "Running for 2 h 0 min"]
    assert "Log: /home/ann/.local/state/ragd/ragd.log" in about
    assert "Start at login: on (desktop)" in about


def test_autostart_checkbox_shows_the_real_state() -> None:
    assert entry(build_view(status(), ON, now=NOW), "Start at login").checked is True
    assert entry(build_view(status(), OFF, now=NOW), "Start at login").checked is False
    unsupported = entry(build_view(status(), None, now=NOW), "Start at login")
    assert unsupported.checked is False and not unsupported.enabled


def test_long_texts_are_cut() -> None:
    view = build_view(status(state="error", fatal="x" * 500), OFF, now=NOW)
    assert len(view.title) <= TOOLTIP_MAX and view.title.endswith("…")
    assert all(len(e.text) <= 72 for e in view.menu)


def test_views_are_frozen_and_comparable() -> None:
    a = build_view(status(), OFF, skipped=SKIPPED, now=NOW)
    b = build_view(status(), OFF, skipped=SKIPPED, now=NOW)
    assert a == b and hash(a) == hash(b)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.state = "error"  # type: ignore[misc]


# -- progress events --------------------------------------------------------------------------
def test_progress_events_update_the_status() -> None:
    event = {"type": "progress", "state": "indexing", "active": True, "remaining": 7,
             "collection": "obsidian", "phase": "index", "done": 3, "total": 10, "embedded": 9}
    st = apply_event(status(), event)
    view = build_view(st, OFF, now=NOW)
    assert view.state == "indexing" and view.title == "ragd: Indexing: 7 remaining"
    assert view.progress == pytest.approx(0.3)
    done = apply_event(st, {"type": "progress", "state": "idle", "active": False,
                            "remaining": 0, "collection": None, "phase": None, "done": 0,
                            "total": 0, "embedded": 0})
    assert build_view(done, OFF, now=NOW).state == "idle"
    assert "current" not in done


def test_pause_event_and_idle_while_paused() -> None:
    paused = apply_event(status(), {"type": "progress", "state": "paused", "active": True,
                                    "remaining": 3})
    assert paused["paused"] and build_view(paused, OFF, now=NOW).state == "paused"
    # The daemon says "idle" when its queue empties, even while paused: paused wins.
    still = apply_event(paused, {"type": "progress", "state": "idle", "active": False,
                                 "remaining": 0})
    assert build_view(still, OFF, now=NOW).state == "paused"


def test_job_started_event_shows_indexing_at_once() -> None:
    st = apply_event(status(), {"type": "job", "state": "started", "collection": "obsidian"})
    assert build_view(st, OFF, now=NOW).state == "indexing"
    assert apply_event(status(), {"type": "other"}) == status()
