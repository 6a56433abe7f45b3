"""Template lines: would the semantic leg find notes better without lines many notes share?

Decision 0040. A note made from a template embeds the template's lines with its own words:
every plugin note of obsidian-hub holds ``Plugin ID: ...``, ``Links: GitHub repository or Open
in Obsidian``, ``Developed by: ...`` and ``Mobile compatible: Yes`` beside a one-sentence
description, so the description is a small part of what is embedded. This measures what the
semantic leg would gain if the chunker left such lines out of a chunk's embedded text, under
rules that need no knowledge of one vault:

- ``exact N``: a line whose text (whitespace collapsed, case folded) is in at least N notes of
  the collection;
- ``label N``: a ``Label: value`` line (a label of one to four words) whose label opens a line
  in at least N notes, whatever the value;
- ``heading``: a chunk's opening heading line, which the ``title > heading`` prefix embedded
  before it already names (so a short section does not embed its heading twice).

For each known-item set it reads the vectors of bench/quality.py's index, re-embeds only the
chunks a rule changes (their title and heading prefix and what reading view shows of the rest,
as the chunker builds it), and ranks notes by their best chunk with exact search over the whole
collection: the semantic leg without approximation, collapsing or fusion. MRR@10 per rule, and
how many questions moved up and down, are printed and written to
bench/results/template_lines.json.

    python bench/template_lines.py --home DIR [--known-items FILE ...] [--rules exact:5,heading]

``DIR`` is the --home of ``bench/quality.py`` run on the same known-item files (hub:
``--known-items bench/queries/obsidian-hub.tsv``). A rule that re-embeds tens of thousands of
chunks takes minutes on 2 cores (obsidian-hub, ``exact 5``: 36k chunks, ~4 min).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table, write_json  # noqa: E402
from bench.quality import (  # noqa: E402
    known_items_vault,
    load_known_items,
    ragd_app,
)

K = 10
DEFAULT_SETS = ("obsidian-help-en", "kepano-obsidian", "obsidian-hub")
DEFAULT_RULES = "exact:5,exact:50,label:20,label:200,heading"
_LABEL = re.compile(r"^\s*(?:[-*]\s+)?([^\W\d_][\w' -]{0,40}?)\s*:\s+\S")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.*?)[ \t#]*$")


def _norm(line: str) -> str:
    return " ".join(line.split()).casefold()


def _label(line: str) -> str | None:
    m = _LABEL.match(line)
    if m is None or len(m.group(1).split()) > 4:
        return None
    return _norm(m.group(1))


def shared_lines(texts: dict[int, str], note_of: dict[int, str], rule: str,
                 at_least: int) -> Callable[[str], bool]:
    """A test of whether a line is one of the collection's template lines under ``rule``."""
    notes: dict[str, set[str]] = defaultdict(set)
    key = _norm if rule == "exact" else _label
    for cid, text in texts.items():
        for line in text.split("\n"):
            k = key(line)
            if k:
                notes[k].add(note_of[cid])
    common = {k for k, n in notes.items() if len(n) >= at_least}

    def is_template(line: str) -> bool:
        k = key(line)
        return bool(k) and k in common

    return is_template


def without_heading(text: str, heading_path: Sequence[str]) -> list[str]:
    """``text``'s lines without its opening heading line when that heading ends ``heading_path``."""
    lines = text.split("\n")
    first = next((n for n, line in enumerate(lines) if line.strip()), len(lines))
    m = _HEADING.match(lines[first]) if first < len(lines) and heading_path else None
    if m is None or _norm(m.group(1)) != _norm(heading_path[-1]):
        return lines
    return lines[:first] + lines[first + 1:]


def kept_lines(rule: str, at_least: int, texts: dict[int, str], note_of: dict[int, str],
               heading_paths: dict[int, Sequence[str]]) -> Callable[[int], list[str]]:
    """The lines of a chunk that ``rule`` keeps in what is embedded."""
    if rule == "heading":
        return lambda cid: without_heading(texts[cid], heading_paths[cid])
    is_template = shared_lines(texts, note_of, rule, at_least)
    return lambda cid: [line for line in texts[cid].split("\n") if not is_template(line)]


def note_ranks(vectors: np.ndarray, notes: Sequence[str], queries: np.ndarray,
               expected: Sequence[str]) -> list[int]:
    """The rank of each expected note when notes are ranked by their best chunk."""
    names = sorted(set(notes))
    index = {n: j for j, n in enumerate(names)}
    column = np.array([index[n] for n in notes])
    out = []
    for q, want in zip(queries, expected, strict=True):
        best = np.full(len(names), -np.inf, dtype=np.float32)
        np.maximum.at(best, column, vectors @ q)
        out.append(int((best > best[index[want]]).sum()) + 1)
    return out


