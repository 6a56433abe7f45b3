"""Concept and category quality on the shared books (decisions 0033, 0036), in one run:

1. The books go into a real Calibre library (``calibredb add``: Calibre turns each EPUB's
   ``dc:subject`` and each PDF's keywords into tags); the descriptions are cleared there, so
   the text ragd analyses never holds the description the judgment below reads. The daemon
   indexes it as a Calibre collection: the tags reach the concept store through ragd's own
   Calibre reader.
2. Concept hit rate: per book, how many of its top 20 concepts have all their words in its
   own table of contents, description, subjects or Calibre tags (an outside judgment nobody
   here wrote), against a plain TF-IDF top 20 in the same run (the same cleaned candidates,
   the same document frequencies: only the ranking differs).
3. Category purity against the Calibre tags: a tagged book's subject words are the words of
   its tags (stopwords dropped, singular); a category's majority word is the one most of its
   tagged books hold; purity is the share of tagged books that hold their category's majority
   word. Also pair agreement: of the pairs of tagged books put in one category, the share
   that share a subject word. Baselines in the same run: random categories of the same sizes
   (mean of 2,000 shuffles) and spherical k-means with the same k over TF-IDF vectors.
4. Seconds of analysis per book and the daemon's peak memory.

    .venv/bin/python -m bench.concepts [BOOKS_DIR] [--home DIR]

``--home DIR`` keeps the library and the index in DIR: a second run with the same DIR
re-analyses (concepts.sqlite deleted) without indexing again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.calibre import calibredb
from bench.common import CORPUS
from ragd.daemon.concepts import categories as cats
from ragd.daemon.concepts import extract, languages
from ragd.daemon.concepts.analysis import (
    candidate_counts,
    clean_texts,
    document_stopwords,
    drop_common,
    shared_sentences,
)
from ragd.daemon.ipc.client import Client
from ragd.daemon.ipc.discovery import find_daemon
from ragd.daemon.settings.paths import resolve_paths

BOOKS = CORPUS / "books"
OUT = Path(__file__).parent / "results" / "concepts.json"
SHUFFLES = 2000


def judgment(path: Path) -> str:
    """The outside judgment: a book's own table of contents, description and subjects."""
    parts: list[str] = []
    if path.suffix == ".epub":
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                low = name.lower()
                if low.endswith((".opf", ".ncx")) or "nav" in low or "toc" in low:
                    raw = z.read(name).decode("utf-8", "replace")
                    if low.endswith(".opf"):
                        parts += re.findall(r"<dc:(?:description|subject)[^>]*>(.*?)</dc:",
                                            raw, re.S)
                    else:
                        parts += re.findall(r"<(?:text|a)[^>]*>(.*?)</(?:text|a)>", raw, re.S)
    elif path.suffix == ".pdf":
        try:
            from pypdf import PdfReader

            def walk(items: Any) -> None:
                for it in items:
                    if isinstance(it, list):
                        walk(it)
                    else:
                        parts.append(str(it.title))

            walk(PdfReader(str(path)).outline)
        except Exception:
            pass
    return re.sub(r"<[^>]+>", " ", " ".join(parts))


def hits(concepts: list[str], judged: str) -> int:
    """How many concepts have all their words in the judgment (read as the concepts are: an
    Arabic word with its shadda is one word, optional marks folded)."""
    words = {extract.normalise(w) for w in re.findall(rf"[^\W\d_](?:[^\W\d_]|[{extract._M}])*",
                                                       languages.fold(judged))}
    return sum(1 for c in concepts if c and all(extract.normalise(w) in words
                                                for w in c.lower().split()))


def peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


# -- purity ---------------------------------------------------------------------------------------
def subject_words(tags: Sequence[str]) -> set[str]:
    """A book's subject words: its tags' words, stopwords dropped, singular."""
    return {extract.normalise(w) for t in tags for w in re.findall(r"[^\W\d_]+", t.lower())
            if len(w) > 2 and w not in extract.STOPWORDS}


