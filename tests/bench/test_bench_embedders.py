"""bench/embedders.py: its table, and the chunks it embeds (real text, as the indexer cuts it)."""

from __future__ import annotations

import pytest
from conftest import corpus_path

from bench.embedders import BACKENDS, chunk_texts, report


def fake_run() -> dict[str, object]:
    backends = {}
    for n, b in enumerate(BACKENDS, start=1):
        backends[b] = {"chunks_per_s": 10.0 * n, "chunks_per_s_best": 11.0 * n, "vs_torch": float(n), "vs_onnx_fp32": n / 2,
                       "query_ms_p50": 5.0 / n, "load_s": 6.0 / n, "rss_loaded_mb": 400.0 / n,
                       "rss_peak_mb": 700.0 / n, "cosine_to_torch_mean": 1 - n / 1000,
                       "cosine_to_torch_min": 1 - n / 100, "torch_imported": n == 1}
    return {"chunks": 96, "threads": 2, "rounds": 2, "backends": backends}


def test_the_table_has_a_row_per_backend_with_the_ratios() -> None:
    lines = report(fake_run()).splitlines()
    rows = {line.split("  ")[0]: line for line in lines[4:]}
    assert set(rows) == {"torch fp32", "ONNX fp32", "ONNX int8"}
    assert "3.000" in rows["ONNX int8"] and "0.9970 / 0.9700" in rows["ONNX int8"]
    assert rows["torch fp32"].rstrip().endswith("yes") and rows["ONNX int8"].rstrip().endswith("no")


@pytest.mark.corpus
def test_chunks_are_real_and_fit_the_model() -> None:
    texts = chunk_texts(corpus_path("vault", "obsidian-help-en"), 40)
    assert len(texts) == 40 and len(set(texts)) == 40
    assert all(t.strip() for t in texts)
