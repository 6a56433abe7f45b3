"""Typed sub-queries (decision 0048): paraphrase questions, alone and with the expansions a
client model would write.

    python bench/expansions.py [--home DIR] [--file FILE] [--no-variants]

FILE (default bench/queries/obsidian-help-en-expansions.json) holds questions worded unlike
the note that answers them, each with ``lex``, ``vec`` and ``hyde`` sub-queries written by hand
as a client would write them (from general knowledge, without reading the note). The file's
vault is indexed once, as a project collection in a RAGD_HOME of its own under --home
(``known-VAULT/``, the layout of bench/quality.py, whose home is reused as it is). Every
question runs with top_k=10 and one result per note (``search.max_per_source=1``):

- hybrid mode: the query alone, + lex, + vec, + hyde, + all three;
- for reference, keyword mode with its lex sub-query and semantic mode with vec + hyde (the
  sub-queries a mode does not read are ignored by the engine);
- unless --no-variants, other ways of merging the sub-queries' hits into the legs (below).

MRR@10 and recall@10 of the expected note(s), hits@1, the median search time, and per
configuration the change from the query alone question by question (mean ± standard error,
questions up / down). Writes bench/results/expansions.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, corpus, table, write_json  # noqa: E402
from bench.quality import index_folder, progress_printer, ragd_app  # noqa: E402

K = 10
DEFAULT_FILE = REPO / "bench" / "queries" / "obsidian-help-en-expansions.json"
# (label, mode, sub-query types sent)
CONFIGS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("query alone", "hybrid", ()),
    ("query + lex", "hybrid", ("lex",)),
    ("query + vec", "hybrid", ("vec",)),
    ("query + hyde", "hybrid", ("hyde",)),
    ("query + vec + hyde", "hybrid", ("vec", "hyde")),
    ("query + all", "hybrid", ("lex", "vec", "hyde")),
    ("keyword: query alone", "keyword", ()),
    ("keyword: query + lex", "keyword", ("lex",)),
    ("semantic: query alone", "semantic", ()),
    ("semantic: query + vec + hyde", "semantic", ("vec", "hyde")),
)
VARIANT_CONFIGS = ("query + lex", "query + vec", "query + hyde", "query + all")


# -- data ---------------------------------------------------------------------------------------
def load_questions(path: Path) -> tuple[str, list[dict[str, Any]]]:
    """The vault's name and the questions: {query, expected: [paths], searches}."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for n, item in enumerate(doc["questions"], 1):
        expected = item["expected"]
        expected = [expected] if isinstance(expected, str) else list(expected)
        kinds = sorted(s["type"] for s in item["searches"])
        if kinds != ["hyde", "lex", "vec"]:
            sys.exit(f"error: {path}: question {n} needs one lex, one vec and one hyde entry")
        out.append({"query": item["query"], "expected": expected, "searches": item["searches"]})
    return doc["vault"], out


# -- the merge variants -------------------------------------------------------------------------
def _sum_merge(lists: Sequence[Sequence[tuple[int, float]]], k: int, scale: str
               ) -> list[tuple[int, float]]:
    """Like fusion.merge_hits, but a chunk's scores over the lists are added (a chunk several
    phrasings find rises); a list that missed it adds nothing."""
    from ragd.daemon.search.fusion import _scaled

    total: dict[int, float] = {}
    for hits in lists:
        for (cid, _), value in zip(hits, _scaled([s for _, s in hits], scale), strict=True):
            total[cid] = total.get(cid, 0.0) + value
    return sorted(total.items(), key=lambda h: -h[1])[:k]


