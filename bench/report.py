"""Sum up bench/results/*.json: the headline figures of each benchmark as markdown, this run
beside the previous one (NAME.previous.json, kept by bench/common.write_json), and the machine.

    .venv/bin/python bench/report.py                  # print the markdown
    .venv/bin/python bench/report.py --write-docs     # and put it in docs/benchmarks.md, between
                                                      # the report markers, + docs/img/benchmarks.png
    .venv/bin/python bench/report.py --figure F.png   # and draw the summary figure to F.png

A benchmark's full run is shown when there is one, else its --quick run. Missing or unreadable
files are skipped with a one-line note on stderr. Every figure comes from the JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, RESULTS, pyplot  # noqa: E402

DOCS = REPO / "docs" / "benchmarks.md"
FIGURE = REPO / "docs" / "img" / "benchmarks.png"
BEGIN, END = "<!-- report:begin -->", "<!-- report:end -->"

Row = tuple[str, str]  # measure, formatted value


# -- reading the JSON ---------------------------------------------------------------------------
def dig(data: Any, *keys: str | int) -> Any:
    """data[k1][k2]..., or None where a key is missing."""
    for key in keys:
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)


def fmt(value: Any, spec: str = ".1f", scale: float = 1.0) -> str:
    v = num(value)
    return "-" if v is None else format(v * scale, spec)


def joined(values: list[Any], spec: str = ".1f", scale: float = 1.0) -> str:
    return " / ".join(fmt(v, spec, scale) for v in values)


def ratio(a: Any, b: Any) -> float | None:
    a, b = num(a), num(b)
    return None if a is None or not b else a / b


def modes(data: Any) -> list[str]:
    return list(data) if isinstance(data, dict) else []


# -- headline figures, per benchmark ------------------------------------------------------------
def ingest_rows(d: dict[str, Any]) -> list[Row]:
    return [("vault: notes / chunks", f"{Path(str(d.get('vault'))).name}: "
             f"{joined([d.get('notes'), d.get('chunks')], ',.0f')}"),
            ("end to end (chunks/s)", fmt(d.get("e2e_chunks_per_s"))),
            ("raw model (embeddings/s)", fmt(d.get("raw_embeddings_per_s"))),
            ("pipeline / raw model", fmt(d.get("ratio"), ".2f")),
            ("indexing pass (s)", fmt(d.get("index_s"))),
            ("search over socket p50 / p95 (ms)",
             joined([dig(d, "search_socket_ms", "p50"), dig(d, "search_socket_ms", "p95")])),
            ("daemon peak RSS (MB)", fmt(d.get("peak_rss_mb"), ",.0f"))]


def freshness_rows(d: dict[str, Any]) -> list[Row]:
    fresh = d.get("save_to_searchable_s")
    return [("save to searchable p50 / p95 / max (ms)",
             joined([dig(fresh, "p50"), dig(fresh, "p95"), dig(fresh, "max")], ",.0f", 1000)),
            ("burst: files, indexed in (s)", f"{fmt(dig(d, 'burst', 'files'), ',.0f')}, "
             f"{fmt(dig(d, 'burst', 'seconds'))}"),
            ("search p50 idle / while indexing (ms)",
             joined([dig(d, "search_ms", "idle", "p50"), dig(d, "search_ms", "indexing", "p50")])),
            ("idle CPU (% of one core)", fmt(dig(d, "idle", "cpu_percent"), ".2f")),
            ("idle RSS (MB)", fmt(dig(d, "idle", "rss_mb"), ",.0f"))]


def published(d: dict[str, Any]) -> list[tuple[str, float | None]]:
    """(short name, nDCG@10) of the published SciFact figures the JSON carries."""
    pub = d.get("published")
    return [(name.split(" (")[0], num(dig(fig, "ndcg@10")))
            for name, fig in (pub.items() if isinstance(pub, dict) else [])]


def quality_rows(d: dict[str, Any]) -> list[Row]:
    sci = d.get("scifact")
    rows: list[Row] = [("SciFact documents / chunks" + (" (subset)" if dig(sci, "subset") else ""),
                        joined([dig(sci, "documents"), dig(sci, "index", "chunks")], ",.0f"))]
    for mode in modes(dig(sci, "modes")):
        m = dig(sci, "modes", mode)
        rows.append((f"SciFact {mode} nDCG@10 (Recall@10)",
                     f"{fmt(dig(m, 'ndcg@10'), '.3f')} ({fmt(dig(m, 'recall@10'), '.3f')})"))
    rows += [(f"published {name} nDCG@10", fmt(v, ".3f")) for name, v in published(d)]
    known = dig(d, "known_items", "modes")
    for mode in modes(known):
        rows.append((f"known items {mode} MRR@10 (hits@10)",
                     f"{fmt(dig(known, mode, 'mrr@10'), '.3f')} "
                     f"({fmt(dig(known, mode, 'hits@10'), '.2f')})"))
    return rows


@dataclass(frozen=True)
class Pair:
    label: str
    ragd: float | None
    peer: float | None
    higher_is_better: bool
    spec: str

    @property
    def ratio(self) -> float | None:
        return ratio(self.ragd, self.peer)


def peer_pairs(d: dict[str, Any]) -> list[Pair]:
    v = d.get("vault")
    r, p = dig(v, "ragd"), dig(v, "peer")
    peer_rss = num(dig(p, "peak_rss_mb"))
    if peer_rss is not None and num(d.get("endpoint_peak_rss_mb")) is not None:
        peer_rss += d["endpoint_peak_rss_mb"]  # the endpoint holds the peer's model
    pairs = [Pair("ingest from empty (s)", num(dig(r, "ingest", "seconds")),
                  num(dig(p, "ingest", "seconds")), False, ".1f"),
             Pair("chunks/s", num(dig(r, "ingest", "chunks_per_s")),
                  num(dig(p, "ingest", "chunks_per_s")), True, ".1f"),
             Pair("peak RSS, peer + endpoint (MB)", num(dig(r, "peak_rss_mb")), peer_rss, False,
                  ",.0f")]
    pairs += [Pair(f"{m} p50 (ms)", num(dig(r, "latency_ms", m, "p50")),
                   num(dig(p, "latency_ms", m, "p50")), False, ".1f")
              for m in modes(dig(r, "latency_ms"))]
    pairs += [Pair(f"{m} MRR@10", num(dig(r, "known_items", m, "mrr@10")),
                   num(dig(p, "known_items", m, "mrr@10")), True, ".3f")
              for m in modes(dig(r, "known_items"))]
    sci = d.get("scifact")
    pairs += [Pair(f"SciFact {m} nDCG@10", num(dig(sci, "ragd", "modes", m, "ndcg@10")),
                   num(dig(sci, "peer", "modes", m, "ndcg@10")), True, ".3f")
              for m in modes(dig(sci, "ragd", "modes"))]
    return pairs


def peer_rows(d: dict[str, Any]) -> list[Row]:
    return [(f"{pair.label}, ragd / peer (ratio)",
             f"{joined([pair.ragd, pair.peer], pair.spec)} ({fmt(pair.ratio, '.2f')})")
            for pair in peer_pairs(d)]


PATHS = (("inprocess", "hybrid"), ("socket",), ("mcp",))  # where each path's hybrid figures are


def latency_rows(d: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for size in d.get("sizes") or []:
        label = dig(size, "label")
        rows += [(f"{label}: chunks", fmt(dig(size, "chunks"), ",.0f")),
                 (f"{label}: hybrid p50 in process / socket / MCP (ms)",
                  joined([dig(size, *path, "p50") for path in PATHS])),
                 (f"{label}: hybrid p95 in process / socket / MCP (ms)",
                  joined([dig(size, *path, "p95") for path in PATHS])),
                 (f"{label}: in process keyword / semantic p50 (ms)",
                  joined([dig(size, "inprocess", m, "p50") for m in ("keyword", "semantic")])),
                 (f"{label}: RSS in process / daemon (MB)",
                  joined([dig(size, "inprocess", "memory", "peak_mb"),
                          dig(size, "daemon_memory", "rss_mb")], ",.0f")),
                 (f"{label}: MCP handshake (ms)", fmt(dig(size, "mcp", "handshake_ms"), ",.0f"))]
    return rows


BRIDGE_SERVERS = (("ragd_mcp", "ragd-mcp"), ("sdk_lowlevel_min", "SDK low-level"),
                  ("sdk_fastmcp_min", "SDK FastMCP"))


def bridge_rows(d: dict[str, Any]) -> list[Row]:
    cold, search = d.get("cold_start"), d.get("rag_search")
    return [("cold start to tools/list, median: " + " / ".join(n for _, n in BRIDGE_SERVERS)
             + " (ms)", joined([dig(cold, k, "tools_list", "median_ms") for k, _ in BRIDGE_SERVERS],
                               ",.0f")),
            ("ragd-mcp over the low-level floor: wall / CPU (ms)",
             joined([d.get("bridge_overhead_ms"), d.get("bridge_overhead_cpu_ms")], "+.0f")),
            ("rag_search p50: socket / bridge (ms)",
             joined([dig(search, "direct_socket", "p50_ms"),
                     dig(search, "through_bridge", "p50_ms")])),
            ("rag_search p95: socket / bridge (ms)",
             joined([dig(search, "direct_socket", "p95_ms"),
                     dig(search, "through_bridge", "p95_ms")])),
            ("bridge overhead at search p50 (ms)", fmt(d.get("search_overhead_p50_ms"), "+.1f"))]


def tray_rows(d: dict[str, Any]) -> list[Row]:
    return [("idle CPU (% of one core)", fmt(dig(d, "idle_process", "cpu_percent"), ".3f")),
            ("idle RSS (MB)", fmt(dig(d, "idle_process", "rss_mb"))),
            ("save to tray shows indexing, median / p90 (ms)",
             joined([d.get("save_to_indexing_median_s"), d.get("save_to_indexing_p90_s")],
                    ",.0f", 1000))]


def tune_rows(d: dict[str, Any]) -> list[Row]:
    """bench/tune_fusion.py: each held-out setting on every set, the grid's spread, the verdict."""
    rows: list[Row] = []
    for h in d.get("held_out") or []:
        setting = h.get("setting")
        name = (f"z-score weights (semantic, note, keyword) = {tuple(setting)}"
                if isinstance(setting, list) else str(setting))
        sets = [k for k in h if k != "setting"]
        rows.append((f"{name}: " + " / ".join(sets),
                     joined([h.get(k) for k in sets], ".3f")))
    grid = [g.get("criterion") for g in d.get("grid") or []]
    if grid and all(isinstance(v, int | float) for v in grid):
        rows.append(("criterion over the grid (worst margin over the best leg): min / max",
                     joined([min(grid), max(grid)], "+.3f")))
    rows.append(("verdict", str(d.get("verdict", "-"))))
    return rows


