"""`ragd doctor`'s model check loads the configured backend, as the daemon does."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from daemon.cli.doctor import _model_checks
from daemon.embed import embedding
from daemon.settings.config import load_config
from daemon.settings.paths import resolve_paths


class FakeEmbedder:
    """A deterministic stand-in for a loaded model (no weights): 4 dimensions."""

    max_tokens = 128
    threads = 2

    def __init__(self, backend: str | None) -> None:
        if backend is not None:
            self.backend = backend

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32)


def _config(monkeypatch: pytest.MonkeyPatch, backend: str) -> Any:
    monkeypatch.setenv("RAGD_EMBEDDING_BACKEND", backend)
    return load_config(resolve_paths())


def test_names_the_backend_it_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def make(config: Any, data_dir: Path) -> FakeEmbedder:
        seen.append((config.backend, data_dir))
        return FakeEmbedder("onnx-int8/matmul-qint8-perchannel")

    monkeypatch.setattr(embedding, "make_embedder", make)
    config = _config(monkeypatch, "onnx-int8")
    [check] = _model_checks(config, resolve_paths())
    assert check["status"] == "ok", check
    assert check["detail"] == ("all-MiniLM-L6-v2 on onnx-int8/matmul-qint8-perchannel: "
                               "4 dimensions, 128 tokens, 2 threads")
    assert seen == [("onnx-int8", resolve_paths().data_dir)]


def test_a_fallback_is_a_warning_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(config: Any, data_dir: Path) -> FakeEmbedder:
        logging.getLogger("daemon.embed.embedding").warning(
            "embedding backend %s is not available: %s", config.backend, "no onnxruntime")
        return FakeEmbedder(None)  # the sentence-transformers embedder names no backend

    monkeypatch.setattr(embedding, "make_embedder", make)
    [check] = _model_checks(_config(monkeypatch, "onnx-int8"), resolve_paths())
    assert check["status"] == "warn"
    assert "on sentence-transformers" in check["detail"]
    assert "(configured: onnx-int8)" in check["detail"]
    assert check["hint"] == "embedding backend onnx-int8 is not available: no onnxruntime"


def test_a_model_that_cannot_load_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(config: Any, data_dir: Path) -> FakeEmbedder:
        raise OSError("no such model folder")

    monkeypatch.setattr(embedding, "make_embedder", make)
    [check] = _model_checks(_config(monkeypatch, "sentence-transformers"), resolve_paths())
    assert check["status"] == "fail"
    assert check["detail"] == "all-MiniLM-L6-v2 on sentence-transformers: no such model folder"
