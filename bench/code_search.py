"""Code search on a repository ragd's authors did not write (issue 36 items 1 and 2): symbols
MRR@10 and commits MRR@10, by mode, on psf/requests and its history.

    python bench/code_search.py [--sets symbols,commits] [--verbose] [--out NAME]
                                [--mirror GIT_DIR] [--history-commits N] [--home DIR]

The mirror (/work/.mirror/psf+requests/repo by default) is cloned into a temporary folder and
indexed as the code group ``requests`` by an in-process App (Obsidian off, the environment
ignored), with ``code.history_commits`` deep enough for every commit of the commit set (the
daemon's default, 2,000, when that is enough); the sync embeds everything before it returns.

Two question sets (bench/queries/code-requests-*.tsv):
- symbols: ``query<TAB>expected<TAB>kind``, expected ``path::Qualified.name`` (``a|b`` when
  either answers; ``@L<n>`` when only the piece holding line n answers: docs read as line
  windows). A result matches when its file_path and symbol_name are the expected ones; ragd
  names a method ``Class.method``, and its class in its place is a miss, counted apart as
  "class instead of method". Asked in rag_search's hybrid, semantic and keyword modes
  (collection ``requests``, source_type ``code``) and through coderag_search
  (``code_handlers.search``, top_k 10), which drops markdown sections.
- commits: ``query<TAB>sha<TAB>note`` (``a|b`` when two commits made the same change); a result
  matches when its commit_sha starts with the sha. Asked in the three modes with source_type
  ``commit``. How many of the set's commits lie beyond the default history, and how many the
  index lacks, is reported.

A rank is the position in the ten results as a client sees them (a symbol or a commit shown
twice takes two places). For every symbol question whose answer is
not first, what ranks above it (all ten on a miss) is sorted into: the same symbol again (a
symbol cut into parts, or into several chunks), the class of the expected method, tests, docs,
examples, other library symbols and other files (build, CI, config).

Prints markdown tables and writes bench/results/code_search.json (code_search-NAME.json with
--out NAME, for before/after comparisons). --home keeps the clone and its index between runs
(only what changed is read again): measure indexing changes on a fresh run. The JSON names the
ragd commit measured and a digest of daemon/'s uncommitted changes, and says so when daemon/
changed during the run.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, fresh_home, median, pct, write_json  # noqa: E402
from bench.quality import ragd_app  # noqa: E402

MIRROR = Path("/work/.mirror/psf+requests/repo")
QUERIES = REPO / "bench" / "queries"
SETS = {"symbols": QUERIES / "code-requests-symbols.tsv",
        "commits": QUERIES / "code-requests-commits.tsv"}
GROUP = "requests"
K = 10
ENGINE_MODES = ("hybrid", "semantic", "keyword")
CODERAG = "coderag_search"
CATEGORIES = ("same symbol again", "class instead of method", "tests", "docs", "examples",
              "other library symbols", "other files")
DOC_SUFFIXES = (".md", ".mdx", ".markdown", ".rst", ".txt", ".adoc")
OTHER_SUFFIXES = (".yml", ".yaml", ".toml", ".cfg", ".ini", ".json", ".html", ".css", ".bat")


# -- question sets ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """One acceptable answer: a symbol of a file, and for a line window the line it holds."""

    path: str
    name: str
    line: int | None = None

    @classmethod
    def parse(cls, text: str) -> Target:
        where, _, name = text.partition("::")
        name, _, line = name.partition("@L")
        return cls(where, name, int(line) if line else None)


@dataclass(frozen=True)
class Question:
    query: str
    expected: tuple[Target, ...] | str  # symbols: the answers; commits: "sha" or "sha|sha"
    kind: str  # symbols: function | method | ...; commits: the note


def read_set(path: Path, which: str) -> list[Question]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        query, expected, kind = line.split("\t")
        answer: tuple[Target, ...] | str = (
            expected.strip() if which == "commits"
            else tuple(Target.parse(t) for t in expected.split("|")))
        out.append(Question(query.strip(), answer, kind.strip()))
    return out


# -- results ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hit:
    """One result as the benchmark compares it."""

    path: str
    name: str  # symbol_name, or the commit's sha
    kind: str  # symbol_type, or "commit"
    lines: tuple[int, int] | None
    label: str


def engine_hits(app: Any, query: str, mode: str, source_type: str) -> list[Hit]:
    """rag_search's ranking: the code group only, one source type."""
    from ragd.daemon.search.params import build_request

    engine = app.search_engine
    req = build_request(engine, query=query, collection=GROUP, top_k=K, mode=mode,
                        source_type=source_type)
    out = []
    for r in engine.search(req)["results"]:
        m = r["metadata"]
        if source_type == "commit":
            sha = m.get("commit_sha", "")
            out.append(Hit(m.get("file_path", ""), sha, "commit", None,
                           f"{sha[:8]} {r['title'][:70]}"))
        else:
            lines = (int(m.get("start_line", 0)), int(m.get("end_line", 0)))
            out.append(Hit(m.get("file_path", ""), m.get("symbol_name", ""),
                           m.get("symbol_type", ""), lines,
                           f"{m.get('file_path', '')}::{m.get('symbol_name', '')} "
                           f"({m.get('symbol_type', '')}, part {m.get('part', 0)}, "
                           f"L{lines[0]}-{lines[1]})"))
    return out


