"""Deadline: every item of every shared corpus read as an extraction worker reads it, timed
item by item, against ``[extract] timeout_s`` (issue 34, decision 0041).

    python bench/deadline.py [--quick] [--corpora vault,mail,rss,books,calibre]
                             [--longest 10] [--timeout S] [--no-calibre-build] [--profile]

In this process, with the code a worker runs (``ragd.daemon.extract.work``): ``load_file``
for a file, ``load_entry`` for a container's entry, with the worker's ``Chunker`` (the real
tokenizer, 256 tokens, a chunking budget of ``timeout_s`` x ``CHUNK_SHARE``) and a fresh
doc store per corpus, so that every document converts. No embedding.

Corpora (under the shared corpus, ``RAGD_CORPUS``): each vault of ``vault/`` (vault kind),
``mail/`` (mail kind: mboxes, Maildirs, .eml), ``rss/`` (rss kind), ``books/`` as a project
folder (EPUB, PDF, MOBI through the conversion worker), the Calibre library of ``books/`` (its
``metadata.db``; the shared one is empty) and, when calibredb is installed, a library built
from the books with ``calibredb add`` (not timed). ``beir/`` is checked and reported as not
read when no kind lists its files.

An item's time is what the deadline is charged with: the worker's own work, conversions left
out (they run on ``documents.timeout_s``, announced by ``phase`` frames). Conversions are timed
apart, at the converter, as the worker brackets them. For a container's entry the time also
holds producing the entry (the listing step before it: mbox framing, MIME headers; a feed's
parse is a conversion), which the daemon bounds by the same deadline in a step of its own:
adding the two overstates an entry a little, never understates it. Beside the wall time, this
process's CPU time (every thread's): the same work on a machine less busy than this one. ``--quick`` times every 10th file and
loads every 10th entry (containers are still listed whole). Then the chunking stage alone of
the longest texts: as a worker does it (budget, probes) and unbounded, the run with less CPU
time of two, with the CPU time (load-independent) beside the wall time.
``--profile``: each corpus's slowest item again under cProfile (conversions cached), its top
functions printed.

Prints tables; writes bench/results/deadline.json.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import functools
import heapq
import io
import itertools
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import CORPUS, corpus, pct, table, write_json  # noqa: E402

CORPORA = ("vault", "mail", "rss", "books", "calibre")
QUICK_STEP = 10


# -- pure logic (tests/bench/test_bench_deadline.py) ----------------------------------------
@dataclass(frozen=True)
class Item:
    """One file or entry read: what the deadline is charged with and where the time went."""

    name: str
    seconds: float  # charged: the worker's own work (listing step + load - conversions)
    convert_s: float = 0.0  # conversions inside it (their own limit)
    chunk_s: float = 0.0  # the chunking stage (inside ``seconds``)
    list_s: float = 0.0  # a container entry's listing step (inside ``seconds``)
    cpu_s: float = 0.0  # this process's CPU time over the same (every thread's)
    chars: int = 0
    chunks: int = 0
    outcome: str = "doc"  # "doc", a skip code, or "error: <type>"
    truncated: bool = False


def summarise(items: Sequence[Item], timeout_s: float) -> dict[str, Any]:
    """A corpus's figures: count, total, p50, p99, the slowest item, the slowest chunking and
    conversion, and the room (the deadline over the slowest item)."""
    out: dict[str, Any] = {"items": len(items)}
    if not items:
        return {**out, "total_s": 0.0, "p50_s": None, "p99_s": None, "max_s": None,
                "max_item": "", "max_chunk_s": None, "max_chunk_item": "",
                "convert_total_s": 0.0, "max_convert_s": None, "max_convert_item": "",
                "max_cpu_s": None, "max_cpu_item": "", "room": None, "cpu_room": None, "skipped": 0, "errors": 0, "truncated": 0}
    secs = [i.seconds for i in items]
    slowest = max(items, key=lambda i: i.seconds)
    chunkiest = max(items, key=lambda i: i.chunk_s)
    converting = max(items, key=lambda i: i.convert_s)
    busiest = max(items, key=lambda i: i.cpu_s)
    return {**out, "total_s": round(sum(secs), 3), "p50_s": round(pct(secs, 50), 4),
            "p99_s": round(pct(secs, 99), 4), "max_s": round(slowest.seconds, 4),
            "max_item": slowest.name, "max_chunk_s": round(chunkiest.chunk_s, 4),
            "max_chunk_item": chunkiest.name,
            "convert_total_s": round(sum(i.convert_s for i in items), 3),
            "max_convert_s": round(converting.convert_s, 4),
            "max_convert_item": converting.name if converting.convert_s > 0 else "",
            "max_cpu_s": round(busiest.cpu_s, 4), "max_cpu_item": busiest.name,
            "room": room(timeout_s, slowest.seconds), "cpu_room": room(timeout_s, busiest.cpu_s),
            "skipped": sum(1 for i in items if i.outcome not in ("doc",)
                           and not i.outcome.startswith("error")),
            "errors": sum(1 for i in items if i.outcome.startswith("error")),
            "truncated": sum(1 for i in items if i.truncated)}


def room(timeout_s: float, seconds: float) -> float | None:
    """How many times the slowest item fits in the deadline (None for no time at all)."""
    return round(timeout_s / seconds, 1) if seconds > 0 else None


def slowest(items: Sequence[Item], n: int) -> list[Item]:
    return heapq.nlargest(n, items, key=lambda i: i.seconds)


def sampled(n: int, step: int) -> bool:
    """Whether the n-th item (from 0) is timed when one in ``step`` is."""
    return step <= 1 or n % step == 0


def short(name: str, width: int = 60) -> str:
    """A name cut in its middle to ``width`` characters."""
    if len(name) <= width:
        return name
    half = (width - 1) // 2
    return name[:half] + "…" + name[-(width - 1 - half):]


# -- timing ---------------------------------------------------------------------------------
class TimedConverter:
    """The doc store's converter, timed as a worker's ``phase`` frames bracket it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.count = 0

    def convert(self, fmt: str, data: bytes) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner.convert(fmt, data)
        finally:
            self.seconds += time.perf_counter() - t0
            self.count += 1

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def timed_chunker(count_tokens: Any, max_tokens: int, budget_s: float | None) -> Any:
    """The worker's ``Chunker``, recording each call's seconds and document."""
    from ragd.daemon.extract.work import Chunker

    @dataclass(frozen=True)
    class TimedChunker(Chunker):
        calls: list[tuple[float, Any]] = field(default_factory=list, compare=False)

        def __call__(self, doc: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return super().__call__(doc)
            finally:
                self.calls.append((time.perf_counter() - t0, doc))

    return TimedChunker(count_tokens, max_tokens, budget_s)


@dataclass
class Longest:
    """The N longest texts seen (what the chunker was given), for the chunking table."""

    n: int
    heap: list[tuple[int, int, str, Any]] = field(default_factory=list)
    _seq: Iterator[int] = field(default_factory=itertools.count)

    def offer(self, name: str, doc: Any) -> None:
        row = (len(doc.text), next(self._seq), name, doc)
        if len(self.heap) < self.n:
            heapq.heappush(self.heap, row)
        elif row[0] > self.heap[0][0]:
            heapq.heapreplace(self.heap, row)

    def rows(self) -> list[tuple[str, Any]]:
        return [(name, doc) for _, _, name, doc in sorted(self.heap, reverse=True)]


@dataclass
class Run:
    """What every corpus shares: the chunker, the deadline, the sampling, the longest texts."""

    chunker: Any
    timeout_s: float
    max_bytes: int
    step: int
    longest: Longest
    profile: bool = False
    conv: TimedConverter | None = None
    profiles: dict[str, list[str]] = field(default_factory=dict)

    def measure(self, name: str, read: Callable[[], Any], list_s: float = 0.0,
                list_convert_s: float = 0.0, list_cpu_s: float = 0.0) -> Item:
        """Time one item: ``read()`` is ``load_file`` or ``load_entry``."""
        from ragd.daemon.convert.bounds import TRUNCATED
        from ragd.daemon.models import Document, Skip

        c0 = self.conv.seconds if self.conv else 0.0
        self.chunker.calls.clear()
        p0 = time.process_time()
        loaded = read()
        cpu_s = time.process_time() - p0 + list_cpu_s
        convert_s = (self.conv.seconds if self.conv else 0.0) - c0
        chunk_s = sum(s for s, _ in self.chunker.calls)
        for _, given in self.chunker.calls:
            self.longest.offer(name, given)
        self.chunker.calls.clear()
        doc = loaded.doc
        outcome = ("doc" if isinstance(doc, Document) else doc.code if isinstance(doc, Skip)
                   else f"error: {type(doc).__name__}")
        if isinstance(loaded.chunked, Exception):
            outcome = f"error: chunking {type(loaded.chunked).__name__}"
        chunks = len(loaded.chunked) if isinstance(loaded.chunked, list) else 0
        chars = len(doc.text) if isinstance(doc, Document) else 0
        truncated = isinstance(doc, Document) and TRUNCATED in doc.warnings
        charged = max(0.0, loaded.seconds - convert_s) + max(0.0, list_s - list_convert_s)
        return Item(name, charged, convert_s + list_convert_s, chunk_s, list_s, cpu_s, chars,
                    chunks, outcome, truncated)

    def files(self, kind: Any, root: Path) -> list[Item]:
        """Every file of a one-document-per-file kind (vault, folder)."""
        from ragd.daemon.extract.work import load_file

        items = []
        for n, f in enumerate(kind.walk(root).files):
            if sampled(n, self.step):
                items.append(self.measure(f.path, functools.partial(
                    load_file, kind, root, f.path, self.max_bytes, self.chunker)))
        return items

    def containers(self, kind: Any, root: Path) -> tuple[list[Item], float]:
        """Every entry of every container of a container kind (mail, rss, calibre); also the
        slowest step after a container's last entry (its end)."""
        from ragd.daemon.extract.work import load_entry

        items: list[Item] = []
        tail = 0.0
        n = 0
        for f in kind.walk(root).files:
            entries = iter(kind.entries(root, f.path, 0))
            while True:
                c0 = self.conv.seconds if self.conv else 0.0
                t0, p0 = time.perf_counter(), time.process_time()
                entry = next(entries, None)
                gap, gap_cpu = time.perf_counter() - t0, time.process_time() - p0
                gap_conv = (self.conv.seconds if self.conv else 0.0) - c0
                if entry is None:
                    tail = max(tail, gap - gap_conv)
                    break
                n += 1
                if not sampled(n - 1, self.step):
                    continue
                name = f"{f.path}#{entry.locator or short(entry.key, 40)}"
                items.append(self.measure(name, functools.partial(load_entry, entry,
                                                                   self.chunker),
                                          gap, gap_conv, gap_cpu))
        return items, tail

    def profile_item(self, label: str, read: Callable[[], Any]) -> None:
        """``read`` again under cProfile: the top functions by own time and cumulative."""
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.runcall(read)
        seconds = time.perf_counter() - t0
        lines = [f"{label}: {seconds:.3f} s again under cProfile (conversions cached)"]
        for sort in ("tottime", "cumulative"):
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats(sort).print_stats(12)
            body = buf.getvalue()
            start = body.find("   ncalls")
            lines += [f"-- by {sort}", *body[start:].rstrip().splitlines()]
        self.profiles[label] = lines
        print("\n".join(lines), flush=True)


# -- the corpora ----------------------------------------------------------------------------
@dataclass
class Documents:
    """A fresh doc store with its conversion worker, the converter timed."""

    docs: Any
    conv: TimedConverter
    tmp: tempfile.TemporaryDirectory[str]


def open_docs(settings: Any) -> Documents:
    from ragd.daemon.convert.documents import open_documents
    from ragd.daemon.convert.formats import FORMATS

    tmp = tempfile.TemporaryDirectory(prefix="ragd-bench-deadline-")
    docs = open_documents(Path(tmp.name), settings)
    docs.store.convert(b"%PDF-1.4 warm up", FORMATS["pdf"])  # starts the conversion worker
    conv = TimedConverter(docs.store.converter)
    docs.store.converter = conv
    return Documents(docs, conv, tmp)


def read_corpus(run: Run, label: str, kind_name: str, root: Path, settings: Any,
                exclude: Sequence[str]) -> dict[str, Any]:
    """One collection read item by item; its figures."""
    from ragd.daemon.sources.base import kind_for

    d = open_docs(settings)
    run.conv = d.conv
    t0 = time.perf_counter()
    try:
        kind: Any = kind_for(kind_name, exclude, d.docs, root)
        tail = 0.0
        if kind_name in ("vault", "folder"):
            items = run.files(kind, root)
        else:
            items, tail = run.containers(kind, root)
        wall = time.perf_counter() - t0
        if run.profile and items:
            worst = max(items, key=lambda i: i.seconds)
            run.profile_item(f"{label} {worst.name}", again(kind, kind_name, root, worst, run))
    finally:
        d.docs.close()
        d.tmp.cleanup()
        run.conv = None
    s = summarise(items, run.timeout_s)
    print(f"{label}: {s['items']} items in {wall:.1f} s, slowest {s['max_s']} s "
          f"({s['max_item']})", file=sys.stderr, flush=True)
    return {"corpus": label, "kind": kind_name, "root": str(root), "wall_s": round(wall, 2),
            "conversions": d.conv.count, "listing_tail_max_s": round(tail, 4), **s,
            "slowest": [dataclasses.asdict(i) for i in slowest(items, 5)],
            "outcomes": _counts(i.outcome for i in items)}


def again(kind: Any, kind_name: str, root: Path, item: Item, run: Run) -> Callable[[], Any]:
    """A reader of ``item`` once more (for the profile)."""
    from ragd.daemon.extract.work import load_entry, load_file

    if kind_name in ("vault", "folder"):
        return lambda: load_file(kind, root, item.name, run.max_bytes, run.chunker)
    container, _, _ = item.name.partition("#")

    def read() -> Any:
        for entry in kind.entries(root, container, 0):
            if f"{container}#{entry.locator or short(entry.key, 40)}" == item.name:
                return load_entry(entry, run.chunker)
        return None

    return read


def _counts(values: Iterator[str] | Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def build_calibre(books: Path, tmp: Path) -> Path | None:
    """A Calibre library of the shared books (``calibredb add``), or None without calibredb."""
    if shutil.which("calibredb") is None:
        return None
    from bench.calibre import build_library

    library = tmp / "Library"
    t0 = time.perf_counter()
    build_library(books, library)
    print(f"calibre library built in {time.perf_counter() - t0:.1f} s (not timed)",
          file=sys.stderr, flush=True)
    return library


def beir_note() -> str:
    """Why BEIR is not read: which of its files a collection would list."""
    from ragd.daemon.convert.formats import format_for
    from ragd.daemon.sources.base import FolderKind, VaultKind

    beir = CORPUS / "beir"
    if not beir.exists():
        return "beir/: not in the corpus"
    notes = FolderKind.note_suffixes + VaultKind.note_suffixes
    files = [p for p in beir.rglob("*") if p.is_file()]
    read = [p for p in files if p.name.lower().endswith(notes) or format_for(p.name)]
    if read:
        return f"beir/: {len(read)} of {len(files)} files readable (not timed: add a kind)"
    return (f"beir/: skipped: none of its {len(files)} files ("
            + ", ".join(sorted({p.suffix for p in files}))
            + ") is listed by any kind (notes are .md/.markdown/.txt, documents by their "
            "format): SciFact is one JSON Lines corpus fed to the quality bench, not files "
            "an indexer reads")


# -- chunking alone -------------------------------------------------------------------------
def chunk_alone(rows: list[tuple[str, Any]], count_tokens: Any, max_tokens: int,
                budget_s: float) -> list[dict[str, Any]]:
    """The chunking stage of the longest texts alone: as a worker does it (the budget and its
    probes) and unbounded; of two runs each, the one with less CPU time."""
    from ragd.daemon.convert.bounds import TRUNCATED
    from ragd.daemon.extract.work import PROBE_CHARS, Chunker

    out = []
    for name, doc in rows:
        figures: dict[str, Any] = {"item": name, "chars": len(doc.text),
                                   "probed": len(doc.text) > PROBE_CHARS}
        for label, budget in (("worker", budget_s), ("unbounded", None)):
            chunker = Chunker(count_tokens, max_tokens, budget)
            runs = []
            for _ in range(2):  # the figures of the run with less CPU time
                t0, p0 = time.perf_counter(), time.process_time()
                done, chunked = chunker(doc)
                runs.append((time.process_time() - p0, time.perf_counter() - t0,
                             len(chunked) if isinstance(chunked, list) else -1,
                             TRUNCATED in done.warnings and TRUNCATED not in doc.warnings))
            cpu, best, chunks, cut = min(runs)
            figures[f"{label}_s"] = round(best, 3)
            figures[f"{label}_cpu_s"] = round(cpu, 3)
            figures[f"{label}_chunks"] = chunks
            figures[f"{label}_cut"] = cut
        figures["chars_per_s"] = round(len(doc.text) / max(figures["unbounded_s"], 1e-6))
        figures["chars_per_cpu_s"] = round(len(doc.text) / max(figures["unbounded_cpu_s"], 1e-6))
        # What the budget's probes add: the worker's chunking over chunking the text once.
        figures["probe_factor"] = round(figures["worker_cpu_s"]
                                        / max(figures["unbounded_cpu_s"], 1e-6), 2)
        out.append(figures)
        print(f"chunked {short(name)}: {figures}", file=sys.stderr, flush=True)
    return out


# -- main -----------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"time every {QUICK_STEP}th file and load every {QUICK_STEP}th entry")
    ap.add_argument("--corpora", default=",".join(CORPORA),
                    help="which of " + ",".join(CORPORA))
    ap.add_argument("--longest", type=int, default=10, help="texts in the chunking table")
    ap.add_argument("--timeout", type=float, default=None,
                    help="the deadline in seconds (default: [extract] timeout_s)")
    ap.add_argument("--no-calibre-build", action="store_true",
                    help="do not build a Calibre library of the books with calibredb")
    ap.add_argument("--profile", action="store_true",
                    help="each corpus's slowest item again under cProfile")
    args = ap.parse_args()
    chosen = [c.strip() for c in args.corpora.split(",") if c.strip()]
    if unknown := set(chosen) - set(CORPORA):
        sys.exit(f"error: unknown corpora {sorted(unknown)}\nhint: choose from "
                 + ",".join(CORPORA))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ragd.daemon.convert.documents import DocumentSettings
    from ragd.daemon.embed.embedding import tokenizer_file
    from ragd.daemon.extract.pool import CHUNK_SHARE
    from ragd.daemon.models import Document
    from ragd.daemon.settings.config import Config
    from ragd.daemon.text.chunking import tokenizer_counter

    config = Config()
    timeout_s = args.timeout or config.extract.timeout_s
    settings = DocumentSettings.from_config(config)
    max_bytes = int(config.index.max_file_mb * 1024 * 1024)
    exclude = tuple(config.index.exclude)
    max_tokens = 256
    count_tokens = tokenizer_counter(tokenizer_file())
    budget_s = timeout_s * CHUNK_SHARE
    chunker = timed_chunker(count_tokens, max_tokens, budget_s)
    chunker(Document(title="warm up", text="# Warm up\n\nA first text.",
                     source_type="markdown"))
    run = Run(chunker, timeout_s, max_bytes, QUICK_STEP if args.quick else 1,
              Longest(args.longest), args.profile)
    load_before = os.getloadavg()
    print(f"load average before: {load_before}", file=sys.stderr, flush=True)

    results: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    if "vault" in chosen:
        for vault in sorted(p for p in corpus("vault").iterdir() if p.is_dir()):
            results.append(read_corpus(run, f"vault/{vault.name}", "vault", vault, settings,
                                       exclude))
    if "mail" in chosen:
        results.append(read_corpus(run, "mail", "mail", corpus("mail"), settings, exclude))
    if "rss" in chosen:
        results.append(read_corpus(run, "rss", "rss", corpus("rss"), settings, exclude))
    if "books" in chosen:
        results.append(read_corpus(run, "books (folder)", "folder", corpus("books"), settings,
                                   exclude))
    notes = [beir_note()]
    if "calibre" in chosen:
        books = corpus("books")
        for db in sorted(books.rglob("metadata.db")):
            results.append(read_corpus(run, f"calibre {db.parent.relative_to(CORPUS)}",
                                       "calibre", db.parent, settings, exclude))
        if not args.no_calibre_build:
            with tempfile.TemporaryDirectory(prefix="ragd-bench-deadline-calibre-") as tmp:
                library = build_calibre(books, Path(tmp))
                if library is None:
                    notes.append("calibre (built): skipped, calibredb not installed")
                else:
                    results.append(read_corpus(run, "calibre (built from books/)", "calibre",
                                               library, settings, exclude))
    total_wall = time.perf_counter() - t_all

    rows = [[r["corpus"], r["items"], r["total_s"], _or(r["p50_s"]), _or(r["p99_s"]),
             _or(r["max_s"]), short(r["max_item"], 48), _or(r["max_chunk_s"]),
             _or(r["max_cpu_s"]), r["convert_total_s"], _or(r["max_convert_s"]), r["truncated"],
             _or(r["room"])] for r in results]
    every = [i for r in results for i in r["slowest"]]
    mode = f"every {QUICK_STEP}th item" if args.quick else "every item"
    print()
    print(table(f"Items read as a worker reads them ({mode}; deadline {timeout_s:g} s, "
                f"chunk budget {budget_s:g} s; conversions apart)", rows,
                ["corpus", "items", "total s", "p50 s", "p99 s", "max s", "slowest item",
                 "max chunk s", "max cpu s", "convert s", "max convert s", "cut", "room x"]))
    print()
    top = sorted(every, key=lambda i: -i["seconds"])[:10]
    print(table("The slowest items (charged seconds; conversion apart)", [
        [short(i["name"], 64), i["seconds"], i["cpu_s"], i["chunk_s"], i["list_s"],
         i["convert_s"], i["chars"], i["chunks"],
         i["outcome"] + (" (cut)" if i["truncated"] else "")]
        for i in top], ["item", "s", "cpu s", "chunk s", "list s", "convert s", "chars",
                        "chunks", "outcome"]))
    longest = chunk_alone(run.longest.rows(), count_tokens, max_tokens, budget_s)
    print()
    print(table(f"The chunking stage alone, the {len(longest)} longest texts (of 2 runs, "
                f"the one with less CPU)", [
        [short(r["item"], 56), r["chars"], r["worker_s"], r["worker_cpu_s"], r["unbounded_s"],
         r["unbounded_cpu_s"], r["probe_factor"], r["unbounded_chunks"], r["chars_per_cpu_s"],
         "yes" if r["worker_cut"] else "no", _or(room(budget_s, r["worker_s"]))]
        for r in longest],
        ["text", "chars", "worker s", "worker cpu s", "unbounded s", "unbounded cpu s",
         "x cpu", "chunks", "chars/cpu s", "cut by budget", "room x (budget)"]))
    for note in notes:
        print("note:", note)
    load_after = os.getloadavg()
    print(f"load average before {load_before}, after {load_after}")
    worst = max((r for r in results if r["max_s"] is not None), key=lambda r: r["max_s"],
                default=None)
    if worst is not None:
        print(f"slowest item of all: {worst['max_s']} s ({worst['corpus']}: "
              f"{worst['max_item']}), room {worst['room']}x under {timeout_s:g} s")
    print("wrote", write_json("deadline", {
        "quick": args.quick, "timeout_s": timeout_s, "chunk_budget_s": budget_s,
        "max_tokens": max_tokens, "wall_s": round(total_wall, 1),
        "load_before": load_before, "load_after": load_after, "corpora": results,
        "longest_texts": longest, "notes": notes, "profiles": run.profiles}))
    return 0


def _or(v: Any) -> Any:
    return "-" if v is None else v


if __name__ == "__main__":
    raise SystemExit(main())
