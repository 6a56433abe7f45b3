"""The conversion worker: a child process that turns document bytes into markdown.

The daemon never imports a converter library: it starts this process (``python -m
ragd.daemon.convert.worker``), sends it one document at a time and waits a bounded time for the
answer. A pathological file can exhaust the worker's memory limit, crash a native library or
loop forever: the worker dies or is killed, the file is skipped with a code, and the next
document gets a fresh worker. The worker never opens a path: the daemon reads the file
(inside its collection's root) and sends the bytes.

Wire format, on the worker's stdin/stdout: a request is one JSON line
``{"format": str, "size": int, "ocr": bool}`` followed by ``size`` raw bytes; the answer is one
JSON line, ``{"ok": true, "title", "markdown", "metadata"}`` or ``{"ok": false, "code",
"detail"}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, BinaryIO


def limit_memory(megabytes: int) -> None:
    """Cap the worker's address space (POSIX; elsewhere the time limit still applies)."""
    if megabytes <= 0:
        return
    try:
        import resource
    except ImportError:  # Windows
        return
    cap = megabytes * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def handle(header: dict[str, Any], data: bytes) -> dict[str, Any]:
    """Convert one document; every outcome is an answer, never an exception."""
    from ragd.daemon.convert.converted import ConvertSkip
    from ragd.daemon.convert.converters import convert

    try:
        out = convert(str(header.get("format")), data, ocr=bool(header.get("ocr", True)))
    except ConvertSkip as skip:
        return {"ok": False, "code": skip.code, "detail": skip.detail}
    except MemoryError:
        return {"ok": False, "code": "convert_memory",
                "detail": "conversion needed more memory than the worker's limit"}
    except RecursionError:
        return {"ok": False, "code": "parse_error", "detail": "the document is nested too deeply"}
    except Exception as exc:  # a converter bug costs one file
        logging.getLogger(__name__).exception("converting a %s failed", header.get("format"))
        return {"ok": False, "code": "parse_error",
                "detail": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return {"ok": True, "title": out.title, "markdown": out.markdown, "metadata": out.metadata}


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    """Answer requests until stdin closes."""
    while True:
        line = inp.readline()
        if not line:
            return
        header = json.loads(line)
        size = int(header.get("size", 0))
        data = inp.read(size) if size else b""
        if len(data) != size:
            return  # the daemon went away mid-request
        answer = handle(header, data)
        try:
            frame = json.dumps(answer, ensure_ascii=False, default=str).encode("utf-8")
        except MemoryError:
            frame = json.dumps({"ok": False, "code": "convert_memory",
                                "detail": "the converted text is too large"}).encode()
        out.write(frame + b"\n")
        out.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragd.daemon.convert.worker")
    parser.add_argument("--memory-mb", type=int, default=0)
    parser.add_argument("--parent-pid", type=int, default=0,
                        help="the daemon's pid: the worker ends when it does")
    args = parser.parse_args(argv)
    if args.parent_pid:  # first: a worker must never outlive the daemon (decision 0024)
        from ragd.daemon.convert.lifeline import die_with_parent

        die_with_parent(args.parent_pid)
    from ragd.daemon.priority import lower_this_process

    lower_this_process()  # background work, however the daemon was started (decision 0044)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr,
                        format="ragd-convert %(levelname)s %(name)s: %(message)s")
    # The protocol owns the real stdout; anything a library prints goes to stderr.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    limit_memory(args.memory_mb)
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        serve(sys.stdin.buffer, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
