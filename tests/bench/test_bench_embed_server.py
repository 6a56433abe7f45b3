"""The benchmark's OpenAI-compatible embeddings endpoint, served with a fake embedder."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from bench.embed_server import EmbedServer


class FakeEmbedder:
    """Deterministic stand-in for the real model (unit tests only): one-hot by text length."""

    max_tokens = 5

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) + 2 for t in texts]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 4), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, len(t) % 4] = 1.0
        return out


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    srv = EmbedServer(FakeEmbedder(), model_id="fake-model", idle_timeout=60).start()
    yield srv
    srv.stop()


def post(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def test_embeds_a_list_in_order_as_floats(server: EmbedServer) -> None:
    code, body = post(server.url + "/embeddings", {"model": "m", "input": ["a", "bb", "ccc"]})
    assert code == 200
    assert [d["index"] for d in body["data"]] == [0, 1, 2]
    assert [d["embedding"].index(1.0) for d in body["data"]] == [1, 2, 3]
    assert body["model"] == "m"
    assert body["usage"]["total_tokens"] == 9


def test_base64_is_little_endian_float32(server: EmbedServer) -> None:
    code, body = post(server.url + "/embeddings",
                      {"input": "abcd", "encoding_format": "base64"})
    assert code == 200
    vec = np.frombuffer(base64.b64decode(body["data"][0]["embedding"]), dtype="<f4")
    assert vec.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert body["model"] == "fake-model"


def test_bad_requests_get_a_clear_error(server: EmbedServer) -> None:
    bad: Any
    for bad in ({"input": []}, {"input": [1, 2]}, {"input": "x", "encoding_format": "int8"},
                ["not", "an", "object"]):
        code, body = post(server.url + "/embeddings", bad)
        assert code == 400, bad
        assert body["error"]["message"]
    code, _ = post(server.url + "/nowhere", {"input": "x"})
    assert code == 404


def test_stats_count_texts_and_inputs_over_the_token_limit(server: EmbedServer) -> None:
    post(server.url + "/embeddings", {"input": ["one two three four", "short"]})
    stats = get(server.url.removesuffix("/v1") + "/stats")
    assert stats["requests"] == 1 and stats["texts"] == 2
    assert stats["over_token_limit"] == 1
    assert get(server.url + "/models")["data"][0]["id"] == "fake-model"


def test_shutdown_and_idle_timeout_stop_the_server() -> None:
    srv = EmbedServer(FakeEmbedder(), idle_timeout=60).start()
    code, _ = post(srv.url.removesuffix("/v1") + "/shutdown", {})
    assert code == 200
    assert srv.stopped.wait(5)
    idle = EmbedServer(FakeEmbedder(), idle_timeout=0.2).start()
    assert idle.stopped.wait(5)


def test_binds_to_loopback_only() -> None:
    with pytest.raises(ValueError):
        EmbedServer(FakeEmbedder(), host="0.0.0.0")


def test_stops_when_the_named_parent_is_gone() -> None:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    srv = EmbedServer(FakeEmbedder(), idle_timeout=60, parent_pid=child.pid).start()
    assert srv.stopped.wait(5)
