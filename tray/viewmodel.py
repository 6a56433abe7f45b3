"""What the tray shows, as a pure function of what the daemon said.

:func:`build_view` turns a ``status`` answer (or the error met while asking for it, such as
:class:`DaemonUnavailable` or :class:`ProtocolMismatch`), the skipped files and the
start-at-login state into a frozen :class:`TrayView`: the icon's state, its tooltip and a tree of
:class:`MenuEntry`. The app only renders that tree with pystray and maps action ids to IPC calls,
so every state is tested here without a display, a daemon or pystray.

:func:`apply_event` folds a progress event into the last status, so the icon follows indexing
between two ``status`` polls.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragd.daemon import __version__
from ragd.daemon.errors import DaemonUnavailable, ProtocolMismatch, RagdError
from ragd.daemon.skips import describe
from ragd.tray.autostart import AutostartStatus
from ragd.tray.icons import tooltip

STATES = ("idle", "indexing", "paused", "error", "unreachable", "mismatch", "starting")
SKIPPED_MENU_CAP = 25  # files listed per collection; the rest are counted
ERRORS_MENU_CAP = 10
TEXT_CAP = 72  # characters of one menu line

# Action ids the app maps to IPC calls and local operations.
REINDEX, PAUSE, RESUME = "reindex", "pause", "resume"
OPEN_CONFIG, OPEN_LOG, AUTOSTART = "open_config", "open_log", "autostart"
OPEN_WINDOW = "open_window"  # ragd's own window in the browser (decision 0053)
START_DAEMON, QUIT, QUIT_AND_STOP = "start_daemon", "quit", "quit_and_stop"
ACTIONS = (REINDEX, PAUSE, RESUME, OPEN_CONFIG, OPEN_LOG, AUTOSTART, START_DAEMON, QUIT,
           QUIT_AND_STOP)

PHASES = {"scan": "scanning", "index": "indexing", "embed": "embedding", "done": "finishing"}
STARTUP_PHASES = {"loading model": "loading the embedding model",
                  "opening index": "opening the index"}


@dataclass(frozen=True)
class MenuEntry:
    """One menu line: an action, a checkbox, a submenu (``children``) or a separator."""

    text: str
    action: str | None = None
    arg: str | None = None  # e.g. the collection of "reindex"
    enabled: bool = True
    checked: bool | None = None  # None: not a checkbox
    children: tuple[MenuEntry, ...] = ()
    separator: bool = False

    def find(self, text: str) -> MenuEntry | None:
        return find_entry(self.children, text)


SEPARATOR = MenuEntry("-", separator=True)


def find_entry(entries: Sequence[MenuEntry], text: str) -> MenuEntry | None:
    """The first entry (depth first) whose text is ``text`` or starts with it."""
    for entry in entries:
        if entry.text == text or (not entry.separator and entry.text.startswith(text)):
            return entry
        found = find_entry(entry.children, text)
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class TrayView:
    """Everything the tray renders; equal views need no redraw."""

    state: str  # one of STATES
    icon: str  # one of ragd.tray.icons.ICON_STATES
    title: str  # the tooltip
    status_line: str
    progress: float | None = None  # 0-1 while indexing with a known total
    menu: tuple[MenuEntry, ...] = field(default_factory=tuple)


def _info(text: str) -> MenuEntry:
    return MenuEntry(_cap(text), enabled=False)


def _cap(text: str, limit: int = TEXT_CAP) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _middle(path: str, limit: int = 48) -> str:
    """Shorten a path in its middle: both the folder and the file name matter."""
    if len(path) <= limit:
        return path
    keep = (limit - 1) // 2
    return path[:keep] + "…" + path[-(limit - 1 - keep):]


def _n(count: Any) -> str:
    return f"{int(count or 0):,}"


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def ago(iso: str | None, now: float) -> str:
    """``3 min ago``, ``2 h ago``, ``5 days ago`` or ``never``."""
    if not iso:
        return "never"
    try:
        then = dt.datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return iso
    seconds = max(0.0, now - then)
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    return _plural(int(seconds // 86400), "day") + " ago"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600} h"


# -- progress events --------------------------------------------------------------------------
def apply_event(status: Mapping[str, Any], event: Mapping[str, Any]) -> dict[str, Any]:
    """``status`` updated with one progress (or job) event from ``subscribe``."""
    out = dict(status)
    kind = event.get("type")
    if kind == "job" and event.get("state") == "started":
        out["indexing"] = {**dict(out.get("indexing") or {}), "active": True}
        if out.get("state") in ("idle", "indexing"):
            out["state"] = "indexing"
        return out
    if kind != "progress":
        return out
    state = event.get("state")
    remaining = int(event.get("remaining") or 0)
    out["indexing"] = {"active": bool(event.get("active")), "remaining": remaining}
    if state == "paused":
        out["paused"] = True
    elif state == "indexing":
        out["paused"] = False
    if state in ("idle", "indexing", "paused", "starting", "error"):
        # "idle" is sent when the queue empties even while paused: paused wins.
        out["state"] = "paused" if out.get("paused") and state == "idle" else state
    if event.get("collection"):
        out["current"] = {k: event.get(k) for k in ("collection", "phase", "done", "total",
                                                     "embedded")}
    else:
        out.pop("current", None)
    return out


# -- the view ---------------------------------------------------------------------------------
def build_view(source: Mapping[str, Any] | BaseException | None,
               autostart: AutostartStatus | None = None, *,
               skipped: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
               local_paths: Mapping[str, str] | None = None, now: float | None = None,
               tray_version: str = __version__) -> TrayView:
    """The view of one moment.

    ``source`` is the daemon's ``status`` answer, or the error that stood in its way, or None
    while the tray is still starting the daemon. ``skipped`` maps a collection to its rows from
    the ``skipped`` method. ``local_paths`` (config, log, data) serve when the daemon cannot
    say where its files are.
    """
    now = dt.datetime.now().timestamp() if now is None else now
    status = source if isinstance(source, Mapping) else None
    state, label, detail, line = _headline(source, status)
    paths = dict(local_paths or {})
    if status is not None:
        paths.update({k: v for k, v in (status.get("paths") or {}).items() if v})
    progress = None
    current = status.get("current") if status else None
    if state == "indexing" and isinstance(current, Mapping) and current.get("total"):
        progress = min(1.0, max(0.0, int(current.get("done") or 0) / int(current["total"])))
    menu = _menu(state, line, status, source, autostart, skipped or {}, paths, now,
                 tray_version)
    icon = "error" if state == "mismatch" else state
    return TrayView(state=state, icon=icon, title=tooltip(label, detail), status_line=line,
                    progress=progress, menu=menu)


def _headline(source: Any, status: Mapping[str, Any] | None) -> tuple[str, str, str, str]:
    """(state, tooltip label, tooltip detail, menu status line)."""
    if source is None:
        return ("starting", "Starting", "starting the daemon",
                "Starting the daemon…")
    if isinstance(source, ProtocolMismatch):
        return ("mismatch", "Protocol mismatch", "restart the daemon (ragd stop && ragd start)",
                "The daemon speaks another protocol version: restart it")
    if isinstance(source, DaemonUnavailable):
        return ("unreachable", "Daemon not running", "start it from this menu",
                "Daemon not running")
    if isinstance(source, BaseException):
        text = source.message if isinstance(source, RagdError) else str(source)
        return ("error", "Error", text, f"Error: {text}")
    assert status is not None
    colls = status.get("collections") or []
    sources = sum(int(c.get("source_count") or 0) for c in colls)
    remaining = int((status.get("indexing") or {}).get("remaining") or 0)
    errors = len(status.get("errors") or [])
    state = status.get("state")
    if state == "error" or status.get("fatal"):
        text = str(status.get("fatal") or "the daemon reported an error")
        return ("error", "Error", text, f"Error: {text}")
    if state == "starting":
        # The daemon names its start-up step (`phase`); older daemons do not.
        detail = STARTUP_PHASES.get(str(status.get("phase")), "loading the embedding model")
        seconds = status.get("starting_s")
        line = f"Starting: {detail}" + (f" ({int(seconds)} s so far)"
                                        if isinstance(seconds, int | float) else "")
        return "starting", "Starting", detail, line
    if state == "paused" or status.get("paused"):
        detail = f"{_n(remaining)} remaining" if remaining else "nothing waiting"
        return "paused", "Paused", detail, f"Indexing paused ({detail})"
    if state == "indexing":
        current = status.get("current")
        line = f"Indexing: {_n(remaining)} remaining"
        if isinstance(current, Mapping) and current.get("collection"):
            phase = PHASES.get(str(current.get("phase")), str(current.get("phase") or ""))
            line = (f"Indexing {current['collection']}: {_n(current.get('done'))} of "
                    f"{_n(current.get('total'))}" + (f" ({phase})" if phase else ""))
        return "indexing", "Indexing", f"{_n(remaining)} remaining", line
    if not colls:
        return ("idle", "Idle", "no collection configured",
                "Idle: nothing to index yet (open the configuration)")
    detail = _plural(sources, "source") + " indexed"
    if errors:
        detail += f", {_plural(errors, 'error')}"
    return "idle", "Idle", detail, f"Up to date: {detail}"


def _menu(state: str, line: str, status: Mapping[str, Any] | None, source: Any,
          autostart: AutostartStatus | None, skipped: Mapping[str, Sequence[Mapping[str, Any]]],
          paths: Mapping[str, str], now: float, tray_version: str) -> tuple[MenuEntry, ...]:
    connected = status is not None
    ready = connected and state in ("idle", "indexing", "paused")
    entries: list[MenuEntry] = [_info(line), MenuEntry("Open ragd", OPEN_WINDOW,
                                                       enabled=connected)]
    if isinstance(source, RagdError) and source.hint:
        entries.append(_info(source.hint))
    if state == "unreachable":
        entries.append(MenuEntry("Start the daemon", START_DAEMON))
    entries.append(SEPARATOR)
    colls = (status.get("collections") or []) if status else []
    for coll in colls:
        entries.append(_collection(coll, skipped.get(str(coll.get("name"))), ready, now))
    errors = (status.get("errors") or []) if status else []
    if errors:
        entries.append(_errors(errors))
    if colls or errors:
        entries.append(SEPARATOR)
    entries.append(MenuEntry("Reindex now", REINDEX, enabled=ready))
    paused = state == "paused"
    entries.append(MenuEntry("Resume indexing", RESUME, enabled=ready) if paused
                   else MenuEntry("Pause indexing", PAUSE, enabled=ready))
    entries.append(SEPARATOR)
    entries.append(MenuEntry("Open configuration", OPEN_CONFIG, enabled=bool(paths.get("config"))))
    entries.append(MenuEntry("Open log", OPEN_LOG, enabled=bool(paths.get("log"))))
    entries.append(MenuEntry("Start at login", AUTOSTART,
                             enabled=autostart is not None and autostart.supported,
                             checked=bool(autostart and autostart.enabled)))
    entries.append(_about(status, paths, autostart, tray_version, now))
    entries.append(SEPARATOR)
    entries.append(MenuEntry("Quit", QUIT))
    entries.append(MenuEntry("Quit and stop the daemon", QUIT_AND_STOP, enabled=connected))
    return tuple(entries)


def _collection(coll: Mapping[str, Any], rows: Sequence[Mapping[str, Any]] | None, ready: bool,
                now: float) -> MenuEntry:
    name = str(coll.get("name"))
    skipped_count = int(coll.get("skipped_count") or 0)
    head = f"{name}: {_n(coll.get('source_count'))} sources, {_n(coll.get('chunk_count'))} chunks"
    if skipped_count:
        head += f", {_n(skipped_count)} skipped"
    children: list[MenuEntry] = [_info(f"Last indexed: {ago(coll.get('last_indexed'), now)}")]
    skips = coll.get("skips") or {}
    if skipped_count:
        by_code = ", ".join(f"{code} {count:,}" for code, count in
                            sorted(skips.items(), key=lambda kv: (-kv[1], kv[0])))
        children.append(_info(f"Skipped: {_plural(skipped_count, 'file')} ({by_code})"
                              if by_code else f"Skipped: {_plural(skipped_count, 'file')}"))
    else:
        children.append(_info("Skipped: none"))
    report = coll.get("last_report") or {}
    if report.get("errors"):
        children.append(_info(f"Errors in the last run: {_n(report['errors'])} (see the log)"))
    if rows:
        children.append(_skipped_files(rows))
    children += [SEPARATOR, MenuEntry(f"Reindex {name} now", REINDEX, arg=name, enabled=ready)]
    return MenuEntry(_cap(head), children=tuple(children))


def _skipped_files(rows: Sequence[Mapping[str, Any]]) -> MenuEntry:
    skipped = [r for r in rows if r.get("status") == "skipped"]
    warned = [r for r in rows if r.get("status") != "skipped"]
    items: list[MenuEntry] = []
    for row in [*skipped, *warned][:SKIPPED_MENU_CAP]:
        if row.get("status") == "skipped":
            code = str(row.get("skip_code") or "")
            why = str(row.get("skip_detail") or describe(code))
        else:
            codes = [c for c in str(row.get("warnings") or "").split(",") if c]
            code = ",".join(codes)
            why = "indexed with a warning: " + "; ".join(describe(c) for c in codes)
        items.append(_info(f"{_middle(str(row.get('path')))}: {code}: {why}"))
    extra = len(rows) - SKIPPED_MENU_CAP
    if extra > 0:
        items.append(_info(f"… and {extra:,} more"))
    text = f"Skipped files ({len(skipped):,})"
    if warned:
        text += f", with warnings ({len(warned):,})"
    return MenuEntry(text, children=tuple(items))


def _errors(errors: Sequence[Mapping[str, Any]]) -> MenuEntry:
    items = []
    for err in list(errors)[-ERRORS_MENU_CAP:][::-1]:  # newest first
        where = f"{_middle(str(err['path']), 36)}: " if err.get("path") else ""
        items.append(_info(f"{where}{err.get('error')}"))
    return MenuEntry(f"Recent errors ({len(errors):,})", children=tuple(items))


def _about(status: Mapping[str, Any] | None, paths: Mapping[str, str],
           autostart: AutostartStatus | None, tray_version: str, now: float) -> MenuEntry:
    items = [_info(f"ragd tray {tray_version}")]
    if status is not None:
        items.append(_info(f"Daemon {status.get('version', '?')}, protocol "
                           f"{status.get('protocol', '?')}, pid {status.get('pid', '?')}"))
        if status.get("uptime_s") is not None:
            items.append(_info(f"Running for {_duration(float(status['uptime_s']))}"))
    for key, label in (("config", "Configuration"), ("log", "Log"), ("data", "Data")):
        if paths.get(key):
            items.append(_info(f"{label}: {_middle(paths[key], 60)}"))
    if autostart is not None:
        items.append(_info(f"Start at login: {'on' if autostart.enabled else 'off'} "
                           f"({autostart.method})"))
    return MenuEntry("About ragd", children=tuple(items))
