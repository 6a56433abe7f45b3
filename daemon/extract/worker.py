"""The extraction worker: a child process that reads items into bounded, chunked documents.

Started by the daemon (``ragd.daemon.extract.pool``) as ``python -m
ragd.daemon.extract.worker``, under a memory limit, at low priority, dying with the daemon. It
reads files itself, through the same containment rule as the daemon (decision 0012), and
converts documents through its own conversion worker (decision 0013), whose time the daemon
does not charge to the item: a ``phase`` frame says when a conversion starts and ends.

Requests (frames, ``ragd.daemon.extract.wire``):

- ``{"op": "file", "kind", "rel", "max_bytes", "chunk"}``: one file. Answer: a ``doc`` frame
  (``sha256``, ``doc``, ``chunks``: how many follow) and ``chunks`` frames, or ``skip`` or
  ``error``.
- ``{"op": "stream", "kind", "todo": [[path, start, skip], ...]}``: containers' entries. For
  each entry an ``entry`` frame, answered ``{"load": bool}`` (or ``{"op": "stop"}``); a loaded
  one is followed by its answer as for a file. ``end`` closes a container, ``error`` says one
  could not be read on, ``done`` ends the stream.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from ragd.daemon.extract import wire
from ragd.daemon.extract.kinds import DocsCache, kind_from_spec
from ragd.daemon.extract.work import Chunker, Loaded, load_entry, load_file
from ragd.daemon.models import Document, Skip

log = logging.getLogger(__name__)


class PhasedConverter:
    """The worker's conversion worker, announcing each conversion to the daemon, whose clock
    for the item stops meanwhile (the conversion has its own limit, decision 0013)."""

    def __init__(self, inner: Any, emit: Callable[[dict[str, Any]], None]) -> None:
        self.inner = inner
        self.emit = emit

    def convert(self, fmt: str, data: bytes) -> Any:
        self.emit({"t": "phase", "phase": "convert", "limit": self.inner.timeout_s})
        try:
            return self.inner.convert(fmt, data)
        finally:
            self.emit({"t": "phase", "phase": "work"})

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Worker:
    """Serves one daemon over two pipes."""

    def __init__(self, inp: BinaryIO, out: BinaryIO, chunker: Chunker) -> None:
        self.inp, self.out = inp, out
        self.chunker = chunker
        self.docs = _PhasedDocs(self.send)
        self._kinds: dict[str, Any] = {}

    def send(self, frame: dict[str, Any]) -> None:
        wire.write_frame(self.out, frame)

    def serve(self) -> None:
        while (req := wire.read_frame(self.inp)) is not None:
            op = req.get("op")
            if op == "file":
                self.file(req)
            elif op == "stream":
                self.stream(req)
            elif op == "ping":
                self.send({"t": "pong", "pid": os.getpid()})
            elif op == "stop":  # a stop that crossed the end of a stream
                self.send({"t": "stopped"})
            else:
                self.send({"t": "error", "error": f"unknown op {op!r}"})

    def _kind(self, spec: dict[str, Any]) -> Any:
        key = json.dumps(spec, sort_keys=True)
        kind = self._kinds.get(key)
        if kind is None:
            if len(self._kinds) > 16:
                self._kinds.clear()
            kind = self._kinds[key] = kind_from_spec(spec, self.docs)
        return kind

    def file(self, req: dict[str, Any]) -> None:
        spec = req["kind"]
        kind = self._kind(spec)
        loaded = load_file(kind, Path(spec["root"]), str(req["rel"]), int(req["max_bytes"]),
                           self.chunker if req.get("chunk", True) else None)
        self.answer(loaded)

    def answer(self, loaded: Loaded) -> None:
        doc = loaded.doc
        if isinstance(doc, Skip):
            self.send({"t": "skip", "sha256": loaded.sha256, "code": doc.code,
                       "detail": doc.detail})
            return
        if isinstance(doc, MemoryError) or isinstance(loaded.chunked, MemoryError):
            raise MemoryError  # the worker's state is suspect: report it and go
        if isinstance(doc, Exception) or isinstance(loaded.chunked, Exception):
            exc = doc if isinstance(doc, Exception) else loaded.chunked
            self.send({"t": "error", "error": f"{type(exc).__name__}: {str(exc)[:500]}"})
            return
        assert isinstance(doc, Document)
        chunks = loaded.chunked if isinstance(loaded.chunked, list) else []
        self.send({"t": "doc", "sha256": loaded.sha256, "doc": wire.bounded_document(doc),
                   "chunks": len(chunks), "seconds": loaded.seconds})
        for i in range(0, len(chunks), wire.CHUNKS_PER_FRAME):
            self.send({"t": "chunks",
                       "chunks": wire.bounded_chunks(chunks[i:i + wire.CHUNKS_PER_FRAME])})

    def stream(self, req: dict[str, Any]) -> None:
        spec = req["kind"]
        kind = kind_from_spec(spec, self.docs)  # a fresh one: kinds keep per-stream state
        root = Path(spec["root"])
        todo = [(str(path), int(start), int(skip)) for path, start, skip in req["todo"]]
        if req.get("state") is not None and hasattr(kind, "take_walk_state"):
            kind.take_walk_state(req["state"])
        try:
            for n, (path, start, skip) in enumerate(todo):
                if not self._container(kind, root, n, path, start, skip):
                    return
            self.send({"t": "done"})
        finally:
            close = getattr(kind, "close", None)
            if close is not None:
                close()

    def _container(self, kind: Any, root: Path, n: int, path: str, start: int,
                   skip: int) -> bool:
        """Send one container's entries; False when the daemon said stop."""
        end, seen = start, 0
        try:
            for entry in kind.entries(root, path, start):
                seen += 1
                if seen <= skip:
                    end = max(end, entry.end)
                    continue
                self.send({"t": "entry", "n": n, "key": entry.key[:2000],
                           "locator": entry.locator[:2000], "hash": entry.content_hash[:200],
                           "end": int(entry.end),
                           "location": wire.bounded_value(dict(entry.location))})
                reply = wire.read_frame(self.inp)
                if reply is None:
                    return False
                if reply.get("op") == "stop":
                    self.send({"t": "stopped"})
                    return False
                if reply.get("load"):
                    self.answer(load_entry(entry, self.chunker))
                end = max(end, entry.end)
        except MemoryError:
            raise
        except Exception as exc:  # what could be read is kept; the container ends here
            log.warning("reading %s stopped: %s", path, exc, exc_info=True)
            self.send({"t": "error", "n": n, "error": f"{type(exc).__name__}: {str(exc)[:500]}"})
        self.send({"t": "end", "n": n, "end": end})
        return True