def purity(groups: Sequence[Sequence[int]], subjects: dict[int, set[str]]) -> float:
    """Share of tagged books holding their category's majority subject word."""
    held = total = 0
    for g in groups:
        tagged = [subjects[m] for m in g if subjects.get(m)]
        if tagged:
            held += Counter(w for s in tagged for w in s).most_common(1)[0][1]
            total += len(tagged)
    return held / total if total else 0.0


def pair_agreement(groups: Sequence[Sequence[int]], subjects: dict[int, set[str]]) -> float:
    """Of the pairs of tagged books in one category, the share sharing a subject word."""
    agree = pairs = 0
    for g in groups:
        tagged = [subjects[m] for m in g if subjects.get(m)]
        for i in range(len(tagged)):
            for j in range(i + 1, len(tagged)):
                pairs += 1
                agree += bool(tagged[i] & tagged[j])
    return agree / pairs if pairs else 0.0


def random_baseline(groups: Sequence[Sequence[int]], subjects: dict[int, set[str]]
                    ) -> tuple[float, float]:
    """Mean purity and pair agreement of random categories of the same sizes."""
    members = [m for g in groups for m in g]
    sizes = [len(g) for g in groups]
    rng = random.Random(26)
    pur, agr = [], []
    for _ in range(SHUFFLES):
        rng.shuffle(members)
        shuffled, at = [], 0
        for s in sizes:
            shuffled.append(members[at:at + s])
            at += s
        pur.append(purity(shuffled, subjects))
        agr.append(pair_agreement(shuffled, subjects))
    return float(np.mean(pur)), float(np.mean(agr))


def tfidf_groups(counts: dict[int, Counter[str]], k: int) -> list[list[int]]:
    """Spherical k-means (the categories' own, same seeding) over TF-IDF vectors."""
    ids = sorted(counts)
    df: Counter[str] = Counter()
    for c in counts.values():
        df.update(k_ for k_, n in c.items() if n >= 2)
    vocab = {w: i for i, w in enumerate(sorted(df))}
    mat = np.zeros((len(ids), len(vocab)), dtype=np.float32)
    for r, sid in enumerate(ids):
        for w, n in counts[sid].items():
            if w in vocab:
                mat[r, vocab[w]] = (1 + np.log(n)) * (np.log((1 + len(ids)) / (1 + df[w])) + 1)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True).clip(1e-9)
    labels = cats.cluster(mat, k)
    return [[ids[i] for i in range(len(ids)) if labels[i] == c] for c in sorted(set(labels))]


# -- the run --------------------------------------------------------------------------------------
def build(books: Path, home: Path) -> tuple[Path, Path]:
    """The Calibre library (descriptions cleared) and the daemon's config, once per home."""
    library = home / "library"
    if not (library / "metadata.db").exists():
        library.mkdir(parents=True, exist_ok=True)
        files = sorted(p for sub in ("epub", "pdf") for p in (books / sub).glob("*")
                       if p.is_file())
        calibredb(library, "add", "--duplicates", *map(str, files))
        listed = json.loads(calibredb(library, "list", "-f", "comments", "--for-machine"))
        for book in listed:
            if book.get("comments"):
                calibredb(library, "set_metadata", str(book["id"]), "--field", "comments:")
    ragd_home = home / "ragd"
    config = resolve_paths({"RAGD_HOME": str(ragd_home)}).config_file
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[calibre]\nlibraries = ["{library}"]\n', encoding="utf-8")
    return library, ragd_home