@dataclass(frozen=True)
class Bench:
    name: str
    script: str
    rows: Callable[[dict[str, Any]], list[Row]]


BENCHES = [Bench("ingest", "bench/ingest.py", ingest_rows),
           Bench("freshness", "bench/freshness.py", freshness_rows),
           Bench("quality", "bench/quality.py", quality_rows),
           Bench("peer", "bench/peer.py", peer_rows),
           Bench("query_latency", "bench/query_latency.py", latency_rows),
           Bench("mcp_bridge", "bench/mcp_bridge.py", bridge_rows),
           Bench("tray", "bench/tray.py", tray_rows),
           Bench("tune_fusion", "bench/tune_fusion.py", tune_rows)]


@dataclass
class Result:
    bench: Bench
    stem: str  # the file's name without .json: "quality" or "quality-quick"
    data: dict[str, Any]
    previous: dict[str, Any] | None

    @property
    def quick(self) -> bool:
        return self.stem.endswith("-quick")


def note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        note(f"skipped {path.name}: cannot read it ({exc})")
        return None
    if not isinstance(data, dict):
        note(f"skipped {path.name}: not a JSON object")
        return None
    return data


def collect(results: Path | None = None) -> list[Result]:
    """The results of each known benchmark (its full run, else its quick one), with the run
    before when there is one."""
    folder = results or RESULTS
    found: list[Result] = []
    known: set[str] = set()
    for bench in BENCHES:
        stems = [bench.name, f"{bench.name}-quick"]
        known.update(stems)
        for stem in stems:
            path = folder / f"{stem}.json"
            if path.is_file():
                data = load(path)
                if data is not None:
                    previous = folder / f"{stem}.previous.json"
                    found.append(Result(bench, stem, data,
                                        load(previous) if previous.is_file() else None))
                    break
        else:
            note(f"skipped {bench.name}: no {bench.name}.json or {bench.name}-quick.json in "
                 f"{folder}")
    for path in sorted(folder.glob("*.json")):
        stem = path.name.removesuffix(".json").removesuffix(".previous")
        if stem not in known:
            note(f"skipped {path.name}: no headline figures known for it")
    return found