def coderag_hits(app: Any, query: str, repo: Path) -> list[Hit]:
    """coderag_search's ranking (reference 002). Its results carry no lines: a result's lines
    are those of the piece of its symbol that holds its content, found in the file (what a
    doc window's answer needs)."""
    from ragd.daemon.runtime.code_handlers import search
    from ragd.daemon.stores.code_sources import symbols_in_file

    out = []
    for r in search(app, {"query": query, "top_k": K})["results"]:
        lines = None
        found = _lines_of(repo / r["file_path"], r["content"])
        if found is not None:
            pieces = [(m.get("start_line", 0), m.get("end_line", 0)) for m in (
                row.metadata for row in symbols_in_file(app.catalog, r["file_path"]))
                if m.get("symbol_name") == r["name"]]
            lines = next((p for p in pieces if p[0] <= found[0] <= p[1]), found)
        where = f", L{lines[0]}-{lines[1]}" if lines else ""
        out.append(Hit(r["file_path"], r["name"], r["chunk_type"], lines,
                       f"{r['file_path']}::{r['name']} ({r['chunk_type']}{where})"))
    return out


def _lines_of(path: Path, content: str) -> tuple[int, int] | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # A chunk's text is not always a verbatim slice of the file (reading view, a cut): its
    # opening is looked up, then its first lines that say something.
    probes = [content[:200], *(ln for ln in content.splitlines() if len(ln.strip()) >= 20)]
    for probe in probes[:4]:
        at = text.find(probe) if probe.strip() else -1
        if at >= 0:
            first = text.count("\n", 0, at) + 1 - content.count("\n", 0, content.find(probe))
            return first, first + content.count("\n")
    return None


def matches(hit: Hit, q: Question) -> bool:
    if isinstance(q.expected, str):
        return any(hit.name.startswith(sha) for sha in q.expected.split("|"))
    return any(hit.path == t.path and hit.name == t.name and (
        t.line is None or (hit.lines is not None and hit.lines[0] <= t.line <= hit.lines[1]))
        for t in q.expected)


def rank_of(hits: Sequence[Hit], q: Question) -> int | None:
    return next((i for i, h in enumerate(hits, 1) if matches(h, q)), None)


