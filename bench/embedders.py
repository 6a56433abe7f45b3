"""Embedding backends side by side: ONNX int8, ONNX fp32 and torch (sentence-transformers).

Each backend runs in its own worker process, so its load time and memory are its own; all
three stay loaded and the timed rounds are interleaved (torch, fp32, int8, torch, ...), so a
busy machine slows them alike and the ratios measured in one run hold. Every worker embeds the
same chunks: real notes from obsidian-help-en, chunked as the indexer chunks them.

    python bench/embedders.py            # 256 chunks, 5 rounds
    python bench/embedders.py --quick    # 96 chunks, 2 rounds

Prints a table and writes bench/results/embedders.json (+ .png).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import bar_plots, corpus, median, rss_mb, table, write_json

BACKENDS = ("sentence-transformers", "onnx", "onnx-int8")
LABELS = {"sentence-transformers": "torch fp32", "onnx": "ONNX fp32", "onnx-int8": "ONNX int8"}
QUERIES = ["how do I link to a heading", "sync between devices", "daily notes template",
           "embed a pdf page", "keyboard shortcuts", "graph view filters", "canvas cards",
           "publish a site", "rename a file and update links", "search operators"]


def chunk_texts(vault: Path, n: int) -> list[str]:
    """``n`` embedded texts of real notes, spread over the vault (long and short alike)."""
    from ragd.daemon.embed.model import DEFAULT_MODEL, resolve_model_path
    from ragd.daemon.text.chunking import chunk_markdown, tokenizer_counter

    count = tokenizer_counter(Path(resolve_model_path(DEFAULT_MODEL)) / "tokenizer.json")
    texts: list[str] = []
    for note in sorted(vault.rglob("*.md")):
        body = re.sub(r"\A---\n.*?\n---\n", "", note.read_text(encoding="utf-8"), flags=re.S)
        texts += [c.embed_text for c in chunk_markdown(note.stem, body, count_tokens=count,
                                                       max_tokens=256)]
    return texts[:: max(1, len(texts) // n)][:n]


# -- worker -------------------------------------------------------------------------------------
def worker(backend: str, data_dir: Path, chunks_file: Path, out_dir: Path) -> None:
    """Load one backend, then embed the chunks each time the parent says ``run``."""
    started = time.perf_counter()
    import numpy as np

    from ragd.daemon.embed.embedding import make_embedder
    from ragd.daemon.settings.config import EmbeddingConfig

    emb: Any = make_embedder(EmbeddingConfig(backend=backend), data_dir)  # type: ignore[arg-type]
    emb.warm_up()
    load_s = time.perf_counter() - started
    texts = json.loads(chunks_file.read_text(encoding="utf-8"))
    loaded = {"load_s": load_s, "rss_loaded_mb": rss_mb(), "embedder": type(emb).__name__,
              "fingerprint": emb.fingerprint, "torch_imported": "torch" in sys.modules}
    emb.embed(texts[:16])  # first-batch allocations, as a daemon's first batch pays them
    print(json.dumps(loaded), flush=True)
    for line in sys.stdin:
        if line.strip() == "run":
            t0 = time.perf_counter()
            vectors = emb.embed(texts)
            seconds = time.perf_counter() - t0
            np.save(out_dir / f"{backend}.npy", vectors)
            print(json.dumps({"seconds": seconds}), flush=True)
        elif line.strip() == "queries":
            times = []
            for q in QUERIES * 3:
                t0 = time.perf_counter()
                emb.embed_query(q)
                times.append((time.perf_counter() - t0) * 1000)
            print(json.dumps({"query_ms": times}), flush=True)
        else:
            break
    print(json.dumps({"rss_peak_mb": rss_mb("VmHWM"), "rss_mb": rss_mb()}), flush=True)


class Worker:
    """One backend's process, driven line by line."""

    def __init__(self, backend: str, data_dir: Path, chunks: Path, out: Path) -> None:
        self.backend = backend
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", backend, "--data", str(data_dir),
             "--chunks-file", str(chunks), "--out", str(out)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.info = self.read()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            sys.exit(f"error: the {self.backend} worker exited (code {self.proc.wait()})")
        return dict(json.loads(line))

    def ask(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> dict[str, Any]:
        out = self.ask("quit")
        self.proc.wait(timeout=60)
        return out


# -- parent -------------------------------------------------------------------------------------
def export_graph(data_dir: Path) -> dict[str, Any]:
    """Export the default model's graph (once: kept across runs) and report what it cost."""
    from ragd.daemon.embed.embedding import (
        DEFAULT_MODEL,
        default_threads,
        models_dir,
        resolve_model_path,
    )
    from ragd.daemon.embed.onnx_embedder import read_manifest
    from ragd.daemon.embed.onnx_export import ensure_graph

    t0 = time.perf_counter()
    directory = ensure_graph(DEFAULT_MODEL, resolve_model_path(DEFAULT_MODEL),
                             models_dir(data_dir), threads=default_threads())
    manifest = read_manifest(directory)
    assert manifest is not None
    return {"seconds": time.perf_counter() - t0, "directory": str(directory),
            "variants": {k: v.model_dump() for k, v in manifest.variants.items()}}


def run(n: int, rounds: int, data_dir: Path) -> dict[str, Any]:
    import numpy as np

    from ragd.daemon.embed.model import default_threads

    export = export_graph(data_dir)
    texts = chunk_texts(corpus("vault", "obsidian-help-en"), n)
    with tempfile.TemporaryDirectory(prefix="ragd-bench-emb-") as tmp:
        chunks = Path(tmp) / "chunks.json"
        chunks.write_text(json.dumps(texts), encoding="utf-8")
        workers = {b: Worker(b, data_dir, chunks, Path(tmp)) for b in BACKENDS}
        seconds: dict[str, list[float]] = {b: [] for b in BACKENDS}
        for _ in range(rounds):
            for b, w in workers.items():
                seconds[b].append(w.ask("run")["seconds"])
        query_ms = {b: w.ask("queries")["query_ms"] for b, w in workers.items()}
        final = {b: w.close() for b, w in workers.items()}
        vectors = {b: np.load(Path(tmp) / f"{b}.npy") for b in BACKENDS}
    reference = vectors["sentence-transformers"]
    eps = {b: [len(texts) / s for s in seconds[b]] for b in BACKENDS}
    results: dict[str, Any] = {}
    for b in BACKENDS:
        cos = np.sum(vectors[b] * reference, axis=1)
        # Ratios per round (the three ran back to back), then their median: a busy machine
        # moves whole rounds, and torch's thread team suffers most from a stolen core.
        results[b] = {**workers[b].info, **final[b], "chunks_per_s": median(eps[b]),
                      "chunks_per_s_best": max(eps[b]), "chunks_per_s_rounds": eps[b],
                      "vs_torch": median([x / t for x, t in
                                          zip(eps[b], eps["sentence-transformers"], strict=True)]),
                      "vs_onnx_fp32": median([x / f for x, f in
                                              zip(eps[b], eps["onnx"], strict=True)]),
                      "query_ms_p50": median(query_ms[b]),
                      "cosine_to_torch_mean": float(cos.mean()),
                      "cosine_to_torch_min": float(cos.min())}
    return {"chunks": len(texts), "rounds": rounds, "threads": default_threads(),
            "export": export, "backends": results}


def report(data: dict[str, Any]) -> str:
    rows = []
    for b in BACKENDS:
        r = data["backends"][b]
        rows.append([LABELS[b], r["chunks_per_s"], r["chunks_per_s_best"], r["vs_torch"],
                     r["vs_onnx_fp32"],
                     r["query_ms_p50"], r["load_s"], r["rss_loaded_mb"], r["rss_peak_mb"],
                     f"{r['cosine_to_torch_mean']:.4f} / {r['cosine_to_torch_min']:.4f}",
                     "yes" if r["torch_imported"] else "no"])
    return table(
        f"Embedding backends: {data['chunks']} chunks of obsidian-help-en, {data['threads']} "
        f"threads, {data['rounds']} interleaved rounds (median, best; ratios: median of the "
        "per-round ratios)",
        rows, ["backend", "chunks/s", "best", "x torch", "x ONNX fp32", "query p50 ms", "load s",
               "RSS loaded MB", "RSS peak MB", "cosine to torch mean / min", "torch imported"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--chunks", type=int, default=256, help="chunks embedded per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="96 chunks, 2 rounds")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "ragd-bench-data",
                    help="data folder whose models/ holds the exported graph (kept across runs)")
    ap.add_argument("--worker", choices=BACKENDS, help=argparse.SUPPRESS)
    ap.add_argument("--chunks-file", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.data, args.chunks_file, args.out)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    n, rounds = (96, 2) if args.quick else (args.chunks, args.rounds)
    data = run(n, rounds, args.data)
    print(report(data))
    path = write_json("embedders", data)
    labels = [LABELS[b] for b in BACKENDS]
    res = data["backends"]
    bar_plots("embedders", [
        ("throughput", labels, [res[b]["chunks_per_s"] for b in BACKENDS], "chunks/s"),
        ("load time", labels, [res[b]["load_s"] for b in BACKENDS], "s"),
        ("memory after load", labels, [res[b]["rss_loaded_mb"] for b in BACKENDS], "MB"),
    ], suptitle=f"{data['chunks']} chunks of obsidian-help-en, {data['threads']} threads")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