# -- machine and date ---------------------------------------------------------------------------
def machine(data: dict[str, Any]) -> dict[str, Any]:
    """The "machine" key, or what an older file's "setup" says of it."""
    m = data.get("machine")
    if isinstance(m, dict):
        return m
    setup = data.get("setup") if isinstance(data.get("setup"), dict) else {}
    return {"python": setup.get("python"), "cpus": setup.get("cpus"), "platform": None,
            "date": str(setup.get("time") or "")[:16] or None}


def describe(m: dict[str, Any]) -> str:
    return ", ".join([f"Python {m.get('python') or '?'}", f"{m.get('cpus') or '?'} CPUs",
                      m.get("platform") or "platform not recorded"])


def date(data: dict[str, Any]) -> str:
    return str(machine(data).get("date") or "date unknown")


def machines_line(results: list[Result]) -> str:
    groups: dict[str, list[str]] = {}
    for r in results:
        groups.setdefault(describe(machine(r.data)), []).append(r.stem)
        if r.previous is not None:
            groups.setdefault(describe(machine(r.previous)), []).append(f"{r.stem} (previous)")
    if len(groups) == 1:
        return f"Machine: {next(iter(groups))}."
    return "Machines: " + "; ".join(f"{desc} ({', '.join(stems)})"
                                     for desc, stems in groups.items()) + "."


