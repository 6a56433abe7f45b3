"""Export a sentence-transformers model to ONNX once: trace, verify, quantise, publish.

This is the only code that needs torch and sentence-transformers for the ONNX backend, and
it runs once per model folder (at the first start with an ONNX backend, or ahead of time with
``python -m ragd.daemon.embed.onnx_export``). The result is checked against sentence-transformers on a
fixed sample before it is used; the cosines are kept in the manifest beside the graphs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ragd.daemon.embed.onnx_embedder import (
    GRAPH_FILES,
    INT8_MODE,
    ONNX,
    ONNX_INT8,
    GraphManifest,
    ModelLayout,
    OnnxEmbedder,
    Unsupported,
    VariantCheck,
    graph_dir,
    read_manifest,
    read_model_layout,
    source_key,
)

log = logging.getLogger(__name__)

OPSET = 17
# Per-text cosine to sentence-transformers below which a graph is not used. fp32 must be the
# same model (float rounding only); int8 is allowed quantisation noise, and its mean is
# checked too, since one short text can sit lower than the rest.
MIN_COSINE = {ONNX: 0.999, ONNX_INT8: 0.97}
MIN_MEAN_COSINE = {ONNX: 0.9995, ONNX_INT8: 0.99}

# The fixed verification sample: short and long, prose and code, several languages, one text
# past the 256-token limit (truncation must match), and an empty string.
SAMPLE = [
    "",
    "search",
    "How do I link to a heading in another note?",
    "Wikilinks use double square brackets: [[Note name#Heading|shown text]].",
    "# Daily notes\n\nThe daily notes plugin opens a note named after today's date.",
    "Tags can be nested, like #project/alpha, and searched with tag:#project.",
    "Embed a PDF with ![[file.pdf#page=3]] to show one page of it in the note.",
    "def embed(texts):\n    return model.encode(texts, normalize_embeddings=True)",
    "SELECT title FROM notes WHERE modified > date('now', '-7 days') ORDER BY title;",
    "Le chat dort sur le canapé pendant que la pluie tombe sur Paris.",
    "Die Suche verbindet Stichwörter und Bedeutung, damit nichts verloren geht.",
    "東京の天気は明日晴れるでしょう。",
    "Meeting notes 2024-03-18: budget 12,500 EUR, deadline Q3, owner: Sam.",
    "The mitochondria is the powerhouse of the cell; ATP synthase turns a proton gradient "
    "into chemical energy.",
    "Quantised matrix multiplies trade a little accuracy for roughly twice the throughput "
    "on CPUs with fast int8 instructions.",
    " ".join(["Long notes are split into chunks that fit the model's token limit, and the "
              "title and heading path prefix every chunk so that a search finds it in context."]
             * 12),
    "> [!note] Callout\n> Callouts are block quotes with a type, a title and a body.",
    "| key | value |\n|---|---|\n| rrf_k | 60 |\n| top_k | 10 |",
    "Reciprocal Rank Fusion adds 1/(k + rank) over every list a document appears in.",
    "A fox, quick and brown, jumps over the lazy dog again and again.",
    "Graph view shows how notes link to each other; orphans float alone at the edge.",
    "Sync keeps vaults identical across devices, end-to-end encrypted.",
    "Front matter holds aliases: [Getting started, Start here] and tags: [help].",
    "Keyboard shortcut: Ctrl+P opens the command palette on Windows and Linux.",
]


def exporter_missing() -> list[str]:
    """The export-time packages that are not installed."""
    return [name for name in ("torch", "sentence_transformers", "onnx")
            if importlib.util.find_spec(name) is None]


def ensure_graph(model: str, model_path: str, models_dir: Path, *, threads: int = 2,
                 st_model: Any = None, in_subprocess: bool = False) -> Path:
    """The folder of a verified export of this model, exporting it now if there is none.

    With ``in_subprocess`` the export runs in a child process (``python -m
    ragd.daemon.embed.onnx_export``), so the calling process (the daemon) never imports torch, even the
    first time. Raises :class:`Unsupported` with the reason when the model cannot run on ONNX
    (a failed export is remembered in its manifest, so it is not retried on every start).
    """
    layout = read_model_layout(model_path)
    directory = graph_dir(models_dir, model, model_path)
    if done_before(directory, "the ONNX export"):
        return directory
    if missing := exporter_missing():
        raise Unsupported(f"there is no exported graph for {model} in {models_dir}, and "
                          f"exporting one needs {', '.join(missing)}, which is not installed "
                          "(README: Install)")
    if in_subprocess:
        return _export_in_child(model, model_path, models_dir, threads)
    models_dir.mkdir(parents=True, exist_ok=True)
    tmp = models_dir / f".tmp-{directory.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    started = time.monotonic()
    log.info("exporting %s to ONNX once (about half a minute): %s", model, directory)
    try:
        manifest = export(model, model_path, layout, tmp, threads=threads, st_model=st_model)
    except Exception as exc:  # any exporter failure: remember it, run on sentence-transformers
        log.exception("ONNX export of %s failed", model)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        manifest = GraphManifest(model=model, model_path=str(model_path),
                                 source_key=source_key(model_path), created_at=_now(),
                                 error=f"{type(exc).__name__}: {exc}")
        _write_manifest(tmp, manifest)
    _publish(tmp, directory)
    if not manifest.error:
        log.info("ONNX export of %s done in %.1f s (%s)", model, time.monotonic() - started,
                 ", ".join(f"{k}: min cosine {v.min_cosine:.4f}"
                           for k, v in manifest.variants.items()))
    return ensure_graph(model, model_path, models_dir)


def done_before(directory: Path, what: str) -> bool:
    """Whether ``directory`` holds a finished ``what`` (export, derivation); one that failed
    before raises :class:`Unsupported` (remembered, so it is not retried at every start)."""
    manifest = read_manifest(directory)
    if manifest is not None and manifest.error:
        raise Unsupported(f"{what} failed before: {manifest.error} "
                          f"(delete {directory} to try again)")
    return manifest is not None


def run_in_child(args: list[str], directory: Path, what: str) -> None:
    """Run ``python -m ARGS``, which must leave a manifest in ``directory``; the child's last
    lines of stderr are the error when it does not."""
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
    done = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          encoding="utf-8", errors="replace", env=env, check=False)
    if read_manifest(directory) is None:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:]) or f"exit {done.returncode}"
        raise Unsupported(f"{what} failed: {tail}")


def _export_in_child(model: str, model_path: str, models_dir: Path, threads: int) -> Path:
    started = time.monotonic()
    log.info("exporting %s to ONNX once, in a child process (about half a minute): %s",
             model, models_dir)
    run_in_child(["ragd.daemon.embed.onnx_export", "--model", model, "--model-path",
                  str(model_path), "--models-dir", str(models_dir), "--threads", str(threads)],
                 graph_dir(models_dir, model, model_path), "the ONNX export process")
    log.info("ONNX export of %s finished in %.1f s", model, time.monotonic() - started)
    return ensure_graph(model, model_path, models_dir)


def export(model: str, model_path: str, layout: ModelLayout, out: Path, *, threads: int = 2,
           st_model: Any = None) -> GraphManifest:
    """Trace the transformer to ``out/model.onnx``, quantise it, and verify both."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    if st_model is None:
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        st_model = SentenceTransformer(str(model_path), device="cpu")
    transformer = st_model[0]
    tokenizer = transformer.tokenizer
    if int(transformer.max_seq_length) != layout.max_tokens:
        raise Unsupported(f"max_seq_length {transformer.max_seq_length} != config "
                          f"{layout.max_tokens}")
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise Unsupported("the model has no fast (tokenizers) tokenizer")
    inputs = [n for n in ("input_ids", "attention_mask", "token_type_ids")
              if n in tokenizer.model_input_names]
    out.mkdir(parents=True)
    backend.save(str(out / "tokenizer.json"))
    _trace(transformer.auto_model, tokenizer, inputs, out / GRAPH_FILES[ONNX])
    _quantise(out / GRAPH_FILES[ONNX], out / GRAPH_FILES[ONNX_INT8])

    draft = GraphManifest(
        model=model, model_path=str(model_path), source_key=source_key(model_path),
        created_at=_now(), tools=_tool_versions(), dimension=layout.dimension,
        max_tokens=layout.max_tokens, pooling=layout.pooling, inputs=inputs,
        int8_mode=INT8_MODE, sample_texts=len(SAMPLE),
        variants={k: VariantCheck(file=f, size=(out / f).stat().st_size, min_cosine=0,
                                  mean_cosine=0, ok=True) for k, f in GRAPH_FILES.items()})
    reference = st_model.encode(SAMPLE, batch_size=16, normalize_embeddings=True,
                                convert_to_numpy=True, show_progress_bar=False)
    checks = {variant: verify(variant, OnnxEmbedder(model, out, variant, manifest=draft,
                                                    threads=threads), reference, check)
              for variant, check in draft.variants.items()}
    if not checks[ONNX].ok:
        raise Unsupported(f"the exported graph does not reproduce the model "
                          f"(min cosine {checks[ONNX].min_cosine:.4f})")
    manifest = draft.model_copy(update={"variants": checks})
    _write_manifest(out, manifest)
    return manifest


