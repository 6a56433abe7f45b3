"""What, embedded beside a code symbol or a commit, would bring the right one up by meaning?
(issue 36: "embed what describes a symbol ... and measure what helps"; "a commit's subject
weighted over its diff").

    python bench/embed_variants.py [--home DIR]

Reads the index that ``bench/code_search.py --home DIR`` built (psf/requests, every commit
and symbol embedded; default /root/.cache/ragd-bench/code-search-kept), embeds other texts per
symbol and per commit with ragd's own embedder, and ranks by cosine alone, one row per symbol
or commit (the best of its vectors), against the same question sets. No fusion and no rule of
the engine: this measures the semantic leg's raw material, so the baseline is the stored chunk
vectors ranked the same way.

Variants, symbols: ``desc`` its name as words and its kind, of its class, and its docstring
("rebuild auth (method of session redirect mixin). When being redirected..."); ``calls`` desc
plus the names its body calls, as words; ``file`` desc with its file's name. Commits:
``subject``, ``message`` (subject and body), ``message+files`` (and the paths it changed).
Each is ranked alone and as one more vector beside the chunks (the best of all).

Prints a table and writes bench/results/embed_variants.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.code_search import SETS  # noqa: E402
from bench.common import write_json  # noqa: E402
from bench.quality import ragd_app  # noqa: E402

HOME = Path("/root/.cache/ragd-bench/code-search-kept")
K = 10
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
# Names a body calls that say nothing of what it does.
_PLAIN = {"if", "for", "while", "return", "print", "len", "isinstance", "super", "str", "int",
          "dict", "list", "set", "tuple", "getattr", "setattr", "hasattr", "self", "not", "and",
          "or", "in", "elif", "with", "type", "bool", "bytes", "def", "class", "lambda",
          "except", "assert", "raise"}


def as_words(name: str) -> str:
    """``SessionRedirectMixin.rebuild_auth`` -> ``session redirect mixin rebuild auth``."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return " ".join(name.replace("_", " ").replace(".", " ").lower().split())


def symbol_text(meta: dict[str, Any], body: str, kind: str) -> str:
    parts = meta["symbol_name"].split(".")
    what = meta.get("symbol_type", "")
    desc = as_words(parts[-1]) + (f" ({what} of {as_words('.'.join(parts[:-1]))})"
                                  if len(parts) > 1 else f" ({what})")
    doc = (meta.get("docstring") or "").strip()
    if kind == "file":
        desc += " in " + as_words(Path(meta["file_path"]).stem)
    text = desc + (". " + doc if doc else "")
    if kind == "calls":
        calls: list[str] = []
        for c in _CALL.findall(body):
            if c not in _PLAIN and c not in calls and c != parts[-1]:
                calls.append(c)
        if calls:
            text += ". Uses " + ", ".join(as_words(c) for c in calls[:12])
    return text[:1200]


def commit_text(meta: dict[str, Any], kind: str) -> str:
    lines = [ln for ln in meta["commit_message"].strip().splitlines() if ln.strip()]
    subject = lines[0] if lines else ""
    if kind == "subject":
        return subject
    text = "\n".join(lines)[:1500]
    if kind == "message+files":
        text = text[:1200] + "\nFiles: " + ", ".join(f["path"] for f in meta["files"][:10])
    return text


def questions(name: str) -> list[tuple[str, list[str]]]:
    out = []
    for line in SETS[name].read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            query, expected, *_ = line.split("\t")
            out.append((query, expected.split("|")))
    return out


def stored(db: sqlite3.Connection, faiss_file: Path, source_type: str
           ) -> tuple[list[int], list[dict[str, Any]], np.ndarray, np.ndarray, dict[int, str]]:
    """The sources of a type, their stored chunk vectors, the owner of each, and each
    source's text (its chunks in order)."""
    import faiss

    rows = db.execute("SELECT id, metadata FROM sources WHERE source_type = ? AND"
                      " status = 'ok' ORDER BY id", (source_type,)).fetchall()
    ids = [r[0] for r in rows]
    metas = [json.loads(r[1]) for r in rows]
    at = {sid: i for i, sid in enumerate(ids)}
    chunks = db.execute("SELECT c.id, c.source_id, c.text FROM chunks c JOIN sources s ON"
                        " s.id = c.source_id WHERE s.source_type = ? AND s.status = 'ok'"
                        " ORDER BY c.source_id, c.ordinal", (source_type,)).fetchall()
    index = faiss.read_index(str(faiss_file))
    inner = faiss.downcast_index(index.index)
    where = {int(v): k for k, v in enumerate(faiss.vector_to_array(index.id_map))}
    vecs = np.vstack([inner.reconstruct(where[c[0]]) for c in chunks]).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    owner = np.array([at[c[1]] for c in chunks])
    bodies: dict[int, str] = {}
    for _, sid, text in chunks:
        bodies[at[sid]] = bodies.get(at[sid], "") + "\n" + text
    return ids, metas, vecs, owner, bodies