class _PhasedDocs(DocsCache):
    def __init__(self, emit: Callable[[dict[str, Any]], None]) -> None:
        super().__init__()
        self.emit = emit

    def get(self, spec: Any) -> Any:
        docs = super().get(spec)
        if docs is not None and not isinstance(docs.store.converter, PhasedConverter):
            docs.store.converter = PhasedConverter(docs.store.converter, self.emit)
        return docs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragd.daemon.extract.worker")
    parser.add_argument("--memory-mb", type=int, default=0)
    parser.add_argument("--parent-pid", type=int, default=0,
                        help="the daemon's pid: the worker ends when it does")
    parser.add_argument("--tokenizer", required=True, help="the model's tokenizer.json")
    parser.add_argument("--max-tokens", type=int, required=True)
    parser.add_argument("--chunk-budget-s", type=float, default=0.0,
                        help="a long text is cut to what chunking does in this time")
    parser.add_argument("--priority", choices=("low", "normal"), default="low",
                        help="low: bulk work's worker; normal: a saved note's (decision 0041)")
    args = parser.parse_args(argv)
    if args.parent_pid:  # first: a worker must never outlive the daemon (decision 0024)
        from ragd.daemon.convert.lifeline import die_with_parent

        die_with_parent(args.parent_pid)
    if args.priority == "low":
        _lower_priority()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="ragd-extract %(levelname)s %(name)s: %(message)s")
    # The protocol owns the real stdout; anything a library prints goes to stderr.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    from ragd.daemon.convert.worker import limit_memory
    from ragd.daemon.text.chunking import tokenizer_counter

    chunker = Chunker(tokenizer_counter(args.tokenizer), args.max_tokens,
                      args.chunk_budget_s or None)
    limit_memory(args.memory_mb)
    worker = Worker(sys.stdin.buffer, out, chunker)
    try:
        with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
            worker.serve()
    except MemoryError:
        with contextlib.suppress(Exception):
            worker.send({"t": "memory"})
        return 3
    finally:
        worker.docs.close()
    return 0


def _lower_priority() -> None:
    """Bulk extraction runs below the user's programs (and the daemon's saves). A lowered
    process cannot raise itself again, so saves have workers of their own (the pool's urgent
    lane)."""
    try:
        from ragd.daemon import priority
    except ImportError:
        return
    lower = getattr(priority, "lower_this_process", None)
    if lower is not None:
        with contextlib.suppress(Exception):
            lower()


if __name__ == "__main__":
    sys.exit(main())