def run_dates(results: list[Result]) -> str:
    dates = sorted(d for r in results if (d := machine(r.data).get("date")))
    if not dates:
        return "dates unknown"
    return dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"


# -- markdown -----------------------------------------------------------------------------------
def cell(text: str) -> str:
    return text.replace("|", "\\|")


def section(r: Result) -> list[str]:
    rows = r.bench.rows(r.data)
    before = dict(r.bench.rows(r.previous)) if r.previous is not None else None
    labels = [label for label, _ in rows]
    if before is not None:
        labels += [label for label in before if label not in labels]
    now = dict(rows)
    script = r.bench.script + (" --quick" if r.quick else "")
    header = ["measure", f"this run ({date(r.data)})"]
    if before is not None:
        header.append(f"previous run ({date(r.previous or {})})")
    out = [f"**{r.stem}** (`{script}`, `bench/results/{r.stem}.json`)", "",
           "| " + " | ".join(cell(h) for h in header) + " |",
           "|" + "---|" * len(header)]
    for label in labels:
        values = [now.get(label, "-")] + ([before.get(label, "-")] if before is not None else [])
        out.append("| " + " | ".join(cell(c) for c in [label, *values]) + " |")
    return out + [""]


def markdown(results: list[Result], image: str | None = None) -> str:
    lines = [f"Generated by `bench/report.py` from `bench/results/*.json` on "
             f"{time.strftime('%Y-%m-%d %H:%M')}."]
    if not results:
        return "\n".join(lines + ["", "No benchmark results found."]) + "\n"
    lines += ["", f"{machines_line(results)} Runs: {run_dates(results)}.", ""]
    if image:
        lines += [f"![Summary of the benchmarks]({image})", ""]
    for r in results:
        lines += section(r)
    return "\n".join(lines)


