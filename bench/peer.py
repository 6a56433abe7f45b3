"""ragd side by side with the peer markdown-vault-mcp, same vault, same model, same run.

Prints tables with ratios (ragd / peer), writes bench/results/peer.json (peer-quick.json with
--quick) and a PNG of known-item MRR@10 by system and mode.

    python bench/peer.py [--quick | --full] [--peer-python PATH] [--known-items FILE]
                         [--repeat N] [--home DIR]

Set-up, once (the peer lives in its own venv; it needs no torch):

    python3 -m venv bench/.venv-peer
    bench/.venv-peer/bin/pip install "markdown-vault-mcp[embeddings-api]==5.1.0"

(/tmp/peer-venv is found too; --peer-python points anywhere else.)

How it is compared. Both systems run in process, each in its own child process so that its
peak memory is its own: ragd through `App` (bench/quality.py's helpers), the peer through its
library API (`Vault`, built from `ProjectConfig.from_env()` exactly as its own `index` command
and server do: operator defaults, FTS5 keyword leg, "openai" embedding provider). The peer's
embeddings come from bench/embed_server.py: ragd's own SentenceTransformerEmbedder (same
model, threads and normalisation) behind a loopback /v1/embeddings endpoint, started before
either side is timed, with its model loaded. ragd's model is loaded before its clock starts
too, so neither ingest figure includes loading the model.

- ingest: seconds to index the vault from empty (the peer: build_index + build_embeddings;
  ragd: one sync of a project collection), one after the other, with the seconds spent inside
  the model (ragd's embed stage; the endpoint's own clock for the peer), chunks each system
  made, chunks/s, and peak memory (the peer's process plus its endpoint, which holds the
  model).
- latency: p50/p95 of the known-item questions, --repeat times each, after 3 warm-up queries,
  per mode. Both workers stay up after their ingest and get each query in turn (the first
  alternating), so a change of load on the machine hits both alike; the time is that of the
  search call alone, taken inside each process. The peer's semantic and hybrid legs include
  an HTTP round trip to the embedding endpoint (measured alone and reported), which is how
  that peer embeds queries.
- quality: known-item MRR@10 on the same vault (ten distinct notes per query on both sides:
  ragd with search.max_per_source=1, the peer returns files); with --full also SciFact
  nDCG@10 / Recall@10 (test split) for both (the peer embeds the corpus through the endpoint:
  ~20 min; ragd reuses --home's cached vectors when given).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODES = ("keyword", "semantic", "hybrid")
K = 10
WARMUP = 3
PEER_DIST = "markdown-vault-mcp"
PEER_PYTHONS = (REPO / "bench" / ".venv-peer" / "bin" / "python",
                Path("/tmp/peer-venv/bin/python"))


def peak_rss_mb() -> float:
    """VmHWM of this process, in MB (Linux); NaN elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def serve_queries(search: Any, ready: dict[str, Any]) -> None:
    """The worker's side of the line protocol: announce ``ready``, then answer requests.

    Requests on stdin, one JSON object per line: {"query", "mode"} -> {"ranked", "ms"} (the
    time of the search call alone, measured here); {"finish": true} -> {"peak_rss_mb"}, then
    exit. Anything else the libraries print goes to stderr (the log), never to the protocol.
    """
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    proto.write(json.dumps(ready) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("finish"):
            proto.write(json.dumps({"peak_rss_mb": peak_rss_mb()}) + "\n")
            return
        t0 = time.perf_counter()
        ranked = search(req["query"], req["mode"])
        ms = (time.perf_counter() - t0) * 1000
        proto.write(json.dumps({"ranked": ranked, "ms": ms}) + "\n")


# -- the two workers (each runs in its own process) ---------------------------------------------
def peer_worker(job: dict[str, Any]) -> None:
    """Runs under the peer's interpreter: imports only the standard library and the peer."""
    work = Path(job["workdir"])
    work.mkdir(parents=True, exist_ok=True)
    prefix = "MARKDOWN_VAULT_MCP_"
    os.environ.update({
        f"{prefix}SOURCE_DIR": job["vault"],
        f"{prefix}INDEX_PATH": str(work / "index.db"),
        f"{prefix}STATE_PATH": str(work / "state.json"),
        f"{prefix}READ_ONLY": "true",
        f"{prefix}EMBEDDING_PROVIDER": "openai",
        f"{prefix}FILE_WATCHER": "false",
        "OPENAI_API_KEY": "bench-loopback",
        "OPENAI_BASE_URL": job["base_url"],
        "OPENAI_EMBEDDING_MODEL": job["model"],
    })
    from importlib.metadata import version

    from markdown_vault_mcp.config import ProjectConfig
    from markdown_vault_mcp.config_sections._assembly import (
        to_vault_instances,
        to_vault_settings,
    )
    from markdown_vault_mcp.vault import Vault

    config = ProjectConfig.from_env()
    instances = to_vault_instances(config)
    settings = to_vault_settings(config, instances=instances)
    vault = Vault(source_dir=config.source_dir, settings=settings,
                  embedding_provider=instances.embedding_provider,
                  summarizer=instances.summarizer, git_strategy=instances.git_strategy,
                  on_write=instances.on_write)
    try:
        t0 = time.perf_counter()
        stats = vault.index.build_index(force=True)
        t1 = time.perf_counter()
        embedded = vault.index.build_embeddings(force=True)
        t2 = time.perf_counter()

        def search(q: str, mode: str) -> list[str]:
            return [r.path for r in vault.reader.search(q, limit=K, mode=mode)]

        serve_queries(search, {
            "system": "markdown-vault-mcp", "version": version(PEER_DIST),
            "ingest": {"seconds": t2 - t0, "fts_seconds": t1 - t0, "embed_seconds": t2 - t1,
                       "documents": stats.documents_indexed, "chunks": stats.chunks_indexed,
                       "embedded": embedded, "skipped": stats.skipped},
            "settings": {"max_chunk_chars": settings.max_chunk_chars,
                         "max_chunk_words": settings.max_chunk_words,
                         "chunk_overlap_words": settings.chunk_overlap_words,
                         "embedding_batch_size": settings.embedding_batch_size}})
    finally:
        vault.close()


def ragd_worker(job: dict[str, Any]) -> None:
    """Runs under ragd's interpreter, on a fresh (or the given persistent) RAGD_HOME."""
    sys.path.insert(0, str(REPO))
    from bench.quality import index_folder, ragd_app, ragd_ranking
    from ragd.daemon import __version__

    collection = job.get("collection", "peer-bench")
    with ragd_app(Path(job["home"]), {"search.max_per_source": 1}) as app:
        app.embedder.warm_up()
        app.embedder.embed(["warm up"])
        t0 = time.perf_counter()
        info = index_folder(app, collection, Path(job["vault"]))
        seconds = time.perf_counter() - t0

        def search(q: str, mode: str) -> list[str]:
            return ragd_ranking(app, collection, q, mode)

        serve_queries(search, {
            "system": "ragd", "version": __version__,
            "ingest": {"seconds": seconds, "documents": info["sources"],
                       "chunks": info["chunks"], "embedded": info["embedded_now"],
                       "embed_seconds": info["stage_seconds"].get("embed", 0.0),
                       "stage_seconds": info["stage_seconds"]}})


# -- the orchestrator ---------------------------------------------------------------------------
def find_peer_python(given: Path | None) -> Path:
    for cand in ([given] if given else list(PEER_PYTHONS)):
        if cand and cand.exists():
            ok = subprocess.run([str(cand), "-c", "import markdown_vault_mcp, openai"],
                                capture_output=True, timeout=120)
            if ok.returncode == 0:
                return cand
    sys.exit("error: markdown-vault-mcp is not installed in a peer venv\n"
             "hint: python3 -m venv bench/.venv-peer && bench/.venv-peer/bin/pip install "
             "'markdown-vault-mcp[embeddings-api]==5.1.0'  (or pass --peer-python)")


class Worker:
    """A worker process: started (it ingests), then asked for searches until finished."""

    def __init__(self, python: Path, role: str, job: dict[str, Any], log: Path) -> None:
        self.role, self.log = role, log
        self._tmp = tempfile.TemporaryDirectory(prefix="ragd-peer-job-")
        jf = Path(self._tmp.name) / "job.json"
        jf.write_text(json.dumps(job), encoding="utf-8")
        self._log = open(log, "ab")  # noqa: SIM115
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([str(python), __file__, role, str(jf)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log, text=True, encoding="utf-8")
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=60)
            tail = self.log.read_text(encoding="utf-8", errors="replace")[-3000:]
            sys.exit(f"error: the {self.role} process failed (exit {self.proc.returncode}); "
                     f"log {self.log}:\n{tail}")
        return json.loads(line)

    def ask(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def finish(self) -> dict[str, Any]:
        out = self.ask({"finish": True})
        self.proc.wait(timeout=120)
        self._log.close()
        self._tmp.cleanup()
        return out


def interleaved(workers: dict[str, Worker], queries: list[str], repeat: int
                ) -> dict[str, dict[str, Any]]:
    """The same queries to every worker in turn (first one alternating), per mode.

    Returns system -> mode -> {"rankings" (first pass), "ms" (every pass)}.
    """
    names = list(workers)
    out: dict[str, dict[str, Any]] = {n: {} for n in names}
    for mode in MODES:
        for n in names:
            out[n][mode] = {"rankings": [], "ms": []}
            for q in queries[:WARMUP]:
                workers[n].ask({"query": q, "mode": mode})
        turn = 0
        for rep in range(repeat):
            for q in queries:
                order = names if turn % 2 == 0 else names[::-1]
                turn += 1
                for n in order:
                    ans = workers[n].ask({"query": q, "mode": mode})
                    out[n][mode]["ms"].append(ans["ms"])
                    if rep == 0:
                        out[n][mode]["rankings"].append(ans["ranked"])
    return out


class EmbedEndpoint:
    """bench/embed_server.py as a child process, with its model loaded."""

    def __init__(self, log: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "bench" / "embed_server.py"), "--idle-timeout", "1800",
             "--parent-pid", str(os.getpid())],
            stdout=subprocess.PIPE, stderr=open(log, "ab"),  # noqa: SIM115
            env={**os.environ, "HF_HUB_OFFLINE": "1"}, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            sys.exit(f"error: the embedding endpoint did not start; see {log}")
        self.info = json.loads(line)
        self.url = self.info["url"]

    def _call(self, path: str, body: Any = None) -> Any:
        base = self.url.removesuffix("/v1")
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(base + path, data=data,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read())

    def stats(self) -> dict[str, Any]:
        return self._call("/stats")

    def query_round_trip_ms(self, queries: list[str]) -> list[float]:
        out = []
        for q in queries:
            t0 = time.perf_counter()
            self._call("/v1/embeddings", {"model": "m", "input": [q]})
            out.append((time.perf_counter() - t0) * 1000)
        return out

    def peak_rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text(
                    encoding="utf-8").splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._call("/shutdown", {})
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def ratio(a: float, b: float) -> float | str:
    return a / b if b else "-"


def compare_vault(peer_py: Path, endpoint: EmbedEndpoint, vault: Path, rows: list[tuple[str, str]],
                  repeat: int, work: Path, logs: Path) -> dict[str, Any]:
    from bench.common import pct
    from bench.metrics import mrr

    queries = [q for q, _ in rows]
    expected = [e for _, e in rows]
    job = {"vault": str(vault), "model": "all-MiniLM-L6-v2", "base_url": endpoint.url}
    # Ingest one after the other (each alone on the machine), then query both, interleaved.
    print(f"peer: indexing {vault.name} through {endpoint.url} ...", file=sys.stderr, flush=True)
    before = endpoint.stats()
    peer = Worker(peer_py, "--peer-worker", {**job, "workdir": str(work / "peer")},
                  logs / "peer-worker.log")
    after = endpoint.stats()
    print(f"ragd: indexing {vault.name} ...", file=sys.stderr, flush=True)
    ragd = Worker(Path(sys.executable), "--ragd-worker", {**job, "home": str(work / "ragd")},
                  logs / "ragd-worker.log")
    print("querying both, interleaved ...", file=sys.stderr, flush=True)
    searched = interleaved({"ragd": ragd, "peer": peer}, queries, repeat)
    rt = endpoint.query_round_trip_ms(queries)
    out: dict[str, Any] = {"vault": str(vault), "queries": len(rows), "repeat": repeat,
                           "endpoint_query_round_trip_ms": {"p50": pct(rt, 50),
                                                            "p95": pct(rt, 95)}}
    for name, w in (("ragd", ragd), ("peer", peer)):
        res = {**w.ready, **w.finish()}
        ing = res["ingest"]
        ing["chunks_per_s"] = ing["chunks"] / ing["seconds"] if ing["seconds"] else float("nan")
        out[name] = {"version": res["version"], "ingest": ing, "peak_rss_mb": res["peak_rss_mb"],
                     "latency_ms": {m: {"p50": pct(v["ms"], 50), "p95": pct(v["ms"], 95),
                                        "n": len(v["ms"])} for m, v in searched[name].items()},
                     "known_items": {m: mrr(v["rankings"], expected, K)
                                     for m, v in searched[name].items()},
                     "settings": res.get("settings"),
                     "rankings": {m: v["rankings"] for m, v in searched[name].items()}}
    out["peer"]["endpoint"] = {k: after[k] - before[k] for k in after}
    out["peer"]["ingest"]["embed_seconds_in_model"] = out["peer"]["endpoint"]["embed_seconds"]
    return out


def compare_scifact(peer_py: Path, endpoint: EmbedEndpoint, root: Path, work: Path,
                    logs: Path) -> dict[str, Any]:
    """SciFact for both; ragd uses bench/quality.py's index under ``root`` (its vectors)."""
    from bench.metrics import evaluate
    from bench.quality import load_scifact, scifact_home, write_notes

    docs, queries, qrels = load_scifact(quick=False)
    home, collection = scifact_home(root, quick=False)
    folder = write_notes(docs, home / "notes" / collection)
    qids = list(queries)
    job = {"vault": str(folder), "model": "all-MiniLM-L6-v2", "base_url": endpoint.url}
    print(f"peer: indexing SciFact ({len(docs):,} notes) ...", file=sys.stderr, flush=True)
    before = endpoint.stats()
    peer = Worker(peer_py, "--peer-worker", {**job, "workdir": str(work / "peer-scifact")},
                  logs / "peer-worker.log")
    after = endpoint.stats()
    print("ragd: indexing SciFact ...", file=sys.stderr, flush=True)
    ragd = Worker(Path(sys.executable), "--ragd-worker",
                  {**job, "home": str(home), "collection": collection}, logs / "ragd-worker.log")
    searched = interleaved({"ragd": ragd, "peer": peer}, [queries[q] for q in qids], 1)
    out: dict[str, Any] = {"documents": len(docs), "queries": len(qids),
                           "peer_endpoint": {k: after[k] - before[k] for k in after}}
    for name, w in (("ragd", ragd), ("peer", peer)):
        w.finish()
        out[name] = {"ingest": w.ready["ingest"], "modes": {}}
        for mode, v in searched[name].items():
            run = {q: [Path(p).stem for p in r] for q, r in zip(qids, v["rankings"], strict=True)}
            out[name]["modes"][mode] = evaluate(run, qrels, K)
    return out


def print_tables(res: dict[str, Any]) -> None:
    from bench.common import table

    v = res["vault"]
    r, p = v["ragd"], v["peer"]
    ri, pi = r["ingest"], p["ingest"]
    r_model, p_model = ri["embed_seconds"], pi["embed_seconds_in_model"]
    p_total_mb = p["peak_rss_mb"] + res["endpoint_peak_rss_mb"]
    rows: list[list[Any]] = [
        ["ingest from empty (s)", ri["seconds"], pi["seconds"], ratio(ri["seconds"], pi["seconds"]),
         "lower is better"],
        ["  of which in the model (s)", r_model, p_model, ratio(r_model, p_model),
         "peer: measured inside the endpoint"],
        ["  the rest (s)", ri["seconds"] - r_model, pi["seconds"] - p_model,
         ratio(ri["seconds"] - r_model, pi["seconds"] - p_model), "chunking, indexes, HTTP"],
        ["chunks made", ri["chunks"], pi["chunks"], ratio(ri["chunks"], pi["chunks"]),
         "each system's own chunker"],
        ["chunks/s", ri["chunks_per_s"], pi["chunks_per_s"],
         ratio(ri["chunks_per_s"], pi["chunks_per_s"]), "higher is better"],
        ["embeddings/s inside the model", ri["embedded"] / r_model if r_model else 0.0,
         p["endpoint"]["texts"] / p_model if p_model else 0.0, "",
         "same model: a gap here is machine load"],
        ["peak RSS (MB)", r["peak_rss_mb"], p_total_mb, ratio(r["peak_rss_mb"], p_total_mb),
         f"peer {p['peak_rss_mb']:,.0f} + its endpoint {res['endpoint_peak_rss_mb']:,.0f}"],
    ]
    for m in MODES:
        for q in ("p50", "p95"):
            a, b = r["latency_ms"][m][q], p["latency_ms"][m][q]
            rows.append([f"{m} {q} (ms)", a, b, ratio(a, b), "lower is better"])
    for m in MODES:
        a, b = r["known_items"][m]["mrr@10"], p["known_items"][m]["mrr@10"]
        rows.append([f"{m} MRR@10", a, b, ratio(a, b),
                     f"hits@10 {r['known_items'][m]['hits@10']:.2f} vs "
                     f"{p['known_items'][m]['hits@10']:.2f}"])
    title = (f"ragd {r['version']} vs markdown-vault-mcp {p['version']}: {Path(v['vault']).name}, "
             f"{v['queries']} questions x {v['repeat']}, both in process, queries interleaved")
    print(table(title, rows, ["measure", "ragd", "peer", "ragd/peer", "note"]))
    ep = p["endpoint"]
    print(f"peer embedding endpoint during its ingest: {ep['texts']:,} texts in "
          f"{ep['requests']:,} requests, {ep['embed_seconds']:.1f} s inside the model, "
          f"{ep['over_token_limit']:,} over the model's 256-token limit (truncated by the model); "
          f"one query's round trip p50 {v['endpoint_query_round_trip_ms']['p50']:.1f} ms")
    if "scifact" in res:
        s = res["scifact"]
        rows = []
        for m in MODES:
            a, b = s["ragd"]["modes"][m], s["peer"]["modes"][m]
            rows.append([m, a["ndcg@10"], b["ndcg@10"], ratio(a["ndcg@10"], b["ndcg@10"]),
                         a["recall@10"], b["recall@10"]])
        print(table(f"SciFact test ({s['queries']} queries, {s['documents']:,} documents)", rows,
                    ["mode", "ragd nDCG@10", "peer nDCG@10", "ragd/peer", "ragd R@10",
                     "peer R@10"]))
        ep = s["peer_endpoint"]
        print(f"peer SciFact ingest: {s['peer']['ingest']['seconds']:.0f} s, "
              f"{s['peer']['ingest']['chunks']:,} chunks, {ep['over_token_limit']:,} of "
              f"{ep['texts']:,} texts over the model's 256-token limit")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] in ("--peer-worker", "--ragd-worker"):
        job = json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))
        (peer_worker if sys.argv[1] == "--peer-worker" else ragd_worker)(job)
        return
    sys.path.insert(0, str(REPO))
    from bench.common import bar_plot, write_json
    from bench.quality import DEFAULT_KNOWN_ITEMS, known_items_vault, load_known_items

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="vault only, one pass of queries")
    size.add_argument("--full", action="store_true", help="also SciFact for both (~30 min)")
    ap.add_argument("--peer-python", type=Path, help="python of the venv holding the peer")
    ap.add_argument("--known-items", type=Path, default=DEFAULT_KNOWN_ITEMS)
    ap.add_argument("--vault", type=Path, help="vault of the known-item file")
    ap.add_argument("--repeat", type=int, help="passes over the queries (default 1 quick, 3)")
    ap.add_argument("--home", type=Path, help="bench/quality.py's --home: ragd's SciFact index "
                    "is reused from there (no embedding); default: built from empty")
    args = ap.parse_args()
    repeat = args.repeat or (1 if args.quick else 3)
    rows, named = load_known_items(args.known_items)
    vault = known_items_vault(rows, named, args.vault)
    peer_py = find_peer_python(args.peer_python)
    with tempfile.TemporaryDirectory(prefix="ragd-peer-") as tmp:
        work = Path(tmp)
        logs = work / "logs"
        logs.mkdir()
        endpoint = EmbedEndpoint(logs / "embed-server.log")
        try:
            res: dict[str, Any] = {"quick": args.quick, "mode_of_call": "in process, both",
                                   "endpoint": endpoint.info}
            res["vault"] = compare_vault(peer_py, endpoint, vault, rows, repeat, work, logs)
            if args.full:
                root = args.home.expanduser().resolve() if args.home else work / "ragd-scifact"
                res["scifact"] = compare_scifact(peer_py, endpoint, root, work, logs)
            res["endpoint_peak_rss_mb"] = endpoint.peak_rss_mb()
        finally:
            endpoint.close()
    print_tables(res)
    name = "peer-quick" if args.quick else "peer"
    v = res["vault"]
    labels = [f"{s} {m}" for s in ("ragd", "peer") for m in MODES]
    values = [v[s]["known_items"][m]["mrr@10"] * 100 for s in ("ragd", "peer") for m in MODES]
    bar_plot(name, f"known-item MRR@10 x 100, {Path(v['vault']).name}", labels, values,
             "MRR@10 x 100")
    print(f"wrote {write_json(name, res)}")


if __name__ == "__main__":
    main()
