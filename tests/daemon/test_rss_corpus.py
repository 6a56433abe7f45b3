"""The shared corpus's saved feeds (../shared/corpus/rss) through the rss collection, in process
with the real conversion worker and stores, and a fake embedder (what is tested is which
entries are indexed and found by their filters, not the vectors): every file is indexed or
skipped with a code, each feed's entry count equals feedparser's own parse of the file, and a
date-filtered search returns exactly the entries a direct parse dates in the range."""

from __future__ import annotations

import calendar
import datetime as dt
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import feedparser
import pytest
from conftest import corpus_path
from feed_fixtures import CountingEmbedder

from ragd.daemon.convert.feedparse import parse_feed
from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search.engine import SearchRequest
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths
from ragd.daemon.sources.rss import is_feed_name

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[App, Path]]:
    root = corpus_path("rss")
    home = tmp_path_factory.mktemp("rss-corpus")
    (home / "data").mkdir(mode=0o700)
    paths = resolve_paths({"RAGD_HOME": str(home)})
    config = load_config(paths, {"rss.paths": [str(root)], "obsidian.enabled": False,
                                 "calibre.enabled": False}, env={})
    with App(paths, config, embedder=CountingEmbedder()) as app:
        (report,) = app.sync_all()
        assert not report.errors, report.errors
        yield app, root


def feed_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and is_feed_name(p.name))


def test_every_file_is_indexed_or_skipped_and_counts_match_feedparser(
        indexed: tuple[App, Path]) -> None:
    app, root = indexed
    info = app.collection_info("rss")
    per_file = {f["feed_file"]: f["count"] for f in info["feeds"]}
    db = sqlite3.connect(f"file:{app.paths.catalog_path}?mode=ro", uri=True)
    skipped = {r[0]: r[1] for r in db.execute(
        "SELECT container, skip_code FROM sources WHERE status='skipped'")}
    subs = dict(db.execute(  # an OPML list's subscriptions, a second list's as copies
        "SELECT container, COUNT(*) FROM (SELECT container FROM sources WHERE"
        " source_type='opml' UNION ALL SELECT c.container FROM source_copies c JOIN sources s"
        " ON s.id = c.source_id WHERE s.source_type='opml') GROUP BY container"))
    db.close()
    files = feed_files(root)
    assert len(files) == 58
    for path in files:
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
        if rel in skipped:
            assert skipped[rel], rel
            continue
        if path.suffix == ".opml":
            assert subs.get(rel) == parse_feed(data)["total"], rel
            continue
        expected = len(feedparser.parse(data).entries) or parse_feed(data)["total"]
        assert per_file.get(rel) == expected, (rel, per_file.get(rel), expected)
    assert not skipped, skipped  # the shared feeds are all readable
    assert info["source_types"] and set(info["source_types"]) <= {"rss", "opml"}


def _parsed_days(root: Path) -> dict[str, list[str]]:
    """link (else title) -> the UTC days a direct parse gives its entries (feedparser; JSON
    Feed through ragd's mapper, feedparser has none)."""
    out: dict[str, list[str]] = {}
    for path in feed_files(root):
        data = path.read_bytes()
        if path.suffix in (".json", ".opml"):
            continue
        for e in feedparser.parse(data).entries:
            when = e.get("published_parsed") or e.get("updated_parsed")
            if when:
                day = dt.datetime.fromtimestamp(calendar.timegm(when), tz=dt.UTC).date()
                ident = str(e.get("link") or "") or " ".join(str(e.get("title")).split())
                out.setdefault(ident, []).append(day.isoformat())
    for path in feed_files(root):
        if path.suffix == ".json":
            for e in parse_feed(path.read_bytes())["entries"]:
                if e["date"]:
                    out.setdefault(e["link"] or e["title"], []).append(e["date"][:10])
    return out


def _search(app: App, date_from: str, date_to: str) -> list[dict[str, Any]]:
    req = SearchRequest(query="news", mode="semantic", top_k=100, filters=Filters(
        collections=("rss",), source_type="rss", date_from=int(date_from.replace("-", "")),
        date_to=int(date_to.replace("-", ""))))
    return list(app.search_engine.search(req)["results"])


@pytest.mark.parametrize(("date_from", "date_to"), [("2017-05-01", "2017-05-31"),
                                                    ("2022-01-01", "2025-12-31")])
def test_a_date_filtered_search_returns_what_a_direct_parse_dates_in_range(
        indexed: tuple[App, Path], date_from: str, date_to: str) -> None:
    app, root = indexed
    expected = {t for t, days in _parsed_days(root).items()
                if any(date_from <= d <= date_to for d in days)}
    assert 5 < len(expected) < 100, len(expected)  # one search returns at most 100
    hits = _search(app, date_from, date_to)
    found = {h["metadata"].get("url") or h["title"] for h in hits}
    assert found == expected
    for h in hits:
        meta = h["metadata"]
        assert date_from <= meta["date"][:10] <= date_to and meta["feed_name"]
        assert h["collection"] == "rss" and h["source_type"] == "rss"


def test_subscriptions_of_an_opml_list_are_results_only_when_asked_for(
        indexed: tuple[App, Path]) -> None:
    """An OPML list's subscriptions are a reader's settings, dated today: a search leaves them
    out unless ``source_type="opml"`` asks for them (issue 36)."""
    app, _ = indexed
    db = sqlite3.connect(f"file:{app.paths.catalog_path}?mode=ro", uri=True)
    titles = [r[0] for r in db.execute(
        "SELECT title FROM sources WHERE source_type='opml' AND status='ok' LIMIT 5")]
    if not titles:
        pytest.skip("the shared feeds hold no OPML list")
    def search(title: str, **filters: Any) -> list[dict[str, Any]]:
        req = SearchRequest(query=title, mode="keyword", top_k=10, filters=Filters(**filters))
        return list(app.search_engine.search(req)["results"])

    for title in titles:
        assert all(r["source_type"] != "opml" for r in search(title)), title
        asked = search(title, source_type="opml")
        assert asked and all(r["source_type"] == "opml" for r in asked), title