def replace_between(text: str, body: str) -> str:
    """``text`` with what lies between the report markers replaced by ``body``."""
    begin, end = text.find(BEGIN), text.find(END)
    if begin < 0 or end < begin:
        raise ValueError(f"no {BEGIN} ... {END} markers")
    return text[:begin + len(BEGIN)] + "\n" + body.strip("\n") + "\n" + text[end:]


# -- the summary figure -------------------------------------------------------------------------
RAGD, OTHER, GOOD, BAD = "#4a7bd0", "#9a9a9a", "#3a9a5b", "#d0703a"
PATH_COLORS = ("#4a7bd0", "#8a6bc0", "#d0a63a")  # in process, socket, MCP


def _bars(ax: Any, labels: list[str], values: list[float | None], title: str, ylabel: str,
          colors: list[str] | None = None) -> bool:
    kept = [(label, v, c) for label, v, c in
            zip(labels, values, colors or [RAGD] * len(labels), strict=True) if v is not None]
    if not kept:
        return False
    ax.bar([k[0] for k in kept], [k[1] for k in kept], color=[k[2] for k in kept])
    for i, (_, v, _) in enumerate(kept):
        ax.text(i, v, f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3g}", ha="center", va="bottom",
                fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelsize=8, labelrotation=20)
    ax.margins(y=0.15)
    return True


def _quick(r: Result) -> str:
    return " (--quick)" if r.quick else ""


def draw_ingest(ax: Any, r: Result) -> bool:
    d = r.data
    return _bars(ax, ["pipeline, end to end", "raw model"],
                 [num(d.get("e2e_chunks_per_s")), num(d.get("raw_embeddings_per_s"))],
                 f"ingest {Path(str(d.get('vault'))).name}: pipeline vs raw model",
                 "chunks/s (embeddings/s)")


def draw_freshness(ax: Any, r: Result) -> bool:
    fresh = r.data.get("save_to_searchable_s")
    values = [num(dig(fresh, k)) for k in ("p50", "p95", "max")]
    return _bars(ax, ["p50", "p95", "max"], [None if v is None else v * 1000 for v in values],
                 "freshness: save to searchable", "ms")


def draw_quality(ax: Any, r: Result) -> bool:
    sci = dig(r.data, "scifact", "modes")
    labels = [f"ragd {m}" for m in modes(sci)]
    values = [num(dig(sci, m, "ndcg@10")) for m in modes(sci)]
    pub = published(r.data)
    labels += [f"{name} (pub.)" for name, _ in pub]
    values += [v for _, v in pub]
    ok = _bars(ax, labels, values, f"SciFact nDCG@10{_quick(r)}", "nDCG@10",
               [RAGD] * len(modes(sci)) + [OTHER] * len(pub))
    if ok:
        ax.set_ylim(0, 1)
    return ok


