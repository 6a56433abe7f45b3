"""CLI commands that talk to the daemon over its socket (light: no heavy imports)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

from daemon.errors import DaemonUnavailable
from daemon.launch import connect, running_pid, spawn_daemon
from daemon.paths import resolve_paths

STOP_TIMEOUT_S = 60.0


def cmd_daemon(args: argparse.Namespace) -> int:
    """Run the daemon in the foreground (what systemd, launchd, the tray and `start` run)."""
    from daemon.config import load_config
    from daemon.service import Daemon, setup_logging

    paths = resolve_paths()
    overrides = {"obsidian.vaults": [args.vault]} if getattr(args, "vault", None) else None
    config = load_config(paths, overrides)
    setup_logging(paths, stderr=sys.stderr.isatty() or bool(args.verbose), verbose=args.verbose)
    return Daemon(paths, config).run()


def cmd_start(args: argparse.Namespace) -> int:
    paths = resolve_paths()
    pid = running_pid(paths)
    if pid is not None:
        print(f"ragd is already running (pid {pid})")
        return 0
    with connect(paths, start=True) as client:
        info = client.server_info
    print(f"ragd {info.get('daemon_version', '')} started (pid {info.get('pid')}); "
          f"log: {paths.log_file}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    paths = resolve_paths()
    try:
        client = connect(paths)
    except DaemonUnavailable:
        print("ragd is not running")
        return 0
    with client:
        pid = client.server_info.get("pid")
        client.call("shutdown")
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and running_pid(paths) is not None:
        time.sleep(0.1)
    if running_pid(paths) is not None:
        raise DaemonUnavailable(f"ragd (pid {pid}) did not stop within {STOP_TIMEOUT_S:.0f} s",
                                "it may be finishing a large write; try again, or kill it")
    print(f"ragd stopped (pid {pid})")
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
    print(json.dumps(st, indent=2) if args.json else format_status(st))
    return 0


def format_status(st: dict[str, Any]) -> str:
    idx = st.get("indexing") or {}
    lines = [f"ragd {st.get('version')} (pid {st.get('pid')}): {st.get('state')}"
             + (f", {idx.get('remaining', 0):,} sources remaining" if idx.get("active") else "")]
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
    for q in st.get("queue", []):
        lines.append(f"  queued: {q['kind']} {q['collection'] or 'all'} ({q['priority']}, "
                     f"{q['size']:,})")
    for e in st.get("errors", []):
        lines.append(f"  error: {e.get('path', '')} {e['error']}")
    lines.append(f"  log: {st.get('paths', {}).get('log')}")
    return "\n".join(lines)


def cmd_pause(args: argparse.Namespace) -> int:
    with connect() as client:
        client.call("pause")
    print("indexing paused (the queue is kept; `ragd resume` continues)")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    with connect() as client:
        client.call("resume")
    print("indexing resumed")
    return 0


def remote_search(params: dict[str, Any]) -> dict[str, Any]:
    with connect() as client:
        result: dict[str, Any] = client.call("search", params)
    return result


def remote_convert(file_path: str) -> dict[str, Any]:
    with connect(call_timeout=300.0) as client:
        result: dict[str, Any] = client.call("convert", {"file_path": file_path})
    return result


def remote_index(params: dict[str, Any], show_progress: bool) -> Any:
    """Ask the daemon to index, drawing its live progress events as a progress bar."""
    paths = resolve_paths()
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            with connect(paths, call_timeout=24 * 3600.0) as client:
                outcome["result"] = client.call("index", params)
        except BaseException as exc:  # re-raised on the main thread
            outcome["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    bars: list[Any] = []
    if show_progress:
        threading.Thread(target=_follow_progress, args=(paths, done, bars), daemon=True).start()
    done.wait()
    for bar in bars:
        bar.close()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _follow_progress(paths: Any, done: threading.Event, bars: list[Any]) -> None:
    from tqdm import tqdm

    try:
        with connect(paths) as events:
            for event in events.subscribe():
                if done.is_set():
                    return
                if event.get("phase") != "index" or not event.get("total"):
                    continue
                if not bars:
                    bars.append(tqdm(total=event["total"], unit="file", file=sys.stderr,
                                     desc=f"indexing {event['collection']}",
                                     dynamic_ncols=True))
                bar = bars[0]
                bar.total = event["total"]
                bar.n = event["done"]
                bar.set_postfix(remaining=event.get("remaining", 0), refresh=False)
                bar.refresh()
    except DaemonUnavailable:
        pass


__all__ = ["cmd_daemon", "cmd_pause", "cmd_resume", "cmd_start", "cmd_status", "cmd_stop",
           "remote_index", "remote_search", "spawn_daemon"]
