"""Extraction in worker processes against reading in the daemon: throughput and memory of an
index from empty, per source, the two ways measured alternately in one run (issue 34, 0041).

    python bench/extract.py [--sources vault,mail,books] [--rounds 2] [--quick] [--notes N]
                            [--books-count N] [--no-embed]
                            [--vault PATH] [--mail PATH] [--books PATH]

Sources: the largest Obsidian vault of ``vault/`` (the most notes), the whole ``mail/`` folder
(mboxes, Maildirs, .eml) and the books of ``books/`` (EPUB, PDF, MOBI) in a Calibre library
built once with ``calibredb add``, or as a project folder when calibredb is not installed.
``--quick``: the first 300 notes, one small mbox and one small Maildir, 5 books (3 EPUB,
2 PDF): about 15 minutes on a busy two-core machine. ``--notes N``: the vault's first N notes;
``--books-count N``: the N smallest EPUB and PDF, in turn.

Each source is indexed from empty (a fresh temporary RAGD_HOME, the exported model shared
through a link) with an in-process ``App`` and the daemon's own embedder, as ``ragd index``
does, two ways: "in-process" (the pool closed, ``app.indexer.extract = None``: files read on
the daemon's threads through ``extract/work.py``, as before 0041) and "pool" (the extraction
workers ``App`` opens), alternating in-process, pool, in-process, pool ... for ``--rounds``
rounds. Every run is a child process of its own (``--one``), so its peak memory is its own.

Figures per run: wall seconds of the indexing pass (``sync_all``; the embedding, which costs
the same both ways and comes after the reading, is in it, and also left out: "w/o embed"),
sources/s, the report's stage seconds (``read`` + ``chunk``: the reading, wherever it ran;
``read_wait``: what the writer waited for it), the daemon side's resident memory after the
model's warm-up, its peak during the pass (VmHWM, reset after the warm-up) and after it, and
the extraction workers' peak (the sum of their VmHWM, sampled from /proc while the pass runs).
The pool/in-process ratios are taken round by round (the runs beside each other) and their
median is reported. ``--no-embed`` ends each pass once its sources are committed, as the
daemon's writer does (its embedding thread is left out): the whole corpora in minutes.

Prints tables; writes bench/results/extract.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import corpus, median, rss_mb, table, write_json  # noqa: E402

MODES = ("in-process", "pool")
SOURCES = ("vault", "mail", "books")
QUICK_NOTES = 300
QUICK_MAIL = ("mbox/asterix-dev-201709-mailarchivesao.mbox", "maildir/notmuch-default")
QUICK_BOOKS = 5  # the smallest EPUB and PDF in turn: 3 EPUB, 2 PDF
WORKER_MODULE = "ragd.daemon.extract.worker"
MODELS = Path.home() / ".cache" / "ragd-bench" / "extract-models"  # exported once, kept
SAMPLE_S = 0.25
STAGE_ORDER = ("scan", "read", "chunk", "read_wait", "commit", "embed")


# -- pure logic (tests/bench/test_bench_extract.py) ----------------------------------------------
def descendants(parents: Mapping[int, int], root: int) -> set[int]:
    """Every process below ``root`` in a pid -> parent pid map."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in out and pid != root:
            out.add(pid)
            todo += children.get(pid, ())
    return out


def take_in_turn(lists: Sequence[Sequence[Path]], count: int) -> list[Path]:
    """The first ``count`` items taking one of each list in turn (a list run out is passed)."""
    out: list[Path] = []
    for row in range(max((len(x) for x in lists), default=0)):
        out += [x[row] for x in lists if row < len(x)]
    return out[:count]


def read_chunk_s(stages: Mapping[str, float]) -> float:
    """Seconds spent reading (parsing, converting) and chunking, wherever it ran."""
    return float(stages.get("read", 0.0)) + float(stages.get("chunk", 0.0))


def stage_order(names: Iterable[str]) -> list[str]:
    """Stage names in the order of a pass (the known ones first), each once."""
    seen = set(names)
    return [k for k in STAGE_ORDER if k in seen] + sorted(seen - set(STAGE_ORDER))