def category(hit: Hit, earlier: Sequence[Hit], q: Question) -> str:
    """What a result that ranks above the expected one is."""
    if any(h.path == hit.path and h.name == hit.name for h in earlier):
        return "same symbol again"
    if isinstance(q.expected, tuple) and any(
            "." in t.name and hit.path == t.path and hit.name == t.name.rsplit(".", 1)[0]
            and hit.kind == "class" for t in q.expected):
        return "class instead of method"
    parts = hit.path.lower().split("/")
    base = parts[-1]
    if {"tests", "test", "testing"} & set(parts[:-1]) or base.startswith("test_") \
            or base.endswith(("_test.py", "_tests.py")) or base == "conftest.py":
        return "tests"
    if {"docs", "doc"} & set(parts[:-1]) or base.endswith(DOC_SUFFIXES) or hit.kind == "doc":
        return "docs"
    if {"examples", "example", "samples"} & set(parts[:-1]):
        return "examples"
    if base.endswith(OTHER_SUFFIXES) or "." not in base or parts[0].startswith("."):
        return "other files"
    return "other library symbols"


# -- runs ---------------------------------------------------------------------------------------
@dataclass
class ModeRun:
    ranks: list[int | None] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)
    tops: list[list[str]] = field(default_factory=list)
    above: Counter[str] = field(default_factory=Counter)
    class_queries: int = 0  # questions whose method's class showed above it (or instead)

    def summary(self) -> dict[str, Any]:
        n = len(self.ranks)
        rr = [1 / r if r else 0.0 for r in self.ranks]
        return {f"mrr@{K}": sum(rr) / n if n else float("nan"),
                "hits@1": sum(r == 1 for r in self.ranks) / n if n else float("nan"),
                f"hits@{K}": sum(r is not None for r in self.ranks) / n if n else float("nan"),
                "queries": n, "p50_ms": median(self.ms), "p95_ms": pct(self.ms, 95),
                "outranked_by": dict(self.above), "class_instead_of_method": self.class_queries}


def run_set(app: Any, repo: Path, which: str, questions: Sequence[Question],
            verbose: bool) -> dict[str, Any]:
    source_type = "commit" if which == "commits" else "code"
    modes = [*ENGINE_MODES, *([CODERAG] if which == "symbols" else [])]
    runs = {m: ModeRun() for m in modes}
    for q in questions:
        if verbose:
            print(f"\n[{which}] {q.query}\n  expected {_expected(q)}", file=sys.stderr)
        for mode in modes:
            t0 = time.perf_counter()
            hits = (coderag_hits(app, q.query, repo) if mode == CODERAG
                    else engine_hits(app, q.query, mode, source_type))
            run = runs[mode]
            run.ms.append((time.perf_counter() - t0) * 1000)
            rank = rank_of(hits, q)
            run.ranks.append(rank)
            run.tops.append([h.label for h in hits[:5]])
            if rank != 1:
                above = hits[: (rank or K + 1) - 1]
                cats = [category(h, above[:i], q) for i, h in enumerate(above)]
                run.above.update(cats)
                run.class_queries += "class instead of method" in cats
            if verbose:
                print(f"  {mode}: rank {rank or '-'}", file=sys.stderr)
                for h in hits[:5]:
                    print(f"    {'*' if matches(h, q) else ' '} {h.label}", file=sys.stderr)
    out: dict[str, Any] = {"modes": {m: r.summary() for m, r in runs.items()}}
    if which == "symbols":
        kinds = sorted({q.kind for q in questions})
        out["by_kind"] = {k: {m: _mrr([r for q, r in zip(questions, runs[m].ranks,
                                                         strict=True) if q.kind == k])
                              for m in modes} for k in kinds}
    out["questions"] = [{"query": q.query, "expected": _expected(q), "kind": q.kind,
                         "ranks": {m: runs[m].ranks[i] for m in modes},
                         "top5": {m: runs[m].tops[i] for m in modes}}
                        for i, q in enumerate(questions)]
    return out


def _expected(q: Question) -> str:
    if isinstance(q.expected, str):
        return q.expected
    return " | ".join(f"{t.path}::{t.name}" + (f"@L{t.line}" if t.line else "")
                      for t in q.expected)


def _mrr(ranks: Sequence[int | None]) -> float:
    return sum(1 / r if r else 0.0 for r in ranks) / len(ranks) if ranks else float("nan")


