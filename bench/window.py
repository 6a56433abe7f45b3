"""ragd's window (issue 38): how fast its page loads and how fast a search comes back in it,
on the shared kepano vault, beside the same searches over the daemon's socket.

A real daemon (`ragd daemon`) indexes a copy of the kepano vault in a temporary home; then:

- **page weight**: each static file, raw and gzipped (what a browser fetches on first load);
- **first page load over HTTP**: a new connection, the opening URL (token to cookie, 303),
  the page, its script, style sheet and icon, one after another (a browser fetches the last
  three in parallel: this is an upper bound);
- **search round trip over HTTP**: ``POST /api/search`` for each question of
  ``bench/queries/kepano-obsidian.tsv``, on a kept-alive connection, beside the **baseline**:
  the same search over the IPC socket, in the same run (the ratio is what the window adds);
- **in a real browser** (Chromium headless through Selenium, when both are installed): the
  page's load (Navigation Timing, ``loadEventEnd``), a search's round trip measured in the
  page (``fetch`` of ``/api/search``), and typing to results shown less the page's 150 ms
  debounce.

Goals (issue 38): first page load <= 300 ms, a search round trip in the page <= 150 ms.
Prints the tables and writes bench/results/window.json.

    HF_HUB_OFFLINE=1 .venv/bin/python -m bench.window [--runs 20]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, corpus, machine, pct, table, write_json
from bench.query_latency import Daemon

QUESTIONS = REPO / "bench" / "queries" / "kepano-obsidian.tsv"
DEBOUNCE_MS = 150  # app.js: typing waits this long before it searches


def questions() -> list[str]:
    rows = [line.split("\t")[0] for line in QUESTIONS.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]
    return [q for q in rows if q]


def weights() -> list[list[Any]]:
    from ragd.daemon.web.server import STATIC

    out = []
    for f in sorted(STATIC.iterdir()):
        raw = f.read_bytes()
        out.append([f.name, len(raw), len(gzip.compress(raw, 9))])
    out.append(["total", sum(r[1] for r in out), sum(r[2] for r in out)])
    return out


def ms_summary(ms: list[float]) -> dict[str, float]:
    return {"p50": round(pct(ms, 50), 2), "p95": round(pct(ms, 95), 2), "n": len(ms)}


def http_page_loads(url: str, base: str, runs: int) -> list[float]:
    import httpx

    out = []
    for _ in range(runs):
        t = time.perf_counter()
        with httpx.Client(timeout=30) as http:  # a new connection, as a fresh tab
            page = http.get(url, follow_redirects=True)
            assert page.status_code == 200, page.status_code
            for asset in ("/static/app.js", "/static/app.css", "/static/icon.svg"):
                assert http.get(base + asset).status_code == 200, asset
        out.append((time.perf_counter() - t) * 1000)
    return out


def http_searches(url: str, base: str, queries: list[str]) -> list[float]:
    import httpx

    out = []
    with httpx.Client(timeout=60) as http:
        http.get(url, follow_redirects=True)
        for n, q in enumerate(queries * 2):
            t = time.perf_counter()
            r = http.post(base + "/api/search", json={"query": q, "top_k": 20},
                          headers={"Origin": base})
            took = (time.perf_counter() - t) * 1000
            assert r.status_code == 200, r.text
            if n >= len(queries):  # the first pass warms the caches
                out.append(took)
    return out


def socket_searches(d: Daemon, queries: list[str]) -> list[float]:
    out = []
    for n, q in enumerate(queries * 2):
        t = time.perf_counter()
        d.client.call("search", {"query": q, "top_k": 20})
        if n >= len(queries):
            out.append((time.perf_counter() - t) * 1000)
    return out


def in_browser(url: str, base: str, queries: list[str], runs: int) -> dict[str, Any] | None:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not (binary and driver_path):
        return None
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.get(url)
        loads = []
        for n in range(runs):
            driver.get(f"{base}/?load={n}#/search")  # a new document each time
            loads.append(driver.execute_script(
                "const n = performance.getEntriesByType('navigation')[0];"
                "return n.loadEventEnd > 0 ? n.loadEventEnd - n.startTime : null;"))
        loads = [x for x in loads if x is not None]
        fetches = []
        for q in queries:
            fetches.append(driver.execute_async_script(
                "const done = arguments[arguments.length - 1]; const t = performance.now();"
                "fetch('/api/search', {method: 'POST', headers: {'Content-Type': "
                "'application/json'}, body: JSON.stringify({query: arguments[0], top_k: 20})})"
                ".then(r => r.json()).then(() => done(performance.now() - t));", q))
        typed = []
        for q in queries[: min(len(queries), 15)]:
            typed.append(driver.execute_async_script(
                "const done = arguments[arguments.length - 1];"
                "const box = document.querySelector('#q'), count = "
                "document.querySelector('#result-count');"
                "box.value = ''; box.dispatchEvent(new Event('input'));"
                "setTimeout(() => { const before = count.textContent + '|' + "
                "document.querySelector('#results').childElementCount;"
                "const t = performance.now();"
                "const seen = new MutationObserver(() => { seen.disconnect(); "
                "done(performance.now() - t); });"
                "seen.observe(document.querySelector('#results'), {childList: true});"
                "box.value = arguments[0]; box.dispatchEvent(new Event('input')); }, 400);",
                q) - DEBOUNCE_MS)
        return {"page_load_ms": ms_summary(loads), "search_fetch_ms": ms_summary(fetches),
                "typed_to_results_ms": ms_summary(typed),
                "browser": driver.capabilities.get("browserVersion")}
    finally:
        driver.quit()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args(argv)
    queries = questions()
    work = Path(tempfile.mkdtemp(prefix="ragd-bench-window-"))
    try:
        vault = work / "vault"
        shutil.copytree(corpus("vault", "kepano-obsidian"), vault)
        home = work / "home"
        config = home / "config" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(f"[obsidian]\nvaults = [{json.dumps(str(vault))}]\n",
                          encoding="utf-8")
        d = Daemon(home, work / "daemon.log")
        try:
            from ragd.daemon.ipc.discovery import read_status
            from ragd.daemon.settings.paths import resolve_paths

            url = (read_status(resolve_paths({"RAGD_HOME": str(home)})) or {})["window"]
            base = url.split("/?")[0]
            loads = http_page_loads(url, base, args.runs)
            over_http = http_searches(url, base, queries)
            over_socket = socket_searches(d, queries)
            browser = in_browser(url, base, queries, args.runs)
        finally:
            d.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    sizes = weights()
    print(table("page weight (bytes)", sizes, ["file", "raw", "gzip"]))
    http_p50, sock_p50 = pct(over_http, 50), pct(over_socket, 50)
    rows: list[list[Any]] = [
        ["first page load, HTTP (4 requests, new connection)", pct(loads, 50), pct(loads, 95),
         "", 300],
        ["search, IPC socket (baseline)", sock_p50, pct(over_socket, 95), 1.0, ""],
        ["search, HTTP /api/search", http_p50, pct(over_http, 95),
         round(http_p50 / sock_p50, 2) if sock_p50 else "", 150],
    ]
    if browser:
        rows += [["page load in Chromium (loadEventEnd)", browser["page_load_ms"]["p50"],
                  browser["page_load_ms"]["p95"], "", 300],
                 ["search fetch in the page", browser["search_fetch_ms"]["p50"],
                  browser["search_fetch_ms"]["p95"],
                  round(browser["search_fetch_ms"]["p50"] / sock_p50, 2) if sock_p50 else "",
                  150],
                 ["typed to results shown, less the debounce",
                  browser["typed_to_results_ms"]["p50"],
                  browser["typed_to_results_ms"]["p95"], "", ""]]
    print()
    print(table(f"ragd's window on kepano-obsidian ({len(queries)} questions, ms)", rows,
                ["measure", "p50", "p95", "x socket", "goal"]))
    if browser is None:
        print("(no Chromium and chromedriver: the browser rows were not measured)")
    out = write_json("window", {
        "machine": machine(), "runs": args.runs, "questions": len(queries),
        "weights": {r[0]: {"raw": r[1], "gzip": r[2]} for r in sizes},
        "http_page_load_ms": ms_summary(loads), "http_search_ms": ms_summary(over_http),
        "socket_search_ms": ms_summary(over_socket), "browser": browser})
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
