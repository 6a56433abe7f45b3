"""CLI commands that talk to the daemon over its socket (light: no heavy imports)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any

from ragd.daemon.errors import DaemonUnavailable
from ragd.daemon.ipc.client import Client
from ragd.daemon.runtime.launch import (
    STOP_TIMEOUT_S,
    connect,
    running_pid,
    spawn_daemon,
    stop_daemon,
)
from ragd.daemon.settings.paths import resolve_paths

# A request sent to a starting daemon waits for the model (the daemon gives up after 180 s).
STARTING_CALL_TIMEOUT_S = 240.0
PHASE_WORDS = {"loading model": "loading the model", "opening index": "opening the index"}


def cmd_daemon(args: argparse.Namespace) -> int:
    """Run the daemon in the foreground (what systemd, launchd, the tray and `start` run)."""
    from ragd.daemon.runtime.service import Daemon, setup_logging
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.web.server import WebServer

    paths = resolve_paths()
    overrides = {"obsidian.vaults": [args.vault]} if getattr(args, "vault", None) else None
    config = load_config(paths, overrides)
    setup_logging(paths, stderr=sys.stderr.isatty() or bool(args.verbose), verbose=args.verbose)

    def announce(info: dict[str, Any]) -> None:
        print(ready_line(info), flush=True)

    return Daemon(paths, config, on_ready=announce, window=WebServer).run()


def ready_line(info: dict[str, Any]) -> str:
    """The one line the foreground daemon prints when start-up is over."""
    stop = "stop it with Ctrl-C or `ragd stop`"
    if info.get("fatal"):
        return (f"ragd {info.get('version')} could not start ({info.get('phase')}): "
                f"{info['fatal']}; it answers `ragd status` until stopped ({stop}); "
                f"log: {info.get('log')}")
    line = (f"ragd {info.get('version')} ready in {info.get('seconds') or 0:.1f} s "
            f"(pid {info.get('pid')}), answering on {info.get('socket')}; {stop}")
    if info.get("sample_vault"):  # decision 0032
        line += (f"\nragd: serving the sample vault at {info['sample_vault']} (no vault found); "
                 "`make run VAULT=~/path/to/vault` or [obsidian] vaults in config.toml "
                 "indexes yours instead")
    return line


def starting_notice(status: dict[str, Any]) -> str | None:
    """The line a request prints while it waits for a starting daemon; None when the daemon
    is not starting (the request does not wait)."""
    if status.get("state") != "starting":
        return None
    phase = status.get("phase")
    words = PHASE_WORDS.get(str(phase), str(phase)) if phase else "starting"
    seconds = status.get("starting_s")
    so_far = f", {seconds:.0f} s so far" if isinstance(seconds, int | float) else ""
    return f"ragd: the daemon is starting ({words}{so_far})..."


def call_when_ready(client: Client, method: str, params: dict[str, Any] | None = None,
                    timeout: float | None = None) -> Any:
    """``client.call``, saying so on stderr (one line) when the daemon is still starting and
    the request will wait for it; a longer timeout then covers the model's loading."""
    notice = starting_notice(client.call("status", {"brief": True}))
    if notice is not None:
        print(notice, file=sys.stderr, flush=True)
        timeout = max(timeout or client.timeout, STARTING_CALL_TIMEOUT_S)
    return client.call(method, params, timeout=timeout)


def cmd_start(args: argparse.Namespace) -> int:
    paths = resolve_paths()
    pid = running_pid(paths)
    if pid is not None:
        print(f"ragd is already running (pid {pid})")
        return 0
    with connect(paths, start=True) as client:
        info = client.server_info
        notice = starting_notice(client.call("status", {"brief": True}))
    print(f"ragd {info.get('daemon_version', '')} started (pid {info.get('pid')}); "
          f"log: {paths.log_file}")
    if notice is not None:
        print(notice.replace("...", "; searches wait until it is ready"))
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """Stop the daemon; returns within 5 s whatever it is doing (decision 0024)."""
    pid, how = stop_daemon(resolve_paths())
    if how == "not running":
        print("ragd is not running")
    elif how == "killed":
        print(f"ragd (pid {pid}) did not stop within {STOP_TIMEOUT_S:g} s and was killed; "
              "its next start replays what it had not written", file=sys.stderr)
    else:
        print(f"ragd stopped (pid {pid})" if pid else "ragd stopped")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    try:
        client = connect()
    except DaemonUnavailable as exc:
        if args.json:
            print(json.dumps({"state": "stopped"}))
        else:
            print(f"ragd is not running ({exc.hint})")
        return 3
    with client:
        st = client.call("status")
    window = window_url()
    if args.json:
        print(json.dumps({**st, "window": window}, indent=2))
    else:
        print(format_status(st) + (f"\n  window: {window}" if window else ""))
    return 0