def rest_s(run: Mapping[str, Any]) -> float:
    """A pass's wall seconds but its embedding: what reading where it runs can change."""
    return float(run["wall_s"]) - float(run["stages"].get("embed", 0.0))


def summarise(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One source's runs -> per mode the medians over rounds, and the pool/in-process ratios
    taken round by round (the two runs of a round ran beside each other) with their median."""
    by_mode: dict[str, dict[int, Mapping[str, Any]]] = {m: {} for m in MODES}
    for run in runs:
        by_mode[run["mode"]][run["round"]] = run
    modes: dict[str, Any] = {}
    for mode, rounds in by_mode.items():
        rs = list(rounds.values())
        if not rs:
            continue
        stages = sorted({k for r in rs for k in r["stages"]})
        modes[mode] = {
            "rounds": len(rs),
            "sources": median([r["sources"] for r in rs]),
            "skipped": median([r["skipped"] for r in rs]),
            "chunks": median([r["chunks"] for r in rs]),
            "wall_s": median([r["wall_s"] for r in rs]),
            "sources_per_s": median([r["sources"] / r["wall_s"] for r in rs]),
            "rest_s": median([rest_s(r) for r in rs]),
            "read_chunk_s": median([read_chunk_s(r["stages"]) for r in rs]),
            "stages": {k: median([r["stages"].get(k, 0.0) for r in rs]) for k in stages},
            "base_mb": median([r["base_mb"] for r in rs]),
            "peak_mb": median([r["peak_mb"] for r in rs]),
            "after_mb": median([r["after_mb"] for r in rs]),
            "workers_mb": median([r["workers_mb"] for r in rs]),
            "others_mb": median([r["others_mb"] for r in rs]),
        }
    pairs = [(by_mode["in-process"][n], by_mode["pool"][n])
             for n in sorted(by_mode["in-process"]) if n in by_mode["pool"]]
    wall = [p["wall_s"] / i["wall_s"] for i, p in pairs if i["wall_s"] > 0]
    rest = [rest_s(p) / rest_s(i) for i, p in pairs if rest_s(i) > 0]
    rc = [read_chunk_s(p["stages"]) / read_chunk_s(i["stages"]) for i, p in pairs
          if read_chunk_s(i["stages"]) > 0]
    return {"modes": modes, "pairs": len(pairs), "wall_ratios": wall, "rest_ratios": rest,
            "read_chunk_ratios": rc, "wall_ratio": median(wall), "rest_ratio": median(rest),
            "read_chunk_ratio": median(rc)}


# -- one run, in a child process ------------------------------------------------------------------
def process_table() -> dict[int, int]:
    """pid -> parent pid of every process /proc shows."""
    out: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()
            out[int(stat.parent.name)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


class ChildSampler:
    """The peak memory (VmHWM) of every process below this one, sampled until stopped: the
    extraction workers, and the others (conversion workers, ebook-convert)."""

    def __init__(self) -> None:
        self.peak: dict[int, float] = {}
        self.worker: dict[int, bool] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def start(self) -> ChildSampler:
        self._thread.start()
        return self

    def sample(self) -> None:
        for pid in descendants(process_table(), os.getpid()):
            if pid not in self.worker:
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                except OSError:
                    continue
                self.worker[pid] = WORKER_MODULE.encode() in cmd
            value = rss_mb("VmHWM", pid)
            if value == value:  # not NaN: still there
                self.peak[pid] = max(self.peak.get(pid, 0.0), value)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self.sample()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        self.sample()  # the idle workers are still there: their final peak
        workers = [v for pid, v in self.peak.items() if self.worker.get(pid)]
        others = [v for pid, v in self.peak.items() if not self.worker.get(pid)]
        return {"workers_mb": sum(workers), "workers": len(workers),
                "others_mb": sum(others), "others": len(others)}


def code_version() -> str:
    """A hash of the extraction code this run imported: the repository may change under a
    long run, and rounds of different code are not a pair."""
    import hashlib

    import ragd.daemon.extract as extract
    import ragd.daemon.indexer as indexer

    h = hashlib.sha256()
    for package in (extract, indexer):
        for path in sorted(Path(package.__path__[0]).glob("*.py")):
            h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()[:12]


def reset_peak() -> bool:
    """Reset this process's VmHWM to its present RSS (Linux: clear_refs 5)."""
    try:
        Path("/proc/self/clear_refs").write_text("5", encoding="ascii")
        return True
    except OSError:
        return False


def overrides_for(source: str, root: Path) -> dict[str, Any]:
    off = {"obsidian.enabled": False, "email.enabled": False, "calibre.enabled": False,
           "rss.enabled": False}
    if source == "vault":
        return {**off, "obsidian.enabled": True, "obsidian.vaults": [str(root)]}
    if source == "mail":
        return {**off, "email.enabled": True, "email.paths": [str(root)]}
    if (root / "metadata.db").is_file():  # a Calibre library
        return {**off, "calibre.enabled": True, "calibre.libraries": [str(root)]}
    return off  # a folder of books: a project collection


def one(source: str, mode: str, root: Path, round_no: int, embed: bool = True
        ) -> dict[str, Any]:
    """Index ``root`` from empty, ``mode`` one way; the figures of that run. ``embed`` False:
    the pass ends once its sources are committed, as the daemon's does (its embedding thread
    is left out here)."""
    for key in list(os.environ):  # nothing of the caller's own ragd settings
        if key.startswith("RAGD_") and key != "RAGD_CORPUS":
            del os.environ[key]
    os.environ["HF_HUB_OFFLINE"] = "1"
    started, code = time.strftime("%H:%M:%S"), code_version()
    with tempfile.TemporaryDirectory(prefix="ragd-bench-extract-") as tmp:
        home = Path(tmp)
        (home / "data").mkdir(mode=0o700)
        (home / "data" / "models").symlink_to(MODELS, target_is_directory=True)
        os.environ["RAGD_HOME"] = str(home)
        from ragd.daemon.embed.embedding import make_embedder
        from ragd.daemon.indexer.timings import Spans
        from ragd.daemon.runtime.app import App
        from ragd.daemon.settings.config import load_config
        from ragd.daemon.settings.paths import resolve_paths

        paths = resolve_paths()
        config = load_config(paths, overrides_for(source, root))
        embedder = make_embedder(config.embedding, paths.data_dir)  # once, for this run
        with App(paths, config, embedder=embedder) as app:
            if source == "books" and not (root / "metadata.db").is_file():
                app.create_project("books", str(root))
            if mode == "in-process":
                assert app.indexer.extract is not None, "App opened no extraction pool"
                app.indexer.extract.close()
                app.indexer.extract = None
            # Every read_wait span of the pass, not the ring's last 4,096 (a span a file).
            app.indexer.spans = Spans(kept=10_000_000)
            app.indexer.background = not embed
            embedder.embed(["warm up"])
            base = rss_mb()
            was_reset = reset_peak()
            sampler = ChildSampler().start()
            t0 = time.perf_counter()
            start = time.monotonic()
            (report,) = app.sync_all()
            wall = time.perf_counter() - t0
            end = time.monotonic()
            peak, after = rss_mb("VmHWM"), rss_mb()
            children = sampler.stop()
            waited = app.indexer.spans.between(start, end).get("read_wait", 0.0)
            info = app.collection_info(report.collection)
            starts = app.indexer.extract.starts if app.indexer.extract is not None else 0
        stages = {k: round(v, 3) for k, v in report.stage_seconds.items()}
        stages["read_wait"] = round(waited, 3)
    return {"source": source, "mode": mode, "round": round_no, "collection": report.collection,
            "started": started, "code": code,
            "sources": report.indexed, "skipped": sum(report.skipped.values()),
            "skip_codes": dict(report.skipped), "chunks": info["chunk_count"],
            "warnings": dict(Counter(code for _, code in report.warnings)),
            "truncated": sorted(path for path, code in report.warnings
                                if code == "text_truncated")[:20],
            "embedded": report.embedded, "wall_s": round(wall, 3), "stages": stages,
            "base_mb": round(base, 1), "peak_mb": round(peak, 1), "peak_reset": was_reset,
            "after_mb": round(after, 1), "workers_mb": round(children["workers_mb"], 1),
            "workers": children["workers"], "others_mb": round(children["others_mb"], 1),
            "others": children["others"], "pool_starts": starts}


# -- the parent: sources, alternation, tables ----------------------------------------------------
def largest_vault(vaults: Path) -> Path:
    return max((p for p in vaults.iterdir() if p.is_dir()),
               key=lambda p: sum(1 for _ in p.rglob("*.md")))


def copy_some(root: Path, rels: Iterable[str], to: Path) -> Path:
    for rel in rels:
        src, dst = root / rel, to / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy2(src, dst)
    return to


def book_files(books: Path, count: int | None) -> list[Path]:
    """Every book (``count`` None), else the ``count`` smallest EPUB and PDF taken in turn."""
    if count is None:
        return sorted(p for sub in ("epub", "pdf", "mobi") for p in (books / sub).glob("*")
                      if p.is_file())
    by_size = [sorted((p for p in (books / sub).glob("*") if p.is_file()),
                      key=lambda p: p.stat().st_size) for sub in ("epub", "pdf")]
    return take_in_turn(by_size, count)


def prepare(source: str, args: argparse.Namespace, work: Path) -> tuple[Path, str]:
    """The folder a source's runs index (a slice of it for --quick), and what it is."""
    if source == "vault":
        vault = args.vault or largest_vault(corpus("vault"))
        count = args.notes or (QUICK_NOTES if args.quick else None)
        if count is None:
            return vault, f"vault {vault.name}"
        notes = sorted(str(p.relative_to(vault)) for p in vault.rglob("*.md")
                       if not any(part.startswith(".") for part in p.relative_to(vault).parts))
        return (copy_some(vault, notes[:count], work / "vault"),
                f"vault {vault.name}, first {min(count, len(notes))} notes")
    if source == "mail":
        mail = args.mail or corpus("mail")
        if not args.quick:
            return mail, f"mail {mail}"
        return copy_some(mail, QUICK_MAIL, work / "mail"), "mail: " + ", ".join(QUICK_MAIL)
    books = args.books or corpus("books")
    files = book_files(books, args.books_count or (QUICK_BOOKS if args.quick else None))
    if shutil.which("calibredb") is None:
        folder = work / "books"
        for f in files:
            copy_some(f.parent, [f.name], folder / f.parent.name)
        return folder, f"{len(files)} books as a project folder (no calibredb)"
    from bench.calibre import build_library

    library = work / "Library"
    build_library(books, library, files)
    return library, f"{len(files)} books in a Calibre library"


def prepare_model() -> None:
    """Export (derive) the daemon's model graph once, outside the timed children."""
    MODELS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ragd-bench-extract-model-") as tmp:
        code = ("import os, sys\nfrom pathlib import Path\n"
                "from ragd.daemon.embed.embedding import make_embedder\n"
                "from ragd.daemon.settings.config import load_config\n"
                "from ragd.daemon.settings.paths import resolve_paths\n"
                "p = resolve_paths(); p.ensure()\n"
                "make_embedder(load_config(p).embedding, p.data_dir).embed(['warm up'])\n")
        home = Path(tmp)
        (home / "data").mkdir(mode=0o700)
        (home / "data" / "models").symlink_to(MODELS, target_is_directory=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
        subprocess.run([sys.executable, "-c", code], check=True,
                       env={**env, "RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1"})


def warm_cache(root: Path) -> None:
    """Read every file once, so the first run does not pay the disk for the others."""
    for p in root.rglob("*"):
        if p.is_file():
            with p.open("rb") as fh:
                while fh.read(1 << 20):
                    pass


def run_child(source: str, mode: str, root: Path, round_no: int, embed: bool
              ) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", source, mode, str(root), str(round_no),
           *([] if embed else ["--no-embed"])]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=3 * 3600)
    if done.returncode != 0:
        sys.exit(f"error: run {source} {mode} round {round_no} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sources", default=",".join(SOURCES),
                    help="a comma-separated subset of " + ",".join(SOURCES))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true",
                    help=f"the first {QUICK_NOTES} notes, a small mbox and Maildir, 5 books")
    ap.add_argument("--notes", type=int, default=None,
                    help=f"the vault's first N notes (default: all; --quick: {QUICK_NOTES})")
    ap.add_argument("--books-count", type=int, default=None, metavar="N",
                    help="the N smallest EPUB and PDF in turn (default: every book; --quick: "
                    f"{QUICK_BOOKS})")
    ap.add_argument("--no-embed", action="store_true",
                    help="end each pass once its sources are committed (no embedding)")
    ap.add_argument("--vault", type=Path, default=None)
    ap.add_argument("--mail", type=Path, default=None)
    ap.add_argument("--books", type=Path, default=None)
    ap.add_argument("--one", nargs=4, metavar=("SOURCE", "MODE", "ROOT", "ROUND"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        source, mode, root, round_no = args.one
        print(json.dumps(one(source, mode, Path(root), int(round_no), not args.no_embed)))
        return 0
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    if unknown := [s for s in sources if s not in SOURCES]:
        sys.exit(f"error: unknown source(s) {', '.join(unknown)}\n"
                 f"hint: --sources takes a subset of {','.join(SOURCES)}")
    prepare_model()
    out: dict[str, Any] = {"quick": args.quick, "rounds": args.rounds, "notes": args.notes,
                           "books_count": args.books_count,
                           "embed": not args.no_embed, "sources": {}}
    rows, stage_rows = [], []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragd-bench-extract-data-") as tmp:
        for source in sources:
            root, what = prepare(source, args, Path(tmp) / source)
            warm_cache(root)
            runs = []
            for n in range(args.rounds):
                for mode in MODES:
                    run = run_child(source, mode, root, n, not args.no_embed)
                    runs.append(run)
                    print(f"{source} {mode} round {n} ({run['started']}, code {run['code']}): "
                          f"{run['wall_s']:.1f} s, "
                          f"{run['sources']} sources, stages {run['stages']}",
                          file=sys.stderr, flush=True)
            s = summarise(runs)
            out["sources"][source] = {"root": str(root), "what": what, "runs": runs,
                                      "summary": s}
            for mode, m in s["modes"].items():
                pool = mode == "pool"
                rows.append([source, mode, m["rounds"], m["sources"], m["skipped"], m["chunks"],
                             m["wall_s"], m["sources_per_s"], m["rest_s"], m["read_chunk_s"],
                             m["base_mb"], m["peak_mb"], m["after_mb"], m["workers_mb"],
                             *((s["wall_ratio"], s["rest_ratio"], s["read_chunk_ratio"])
                               if pool else (1.0, 1.0, 1.0))])
                stage_rows.append([source, mode, m["stages"]])
            print(f"{source}: {what}", file=sys.stderr, flush=True)
    out["total_s"] = round(time.perf_counter() - started, 1)
    size = ", quick" if args.quick else "".join(
        [f", {args.notes} notes" if args.notes else "",
         f", {args.books_count} books" if args.books_count else ""])
    print(table("Indexing from empty: in-process reading against the extraction pool "
                f"(medians of {args.rounds} alternated rounds{size}"
                f"{', no embedding' if args.no_embed else ''}; x: pool / in-process, "
                "the median of the rounds' ratios)",
                rows, ["source", "mode", "rounds", "sources", "skipped", "chunks", "wall s",
                       "sources/s", "w/o embed s", "read+chunk s", "base MB", "peak MB",
                       "after MB", "workers MB", "wall x", "w/o embed x", "read+chunk x"]))
    print()
    stages = stage_order(k for *_, st in stage_rows for k in st)
    print(table("Stage seconds (medians; read and chunk run beside the writer, read_wait is "
                "what the writer waited for them)",
                [[src, mode, *(st.get(k, 0.0) for k in stages)] for src, mode, st in stage_rows],
                ["source", "mode", *stages]))
    if len(codes := {r["code"] for got in out["sources"].values() for r in got["runs"]}) > 1:
        print(f"\nwarning: the extraction code changed during the run ({len(codes)} versions:"
              " see code and started in the JSON): rounds of different code are not pairs")
    for source, got in out["sources"].items():
        if len({r["chunks"] for r in got["runs"]}) > 1:  # e.g. a book cut (text_truncated)
            print(f"\nnote: {source}: the runs did not index the same chunks: " + "; ".join(
                f"{r['mode']} {r['round']}: {r['chunks']} {r['warnings']}"
                for r in got["runs"]))
    print(f"\nwrote {write_json('extract', out)} ({out['total_s']:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
