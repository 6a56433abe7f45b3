"""Mail parsing (daemon/sources/mail.py) and mbox streaming (daemon/sources/mailbox.py)."""

from __future__ import annotations

import glob
import os
from email.message import EmailMessage
from pathlib import Path

import pytest
from conftest import corpus_path

from ragd.daemon.models import Skip
from ragd.daemon.sources.mail import MailMessage, parse_message, trim_quoted
from ragd.daemon.sources.mailbox import MboxMessage, list_mail, read_emlx, read_mbox


def strip_tags(html: str) -> str:
    """A stand-in HTML converter for unit tests (the real one is the doc store's)."""
    import re

    return re.sub(r"<[^>]+>", " ", html)


def parse(data: bytes) -> MailMessage:
    got = parse_message(data, html_to_text=strip_tags)
    assert isinstance(got, MailMessage), got
    return got


def message(**headers: str) -> EmailMessage:
    m = EmailMessage()
    for name, value in headers.items():
        m[name.replace("_", "-")] = value
    return m


def test_headers_become_metadata_with_a_timezone_aware_date() -> None:
    m = message(From='"Ada Lovelace" <ada@example.org>', To="bob@example.org, Carol <c@x.io>",
                Cc="dan@example.org", Subject="=?utf-8?q?Gr=C3=BC=C3=9Fe_aus_K=C3=B6ln?=",
                Date="Tue, 03 Nov 2009 14:05:00 +0100", Message_ID="<abc.123@example.org>",
                In_Reply_To="<parent@example.org>",
                References="<root@example.org> <parent@example.org>")
    m.set_content("Hello Bob.\n")
    got = parse(m.as_bytes())
    assert got.subject == "Grüße aus Köln"
    assert got.sender == "Ada Lovelace <ada@example.org>"
    assert got.recipients == ("bob@example.org", "Carol <c@x.io>", "dan@example.org")
    assert got.date == "2009-11-03T14:05:00+01:00"
    assert (got.key, got.uri) == ("mid:abc.123@example.org", "mid:abc.123@example.org")
    assert got.in_reply_to == "parent@example.org"
    assert got.references == ("root@example.org", "parent@example.org")
    assert got.metadata("Inbox")["folder"] == "Inbox"


def test_without_a_message_id_the_key_is_the_hash_of_the_bytes() -> None:
    m = message(From="a@b.c", Subject="no id")
    m.set_content("text\n")
    got = parse(m.as_bytes())
    assert got.message_id is None and got.key.startswith("sha256:") and got.uri == ""
    assert parse(m.as_bytes()).key == got.key


def test_html_only_bodies_become_text() -> None:
    m = message(From="a@b.c", Subject="html")
    m.set_content("<html><body><p>Only <b>HTML</b> here</p></body></html>", subtype="html")
    assert "Only" in parse(m.as_bytes()).body and "<b>" not in parse(m.as_bytes()).body


def test_plain_text_is_preferred_to_its_html_alternative() -> None:
    m = message(From="a@b.c", Subject="alt")
    m.set_content("the plain words\n")
    m.add_alternative("<p>the html words</p>", subtype="html")
    assert parse(m.as_bytes()).body.strip() == "the plain words"


def test_an_unknown_charset_is_read_with_a_warning() -> None:
    raw = (b"From: a@b.c\r\nSubject: odd\r\nContent-Type: text/plain; charset=x-no-such\r\n"
           b"\r\ncaf\xc3\xa9 au lait\r\n")
    got = parse(raw)
    assert "café au lait" in got.body and "unknown_charset" in got.warnings


def test_broken_mime_keeps_what_can_be_read() -> None:
    raw = (b"From: a@b.c\r\nSubject: broken\r\nMIME-Version: 1.0\r\n"
           b'Content-Type: multipart/mixed; boundary="XX"\r\n\r\n--XX\r\n'
           b"Content-Type: text/plain\r\n\r\nsurvivor text\r\n")  # no closing boundary
    got = parse(raw)
    assert "survivor text" in got.body and "mime_defects" in got.warnings


def test_attachments_are_kept_by_name_without_paths() -> None:
    m = message(From="a@b.c", Subject="files", Message_ID="<f@x>")
    m.set_content("see attached\n")
    m.add_attachment(b"%PDF-1.4 fake", maintype="application", subtype="pdf",
                     filename="../../etc/report.pdf")
    got = parse(m.as_bytes())
    assert [(a.filename, a.content_type, a.data) for a in got.attachments] == [
        ("report.pdf", "application/pdf", b"%PDF-1.4 fake")]
    assert got.body.strip() == "see attached"


def test_empty_and_garbage_input() -> None:
    assert parse_message(b"", html_to_text=strip_tags) == Skip("empty", "message has no bytes")
    got = parse_message(b"\x00\x01\x02 not mail at all", html_to_text=strip_tags)
    assert isinstance(got, (MailMessage, Skip))  # never an exception


