"""Feeds as a user meets them (decision 0029): one real daemon watching a folder of feeds, with
the real model and the conversion worker. A feed saved into the folder is searchable within
2 s, a new entry as well, an entry that left the feed stays, and the hostile feeds (an entity
bomb, an external entity, HTML posing as a feed, a 500 MB file, 100,000 entries, a 10 MB
entry, a broken encoding) each end with a code while the daemon's peak memory stays under
1 GB and a note saved meanwhile is searchable within 2 s."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc, wait_for
from feed_fixtures import Item, newsboat_db, rss_bytes
from hostile_daemon import GB, SAVE_LIMIT_S, Hostile, environment
from vault_fixtures import write_vault

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not Path("/proc/self/status").exists(),
                                 reason="reads the daemon's peak memory from /proc")]


def save(path: Path, data: bytes) -> float:
    """Save as a feed reader does (a temporary file renamed over the feed); the time of save."""
    tmp = path.with_name(f".{path.name}.part")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return time.monotonic()


@pytest.fixture(scope="module")
def feeds(tmp_path_factory: pytest.TempPathFactory, shared_models: Path) -> Iterator[Hostile]:
    import daemon_proc

    root = tmp_path_factory.mktemp("rss-daemon")
    vault = write_vault(root / "vault")
    folder = root / "feeds"
    folder.mkdir()
    (folder / "start.xml").write_bytes(rss_bytes("Start", [Item("s1", "Warm up", "<p>x</p>")]))
    home = root / "home"
    (home / "data").mkdir(parents=True, mode=0o700)
    (home / "data" / "models").symlink_to(shared_models, target_is_directory=True)
    with environment(RAGD_RSS_PATHS=str(folder), RAGD_RSS_MAX_ENTRIES="200"):
        d = DaemonProc(home, vault, root / "daemon.log").start()
    daemon_proc.STARTED.remove(d)  # lives for the module
    try:
        d.wait_idle()
        yield Hostile(d, vault, home, folder)
    finally:
        d.stop()


def rss_search(h: Hostile, query: str, **params: Any) -> list[dict[str, Any]]:
    return list(h.daemon.call("search", {"query": query, "mode": "keyword", "top_k": 20,
                                         "collection": "rss", **params})["results"])


def posts(start: int, n: int) -> list[Item]:
    return [Item(f"https://blog.example/{i}", f"Post {i}", f"<p>Entry {i} about the "
                 f"w{i}marmot colony.</p>", date=f"2024-05-{i:02d}T08:00:00+02:00",
                 link=f"https://blog.example/{i}", author="Kim", tags=("Nature",))
            for i in range(start, start + n)]


def test_a_saved_feed_and_its_new_entry_are_searchable_within_2_s(feeds: Hostile) -> None:
    path = feeds.root / "blog.rss"
    t0 = save(path, rss_bytes("Marmot Blog", posts(1, 3)))
    (hit,) = wait_for(lambda: rss_search(feeds, "w2marmot"), SAVE_LIMIT_S, "the saved feed",
                      interval=0.02)
    first = time.monotonic() - t0
    assert hit["title"] == "Post 2" and hit["source_type"] == "rss"
    assert hit["source_uri"] == "https://blog.example/2" and hit["collection"] == "rss"
    meta = hit["metadata"]
    assert meta["feed_name"] == "Marmot Blog" and meta["url"] == "https://blog.example/2"
    assert meta["date"] == "2024-05-02T06:00:00+00:00" and meta["author"] == "Kim"
    assert "nature" in meta["tags"]

    # Saved again by the reader: a new entry on top, the oldest off the end.
    t0 = save(path, rss_bytes("Marmot Blog", [*posts(4, 1), *posts(2, 2)]))
    wait_for(lambda: rss_search(feeds, "w4marmot"), SAVE_LIMIT_S, "the new entry",
             interval=0.02)
    second = time.monotonic() - t0
    assert rss_search(feeds, "w1marmot")  # left the feed, stays
    print(f"save to searchable: feed {first:.2f} s, new entry {second:.2f} s")

    since = rss_search(feeds, "marmot colony", source_type="rss", date_from="2024-05-03")
    assert {h["title"] for h in since} == {"Post 3", "Post 4"}
    info = feeds.daemon.call("collection_info", {"collection": "rss"})
    (blog,) = [f for f in info["feeds"] if f["feed_file"] == "blog.rss"]
    assert (blog["feed_name"], blog["count"]) == ("Marmot Blog", 4)
    assert (blog["date_from"], blog["date_to"]) == ("2024-05-01", "2024-05-04")
    status = feeds.daemon.call("status")
    assert "rss" in {c["name"] for c in status["collections"]}


def test_a_newsboat_store_in_the_folder_is_read(feeds: Hostile) -> None:
    newsboat_db(feeds.root / "newsboat" / "cache.db", {
        "https://n.example/rss": ("Newsboat Feed", [
            Item("nb-1", "Stored article", "<p>The okapi article Newsboat kept.</p>",
                 link="https://n.example/1")])})
    (hit,) = wait_for(lambda: rss_search(feeds, "okapi"), 30, "the stored article")
    assert hit["metadata"]["feed_name"] == "Newsboat Feed"


LEVELS = "".join(f'<!ENTITY e{i} "{("&e" + str(i - 1) + ";") * 10}">' for i in range(1, 10))


def hostile_feeds(root: Path, secret: Path) -> dict[str, bytes]:
    body = "<p>" + "pangolin " * 1_200_000 + "</p>"  # ~10 MB
    return {
        "bomb.xml": (f'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY e0 "lol">{LEVELS}]>'
                     '<rss version="2.0"><channel><title>Bomb</title><item><guid>bomb-1</guid>'
                     '<title>Laughing quetzal &e9;</title><description>&e9; quetzal'
                     '</description></item></channel></rss>').encode(),
        "xxe.xml": (f'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY x SYSTEM "{secret.as_uri()}">'
                    ']><rss version="2.0"><channel><title>XXE</title><item><guid>xxe-1</guid>'
                    '<title>External tapir</title><description>tapir &x;</description></item>'
                    '</channel></rss>').encode(),
        "page.xml": b"<!DOCTYPE html><html><head><title>Not a feed</title></head><body>"
                    b"<p>an html narwhal page</p></body></html>",
        "many.xml": rss_bytes("Many", [Item(f"m{i}", f"Many {i}", "ibex") for i in
                                       range(100_000)]),
        "big-entry.xml": rss_bytes("Big", [Item("big-1", "Huge pangolin entry", body)]),
        "latin.xml": rss_bytes("Latin", [Item("lat-1", "Crème brûlée axolotl",
                                              "<p>déjà vu axolotl</p>")])
        .decode("utf-8").encode("latin-1"),  # declared UTF-8, holds Latin-1
    }


def test_hostile_feeds_are_bounded_with_codes(feeds: Hostile, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("okapisecretword\n", encoding="utf-8")
    huge = feeds.root / "huge.xml"  # 500 MB (sparse): refused before it is read
    with huge.open("wb") as fh:
        fh.write(b'<?xml version="1.0"?><rss version="2.0"><channel><title>Huge</title>')
        fh.truncate(500 * 1024 * 1024)
    outcomes: dict[str, str] = {"huge.xml": ""}
    for name, data in hostile_feeds(feeds.root, secret).items():
        save(feeds.root / name, data)
        seconds = feeds.save_note()
        outcomes[name] = f"save {seconds:.2f} s"
    feeds.settle(timeout=300)

    def rows(container: str) -> list[dict[str, Any]]:
        return feeds.sources("container = ?", container)

    assert rows("huge.xml")[0]["skip_code"] == "too_large"
    bomb = wait_for(lambda: rss_search(feeds, "quetzal"), 30, "the bomb's entry")
    assert "lollol" not in bomb[0]["content"]
    assert rss_search(feeds, "tapir") and not rss_search(feeds, "okapisecretword")
    assert rows("page.xml")[0]["skip_code"] == "not_a_feed"
    many = rows("many.xml")
    assert sum(r["status"] == "ok" for r in many) == 200
    assert [r["skip_code"] for r in many if r["status"] != "ok"] == ["too_many_entries"]
    (big,) = rows("big-entry.xml")
    assert big["status"] == "ok" and "entry_truncated" in big["warnings"].split(",")
    assert rss_search(feeds, "axolotl")
    peak = feeds.peak_rss()
    assert peak < GB, f"peak RSS {peak / 2**20:.0f} MB"
    print("hostile feeds:", outcomes, f"peak {peak / 2**20:.0f} MB")
