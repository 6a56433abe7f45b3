"""Which document a name names (issue 37 item 3): ``Library.find_document``, the lookup of
``extract_concepts``, over the shared books.

The 22 shared books (16 EPUB, 6 PDF; some Hebrew, Japanese, French, Arabic) are copied into
a temporary folder and indexed as a project by an in-process App (default settings), then
analysed by the concept Analyser until every book is in the concept store. Every query of
``bench/queries/doc-by-name.tsv`` (a title, part of one, an author, a character, a file
name; and titles the library does not hold, generic words, paths, empty input) is then
answered as the extract_concepts tool answers it. Per kind, and overall: the right book, a
wrong book (another one: for an unknown title the worst outcome), or not found. Prints the
tables and writes bench/results/doc_by_name.json.

    HF_HUB_OFFLINE=1 .venv/bin/python -m bench.doc_by_name
    HF_HUB_OFFLINE=1 .venv/bin/python -m bench.doc_by_name --home /tmp/dbn  # keep and reuse

``--home DIR`` keeps the index in DIR: a second run with the same DIR only answers the
queries. The exported model graph is shared with bench/extract.py
(``~/.cache/ragd-bench/extract-models``); nothing is cached in the repository.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, RESULTS, corpus, machine, table

QUERIES = REPO / "bench" / "queries" / "doc-by-name.tsv"
MODELS = Path.home() / ".cache" / "ragd-bench" / "extract-models"  # bench/extract.py's
OUTCOMES = ("right", "wrong", "not found")


def load_queries(path: Path = QUERIES) -> list[dict[str, Any]]:
    """The query rows: query, expected file names (empty: nothing may match), kind."""
    with path.open(encoding="utf-8", newline="") as fh:
        lines = [line for line in fh if not line.startswith("#")]
    rows = csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    return [{"query": r["query"] or "", "kind": r["kind"],
             "expected": [] if r["expected"] == "-" else r["expected"].split("|")}
            for r in rows]


@contextmanager
def library(home: Path) -> Iterator[tuple[Any, dict[str, float]]]:
    """A Library over the shared books indexed and analysed in ``home`` (once: a home that
    holds them is reused), and the seconds each step took."""
    os.environ["RAGD_HOME"] = str(home / "ragd")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ragd.daemon.concepts.analysis import Analyser, Settings, open_catalog_readonly
    from ragd.daemon.concepts.queries import Library
    from ragd.daemon.runtime.app import App
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths
    from ragd.daemon.stores.concepts import ConceptStore

    folder = home / "books"
    seconds: dict[str, float] = {"reused": float(folder.is_dir())}
    if not folder.is_dir():
        folder.mkdir(parents=True)
        for sub in ("epub", "pdf"):
            for p in sorted(corpus("books", sub).iterdir()):
                if p.is_file():
                    shutil.copy(p, folder / p.name)
    paths = resolve_paths()
    models = paths.data_dir / "models"
    if not models.exists():
        paths.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        MODELS.mkdir(parents=True, exist_ok=True)
        models.symlink_to(MODELS, target_is_directory=True)
    config = load_config(paths, {"obsidian.enabled": False, "calibre.enabled": False,
                                 "email.enabled": False})
    with App(paths, config) as app:
        t0 = time.perf_counter()
        app.embedder.embed(["warm up"])
        seconds["model_load"] = time.perf_counter() - t0
        coll = app.create_project("books", str(folder))
        t0 = time.perf_counter()
        report = app.sync_collection(coll)
        seconds["index"] = time.perf_counter() - t0
        seconds["indexed"] = report.indexed
        store = ConceptStore(paths.data_dir / "concepts.sqlite")
        try:
            analyser = Analyser(paths.catalog_path, store, app.embedder,
                                Settings(min_note_chars=config.concepts.min_note_chars,
                                         concepts_per_doc=config.concepts.concepts_per_doc))
            t0 = time.perf_counter()
            while analyser.run_pass()["analysed"]:
                pass
            seconds["analyse"] = time.perf_counter() - t0
            db = open_catalog_readonly(paths.catalog_path)
            try:
                yield Library(store, app.embedder.embed_query, db), seconds
            finally:
                db.close()
        finally:
            store.close()


def outcome(find: Callable[[str], dict[str, Any]], row: dict[str, Any]
            ) -> tuple[str, str | None, float]:
    """right / wrong / not found for one query, the file answered, and the seconds taken."""
    from ragd.daemon.concepts.queries import Refusal

    t0 = time.perf_counter()
    try:
        got: str | None = Path(find(row["query"])["source"]).name
    except Refusal as exc:
        if exc.code != "RECORD_NOT_FOUND":
            raise
        got = None
    took = time.perf_counter() - t0
    if got is None:
        return "not found", None, took
    return ("right" if got in row["expected"] else "wrong"), got, took


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per kind and overall: accuracy on positives, false matches on negatives."""
    kinds: dict[str, dict[str, int]] = {}
    for r in rows:
        k = kinds.setdefault(r["kind"], {"queries": 0, **dict.fromkeys(OUTCOMES, 0)})
        k["queries"] += 1
        k[r["outcome"]] += 1
    pos = [r for r in rows if r["expected"]]
    neg = [r for r in rows if not r["expected"]]
    return {
        "kinds": kinds,
        "positives": len(pos), "negatives": len(neg),
        "positive_right": sum(r["outcome"] == "right" for r in pos),
        "positive_wrong": sum(r["outcome"] == "wrong" for r in pos),
        "positive_accuracy": round(sum(r["outcome"] == "right" for r in pos) / len(pos), 3),
        "negative_false_matches": sum(r["outcome"] != "not found" for r in neg),
        "negative_false_match_rate": round(
            sum(r["outcome"] != "not found" for r in neg) / len(neg), 3)}