def test_quoted_history_and_signature_are_trimmed_from_what_is_embedded() -> None:
    body = ("I agree, let's ship on Friday.\n\nOn Tue, 3 Nov 2009, Ada <ada@x.org> wrote:\n"
            "> Shall we ship?\n> It is ready.\n\nAlso: the docs need a pass.\n\n-- \n"
            "Bob, sent from a phone\n")
    assert trim_quoted(body) == "I agree, let's ship on Friday.\n\nAlso: the docs need a pass."
    outlook = "Yes.\n\n-----Original Message-----\nFrom: Ada\nold text\n"
    assert trim_quoted(outlook) == "Yes."
    assert trim_quoted("> only a quote\n") == "> only a quote"  # never empty


def write_mbox(path: Path, bodies: list[str], mode: str = "w") -> None:
    with open(path, mode, encoding="utf-8", newline="\n") as fh:
        for n, body in enumerate(bodies):
            fh.write(f"From sender@example.org Mon Jan  1 00:00:0{n} 2024\n"
                     f"From: sender@example.org\nSubject: message {body[:12]}\n"
                     f"Message-ID: <{abs(hash(body))}@x>\n\n{body}\n\n")


def test_an_mbox_is_streamed_and_a_grown_one_read_from_where_it_stopped(tmp_path: Path) -> None:
    box = tmp_path / "box.mbox"
    write_mbox(box, ["first body\nFrom here on, a line that starts like a separator",
                     "second body\n>From quoted in mboxrd"])
    first = [m for m in read_mbox(tmp_path, "box.mbox") if isinstance(m, MboxMessage)]
    assert len(first) == 2
    assert b"From here on" in first[0].data  # not preceded by a blank line: not a separator
    assert b"\nFrom quoted in mboxrd" in first[1].data  # '>From ' unescaped
    assert first[1].end == box.stat().st_size and first[0].end == first[1].offset

    write_mbox(box, ["third body appended"], mode="a")
    grown = list(read_mbox(tmp_path, "box.mbox", start=first[-1].end))
    assert len(grown) == 1 and isinstance(grown[0], MboxMessage)
    assert b"third body appended" in grown[0].data


def test_an_mbox_outside_the_root_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    write_mbox(tmp_path / "out" / "box.mbox", ["secret"])
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "box.mbox").symlink_to(tmp_path / "out" / "box.mbox")
    got = list(read_mbox(tmp_path / "root", "box.mbox"))
    assert len(got) == 1 and isinstance(got[0], Skip) and got[0].code == "outside_root"


def test_every_message_of_the_shared_mboxes_parses() -> None:
    root = corpus_path("mail")
    counts: dict[str, int] = {}
    for path in sorted(glob.glob(str(root / "mbox" / "*.mbox"))):
        rel = os.path.relpath(path, root)
        for m in read_mbox(root, rel):
            assert isinstance(m, MboxMessage), m
            got = parse(m.data)
            assert got.sender and got.date, (rel, m.offset)
            counts[rel] = counts.get(rel, 0) + 1
    assert sum(counts.values()) == 797  # the corpus README's count for mbox/
    assert counts["mbox/nexus-html-only.mbox"] == 3


@pytest.mark.parametrize("name", ["notmuch-attachment/text-calendar.eml",
                                  "notmuch-html/embedded-image"])
def test_shared_eml_files_parse(name: str) -> None:
    got = parse((corpus_path("mail", "eml") / name).read_bytes())
    assert got.subject and got.sender


# -- listing ------------------------------------------------------------------------------------


