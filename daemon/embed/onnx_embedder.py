"""The ONNX Runtime embedder: tokenizers + onnxruntime + numpy, no torch.

The graph is the model's transformer alone, exported once by :mod:`ragd.daemon.embed.onnx_export` into
the data folder. Pooling and normalisation run here in numpy, as the model's own
sentence-transformers config says (``modules.json`` and ``1_Pooling/config.json``), so one
graph serves any pooling mode and the code that is verified at export is the code that runs.

Layout of one exported model (``models/<slug>-<source key>/``)::

    manifest.json     what was exported, from what, with which tools, and how well it matched
    tokenizer.json    the model's own fast tokenizer, as sentence-transformers used it
    model.onnx        fp32
    model-int8.onnx   the same graph, matrix multiplies quantised to int8 (its own fingerprint)
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from ragd.daemon.embed.model import make_fingerprint
from ragd.daemon.text.chunking import tokenizer_counter

log = logging.getLogger(__name__)

ONNX = "onnx"
ONNX_INT8 = "onnx-int8"
GRAPH_FILES = {ONNX: "model.onnx", ONNX_INT8: "model-int8.onnx"}
# How the int8 graph was quantised. int8 vectors depend on it (and on the CPU's int8
# instructions), so it is part of that backend's fingerprint: change it, and indexes re-embed.
INT8_MODE = "matmul-qint8-perchannel"
# Bump when the export (graph inputs, opset, files) changes: old exports are then redone.
EXPORT_VERSION = "1"
MANIFEST_FORMAT = 1

Pooling = Literal["mean", "cls", "max", "mean_sqrt_len"]
_POOLING_KEYS: dict[str, Pooling] = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
}
# Modules an exported graph plus numpy pooling reproduces exactly; anything else (Dense,
# LayerNorm, a custom module) keeps the model on sentence-transformers. Matched by class name:
# sentence-transformers 5+ moved them (e.g. ``sentence_transformers.base.modules.normalize``).
_SUPPORTED_MODULES = ("Transformer", "Pooling", "Normalize")
# Files larger than this are identified by size and mtime, not read: hashing 90 MB of
# weights on every start would cost the daemon a tenth of a second for nothing.
_HASHED_FILE_LIMIT = 1 << 20


class Unsupported(Exception):
    """This model cannot run on the ONNX backend; the message says why."""


class VariantCheck(BaseModel):
    """How one exported graph compares with sentence-transformers on the fixed sample."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str
    size: int
    min_cosine: float
    mean_cosine: float
    ok: bool


class GraphManifest(BaseModel):
    """``manifest.json`` beside the graphs. ``error`` set means: export failed, do not retry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = MANIFEST_FORMAT
    export_version: str = EXPORT_VERSION
    model: str
    model_path: str
    source_key: str
    created_at: str
    tools: dict[str, str] = {}
    dimension: int = 0
    max_tokens: int = 0
    pooling: Pooling = "mean"
    inputs: list[str] = []
    int8_mode: str = INT8_MODE
    sample_texts: int = 0
    variants: dict[str, VariantCheck] = {}
    error: str | None = None


class ModelLayout(BaseModel):
    """What the model folder's sentence-transformers config says, read without torch."""

    model_config = ConfigDict(frozen=True)

    dimension: int
    max_tokens: int
    pooling: Pooling


