"""The ONNX Runtime embedder against sentence-transformers, its torch-free search path, and the
fingerprint switch between backends. The graph is exported once per session."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import corpus_path
from vault_fixtures import write_vault

from ragd.daemon.embed import model_pack
from ragd.daemon.embed.embedding import SentenceTransformerEmbedder, make_embedder
from ragd.daemon.embed.model import make_fingerprint, models_dir, resolve_model_path
from ragd.daemon.embed.onnx_embedder import (
    ONNX,
    ONNX_INT8,
    GraphManifest,
    OnnxEmbedder,
    Unsupported,
    VariantCheck,
    graph_dir,
    pool,
    read_model_layout,
)
from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search.engine import SearchRequest
from ragd.daemon.settings.config import EmbeddingConfig, load_config
from ragd.daemon.settings.paths import resolve_paths

MODEL = "all-MiniLM-L6-v2"
HEAVY = ("torch", "sentence_transformers", "transformers")


@pytest.fixture(scope="session")
def exported(real_embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default model exported once per session (reusing the loaded reference model)."""
    from ragd.daemon.embed.onnx_export import ensure_graph

    root = tmp_path_factory.mktemp("onnx-models")
    real_embedder.warm_up()
    return ensure_graph(MODEL, resolve_model_path(MODEL), root, threads=2,
                        st_model=real_embedder._model)


def link_graph(exported: Path, data_dir: Path) -> None:
    """Make a session's export visible in a data folder, as if exported there."""
    target = models_dir(data_dir) / exported.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        target.symlink_to(exported, target_is_directory=True)


def corpus_chunks(n: int) -> list[str]:
    """``n`` embedded texts of real notes, chunked as the indexer chunks them."""
    from bench.embedders import chunk_texts

    return chunk_texts(corpus_path("vault", "obsidian-help-en"), n)


# -- pure parts -------------------------------------------------------------------------------
def test_pooling_modes_match_their_definitions() -> None:
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(2, 4, 3)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0]])

    def unit(v: np.ndarray) -> np.ndarray:
        return v / np.linalg.norm(v)

    mean = pool(hidden, mask, "mean")
    assert np.allclose(mean[0], unit(hidden[0, :3].mean(axis=0)), atol=1e-6)
    assert np.allclose(mean[1], unit(hidden[1, 0]), atol=1e-6)
    assert np.allclose(pool(hidden, mask, "cls")[0], unit(hidden[0, 0]), atol=1e-6)
    assert np.allclose(pool(hidden, mask, "max")[0], unit(hidden[0, :3].max(axis=0)), atol=1e-6)
    assert np.allclose(pool(hidden, mask, "mean_sqrt_len")[0],
                       unit(hidden[0, :3].sum(axis=0) / np.sqrt(3)), atol=1e-6)


def test_backends_are_distinct_fingerprints_and_the_reference_keeps_its_own() -> None:
    st = make_fingerprint(MODEL, 384, True, 256)
    # The fingerprint indexes were built with before backends existed must not move.
    assert st == make_fingerprint(MODEL, 384, True, 256, backend="sentence-transformers")
    assert st.startswith(f"{MODEL}:384:")
    fp32 = make_fingerprint(MODEL, 384, True, 256, backend=ONNX)
    int8 = make_fingerprint(MODEL, 384, True, 256, backend=f"{ONNX_INT8}/matmul-qint8-perchannel")
    other_mode = make_fingerprint(MODEL, 384, True, 256, backend=f"{ONNX_INT8}/other")
    assert len({st, fp32, int8, other_mode}) == 4
    assert fp32.startswith(f"{MODEL}+onnx:") and int8.startswith(f"{MODEL}+onnx-int8:")


def test_layout_is_read_from_the_model_config() -> None:
    layout = read_model_layout(resolve_model_path(MODEL))
    assert (layout.dimension, layout.max_tokens, layout.pooling) == (384, 256, "mean")


def test_unsupported_models_fall_back_to_sentence_transformers_with_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = tmp_path / "with-dense"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    ]), encoding="utf-8")
    (model / "sentence_bert_config.json").write_text('{"max_seq_length": 128}', encoding="utf-8")
    (model / "1_Pooling" / "config.json").write_text(
        '{"word_embedding_dimension": 8, "pooling_mode_mean_tokens": true}', encoding="utf-8")
    for name, why in ((str(model), "Dense"), ("some-hub/model-name", "not a model folder")):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            emb = make_embedder(EmbeddingConfig(model=name, backend="onnx-int8"), tmp_path)
        assert isinstance(emb, SentenceTransformerEmbedder)
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and "using sentence-transformers" in lines[0], lines
        assert why in lines[0]


