"""Tune hybrid search's fusion settings on SciFact's train split; check them on held-out sets.

    python bench/tune_fusion.py --home ~/.cache/ragd-bench/quality

Hybrid search fuses the keyword, semantic and exact legs by weighted Reciprocal Rank Fusion
(`search.rrf_k`, `search.keyword_weight`, `search.semantic_weight`). This script picks the pair
(rrf_k, keyword_weight) with the best nDCG@10 on the **train** split of BEIR SciFact (809
queries), then reports the defaults and that pair on data the choice never saw: the SciFact
**test** split (300 queries) and the known-item questions over obsidian-help-en. The verdict
says to change the defaults only when the best pair gains at least MIN_GAIN on train.

Each query's three legs are run once, through the real `SearchEngine` leg methods, and every
setting is then fused from those lists with the real `rrf` and `collapse` (at most one chunk per
document, as bench/quality.py scores): the sweep costs one search per query, not one per
setting.

It reads the indexes that `bench/quality.py --home DIR` builds (DIR/scifact and
DIR/known-<vault>), so run that first. Prints a table, writes bench/results/tune_fusion.json
and a heat map of train nDCG@10 as PNG.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import RESULTS, pyplot, table, write_json  # noqa: E402
from bench.metrics import evaluate, mrr  # noqa: E402
from bench.quality import (  # noqa: E402
    DEFAULT_KNOWN_ITEMS,
    K,
    known_items_vault,
    load_known_items,
    load_scifact,
    ragd_app,
    scifact_home,
)

RRF_KS = (5, 10, 20, 40, 60)
KEYWORD_WEIGHTS = (0.25, 0.5, 0.75, 1.0)
LEG_DEPTH = 50  # what the engine fetches per leg for top_k=10 (search.overfetch)
MIN_GAIN = 0.005  # train nDCG@10 a setting must gain over the defaults to replace them

Legs = dict[str, list[int]]


def run_legs(app: Any, queries: Sequence[str], document: Callable[[str], str] = str
             ) -> tuple[list[Legs], dict[int, str]]:
    """Each query's keyword, semantic and exact lists of chunk ids, and chunk id ->
    ``document(path of its source, relative to the collection root)``."""
    from daemon.search.filters import Filters

    engine = app.search_engine
    app.embedder.warm_up()
    none = Filters()
    out: list[Legs] = []
    for n, q in enumerate(queries, 1):
        query = " ".join(q.split())
        out.append({"keyword": engine.keyword_leg(query, LEG_DEPTH, none),
                    "semantic": engine.semantic_leg(query, LEG_DEPTH, none),
                    "exact": engine.exact_leg(query, LEG_DEPTH, none)})
        if n % 200 == 0:
            print(f"  {n:,}/{len(queries):,} queries", file=sys.stderr, flush=True)
    ids = sorted({i for legs in out for ranked in legs.values() for i in ranked})
    return out, {i: document(r.path) for i, r in app.catalog.chunks_by_id(ids).items()}


def fuse(legs: Legs, doc_of: dict[int, str], rrf_k: int, keyword_weight: float,
         k: int = K) -> list[str]:
    """The top ``k`` documents of one query under one setting, as the engine would rank them."""
    from daemon.search.fusion import collapse, rrf

    weights = {"keyword": keyword_weight, "semantic": 1.0, "exact": 1.0}
    fused = [f for f in rrf(legs, weights, rrf_k) if f.id in doc_of]
    return [doc_of[f.id] for f in collapse(fused, doc_of.__getitem__, 1, k)]


def scifact_ndcg(home: Path, split: str, settings: Sequence[tuple[int, float]]
                 ) -> tuple[dict[tuple[int, float], dict[str, float]], int]:
    _, queries, qrels = load_scifact(False, split)
    qids = list(queries)
    with ragd_app(home) as app:
        print(f"SciFact {split}: {len(qids)} queries ...", file=sys.stderr, flush=True)
        legs, doc_of = run_legs(app, [queries[q] for q in qids], lambda p: Path(p).stem)
    scores = {}
    for rrf_k, w in settings:
        run = {q: fuse(lg, doc_of, rrf_k, w) for q, lg in zip(qids, legs, strict=True)}
        scores[(rrf_k, w)] = evaluate(run, qrels, K)
    return scores, len(qids)


def known_items_mrr(home: Path, rows: Sequence[tuple[str, str]], vault: Path,
                    settings: Sequence[tuple[int, float]]) -> dict[tuple[int, float], float]:
    with ragd_app(home) as app:
        print(f"known items: {len(rows)} questions ...", file=sys.stderr, flush=True)
        legs, rel = run_legs(app, [q for q, _ in rows])
    expected = [e for _, e in rows]
    return {s: mrr([fuse(lg, rel, *s) for lg in legs], expected, K)[f"mrr@{K}"]
            for s in settings}


def heat_map(grid: dict[tuple[int, float], float], best: tuple[int, float]) -> Path | None:
    plt = pyplot()
    if plt is None:
        return None
    values = [[grid[(k, w)] for k in RRF_KS] for w in KEYWORD_WEIGHTS]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    im = ax.imshow(values, cmap="viridis", aspect="auto", origin="lower")
    ax.set_xticks(range(len(RRF_KS)), [str(k) for k in RRF_KS])
    ax.set_yticks(range(len(KEYWORD_WEIGHTS)), [str(w) for w in KEYWORD_WEIGHTS])
    ax.set_xlabel("search.rrf_k")
    ax.set_ylabel("search.keyword_weight")
    for yi, row in enumerate(values):
        for xi, v in enumerate(row):
            mark = "*" if (RRF_KS[xi], KEYWORD_WEIGHTS[yi]) == best else ""
            ax.text(xi, yi, f"{v:.3f}{mark}", ha="center", va="center", fontsize=8,
                    color="white")
    ax.set_title("SciFact train nDCG@10, hybrid (* best)")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "tune_fusion.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--home", type=Path, required=True,
                    help="the --home of a full bench/quality.py run")
    ap.add_argument("--known-items", type=Path, default=DEFAULT_KNOWN_ITEMS)
    args = ap.parse_args()
    root = args.home.expanduser().resolve()
    home, _ = scifact_home(root, False)
    rows, named = load_known_items(args.known_items)
    vault = known_items_vault(rows, named, None)
    known_home = root / f"known-{vault.name}"
    for need in (home, known_home):
        if not (need / "data" / "catalog.sqlite").is_file():
            sys.exit(f"error: no index at {need}: run `bench/quality.py --home {root}` first")
    from daemon.config import SearchConfig

    default = (SearchConfig().rrf_k, SearchConfig().keyword_weight)
    grid_settings = [(k, w) for k in RRF_KS for w in KEYWORD_WEIGHTS]
    train, n_train = scifact_ndcg(home, "train", grid_settings)
    grid = {s: v[f"ndcg@{K}"] for s, v in train.items()}
    best = max(grid, key=lambda s: (grid[s], s == default))
    compare = [default] if best == default else [default, best]
    verdict = ("change the defaults" if grid[best] - grid[default] >= MIN_GAIN else
               f"keep the defaults (the best setting gains < {MIN_GAIN} on train)")
    test, n_test = scifact_ndcg(home, "test", compare)
    known = known_items_mrr(known_home, rows, vault, compare)
    print(table(f"SciFact train nDCG@{K}, hybrid ({n_train} queries)",
                [[f"rrf_k={k}"] + [grid[(k, w)] for w in KEYWORD_WEIGHTS] for k in RRF_KS],
                ["", *[f"kw {w}" for w in KEYWORD_WEIGHTS]]))
    rows_out = [[("default " if s == default else "best on train ") + f"rrf_k={s[0]}, kw={s[1]}",
                 grid[s], test[s][f"ndcg@{K}"], test[s][f"recall@{K}"], known[s]]
                for s in compare]
    print(table("held out", rows_out, ["setting", "train nDCG@10", f"test nDCG@10 ({n_test})",
                                       "test R@10", f"known-item MRR@10 ({len(rows)})"]))
    print(f"verdict: {verdict}")
    heat_map(grid, best)
    path = write_json("tune_fusion", {
        "grid": [{"rrf_k": k, "keyword_weight": w, "train_ndcg@10": grid[(k, w)]}
                 for k, w in grid_settings],
        "default": {"rrf_k": default[0], "keyword_weight": default[1]},
        "best_on_train": {"rrf_k": best[0], "keyword_weight": best[1]}, "verdict": verdict,
        "min_gain": MIN_GAIN,
        "held_out": [{"rrf_k": s[0], "keyword_weight": s[1], "test": test[s],
                      "known_items_mrr@10": known[s]} for s in compare],
        "queries": {"train": n_train, "test": n_test, "known_items": len(rows)}})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