# -- the repository and its index ---------------------------------------------------------------
def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def provenance() -> dict[str, Any]:
    """The ragd commit measured, and what of daemon/ differed from it when the run began
    (others may be editing it: a run is only comparable with one of the same code)."""
    diff = git(REPO, "diff", "HEAD", "--", "daemon")
    return {"commit": git(REPO, "rev-parse", "HEAD"),
            "uncommitted_daemon_files": git(REPO, "status", "--porcelain", "--",
                                            "daemon").splitlines(),
            "daemon_diff_sha1": hashlib.sha1(diff.encode("utf-8")).hexdigest()}


def clone(mirror: Path, into: Path) -> Path:
    """The mirror's HEAD in a work tree at ``into``/requests (reset to it if kept)."""
    repo = into / "requests"
    if (repo / ".git").is_dir():
        git(repo, "fetch", "-q", str(mirror), "HEAD")
        git(repo, "reset", "-q", "--hard", "FETCH_HEAD")
    else:
        into.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", str(mirror), str(repo)], check=True)
    return repo


def commit_depths(repo: Path, shas: Sequence[str]) -> dict[str, int | None]:
    """Each sha's place in ``git rev-list HEAD`` (1 = HEAD), which history_commits must reach;
    None when HEAD does not reach it."""
    order = {s: i for i, s in enumerate(git(repo, "rev-list", "HEAD").split(), 1)}
    return {s: next((i for full, i in order.items() if full.startswith(s)), None)
            for s in shas}


def index(app: Any) -> dict[str, Any]:
    app.embedder.warm_up()  # the model's load is not indexing time
    t0 = time.perf_counter()
    reports = app.sync_all([GROUP])
    seconds = time.perf_counter() - t0
    rep = reports[0]
    consistency = app.consistency()
    return {"seconds": round(seconds, 1), "embedded": rep.embedded,
            "sources_read": rep.indexed, "unchanged": rep.unchanged,
            "stage_seconds": {k: round(v, 1) for k, v in rep.stage_seconds.items()},
            "skipped": rep.skipped, "errors": len(rep.errors),
            "unembedded_after": consistency["unembedded"], "consistent": consistency["ok"]}


def chunking(app: Any) -> dict[str, Any]:
    """How the group's symbols and commits became chunks."""
    chunks: Counter[str] = Counter()
    per_source: Counter[int] = Counter()
    sources: dict[int, dict[str, Any]] = {}
    for batch in app.catalog.iter_chunks():
        for row in batch:
            if row.collection != GROUP or row.ordinal < 0:
                continue
            chunks[row.source_type] += 1
            per_source[row.source_id] += 1
            sources[row.source_id] = row.metadata | {"source_type": row.source_type}
    code = {sid: m for sid, m in sources.items() if m["source_type"] == "code"}
    commits = {m.get("commit_sha") for m in sources.values() if m["source_type"] == "commit"}
    cut = Counter((m["file_path"], m["symbol_name"]) for m in code.values() if m.get("part"))
    whole = Counter((m["file_path"], m["symbol_name"]) for m in code.values()
                    if not m.get("part"))
    shared = {k: n for k, n in whole.items() if n > 1}
    many = sorted(((n, sid) for sid, n in per_source.items() if sid in code and n > 1),
                  reverse=True)
    methods = [m["symbol_name"] for m in code.values() if m.get("symbol_type") == "method"]
    return {
        "chunks": dict(chunks), "symbols": len(code), "commit_documents":
            sum(1 for m in sources.values() if m["source_type"] == "commit"),
        "commits": len(commits),
        "methods_named_class_dot_method": sum("." in n for n in methods),
        "methods": len(methods),
        "symbols_cut_into_parts": len(cut), "parts": sum(cut.values()),
        "cut_examples": [f"{f}::{n} ({p} parts)" for (f, n), p in cut.most_common(8)],
        "names_shared_in_a_file": len(shared),
        "shared_examples": [f"{f}::{n} x{c}" for (f, n), c in
                            sorted(shared.items(), key=lambda kv: -kv[1])[:8]],
        "symbols_in_several_chunks": len(many),
        "several_chunks_examples": [
            f"{code[s]['file_path']}::{code[s]['symbol_name']} part {code[s].get('part', 0)}"
            f": {n} chunks" for n, s in many[:8]],
    }


