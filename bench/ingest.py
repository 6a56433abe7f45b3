"""Ingest benchmark: index a vault from empty through a real daemon, against the raw model.

Prints a table and writes bench/results/ingest.json (+ a PNG of the stage split).

    python bench/ingest.py [--vault PATH] [--queries N]

Figures: seconds to index from empty (daemon start to idle, and the indexing pass alone),
chunks/s end to end against the raw model's embeddings/s on the very same chunks in the same
run (their ratio is the pipeline's overhead), the time split by stage, search latency over the
socket and in process, and the daemon's peak memory (VmHWM).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import bar_plot, corpus, pct, table, write_json  # noqa: E402


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_daemon(vault: Path, home: Path) -> tuple[Any, dict[str, Any], float, float]:
    from ragd.daemon.ipc.client import Client
    from ragd.daemon.ipc.discovery import find_daemon
    from ragd.daemon.settings.paths import resolve_paths

    env = {**os.environ, "RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    paths = resolve_paths({"RAGD_HOME": str(home)})
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ragd.daemon.cli.main", "daemon", "--vault", str(vault)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while find_daemon(paths) is None:
        if proc.poll() is not None:
            sys.exit("error: the daemon exited at start-up; run `ragd daemon` to see why")
        time.sleep(0.05)
    client = Client(find_daemon(paths) or "", timeout=600, client_name="bench")
    while True:
        st = client.call("status")
        if st["state"] == "idle" and st["collections"] and st["collections"][0]["last_report"]:
            break
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    return client, st, wall, peak_rss_mb(proc.pid)


def raw_model_eps(home: Path, threads: int) -> tuple[int, float]:
    """Embed exactly the chunks the daemon embedded, with the bare model."""
    from ragd.daemon.embed.embedding import SentenceTransformerEmbedder
    from ragd.daemon.text.chunking import embed_prefix

    db = sqlite3.connect(home / "data" / "catalog.sqlite")
    rows = db.execute("SELECT s.title, c.heading_path, c.text FROM chunks c JOIN sources s"
                      " ON s.id = c.source_id").fetchall()
    import json

    texts = [embed_prefix(t, json.loads(h)) + "\n\n" + x for t, h, x in rows]
    emb = SentenceTransformerEmbedder(threads=threads)
    emb.warm_up()
    emb.embed(texts[:32])  # warm caches, as the daemon's first batch did
    t0 = time.perf_counter()
    emb.embed(texts)
    return len(texts), len(texts) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--vault", type=Path, default=None)
    ap.add_argument("--queries", type=int, default=100)
    args = ap.parse_args()
    vault = args.vault or corpus("vault", "obsidian-help-en")
    from ragd.daemon.embed.model import default_threads

    threads = default_threads()
    with tempfile.TemporaryDirectory(prefix="ragd-bench-") as tmp:
        home = Path(tmp)
        client, st, wall, peak = run_daemon(vault, home)
        report = st["collections"][0]["last_report"]
        chunks = st["collections"][0]["chunk_count"]
        # From ready to idle: the sync returns once its notes are committed and their vectors
        # follow on the embedding thread (decision 0022), so the pass alone is not the time.
        index_s = wall - float(st.get("ready_s") or 0.0)
        db = sqlite3.connect(home / "data" / "catalog.sqlite")
        queries = [r[0] for r in db.execute(
            "SELECT DISTINCT json_extract(heading_path, '$[#-1]') FROM chunks WHERE"
            " heading_path != '[]' ORDER BY id LIMIT ?", (args.queries,))]
        lat_socket = []
        for q in queries:
            t0 = time.perf_counter()
            client.call("search", {"query": q, "top_k": 10})
            lat_socket.append((time.perf_counter() - t0) * 1000)
        client.call("shutdown")
        client.close()
        time.sleep(1.0)
        n, raw_eps = raw_model_eps(home, threads)
    e2e = chunks / index_s
    stages = report["stage_seconds"]
    rows = [
        ["notes indexed", report["indexed"], ""],
        ["chunks", chunks, ""],
        ["daemon start to idle (s)", wall, "includes loading the model"],
        ["indexing (s)", index_s, "ready to idle: read, chunk, commit, embed, FAISS, Whoosh"],
        ["end to end (chunks/s)", e2e, ""],
        ["raw model (embeddings/s)", raw_eps, f"same {n:,} chunks, {threads} threads"],
        ["pipeline / raw model", e2e / raw_eps, "1.0 = no overhead"],
        ["search over socket p50 (ms)", pct(lat_socket, 50), f"{len(queries)} queries"],
        ["search over socket p95 (ms)", pct(lat_socket, 95), ""],
        ["daemon peak RSS (MB)", peak, "VmHWM"],
    ]
    rows += [[f"stage {k} (s)", v, f"{v / index_s:.0%}"] for k, v in sorted(stages.items())]
    print(table(f"ingest: {vault.name}", rows, ["measure", "value", "note"]))
    out = write_json("ingest", {
        "vault": str(vault), "notes": report["indexed"], "chunks": chunks,
        "daemon_start_to_idle_s": wall, "index_s": index_s, "e2e_chunks_per_s": e2e,
        "raw_embeddings_per_s": raw_eps, "ratio": e2e / raw_eps,
        "search_socket_ms": {"p50": pct(lat_socket, 50), "p95": pct(lat_socket, 95)},
        "peak_rss_mb": peak, "stage_seconds": stages, "threads": threads})
    bar_plot("ingest", f"indexing {vault.name}: seconds by stage", list(stages),
             list(stages.values()), "seconds")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
