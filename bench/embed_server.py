"""A minimal OpenAI-compatible embeddings endpoint on loopback, serving ragd's own embedder.

The peer benchmark (bench/peer.py) points markdown-vault-mcp's "openai" provider at it, so
both systems embed with the very same model, threads and normalisation.

    python bench/embed_server.py [--port 0] [--idle-timeout 900] [--max-seconds 14400]

Prints one JSON line ``{"url": "http://127.0.0.1:PORT/v1", "pid": ...}`` once it serves, then
answers until it has been idle ``--idle-timeout`` seconds, has run ``--max-seconds``, gets
POST /shutdown, or the process ``--parent-pid`` names is gone. Bounded on purpose: loopback only, one request at a time
(embedding is serialised: the model is the bottleneck anyway), request bodies up to 32 MB
and 2,048 inputs, idle keep-alive connections dropped after 30 s.

Endpoints: POST /v1/embeddings ({"model", "input": str | [str], "encoding_format":
"float" | "base64"}), GET /v1/models, GET /stats (requests, texts, seconds spent embedding,
inputs over the model's token limit, which the model truncates), POST /shutdown.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

import numpy as np

MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_INPUTS = 2048
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class TextEmbedder(Protocol):
    """What the server needs: ragd's Embedder protocol, in part."""

    @property
    def max_tokens(self) -> int: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.texts = 0
        self.embed_seconds = 0.0
        self.over_limit = 0
        self.errors = 0

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            return {"requests": self.requests, "texts": self.texts,
                    "embed_seconds": round(self.embed_seconds, 3),
                    "over_token_limit": self.over_limit, "errors": self.errors}


class BadRequest(Exception):
    pass


def parse_inputs(body: Any) -> tuple[list[str], str, str]:
    """(texts, model, encoding) from an embeddings request, or BadRequest saying what is wrong."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise BadRequest("'input' must be a string or a list of strings (token arrays are "
                         "not supported)")
    if not texts:
        raise BadRequest("'input' is empty")
    if len(texts) > MAX_INPUTS:
        raise BadRequest(f"at most {MAX_INPUTS} inputs per request")
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise BadRequest("'encoding_format' must be 'float' or 'base64'")
    return texts, str(body.get("model") or ""), encoding


def embeddings_response(vectors: np.ndarray, model: str, encoding: str,
                        tokens: int) -> dict[str, Any]:
    """The OpenAI response shape; base64 is the little-endian float32 bytes of each vector."""
    data = []
    for i, vec in enumerate(vectors):
        v = np.ascontiguousarray(vec, dtype="<f4")
        emb: Any = (base64.b64encode(v.tobytes()).decode("ascii") if encoding == "base64"
                    else [float(x) for x in v])
        data.append({"object": "embedding", "index": i, "embedding": emb})
    return {"object": "list", "data": data, "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def make_handler(embedder: TextEmbedder, model_id: str, stats: Stats,
                 touch: Any, stop: threading.Event) -> type[BaseHTTPRequestHandler]:
    model_lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30  # an idle keep-alive connection is closed after this many seconds

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # quiet: the benchmark prints its own tables

        def _send(self, code: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, message: str) -> None:
            with stats.lock:
                stats.errors += 1
            self._send(code, {"error": {"message": message, "type": "invalid_request_error"}})

        def do_GET(self) -> None:  # noqa: N802
            touch()
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [
                    {"id": model_id, "object": "model", "owned_by": "ragd-bench"}]})
            elif self.path == "/stats":
                self._send(200, stats.as_dict())
            else:
                self._error(404, f"no such endpoint {self.path}")

        def do_POST(self) -> None:  # noqa: N802
            touch()
            if self.path == "/shutdown":
                self._send(200, {"stopping": True})
                stop.set()
                return
            if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
                self._error(404, f"no such endpoint {self.path}")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_BODY_BYTES:
                self.close_connection = True
                self._error(413, f"the body must be 1 to {MAX_BODY_BYTES} bytes")
                return
            try:
                texts, model, encoding = parse_inputs(json.loads(self.rfile.read(length)))
            except (BadRequest, ValueError) as exc:
                self._error(400, str(exc))
                return
            with model_lock:
                t0 = time.perf_counter()
                counts = embedder.count_tokens(texts)
                vectors = embedder.embed(texts)
                spent = time.perf_counter() - t0
            with stats.lock:
                stats.requests += 1
                stats.texts += len(texts)
                stats.embed_seconds += spent
                stats.over_limit += sum(1 for c in counts if c > embedder.max_tokens)
            self._send(200, embeddings_response(vectors, model or model_id, encoding,
                                                sum(counts)))

    return Handler


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class EmbedServer:
    """The HTTP server on a thread; ``stop()`` or the bounds end it."""

    def __init__(self, embedder: TextEmbedder, *, model_id: str = "all-MiniLM-L6-v2",
                 host: str = "127.0.0.1", port: int = 0, idle_timeout: float = 900.0,
                 max_seconds: float = 4 * 3600.0, parent_pid: int | None = None) -> None:
        if host not in LOOPBACK:
            raise ValueError("the benchmark embedding server binds to loopback only")
        self.stats = Stats()
        self.stopped = threading.Event()
        self._last = time.monotonic()
        self._started = time.monotonic()
        self.idle_timeout = idle_timeout
        self.max_seconds = max_seconds
        self.parent_pid = parent_pid
        handler = make_handler(embedder, model_id, self.stats, self._touch, self.stopped)
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}/v1"
        self._serving = threading.Thread(target=self.httpd.serve_forever, args=(0.25,),
                                         name="embed-server", daemon=True)
        self._thread = threading.Thread(target=self._watch, name="embed-watchdog", daemon=True)

    def _touch(self) -> None:
        self._last = time.monotonic()

    def _expired(self) -> bool:
        now = time.monotonic()
        return (now - self._last > self.idle_timeout or now - self._started > self.max_seconds
                or (self.parent_pid is not None and not _alive(self.parent_pid)))

    def _watch(self) -> None:
        try:
            while not self.stopped.wait(0.25) and not self._expired():
                pass
        finally:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.stopped.set()

    def start(self) -> EmbedServer:
        self._serving.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self._thread.join(timeout=5)

    def wait(self) -> None:
        while not self.stopped.wait(1.0):
            pass
        self._thread.join(timeout=5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--model", default="all-MiniLM-L6-v2", help="ragd embedding model")
    ap.add_argument("--threads", type=int, default=0, help="0: ragd's default")
    ap.add_argument("--idle-timeout", type=float, default=900.0)
    ap.add_argument("--max-seconds", type=float, default=4 * 3600.0)
    ap.add_argument("--parent-pid", type=int, help="stop when this process is gone")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from ragd.daemon.embed.embedding import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(args.model, threads=args.threads)
    embedder.warm_up()
    embedder.embed(["warm up"])
    server = EmbedServer(embedder, model_id=args.model, port=args.port,
                         idle_timeout=args.idle_timeout, max_seconds=args.max_seconds,
                         parent_pid=args.parent_pid).start()
    print(json.dumps({"url": server.url, "pid": os.getpid(), "threads": embedder.threads,
                      "max_tokens": embedder.max_tokens}), flush=True)
    server.wait()


if __name__ == "__main__":
    main()