def _variants() -> dict[str, Callable[[], Any]]:
    """Name -> a factory of a context manager that patches the engine for that variant."""
    import numpy as np

    from ragd.daemon.search import engine as engine_module
    from ragd.daemon.search.engine import SearchEngine

    @contextmanager
    def patched(*changes: tuple[Any, str, Any]) -> Iterator[None]:
        old = [(obj, name, getattr(obj, name)) for obj, name, _ in changes]
        for obj, name, value in changes:
            setattr(obj, name, value)
        try:
            yield
        finally:
            for obj, name, value in old:
                setattr(obj, name, value)

    def keyword_sum(self: Any, query: str, lex: Sequence[str], k: int, filters: Any) -> Any:
        lists = [self.keyword_hits(q, k, filters) for q in (query, *lex)]
        return _sum_merge(lists, k, "best") if lex else lists[0]

    def semantic_sum(self: Any, vec: Any, extra: Sequence[Any], k: int, filters: Any) -> Any:
        lists = [self._semantic(v, k, filters) for v in (vec, *extra)]
        return _sum_merge(lists, k, "none") if extra else lists[0]

    def one_keyword_query(self: Any, query: str, lex: Sequence[str], k: int, filters: Any
                          ) -> Any:
        return self.keyword_hits(" ".join([query, *lex]), k, filters)

    def mean_vector(self: Any, vec: Any, extra: Sequence[Any], k: int, filters: Any) -> Any:
        if not extra:
            return self._semantic(vec, k, filters)
        v = np.sum([vec, *extra], axis=0)
        return self._semantic((v / np.linalg.norm(v)).astype(np.float32), k, filters)

    m, e = engine_module, SearchEngine
    return {
        "keyword leg: max of best-scaled lists": lambda: patched((m, "KEYWORD_MERGE", "best")),
        "keyword leg: max of z-scaled lists": lambda: patched((m, "KEYWORD_MERGE", "z")),
        "keyword leg: sum of best-scaled lists": lambda: patched(
            (e, "expanded_keyword_hits", keyword_sum)),
        "keyword leg: lex words appended to the query": lambda: patched(
            (e, "expanded_keyword_hits", one_keyword_query)),
        "semantic leg: max of best-scaled lists": lambda: patched(
            (m, "SEMANTIC_MERGE", "best")),
        "semantic leg: max of z-scaled lists": lambda: patched((m, "SEMANTIC_MERGE", "z")),
        "semantic leg: sum of cosines": lambda: patched((e, "_semantic_all", semantic_sum)),
        "semantic leg: one search with the mean vector": lambda: patched(
            (e, "_semantic_all", mean_vector)),
    }


# -- the runs -----------------------------------------------------------------------------------
def ranking(app: Any, collection: str, root: str, question: dict[str, Any], mode: str,
            types: tuple[str, ...]) -> tuple[list[str], float]:
    """Paths of the top K notes (relative to the vault) and the search's time in ms."""
    import os

    from ragd.daemon.search.params import build_request

    engine = app.search_engine
    searches = [s for s in question["searches"] if s["type"] in types]
    t0 = time.perf_counter()
    res = engine.search(build_request(engine, query=question["query"], collection=collection,
                                      top_k=K, mode=mode, searches=searches))
    ms = (time.perf_counter() - t0) * 1000
    return [os.path.relpath(r["source_path"], root).replace(os.sep, "/")
            for r in res["results"]], ms


def _rank(ranked: Sequence[str], expected: Sequence[str]) -> int | None:
    found = [ranked.index(e) + 1 for e in expected if e in ranked[:K]]
    return min(found) if found else None


def run_config(app: Any, collection: str, root: str, questions: Sequence[dict[str, Any]],
               mode: str, types: tuple[str, ...]) -> dict[str, Any]:
    ranks: list[int | None] = []
    recalls: list[float] = []
    times: list[float] = []
    for q in questions:
        ranked, ms = ranking(app, collection, root, q, mode, types)
        ranks.append(_rank(ranked, q["expected"]))
        recalls.append(sum(e in ranked[:K] for e in q["expected"]) / len(q["expected"]))
        times.append(ms)
    n = len(questions)
    return {"mode": mode, "searches": list(types),
            f"mrr@{K}": sum(1 / r for r in ranks if r) / n,
            f"recall@{K}": sum(recalls) / n,
            "hits@1": sum(r == 1 for r in ranks) / n,
            "median_ms": round(statistics.median(times), 1), "ranks": ranks}


