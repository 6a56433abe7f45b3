"""Feed parsing (the worker's side, called in process here): formats, and hostile feeds bounded
with codes (decision 0029). The same cases run against a real daemon in test_rss_daemon.py."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from feed_fixtures import Item, json_feed_bytes, rss_bytes

from ragd.daemon.convert.converted import ConvertSkip
from ragd.daemon.convert.converters import convert
from ragd.daemon.convert.feedparse import MAX_CONTENT_CHARS, feed_format, parse_feed

LEVELS = "".join(f'<!ENTITY e{i} "{("&e" + str(i - 1) + ";") * 10}">' for i in range(1, 10))
BOMB = (f'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY e0 "lol">{LEVELS}]>'
        '<rss version="2.0"><channel><title>Bomb</title><item><guid>b1</guid>'
        '<title>laughs &e9;</title><description>&e9;</description></item></channel></rss>'
        ).encode()
XXE = (b'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
       b'<rss version="2.0"><channel><title>X</title><item><guid>x1</guid><title>t &x;</title>'
       b'<description>d &x;</description></item></channel></rss>')
OPML_BOMB = (f'<?xml version="1.0"?><!DOCTYPE opml [<!ENTITY e0 "lol">{LEVELS}]>'
             '<opml version="2.0"><head><title>&e9;</title></head><body>'
             '<outline text="a" xmlUrl="https://a/"/></body></opml>').encode()


def bounded(fn: object, *args: object) -> tuple[object, float, int]:
    parse_feed(XXE)  # the parser's own first-use imports are not the input's cost
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        out = fn(*args)  # type: ignore[operator]
    except ConvertSkip as skip:
        out = skip
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, seconds, peak


def test_entity_bomb_is_not_expanded() -> None:
    out, seconds, peak = bounded(parse_feed, BOMB)
    assert isinstance(out, dict)
    (entry,) = out["entries"]
    assert "lollol" not in entry["content"] + entry["title"]
    assert seconds < 2 and peak < 20 * 2**20


def test_external_entity_is_never_read() -> None:
    out, _, _ = bounded(parse_feed, XXE)
    assert isinstance(out, dict)
    (entry,) = out["entries"]
    assert "root:" not in entry["content"] + entry["title"]


def test_opml_with_entities_is_refused() -> None:
    out, seconds, _ = bounded(parse_feed, OPML_BOMB)
    assert isinstance(out, ConvertSkip) and out.code == "feed_entities"
    assert seconds < 1


def test_html_posing_as_a_feed() -> None:
    page = b"<!DOCTYPE html><html><head><title>Blog</title></head><body><p>hi</p></body></html>"
    with pytest.raises(ConvertSkip) as err:
        parse_feed(page)
    assert err.value.code == "not_a_feed" and "HTML page" in err.value.detail
    with pytest.raises(ConvertSkip) as err:
        parse_feed(b'{"version": "1", "items": []}')
    assert err.value.code == "not_a_feed"


def test_entries_past_the_limit_are_counted_not_returned() -> None:
    data = rss_bytes("Many", [Item(f"g{i}", f"t{i}", "b") for i in range(3000)])
    out = parse_feed(data, max_entries=100)
    assert out["total"] == 3000 and len(out["entries"]) == 100
    answer = convert(feed_format(100), data)  # the worker's route
    assert answer.metadata["total"] == 3000 and len(answer.metadata["entries"]) == 100


def test_a_huge_entry_body_is_cut() -> None:
    body = "<p>" + "word " * 2_100_000 + "</p>"  # ~10 MB
    out = parse_feed(rss_bytes("Big", [Item("big", "Big one", body)]))
    (entry,) = out["entries"]
    assert entry["truncated"] and len(entry["content"]) == MAX_CONTENT_CHARS


def test_broken_encoding_is_read() -> None:
    data = rss_bytes("Enc", [Item("e1", "café crème", "<p>déjà vu</p>")])
    data = data.replace(b'encoding="utf-8"', b'encoding="us-ascii"')
    latin = data.decode("utf-8").encode("latin-1")  # declared ASCII, holds Latin-1
    for blob in (data, latin, b"\xff\xfe" + data[2:]):
        try:
            out = parse_feed(blob)
        except ConvertSkip as skip:  # refused with a code is bounded too
            assert skip.code in ("not_a_feed", "feed_empty")
            continue
        assert out["entries"] and out["entries"][0]["id"] == "e1"


def test_json_feed_rfc822_dates_and_authors() -> None:
    data = json_feed_bytes("J", [Item("1", "One", "<p>x</p>", author="Jo")])
    out = parse_feed(data)
    (entry,) = out["entries"]
    assert entry["date"] == "2024-03-01T10:00:00+00:00" and entry["author"] == "Jo"
    data = data.replace(b"2024-03-01T10:00:00+00:00", b"Fri, 31 May 2019 12:17:58 -0700")
    assert parse_feed(data)["entries"][0]["date"] == "2019-05-31T19:17:58+00:00"
