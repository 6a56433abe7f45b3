"""Link removal: a link taken out of a note, asked back from suggest_links (issue 36).

For N notes of each shared vault that link to other notes (a seeded sample, among the links
the index knows), one of the notes it links to is drawn (seeded) and every link to it is taken
out of the note's text in a copy of the vault: with ``--mode drop`` the link and its text go
(the hard case: nothing in the note names the target any more); with ``--mode unwrap`` its
display text stays, as an unlinked mention. One case at a time: the copy of the note is changed and indexed again (the
rest of the vault keeps its links), ``ragd.daemon.notes.suggest.suggestions`` is asked as the
tools ask (notes already linked left out, the note itself left out, min_similarity 0, the top
50), and the note is put back. The rank of the removed target gives MRR and recall@10 per
vault and overall, split by whether the target lies in the note's own folder. In the same
run, reference 001's method (the note's whole text as one query, chunks grouped by file,
``reference_001``) ranks the same cases. "hub" is how many of a vault's notes share
the one suggestion seen most often in their top 5: a note suggested to everyone is a note
nobody accepts.

The copy and its index live in ``~/.cache/ragd-bench/suggest-<vault>`` and are kept between
runs (``--fresh`` starts over): only notes whose text changed are indexed again, and their
vectors come from the embedding cache, so obsidian-hub (6,571 notes, about an hour to embed
here the first time) costs minutes after the first run.

    python bench/suggest_links.py [--vault kepano-obsidian ...] [--notes 40] [--seed 36]
                                  [--mode drop|unwrap] [--fresh]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import corpus, fresh_home, median, pct, table, write_json  # noqa: E402
from bench.quality import ragd_app  # noqa: E402

VAULTS = ("kepano-obsidian", "obsidian-help-en", "obsidian-hub")
SKIP = {".obsidian", ".trash", ".git", "node_modules"}  # [index] exclude's defaults
ASK = 50  # suggestions asked per note (the tools' maximum)


@dataclass(frozen=True)
class Case:
    """One note with one of its links taken out."""

    note: str  # vault-relative path of the note
    target: str  # the note it linked to
    text: str  # the note's text without that link


def vault_files(root: Path) -> Iterator[str]:
    """Vault-relative paths of the files ragd would index (hidden and excluded names out)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIP)
        for name in sorted(filenames):
            if not name.startswith(".") and name not in SKIP:
                yield Path(dirpath, name).relative_to(root).as_posix()


def _display(link: Any, target_path: str) -> str:
    """What Obsidian shows for a link: its alias, else the name it was written with."""
    if link.alias:
        return str(link.alias)
    return link.target.rpartition("/")[2].removesuffix(".md") or \
        target_path.rpartition("/")[2].removesuffix(".md")


def pick_cases(root: Path, resolver: Any, known: dict[str, set[int]], n: int, seed: int,
               mode: str) -> list[Case]:
    """``n`` notes with links to other notes, one target each, both drawn with ``seed``; every
    link of the note to that target taken out (``drop``) or left as its text (``unwrap``).
    Only links the index knows (``known``: note path -> the notes it links to, resolved) are
    drawn: a link in properties ragd cannot read (a template's ``{{date}}`` breaks its YAML)
    was never in its graph, so taking it out changes nothing it sees."""
    from ragd.daemon.stores import links

    notes: list[tuple[str, str, dict[int, list[Any]]]] = []
    for rel in sorted(known):
        text = (root / rel).read_text(encoding="utf-8", errors="replace")
        by_target: dict[int, list[Any]] = {}
        for link in links.parse_links(text):
            tid = resolver.resolve(link.target, rel)
            if tid is not None:
                by_target.setdefault(tid, []).append(link)
        eligible = {t: lk for t, lk in by_target.items()
                    if t in known[rel] and resolver.path_of.get(t, "") != rel
                    and resolver.path_of.get(t, "").lower().endswith(".md")
                    and any(x.kind != "embed" for x in lk)}
        if eligible:
            notes.append((rel, text, eligible))
    rng = random.Random(seed)
    cases = []
    for rel, text, eligible in rng.sample(notes, min(n, len(notes))):
        tid = rng.choice(sorted(eligible))
        target = resolver.path_of[tid]
        for link in sorted(eligible[tid], key=lambda lk: -lk.start):
            keep = _display(link, target) if mode == "unwrap" else ""
            text = text[:link.start] + keep + text[link.end:]
        cases.append(Case(rel, target, text))
    return cases