def paired(base: Sequence[int | None], other: Sequence[int | None]) -> dict[str, Any]:
    """Per question reciprocal-rank change from ``base``: mean, standard error, up, down."""
    diffs = [(1 / o if o else 0.0) - (1 / b if b else 0.0)
             for b, o in zip(base, other, strict=True)]
    mean = sum(diffs) / len(diffs)
    se = (statistics.stdev(diffs) / len(diffs) ** 0.5) if len(diffs) > 1 else 0.0
    return {"mean": mean, "se": se, "up": sum(d > 1e-12 for d in diffs),
            "down": sum(d < -1e-12 for d in diffs)}


def _row(label: str, res: dict[str, Any], base: dict[str, Any] | None) -> list[Any]:
    change = "" if base is None else (lambda p: f"{p['mean']:+.3f} ±{p['se']:.3f} "
                                      f"({p['up']}/{p['down']})")(paired(base["ranks"],
                                                                         res["ranks"]))
    return [label, res[f"mrr@{K}"], res[f"recall@{K}"], res["hits@1"], res["median_ms"],
            change]


def _base_of(mode: str) -> str:
    """The configuration a mode's expanded runs are compared with: its query alone."""
    return "query alone" if mode == "hybrid" else f"{mode}: query alone"


HEADERS = ["configuration", f"MRR@{K}", f"recall@{K}", "hits@1", "median ms",
           "per question vs alone (up/down)"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--home", type=Path, help="persistent root of RAGD_HOMEs (reuses the index; "
                    "a bench/quality.py --home works)")
    ap.add_argument("--file", type=Path, default=DEFAULT_FILE)
    ap.add_argument("--no-variants", action="store_true")
    args = ap.parse_args()
    vault_name, questions = load_questions(args.file)
    vault = corpus("vault", vault_name)
    missing = [e for q in questions for e in q["expected"] if not (vault / e).is_file()]
    if missing:
        sys.exit(f"error: {len(missing)} expected notes are not in {vault}, e.g. {missing[0]}")
    out: dict[str, Any] = {"file": str(args.file.relative_to(REPO)) if args.file.is_relative_to(
        REPO) else str(args.file), "vault": vault_name, "questions": len(questions), "k": K,
        "config": {"search.max_per_source": 1}}
    with tempfile.TemporaryDirectory(prefix="ragd-expansions-") as tmp:
        root = args.home.expanduser().resolve() if args.home else Path(tmp)
        name = f"known-{vault.name}"
        with ragd_app(root / name, {"search.max_per_source": 1},
                      on_progress=progress_printer("indexing")) as app:
            out["index"] = index_folder(app, name, vault)
            coll_root = app.collection(name).root
            ranking(app, name, coll_root, questions[0], "hybrid", ("lex", "vec", "hyde"))  # warm
            results = {label: run_config(app, name, coll_root, questions, mode, types)
                       for label, mode, types in CONFIGS}
            variants: dict[str, dict[str, Any]] = {}
            if not args.no_variants:
                for vname, patch in _variants().items():
                    with patch():
                        variants[vname] = {
                            label: run_config(app, name, coll_root, questions, mode, types)
                            for label, mode, types in CONFIGS if label in VARIANT_CONFIGS}
    base = results["query alone"]
    rows = [_row(label, res, None if not res["searches"] else results[_base_of(res["mode"])])
            for label, res in results.items()]
    print(table(f"typed sub-queries: {len(questions)} paraphrase questions over {vault_name} "
                f"({out['index']['sources']:,} notes), top {K}, one result per note", rows,
                HEADERS))
    for vname, by_config in variants.items():
        print(table(f"variant: {vname}", [_row(label, res, base)
                                          for label, res in by_config.items()], HEADERS))
    out["configs"] = results
    out["variants"] = variants
    out["per_question"] = [
        {"query": q["query"], "expected": q["expected"],
         **{label: res["ranks"][i] for label, res in results.items()}}
        for i, q in enumerate(questions)]
    path = write_json("expansions", out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