def verify(variant: str, embedder: OnnxEmbedder, reference: np.ndarray,
           check: VariantCheck) -> VariantCheck:
    """``check`` with the cosines of ``embedder``'s vectors of SAMPLE to ``reference`` (the
    sentence-transformers vectors of the same texts), and whether they are within bounds."""
    cos = np.sum(embedder.embed(SAMPLE) * reference, axis=1)
    lo, mean = float(cos.min()), float(cos.mean())
    ok = lo >= MIN_COSINE[variant] and mean >= MIN_MEAN_COSINE[variant]
    if not ok:
        log.warning("the %s graph of %s deviates from sentence-transformers: min cosine "
                    "%.4f, mean %.4f", variant, embedder.model_name, lo, mean)
    return check.model_copy(update={"min_cosine": round(lo, 6), "mean_cosine": round(mean, 6),
                                    "ok": ok})


def _hidden_states(auto_model: Any, inputs: list[str]) -> Any:
    """The transformer with positional inputs, returning its last hidden states."""
    import torch

    class HiddenStates(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = auto_model

        def forward(self, *tensors: Any) -> Any:
            kwargs = dict(zip(inputs, tensors, strict=True))
            return self.model(**kwargs, return_dict=True).last_hidden_state

    return HiddenStates().eval()


def _trace(auto_model: Any, tokenizer: Any, inputs: list[str], path: Path) -> None:
    import torch

    # Two texts of different length: the trace must take the attention-mask (padding) path.
    enc = tokenizer(["a", "a longer text, so that the first one is padded"], padding=True,
                    return_tensors="pt")
    axes = {name: {0: "batch", 1: "tokens"} for name in [*inputs, "last_hidden_state"]}
    with warnings.catch_warnings(), torch.no_grad():
        # The TorchScript exporter warns about itself and about traced Python booleans; the
        # verification below is what tells whether the graph is right.
        warnings.simplefilter("ignore")
        torch.onnx.export(_hidden_states(auto_model, inputs), tuple(enc[n] for n in inputs),
                          str(path), input_names=inputs, output_names=["last_hidden_state"],
                          dynamic_axes=axes, opset_version=OPSET, dynamo=False,
                          do_constant_folding=True)


def _quantise(fp32: Path, int8: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # INT8_MODE: matrix multiplies only, signed int8 weights, one scale per output channel.
    # Measured on obsidian-help-en chunks: cosine to fp32 0.994 mean (min 0.987); per-tensor
    # weights gave 0.952 and unsigned reduce-range 0.939, both slower.
    previous = logging.root.manager.disable
    # The quantiser logs a line per tensor, and advice, on the root logger.
    logging.disable(logging.WARNING)
    try:
        quantize_dynamic(str(fp32), str(int8), op_types_to_quantize=["MatMul"],
                         per_channel=True, weight_type=QuantType.QInt8)
    finally:
        logging.disable(previous)


def _tool_versions() -> dict[str, str]:
    out = {"opset": str(OPSET)}
    for dist in ("torch", "sentence-transformers", "transformers", "onnx", "onnxruntime"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _write_manifest(directory: Path, manifest: GraphManifest) -> None:
    tmp = directory / "manifest.json.tmp"
    tmp.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, directory / "manifest.json")


def _publish(tmp: Path, directory: Path) -> None:
    """Move a finished export into place; if another process got there first, keep theirs."""
    try:
        os.replace(tmp, directory)
    except OSError:
        if read_manifest(directory) is None:
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m ragd.daemon.embed.onnx_export``: export (or re-export) the configured model now."""
    parser = argparse.ArgumentParser(prog="python -m ragd.daemon.embed.onnx_export", description=__doc__)
    parser.add_argument("--model", help="model name or folder (default: embedding.model)")
    parser.add_argument("--force", action="store_true", help="delete an earlier export first")
    parser.add_argument("--model-path", help=argparse.SUPPRESS)
    parser.add_argument("--models-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    from ragd.daemon.embed.model import default_threads, models_dir, resolve_model_path

    model, root, threads = args.model, args.models_dir, args.threads
    if not (model and root and threads):
        from ragd.daemon.settings.config import load_config
        from ragd.daemon.settings.paths import resolve_paths

        paths = resolve_paths()
        config = load_config(paths, write_default=False)
        model = model or config.embedding.model
        root = root or models_dir(paths.data_dir)
        threads = threads or config.embedding.threads or default_threads()
    model_path = args.model_path or resolve_model_path(model)
    try:
        if args.force:
            shutil.rmtree(graph_dir(root, model, model_path), ignore_errors=True)
        directory = ensure_graph(model, model_path, root, threads=threads)
    except Unsupported as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print((directory / "manifest.json").read_text(encoding="utf-8"))
    return 0

if __name__ == "__main__":
    sys.exit(main())