def draw_latency(ax: Any, r: Result) -> bool:
    sizes = [s for s in r.data.get("sizes") or [] if isinstance(s, dict)]
    if not sizes:
        return False
    width = 0.8 / len(PATHS)
    for j, (path, name, color) in enumerate(zip(PATHS, ("in process", "socket", "MCP"),
                                                PATH_COLORS, strict=True)):
        xs = [i + (j - 1) * width for i in range(len(sizes))]
        ys = [num(dig(s, *path, "p50")) or 0.0 for s in sizes]
        ax.bar(xs, ys, width, label=name, color=color)
        for x, y in zip(xs, ys, strict=True):
            ax.text(x, y, f"{y:.0f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(sizes)), [str(s.get("label")) for s in sizes])
    ax.set_title(f"rag_search hybrid p50 by size{_quick(r)}", fontsize=10)
    ax.set_ylabel("ms")
    ax.legend(fontsize=8)
    ax.margins(y=0.15)
    return True


def draw_peer(ax: Any, r: Result) -> bool:
    pairs = [p for p in peer_pairs(r.data) if p.ratio]
    if not pairs:
        return False
    ys = range(len(pairs))
    ax.barh(ys, [p.ratio for p in pairs], color=[
        OTHER if p.ratio == 1 else GOOD if ((p.ratio or 0) > 1) == p.higher_is_better else BAD
        for p in pairs])
    ax.set_yticks(ys, [p.label for p in pairs], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    low = min(0.5, min(p.ratio or 1 for p in pairs) / 1.5)
    high = max(2.0, max(p.ratio or 1 for p in pairs) * 3)
    ax.set_xlim(low, high)
    ticks = [t * 10.0**e for e in range(-3, 4) for t in (1, 2, 5) if low <= t * 10.0**e <= high]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xticks([], minor=True)
    ax.set_xlabel("ragd / peer (log scale)")
    ax.axvline(1.0, color="black", linewidth=0.8)
    for y, p in zip(ys, pairs, strict=True):
        ax.text(p.ratio, y, f" {p.ratio:.2f}", va="center", fontsize=7)
    ax.set_title(f"ragd / peer{_quick(r)} (green: ragd better)", fontsize=10)
    return True


def draw_bridge(ax: Any, r: Result) -> bool:
    cold = r.data.get("cold_start")
    ok = _bars(ax, [n for _, n in BRIDGE_SERVERS],
               [num(dig(cold, k, "tools_list", "median_ms")) for k, _ in BRIDGE_SERVERS],
               "MCP cold start to tools/list, median", "ms",
               [RAGD] + [OTHER] * (len(BRIDGE_SERVERS) - 1))
    over = num(r.data.get("search_overhead_p50_ms"))
    if ok and over is not None:
        ax.set_title(f"MCP cold start to tools/list, median\n(bridge adds {over:+.1f} ms to "
                     "search p50)", fontsize=10)
    return ok


PANELS: list[tuple[str, Callable[[Any, Result], bool]]] = [
    ("ingest", draw_ingest), ("freshness", draw_freshness), ("quality", draw_quality),
    ("query_latency", draw_latency), ("peer", draw_peer), ("mcp_bridge", draw_bridge)]


def figure(results: list[Result], path: Path) -> Path | None:
    """The 2x3 summary figure; None (with a note) when matplotlib is absent."""
    plt = pyplot()
    if plt is None:
        return None
    by_name = {r.bench.name: r for r in results}
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    for ax, (name, draw) in zip(axes.flat, PANELS, strict=True):
        r = by_name.get(name)
        if r is None or not draw(ax, r):
            ax.axis("off")
            ax.text(0.5, 0.5, f"{name}: no results", ha="center", va="center", color=OTHER)
    where = describe(machine(results[-1].data)) if results else "no results"
    fig.suptitle(f"ragd benchmarks - {where} - runs {run_dates(results)}", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# -- command line -------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-docs", action="store_true",
                    help=f"write the markdown into {DOCS.name} between {BEGIN} and {END}, and "
                    "draw the summary figure")
    ap.add_argument("--figure", type=Path, help="draw the summary figure to this PNG (default "
                    "with --write-docs: docs/img/benchmarks.png)")
    args = ap.parse_args(argv)
    docs_text = None
    if args.write_docs:
        docs_text = DOCS.read_text(encoding="utf-8") if DOCS.is_file() else ""
        if BEGIN not in docs_text or END not in docs_text.split(BEGIN, 1)[1]:
            sys.exit(f"error: {DOCS} has no {BEGIN} ... {END} markers\n"
                     f"hint: add the two lines where the report should go (e.g. at the end of "
                     f"'## Latest results'), then run again")
    results = collect()
    figure_path = args.figure or (FIGURE if args.write_docs else None)
    drawn = figure(results, figure_path) if figure_path is not None else None
    image = (Path(os.path.relpath(drawn, DOCS.parent)).as_posix()
             if args.write_docs and drawn is not None else None)
    text = markdown(results, image)
    print(text)
    if drawn is not None:
        print(f"wrote {drawn}", file=sys.stderr)
    if docs_text is not None:
        DOCS.write_text(replace_between(docs_text, text), encoding="utf-8")
        print(f"wrote {DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
