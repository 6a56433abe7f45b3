"""Calibre: indexing speed on the shared books, and memory while indexing the largest one.

    python bench/calibre.py [--books PATH] [--skip-memory]

1. Builds a Calibre library with ``calibredb add`` from every book under ``books/`` (EPUB, PDF,
   and the MOBI as a book of its own, read through ebook-convert); not timed.
2. The baseline, in the same run: each book's chosen file converted alone through a fresh doc
   store (the conversion worker, no embedding): books and pages per second.
3. The calibre collection indexed in process as ``ragd index`` does (default embedder, fresh
   home): books, pages and chunks per second, and where the time goes; then a pass with
   nothing changed, and a pass after ``calibredb set_metadata`` changed every book's tags
   (chunks embedded again: the properties chunks only).
4. The largest book alone, indexed in a child process: peak resident memory of the daemon
   side and of the conversion worker.

Pages: a PDF's pages; an EPUB's or MOBI's text counted as pages of 2,000 characters.
Prints tables; writes bench/results/calibre.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import corpus, fresh_home, index_twice, rss_mb, table, write_json  # noqa: E402

PAGE_CHARS = 2000


def calibredb(library: Path, *args: str) -> str:
    env = {**os.environ, "CALIBRE_CONFIG_DIRECTORY": str(library.parent / ".calibre-config"),
           "QT_QPA_PLATFORM": "offscreen"}
    deadline = time.monotonic() + 120
    while True:  # one calibredb at a time on a machine: wait for another one to finish
        done = subprocess.run(["calibredb", "--with-library", str(library), *args], env=env,
                              capture_output=True, text=True, check=False, timeout=600)
        if "Another calibre program" not in done.stdout + done.stderr \
                or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    done.check_returncode()
    return done.stdout


def build_library(books: Path, library: Path, only: list[Path] | None = None) -> list[Path]:
    files = only or sorted(p for sub in ("epub", "pdf", "mobi") for p in (books / sub).glob("*")
                           if p.is_file())
    calibredb(library, "add", "--duplicates", *map(str, files))
    return files


def pages_of(source_type: str, markdown: str, meta: dict[str, Any]) -> int:
    if source_type == "pdf" and meta.get("pages"):
        return int(meta["pages"])
    return max(1, round(len(markdown) / PAGE_CHARS))


def baseline(library: Path) -> dict[str, Any]:
    """Each book's chosen file converted alone (fresh doc store, no embedding)."""
    from ragd.daemon.convert.documents import open_documents
    from ragd.daemon.convert.formats import FORMATS
    from ragd.daemon.models import Document
    from ragd.daemon.sources.calibre import CalibreKind

    with tempfile.TemporaryDirectory(prefix="ragd-bench-docstore-") as tmp:
        docs = open_documents(Path(tmp))
        kind = CalibreKind(docs)
        try:
            walked = kind.walk(library)
            docs.store.convert(b"%PDF-1.4 warm up", FORMATS["pdf"])  # starts the worker
            t0 = time.perf_counter()
            pages = 0
            for f in walked.files:
                for entry in kind.entries(library, f.path, 0):
                    doc = entry.load()
                    if isinstance(doc, Document):
                        pages += pages_of(doc.source_type, doc.text, dict(doc.metadata))
            seconds = time.perf_counter() - t0
        finally:
            docs.close()
    n = len(walked.files)
    return {"books": n, "pages": pages, "seconds": round(seconds, 2),
            "books_per_s": round(n / seconds, 2), "pages_per_s": round(pages / seconds, 1)}


def index(library: Path) -> dict[str, Any]:
    fresh_home("calibre-home")
    from ragd.daemon.runtime.app import App
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    paths = resolve_paths()
    config = load_config(paths, {"calibre.libraries": [str(library)],
                                 "obsidian.enabled": False})
    with App(paths, config) as app:
        report, seconds, again, unchanged_s = index_twice(app)
        info = app.collection_info("calibre")
        n = info["book_count"]
        print("index:", seconds, report.as_dict()["stage_seconds"], file=sys.stderr, flush=True)
        from ragd.daemon.sources.calibredb import read_library

        failed = []
        for book in read_library(library):  # set_metadata takes one book at a time
            try:
                calibredb(library, "set_metadata", "--field", "tags:benchmarked", str(book.id))
            except subprocess.CalledProcessError as exc:
                failed.append(book.id)
                print(f"set_metadata {book.id} failed: {exc.stderr[-300:]}", file=sys.stderr)
        t0 = time.perf_counter()
        (edited,) = app.sync_all()
        edit_s = time.perf_counter() - t0
    return {"books": n, "chunks": info["chunk_count"], "seconds": round(seconds, 2),
            "books_per_s": round(n / seconds, 3), "chunks_per_s": round(info["chunk_count"] / seconds, 1),
            "skipped": report.skipped, "warnings": len(report.warnings),
            "unchanged_pass_s": round(unchanged_s, 3), "unchanged_indexed": again.indexed,
            "metadata_edit_s": round(edit_s, 2), "metadata_edit_indexed": edited.indexed,
            "metadata_edit_embedded": edited.embedded, "metadata_edit_failed": failed,
            "stages": {k: round(v, 2) for k, v in report.stage_seconds.items()},
            "embedder": app.embedder.fingerprint}


