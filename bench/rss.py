"""Feeds: indexing speed on the shared feeds, and the time from a feed saved to its new entry
searchable in a running daemon (decision 0029).

    python bench/rss.py [--feeds PATH] [--saves N]

1. The baseline, in the same run: every feed file parsed in process (feedparser, the JSON Feed
   and OPML mappers), no conversion, no embedding: entries per second.
2. The rss collection indexed in process as ``ragd index`` does (default embedder, fresh home,
   the conversion worker): entries and chunks per second and where the time goes; then a pass
   with nothing changed.
3. A real daemon watching a folder with a copy of the shared feeds: a feed saved again with one
   new entry on top (and its last one dropped), N times; seconds from the save (the rename)
   until a keyword search finds the new entry, and whether the dropped one is still found.

Prints tables; writes bench/results/rss.json.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import corpus, fresh_home, index_twice, table, write_json  # noqa: E402
from bench.freshness import Daemon  # noqa: E402


def feed_files(root: Path) -> list[Path]:
    from ragd.daemon.sources.rss import is_feed_name

    return sorted(p for p in root.rglob("*") if p.is_file() and is_feed_name(p.name))


def parse_only(root: Path) -> dict[str, Any]:
    from ragd.daemon.convert.converted import ConvertSkip
    from ragd.daemon.convert.feedparse import parse_feed

    files = feed_files(root)
    entries = 0
    t0 = time.perf_counter()
    for path in files:
        with contextlib.suppress(ConvertSkip):  # not a feed: counted by the index run
            entries += parse_feed(path.read_bytes())["total"]
    seconds = time.perf_counter() - t0
    return {"files": len(files), "entries": entries, "seconds": seconds,
            "entries_per_s": entries / seconds}


def index(root: Path) -> dict[str, Any]:
    from ragd.daemon.runtime.app import App
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    fresh_home("rss")
    paths = resolve_paths()
    config = load_config(paths, {"rss.paths": [str(root)], "obsidian.enabled": False,
                                 "calibre.enabled": False})
    with App(paths, config) as app:
        report, seconds, again, again_s = index_twice(app)
        info = app.collection_info("rss")
    entries = info["entry_count"] + info["subscription_count"]
    return {"documents": report.indexed, "entries": info["entry_count"],
            "subscriptions": info["subscription_count"], "chunks": report.chunks_written,
            "embedded": report.embedded, "seconds": seconds,
            "entries_per_s": entries / seconds, "chunks_per_s": report.chunks_written / seconds,
            "stages": report.stage_seconds, "unchanged_pass_s": again_s,
            "unchanged_pass_embedded": again.embedded, "skipped": report.skipped}


def _items(n: int, start: int) -> list[tuple[str, str]]:
    return [(f"https://bench.example/{i}", f"Bench entry {i} about the b{i}heron") for i in
            range(start, start + n)]


def _feed(items: list[tuple[str, str]]) -> bytes:
    body = "".join(f"<item><guid>{g}</guid><link>{g}</link><title>{t}</title>"
                   f"<pubDate>Mon, 06 May 2024 08:00:00 GMT</pubDate>"
                   f"<description>&lt;p&gt;{t}.&lt;/p&gt;</description></item>"
                   for g, t in items)
    return (f'<?xml version="1.0"?><rss version="2.0"><channel><title>Bench</title>'
            f"<link>https://bench.example/</link>{body}</channel></rss>").encode()


def save_to_searchable(root: Path, saves: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="ragd-bench-rss-"))
    try:
        folder = work / "feeds"
        shutil.copytree(root, folder)
        feed = folder / "bench.rss"
        window = _items(20, 0)
        feed.write_bytes(_feed(window))
        home = fresh_home("rss-daemon")
        (work / "vault").mkdir()  # an empty vault: the daemon's own collection, unused
        d = Daemon(work / "vault", home, {"RAGD_RSS_PATHS": str(folder)})
        try:
            d.wait_idle()
            times: list[float] = []
            kept = 0
            for n in range(saves):
                new = _items(1, 20 + n)
                dropped = window[-1]
                window = new + window[:-1]
                tmp = folder / ".bench.rss.part"
                tmp.write_bytes(_feed(window))
                t0 = time.perf_counter()
                os.replace(tmp, feed)
                word = new[0][1].rsplit(" ", 1)[-1]
                while not d.hits(word):
                    if time.perf_counter() - t0 > 60:
                        sys.exit(f"error: {word} not searchable after 60 s")
                    time.sleep(0.01)
                times.append(time.perf_counter() - t0)
                kept += d.hits(dropped[1].rsplit(" ", 1)[-1]) > 0
                time.sleep(0.3)  # saves a reader makes are minutes apart
        finally:
            d.stop()
        return {"saves": saves, "median_s": statistics.median(times), "max_s": max(times),
                "times_s": times, "dropped_still_found": kept}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feeds", type=Path, default=None, help="a folder of feed files")
    parser.add_argument("--saves", type=int, default=10)
    args = parser.parse_args()
    root = args.feeds or corpus("rss")
    base = parse_only(root)
    ix = index(root)
    save = save_to_searchable(root, args.saves)
    print(table("Parsing and indexing the shared feeds", [
        ("parse only (baseline)", base["files"], base["entries"], "", base["seconds"],
         base["entries_per_s"], ""),
        ("rss collection from empty", base["files"], ix["entries"], ix["chunks"], ix["seconds"],
         ix["entries_per_s"], ix["chunks_per_s"]),
        ("a pass with nothing changed", base["files"], "", ix["unchanged_pass_embedded"],
         ix["unchanged_pass_s"], "", "")],
        ["run", "files", "entries", "chunks", "seconds", "entries/s", "chunks/s"]))
    print(f"  stages: { {k: round(v, 2) for k, v in ix['stages'].items()} }")
    print(f"  subscriptions (OPML): {ix['subscriptions']}; skipped: {ix['skipped']}")
    print()
    print(table("A feed saved with one new entry, until it is searchable (real daemon)", [
        (save["saves"], save["median_s"], save["max_s"],
         f"{save['dropped_still_found']}/{save['saves']}")],
        ["saves", "median s", "max s", "dropped entry still found"]))
    path = write_json("rss", {"parse_only": base, "index": ix, "save_to_searchable": save})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