def test_maildir_plus_plus_thunderbird_and_single_files_are_listed_by_folder(
        tmp_path: Path) -> None:
    msg = b"From: a@b.c\nSubject: hi\n\nbody\n"
    for rel in ("Mail/cur/1.host:2,S", "Mail/new/2.host", "Mail/tmp/3.host",
                "Mail/.Archive.2020/cur/4.host:2,", "Mail/.Sent/new/5.host"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(msg)
    tb = tmp_path / "Thunderbird" / "Local Folders"
    (tb / "Inbox.sbd").mkdir(parents=True)
    (tb / "Inbox").write_bytes(b"From - Mon Jan 1 00:00:00 2024\n" + msg)
    (tb / "Inbox.msf").write_bytes(b"// <!-- <mdb:mork:z v=\"1.4\"/> -->")
    (tb / "Inbox.sbd" / "Work").write_bytes(b"From - Mon Jan 1 00:00:00 2024\n" + msg)
    (tmp_path / "single.eml").write_bytes(msg)
    (tmp_path / "apple.emlx").write_bytes(b"%d\n" % len(msg) + msg + b"<?xml plist?>")
    (tmp_path / "notes.md").write_text("# not mail\n", encoding="utf-8")
    (tmp_path / "blob").write_bytes(b"\x89PNG binary")

    files, skipped = list_mail(tmp_path)

    got = {f.path: (f.kind, f.folder) for f in files}
    assert got == {
        "Mail/cur/1.host:2,S": ("message", "Mail"), "Mail/new/2.host": ("message", "Mail"),
        "Mail/.Archive.2020/cur/4.host:2,": ("message", "Mail/Archive/2020"),
        "Mail/.Sent/new/5.host": ("message", "Mail/Sent"),
        "Thunderbird/Local Folders/Inbox": ("mbox", "Thunderbird/Local Folders/Inbox"),
        "Thunderbird/Local Folders/Inbox.sbd/Work": ("mbox",
                                                     "Thunderbird/Local Folders/Inbox/Work"),
        "single.eml": ("message", "Inbox"), "apple.emlx": ("emlx", "Inbox"),
    }
    assert skipped == []
    assert read_emlx((tmp_path / "apple.emlx").read_bytes()) == msg


def test_every_message_of_the_shared_mail_folders_is_listed_and_parses() -> None:
    root = corpus_path("mail")
    files, skipped = list_mail(root)
    assert skipped == []
    count = 0
    for f in files:
        if f.kind == "mbox":
            datas = [m.data for m in read_mbox(root, f.path) if isinstance(m, MboxMessage)]
        else:
            datas = [(root / f.path).read_bytes()]
        for data in datas:
            parse(data)
            count += 1
    assert count == 1064  # the corpus README: 797 in mbox, 263 in maildir, 4 single files


def test_a_header_the_parser_trips_over_is_read_raw_with_a_warning() -> None:
    raw = (b"From: a@b.c\r\nTo: undisclosed-recipients:;, \"Odd\" <@bad>, x@y.z\r\n"
           b"Cc: : ;\r\nSubject: groups\r\n\r\nbody\r\n")
    got = parse(raw)
    assert "x@y.z" in got.recipients and got.body.strip() == "body"


@pytest.mark.timeout(30)
def test_hostile_messages_are_read_in_bounded_time_and_size() -> None:
    """Both took minutes with the email package's default policy: 58 s for one To: line of
    100,000 addresses (its header registry), 25 s for 20,000 MIME parts."""
    import time

    to = ", ".join(f"u{i}@x.org" for i in range(100_000))
    started = time.perf_counter()
    crowd = parse(f"From: a@b.c\r\nTo: {to}\r\nSubject: all\r\n\r\nhi\r\n".encode())
    parts = "".join(f"--B\r\nContent-Type: text/plain\r\n\r\npart {i}\r\n" for i in range(20_000))
    many = parse(("From: a@b.c\r\nSubject: many\r\nMIME-Version: 1.0\r\n"
                  "Content-Type: multipart/mixed; boundary=B\r\n\r\n" + parts + "--B--\r\n"
                  ).encode())
    assert time.perf_counter() - started < 5.0
    assert len(crowd.recipients) == 100 and "header_truncated" in crowd.warnings
    assert len(str(crowd.metadata("Inbox"))) < 10_000
    assert "mime_truncated" in many.warnings and "part 0" in many.body
    assert "part 19999" not in many.body


def test_rfc2047_filenames_and_codes_are_stable() -> None:
    from ragd.daemon.skips import describe

    m = message(From="a@b.c", Subject="x")
    m.set_content("see\n")
    m.add_attachment(b"data", maintype="application", subtype="octet-stream",
                     filename="Übersicht.pdf")
    assert [a.filename for a in parse(m.as_bytes()).attachments] == ["Übersicht.pdf"]
    for code in ("mime_defects", "bad_header", "unknown_charset", "header_truncated",
                 "mime_truncated"):
        assert describe(code) != code


def test_plain_text_body_has_no_headings() -> None:
    from ragd.daemon.sources.mailkind import plain_text_body
    from ragd.daemon.text.headings import find_headings

    patch = "Fix it.\n\nSigned-off-by: Joe <j@x>\n---\n a.c | 2 +-\n# not a title\nend\n===\n"
    assert find_headings(plain_text_body(patch)) == []
    assert plain_text_body(patch).replace("\n", "").replace("\\", "") == patch.replace("\n", "")


def test_content_hash_ignores_where_a_message_is() -> None:
    from ragd.daemon.sources.mailkind import MailKind, content_hash

    raw = (b"From: A <a@x>\nSubject: Hi\nMessage-ID: <m1@x>\nX-Mozilla-Status: 0001\n\nBody\n")
    moved = raw.replace(b"0001", b"0005")
    one, two = (parse_message(d, html_to_text=strip_tags) for d in (raw, moved))
    assert isinstance(one, MailMessage) and isinstance(two, MailMessage)
    assert content_hash(one) == content_hash(two)
    kind = MailKind(None)
    meta = kind.location_metadata(Path("/m"), one.key, ".Work.Q1/cur/1:2,S", "")
    assert meta["folder"] == "Work/Q1" and "source_uri" not in meta
    meta = kind.location_metadata(Path("/m"), "sha256:ab", "Inbox.sbd/Lists", "120")
    assert meta["folder"] == "Inbox/Lists" and meta["offset"] == 120
    assert meta["source_uri"] == "file:///m/Inbox.sbd/Lists"
