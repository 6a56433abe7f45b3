"""Concept quality on the shared books (decision 0033): per book, how many of its top 20
concepts appear in its own table of contents or description (EPUB nav/NCX and OPF
dc:description/dc:subject; a PDF's outline), against a plain TF-IDF top 20 over the same
candidates in the same run; category purity against the books' subjects; seconds per book
and the daemon's peak memory.

    .venv/bin/python -m bench.concepts [BOOKS_DIR]   # default /work/shared/corpus/books
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from ragd.daemon.concepts import extract
from ragd.daemon.ipc.client import Client
from ragd.daemon.ipc.discovery import find_daemon
from ragd.daemon.settings.paths import resolve_paths

BOOKS = Path("/work/shared/corpus/books")
OUT = Path(__file__).parent / "results" / "concepts.json"


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
    words = {extract.normalise(w) for w in re.findall(r"[^\W\d_]+", judged.lower())}
    return sum(1 for c in concepts if c and all(extract.normalise(w) in words
                                                for w in c.lower().split()))


def peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def main(argv: list[str]) -> int:
    books = Path(argv[0]) if argv else BOOKS
    files = sorted(p for p in books.rglob("*") if p.suffix in (".epub", ".pdf"))
    if not files:
        print(f"no books under {books}")
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="ragd-concepts-"))
    folder = tmp / "books"
    folder.mkdir()
    for f in files:  # copies in a temporary folder: links are not followed (decision 0012)
        shutil.copyfile(f, folder / f.name)
    home, vault = tmp / "home", tmp / "vault"
    vault.mkdir()
    env = {"RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([sys.executable, "-m", "ragd.daemon.cli.main", "daemon", "--vault",
                             str(vault)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    paths = resolve_paths({"RAGD_HOME": str(home)})
    try:
        while not find_daemon(paths):
            time.sleep(0.2)
        client = Client(find_daemon(paths) or "", timeout=3600, client_name="bench")
        with client:
            t0 = time.monotonic()
            client.call("index", {"collection": "books", "path": str(folder)}, timeout=3600)
            indexed_s = time.monotonic() - t0
            t1 = time.monotonic()
            last, stable = -1, 0
            while stable < 10:
                st = client.call("concepts_status", {})
                done = st["documents"] if not st["busy"] else -1
                stable = stable + 1 if done == last and done > 0 else 0
                last = done
                time.sleep(0.5)
            analysis_s = time.monotonic() - t1 - 5.0
            store = sqlite3.connect(str(paths.data_dir / "concepts.sqlite"))
            seconds = {r[0]: r[1] for r in store.execute("SELECT source, seconds FROM docs")}
            rows = []
            for f in files:
                src = str(folder / f.name)
                if src not in seconds:
                    continue
                ours = [c["concept"] for c in client.call(
                    "concepts_extract_concepts", {"document_query": src})["primary_concepts"]]
                sid = store.execute("SELECT source_id FROM docs WHERE source=?",
                                    (src,)).fetchone()[0]
                terms = [r[0] for r in store.execute(
                    "SELECT key FROM doc_terms WHERE source_id=?", (sid,))]
                cat = sqlite3.connect(f"file:{paths.catalog_path}?mode=ro", uri=True)
                text = "\n".join(r[0] for r in cat.execute(
                    "SELECT text FROM chunks WHERE source_id=?", (sid,)))
                cat.close()
                counts = extract.candidates(text)
                n_docs = len(seconds)
                df: dict[str, int] = {}
                for t in terms:
                    df[t] = store.execute("SELECT COUNT(*) FROM doc_terms WHERE key=?",
                                          (t,)).fetchone()[0]
                base = [p[1] for p in extract.tfidf_rank(
                    counts, lambda k, df=df: df.get(k, 1), n_docs, limit=20)]
                judged = judgment(f)
                rows.append({"book": f.name, "judged_words": len(judged.split()),
                             "ours": hits(ours[:20], judged), "tfidf": hits(base, judged),
                             "seconds": seconds[src], "top5": ours[:5],
                             "tfidf_top5": base[:5]})
            cats = client.call("concepts_list_categories", {})["categories"]
        judged_rows = [r for r in rows if r["judged_words"] >= 5]
        result = {
            "books": len(rows), "books_with_judgment": len(judged_rows),
            "hit_rate_ours": sum(r["ours"] for r in judged_rows) / (20 * len(judged_rows) or 1),
            "hit_rate_tfidf": sum(r["tfidf"] for r in judged_rows)
            / (20 * len(judged_rows) or 1),
            "seconds_per_book": sum(r["seconds"] for r in rows) / (len(rows) or 1),
            "analysis_wall_s": round(analysis_s, 1), "index_s": round(indexed_s, 1),
            "peak_rss_mb": round(peak_rss(proc.pid) / 2**20),
            "categories": [{"name": c["name"], "documents": c["document_count"]} for c in cats],
            "rows": rows}
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"{'book':45} {'ours':>5} {'tfidf':>5} {'s':>6}  top concepts")
    for r in rows:
        print(f"{r['book'][:45]:45} {r['ours']:5} {r['tfidf']:5} {r['seconds']:6.2f}  "
              f"{', '.join(r['top5'])}")
    print(f"hit rate (top 20, {result['books_with_judgment']} books with a TOC/description): "
          f"ours {result['hit_rate_ours']:.3f}, TF-IDF {result['hit_rate_tfidf']:.3f}; "
          f"{result['seconds_per_book']:.2f} s per book; peak RSS {result['peak_rss_mb']} MB")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