def worker_peak_mb() -> float:
    """The largest VmHWM among this process's children (the conversion worker)."""
    peak = 0.0
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            value = rss_mb("VmHWM", stat.parent.name)
            peak = max(peak, value if value == value else 0.0)
    return peak


def memory_child(book: Path) -> None:
    """Run in a child: index one book alone; print peaks as JSON."""
    with tempfile.TemporaryDirectory(prefix="ragd-bench-calibre-one-") as tmp:
        library = Path(tmp) / "Library"
        build_library(book.parent, library, [book])
        fresh_home("calibre-home")
        from ragd.daemon.runtime.app import App
        from ragd.daemon.settings.config import load_config
        from ragd.daemon.settings.paths import resolve_paths

        paths = resolve_paths()
        config = load_config(paths, {"calibre.libraries": [str(library)],
                                     "obsidian.enabled": False})
        with App(paths, config) as app:
            app.embedder.embed(["warm up"])
            base = rss_mb()
            t0 = time.perf_counter()
            (report,) = app.sync_all()
            seconds = time.perf_counter() - t0
            worker = worker_peak_mb()
            chunks = app.collection_info("calibre")["chunk_count"]
        print(json.dumps({"book": book.name, "mb": round(book.stat().st_size / 2**20, 2),
                          "chunks": chunks, "seconds": round(seconds, 2),
                          "base_mb": round(base, 1), "peak_mb": round(rss_mb("VmHWM"), 1),
                          "worker_peak_mb": round(worker, 1), "indexed": report.indexed}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--books", type=Path, default=None)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--memory-child", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        memory_child(args.memory_child)
        return 0
    if shutil.which("calibredb") is None:
        sys.exit("error: calibredb not found\nhint: apt-get install calibre")
    books = args.books or corpus("books")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ragd-bench-calibre-") as tmp:
        library = Path(tmp) / "Library"
        t0 = time.perf_counter()
        files = build_library(books, library)
        out["library_build_s"] = round(time.perf_counter() - t0, 1)
        b = out["baseline"] = baseline(library)
        print("baseline:", b, file=sys.stderr, flush=True)
        r = out["index"] = index(library)
        pages = b["pages"]
        r["pages"] = pages
        r["pages_per_s"] = round(pages / r["seconds"], 1)
        print(table(f"The shared books ({len(files)} files) in a Calibre library", [
            ["convert alone (baseline)", b["books"], pages, b["seconds"], b["books_per_s"],
             b["pages_per_s"], "", 1.0],
            ["calibre collection, indexed", r["books"], pages, r["seconds"], r["books_per_s"],
             r["pages_per_s"], r["chunks_per_s"], round(r["seconds"] / b["seconds"], 1)]],
            ["run", "books", "pages", "seconds", "books/s", "pages/s", "chunks/s",
             "x baseline"]))
        print("stages (s):", r["stages"])
        print(table("Passes after the first", [
            ["nothing changed", r["unchanged_pass_s"], r["unchanged_indexed"], 0],
            ["tags of every book edited", r["metadata_edit_s"], r["metadata_edit_indexed"],
             r["metadata_edit_embedded"]]],
            ["pass", "seconds", "books read", "chunks embedded"]))
        print()
    if not args.skip_memory:
        largest = max((p for sub in ("epub", "pdf", "mobi") for p in (books / sub).glob("*")),
                      key=lambda p: p.stat().st_size)
        got = subprocess.run([sys.executable, __file__, "--memory-child", str(largest)],
                             capture_output=True, text=True, check=True).stdout
        m = out["largest"] = json.loads(got.strip().splitlines()[-1])
        print(table("The largest book alone (child process)", [[
            m["book"], m["mb"], m["chunks"], m["seconds"], m["base_mb"], m["peak_mb"],
            m["worker_peak_mb"]]],
            ["book", "file MB", "chunks", "seconds", "RSS before MB", "peak MB",
             "worker peak MB"]))
    print("wrote", write_json("calibre", out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
