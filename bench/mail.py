"""Mail: indexing speed on the shared mail corpus, delivery-to-searchable with a running daemon,
and memory while streaming a large mbox.

    python bench/mail.py [--mail PATH] [--deliveries 20] [--stream 10000,100000] [--skip-index]

1. Indexes every message under ``mail/`` (Maildir, mbox, .eml) in process with the default
   embedder, as ``ragd index`` does; messages and chunks per second, where the time goes, and
   the ratio to embedding the same chunk texts alone (the baseline, measured in the same run).
   Then a second pass with nothing changed.
2. A real daemon watches a Maildir and a small vault: N messages are delivered one at a time
   (tmp/ then new/, as a mail server does) and N notes are saved; seconds until each is
   searchable, the note saves being the baseline.
3. A generated mbox of each size is read through the mail kind in a child process (parsing and
   keys, no embedding): messages per second and peak memory, which must stay flat as the file
   grows (messages are streamed, never held).

Prints tables; writes bench/results/mail.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    corpus,
    fresh_home,
    index_twice,
    pct,
    rss_mb,
    table,
    write_json,
)


def index_corpus(mail: Path) -> dict[str, Any]:
    fresh_home("mail-home")
    from ragd.daemon.runtime.app import App
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    paths = resolve_paths()
    config = load_config(paths, {"email.paths": [str(mail)], "obsidian.enabled": False})
    with App(paths, config) as app:
        report, seconds, again, unchanged_s = index_twice(app)
        texts = [row.text for rows in app.catalog.iter_chunks() for row in rows]
        # The baseline: the same number of chunks of the same lengths, embedded alone.
        t0 = time.perf_counter()
        for start in range(0, len(texts), 64):
            app.embedder.embed(sorted(texts, key=len)[start:start + 64])
        embed_s = time.perf_counter() - t0
        info = app.collection_info("email")
    return {"messages": info["message_count"], "skipped": sum(report.skipped.values()),
            "chunks": info["chunk_count"], "seconds": round(seconds, 2),
            "messages_per_s": round(info["message_count"] / seconds, 1),
            "chunks_per_s": round(info["chunk_count"] / seconds, 1),
            "embed_alone_s": round(embed_s, 2), "ratio_to_embedding": round(seconds / embed_s, 3),
            "unchanged_pass_s": round(unchanged_s, 3), "unchanged_indexed": again.indexed,
            "stages": {k: round(v, 2) for k, v in report.stage_seconds.items()},
            "embedder": app.embedder.fingerprint}


def deliveries(n: int) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from mail_fixtures import deliver, maildir, message

    from bench.freshness import Daemon, wait_searchable

    home = fresh_home("mail-home")
    with tempfile.TemporaryDirectory(prefix="ragd-bench-mail-") as tmp:
        vault = Path(tmp) / "vault"
        vault.mkdir()
        for i in range(10):
            (vault / f"Note {i}.md").write_text(f"# Note {i}\n\nA note about topic {i}.\n",
                                                encoding="utf-8")
        box = maildir(Path(tmp) / "Maildir")
        os.environ["RAGD_EMAIL_PATHS"] = str(box)
        d = Daemon(vault, home)
        try:
            d.wait_idle()
            mail_s, note_s = [], []
            for i in range(n):
                word = f"mailword{i}q{time.monotonic_ns() % 10**6}"
                t0 = time.perf_counter()
                deliver(box, message(f"Delivery {i}", f"Please look at {word} today.",
                                     msgid=f"bench-{i}-{word}"))
                wait_searchable(d, word)
                mail_s.append(time.perf_counter() - t0)
                word = f"noteword{i}q{time.monotonic_ns() % 10**6}"
                t0 = time.perf_counter()
                with open(vault / f"Note {i % 10}.md", "a", encoding="utf-8") as fh:
                    fh.write(f"\nEdited: {word}\n")
                wait_searchable(d, word)
                note_s.append(time.perf_counter() - t0)
        finally:
            d.stop()
            os.environ.pop("RAGD_EMAIL_PATHS", None)
    return {"n": n, "mail_p50_s": round(pct(mail_s, 50), 3), "mail_p95_s": round(pct(mail_s, 95), 3),
            "note_p50_s": round(pct(note_s, 50), 3), "note_p95_s": round(pct(note_s, 95), 3),
            "ratio_p50": round(pct(mail_s, 50) / pct(note_s, 50), 3)}


def stream_child(path: Path) -> None:
    """Run in a child: read every message of one mbox through the mail kind."""
    from ragd.daemon.sources.mailkind import MailKind

    base = rss_mb()
    kind = MailKind(None, html_to_text=lambda h: h)
    walked = kind.walk(path.parent)
    t0 = time.perf_counter()
    count = sum(1 for f in walked.files for _ in kind.entries(path.parent, f.path, 0))
    seconds = time.perf_counter() - t0
    print(json.dumps({"messages": count, "seconds": seconds, "base_mb": base,
                      "peak_mb": rss_mb("VmHWM")}))


def stream(sizes: list[int]) -> list[dict[str, Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from mail_fixtures import mbox_bytes, message

    rows = []
    with tempfile.TemporaryDirectory(prefix="ragd-bench-mbox-") as tmp:
        for size in sizes:
            folder = Path(tmp) / str(size)
            folder.mkdir()
            path = folder / "Archive.mbox"
            body = ("A paragraph of an ordinary message, long enough to look like mail. " * 30)
            with path.open("wb") as fh:
                for start in range(0, size, 1000):
                    fh.write(mbox_bytes([message(f"Message {i}", f"{body}\nNumber {i}.",
                                                 msgid=f"m{i}")
                                         for i in range(start, min(size, start + 1000))]))
            out = subprocess.run([sys.executable, __file__, "--stream-child", str(path)],
                                 capture_output=True, text=True, check=True).stdout
            got = json.loads(out.strip().splitlines()[-1])
            rows.append({"messages": got["messages"], "file_mb": round(path.stat().st_size / 2**20, 1),
                         "messages_per_s": round(got["messages"] / got["seconds"], 1),
                         "peak_mb": round(got["peak_mb"], 1),
                         "growth_mb": round(got["peak_mb"] - got["base_mb"], 1)})
            path.unlink()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mail", type=Path, default=None)
    ap.add_argument("--deliveries", type=int, default=20)
    ap.add_argument("--stream", default="10000,100000")
    ap.add_argument("--skip-index", action="store_true")
    ap.add_argument("--stream-child", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stream_child:
        stream_child(args.stream_child)
        return 0
    out: dict[str, Any] = {}
    if not args.skip_index:
        r = out["index"] = index_corpus(args.mail or corpus("mail"))
        print(table("Indexing the shared mail corpus (in process, default embedder)", [[
            r["messages"], r["skipped"], r["chunks"], r["seconds"], r["messages_per_s"],
            r["chunks_per_s"], r["embed_alone_s"], r["ratio_to_embedding"],
            r["unchanged_pass_s"]]],
            ["messages", "skipped", "chunks", "seconds", "msg/s", "chunks/s",
             "embed alone s", "x embed alone", "unchanged pass s"]))
        print("stages (s):", r["stages"])
        print()
    if args.deliveries:
        r = out["delivery"] = deliveries(args.deliveries)
        print(table(f"Delivered to searchable, real daemon ({r['n']} each, one at a time)", [
            ["mail delivered into new/", r["mail_p50_s"], r["mail_p95_s"], r["ratio_p50"]],
            ["note saved (baseline)", r["note_p50_s"], r["note_p95_s"], 1.0]],
            ["change", "p50 s", "p95 s", "x note p50"]))
        print()
    sizes = [int(s) for s in args.stream.split(",") if s.strip()]
    if sizes:
        rows = out["stream"] = stream(sizes)
        print(table("Streaming one mbox through the mail kind (child process, no embedding)",
                    [[r["messages"], r["file_mb"], r["messages_per_s"], r["peak_mb"],
                      r["growth_mb"]] for r in rows],
                    ["messages", "file MB", "msg/s", "peak RSS MB", "growth MB"]))
    print(f"\nwrote {write_json('mail', out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