def read_model_layout(model_path: str | Path) -> ModelLayout:
    """Dimension, token limit and pooling from the model folder; Unsupported if not ours."""
    path = Path(model_path)
    if not path.is_dir():
        raise Unsupported(f"{model_path} is not a model folder (the ONNX backend needs a local "
                          "sentence-transformers folder; set embedding.model to its path)")
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        st_cfg = json.loads((path / "sentence_bert_config.json").read_text(encoding="utf-8"))
        pool_dir = next(m["path"] for m in modules if m["type"].endswith("Pooling"))
        pool = json.loads((path / pool_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, StopIteration) as exc:
        raise Unsupported(f"cannot read the sentence-transformers config in {path}: {exc}") from exc
    types = [m.get("type", "") for m in modules]
    if other := [t for t in types if not t.startswith("sentence_transformers.")
                 or t.rsplit(".", 1)[-1] not in _SUPPORTED_MODULES]:
        raise Unsupported(f"the model has modules the ONNX backend does not run: {other}")
    if not types or not types[0].endswith("Transformer"):
        raise Unsupported("the model does not start with a Transformer module")
    modes = [mode for key, mode in _POOLING_KEYS.items() if pool.get(key)]
    extra = [k for k, v in pool.items()
             if k.startswith("pooling_mode_") and v and k not in _POOLING_KEYS]
    if len(modes) != 1 or extra:
        raise Unsupported(f"pooling {sorted(k for k, v in pool.items() if v is True)} is not "
                          "one of mean, cls, max, mean_sqrt_len")
    return ModelLayout(dimension=int(pool["word_embedding_dimension"]),
                       max_tokens=int(st_cfg["max_seq_length"]), pooling=modes[0])


def source_key(model_path: str | Path) -> str:
    """Identity of a model folder: small files by content, large ones by size and mtime."""
    root = Path(model_path)
    digest = hashlib.sha256(f"export={EXPORT_VERSION}".encode())
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = file.relative_to(root).as_posix()
        if rel.startswith(".") or "/." in rel or rel.endswith(".md"):
            continue
        st = file.stat()
        digest.update(f"\0{rel}\0{st.st_size}\0".encode())
        if st.st_size <= _HASHED_FILE_LIMIT:
            digest.update(file.read_bytes())
        else:
            digest.update(str(st.st_mtime_ns).encode())
    return digest.hexdigest()[:16]


def graph_dir(models_dir: Path, model: str, model_path: str | Path) -> Path:
    """Where the graphs of this model folder live (or will, once exported)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(model).name or model).strip("-.") or "model"
    return models_dir / f"{slug}-{source_key(model_path)}"


def read_manifest(directory: Path) -> GraphManifest | None:
    """The manifest of an export, or None when there is none (or it is unreadable)."""
    return read_manifest_as(directory, GraphManifest, "ONNX manifest")


M = TypeVar("M", bound=BaseModel)


def read_manifest_as(directory: Path, model: type[M], what: str) -> M | None:
    """``directory``'s manifest.json as ``model``, or None when there is none (or it is
    unreadable: logged, and the caller builds the folder again)."""
    try:
        return model.model_validate_json(
            (directory / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValidationError, ValueError) as exc:
        log.warning("ignoring the unreadable %s in %s: %s", what, directory, exc)
        return None


def pool(hidden: np.ndarray, mask: np.ndarray, mode: Pooling) -> np.ndarray:
    """sentence-transformers' Pooling, in numpy, followed by L2 normalisation."""
    m = mask[..., None].astype(np.float32)
    if mode == "cls":
        out = hidden[:, 0]
    elif mode == "max":
        out = np.where(m > 0, hidden, np.float32(-1e9)).max(axis=1)
    else:
        total = (hidden * m).sum(axis=1)
        count = np.clip(m.sum(axis=1), 1e-9, None)
        out = total / (np.sqrt(count) if mode == "mean_sqrt_len" else count)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return (out / np.clip(norms, 1e-12, None)).astype(np.float32)


