"""Freshness and daemon overhead: how soon a save is searchable, and what an idle daemon costs.

    python bench/freshness.py [--vault PATH] [--edits 100] [--burst 500] [--idle-seconds 30]
    python bench/freshness.py --home ~/.cache/ragd-bench/latency/size-1m-tantivy [--edits 30]

Runs a real daemon on a copy of the vault (in a temp folder) and measures:
- save-to-searchable latency over N edits, one at a time (p50, p95, max);
- a burst of M files written at once: seconds until the last is searchable;
- search latency over the socket while idle and while indexing;
- the idle daemon's CPU (% of one core) and resident memory.
Prints a table, writes bench/results/freshness.json and a PNG.

With --under-load (issue 21), the same edits are timed twice in one run: with the daemon idle,
then while it catches up with the shared mail corpus (a mail collection) and indexes the shared
books as two project collections. It also reports, per bulk collection, when its first keyword
hit came, when all of it was keyword-searchable and when all of it was embedded, and the
daemon's peak memory. Writes bench/results/freshness-under-load.json. --bulk mail (or books)
makes the load one of them alone (freshness-under-load-mail.json): the mail corpus's "keyword
searchable N times sooner than embedded" without the books competing for the cores.
Each save under load is also split by phase, from the daemon's timing of the small job that
indexed it (`status` small_jobs): watch, queue wait (by what the writer did meanwhile), run,
found. --saves-only stops once the saves are timed (A/B rounds of the save figures);
--spacing spreads the saves over more of the load.

With --home, the daemon runs on an existing RAGD_HOME instead (a size home of
bench/query_latency.py: 100k or 1M chunks), watching a copy of the vault kept in
HOME/fresh-vault, and only the save-to-searchable latency and idle search are measured,
written to bench/results/freshness-<home name>.json: issue 16's "one note saved at 1M".
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import bar_plot, corpus, pct, table, write_json  # noqa: E402


def proc_stat(pid: int) -> tuple[float, float]:
    """(CPU seconds used, resident MB) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return cpu, rss