def label(rule: str, at_least: int) -> str:
    return rule if rule == "heading" else f"{rule} {at_least}"


def mrr(ranks: Sequence[int]) -> float:
    return float(np.mean([1 / r if r <= K else 0.0 for r in ranks]))


def measure_set(home: Path, tsv: Path, rules: Sequence[tuple[str, int]]) -> dict[str, Any]:
    from ragd.daemon.text.chunking import embed_prefix, embed_text
    from ragd.daemon.text.reading import hidden, reading

    rows_q, named = load_known_items(tsv)
    vault = known_items_vault(rows_q, named, None)
    name = f"known-{vault.name}"
    with ragd_app(home / name) as app:
        emb = app.embedder
        emb.warm_up()
        cat = app.catalog
        all_ids = sorted(cat.all_chunk_ids())
        rows = cat.chunks_by_id(all_ids)
        stored = cat.chunk_vectors(emb.fingerprint, all_ids)
        ids = [i for i in all_ids if i in stored]
        note_of = {i: rows[i].path for i in ids}
        texts = {i: rows[i].text for i in ids}
        base = np.stack([stored[i] for i in ids]).astype(np.float32)
        queries = np.stack([emb.embed_query(q) for q, _ in rows_q])
        expected = [e for _, e in rows_q]
        notes = [note_of[i] for i in ids]
        before = note_ranks(base, notes, queries, expected)
        out: dict[str, Any] = {"vault": vault.name, "questions": len(rows_q), "chunks": len(ids),
                               "stored": {"mrr@10": round(mrr(before), 3)}, "rules": {}}
        for rule, at_least in rules:
            keep = kept_lines(rule, at_least, texts, note_of,
                              {cid: rows[cid].heading_path for cid in ids})
            changed, new_texts = [], []
            for k, cid in enumerate(ids):
                lines = texts[cid].split("\n")
                kept = keep(cid)
                if len(kept) == len(lines):
                    continue
                body = "\n".join(kept)
                seen = reading(body, hidden(body)).strip()
                prefix = embed_prefix(rows[cid].title, rows[cid].heading_path)
                changed.append(k)
                new_texts.append(embed_text(prefix, seen) if seen else prefix)
            print(f"  {vault.name} {label(rule, at_least)}: re-embedding {len(changed):,} chunks",
                  file=sys.stderr, flush=True)
            vectors = base.copy()
            if changed:
                vectors[changed] = emb.embed(new_texts)
            after = note_ranks(vectors, notes, queries, expected)
            out["rules"][label(rule, at_least)] = {
                "mrr@10": round(mrr(after), 3), "chunks_changed": len(changed),
                "up": sum(a < b for a, b in zip(after, before, strict=True)),
                "down": sum(a > b for a, b in zip(after, before, strict=True))}
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, required=True, help="the --home of bench/quality.py")
    ap.add_argument("--known-items", type=Path, action="append",
                    help="a known-item TSV (default: the three sets of bench/queries)")
    ap.add_argument("--rules", default=DEFAULT_RULES,
                    help=f"comma-separated exact:N, label:N or heading (default {DEFAULT_RULES})")
    args = ap.parse_args()
    queries_dir = Path(__file__).resolve().parent / "queries"
    sets = args.known_items or [queries_dir / f"{n}.tsv" for n in DEFAULT_SETS]
    rules = []
    for part in args.rules.split(","):
        rule, _, n = part.partition(":")
        if not (rule == "heading" and not n or rule in ("exact", "label") and n.isdigit()):
            sys.exit(f"error: bad rule {part!r}: write exact:N, label:N or heading")
        rules.append((rule, int(n or 0)))
    results = [measure_set(args.home, tsv, rules) for tsv in sets]
    names = [label(r, n) for r, n in rules]
    head = ["rule", *(r["vault"] for r in results)]
    body = [["as stored", *(f"{r['stored']['mrr@10']:.3f}" for r in results)]]
    for n in names:
        body.append([n, *(f"{r['rules'][n]['mrr@10']:.3f} ({r['rules'][n]['up']} up, "
                          f"{r['rules'][n]['down']} down; {r['rules'][n]['chunks_changed']:,} "
                          "chunks)" for r in results)])
    print(table("semantic leg, exact search: known-item MRR@10 with template lines left out",
                body, head))
    write_json("template_lines", {"sets": results})


if __name__ == "__main__":
    main()
