"""bench/common.py's JSON and plots, and the plots of the bridge and tray benchmarks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bench.common as common

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture()
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "results"
    monkeypatch.setattr(common, "RESULTS", folder)
    return folder


def test_write_json_keeps_the_run_before_as_previous(results: Path) -> None:
    first = common.write_json("demo", {"value": 1})
    assert first == results / "demo.json"
    assert not (results / "demo.previous.json").exists()
    second = common.write_json("demo", {"value": 2})
    assert second == first
    now = json.loads(first.read_text(encoding="utf-8"))
    before = json.loads((results / "demo.previous.json").read_text(encoding="utf-8"))
    assert (now["value"], before["value"]) == (2, 1)
    assert set(now["machine"]) >= {"python", "cpus", "platform", "date"}


def test_bar_plots_draws_panels_side_by_side(results: Path) -> None:
    pytest.importorskip("matplotlib")
    path = common.bar_plots("demo", [("a (ms)", ["x", "y"], [1.0, 200.0], "ms"),
                                     ("b (%)", ["z"], [0.05], "%")])
    assert path == results / "demo.png"
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert common.bar_plot("one", "t", ["x"], [3.0], "s") == results / "one.png"


def test_bar_label_keeps_small_values_readable() -> None:
    assert common.bar_label(0.0667) == "0.0667"
    assert common.bar_label(1234.56) == "1,234.6"


def test_bridge_and_tray_plots(results: Path) -> None:
    pytest.importorskip("matplotlib")
    from bench import mcp_bridge, tray

    cold = {k: {"tools_list": {"median_ms": 1000.0}}
            for k in ("sdk_lowlevel_min", "sdk_fastmcp_min", "ragd_mcp")}
    mcp_bridge.plot({"cold_start": cold, "rag_search": {
        "direct_socket": {"p50_ms": 30.0, "p95_ms": 40.0},
        "through_bridge": {"p50_ms": 33.0, "p95_ms": 45.0}}})
    tray.plot([0.06, 0.07, 0.09], {"cpu_percent": 0.07})
    for name in ("mcp_bridge", "tray"):
        assert (results / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE)
