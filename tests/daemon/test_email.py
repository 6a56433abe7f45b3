"""The email collection in process, with the real model and real stores, on generated mail:
Maildir deliveries and flags, moves between folders, an mbox appended to and compacted,
attachments, HTML-only and broken messages, and the sender and date filters."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from document_fixtures import pdf_bytes
from mail_fixtures import deliver, maildir, mark_seen, mbox_bytes, message

from ragd.daemon.errors import Interrupted
from ragd.daemon.indexer import container_sync, pipeline
from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search.engine import SearchRequest
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths

pytestmark = pytest.mark.slow


def open_app(root: Path, embedder: Any, **kwargs: Any) -> App:
    paths = resolve_paths()
    config = load_config(paths, {"email.paths": [str(root)], "obsidian.enabled": False})
    return App(paths, config, embedder=embedder, **kwargs)


def in_process(app: App) -> None:
    """Read mail on this process's threads, where a test can watch the reads: the same
    ``extract/work.py`` code a worker runs, handed the same start offset (``extract/stream.py``
    sends ``[path, start, skip]``)."""
    assert app.indexer.extract is not None
    app.indexer.extract.close()
    app.indexer.extract = None


@pytest.fixture
def mailroot(tmp_path: Path) -> Path:
    return maildir(tmp_path / "Mail")


@pytest.fixture
def app(mailroot: Path, real_embedder: Any) -> Iterator[App]:
    with open_app(mailroot, real_embedder) as a:
        yield a
        assert a.consistency()["ok"], a.consistency()


def search(app: App, query: str, mode: str = "keyword", k: int = 10,
           **filters: Any) -> list[dict[str, Any]]:
    req = SearchRequest(query=query, mode=mode, top_k=k, filters=Filters(**filters))
    return app.search_engine.search(req)["results"]


def subjects(results: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["title"] for r in results))


def sync(app: App) -> pipeline.IndexReport:
    (report,) = app.sync_all()
    assert not report.errors, report.errors
    return report


def test_delivery_flags_and_move_between_folders(app: App, mailroot: Path,
                                                 real_embedder: Any) -> None:
    path = deliver(mailroot, message("Quarterly budget", "The zanzibar invoice is overdue."))
    report = sync(app)
    assert report.indexed == 1 and report.embedded > 0
    (hit,) = search(app, "zanzibar")
    assert hit["title"] == "Quarterly budget" and hit["source_type"] == "email"
    assert hit["source_uri"] == "mid:quarterly-budget@example.org"
    assert hit["metadata"]["folder"] == "Inbox"
    assert hit["source_path"] == str(path)

    # Read in the mail program: new/ -> cur/ with a flag. A move, nothing embedded.
    seen = mark_seen(path)
    calls = real_embedder.calls
    report = sync(app)
    assert (report.moved, report.indexed, report.deleted, report.embedded) == (1, 0, 0, 0)
    assert real_embedder.calls == calls
    assert search(app, "zanzibar")[0]["source_path"] == str(seen)

    # Filed into a Maildir++ folder.
    folder = maildir(mailroot / ".Lists.python")
    filed = folder / "cur" / seen.name
    os.rename(seen, filed)
    report = sync(app)
    assert (report.moved, report.indexed, report.deleted, report.embedded) == (1, 0, 0, 0)
    (hit,) = search(app, "zanzibar")
    assert hit["metadata"]["folder"] == "Lists/python" and hit["source_path"] == str(filed)
    info = app.collection_info("email")
    assert info["message_count"] == 1 and info["source_types"] == ["email"]
    assert [f["folder"] for f in info["folders"]] == ["Lists/python"]
    assert info["date_from"] == info["date_to"] == "2023-05-04"

    # Deleted: gone from the index.
    filed.unlink()
    report = sync(app)
    assert report.deleted == 1 and search(app, "zanzibar") == []


def test_mbox_appended_then_compacted(app: App, mailroot: Path, real_embedder: Any) -> None:
    box = mailroot / "Archive.mbox"
    msgs = [message(f"Note {n}", f"Message number {n} mentions the word {w}.")
            for n, w in enumerate(["albatross", "bergamot", "cormorant"])]
    box.write_bytes(mbox_bytes(msgs))
    assert sync(app).indexed == 3

    # A new message appended: only it is read.
    with box.open("ab") as fh:
        fh.write(mbox_bytes([message("Note 3", "A fourth one about dromedaries.")]))
    calls = real_embedder.calls
    report = sync(app)
    assert (report.indexed, report.deleted, report.moved) == (1, 0, 0)
    assert real_embedder.calls == calls + 1  # one batch: the new message's chunks
    assert subjects(search(app, "dromedaries")) == ["Note 3"]

    # Compacted after the first message was deleted: every offset shifts, nothing is embedded
    # again, the deleted message is gone.
    box.write_bytes(mbox_bytes(msgs[1:] + [message("Note 3", "A fourth one about dromedaries.")]))
    calls = real_embedder.calls
    report = sync(app)
    assert report.deleted == 1 and report.indexed == 0 and real_embedder.calls == calls
    assert search(app, "albatross") == []
    assert subjects(search(app, "cormorant")) == ["Note 2"]
    assert app.collection_info("email")["message_count"] == 3


def test_attachment_html_and_broken_messages(app: App, mailroot: Path) -> None:
    pdf = pdf_bytes(["The quokka census counted nine hundred animals on Rottnest."],
                    title="Census")
    deliver(mailroot, message("Census results", "See the attached report.",
                              attachment=("census.pdf", "application/pdf", pdf)))
    deliver(mailroot, message("Newsletter", "", html="<html><body><h1>Spring</h1><p>The "
                              "<b>marmoset</b> exhibit opens <i>Friday</i>.</p></body></html>"))
    broken = (b"From: Bob <bob@example.org>\nSubject: Broken boundary\nMessage-ID: <broken@x>\n"
              b"Content-Type: multipart/mixed; boundary=\"zzz\"\n\n--yyy\n"
              b"Content-Type: text/plain\n\nThe narwhal tusk measurements.\n")
    deliver(mailroot, broken)
    charset = (b"From: Carol <carol@example.org>\nSubject: Odd charset\nMessage-ID: <odd@x>\n"
               b"Content-Type: text/plain; charset=x-no-such-charset\n\n"
               b"The okapi caf\xe9 is open.\n")
    deliver(mailroot, charset)
    deliver(mailroot, message("No id", "The wombat has no message id.", msgid=""))
    (mailroot / "cur" / "garbage:2,").write_bytes(b"\x00\x01\x02 not a message at all \xff")
    report = sync(app)
    assert report.indexed == 5

    (hit,) = search(app, "quokka census Rottnest")[:1]
    assert hit["title"] == "Census results"
    assert hit["metadata"]["heading_path"][0] == "Attachment: census.pdf"
    (hit,) = search(app, "marmoset")
    assert hit["title"] == "Newsletter" and "<b>" not in hit["content"]
    assert subjects(search(app, "narwhal")) == ["Broken boundary"]
    assert subjects(search(app, "okapi")) == ["Odd charset"]
    (hit,) = search(app, "wombat")
    assert hit["source_uri"].startswith("file://")
    warned = {code for _, code in report.warnings}
    assert "unknown_charset" in warned
    assert sum(report.skipped.values()) == 1  # the garbage file, with its code
    (skip,) = report.skipped_files
    assert skip[0].startswith("skip:cur/garbage") and skip[1]


def test_sender_and_date_filters(app: App, mailroot: Path) -> None:
    mails = [("Ada Lovelace <ada@example.org>", "2023-01-10 09:00", "Engine notes one"),
             ("Ada Lovelace <ada@example.org>", "2023-06-10 09:00", "Engine notes two"),
             ("Charles Babbage <cb@difference.net>", "2023-03-01 09:00", "Engine notes three"),
             ("Grace Hopper <grace@navy.example>", "2024-02-02 09:00", "Engine notes four")]
    for sender, date, subject in mails:
        deliver(mailroot, message(subject, "Thoughts on the analytical engine.",
                                  sender=sender, date=date))
    sync(app)
    for mode in ("keyword", "semantic", "hybrid"):
        def found(**f: Any) -> set[str]:
            return set(subjects(search(app, "analytical engine", mode, **f)))  # noqa: B023

        assert found(sender="ADA") == {"Engine notes one", "Engine notes two"}
        assert found(sender="difference.net") == {"Engine notes three"}
        assert found(source_type="email", date_from=20230201, date_to=20231231) == \
            {"Engine notes two", "Engine notes three"}
        assert found(sender="lovelace", date_from=20230301) == {"Engine notes two"}
        assert found(sender="nobody") == set()


def test_same_message_in_two_folders(app: App, mailroot: Path, real_embedder: Any) -> None:
    data = message("Shared plan", "The pangolin plan, copied into two folders.")
    first = deliver(mailroot, data)
    archive = maildir(mailroot / ".Archive")
    second = deliver(archive, data)
    report = sync(app)
    assert report.indexed == 1 and app.collection_info("email")["message_count"] == 1

    # Deleted from whichever folder holds the indexed copy: it lives on in the other one.
    hit = search(app, "pangolin")[0]
    holder, other = (first, second) if hit["source_path"] == str(first) else (second, first)
    holder.unlink()
    calls = real_embedder.calls
    report = sync(app)
    assert (report.moved, report.deleted) == (1, 0) and real_embedder.calls == calls
    assert search(app, "pangolin")[0]["source_path"] == str(other)
    other.unlink()
    report = sync(app)
    assert report.deleted == 1 and search(app, "pangolin") == []


def test_interrupted_pass_resumes(mailroot: Path, real_embedder: Any,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped mid-mailbox, after some groups committed: the mailbox is recorded as read up
    to the last message handled, the next pass reads on from there (not from the start),
    embeds nothing twice, and ends with every message indexed once."""
    from ragd.daemon.sources import mailkind

    monkeypatch.setattr(container_sync, "GROUP_SOURCES", 2)
    words = ["heron", "ibis", "jacana", "kestrel", "lapwing", "merlin", "nightjar"]
    box = mailroot / "Birds.mbox"
    box.write_bytes(mbox_bytes(
        [message(f"Bird {w}", f"Seen today: a {w} by the lake.") for w in words]))
    calls = {"n": 0}
    starts: list[int] = []
    read_mbox = mailkind.read_mbox

    def recorded(root: Any, rel: str, start: int = 0) -> Any:
        starts.append(start)
        return read_mbox(root, rel, start)

    monkeypatch.setattr(mailkind, "read_mbox", recorded)

    def should_stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 5

    with open_app(mailroot, real_embedder, should_stop=should_stop) as a:
        in_process(a)
        with pytest.raises(Interrupted):
            a.sync_all()
        partial = a.collection_info("email")["message_count"]
        assert 0 < partial < len(words)
        (record,) = a.catalog.container_records(a.catalog.collection("email").id)  # type: ignore[union-attr]
        assert 0 < record.read_to == record.size < box.stat().st_size
    calls = real_embedder.calls
    starts.clear()
    with open_app(mailroot, real_embedder) as a:
        in_process(a)
        report = sync(a)
        assert starts == [record.read_to]  # on from where it stopped, not from byte 0
        assert report.indexed == len(words) - partial
        # The first pass committed its messages, then stopped before their vectors: this pass
        # embeds those from the backlog and the new ones, each chunk once.
        every = len(a.catalog.all_chunk_ids())
        assert report.embedded == every == real_embedder.calls - calls
        assert a.collection_info("email")["message_count"] == len(words)
        assert a.consistency()["ok"]
        assert sync(a).indexed == 0
        (record,) = a.catalog.container_records(a.catalog.collection("email").id)  # type: ignore[union-attr]
        assert record.read_to == record.size == box.stat().st_size