class Daemon:
    def __init__(self, vault: Path, home: Path, env: dict[str, str] | None = None) -> None:
        from ragd.daemon.ipc.client import Client
        from ragd.daemon.ipc.discovery import find_daemon
        from ragd.daemon.settings.paths import resolve_paths

        env = {**os.environ, "RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1", **(env or {})}
        self.paths = resolve_paths({"RAGD_HOME": str(home)})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ragd.daemon.cli.main", "daemon", "--vault", str(vault)], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 600  # a 1M-chunk home takes a while to open
        while find_daemon(self.paths) is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                sys.exit("error: the daemon did not start; run `ragd daemon` to see why")
            time.sleep(0.05)
        self.client = Client(find_daemon(self.paths) or "", timeout=600, client_name="bench")

    def hits(self, word: str) -> int:
        answer = self.client.call("search", {"query": word, "mode": "keyword", "top_k": 100})
        return len(answer["results"])

    def wait_idle(self, timeout: float = 3600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.client.call("status")
            if st["state"] == "idle" and st["collections"] and not st["queue"]:
                return st
            time.sleep(0.1)
        sys.exit("error: the daemon did not become idle")

    def stop(self) -> None:
        try:
            self.client.call("shutdown")
            self.proc.wait(timeout=60)
        except Exception:
            self.proc.kill()


def wait_searchable(d: Daemon, word: str, count: int = 1, timeout: float = 120) -> float:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if d.hits(word) >= count:
            return time.perf_counter() - t0
        time.sleep(0.01)
    raise SystemExit(f"error: {word!r} was not searchable after {timeout:.0f} s")


def edits(d: Daemon, vault: Path, n: int, rng: random.Random,
          saves: list[dict[str, Any]] | None = None) -> list[float]:
    """Save-to-searchable of ``n`` edits, one at a time; each is added to ``saves`` (which
    note, when) for ``phases``."""
    notes = sorted(vault.rglob("*.md"))
    latencies = []
    for i in range(n):
        note = rng.choice(notes)
        word = f"freshword{i}x{rng.randrange(10**6)}"
        at = time.time()
        t0 = time.perf_counter()
        with open(note, "a", encoding="utf-8") as fh:
            fh.write(f"\n\nEdited: {word}\n")
        wait_searchable(d, word)
        latencies.append(time.perf_counter() - t0)
        if saves is not None:
            saves.append({"path": note.relative_to(vault).as_posix(), "at": at,
                          "s": latencies[-1]})
    return latencies


def phases(saves: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each save split by the daemon's timing of the small job that indexed it (`status`
    ``small_jobs``): ``watch`` (write to queued), the job's ``wait`` in the queue by what the
    writer did meanwhile, its run until ``visible``, and ``found`` (visible until this
    client's search saw it). Saves whose job is not found (an older daemon) are left out."""
    out = []
    for save in saves:
        mine = [j for j in jobs if save["path"] in j.get("paths", ())
                and j["at"] >= save["at"] - 0.05 and j.get("visible_s") is not None]
        if not mine:
            continue
        job = min(mine, key=lambda j: j["at"])
        watch = job["at"] - save["at"]
        out.append({**save, "watch": watch, "queue": job["wait_s"],
                    "run": job["visible_s"] - job["wait_s"],
                    "found": save["s"] - watch - job["visible_s"],
                    **{f"wait.{k}": v for k, v in job["wait"].items()},
                    **{f"run.{k}": v for k, v in job["run"].items()}})
    return out


def phase_table(split: list[dict[str, Any]]) -> str:
    """p50/p95/max of each phase over the saves, and the slowest save's own figures."""
    keys = ["s", "watch", "queue", "run", "found"]
    keys += sorted({k for row in split for k in row if "." in k})
    slowest = max(split, key=lambda r: r["s"])
    rows = [[k, pct([r.get(k, 0.0) for r in split], 50), pct([r.get(k, 0.0) for r in split], 95),
             max(r.get(k, 0.0) for r in split), slowest.get(k, 0.0)] for k in keys]
    return table(f"where the {len(split)} saves' time went (seconds)", rows,
                 ["phase", "p50", "p95", "max", "slowest save"])


def burst(d: Daemon, vault: Path, m: int) -> float:
    folder = vault / "Burst"
    folder.mkdir()
    t0 = time.perf_counter()
    for i in range(m):
        (folder / f"burst {i:04}.md").write_text(
            f"# Burst {i}\n\nburstword note number {i} of the burst.", encoding="utf-8")
    wait_searchable(d, "burstword", count=min(m, 100), timeout=1800)
    d.wait_idle()
    return time.perf_counter() - t0


def search_latency(d: Daemon, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        d.client.call("search", {"query": q, "top_k": 10})
        out.append((time.perf_counter() - t0) * 1000)
    return out


def at_scale(home: Path, source: Path, n: int) -> None:
    """Save-to-searchable in a big home: a vault is added to what it already holds."""
    import sqlite3
    import tomllib

    if not (home / "data" / "catalog.sqlite").exists():
        sys.exit(f"error: {home} holds no index; build one with bench/query_latency.py")
    vault = home / "fresh-vault"
    if not vault.exists():
        shutil.copytree(source, vault, ignore=shutil.ignore_patterns(".git"))
    rng = random.Random(7)
    d = Daemon(vault, home, {"RAGD_OBSIDIAN_ENABLED": "true"})
    try:
        d.wait_idle()
        with sqlite3.connect(f"file:{home / 'data' / 'catalog.sqlite'}?mode=ro", uri=True) as db:
            chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        config = home / "config" / "config.toml"
        settings = tomllib.loads(config.read_text(encoding="utf-8")) if config.exists() else {}
        backend = settings.get("index", {}).get("keyword_backend", "whoosh")
        queries = ["how to organise daily notes", "templates for meetings", "weekly review",
                   "project planning", "reading list"] * 4
        lat_idle = search_latency(d, queries)
        fresh = edits(d, vault, n, rng)
        _, rss = proc_stat(d.proc.pid)
    finally:
        d.stop()
    rows = [["chunks", chunks, home.name], ["keyword backend", backend or "?", ""],
            ["save to searchable p50 (s)", pct(fresh, 50), f"{len(fresh)} edits, one at a time"],
            ["save to searchable p95 (s)", pct(fresh, 95), ""],
            ["save to searchable max (s)", max(fresh), ""],
            ["search idle p50 (ms)", pct(lat_idle, 50), f"{len(lat_idle)} queries, socket"],
            ["search idle p95 (ms)", pct(lat_idle, 95), ""],
            ["daemon RSS after (MB)", rss, ""]]
    print(table(f"freshness at scale: {home.name}", rows, ["measure", "value", "note"]))
    out = write_json(f"freshness-{home.name}", {
        "home": str(home), "chunks": chunks, "keyword_backend": backend,
        "save_to_searchable_s": {"p50": pct(fresh, 50), "p95": pct(fresh, 95),
                                 "max": max(fresh), "n": len(fresh), "all": fresh},
        "search_ms": {"p50": pct(lat_idle, 50), "p95": pct(lat_idle, 95)},
        "daemon_rss_mb": rss})
    print(f"wrote {out}")


class Load:
    """Polls a daemon under bulk work: per collection, when its first keyword hit came, when
    it was all read (keyword-searchable) and when it was all embedded; the peak RSS."""

    def __init__(self, d: Daemon, probes: dict[str, str]) -> None:
        self.d, self.probes, self.t0 = d, probes, time.perf_counter()
        self.first: dict[str, float] = {}
        self.read: dict[str, float] = {}
        self.embedded: dict[str, float] = {}
        self.chunks: dict[str, int] = {}
        self.peak_rss = 0.0

    def poll(self) -> bool:
        """One look; True once every collection is embedded."""
        now = time.perf_counter() - self.t0
        self.peak_rss = max(self.peak_rss, proc_stat(self.d.proc.pid)[1])
        st = self.d.client.call("status")
        queued = {j["collection"] for j in st["queue"]} | {(st.get("current") or {})
                                                           .get("collection")}
        for c in st["collections"]:
            name = c["name"]
            if name not in self.probes:
                continue
            if name not in self.first and self.d.client.call("search", {
                    "query": self.probes[name], "mode": "keyword", "collection": name,
                    "top_k": 1})["results"]:
                self.first[name] = now
            if name not in self.read and c["source_count"] and name not in queued:
                self.read[name] = now
            if name in self.read and name not in self.embedded and not c["unembedded_chunks"]:
                self.embedded[name] = now
                self.chunks[name] = c["chunk_count"]
        return set(self.embedded) >= set(self.probes)


def under_load(source: Path, n: int, bulk: str = "all", saves_only: bool = False,
               spacing: float = 0.2) -> None:
    """Save-to-searchable idle and under bulk load, in one run (issue 21). ``bulk`` is the
    load: the mail corpus and the books ("all"), or one of them ("mail", "books").
    ``saves_only``: stop once the saves are timed, not when the load is all embedded.
    ``spacing``: seconds between a save found and the next (spread over more of the load)."""
    mail, books = corpus("mail"), corpus("books")
    rng = random.Random(21)
    with tempfile.TemporaryDirectory(prefix="ragd-load-") as tmp:
        vault, home = Path(tmp) / "vault", Path(tmp) / "home"
        shutil.copytree(source, vault, ignore=shutil.ignore_patterns(".git"))
        d = Daemon(vault, home)
        try:
            d.wait_idle()
            idle = edits(d, vault, n, rng)
        finally:
            d.stop()
        probes = {"email": "thanks"} if bulk != "books" else {}
        if bulk != "mail":
            probes.update({"books-epub": "chapter", "books-pdf": "page"})
        d = Daemon(vault, home, {"RAGD_EMAIL_PATHS": str(mail)} if "email" in probes else {})
        load = Load(d, probes)
        try:
            for name, folder in (("books-epub", books / "epub"), ("books-pdf", books / "pdf")):
                if name in probes:
                    d.client.call("index", {"collection": name, "path": str(folder),
                                            "wait": False})
            busy: list[float] = []
            saves: list[dict[str, Any]] = []
            split: list[dict[str, Any]] = []
            while not load.poll() and not (saves_only and len(busy) >= n):
                if len(busy) < n and load.first:
                    busy.append(edits(d, vault, 1, rng, saves)[0])
                    if len(busy) == n:  # before the daemon's ring of small jobs turns
                        split = phases(saves, d.client.call("status").get("small_jobs", []))
                    time.sleep(max(0.0, spacing - 0.2))
                time.sleep(0.2)
            if not split:
                split = phases(saves, d.client.call("status").get("small_jobs", []))
            last_busy = len(busy)
        finally:
            d.stop()
    rows = [["save to searchable p50 (s)", pct(idle, 50), pct(busy, 50),
             pct(busy, 50) / pct(idle, 50)],
            ["save to searchable p95 (s)", pct(idle, 95), pct(busy, 95),
             pct(busy, 95) / pct(idle, 95)],
            ["save to searchable max (s)", max(idle), max(busy), max(busy) / max(idle)]]
    print(table(f"freshness under load: {len(idle)} edits idle, {last_busy} during bulk work",
                rows, ["measure", "idle", "under load", "ratio"]))
    per = [[name, load.first.get(name), load.read.get(name), load.embedded.get(name),
            load.chunks.get(name, 0),
            (load.embedded[name] / load.first[name])
            if load.first.get(name) and name in load.embedded else None]
           for name in load.probes]
    print(table("bulk collections (seconds from the daemon's start)", per,
                ["collection", "first keyword hit", "all keyword", "all embedded", "chunks",
                 "embedded / first hit"]))
    print(f"daemon peak RSS: {load.peak_rss:.0f} MB")
    if split:
        print(phase_table(split))
    out = write_json("freshness-under-load" + ("" if bulk == "all" else f"-{bulk}")
                     + ("-saves" if saves_only else ""), {
        "vault": str(source), "bulk": bulk, "idle_s": idle, "under_load_s": busy,
        "save_to_searchable_s": {"idle": {"p50": pct(idle, 50), "p95": pct(idle, 95)},
                                 "under_load": {"p50": pct(busy, 50), "p95": pct(busy, 95)}},
        "collections": {name: {"first_keyword_hit_s": load.first.get(name),
                               "all_keyword_s": load.read.get(name),
                               "all_embedded_s": load.embedded.get(name),
                               "chunks": load.chunks.get(name)} for name in load.probes},
        "daemon_peak_rss_mb": load.peak_rss, "phases": split})
    print(f"wrote {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--vault", type=Path, default=None)
    ap.add_argument("--edits", type=int, default=100)
    ap.add_argument("--burst", type=int, default=500)
    ap.add_argument("--idle-seconds", type=float, default=30.0)
    ap.add_argument("--home", type=Path, default=None,
                    help="measure save-to-searchable on this existing RAGD_HOME")
    ap.add_argument("--under-load", action="store_true",
                    help="time the edits idle, then while mail and books are indexed")
    ap.add_argument("--bulk", choices=("all", "mail", "books"), default="all",
                    help="with --under-load: the bulk work (default: mail and books)")
    ap.add_argument("--spacing", type=float, default=0.2,
                    help="with --under-load: seconds between a save found and the next")
    ap.add_argument("--saves-only", action="store_true",
                    help="with --under-load: stop once the saves are timed (no embedding "
                         "times; for A/B rounds of the save figures)")
    args = ap.parse_args()
    source = args.vault or corpus("vault", "kepano-obsidian")
    if args.under_load:
        under_load(source, args.edits, args.bulk, args.saves_only, args.spacing)
        return
    if args.home:
        at_scale(args.home.expanduser().resolve(), source, args.edits)
        return
    rng = random.Random(7)
    queries = ["how to organise daily notes", "templates for meetings", "book reviews",
               "weekly review", "project planning", "reading list", "recipes", "travel",
               "writing habits", "bookmarks"] * 5
    with tempfile.TemporaryDirectory(prefix="ragd-fresh-") as tmp:
        vault = Path(tmp) / "vault"
        shutil.copytree(source, vault, ignore=shutil.ignore_patterns(".git"))
        d = Daemon(vault, Path(tmp) / "home")
        try:
            d.wait_idle()
            cpu0, _ = proc_stat(d.proc.pid)
            time.sleep(args.idle_seconds)  # measuring idle cost: nothing to wait for
            cpu1, idle_rss = proc_stat(d.proc.pid)
            idle_cpu = (cpu1 - cpu0) / args.idle_seconds * 100
            lat_idle = search_latency(d, queries)
            fresh = edits(d, vault, args.edits, rng)
            # Searches while a burst is being indexed.
            busy_folder = vault / "Busy"
            busy_folder.mkdir()
            for i in range(200):
                (busy_folder / f"busy {i}.md").write_text(
                    f"# Busy {i}\n\n" + "Filler sentence about gardens. " * 40, encoding="utf-8")
            while d.client.call("status")["indexing"]["remaining"] == 0:
                time.sleep(0.02)
            lat_busy = search_latency(d, queries)
            busy_remaining = d.client.call("status")["indexing"]["remaining"]
            d.wait_idle()
            burst_s = burst(d, vault, args.burst)
        finally:
            d.stop()
    rows = [
        ["save to searchable p50 (s)", pct(fresh, 50), f"{len(fresh)} edits, one at a time"],
        ["save to searchable p95 (s)", pct(fresh, 95), ""],
        ["save to searchable max (s)", max(fresh), ""],
        [f"burst of {args.burst} files (s)", burst_s, "written at once, until all searchable"],
        ["search idle p50 (ms)", pct(lat_idle, 50), f"{len(lat_idle)} queries, socket"],
        ["search idle p95 (ms)", pct(lat_idle, 95), ""],
        ["search while indexing p50 (ms)", pct(lat_busy, 50),
         f"{busy_remaining} sources still queued after"],
        ["search while indexing p95 (ms)", pct(lat_busy, 95), ""],
        ["idle CPU (% of one core)", idle_cpu, f"over {args.idle_seconds:.0f} s"],
        ["idle RSS (MB)", idle_rss, ""],
    ]
    print(table(f"freshness: {source.name}", rows, ["measure", "value", "note"]))
    out = write_json("freshness", {
        "vault": str(source), "save_to_searchable_s": {
            "p50": pct(fresh, 50), "p95": pct(fresh, 95), "max": max(fresh), "n": len(fresh)},
        "burst": {"files": args.burst, "seconds": burst_s},
        "search_ms": {"idle": {"p50": pct(lat_idle, 50), "p95": pct(lat_idle, 95)},
                      "indexing": {"p50": pct(lat_busy, 50), "p95": pct(lat_busy, 95)}},
        "idle": {"cpu_percent": idle_cpu, "rss_mb": idle_rss, "seconds": args.idle_seconds}})
    bar_plot("freshness", "save to searchable (s)", ["p50", "p95", "max"],
             [pct(fresh, 50), pct(fresh, 95), max(fresh)], "seconds")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
