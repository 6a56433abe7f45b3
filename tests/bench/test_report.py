"""bench/report.py on small synthetic results: the markdown table, the docs markers, the figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import bench.report as report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MARKERS = f"{report.BEGIN}\n{{body}}\n{report.END}"


def machine(date: str) -> dict[str, Any]:
    return {"python": "3.11.7", "cpus": 2, "platform": "Linux-test", "date": date}


def write(folder: Path, name: str, data: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")


def ingest(date: str, e2e: float) -> dict[str, Any]:
    return {"machine": machine(date), "vault": "/corpus/vault/help", "notes": 10, "chunks": 100,
            "index_s": 5.0, "e2e_chunks_per_s": e2e, "raw_embeddings_per_s": 20.0,
            "ratio": e2e / 20.0, "search_socket_ms": {"p50": 30.0, "p95": 50.0},
            "peak_rss_mb": 900.0}


def latency_size(label: str, p50: float) -> dict[str, Any]:
    timing = {"p50": p50, "p95": 2 * p50, "mean": p50, "n": 10}
    return {"label": label, "chunks": 1000, "inprocess": {
        "hybrid": timing, "keyword": timing, "semantic": timing,
        "memory": {"rss_mb": 500.0, "peak_mb": 510.0}},
        "socket": {**timing, "p50": p50 + 10}, "mcp": {**timing, "p50": p50 + 12,
                                                        "handshake_ms": 900.0},
        "daemon_memory": {"rss_mb": 520.0, "peak_mb": 530.0}}


def all_results(folder: Path) -> None:
    """One small file per benchmark, in the shapes the scripts write."""
    date = "2026-01-02 10:00"
    write(folder, "ingest", ingest(date, 18.0))
    write(folder, "freshness", {
        "machine": machine(date), "save_to_searchable_s": {"p50": 0.3, "p95": 0.6, "max": 0.8},
        "burst": {"files": 50, "seconds": 2.0},
        "search_ms": {"idle": {"p50": 40.0}, "indexing": {"p50": 45.0}},
        "idle": {"cpu_percent": 0.2, "rss_mb": 600.0}})
    modes = {m: {"ndcg@10": v, "recall@10": v + 0.1}
             for m, v in (("keyword", 0.61), ("semantic", 0.62), ("hybrid", 0.63))}
    write(folder, "quality", {
        "machine": machine(date),
        "published": {"BM25 (a paper)": {"ndcg@10": 0.555}, "MiniLM (a run)": {"ndcg@10": 0.544}},
        "known_items": {"modes": {"hybrid": {"mrr@10": 0.5, "hits@10": 0.9}}},
        "scifact": {"subset": False, "documents": 50, "index": {"chunks": 80}, "modes": modes}})
    side = {"ingest": {"seconds": 10.0, "chunks_per_s": 5.0}, "peak_rss_mb": 100.0,
            "latency_ms": {"hybrid": {"p50": 20.0}}, "known_items": {"hybrid": {"mrr@10": 0.4}}}
    write(folder, "peer", {
        "machine": machine(date), "endpoint_peak_rss_mb": 50.0,
        "vault": {"ragd": {**side, "ingest": {"seconds": 5.0, "chunks_per_s": 10.0}},
                  "peer": side}})
    write(folder, "query_latency", {
        "machine": machine(date),
        "sizes": [latency_size("10k", 50.0), latency_size("100k", 80.0),
                  latency_size("1m", 400.0)]})
    summary = {"median_ms": 1000.0, "p50_ms": 1000.0}
    write(folder, "mcp_bridge", {
        "machine": machine(date),
        "cold_start": {k: {"tools_list": summary} for k in
                       ("ragd_mcp", "sdk_lowlevel_min", "sdk_fastmcp_min")},
        "rag_search": {"direct_socket": {"p50_ms": 30.0, "p95_ms": 40.0},
                       "through_bridge": {"p50_ms": 33.0, "p95_ms": 45.0}},
        "bridge_overhead_ms": -5.0, "bridge_overhead_cpu_ms": 40.0,
        "search_overhead_p50_ms": 3.0})
    write(folder, "tray", {
        "machine": machine(date), "idle_process": {"cpu_percent": 0.07, "rss_mb": 30.0},
        "save_to_indexing_median_s": 0.072, "save_to_indexing_p90_s": 0.084})


@pytest.fixture()
def paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    out = {"results": tmp_path / "results", "docs": tmp_path / "docs" / "benchmarks.md",
           "figure": tmp_path / "docs" / "img" / "benchmarks.png"}
    monkeypatch.setattr(report, "RESULTS", out["results"])
    monkeypatch.setattr(report, "DOCS", out["docs"])
    monkeypatch.setattr(report, "FIGURE", out["figure"])
    return out


def test_table_has_a_column_for_this_run_and_the_previous_one(
        paths: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    write(paths["results"], "ingest", ingest("2026-01-02 10:00", 18.0))
    write(paths["results"], "ingest.previous", ingest("2026-01-01 09:00", 12.5))
    assert report.main([]) == 0
    out = capsys.readouterr().out
    assert "| measure | this run (2026-01-02 10:00) | previous run (2026-01-01 09:00) |" in out
    assert "| end to end (chunks/s) | 18.0 | 12.5 |" in out
    assert "| pipeline / raw model | 0.90 | 0.62 |" in out
    assert "Machine: Python 3.11.7, 2 CPUs, Linux-test." in out


def test_a_benchmark_without_a_previous_run_has_one_value_column(
        paths: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    all_results(paths["results"])
    assert report.main([]) == 0
    out = capsys.readouterr().out
    assert "previous run" not in out
    assert "| published BM25 nDCG@10 | 0.555 |" in out  # read from the JSON, not built in
    assert "| SciFact hybrid nDCG@10 (Recall@10) | 0.630 (0.730) |" in out
    assert "| chunks/s, ragd / peer (ratio) | 10.0 / 5.0 (2.00) |" in out
    assert "| peak RSS, peer + endpoint (MB), ragd / peer (ratio) | 100 / 150 (0.67) |" in out
    assert "| 1m: hybrid p50 in process / socket / MCP (ms) | 400.0 / 410.0 / 412.0 |" in out
    assert "| save to tray shows indexing, median / p90 (ms) | 72 / 84 |" in out


def test_missing_and_unreadable_files_are_skipped_with_a_note(
        paths: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    write(paths["results"], "tray", {"machine": machine("2026-01-02 10:00"),
                                     "save_to_indexing_median_s": 0.05})
    (paths["results"] / "freshness.json").write_text("{not json", encoding="utf-8")
    assert report.main(["--figure", str(paths["figure"])]) == 0
    captured = capsys.readouterr()
    notes = captured.err.splitlines()
    assert any(n.startswith("note: skipped ingest:") for n in notes)
    assert any(n.startswith("note: skipped freshness.json: cannot read it") for n in notes)
    assert "**tray**" in captured.out and "**ingest**" not in captured.out
    assert "| idle CPU (% of one core) | - |" in captured.out
    assert paths["figure"].read_bytes().startswith(PNG_SIGNATURE)


def test_quick_run_stands_in_when_there_is_no_full_one(
        paths: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    write(paths["results"], "query_latency-quick", {
        "machine": machine("2026-01-02 10:00"), "sizes": [latency_size("10k", 50.0)]})
    assert report.main([]) == 0
    out = capsys.readouterr().out
    assert "**query_latency-quick** (`bench/query_latency.py --quick`" in out
    assert "| 10k: hybrid p50 in process / socket / MCP (ms) | 50.0 / 60.0 / 62.0 |" in out


def test_write_docs_replaces_the_text_between_the_markers_and_keeps_the_rest(
        paths: dict[str, Path]) -> None:
    all_results(paths["results"])
    before, after = "# Benchmarks\n\n## Latest results\n\nSome words.\n\n", "\n\n## Noise\n\nMore.\n"
    paths["docs"].parent.mkdir(parents=True)
    paths["docs"].write_text(before + MARKERS.format(body="old table") + after, encoding="utf-8")
    for _ in range(2):  # a second run replaces the first one's report
        assert report.main(["--write-docs"]) == 0
        text = paths["docs"].read_text(encoding="utf-8")
        assert text.startswith(before + report.BEGIN + "\n")
        assert text.endswith("\n" + report.END + after)
        assert "old table" not in text
        assert text.count(report.BEGIN) == 1 and text.count("**tray**") == 1
        assert "![Summary of the benchmarks](img/benchmarks.png)" in text
    assert paths["figure"].read_bytes().startswith(PNG_SIGNATURE)


def test_write_docs_without_markers_fails_with_a_clear_message(paths: dict[str, Path]) -> None:
    all_results(paths["results"])
    paths["docs"].parent.mkdir(parents=True)
    paths["docs"].write_text("# Benchmarks\n\n## Latest results\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        report.main(["--write-docs"])
    assert "<!-- report:begin -->" in str(exc.value) and "markers" in str(exc.value)
    assert paths["docs"].read_text(encoding="utf-8") == "# Benchmarks\n\n## Latest results\n"
    assert not paths["figure"].exists()


def test_summary_figure_is_a_valid_png(paths: dict[str, Path]) -> None:
    image = pytest.importorskip("matplotlib.image")
    all_results(paths["results"])
    out = report.figure(report.collect(), paths["figure"])
    assert out == paths["figure"]
    assert out.read_bytes().startswith(PNG_SIGNATURE)
    height, width, _ = image.imread(out).shape
    assert width > height > 0


def test_figure_without_any_results_still_draws(paths: dict[str, Path]) -> None:
    pytest.importorskip("matplotlib")
    assert report.figure([], paths["figure"]) == paths["figure"]
    assert paths["figure"].read_bytes().startswith(PNG_SIGNATURE)


def test_tune_rows_read_what_tune_fusion_writes() -> None:
    rows = report.tune_rows({
        "held_out": [{"setting": "rrf (k=60, equal weights)", "SciFact test": 0.685,
                      "known items kepano-obsidian": 0.79},
                     {"setting": [0.4, 0.3, 0.3], "SciFact test": 0.7,
                      "known items kepano-obsidian": 0.851}],
        "grid": [{"weights": [0.7, 0.1, 0.2], "criterion": 0.017},
                 {"weights": [0.4, 0.3, 0.3], "criterion": 0.029}],
        "verdict": "keep the defaults"})
    assert rows[0] == ("rrf (k=60, equal weights): SciFact test / known items kepano-obsidian",
                       "0.685 / 0.790")
    assert rows[1][0].startswith("z-score weights (semantic, note, keyword) = (0.4, 0.3, 0.3)")
    assert rows[1][1] == "0.700 / 0.851"
    assert rows[2][1] == "+0.017 / +0.029" and rows[3] == ("verdict", "keep the defaults")