def test_results_carry_the_message_metadata(app: App, mailroot: Path) -> None:
    deliver(mailroot, message("Re: Plans", "The yellowhammer plan is fine.", msgid="plans-2",
                              attachment=("notes.txt", "text/plain", b"just notes")))
    sync(app)
    (hit,) = search(app, "yellowhammer")
    meta = hit["metadata"]
    assert meta["subject"] == "Re: Plans" and meta["message_id"] == "plans-2@example.org"
    assert meta["attachments"] == ["notes.txt"] and meta["recipients"]
    assert "in_reply_to" not in meta  # empty fields are left out


def test_a_hint_for_one_file_finds_a_message_moved_in_from_elsewhere(
        app: App, mailroot: Path, real_embedder: Any) -> None:
    archive = maildir(mailroot / ".Archive")
    old = deliver(archive, message("Moved", "The quetzal report, filed twice."))
    deliver(mailroot, message("Other", "Something else entirely."))
    sync(app)
    new = mailroot / "cur" / (old.name + ":2,S")
    os.rename(old, new)
    coll = app.catalog.collection("email")
    assert coll is not None
    calls = real_embedder.calls
    # As a watch hint names it: only the new file, not the folder it came from.
    report = app.sync_collection(coll, paths=[f"cur/{new.name}"])
    assert (report.moved, report.indexed, report.deleted) == (1, 0, 0)
    assert real_embedder.calls == calls
    (hit,) = search(app, "quetzal")
    assert hit["source_path"] == str(new) and hit["metadata"]["folder"] == "Inbox"