def report(summary: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    print(table("find_document per kind of query",
                [[k, v["queries"], v["right"], v["wrong"], v["not found"]]
                 for k, v in summary["kinds"].items()],
                ["kind", "queries", "right", "wrong book", "not found"]))
    print()
    print(f"positives: {summary['positive_right']}/{summary['positives']} right "
          f"(accuracy {summary['positive_accuracy']:.3f}), {summary['positive_wrong']} wrong "
          f"book; negatives: {summary['negative_false_matches']}/{summary['negatives']} "
          f"matched a book (false-match rate {summary['negative_false_match_rate']:.3f})")
    misses = [r for r in rows if r["outcome"] != ("right" if r["expected"] else "not found")]
    if misses:
        print()
        print(table("Misses", [[repr(r["query"]), r["kind"], r["outcome"], r["got"] or "-"]
                               for r in misses], ["query", "kind", "outcome", "answered"]))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, help="keep the index here (reused by the next run)")
    ap.add_argument("--queries", type=Path, default=QUERIES)
    args = ap.parse_args(argv)
    queries = load_queries(args.queries)
    tmp = None if args.home else tempfile.mkdtemp(prefix="ragd-bench-doc-by-name-")
    home = args.home or Path(tmp or "")
    try:
        with library(home) as (lib, seconds):
            docs = lib.documents()
            rows = []
            for q in queries:
                result, got, took = outcome(lib.find_document, q)
                rows.append({**q, "outcome": result, "got": got, "seconds": round(took, 4)})
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    summary = summarise(rows)
    report(summary, rows)
    build = {k: round(v, 1) for k, v in seconds.items()}
    print(f"\n{len(docs)} books analysed; model load {build['model_load']} s, index "
          f"{build['index']} s, analysis {build['analyse']} s"
          f"{' (a kept home: only what changed)' if build['reused'] else ''}; "
          f"{sum(r['seconds'] for r in rows) / len(rows):.3f} s per query")
    path = RESULTS / "doc_by_name.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "machine": machine(), "titles": {Path(d["source"]).name: d["title"] for d in docs},
        "build_seconds": build, **summary, "rows": rows}, indent=1, ensure_ascii=False),
        encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