def wait_analysed(client: Client) -> float:
    """Wait until the concept thread has analysed everything and is idle; seconds waited."""
    t0 = time.monotonic()
    last, stable = -1, 0
    while stable < 10:
        st = client.call("concepts_status", {})
        done = st["documents"] if not st["busy"] and st["passes"] else -1
        stable = stable + 1 if done == last and done > 0 else 0
        last = done
        time.sleep(0.5)
    return time.monotonic() - t0 - 5.0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("books", nargs="?", type=Path, default=BOOKS)
    ap.add_argument("--home", type=Path, help="keep the library and index here (reused)")
    args = ap.parse_args(argv)
    if not (args.books / "epub").is_dir():
        print(f"no books under {args.books}")
        return 1
    home = args.home or Path(tempfile.mkdtemp(prefix="ragd-concepts-"))
    library, ragd_home = build(args.books, home)
    paths = resolve_paths({"RAGD_HOME": str(ragd_home)})
    (paths.data_dir / "concepts.sqlite").unlink(missing_ok=True)  # analyse with this code
    originals = {hashlib.sha256(p.read_bytes()).hexdigest(): p
                 for p in args.books.rglob("*") if p.suffix in (".epub", ".pdf")}
    vault = home / "vault"
    vault.mkdir(exist_ok=True)
    env = {"RAGD_HOME": str(ragd_home), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin",
           "HOME": os.environ.get("HOME", str(home)), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen([sys.executable, "-m", "ragd.daemon.cli.main", "daemon", "--vault",
                             str(vault)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        while not find_daemon(paths):
            time.sleep(0.2)
        client = Client(find_daemon(paths) or "", timeout=3600, client_name="bench")
        with client:
            t0 = time.monotonic()
            client.call("index", {"collection": "calibre"}, timeout=7200)
            indexed_s = time.monotonic() - t0
            analysis_s = wait_analysed(client)
            result = measure(client, paths, originals)
            result.update(analysis_wall_s=round(analysis_s, 1), index_s=round(indexed_s, 1),
                          peak_rss_mb=round(peak_rss(proc.pid) / 2**20))
    finally:
        proc.terminate()
        proc.wait(30)
    report(result)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


def measure(client: Client, paths: Any, originals: dict[str, Path]) -> dict[str, Any]:
    store = sqlite3.connect(str(paths.data_dir / "concepts.sqlite"))
    cat = sqlite3.connect(f"file:{paths.catalog_path}?mode=ro", uri=True)
    docs = store.execute("SELECT source_id, source, title, metadata, seconds FROM docs"
                         " ORDER BY title").fetchall()
    n_docs = len(docs)
    shared = shared_sentences(store)
    rows, counts_of, subjects = [], {}, {}
    for sid, src, title, meta, seconds in docs:
        path = Path(src)
        original = originals.get(hashlib.sha256(path.read_bytes()).hexdigest(), path) \
            if path.is_file() else path
        tags = json.loads(meta).get("calibre_tags") or []
        subjects[sid] = subject_words(tags)
        ours = [c["concept"] for c in client.call(
            "concepts_extract_concepts", {"document_query": src})["primary_concepts"]]
        texts = [r[0] for r in cat.execute(
            "SELECT text FROM chunks WHERE source_id=? AND ordinal >= 0 ORDER BY ordinal",
            (sid,))]
        cleaned = clean_texts(texts, shared)
        row_meta = cat.execute("SELECT metadata FROM sources WHERE id=?", (sid,)).fetchone()
        langs, stops = document_stopwords(json.loads(row_meta[0] or "{}") if row_meta else {},
                                          cleaned)
        counts = Counter(candidate_counts(cleaned, stops))
        terms = [r[0] for r in store.execute("SELECT key FROM doc_terms WHERE source_id=?",
                                             (sid,))]
        df = {t: store.execute("SELECT COUNT(*) FROM doc_terms WHERE key=?",
                               (t,)).fetchone()[0] for t in terms}
        # the baseline's candidates are cleaned as the analysis cleans them (boilerplate, the
        # document's function words of other languages, the library's common phrases)
        counts = Counter(drop_common(dict(counts), lambda k, df=df: df.get(k, 1), n_docs))
        counts_of[sid] = counts
        base = [p[1] for p in extract.tfidf_rank(counts, lambda k, df=df: df.get(k, 1),
                                                 n_docs, limit=20)]
        judged = judgment(original) + " " + " ".join(tags)
        rows.append({"book": original.name, "title": title, "tags": tags, "languages": langs,
                     "judged_words": len(judged.split()), "ours": hits(ours[:20], judged),
                     "tfidf": hits(base, judged), "seconds": seconds, "top10": ours[:10],
                     "tfidf_top10": base[:10]})
    cat.close()
    tree = store.execute("SELECT id, name, parent FROM categories").fetchall()
    members: dict[str, list[int]] = {}
    for cid, sid in store.execute("SELECT category_id, source_id FROM category_docs"):
        members.setdefault(cid, []).append(sid)
    parents = {r[2] for r in tree if r[2]}
    levels = {"top": [members.get(r[0], []) for r in tree if not r[2]],
              "leaf": [members.get(r[0], []) for r in tree if r[0] not in parents]}
    purity_rows = {}
    for level, groups in levels.items():
        rnd_p, rnd_a = random_baseline(groups, subjects)
        tf = tfidf_groups(counts_of, len(groups))
        purity_rows[level] = {
            "categories": len(groups), "purity": round(purity(groups, subjects), 3),
            "pair_agreement": round(pair_agreement(groups, subjects), 3),
            "random_purity": round(rnd_p, 3), "random_pair_agreement": round(rnd_a, 3),
            "tfidf_kmeans_purity": round(purity(tf, subjects), 3),
            "tfidf_kmeans_pair_agreement": round(pair_agreement(tf, subjects), 3)}
    names = {sid: title for sid, _, title, _, _ in docs}
    judged_rows = [r for r in rows if r["judged_words"] >= 5]
    return {
        "books": len(rows), "books_with_judgment": len(judged_rows),
        "tagged_books": sum(1 for s in subjects.values() if s),
        "hit_rate_ours": sum(r["ours"] for r in judged_rows) / (20 * len(judged_rows) or 1),
        "hit_rate_tfidf": sum(r["tfidf"] for r in judged_rows) / (20 * len(judged_rows) or 1),
        "seconds_per_book": sum(r["seconds"] for r in rows) / (len(rows) or 1),
        "purity": purity_rows,
        "categories": [{"name": r[1], "parent": r[2],
                        "documents": sorted(names.get(s, "?") for s in members.get(r[0], []))}
                       for r in tree],
        "rows": rows}


def report(result: dict[str, Any]) -> None:
    print(f"{'book':45} {'ours':>5} {'tfidf':>5} {'s':>6}  top concepts")
    for r in result["rows"]:
        print(f"{r['book'][:45]:45} {r['ours']:5} {r['tfidf']:5} {r['seconds']:6.2f}  "
              f"{', '.join(r['top10'][:6])}")
    print(f"hit rate (top 20, {result['books_with_judgment']} books with a TOC, description or "
          f"tags): ours {result['hit_rate_ours']:.3f}, TF-IDF {result['hit_rate_tfidf']:.3f}; "
          f"{result['seconds_per_book']:.2f} s per book; peak RSS {result['peak_rss_mb']} MB")
    for level, p in result["purity"].items():
        print(f"purity ({level} level, {p['categories']} categories, "
              f"{result['tagged_books']} tagged books): ours {p['purity']:.3f}, random "
              f"{p['random_purity']:.3f}, TF-IDF k-means {p['tfidf_kmeans_purity']:.3f}; "
              f"pair agreement ours {p['pair_agreement']:.3f}, random "
              f"{p['random_pair_agreement']:.3f}, TF-IDF k-means "
              f"{p['tfidf_kmeans_pair_agreement']:.3f}")
    for c in result["categories"]:
        print(f"  {c['name'][:30]:30} parent={c['parent'] or '-':14} {c['documents']}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
