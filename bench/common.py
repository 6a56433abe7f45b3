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
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **data}, indent=2), encoding="utf-8")
    return path


def bar_plot(name: str, title: str, labels: Sequence[str], values: Sequence[float],
             ylabel: str) -> Path | None:
    """A PNG bar chart beside the JSON (skipped with a note if matplotlib is absent)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot; `pip install -e .[bench]`)")
        return None
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(labels, values, color="#4a7bd0")
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    for i, v in enumerate(values):
        ax.text(i, v, f"{v:,.1f}", ha="center", va="bottom", fontsize=8)
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
