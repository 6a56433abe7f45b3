"""Tray benchmark: what the tray costs while nothing happens, and how fast it notices a save.

Prints a table, writes bench/results/tray.json (the run before kept as tray.previous.json) and
a PNG beside it (save-to-indexing delay, idle CPU).

    python bench/tray.py [--seconds 30] [--saves 10] [--notes 200]

Figures:
- idle CPU (% of one core over ``--seconds``) and memory (VmRSS, VmHWM) of a real ``ragd-tray``
  process (pystray's xorg backend on a private Xvfb display) following an idle daemon;
- the delay from saving a note in the watched vault until the tray's view model shows
  "indexing", over ``--saves`` saves (the same follower code, run in this process so the moment
  can be timed). It includes inotify, watchfiles' settle step and the daemon's scheduling.
"""

from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from bench.common import Panel, bar_plots, median, pct, table, write_json  # noqa: E402

XVFB = "/usr/bin/Xvfb"


def proc_stat(pid: int) -> tuple[float, float, float]:
    """(cpu seconds, VmRSS MB, VmHWM MB) of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime, all threads
    mem = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            mem[key] = int(value.split()[0]) / 1024
    return cpu, mem.get("VmRSS", float("nan")), mem.get("VmHWM", float("nan"))


def wait(fn: Any, timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = fn()
        except Exception:
            value = None
        if value:
            return value
        time.sleep(interval)
    sys.exit(f"error: timed out waiting for {what}")


def start_daemon(home: Path, vault: Path, log: Path) -> subprocess.Popen[bytes]:
    from ragd.daemon.ipc.client import Client
    from ragd.daemon.ipc.discovery import find_daemon
    from ragd.daemon.settings.paths import resolve_paths

    env = {**os.environ, "RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    with open(log, "ab") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "ragd.daemon.cli.main", "daemon", "--vault",
                                 str(vault)], env=env, stdout=fh, stderr=fh,
                                start_new_session=True)
    paths = resolve_paths({"RAGD_HOME": str(home)})

    def idle() -> bool:
        address = find_daemon(paths)
        if not address:
            return False
        with Client(address, client_name="bench") as client:
            st = client.call("status")
        return st["state"] == "idle" and bool(st["collections"])

    wait(idle, 300, "the daemon to index the vault", 0.2)
    return proc


def start_xvfb() -> tuple[subprocess.Popen[bytes] | None, str | None]:
    """A private Xvfb; -displayfd makes it pick a free display and say which."""
    if not os.path.exists(XVFB):
        return None, None
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([XVFB, "-displayfd", str(write_fd), "-screen", "0", "640x200x24",
                             "-nolisten", "tcp"], pass_fds=(write_fd,),
                            stdout=subprocess.DEVNULL)
    os.close(write_fd)
    ready, _, _ = select.select([read_fd], [], [], 30)
    number = os.read(read_fd, 16).decode().strip() if ready else ""
    # The read end stays open for Xvfb's lifetime: Xvfb dies of SIGPIPE-like errors otherwise.
    proc.displayfd = read_fd  # type: ignore[attr-defined]
    return proc, (f":{number}" if number else None)


def measure_idle_process(home: Path, display: str, seconds: float) -> dict[str, Any]:
    env = {**os.environ, "RAGD_HOME": str(home), "DISPLAY": display,
           "PYSTRAY_BACKEND": "xorg"}
    t0 = time.perf_counter()
    tray = subprocess.Popen([sys.executable, "-m", "ragd.tray.app", "--no-start"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        log = home / "state" / "tray.log"
        wait(lambda: log.is_file() and "starting" in log.read_text(encoding="utf-8"), 60,
             "the tray to start")
        started = time.perf_counter() - t0
        time.sleep(5.0)  # let it connect, subscribe and draw its first views
        if tray.poll() is not None:
            sys.exit(f"error: the tray exited with {tray.returncode}; see {log}")
        cpu0, _, _ = proc_stat(tray.pid)
        w0 = time.perf_counter()
        time.sleep(seconds)
        cpu1, rss, hwm = proc_stat(tray.pid)
        wall = time.perf_counter() - w0
        threads = len(os.listdir(f"/proc/{tray.pid}/task"))
    finally:
        tray.terminate()
        try:
            tray.wait(10)
        except subprocess.TimeoutExpired:
            tray.kill()
    return {"cpu_percent": 100 * (cpu1 - cpu0) / wall, "cpu_seconds": cpu1 - cpu0,
            "window_s": wall, "rss_mb": rss, "peak_rss_mb": hwm, "threads": threads,
            "start_to_log_s": started}


def measure_save_to_indexing(home: Path, vault: Path, saves: int) -> list[float]:
    from ragd.daemon.settings.paths import resolve_paths
    from ragd.tray.app import TrayApp
    from ragd.tray.autostart import Autostart

    os.environ["RAGD_HOME"] = str(home)
    app = TrayApp(resolve_paths(), start_daemon=False,
                  autostart=Autostart(home=home, env={}, systemctl=lambda args: None),
                  opener=lambda p: None)
    seen: list[tuple[float, str]] = []
    lock = threading.Lock()

    def record(view: Any) -> None:
        with lock:
            seen.append((time.perf_counter(), view.state))

    app.listeners.append(record)
    app.start_background()
    delays = []
    try:
        app.wait_for_view(lambda v: v.state == "idle", 60)
        folder = vault / "Bench"
        folder.mkdir(exist_ok=True)
        for n in range(saves):
            mark = len(seen)
            t0 = time.perf_counter()
            (folder / f"Saved {n}.md").write_text(
                f"# Saved {n}\n\nA note written by the tray benchmark, number {n}.\n",
                encoding="utf-8")
            t1 = wait(lambda mark=mark: next((t for t, s in seen[mark:] if s == "indexing"),
                                             None), 30, "the tray to show indexing")
            delays.append(t1 - t0)
            app.wait_for_view(lambda v: v.state == "idle", 60)
    finally:
        app.stop()
        app.join()
    return delays


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="idle CPU window")
    parser.add_argument("--saves", type=int, default=10, help="notes saved for the delay")
    parser.add_argument("--notes", type=int, default=200, help="extra notes in the vault")
    args = parser.parse_args()

    from vault_fixtures import write_vault

    with tempfile.TemporaryDirectory(prefix="ragd-bench-tray-") as tmp:
        root = Path(tmp)
        home, vault = root / "home", write_vault(root / "vault")
        for n in range(args.notes):
            note = vault / "Generated" / f"Note {n:04}.md"
            note.parent.mkdir(exist_ok=True)
            note.write_text(f"# Note {n}\n\nTopic {n % 17}: some words about item {n}.\n",
                            encoding="utf-8")
        daemon = start_daemon(home, vault, root / "daemon.log")
        xvfb, display = start_xvfb()
        try:
            idle = measure_idle_process(home, display, args.seconds) if display else None
            delays = measure_save_to_indexing(home, vault, args.saves)
        finally:
            if xvfb is not None:
                xvfb.terminate()
                xvfb.wait(10)
                os.close(xvfb.displayfd)  # type: ignore[attr-defined]
            daemon.terminate()
            daemon.wait(60)

    rows: list[list[Any]] = []
    if idle is not None:
        rows += [["tray idle CPU (% of one core)", f"{idle['cpu_percent']:.3f}",
                  f"over {idle['window_s']:.0f} s, {idle['cpu_seconds']:.3f} CPU s"],
                 ["tray RSS (MB)", f"{idle['rss_mb']:.1f}", f"peak {idle['peak_rss_mb']:.1f}"
                  f", {idle['threads']} threads"]]
    else:
        rows.append(["tray idle CPU / RSS", "n/a", f"{XVFB} not found: apt-get install xvfb"])
    rows += [["save -> tray shows indexing, median (ms)", f"{1000 * median(delays):.0f}",
              f"{len(delays)} saves, {args.notes + 8} notes in the vault"],
             ["save -> tray shows indexing, p90 (ms)", f"{1000 * pct(delays, 90):.0f}", ""],
             ["save -> tray shows indexing, max (ms)", f"{1000 * max(delays):.0f}", ""]]
    print(table("ragd tray", rows, ["measure", "value", "note"]))
    path = write_json("tray", {
        "idle_process": idle, "save_to_indexing_s": delays,
        "save_to_indexing_median_s": median(delays), "save_to_indexing_p90_s": pct(delays, 90),
        "vault_notes": args.notes + 8, "backend": "xorg on Xvfb" if idle else None,
        "command": " ".join(["python", "bench/tray.py", *sys.argv[1:]])})
    plot(delays, idle)
    print(f"wrote {path}")
    return 0


def plot(delays: list[float], idle: dict[str, Any] | None) -> None:
    """bench/results/tray.png: the save-to-indexing delay and, when measured, the idle CPU."""
    panels: list[Panel] = [("save -> tray shows indexing (ms)", ["median", "p90", "max"],
                            [1000 * median(delays), 1000 * pct(delays, 90), 1000 * max(delays)],
                            "ms")]
    if idle is not None:
        panels.append(("tray idle CPU", ["% of one core"], [idle["cpu_percent"]], "%"))
    bar_plots("tray", panels)


if __name__ == "__main__":
    sys.exit(main())