def sync_copy(src: Path, dst: Path) -> int:
    """Make ``dst`` a copy of the vault ``src``. A file is written only when its bytes differ,
    so the index kept from the last run sees only what changed. Returns how many files were
    written."""
    wanted = {rel: (src / rel).read_bytes() for rel in vault_files(src)}
    written = 0
    for rel, data in wanted.items():
        path = dst / rel
        if not path.is_file() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            written += 1
    for rel in list(vault_files(dst)):
        if rel not in wanted:
            (dst / rel).unlink()
    return written


def kept_home(name: str, fresh: bool) -> Path:
    """The bench's RAGD_HOME, emptied only with ``--fresh`` (see the module doc)."""
    if fresh:
        return fresh_home(name)
    home = Path.home() / ".cache" / "ragd-bench" / name
    home.mkdir(parents=True, exist_ok=True)
    os.environ["RAGD_HOME"] = str(home)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return home


def reference_001(app: Any, coll: Any, source_id: int, text: str, exclude: set[int],
                  k: int = 200) -> list[int]:
    """Reference 001's method: the note's text embedded as one query (the model cuts it at
    its token limit, as theirs does), chunks ranked by similarity, grouped by file, each file
    ranked by its best chunk. Returns source ids, best first."""
    from ragd.daemon.search.filters import Filters, to_sql

    where, args = to_sql(Filters(collections=(coll.name,)))
    allowed = app.catalog.filter_chunk_ids(where, args)
    vec = app.embedder.embed([text])[0]
    hits = app.faiss.search(vec, k, allowed)
    rows = app.catalog.chunks_by_id([cid for cid, _ in hits])
    order: list[int] = []
    for cid, _sim in hits:
        row = rows.get(cid)
        if row is None or row.source_id == source_id or row.source_id in exclude:
            continue
        if row.source_id not in order:
            order.append(row.source_id)
    return order


def _rank(paths: list[str], target: str) -> int | None:
    return paths.index(target) + 1 if target in paths else None


def score(rows: list[dict[str, Any]], key: str = "rank") -> dict[str, Any]:
    """MRR and recall@10 of case rows (a rank of None: not in the top 50)."""
    ranks = [r[key] for r in rows]
    return {"n": len(ranks),
            "mrr": round(sum(1 / k for k in ranks if k) / max(1, len(ranks)), 3),
            "recall10": round(sum(1 for k in ranks if k and k <= 10) / max(1, len(ranks)), 3)}


def known_links(catalog: Any, coll: Any) -> dict[str, set[int]]:
    """Every note of the index that links to other notes -> the notes it links to."""
    from ragd.daemon.notes import reading
    from ragd.daemon.stores import links

    res = reading.resolver(catalog, coll)
    out = {}
    with catalog.reading() as db:
        for sid, path in res.path_of.items():
            if path.lower().endswith(".md"):
                targets = links.linked_ids(db, sid, res) - {sid}
                if targets:
                    out[path] = targets
    return out


@contextmanager
def removed(app: Any, coll: Any, copy: Path, case: Case) -> Iterator[None]:
    """The copy of ``case.note`` without its link, indexed, for the time of the block; then
    the note as it was, indexed again (its vectors come from the embedding cache)."""
    path = copy / case.note
    before = path.read_bytes()

    def index() -> None:
        app.sync_collection(coll, paths=[case.note], force=True)
        while app.indexer.embed_some():
            pass

    path.write_bytes(case.text.encode("utf-8"))
    try:
        index()
        yield
    finally:
        path.write_bytes(before)
        index()