def covered(app: Any, questions: Sequence[Question]) -> list[str]:
    """The expected answers no indexed document holds (a question set out of date)."""
    meta: list[dict[str, Any]] = []
    for batch in app.catalog.iter_chunks():
        meta.extend(r.metadata for r in batch if r.collection == GROUP)
    missing = []
    for q in questions:
        if isinstance(q.expected, str):
            ok = any(m.get("commit_sha", "").startswith(sha) for sha in q.expected.split("|")
                     for m in meta)
        else:
            ok = any(matches(Hit(m.get("file_path", ""), m.get("symbol_name", ""), "",
                                 (m.get("start_line", 0), m.get("end_line", 0)), ""), q)
                     for m in meta if "symbol_name" in m)
        if not ok:
            missing.append(_expected(q))
    return missing


# -- output -------------------------------------------------------------------------------------
def print_tables(out: dict[str, Any]) -> None:
    print("\n| set | mode | MRR@10 | hits@1 | hits@10 | questions | p50 ms |")
    print("|---|---|---|---|---|---|---|")
    for which, res in out["sets"].items():
        for mode, s in res["modes"].items():
            print(f"| {which} | {mode} | {s['mrr@10']:.3f} | {s['hits@1']:.2f} | "
                  f"{s['hits@10']:.2f} | {s['queries']} | {s['p50_ms']:.0f} |")
    sym = out["sets"].get("symbols")
    if sym:
        modes = list(sym["modes"])
        print("\nSymbols MRR@10 by kind\n\n| kind | n | " + " | ".join(modes) + " |")
        print("|---|---|" + "---|" * len(modes))
        for kind, by_mode in sym["by_kind"].items():
            n = sum(q["kind"] == kind for q in sym["questions"])
            print(f"| {kind} | {n} | " + " | ".join(f"{by_mode[m]:.3f}" for m in modes) + " |")
        print("\nWhat ranks above the expected symbol (results above it, all ten on a miss)\n")
        print("| mode | " + " | ".join(CATEGORIES) + " | questions with the class above |")
        print("|---|" + "---|" * (len(CATEGORIES) + 1))
        for mode, s in sym["modes"].items():
            cells = [str(s["outranked_by"].get(c, 0)) for c in CATEGORIES]
            print(f"| {mode} | " + " | ".join(cells) + f" | {s['class_instead_of_method']} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="symbols,commits")
    ap.add_argument("--verbose", action="store_true", help="each question's top 5 per mode")
    ap.add_argument("--out", help="write bench/results/code_search-NAME.json")
    ap.add_argument("--mirror", type=Path, default=MIRROR)
    ap.add_argument("--history-commits", type=int,
                    help="code.history_commits (default: deep enough for the commit set)")
    ap.add_argument("--home", type=Path, help="keep the clone and the index here")
    args = ap.parse_args()
    which = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = [s for s in which if s not in SETS]
    if unknown:
        sys.exit(f"error: unknown set {unknown[0]!r}; sets: {', '.join(SETS)}")
    questions = {w: read_set(SETS[w], w) for w in which}
    home = args.home or fresh_home("code-search")
    repo = clone(args.mirror, (home if args.home else Path(tempfile.mkdtemp(
        prefix="ragd-bench-code-search-"))) / "repo")
    from ragd.daemon.settings.codegroups import CodeConfig

    default = CodeConfig.model_fields["history_commits"].default
    shas = [sha for q in questions.get("commits", []) if isinstance(q.expected, str)
            for sha in q.expected.split("|")]
    depths = commit_depths(repo, shas)
    need = max((d for d in depths.values() if d), default=0)
    history = (args.history_commits if args.history_commits is not None
               else min(50_000, max(default, need)))
    out: dict[str, Any] = {"ragd": provenance(), "repository": str(args.mirror),
                           "head": git(repo, "rev-parse", "HEAD"),
                           "history_commits": history, "history_commits_default": default}
    overrides = {"code.groups": {GROUP: [str(repo)]}, "code.history_commits": history,
                 "code.history_months": 0}
    # Every daemon module the run uses is loaded now: daemon/ may be edited while it runs.
    import ragd.daemon.runtime.code_handlers  # noqa: F401
    import ragd.daemon.search.params  # noqa: F401
    import ragd.daemon.stores.code_sources  # noqa: F401

    print(f"indexing {repo} (history_commits={history}) ...", file=sys.stderr, flush=True)
    with ragd_app(home, overrides) as app:
        out["index"] = index(app)
        out["chunking"] = chunking(app)
        if shas:
            out["commit_set"] = {
                "questions": len(questions["commits"]), "depths": depths,
                "needed_history_commits": need,
                "unreachable": [s for s, d in depths.items() if d is None],
                "beyond_default_history": [s for s, d in depths.items() if d and d > default],
                "not_indexed": covered(app, questions["commits"])}
        t0 = time.perf_counter()
        out["sets"] = {w: run_set(app, repo, w, questions[w], args.verbose) for w in which}
        out["query_seconds"] = round(time.perf_counter() - t0, 1)
        out["expected_not_in_index"] = covered(app, questions.get("symbols", []))
    if provenance() != out["ragd"]:
        out["ragd"]["changed_during_run"] = True
        print("warning: daemon/ changed during the run (this run used the code as it began)",
              file=sys.stderr)
    report(out)
    path = write_json(f"code_search-{args.out}" if args.out else "code_search", out)
    print(f"\nwrote {path.relative_to(REPO)}")
    return 0


def report(out: dict[str, Any]) -> None:
    idx, ch = out["index"], out["chunking"]
    dirty = out["ragd"]["uncommitted_daemon_files"]
    print(f"ragd {out['ragd']['commit'][:8]}" + (f" with {len(dirty)} daemon files changed"
                                                 if dirty else ""))
    print(f"psf/requests at {out['head'][:8]}, history_commits {out['history_commits']} "
          f"(default {out['history_commits_default']}): indexed in {idx['seconds']} s "
          f"(stages {idx['stage_seconds']}), {idx['embedded']:,} chunks embedded, "
          f"{idx['unembedded_after']} waiting after; questions took {out['query_seconds']} s")
    print(f"chunks {ch['chunks']}; {ch['symbols']:,} symbols, {ch['commits']:,} commits in "
          f"{ch['commit_documents']:,} documents; methods named Class.method: "
          f"{ch['methods_named_class_dot_method']} of {ch['methods']}")
    print(f"symbols cut into parts: {ch['symbols_cut_into_parts']} ({ch['parts']} parts), "
          f"e.g. {'; '.join(ch['cut_examples'][:4])}")
    print(f"names given to several symbols of one file: {ch['names_shared_in_a_file']}, e.g. "
          f"{'; '.join(ch['shared_examples'][:4])}")
    print(f"symbol pieces in several chunks: {ch['symbols_in_several_chunks']}, e.g. "
          f"{'; '.join(ch['several_chunks_examples'][:4])}")
    cs = out.get("commit_set")
    if cs:
        print(f"commit set: {len(cs['not_indexed'])} of {cs['questions']} questions' commits "
              f"not indexed; {len(cs['beyond_default_history'])} of {len(cs['depths'])} "
              "commits lie beyond the default history "
              f"(needed history_commits {cs['needed_history_commits']})")
    if out["expected_not_in_index"]:
        print(f"warning: expected symbols not in the index: {out['expected_not_in_index']}")
    print_tables(out)


if __name__ == "__main__":
    raise SystemExit(main())
