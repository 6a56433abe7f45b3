"""Benchmark the MCP bridge against its floors, all measured in the same run.

1. Cold start: spawn a stdio server, `initialize`, `tools/list` (median of --runs, the three
   servers interleaved): ragd-mcp against the smallest servers the SDK can make (a low-level
   `Server` and a `FastMCP`, each with no tools and no work).
2. rag_search round trip, p50/p95 over --searches queries: through ragd-mcp (MCP over stdio)
   against the same params sent straight to the daemon's socket (ragd.daemon.ipc.client.Client).

A temporary RAGD_HOME and a daemon over --vault (default: the kepano-obsidian vault of the
shared corpus, else a generated one) are set up first and stopped at the end.

    .venv/bin/python bench/mcp_bridge.py [--runs 10] [--searches 60] [--vault PATH]

Prints a table, writes bench/results/mcp_bridge.json (the run before kept as
mcp_bridge.previous.json) and a PNG beside it: cold start against the SDK floors, and search
p50/p95 through the bridge against the socket.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import CORPUS, bar_plots, write_json  # noqa: E402

DEFAULT_VAULT = CORPUS / "vault" / "kepano-obsidian"
BRIDGE = Path(sys.executable).parent / "ragd-mcp"

LOWLEVEL_MIN = """
import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
server = Server("min")
@server.list_tools()
async def tools():
    return []