class OnnxEmbedder:
    """An exported graph run by ONNX Runtime; same protocol as SentenceTransformerEmbedder.

    Texts run one at a time by default: measured here, one text per run beats batches of 4
    and 16 (no padding, small buffers: 1.5-3x the throughput and a third of the memory), and
    an int8 vector then does not depend on its batch-mates (dynamic quantisation scales
    activations per run). Indexing runs on a session with ``threads`` threads; queries on a
    second, single-threaded one, created on the first query, so a search never queues behind
    indexing for the same thread pool (the same reason the torch embedder drops to one thread).
    """

    def __init__(self, model: str, directory: Path, variant: str = ONNX_INT8, *,
                 batch_size: int = 1, threads: int = 1,
                 manifest: GraphManifest | None = None) -> None:
        manifest = manifest or read_manifest(directory)
        if manifest is None or manifest.error or variant not in manifest.variants:
            raise Unsupported(f"no exported {variant} graph in {directory}")
        check = manifest.variants[variant]
        if not check.ok:
            raise Unsupported(f"the {variant} graph deviates from sentence-transformers on the "
                              f"verification sample (min cosine {check.min_cosine:.4f}, mean "
                              f"{check.mean_cosine:.4f})")
        self.model_name = model
        self.directory = directory
        self.variant = variant
        self.manifest = manifest
        self.batch_size = batch_size
        self.threads = max(1, threads)
        self.graph_path = directory / check.file
        try:
            size = self.graph_path.stat().st_size
        except OSError:
            size = -1
        if size != check.size:  # a copy cut short, or a file replaced by hand
            raise Unsupported(f"{self.graph_path} is missing or not the exported file "
                              f"(delete {directory} to export it again)")
        self._lock = threading.Lock()
        self._sessions: dict[int, Any] = {}
        self._weights: dict[str, Any] | None = None
        self._tokenizer: Any = None
        self._counter = tokenizer_counter(directory / "tokenizer.json")
        self.calls = 0  # chunk texts embedded (not queries): tests count re-embedding

    # -- protocol -----------------------------------------------------------------------------
    @property
    def backend(self) -> str:
        return f"{ONNX_INT8}/{self.manifest.int8_mode}" if self.variant == ONNX_INT8 else ONNX

    @property
    def dimension(self) -> int:
        return self.manifest.dimension

    @property
    def max_tokens(self) -> int:
        return self.manifest.max_tokens

    @property
    def fingerprint(self) -> str:
        return make_fingerprint(self.model_name, self.dimension, True, self.max_tokens,
                                backend=self.backend)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._counter(texts)

    def warm_up(self) -> None:
        """Create the batch session now (the daemon does this off the request path)."""
        self._session(self.threads)

    def embed_query(self, text: str) -> np.ndarray:
        """One query vector, on the single-threaded session."""
        return self._run([text], self._session(1))[0]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text, in length-sorted batches."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        session = self._session(self.threads)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            out[idx] = self._run([texts[i] for i in idx], session)
        self.calls += len(texts)
        return out

    # -- internals ----------------------------------------------------------------------------
    def _session(self, threads: int) -> Any:
        session = self._sessions.get(threads)
        if session is not None:
            return session
        with self._lock:
            if threads not in self._sessions:
                self._sessions[threads] = self._open(threads)
                if self._tokenizer is None:
                    self._tokenizer = self._load_tokenizer()
        return self._sessions[threads]

    def _shared_weights(self) -> dict[str, Any]:
        """The graph's weights, loaded once and handed to both sessions.

        Without this each session holds its own copy: measured for int8, the query session
        added 64 MB to the daemon's resident memory; shared, 12 MB.
        """
        if self._weights is None:
            import onnx
            import onnxruntime as ort
            from onnx import numpy_helper

            graph = onnx.load(str(self.graph_path))
            self._weights = {init.name: ort.OrtValue.ortvalue_from_numpy(
                numpy_helper.to_array(init)) for init in graph.graph.initializer}
        return self._weights

    def _open(self, threads: int) -> Any:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        for name, value in self._shared_weights().items():
            opts.add_initializer(name, value)
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # Pool threads spin between the operators of a run: 1.3x the chunks/s of sleeping
        # ones when indexing (124 against 93 here). They stop spinning soon after the work
        # does: measured, 0.002 s of CPU over 5 idle seconds either way. A one-thread session
        # (queries) has no pool.
        opts.add_session_config_entry("session.intra_op.allow_spinning",
                                      "1" if threads > 1 else "0")
        # A memory pattern is planned and kept per input shape, and every text length is a
        # new shape: without this the resident memory grows with each length seen.
        opts.enable_mem_pattern = False
        opts.log_severity_level = 3
        log.info("loading ONNX graph %s (%d threads)", self.graph_path, threads)
        return ort.InferenceSession(str(self.graph_path), sess_options=opts,
                                    providers=["CPUExecutionProvider"])

    def _load_tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(self.directory / "tokenizer.json"))
        # The file's own settings truncate at 128 and pad to a fixed width: the model's limit
        # is max_seq_length, and padding to the longest text in a batch is what it was run with.
        tok.enable_truncation(max_length=self.max_tokens)
        pad = tok.padding or {}
        tok.no_padding()
        tok.enable_padding(pad_id=int(pad.get("pad_id", 0)),
                           pad_token=str(pad.get("pad_token", "[PAD]")),
                           pad_type_id=int(pad.get("pad_type_id", 0)))
        return tok

    def _run(self, texts: Sequence[str], session: Any) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=True)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask,
                 "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}
        inputs = self.manifest.inputs
        (hidden,) = session.run(None, {name: feeds[name] for name in inputs})
        return pool(np.asarray(hidden, dtype=np.float32), mask, self.manifest.pooling)