def run_vault(name: str, n: int, seed: int, mode: str, fresh: bool) -> dict[str, Any]:
    from ragd.daemon.notes import reading, suggest
    from ragd.daemon.stores import links

    src = corpus("vault", name)
    home = kept_home(f"suggest-{name}", fresh)
    copy = home / "vault"
    written = sync_copy(src, copy)
    with ragd_app(home, {"obsidian.enabled": True, "obsidian.vaults": [str(copy)]}) as app:
        coll = app.collection("obsidian")
        app.embedder.warm_up()
        t0 = time.perf_counter()
        app.sync_collection(coll)
        while app.indexer.embed_some():
            pass
        index_s = time.perf_counter() - t0
        cat, fp = app.catalog, app.embedder.fingerprint
        cases = pick_cases(copy, reading.resolver(cat, coll), known_links(cat, coll), n, seed,
                           mode)

        rows: list[dict[str, Any]] = []
        top5: Counter[str] = Counter()
        ms: list[float] = []
        for case in cases:
            with removed(app, coll, copy, case):
                res = reading.resolver(cat, coll)
                row = reading.source_row(cat, coll, case.note)
                tgt = reading.source_row(cat, coll, case.target)
                if row is None or tgt is None:
                    continue
                with cat.reading() as db:
                    linked = links.linked_ids(db, row["id"], res)
                if tgt["id"] in linked:  # still linked in a way the file-level resolver missed
                    continue
                t0 = time.perf_counter()
                found = suggest.suggestions(cat, app.faiss, fp, coll, res, row, n=ASK,
                                            min_similarity=0.0, exclude_current=True,
                                            exclude_linked=True, folder=None, tags=())
                ms.append((time.perf_counter() - t0) * 1000)
                ref = reference_001(app, coll, row["id"], case.text, linked | {row["id"]})
            paths = [s["path"] for s in found]
            top5.update(paths[:5])
            ref_paths = [res.path_of.get(i, "") for i in ref]
            rows.append({"note": case.note, "target": case.target,
                         "same_folder": case.note.rpartition("/")[0]
                         == case.target.rpartition("/")[0],
                         "rank": _rank(paths, case.target),
                         "ref_rank": _rank(ref_paths[:ASK], case.target),
                         "top5": paths[:5], "reason": found[paths.index(case.target)]["reason"]
                         if case.target in paths else ""})
        stats = cat.collection_stats(coll.id)
    hub, hub_count = top5.most_common(1)[0] if top5 else ("", 0)
    return {"vault": name, "notes": stats["source_count"],
            "chunks": stats["chunk_count"], "files_written": written,
            "index_s": round(index_s, 1), **score(rows),
            "same_folder": score([r for r in rows if r["same_folder"]]),
            "other_folder": score([r for r in rows if not r["same_folder"]]),
            "reference_001": score(rows, "ref_rank"),
            "hub": hub, "hub_top5": hub_count,
            "suggest_ms_p50": round(median(ms), 1), "suggest_ms_p95": round(pct(ms, 95), 1),
            "cases": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", action="append", choices=VAULTS,
                        help="a vault of the shared corpus (default: all three)")
    parser.add_argument("--notes", type=int, default=40, help="notes asked per vault")
    parser.add_argument("--seed", type=int, default=36, help="which notes and links")
    parser.add_argument("--mode", choices=("drop", "unwrap"), default="drop",
                        help="take the link's text out too (drop) or leave it (unwrap)")
    parser.add_argument("--fresh", action="store_true", help="index the copies from scratch")
    parser.add_argument("--name", default="suggest_links",
                        help="bench/results/NAME.json (default suggest_links)")
    args = parser.parse_args()
    rows = [run_vault(v, args.notes, args.seed, args.mode, args.fresh)
            for v in args.vault or VAULTS]
    every = [c for r in rows for c in r["cases"]]
    overall = {"vault": "overall", **score(every),
               "same_folder": score([c for c in every if c["same_folder"]]),
               "other_folder": score([c for c in every if not c["same_folder"]]),
               "reference_001": score(every, "ref_rank"), "hub": "",
               "hub_top5": max((r["hub_top5"] for r in rows), default=0),
               "suggest_ms_p50": "", "suggest_ms_p95": ""}
    header = ["vault", "cases", "MRR", "R@10", "R@10 same folder", "R@10 other folder",
              "ref 001 MRR", "ref 001 R@10", "hub in top 5", "p50 ms", "p95 ms"]
    print(table(f"link removal ({args.mode}, seed {args.seed}): the removed target's rank "
                "in suggest_links", [
                    [r["vault"], r["n"], r["mrr"], r["recall10"],
                     f"{r['same_folder']['recall10']:.3f} ({r['same_folder']['n']})",
                     f"{r['other_folder']['recall10']:.3f} ({r['other_folder']['n']})",
                     r["reference_001"]["mrr"], r["reference_001"]["recall10"],
                     f"{r['hub_top5']}/{r['n']}", r["suggest_ms_p50"], r["suggest_ms_p95"]]
                    for r in [*rows, overall]], header))
    for r in rows:
        if r["hub"]:
            print(f"  {r['vault']}: most frequent top-5 suggestion {r['hub']!r}")
    print(write_json(args.name, {"mode": args.mode, "seed": args.seed, "notes": args.notes,
                                 "rows": rows, "overall": overall}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
