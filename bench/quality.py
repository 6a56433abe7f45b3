"""Search quality: nDCG@10 and Recall@10 on BEIR SciFact, known-item MRR@10 on a vault.

Prints tables and writes bench/results/quality.json (quality-quick.json with --quick) and a
PNG of nDCG@10 by mode beside the published figures.

    python bench/quality.py [--quick] [--home DIR] [--known-items FILE ...] [--vault PATH]
                            [--no-scifact] [--no-known-items]

SciFact (test split, 300 queries, binary qrels): every document becomes one markdown note,
``title`` in its frontmatter and the abstract as its body, in a project collection indexed by
ragd in process (`App`). Each query runs in keyword, semantic and hybrid mode with top_k=10
and ``search.max_per_source=1``, so the ten results are ten distinct documents (a document is
ranked by its best chunk). --quick keeps every judged document and 300 others picked with a
fixed seed: fewer distractors, so its scores are higher than the full corpus's and are not
comparable with published figures; the output says so.

Known items: a TSV of ``question<TAB>expected note path`` (relative to the vault, which the
file names in a ``# vault: NAME`` line or --vault gives). MRR@10 = mean of 1/rank of the
expected note (0 when it is not in the top 10). By default two sets run: obsidian-help-en
(bench/queries/obsidian-help-en.tsv) and kepano-obsidian (bench/queries/kepano-obsidian.tsv,
half of whose answers are notes made only of properties); --known-items replaces them.

Each table shows the previous run (bench/results/quality.json as it was) beside this one, and
each set lists its per-query losers: the queries that hybrid ranks worse than semantic (the
expected note's rank; nDCG@10 on SciFact), so a fusion change can be judged query by query.

--home keeps the indexes (and the generated SciFact notes) between runs: the catalog caches
vectors by the hash of the embedded text, so a re-run embeds nothing and takes a few minutes.
Without it a temporary folder is used and SciFact costs ~10-15 min of embedding on 2 cores.

--approximate (with --home) runs on a copy of the home with the approximations that ragd
uses only on big indexes forced on: the IVF-SQ8 vector index (decision 0014) and the keyword
postings budget (decisions 0016, 0019). It writes quality-approximate.json, and the
previous-run column is then the exact run (quality.json): issue 16's "within 0.005 of the
exact legs".
Each data set gets a RAGD_HOME of its own under it (scifact/, scifact-quick/, known-VAULT/):
BM25 statistics are global to a Whoosh index, so a collection's keyword ranking would
otherwise change with whatever else was indexed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, bar_plot, corpus, pct, table, write_json  # noqa: E402
from bench.metrics import evaluate, mrr, ndcg_at_k  # noqa: E402

MODES = ("keyword", "semantic", "hybrid")
K = 10
QUICK_DISTRACTORS = 300
QUICK_SEED = 13
DEFAULT_KNOWN_ITEMS = REPO / "bench" / "queries" / "obsidian-help-en.tsv"
KNOWN_ITEM_SETS = (DEFAULT_KNOWN_ITEMS, REPO / "bench" / "queries" / "kepano-obsidian.tsv")

# Published figures on the same split (nDCG@10, Recall@10), for the table and the plot.
PUBLISHED: dict[str, dict[str, float | None]] = {
    "BM25 (BEIR)": {"ndcg@10": 0.665, "recall@10": None},
    "all-MiniLM-L6-v2 (MTEB)": {"ndcg@10": 0.64508, "recall@10": 0.78333},
}
PUBLISHED_SOURCES = {
    "BM25 (BEIR)": "Thakur et al. 2021, BEIR paper, table 2 (Elasticsearch BM25, title + text)",
    "all-MiniLM-L6-v2 (MTEB)": "embeddings-benchmark/mtebpaper, results/all-MiniLM-L6-v2/"
                               "SciFact.json (test: ndcg_at_10 0.64508, recall_at_10 0.78333)",
}


# -- data ---------------------------------------------------------------------------------------
def load_scifact(quick: bool, split: str = "test"
                 ) -> tuple[dict[str, tuple[str, str]], dict[str, str], dict[str, dict[str, int]]]:
    """(docs id -> (title, text), the split's queries id -> text, qrels) from the shared corpus."""
    root = corpus("beir", "scifact")
    for name in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"):
        if not (root / name).is_file():
            sys.exit(f"error: {root / name} is missing (expected the BEIR layout)")
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if n == 0 and parts[0] == "query-id":
                continue
            if len(parts) == 3:
                qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    docs: dict[str, tuple[str, str]] = {}
    with open(root / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            docs[str(d["_id"])] = (d.get("title") or "", d.get("text") or "")
    queries: dict[str, str] = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            if str(q["_id"]) in qrels:
                queries[str(q["_id"])] = q["text"]
    if quick:
        judged = {d for grades in qrels.values() for d in grades}
        others = sorted(set(docs) - judged)
        keep = judged | set(random.Random(QUICK_SEED).sample(others, QUICK_DISTRACTORS))
        docs = {d: v for d, v in docs.items() if d in keep}
    return docs, queries, qrels


def note_text(title: str, text: str) -> str:
    """A SciFact document as a markdown note: the title in frontmatter, the abstract below."""
    # A JSON string is a valid YAML double-quoted scalar, whatever the title contains.
    return f"---\ntitle: {json.dumps(' '.join(title.split()))}\n---\n\n{text.strip()}\n"


def write_notes(docs: dict[str, tuple[str, str]], folder: Path) -> Path:
    """One note per document; unchanged files are left alone so re-runs reconcile to nothing."""
    folder.mkdir(parents=True, exist_ok=True)
    wanted = {f"{doc_id}.md": note_text(*tt) for doc_id, tt in docs.items()}
    for name, body in wanted.items():
        path = folder / name
        if not path.exists() or path.read_text(encoding="utf-8") != body:
            path.write_text(body, encoding="utf-8")
    for stale in folder.glob("*.md"):
        if stale.name not in wanted:
            stale.unlink()
    return folder


def load_known_items(path: Path) -> tuple[list[tuple[str, str]], str | None]:
    """Rows (question, expected relative path) and the vault named by a ``# vault:`` line."""
    if not path.is_file():
        sys.exit(f"error: known-item file not found: {path}")
    rows: list[tuple[str, str]] = []
    vault = None
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            key, _, value = line[1:].partition(":")
            if key.strip().lower() == "vault" and value.strip():
                vault = value.strip()
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            sys.exit(f"error: {path}:{n}: expected 'question<TAB>relative/path.md'")
        rows.append((parts[0].strip(), parts[1].strip()))
    if not rows:
        sys.exit(f"error: {path} holds no queries")
    return rows, vault


def known_items_vault(rows: Sequence[tuple[str, str]], named: str | None,
                      given: Path | None) -> Path:
    vault = given or (corpus("vault", named) if named else None)
    if vault is None:
        sys.exit("error: the known-item file names no vault: add '# vault: NAME' or pass --vault")
    missing = [p for _, p in rows if not (vault / p).is_file()]
    if missing:
        sys.exit(f"error: {len(missing)} expected notes are not in {vault}, e.g. {missing[0]}")
    return vault


# -- ragd, in process ---------------------------------------------------------------------------
@contextmanager
def ragd_app(home: Path, overrides: dict[str, Any] | None = None,
             on_progress: Callable[[Any], None] | None = None) -> Iterator[Any]:
    """An App on ``home`` with Obsidian discovery off and the environment ignored."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ragd.daemon.runtime.app import App
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    paths = resolve_paths({"RAGD_HOME": str(home)})
    cfg = load_config(paths, {"obsidian.enabled": False, **(overrides or {})}, env={},
                      write_default=False)
    app = App(paths, cfg, on_progress=on_progress)
    try:
        yield app
    finally:
        app.close()


def progress_printer(label: str, every_s: float = 15.0) -> Callable[[Any], None]:
    last = [0.0]

    def show(p: Any) -> None:
        now = time.monotonic()
        if p.phase == "index" and now - last[0] >= every_s:
            last[0] = now
            print(f"  {label}: {p.done:,}/{p.total:,} files, {p.chunks_embedded:,} chunks "
                  "embedded", file=sys.stderr, flush=True)

    return show


def index_folder(app: Any, name: str, root: Path) -> dict[str, Any]:
    """Create (or reuse) a project collection over ``root`` and bring it up to date."""
    app.embedder.warm_up()
    coll = app.create_project(name, str(root))
    report = app.sync_collection(coll)
    if report.errors:
        print(f"warning: {len(report.errors)} files failed in {name}: {report.errors[:2]}",
              file=sys.stderr)
    stats = app.catalog.collection_stats(coll.id)
    return {"collection": name, "root": str(root), "sources": stats["source_count"],
            "chunks": stats["chunk_count"], "embedded_now": report.embedded,
            "seconds": round(report.seconds, 2),
            "stage_seconds": {k: round(v, 2) for k, v in report.stage_seconds.items()},
            "skipped": report.skipped}


def ragd_ranking(app: Any, collection: str, query: str, mode: str, k: int = K) -> list[str]:
    """Paths (relative to the collection root) of the top ``k`` results, best first."""
    from ragd.daemon.search.params import build_request

    engine = app.search_engine
    root = app.collection(collection).root
    res = engine.search(build_request(engine, query=query, collection=collection, top_k=k,
                                      mode=mode))
    return [os.path.relpath(r["source_path"], root).replace(os.sep, "/")
            for r in res["results"]]


# -- the two evaluations ------------------------------------------------------------------------
def scifact_home(root: Path, quick: bool) -> tuple[Path, str]:
    """The RAGD_HOME and collection name of the SciFact index under ``root``."""
    name = "scifact-quick" if quick else "scifact"
    return root / name, name


def run_scifact(app: Any, home: Path, quick: bool) -> dict[str, Any]:
    docs, queries, qrels = load_scifact(quick)
    name = scifact_home(home, quick)[1]
    folder = write_notes(docs, home / "notes" / name)
    print(f"indexing {len(docs):,} SciFact documents into {name} ...", file=sys.stderr)
    info = index_folder(app, name, folder)
    by_mode: dict[str, Any] = {}
    runs: dict[str, dict[str, list[str]]] = {}
    for mode in MODES:
        run: dict[str, list[str]] = runs.setdefault(mode, {})
        lat: list[float] = []
        for text in list(queries.values())[:3]:  # warm caches before timing
            ragd_ranking(app, name, text, mode)
        for qid, text in queries.items():
            t0 = time.perf_counter()
            ranked = ragd_ranking(app, name, text, mode)
            lat.append((time.perf_counter() - t0) * 1000)
            run[qid] = [Path(p).stem for p in ranked]
        by_mode[mode] = {**evaluate(run, qrels, K), "p50_ms": pct(lat, 50),
                         "p95_ms": pct(lat, 95)}
    per_query = {m: {q: ndcg_at_k(runs[m][q], qrels[q], K) for q in queries} for m in MODES}
    worse = sorted((q for q in queries if per_query["hybrid"][q] < per_query["semantic"][q]
                    - 1e-9), key=lambda q: per_query["hybrid"][q] - per_query["semantic"][q])
    losers = [{"query": queries[q], "semantic": round(per_query["semantic"][q], 3),
               "hybrid": round(per_query["hybrid"][q], 3)} for q in worse]
    wins = sum(per_query["hybrid"][q] > per_query["semantic"][q] + 1e-9 for q in queries)
    return {"subset": quick, "documents": len(docs), "queries": len(queries),
            "judgements": sum(len(g) for g in qrels.values()), "index": info, "modes": by_mode,
            "hybrid_vs_semantic": {"wins": wins, "losses": len(losers)},
            "hybrid_losers": losers}


def run_known_items(app: Any, rows: Sequence[tuple[str, str]], vault: Path) -> dict[str, Any]:
    name = f"known-{vault.name}"
    print(f"indexing {vault} into {name} ...", file=sys.stderr)
    info = index_folder(app, name, vault)
    expected = [p for _, p in rows]
    by_mode: dict[str, Any] = {}
    misses: dict[str, list[dict[str, Any]]] = {}
    ranks: dict[str, list[int | None]] = {}
    for mode in MODES:
        rankings = [ragd_ranking(app, name, q, mode) for q, _ in rows]
        by_mode[mode] = mrr(rankings, expected, K)
        ranks[mode] = [r.index(e) + 1 if e in r else None
                       for e, r in zip(expected, rankings, strict=True)]
        misses[mode] = [{"query": q, "expected": e, "got": r[:3]}
                        for (q, e), r in zip(rows, rankings, strict=True) if e not in r[:1]]
    worse = [i for i in range(len(rows))
             if _rank_key(ranks["hybrid"][i]) > _rank_key(ranks["semantic"][i])]
    better = [i for i in range(len(rows))
              if _rank_key(ranks["hybrid"][i]) < _rank_key(ranks["semantic"][i])]
    losers = [{"query": rows[i][0], "expected": rows[i][1],
               **{m: ranks[m][i] for m in MODES}} for i in worse]
    return {"vault": str(vault), "queries": len(rows), "index": info, "modes": by_mode,
            "not_first": misses, "hybrid_vs_semantic": {"wins": len(better),
                                                        "losses": len(worse)},
            "hybrid_losers": losers}


def _rank_key(rank: int | None) -> int:
    """A rank for comparison: not in the top K sorts after every rank in it."""
    return K + 1 if rank is None else rank


# -- output -------------------------------------------------------------------------------------
def _previous(prev: dict[str, Any] | None, *keys: str) -> Any:
    for key in keys:
        if not isinstance(prev, dict):
            return None
        prev = prev.get(key)
    return prev


def _delta(now: float, before: Any) -> list[Any]:
    """The previous figure and the change, or blanks when there was no previous run."""
    if not isinstance(before, int | float):
        return ["-", ""]
    return [float(before), f"{now - before:+.3f}"]


def print_scifact(res: dict[str, Any], prev: dict[str, Any] | None = None) -> None:
    rows: list[list[Any]] = [
        [f"ragd {m}", v["ndcg@10"], *_delta(v["ndcg@10"], _previous(prev, "modes", m,
                                                                    "ndcg@10")),
         v["recall@10"], v["p50_ms"], v["p95_ms"]] for m, v in res["modes"].items()]
    if not res["subset"]:
        rows += [[f"published {k}", v["ndcg@10"], "", "", "-" if v["recall@10"] is None
                  else v["recall@10"], "", ""] for k, v in PUBLISHED.items()]
    idx = res["index"]
    title = (f"SciFact test: {res['queries']} queries, {res['documents']:,} documents, "
             f"{idx['chunks']:,} chunks (indexed in {idx['seconds']:.1f} s, "
             f"{idx['embedded_now']:,} embedded this run)")
    print(table(title, rows, ["mode", "nDCG@10", "previous", "change", "Recall@10", "p50 ms",
                              "p95 ms"]))
    if not res["subset"]:
        for k, v in PUBLISHED_SOURCES.items():
            print(f"  {k}: {v}")
    if res["subset"]:
        print(f"NOTE --quick: a subset (every judged document + {QUICK_DISTRACTORS} others, "
              f"seed {QUICK_SEED}); fewer distractors make these scores higher than on the "
              "full corpus, so they are NOT comparable with the published figures "
              "(BM25 0.665, all-MiniLM-L6-v2 0.645).")
    hs = res["hybrid_vs_semantic"]
    print(f"  hybrid vs semantic, per query nDCG@10: {hs['wins']} better, {hs['losses']} worse;"
          " the worst losers:")
    for d in res["hybrid_losers"][:5]:
        print(f"    {d['semantic']:.3f} -> {d['hybrid']:.3f}  {d['query'][:90]}")


def print_known(res: dict[str, Any], prev: dict[str, Any] | None = None) -> None:
    rows = [[f"ragd {m}", v["mrr@10"], *_delta(v["mrr@10"], _previous(prev, "modes", m,
                                                                      "mrr@10")),
             v["hits@1"], v["hits@10"]] for m, v in res["modes"].items()]
    idx = res["index"]
    print(table(f"known items: {res['queries']} questions over {Path(res['vault']).name} "
                f"({idx['sources']:,} notes, {idx['chunks']:,} chunks)", rows,
                ["mode", "MRR@10", "previous", "change", "hits@1", "hits@10"]))
    hs = res["hybrid_vs_semantic"]
    print(f"  hybrid vs semantic, per query: {hs['wins']} ranked higher, {hs['losses']} lower"
          + (" (rank of the expected note, '-' = not in the top 10):" if hs["losses"] else ""))
    for d in res["hybrid_losers"]:
        r = {m: "-" if d[m] is None else str(d[m]) for m in MODES}
        print(f"    semantic {r['semantic']:>2}  hybrid {r['hybrid']:>2}  keyword "
              f"{r['keyword']:>2}  {d['query'][:70]}")


def previous_run(quick: bool) -> dict[str, Any]:
    """The last run's JSON (what this run will move to .previous.json), or {}."""
    from bench.common import RESULTS

    path = RESULTS / ("quality-quick.json" if quick else "quality.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


APPROX_FROM = 1000  # vectors: every benchmark index is past it


def approximate_copy(home: Path, tmp: Path) -> Path:
    """A copy of ``home`` to force approximations on: the IVF index it builds is saved."""
    import shutil

    copy = tmp / "approximate"
    print(f"copying {home} for the approximate run ...", file=sys.stderr)
    shutil.copytree(home, copy, ignore=shutil.ignore_patterns("run", "*.lock"))
    return copy


def force_approximate(app: Any) -> None:
    """Build the IVF-SQ8 index now and put every query under the postings budget."""
    from ragd.daemon.stores import fulltext

    fulltext.MIN_POSTINGS = 0
    if app.faiss.kind == "flat" and app.faiss.size >= APPROX_FROM:
        app.faiss.start_build().join()
    print(f"approximate: vector index {app.faiss.kind} ({app.faiss.size:,} vectors), "
          "postings budget always on", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="SciFact subset (a few minutes)")
    ap.add_argument("--home", type=Path, help="persistent RAGD_HOME (reuses embeddings)")
    ap.add_argument("--known-items", type=Path, action="append",
                    help="TSV question<TAB>path, repeatable (default: "
                    + ", ".join(str(p.relative_to(REPO)) for p in KNOWN_ITEM_SETS) + ")")
    ap.add_argument("--vault", type=Path, help="vault of the known-item file (default: its "
                    "'# vault:' line, under the shared corpus); only with one --known-items")
    ap.add_argument("--no-scifact", action="store_true")
    ap.add_argument("--no-known-items", action="store_true")
    ap.add_argument("--approximate", action="store_true",
                    help="force the big-index approximations on a copy of --home")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for the searches, e.g. search.rare_first=false "
                    "(JSON values; repeatable)")
    args = ap.parse_args()
    if args.approximate and not args.home:
        sys.exit("error: --approximate needs --home (run once without it to fill the home)")
    files = [] if args.no_known_items else (args.known_items or list(KNOWN_ITEM_SETS))
    if args.vault and len(files) != 1:
        sys.exit("error: --vault needs exactly one --known-items file")
    sets = []
    for f in files:
        rows, named = load_known_items(f)
        sets.append((f, rows, known_items_vault(rows, named, args.vault)))
    if not args.no_scifact:
        load_scifact(args.quick)  # fail now, not after indexing the vault, if data is missing
    prev = previous_run(args.quick)
    result = ("quality-quick" if args.quick else "quality") + ("-approximate" if args.approximate
                                                                else "")
    out: dict[str, Any] = {"quick": args.quick, "k": K, "config": {"search.max_per_source": 1},
                           "published": PUBLISHED, "published_sources": PUBLISHED_SOURCES}
    with tempfile.TemporaryDirectory(prefix="ragd-quality-") as tmp:
        root = args.home.expanduser().resolve() if args.home else Path(tmp)
        overrides: dict[str, Any] = {"search.max_per_source": 1}
        for item in args.set:
            key, _, value = item.partition("=")
            overrides[key] = json.loads(value)
            out["config"][key] = overrides[key]
        if args.approximate:
            root = approximate_copy(root, Path(tmp))
            overrides["index.approx_vectors_from"] = APPROX_FROM
            out["config"]["approximate"] = {"index.approx_vectors_from": APPROX_FROM,
                                            "postings budget": "always"}
        for f, rows, vault in sets:
            with ragd_app(root / f"known-{vault.name}", overrides,
                          on_progress=progress_printer("indexing")) as app:
                if args.approximate:
                    force_approximate(app)
                res = run_known_items(app, rows, vault)
            res["file"] = str(f)
            out.setdefault("known_item_sets", {})[vault.name] = res
            # The first set also under its old key, which bench/report.py reads.
            out.setdefault("known_items", res)
        if not args.no_scifact:
            home = scifact_home(root, args.quick)[0]
            with ragd_app(home, overrides, on_progress=progress_printer("indexing")) as app:
                if args.approximate:
                    force_approximate(app)
                out["scifact"] = run_scifact(app, home, args.quick)
    for name, res in out.get("known_item_sets", {}).items():
        before = _previous(prev, "known_item_sets", name)
        if before is None and _previous(prev, "known_items", "vault") == res["vault"]:
            before = prev["known_items"]
        print_known(res, before)
    if "scifact" in out:
        print_scifact(out["scifact"], prev.get("scifact"))
        labels = [f"ragd {m}" for m in MODES]
        values = [out["scifact"]["modes"][m]["ndcg@10"] * 100 for m in MODES]
        if not args.quick:
            labels += list(PUBLISHED)
            values += [(v["ndcg@10"] or 0.0) * 100 for v in PUBLISHED.values()]
        bar_plot(result,
                 "SciFact nDCG@10" + (" (quick subset)" if args.quick else ""), labels, values,
                 "nDCG@10 x 100")
    if prev:
        print(f"previous run: {_previous(prev, 'machine', 'date') or 'date unknown'}")
    path = write_json(result, out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
