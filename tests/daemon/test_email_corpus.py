"""The shared mail corpus (Maildir, mbox, .eml from public mailing lists), indexed once with the
real model: every message is indexed or skipped with a code, and the sender and date filters
return exactly the messages a direct scan of the files says they should."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_path

from ragd.daemon.convert.markdown import html_to_text as _html_to_text
from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search.engine import SearchRequest
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths
from ragd.daemon.sources.files import read_bytes
from ragd.daemon.sources.mail import MailMessage, parse_message
from ragd.daemon.sources.mailbox import MboxMessage, list_mail, read_emlx, read_mbox

# Indexing 1,064 messages takes minutes on two cores: more than the default limit.
pytestmark = [pytest.mark.slow, pytest.mark.corpus, pytest.mark.timeout(1800)]


@dataclass(frozen=True)
class Scanned:
    key: str
    uri: str
    sender: str
    day: int | None


def scan(root: Path) -> tuple[dict[str, Scanned], int]:
    """Every message in the files, parsed directly: (by key, number that cannot be read)."""
    files, skipped = list_mail(root)
    assert skipped == []
    found: dict[str, Scanned] = {}
    bad = 0
    for f in files:
        if f.kind == "mbox":
            datas = [m.data for m in read_mbox(root, f.path) if isinstance(m, MboxMessage)]
        else:
            data = read_bytes(root, f.path, 50 << 20)
            assert isinstance(data, bytes)
            datas = [read_emlx(data) if f.kind == "emlx" else data]
        for data in datas:
            msg = parse_message(data, html_to_text=_html_to_text)
            if not isinstance(msg, MailMessage):
                bad += 1
                continue
            day = int(msg.date[:10].replace("-", "")) if msg.date else None
            found.setdefault(msg.key, Scanned(msg.key, msg.uri, msg.sender.lower(), day))
    return found, bad


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, shared_models: Path
            ) -> Iterator[tuple[App, Any, dict[str, Scanned], int]]:
    """The corpus indexed once, with the default embedder (ONNX int8) as a user runs it."""
    root = corpus_path("mail")
    home = tmp_path_factory.mktemp("mail-corpus")
    (home / "data").mkdir(mode=0o700)
    (home / "data" / "models").symlink_to(shared_models)
    paths = resolve_paths({"RAGD_HOME": str(home)})
    config = load_config(paths, {"email.paths": [str(root)], "obsidian.enabled": False})
    with App(paths, config) as app:
        (report,) = app.sync_all()
        yield app, report, *scan(root)


def test_every_message_is_indexed_or_skipped_with_a_code(indexed: Any) -> None:
    app, report, scanned, bad = indexed
    assert not report.errors
    coll = app.catalog.collection("email")
    keys = {r.path for r in app.catalog.source_records(coll.id) if r.status == "ok"}
    assert keys == set(scanned)  # every readable message, once (duplicates across folders too)
    assert sum(report.skipped.values()) == bad
    assert all(code for _, code, _ in report.skipped_files)
    assert app.consistency()["ok"]
    info = app.collection_info("email")
    assert info["message_count"] == len(scanned)
    assert sum(f["count"] for f in info["folders"]) == len(scanned)


def _uris(app: App, query: str, mode: str, **filters: Any) -> set[str]:
    req = SearchRequest(query=query, mode=mode, top_k=100, filters=Filters(**filters))
    return {r["source_uri"] for r in app.search_engine.search(req)["results"]}


def _needle(sender: str) -> str:
    """Part of a sender's address (before the @): what a user types to filter by sender."""
    return sender.split("<")[-1].split("@")[0].strip("> ")


def test_sender_and_date_filters_match_a_direct_scan(indexed: Any) -> None:
    app, _, scanned, _ = indexed
    # Senders whose address part matches a handful of messages: all fit in one page.
    picks: list[tuple[str, set[str]]] = []
    for sender in sorted({s.sender for s in scanned.values()}):
        needle = _needle(sender)
        want = {s.uri for s in scanned.values() if needle in s.sender and s.uri}
        if len(needle) >= 3 and 3 <= len(want) <= 25 and needle not in dict(picks):
            picks.append((needle, want))
    assert len(picks) >= 3, "the corpus has senders with several messages"
    for needle, want in picks[:3]:
        for mode in ("semantic", "hybrid"):
            got = _uris(app, "the message", mode, sender=needle.upper(), source_type="email")
            assert got == want, (needle, mode)
    days = sorted(s.day for s in scanned.values() if s.day)
    lo, hi = days[len(days) // 2], days[len(days) // 2 + 8]  # a window of about ten messages
    want = {s.uri for s in scanned.values() if s.day and lo <= s.day <= hi and s.uri}
    assert 0 < len(want) <= 40
    assert _uris(app, "mailing list discussion", "semantic", date_from=lo, date_to=hi) == want
    needle = picks[0][0]
    some = sorted(s.day for s in scanned.values() if needle in s.sender and s.day)
    cut = some[len(some) // 2]
    want = {s.uri for s in scanned.values()
            if needle in s.sender and s.day and s.day >= cut and s.uri}
    assert _uris(app, "patch", "semantic", sender=needle, date_from=cut) == want