def test_a_failed_export_is_remembered_not_retried(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # A tree without the shipped graph (decision 0034): the default model exports too.
    monkeypatch.setattr(model_pack, "PACK_ROOT", tmp_path / "no-pack")
    model_path = resolve_model_path(MODEL)
    directory = graph_dir(models_dir(tmp_path), MODEL, model_path)
    directory.mkdir(parents=True)
    failed = GraphManifest(model=MODEL, model_path=model_path, source_key="x",
                           created_at="2026-01-01T00:00:00+00:00", error="RuntimeError: boom")
    (directory / "manifest.json").write_text(failed.model_dump_json(), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        emb = make_embedder(EmbeddingConfig(backend="onnx"), tmp_path)
    assert isinstance(emb, SentenceTransformerEmbedder)
    assert "boom" in caplog.text and "delete" in caplog.text


@pytest.mark.slow
def test_onnx_int8_is_the_default_backend(exported: Path, tmp_path: Path) -> None:
    assert EmbeddingConfig().backend == "onnx-int8"
    link_graph(exported, tmp_path)
    emb = make_embedder(EmbeddingConfig(), tmp_path)
    assert isinstance(emb, OnnxEmbedder) and emb.variant == ONNX_INT8


# -- against the reference model --------------------------------------------------------------
@pytest.mark.slow
def test_manifest_records_the_verification(exported: Path) -> None:
    manifest = GraphManifest.model_validate_json(
        (exported / "manifest.json").read_text(encoding="utf-8"))
    assert manifest.error is None and manifest.inputs[:2] == ["input_ids", "attention_mask"]
    assert manifest.variants[ONNX].min_cosine >= 0.999 and manifest.variants[ONNX].ok
    assert manifest.variants[ONNX_INT8].mean_cosine >= 0.99 and manifest.variants[ONNX_INT8].ok
    assert {"torch", "onnxruntime", "opset"} <= set(manifest.tools)
    for check in manifest.variants.values():
        assert (exported / check.file).stat().st_size == check.size


@pytest.mark.slow
@pytest.mark.corpus
def test_onnx_matches_sentence_transformers_on_real_text(exported: Path,
                                                         real_embedder: Any) -> None:
    texts = corpus_chunks(64)
    reference = real_embedder.embed(texts)
    counts = real_embedder.count_tokens(texts)
    assert max(counts) > 200  # long chunks, near the 256-token limit, are in the sample
    for variant, lowest, mean in ((ONNX, 0.999, 0.9999), (ONNX_INT8, 0.97, 0.99)):
        emb = OnnxEmbedder(MODEL, exported, variant, threads=2)
        vectors = emb.embed(texts)
        assert vectors.dtype == np.float32 and vectors.shape == reference.shape
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        cos = np.sum(vectors * reference, axis=1)
        assert cos.min() >= lowest and cos.mean() >= mean, (variant, cos.min(), cos.mean())
        # A query goes through the single-threaded session: the same vector as in indexing
        # (also for int8, whose activation scales are per run: one text per run).
        for i in (0, len(texts) // 2):
            query = emb.embed_query(texts[i])
            assert float(query @ vectors[i]) > 0.9999
            assert float(query @ reference[i]) >= lowest
        assert emb.count_tokens(texts) == counts
    # Batched, int8 vectors depend a little on their batch-mates; still close to torch.
    batched = OnnxEmbedder(MODEL, exported, ONNX_INT8, threads=2, batch_size=16)
    cos = np.sum(batched.embed(texts[:32]) * reference[:32], axis=1)
    assert cos.min() >= 0.97 and cos.mean() >= 0.99
    # Past the limit, the text is truncated exactly as sentence-transformers truncates it.
    long_text = " ".join(texts) * 2
    emb = OnnxEmbedder(MODEL, exported, ONNX, threads=2)
    assert float(emb.embed([long_text])[0] @ real_embedder.embed([long_text])[0]) > 0.999


# -- in the app ---------------------------------------------------------------------------------
def _search(app: App, query: str) -> list[str]:
    req = SearchRequest(query=query, mode="semantic", top_k=3, filters=Filters())
    return [r["title"] for r in app.search_engine.search(req)["results"]]


@pytest.mark.slow
def test_switching_backend_reembeds_visibly(tmp_path: Path, exported: Path, real_embedder: Any,
                                            caplog: pytest.LogCaptureFixture) -> None:
    vault = write_vault(tmp_path / "vault")
    paths = resolve_paths()
    link_graph(exported, paths.data_dir)

    def config(backend: str) -> Any:
        return load_config(paths, {"obsidian.vaults": [str(vault)], "embedding.backend": backend})

    with App(paths, config("sentence-transformers"), embedder=real_embedder) as a:
        chunks = a.sync_all()[0].embedded
        reference_fp = a.embedder.fingerprint
    assert chunks > 0
    seen = {reference_fp}
    for backend in ("onnx-int8", "onnx"):
        caplog.clear()
        with caplog.at_level(logging.WARNING), App(paths, config(backend)) as b:
            assert isinstance(b.embedder, OnnxEmbedder) and b.reembed_needed
            assert b.embedder.fingerprint not in seen
            seen.add(b.embedder.fingerprint)
            report = b.sync_all()[0]
            assert report.embedded == chunks
            assert b.catalog.get_meta("fingerprint") == b.embedder.fingerprint
            assert b.faiss.fingerprint == b.embedder.fingerprint and b.consistency()["ok"]
            assert _search(b, "what to bring on a trip")[0] == "Packing list"
        assert any("fingerprint changed" in r.getMessage() for r in caplog.records)
        with App(paths, config(backend)) as c:  # and only once
            assert not c.reembed_needed and c.sync_all()[0].embedded == 0


PROBE = """
import json, sys
from ragd.daemon.runtime.app import App
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths
from ragd.daemon.search.engine import SearchRequest
from ragd.daemon.models import Filters

paths = resolve_paths()
with App(paths, load_config(paths)) as app:
    report = app.sync_all()[0]
    req = SearchRequest(query="what to bring on a trip", mode="hybrid", top_k=3,
                        filters=Filters())
    top = app.search_engine.search(req)["results"][0]["title"]
    print(json.dumps({"embedder": type(app.embedder).__name__, "embedded": report.embedded,
                      "top": top, "modules": sorted(sys.modules)}))
"""


@pytest.mark.slow
def test_onnx_index_and_search_import_no_torch(tmp_path: Path, exported: Path,
                                               ragd_home: Path) -> None:
    vault = write_vault(tmp_path / "vault")
    link_graph(exported, resolve_paths().data_dir)
    env = {**os.environ, "RAGD_HOME": str(ragd_home), "RAGD_OBSIDIAN_VAULTS": str(vault),
           "RAGD_EMBEDDING_BACKEND": "onnx-int8", "PYTHONWARNINGS": ""}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=300, env=env, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["embedder"] == "OnnxEmbedder" and result["embedded"] > 0
    assert result["top"] == "Packing list"
    heavy = sorted(m for m in result["modules"] if m.split(".")[0] in HEAVY)
    assert heavy == []


FIRST_USE = """
import json, sys
from pathlib import Path
from ragd.daemon.settings.config import EmbeddingConfig
from ragd.daemon.embed import model_pack
from ragd.daemon.embed.embedding import make_embedder

if sys.argv[2] != "installed":  # a tree without the shipped graph: the export path
    model_pack.PACK_ROOT = Path(sys.argv[2])
emb = make_embedder(EmbeddingConfig(backend="onnx-int8"), Path(sys.argv[1]))
vec = emb.embed(["first use"])
print(json.dumps({"embedder": type(emb).__name__, "norm": float((vec ** 2).sum()),
                  "modules": sorted(sys.modules)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("pack", ["absent", "installed"])
def test_first_use_builds_int8_in_a_child_and_imports_no_torch(tmp_path: Path, pack: str) -> None:
    """Without the shipped graph the model is exported from sentence-transformers; with it
    (``make setup`` builds it, as CI's checkout has) the int8 graph is derived from the pack.
    Either way in a child process, and the parent never imports torch."""
    shipped = model_pack.packaged(MODEL)
    if pack == "installed" and shipped is None:
        pytest.skip("this tree has no shipped graph: `make model` builds it")
    root = "installed" if pack == "installed" else str(tmp_path / "no-pack")
    out = subprocess.run([sys.executable, "-c", FIRST_USE, str(tmp_path), root],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONWARNINGS": ""},
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["embedder"] == "OnnxEmbedder" and abs(result["norm"] - 1) < 1e-4
    assert sorted(m for m in result["modules"] if m.split(".")[0] in HEAVY) == []
    built = (model_pack.derived_dir(shipped, models_dir(tmp_path)) if shipped and pack == "installed"
             else graph_dir(models_dir(tmp_path), MODEL, resolve_model_path(MODEL)))
    assert sorted(p.name for p in models_dir(tmp_path).iterdir()) == [built.name]
    manifest = GraphManifest.model_validate_json((built / "manifest.json").read_text("utf-8"))
    assert manifest.error is None and manifest.variants[ONNX_INT8].ok


@pytest.fixture
def no_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    yield


def test_without_onnxruntime_the_reference_runs(no_onnxruntime: None, tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        emb = make_embedder(EmbeddingConfig(backend="onnx-int8"), tmp_path)
    assert isinstance(emb, SentenceTransformerEmbedder)
    assert "onnxruntime is not installed" in caplog.text


def test_unknown_backend_is_a_config_error() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        EmbeddingConfig(backend="tensorrt")  # type: ignore[arg-type]


def test_onnx_embedder_refuses_a_missing_graph(tmp_path: Path) -> None:
    with pytest.raises(Unsupported):
        OnnxEmbedder(MODEL, tmp_path, ONNX_INT8)


def test_onnx_embedder_refuses_a_graph_cut_short(tmp_path: Path) -> None:
    check = VariantCheck(file="model-int8.onnx", size=1000, min_cosine=0.99, mean_cosine=0.995,
                         ok=True)
    manifest = GraphManifest(model=MODEL, model_path="x", source_key="x",
                             created_at="2026-01-01T00:00:00+00:00", variants={ONNX_INT8: check})
    (tmp_path / "manifest.json").write_text(manifest.model_dump_json(), encoding="utf-8")
    (tmp_path / "model-int8.onnx").write_bytes(b"\0" * 10)
    with pytest.raises(Unsupported, match="not the exported file"):
        OnnxEmbedder(MODEL, tmp_path, ONNX_INT8)