def window_url() -> str | None:
    """The URL that opens ragd's window, with this start's token, from the status file only
    the user can read (decision 0053); None when the daemon serves no window."""
    from ragd.daemon.ipc.discovery import read_status

    url = (read_status(resolve_paths()) or {}).get("window")
    return str(url) if url else None


def cmd_open(args: argparse.Namespace) -> int:
    """`ragd open`: ragd's window in the browser (the daemon is started when it is not
    running); the URL is printed too, for a machine without a browser at hand."""
    import webbrowser

    paths = resolve_paths()
    with connect(paths, start=True):
        pass
    url = window_url()
    if url is None:
        print("ragd serves no window: [daemon] window is off in config.toml, or it could not "
              f"start (see {paths.log_file})", file=sys.stderr)
        return 1
    opened = False if getattr(args, "print_only", False) else webbrowser.open(url)
    print(f"ragd's window: {url}" + ("" if opened else " (open it in your browser)"))
    return 0


def format_status(st: dict[str, Any]) -> str:
    idx = st.get("indexing") or {}
    lines = [f"ragd {st.get('version')} (pid {st.get('pid')}): {st.get('state')}"
             + _phase_words(st)
             + (f", {idx.get('remaining', 0):,} sources remaining" if idx.get("active") else "")]
    if st.get("paused_for"):
        lines.append("  " + held_line(st))
    waiting = int((st.get("embedding") or {}).get("chunks") or 0)
    if st.get("embedding_paused"):
        lines.append(f"  embedding paused ({waiting:,} chunks wait for vectors; found by their "
                     "words meanwhile): `ragd resume` embeds them")
    elif waiting:
        lines.append(f"  embedding: {waiting:,} chunks wait for vectors (found by their words "
                     "meanwhile)")
    concepts = st.get("concepts") or {}
    if concepts.get("busy") or concepts.get("waiting"):
        lines.append(f"  concepts: {'analysing' if concepts.get('busy') else 'waiting'}, "
                     f"{concepts.get('documents', 0):,} documents analysed, "
                     f"{concepts.get('waiting', 0):,} to come once their vectors are in")
    cur = st.get("current")
    if cur and cur.get("total"):
        lines.append(f"  now: {cur['collection']} {cur['done']:,}/{cur['total']:,} files, "
                     f"{cur['embedded']:,} chunks embedded")
    for c in st.get("collections", []):
        skips = f", {c['skipped_count']:,} skipped" if c.get("skipped_count") else ""
        lines.append(f"  {c['name']:<20} {c['type']:<8} {c['source_count']:>7,} sources "
                     f"{c['chunk_count']:>8,} chunks{skips}  last indexed "
                     f"{c.get('last_indexed') or 'never'}")
        if "metadata_only_count" in c and c.get("source_count"):
            lines.append(f"  {'':<29} {c.get('body_source_count', 0):>7,} with body chunks, "
                         f"{c['metadata_only_count']:,} with properties only")
        if c.get("stopped"):
            lines.append(f"  {'':<29} indexing stopped: {c['stopped']}")
    for q in st.get("queue", []):
        lines.append(f"  queued: {q['kind']} {q['collection'] or 'all'} ({q['priority']}, "
                     f"{q['size']:,})")
    for e in st.get("errors", []):
        lines.append(f"  error: {e.get('path', '')} {e['error']}")
    saves = [j for j in st.get("small_jobs", []) if j.get("visible_s") is not None]
    if saves:  # issue 21: how soon the last saves were searchable, and the slowest's wait
        slow = max(saves, key=lambda j: j["visible_s"])
        why = max(slow["wait"].items(), key=lambda kv: kv[1], default=("", 0.0))
        lines.append(f"  last {len(saves)} saves searchable in at most {slow['visible_s']:.2f} s"
                     + (f" (waited {why[1]:.2f} s for {why[0]})" if why[1] >= 0.05 else ""))
    lines.append(f"  log: {st.get('paths', {}).get('log')}")
    return "\n".join(lines)