async def main():
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())
anyio.run(main)
"""
FASTMCP_MIN = """
from mcp.server.fastmcp import FastMCP
FastMCP("min").run()
"""
QUERIES = ["how do I organise my daily notes", "templates for meeting notes", "book reviews",
           "rating system for movies", "evergreen notes", "projects and tasks", "journal",
           "clipping articles from the web", "recipes", "people I met", "travel plans",
           "\"daily note\"", "obsidian bases", "weekly review"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {"median_ms": round(statistics.median(ms), 1), "p50_ms": round(percentile(ms, .5), 1),
            "p95_ms": round(percentile(ms, .95), 1), "min_ms": round(min(ms), 1),
            "max_ms": round(max(ms), 1), "n": len(ms)}


def write_generated_vault(root: Path) -> Path:
    sys.path.insert(0, str(REPO / "tests"))
    from vault_fixtures import write_vault

    topics = ["garden", "bread", "bicycle", "budget", "astronomy", "music", "travel", "books"]
    for n in range(200):
        topic = topics[n % len(topics)]
        (root / topic).mkdir(parents=True, exist_ok=True)
        (root / topic / f"{topic} note {n}.md").write_text(
            f"# {topic.title()} note {n}\n\nNotes about {topic}, entry {n}: what worked, what "
            f"did not, and what to try next time.\n", encoding="utf-8")
    return write_vault(root)


# -- the daemon ---------------------------------------------------------------------------------
def start_daemon(vault: Path) -> Any:
    from ragd.daemon.runtime.launch import connect

    client = connect(start=True, client_name="bench", timeout=60, call_timeout=600)
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        status = client.call("status")
        if status["state"] == "idle" and status["collections"]:
            return client, status
        time.sleep(0.5)
    raise SystemExit("the daemon did not finish indexing within 30 minutes")


# -- measurements -------------------------------------------------------------------------------
def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def cold_start(params: StdioServerParameters) -> tuple[float, float, float]:
    """Seconds from spawn to the initialize answer and to the tools/list answer, and the CPU
    seconds the server used in all (steadier than wall time on a busy machine)."""
    cpu0 = _children_cpu()
    with open(os.devnull, "w") as devnull:
        t0 = time.perf_counter()
        async with stdio_client(params, errlog=devnull) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            t_init = time.perf_counter() - t0
            await session.list_tools()
            t_list = time.perf_counter() - t0
    return t_init, t_list, _children_cpu() - cpu0


async def measure_cold(runs: int, env: dict[str, str]) -> dict[str, Any]:
    servers = {
        "sdk_lowlevel_min": StdioServerParameters(command=sys.executable,
                                                  args=["-c", LOWLEVEL_MIN], env=env),
        "sdk_fastmcp_min": StdioServerParameters(command=sys.executable,
                                                 args=["-c", FASTMCP_MIN], env=env),
        "ragd_mcp": StdioServerParameters(command=str(BRIDGE), env=env),
    }
    init: dict[str, list[float]] = {name: [] for name in servers}
    listed: dict[str, list[float]] = {name: [] for name in servers}
    cpu: dict[str, list[float]] = {name: [] for name in servers}
    for params in servers.values():  # one unmeasured run each: the page cache
        await cold_start(params)
    for _ in range(runs):
        for name, params in servers.items():
            t_init, t_list, t_cpu = await cold_start(params)
            init[name].append(t_init)
            listed[name].append(t_list)
            cpu[name].append(t_cpu)
    return {name: {"tools_list": summary(listed[name]), "initialize": summary(init[name]),
                   "cpu": summary(cpu[name])} for name in servers}


async def measure_search(searches: int, env: dict[str, str], direct: Any) -> dict[str, Any]:
    bridge_times: list[float] = []
    direct_times: list[float] = []
    params = StdioServerParameters(command=str(BRIDGE), env=env)
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for query in QUERIES[:3]:  # warm both paths (model, caches, connections)
                await session.call_tool("rag_search", {"query": query})
                direct.call("search", {"query": query, "top_k": 10})
            for n in range(searches):
                args = {"query": QUERIES[n % len(QUERIES)], "top_k": 10}
                order = ("bridge", "direct") if n % 2 == 0 else ("direct", "bridge")
                for way in order:
                    t0 = time.perf_counter()
                    if way == "bridge":
                        result = await session.call_tool("rag_search", args)
                        assert not result.isError, result.content
                        bridge_times.append(time.perf_counter() - t0)
                    else:
                        await anyio.to_thread.run_sync(direct.call, "search", args)
                        direct_times.append(time.perf_counter() - t0)
    return {"direct_socket": summary(direct_times), "through_bridge": summary(bridge_times)}


# -- report -------------------------------------------------------------------------------------
def table(report: dict[str, Any]) -> str:
    cold, search = report["cold_start"], report["rag_search"]
    rows = ["cold start: spawn -> initialize -> tools/list (median of "
            f"{cold['ragd_mcp']['tools_list']['n']})",
            f"  {'server':<34}{'initialize':>12}{'tools/list':>12}{'min':>9}{'max':>9}"
            f"{'CPU':>9}"]
    labels = {"sdk_lowlevel_min": "SDK low-level Server, no tools",
              "sdk_fastmcp_min": "SDK FastMCP, no tools", "ragd_mcp": "ragd-mcp (4 tools)"}
    for name, label in labels.items():
        c = cold[name]
        rows.append(f"  {label:<34}{c['initialize']['median_ms']:>10.0f}ms"
                    f"{c['tools_list']['median_ms']:>10.0f}ms{c['tools_list']['min_ms']:>7.0f}ms"
                    f"{c['tools_list']['max_ms']:>7.0f}ms{c['cpu']['median_ms']:>7.0f}ms")
    rows.append(f"  ragd-mcp over the low-level floor: {report['bridge_overhead_ms']:+.0f} ms "
                f"(CPU {report['bridge_overhead_cpu_ms']:+.0f} ms)")
    rows += ["", f"rag_search round trip ({search['direct_socket']['n']} queries each, "
             "interleaved, top_k=10)", f"  {'path':<34}{'p50':>10}{'p95':>10}"]
    for name, label in (("direct_socket", "straight to the daemon's socket"),
                        ("through_bridge", "through ragd-mcp (MCP stdio)")):
        s = search[name]
        rows.append(f"  {label:<34}{s['p50_ms']:>8.1f}ms{s['p95_ms']:>8.1f}ms")
    rows.append(f"  bridge overhead at p50: {report['search_overhead_p50_ms']:+.1f} ms")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="cold starts per server")
    parser.add_argument("--searches", type=int, default=60, help="queries per path")
    parser.add_argument("--vault", type=Path, default=None, help="vault to index and search")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="ragd-bench-mcp-"))
    vault = args.vault or (DEFAULT_VAULT if DEFAULT_VAULT.is_dir() else
                           write_generated_vault(work / "vault"))
    os.environ.update({"RAGD_HOME": str(work / "home"), "RAGD_OBSIDIAN_VAULTS": str(vault),
                       "HF_HUB_OFFLINE": "1"})
    env = {k: v for k, v in os.environ.items()}
    t0 = time.perf_counter()
    direct, status = start_daemon(vault)
    print(f"daemon ready over {vault} in {time.perf_counter() - t0:.0f} s "
          f"({sum(c['chunk_count'] for c in status['collections']):,} chunks)", file=sys.stderr)
    try:
        cold = anyio.run(measure_cold, args.runs, env)
        search = anyio.run(measure_search, args.searches, env, direct)
    finally:
        direct.call("shutdown")
        direct.close()
    import mcp

    report = {
        "cold_start": cold, "rag_search": search,
        "bridge_overhead_ms": round(cold["ragd_mcp"]["tools_list"]["median_ms"]
                                    - cold["sdk_lowlevel_min"]["tools_list"]["median_ms"], 1),
        "bridge_overhead_cpu_ms": round(cold["ragd_mcp"]["cpu"]["median_ms"]
                                        - cold["sdk_lowlevel_min"]["cpu"]["median_ms"], 1),
        "search_overhead_p50_ms": round(search["through_bridge"]["p50_ms"]
                                        - search["direct_socket"]["p50_ms"], 1),
        "setup": {"vault": str(vault), "sources": sum(c["source_count"]
                                                      for c in status["collections"]),
                  "chunks": sum(c["chunk_count"] for c in status["collections"]),
                  "python": platform.python_version(),
                  "mcp": getattr(mcp, "__version__", None) or _version("mcp"),
                  "cpus": os.cpu_count(), "load_avg": _load(), "time": time.strftime("%F %T")},
    }
    print(table(report))
    path = write_json("mcp_bridge", report)
    plot(report)
    print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)
    return 0


def plot(report: dict[str, Any]) -> None:
    cold, search = report["cold_start"], report["rag_search"]
    socket, bridge = search["direct_socket"], search["through_bridge"]
    bar_plots("mcp_bridge", [
        ("cold start to tools/list, median (ms)", ["SDK low-level", "SDK FastMCP", "ragd-mcp"],
         [cold[k]["tools_list"]["median_ms"]
          for k in ("sdk_lowlevel_min", "sdk_fastmcp_min", "ragd_mcp")], "ms"),
        ("rag_search round trip (ms)", ["socket p50", "bridge p50", "socket p95", "bridge p95"],
         [socket["p50_ms"], bridge["p50_ms"], socket["p95_ms"], bridge["p95_ms"]], "ms")])


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def _load() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


if __name__ == "__main__":
    sys.exit(main())