def mrr(qvecs: np.ndarray, qs: list[tuple[str, list[str]]], keys: list[str],
        hit: Any, chunk_vecs: np.ndarray | None, owner: np.ndarray | None,
        extra: np.ndarray | None) -> tuple[float, list[int | None]]:
    """MRR@10 ranking one row per distinct key by its best vector's cosine."""
    ranks: list[int | None] = []
    for i, (_, expected) in enumerate(qs):
        best = np.full(len(keys), -1.0, dtype=np.float32)
        if chunk_vecs is not None and owner is not None:
            np.maximum.at(best, owner, chunk_vecs @ qvecs[i])
        if extra is not None:
            best = np.maximum(best, extra @ qvecs[i])
        shown: list[str] = []
        for j in np.argsort(-best):
            if keys[j] not in shown:
                shown.append(keys[j])
            if len(shown) == K:
                break
        ranks.append(next((r for r, key in enumerate(shown, 1) if hit(key, expected)), None))
    return float(np.mean([1 / r if r else 0.0 for r in ranks])), ranks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, default=HOME)
    args = ap.parse_args(argv)
    data = args.home / "data"
    if not (data / "catalog.sqlite").exists():
        print(f"no index at {args.home}: run python bench/code_search.py --home {args.home}"
              " first", file=sys.stderr)
        return 2
    db = sqlite3.connect(f"file:{data / 'catalog.sqlite'}?mode=ro", uri=True)
    result: dict[str, Any] = {"home": str(args.home), "sets": {}}
    with ragd_app(args.home) as app:
        embed = app.embedder
        for name, source_type, kinds in (("symbols", "code", ("desc", "calls", "file")),
                                         ("commits", "commit",
                                          ("subject", "message", "message+files"))):
            qs = questions(name)
            qvecs = np.vstack([embed.embed_query(q) for q, _ in qs])
            _, metas, vecs, owner, bodies = stored(db, data / "faiss" / "index.faiss",
                                                   source_type)
            if name == "symbols":
                keys = [f"{m['file_path']}::{m['symbol_name']}" for m in metas]

                def hit(key: str, expected: list[str]) -> bool:
                    return key in {e.split("@L")[0] for e in expected}
            else:
                keys = [m["commit_sha"] for m in metas]

                def hit(key: str, expected: list[str]) -> bool:
                    return any(key.startswith(e) for e in expected)
            rows: dict[str, Any] = {}
            score, ranks = mrr(qvecs, qs, keys, hit, vecs, owner, None)
            rows["chunks (as stored)"] = {"mrr@10": score, "ranks": ranks}
            for kind in kinds:
                started = time.monotonic()
                texts = [symbol_text(m, bodies.get(i, ""), kind) if name == "symbols"
                         else commit_text(m, kind) for i, m in enumerate(metas)]
                extra = embed.embed(texts)
                seconds = time.monotonic() - started
                alone = mrr(qvecs, qs, keys, hit, None, None, extra)
                beside = mrr(qvecs, qs, keys, hit, vecs, owner, extra)
                rows[kind] = {"mrr@10": alone[0], "ranks": alone[1], "embed_s": seconds,
                              "example": texts[0][:200]}
                rows[f"chunks + {kind}"] = {"mrr@10": beside[0], "ranks": beside[1]}
            result["sets"][name] = rows
            print(f"\n{name} ({len(qs)} questions, {len(metas):,} {source_type} sources):"
                  " semantic MRR@10 by cosine alone\n\n| vectors | MRR@10 | first |\n|---|---|---|")
            for label, row in rows.items():
                firsts = sum(1 for r in row["ranks"] if r == 1)
                print(f"| {label} | {row['mrr@10']:.3f} | {firsts} |")
    out = write_json("embed_variants", result)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
