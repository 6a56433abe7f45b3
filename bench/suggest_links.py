"""suggest_links against reference 001's method on the shared vaults, and note-tool latency.

For every note that already links to other notes of its vault, its links are hidden (the link
syntax and targets are taken out of its text, which is embedded again) and both methods rank
the other notes; recall@5 is the share of the note's real links found in the top 5 (out of
min(links, 5), so 1.0 is reachable), averaged over notes. In the same run:

- **ragd**: ``ragd.daemon.notes.suggest.rank``: each section asks the vector index, candidates
  score by their best section pair plus agreeing sections, boilerplate left out;
- **reference 001**: the note's whole text embedded as one query, chunks ranked by similarity
  and grouped by file (``ragd.daemon.notes.suggest.chunk_similarity``).

Latency: ``ragd.daemon.notes.reading.read`` (note + links + backlinks) and the ragd suggestions as
the tool runs them (links left in, notes already linked excluded), per note.

    python bench/suggest_links.py [--vault kepano-obsidian --vault obsidian-help-en] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import corpus, fresh_home, median, pct, table, write_json  # noqa: E402
from bench.quality import ragd_app  # noqa: E402

_LINKS = re.compile(r"!?\[\[[^\[\]\n]*\]\]|!?\[[^\]\n]*\]\([^)\n]*\)")


def hide_links(text: str) -> str:
    return _LINKS.sub(" ", text)


def run_vault(name: str, limit: int | None) -> dict[str, Any]:
    from ragd.daemon.notes import reading, suggest
    from ragd.daemon.stores import links

    root = corpus("vault", name)
    home = fresh_home(f"suggest-{name}")
    with ragd_app(home, {"obsidian.enabled": True, "obsidian.vaults": [str(root)]}) as app:
        coll = app.collection("obsidian")
        app.embedder.warm_up()
        t0 = time.perf_counter()
        app.sync_collection(coll)
        while app.indexer.embed_some():
            pass
        index_s = time.perf_counter() - t0
        cat, fp = app.catalog, app.embedder.fingerprint
        res = reading.resolver(cat, coll)
        notes = [(i, p) for i, p in res.path_of.items() if p.lower().endswith(".md")]
        cases = []
        with cat.reading() as db:
            for sid, path in sorted(notes, key=lambda n: n[1]):
                linked = {t for t in links.linked_ids(db, sid, res)
                          if t != sid and res.path_of.get(t, "").lower().endswith(".md")}
                if linked:
                    cases.append((sid, path, linked))
        cases = cases[:limit] if limit else cases

        def embed(texts: list[str]) -> Any:
            return app.embedder.embed(texts)

        ours: list[float] = []
        theirs: list[float] = []
        for sid, _path, linked in cases:
            with cat.reading() as db:
                chunks = db.execute("SELECT text, heading_path, ordinal FROM chunks WHERE"
                                    " source_id=? ORDER BY ordinal", (sid,)).fetchall()
                title = db.execute("SELECT title FROM sources WHERE id=?", (sid,)).fetchone()[0]
            body = [c for c in chunks if c["ordinal"] >= 0] or list(chunks)
            body = sorted(body, key=lambda c: -len(c["text"]))[:suggest.MAX_SECTIONS]
            paths = [tuple(json.loads(c["heading_path"])) for c in body]
            texts = [hide_links(f"{title}\n{' > '.join(p)}\n{c['text']}")
                     for c, p in zip(body, paths, strict=True)]
            vectors = embed(texts) if texts else []
            ranked = suggest.rank(cat, app.faiss, fp, coll, sid, exclude=set(),
                                  queries=list(zip(vectors, paths, strict=True)))
            top = [c.source_id for c in ranked[:5]]
            whole = hide_links(title + "\n" + "\n".join(c["text"] for c in chunks
                                                         if c["ordinal"] >= 0))
            ref = suggest.chunk_similarity(cat, app.faiss, embed, coll, sid, whole,
                                           exclude=set())[:5]
            cap = min(len(linked), 5)
            ours.append(len(set(top) & linked) / cap)
            theirs.append(len(set(ref) & linked) / cap)

        read_ms: list[float] = []
        suggest_ms: list[float] = []
        for _sid, path in notes[:60]:
            t0 = time.perf_counter()
            reading.read(cat, coll, path, section=None, exclude=(), max_chars=200_000)
            read_ms.append((time.perf_counter() - t0) * 1000)
            row = reading.source_row(cat, coll, path)
            t0 = time.perf_counter()
            suggest.suggestions(cat, app.faiss, fp, coll, reading.resolver(cat, coll), row,
                                n=5, min_similarity=0.0, exclude_current=True,
                                exclude_linked=True, folder=None, tags=())
            suggest_ms.append((time.perf_counter() - t0) * 1000)
        stats = cat.collection_stats(coll.id)
    return {"vault": name, "notes": len(notes), "chunks": stats["chunk_count"],
            "notes_with_links": len(cases), "index_s": round(index_s, 1),
            "recall5_ragd": round(sum(ours) / max(1, len(ours)), 3),
            "recall5_reference": round(sum(theirs) / max(1, len(theirs)), 3),
            "read_ms_p50": round(median(read_ms), 1), "read_ms_p95": round(pct(read_ms, 95), 1),
            "suggest_ms_p50": round(median(suggest_ms), 1),
            "suggest_ms_p95": round(pct(suggest_ms, 95), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", action="append",
                        help="a vault of the shared corpus (default: kepano-obsidian and "
                        "obsidian-help-en; obsidian-hub takes about an hour to embed)")
    parser.add_argument("--limit", type=int, default=None, help="notes asked per vault")
    args = parser.parse_args()
    rows = [run_vault(v, args.limit) for v in args.vault or ["kepano-obsidian",
                                                              "obsidian-help-en"]]
    header = ["vault", "notes", "with links", "recall@5 ragd", "recall@5 ref 001",
              "read p50 ms", "read p95 ms", "suggest p50 ms", "suggest p95 ms"]
    print(table("suggest_links: links hidden, found again in the top 5", [
        [r["vault"], r["notes"], r["notes_with_links"], r["recall5_ragd"],
         r["recall5_reference"], r["read_ms_p50"], r["read_ms_p95"], r["suggest_ms_p50"],
         r["suggest_ms_p95"]] for r in rows], header))
    print(write_json("suggest_links", {"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
