"""Document conversion speed on the shared books, and its share of indexing time.

    python bench/convert.py [--books PATH] [--no-index] [--index-books N]

1. Converts every PDF and EPUB under ``books/pdf`` and ``books/epub`` through the doc store and
   the worker process, with a cold cache (a temp folder), then again (all cache hits).
   Pages per second: a PDF's pages; an EPUB has none, so its "pages" are its converted text in
   2,000-character pages (a printed page holds about that much).
2. Unless ``--no-index``: indexes a project folder of the N smallest books (default 4: two
   PDFs, two EPUBs) in process with the real model, and reports the conversion's share of the
   total indexing time (the rest is chunking, embedding and the index writes).

Prints a table; writes bench/results/convert.json.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import corpus, table, write_json  # noqa: E402
from ragd.daemon.convert.docstore import DocStore  # noqa: E402
from ragd.daemon.convert.formats import format_for  # noqa: E402
from ragd.daemon.convert.process import ConversionWorker  # noqa: E402
from ragd.daemon.models import Skip  # noqa: E402

EPUB_PAGE_CHARS = 2000


def books(folder: Path) -> list[Path]:
    return sorted([*folder.glob("pdf/*.pdf"), *folder.glob("epub/*.epub")])


def convert_all(paths: list[Path], store: DocStore) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        fmt = format_for(path.name)
        assert fmt is not None
        data = path.read_bytes()
        t0 = time.perf_counter()
        conv = store.convert(data, fmt, source_path=str(path))
        seconds = time.perf_counter() - t0
        if isinstance(conv, Skip):
            rows.append({"file": path.name, "format": fmt.name, "skip": conv.code,
                         "seconds": seconds})
            continue
        pages = conv.metadata.get("pages") if fmt.name == "pdf" else max(
            1, round(len(conv.markdown) / EPUB_PAGE_CHARS))
        rows.append({"file": path.name, "format": fmt.name, "pages": pages,
                     "chars": len(conv.markdown), "seconds": seconds, "cached": conv.cached})
    return rows


def summary(rows: list[dict[str, Any]], fmt: str) -> dict[str, float]:
    mine = [r for r in rows if r["format"] == fmt and "pages" in r]
    pages = sum(r["pages"] for r in mine)
    seconds = sum(r["seconds"] for r in mine)
    return {"files": len(mine), "pages": pages, "seconds": round(seconds, 3),
            "pages_per_s": round(pages / seconds, 1) if seconds else 0.0}


def index_share(paths: list[Path], home: Path) -> dict[str, Any]:
    """Index the books as a project in process; conversion's share of the total time."""
    import os

    os.environ["RAGD_HOME"] = str(home / "ragd-home")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ragd.daemon.runtime.app import App
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    folder = home / "books"
    folder.mkdir()
    for path in paths:
        shutil.copy(path, folder / path.name)
    paths_ = resolve_paths()
    config = load_config(paths_, {"obsidian.enabled": False})
    with App(paths_, config) as app:
        app.embedder.embed(["warm up"])  # the model load is not indexing time
        coll = app.create_project("bench-books", str(folder))
        before = app.documents.store.convert_seconds
        t0 = time.perf_counter()
        report = app.sync_collection(coll)
        total = time.perf_counter() - t0
        converted = app.documents.store.convert_seconds - before
    return {"books": [p.name for p in paths], "indexed": report.indexed,
            "chunks": report.chunks_written, "total_s": round(total, 2),
            "convert_s": round(converted, 2),
            "convert_share": round(converted / total, 4) if total else 0.0,
            "stages": {k: round(v, 2) for k, v in report.stage_seconds.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--books", type=Path, default=None)
    parser.add_argument("--no-index", action="store_true")
    parser.add_argument("--index-books", type=int, default=4)
    args = parser.parse_args()
    folder = args.books or corpus("books")
    paths = books(folder)
    with tempfile.TemporaryDirectory(prefix="ragd-bench-convert-") as tmp:
        store = DocStore(Path(tmp) / "docstore", ConversionWorker(timeout_s=600, idle_s=0))
        try:
            cold = convert_all(paths, store)
            warm = convert_all(paths, store)
        finally:
            store.close()
        share = None
        if not args.no_index:
            small = {f: sorted((p for p in paths if p.suffix == f), key=lambda p: p.stat().st_size)
                     for f in (".pdf", ".epub")}
            n = max(1, args.index_books // 2)
            share = index_share(small[".pdf"][:n] + small[".epub"][:n], Path(tmp))
    rows = [[r["file"], r["format"], r.get("pages", r.get("skip")), r["seconds"],
             r["pages"] / r["seconds"] if "pages" in r and r["seconds"] else 0.0]
            for r in cold]
    print(table("Conversion, cold cache (worker process, pypdfium2 / stdlib EPUB)", rows,
                ["file", "format", "pages", "seconds", "pages/s"]))
    totals = {fmt: summary(cold, fmt) for fmt in ("pdf", "epub")}
    cached = {fmt: summary(warm, fmt) for fmt in ("pdf", "epub")}
    print()
    print(table("Totals", [[fmt, t["files"], t["pages"], t["seconds"], t["pages_per_s"],
                            cached[fmt]["seconds"]] for fmt, t in totals.items()],
                ["format", "files", "pages", "seconds", "pages/s", "cached seconds"]))
    if share:
        print()
        print(table("Indexing the smallest books with the real model", [[
            ", ".join(share["books"]), share["chunks"], share["total_s"], share["convert_s"],
            f"{share['convert_share']:.1%}"]],
            ["books", "chunks", "index s", "convert s", "convert share"]))
    path = write_json("convert", {"files": cold, "totals": totals, "cached": cached,
                                  "epub_page_chars": EPUB_PAGE_CHARS, "index": share})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