def held_line(st: dict[str, Any]) -> str:
    """Why bulk indexing waits (decision 0044): `bulk indexing waits: on battery at 20 %
    (below 50 %); saves are still indexed; it resumes on mains power`."""
    power = st.get("power") or {}
    if st.get("paused_for") != "battery":
        return f"bulk indexing waits: {st.get('paused_for')}; saves are still indexed"
    pct = power.get("percent")
    at = f" at {pct:g} %" if isinstance(pct, int | float) else ""
    below = power.get("pause_below")
    limit = f" (below {below:g} %)" if isinstance(below, int | float) and below < 100 else ""
    idle = power.get("resume_when_idle_s")
    away = (f" or after {idle:g} s away from the keyboard"
            if isinstance(idle, int | float) and idle > 0 else "")
    return (f"bulk indexing waits: on battery{at}{limit}; saves are still indexed; it "
            f"resumes on mains power{away}")


def _phase_words(st: dict[str, Any]) -> str:
    """`starting (loading the model, 3 s so far)`, `indexing (catching up)`, `error (at
    loading model)`: the start-up phase after the state, when there is one."""
    phase = st.get("phase")
    if not phase:
        return ""
    words = PHASE_WORDS.get(str(phase), str(phase))
    if st.get("state") == "starting":
        seconds = st.get("starting_s")
        return f" ({words}" + (f", {seconds:.0f} s so far)" if isinstance(seconds, int | float)
                               else ")")
    if st.get("state") == "error":
        return f" (while {words})"
    return f" ({words})"


def cmd_pause(args: argparse.Namespace) -> int:
    embedding = bool(getattr(args, "embedding", False))
    with connect() as client:
        client.call("pause", {"embedding": True} if embedding else {})
    print("embedding paused: files are still read and found by their words; `ragd resume` "
          "embeds them" if embedding else
          "indexing paused (the queue is kept; `ragd resume` continues)")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    with connect() as client:
        client.call("resume")
    print("indexing resumed")
    return 0


def remote_search(params: dict[str, Any]) -> dict[str, Any]:
    with connect() as client:
        result: dict[str, Any] = call_when_ready(client, "search", params)
    return result


def remote_convert(file_path: str) -> dict[str, Any]:
    with connect(call_timeout=300.0) as client:
        result: dict[str, Any] = call_when_ready(client, "convert", {"file_path": file_path})
    return result


def remote_index(params: dict[str, Any], show_progress: bool) -> Any:
    """Ask the daemon to index, drawing its live progress events as a progress bar."""
    from ragd.daemon.cli.progress import IndexBar

    paths = resolve_paths()
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            with connect(paths, call_timeout=24 * 3600.0) as client:
                outcome["result"] = call_when_ready(client, "index", params)
        except BaseException as exc:  # re-raised on the main thread
            outcome["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    bar = IndexBar(enabled=show_progress)
    if show_progress:
        threading.Thread(target=_follow_progress, args=(paths, done, bar), daemon=True).start()
    done.wait()
    bar.close(complete="error" not in outcome)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _follow_progress(paths: Any, done: threading.Event, bar: Any) -> None:
    try:
        with connect(paths) as events:
            for event in events.subscribe():
                if done.is_set():
                    return
                bar.event(event)
    except DaemonUnavailable:
        pass


__all__ = ["call_when_ready", "cmd_daemon", "cmd_pause", "cmd_resume", "cmd_start",
           "cmd_status", "cmd_stop", "ready_line", "remote_index", "remote_search",
           "spawn_daemon", "starting_notice"]
