"""Shared by the benchmarks: corpus lookup, percentiles, a table printer, JSON and plots."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
CORPUS = Path(os.environ.get("RAGD_CORPUS", REPO.parent / "shared" / "corpus"))


def corpus(*parts: str) -> Path:
    """A folder of the shared corpus, or exit with a message that says what is missing."""
    path = CORPUS.joinpath(*parts)
    if not path.exists():
        sys.exit(f"error: benchmark data not found at {path}\n"
                 "hint: put the shared corpus beside the repository (../shared/corpus) or set "
                 "RAGD_CORPUS to its folder")
    return path


def fresh_home(name: str) -> Path:
    """A bench's RAGD_HOME (``~/.cache/ragd-bench/<name>``), emptied but for the exported model
    (the one-time ONNX export is kept), and set in the environment."""
    import shutil

    home = Path.home() / ".cache" / "ragd-bench" / name
    home.mkdir(parents=True, exist_ok=True)
    for child in home.iterdir():
        if child.name != "data":
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    data = home / "data"
    if data.exists():
        for child in data.iterdir():
            if child.name != "models":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    os.environ["RAGD_HOME"] = str(home)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return home


def pct(values: Sequence[float], p: float) -> float:
    """The p-th percentile (nearest rank) of ``values``."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "cpus": os.cpu_count(),
            "platform": platform.platform(), "date": time.strftime("%Y-%m-%d %H:%M")}


def rss_mb(field: str = "VmRSS", pid: int | str = "self") -> float:
    """A process's resident memory (``VmRSS``) or its peak (``VmHWM``) in MB; NaN off Linux."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def index_twice(app: Any) -> tuple[Any, float, Any, float]:
    """Warm the model (its load is not indexing time), then time a first sync and a second
    one with nothing changed: (report, seconds, second report, seconds) of a one-collection
    app."""
    app.embedder.embed(["warm up"])
    t0 = time.perf_counter()
    (report,) = app.sync_all()
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    (again,) = app.sync_all()
    return report, seconds, again, time.perf_counter() - t0


def table(title: str, rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    out = [title, line]
    for n, r in enumerate(cells):
        out.append("  ".join(c.rjust(w) if n and i else c.ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))))
        if n == 0:
            out.append(line)
    return "\n".join(out)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def write_json(name: str, data: dict[str, Any]) -> Path:
    """Write bench/results/NAME.json, keeping the run before as NAME.previous.json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    if path.exists():
        path.replace(RESULTS / f"{name}.previous.json")
    path.write_text(json.dumps({"machine": machine(), **data}, indent=2), encoding="utf-8")
    return path


def bar_plot(name: str, title: str, labels: Sequence[str], values: Sequence[float],
             ylabel: str) -> Path | None:
    """A PNG bar chart beside the JSON (skipped with a note if matplotlib is absent)."""
    return bar_plots(name, [(title, labels, values, ylabel)])


Panel = tuple[str, Sequence[str], Sequence[float], str]  # title, labels, values, ylabel


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or None (with a note on stderr) when absent."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib not installed: no plot (`pip install -e .[bench]`)",
              file=sys.stderr)
        return None
    return plt


def bar_plots(name: str, panels: Sequence[Panel], suptitle: str | None = None) -> Path | None:
    """Bar charts side by side in one PNG beside the JSON, one per (title, labels, values,
    ylabel): for figures in different units. Skipped with a note if matplotlib is absent."""
    plt = pyplot()
    if plt is None:
        return None
    widths = [max(2.0, 0.9 * len(p[1])) for p in panels]
    fig, axes = plt.subplots(1, len(panels), squeeze=False, width_ratios=widths,
                             figsize=(max(7.0, 1.2 * sum(widths)), 3.5))
    for ax, (title, labels, values, ylabel) in zip(axes[0], panels, strict=True):
        ax.bar(list(labels), list(values), color="#4a7bd0")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel)
        ax.tick_params(axis="x", labelsize=8)
        for i, v in enumerate(values):
            ax.text(i, v, bar_label(v), ha="center", va="bottom", fontsize=8)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def bar_label(v: float) -> str:
    """A bar's value: one decimal from 10 up, three significant digits below."""
    return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3g}"
