"""Hostile mail against a real daemon (issue 28, decision 0025): each row of the issue's table
that mail covers, scaled to seconds. For each case the daemon's peak memory (VmHWM) stays under
1 GB, a note saved while it works on the case is keyword-searchable within 2 s, and the
catalog carries the code the user sees (`ragd status`, the tray)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_proc import DaemonProc, wait_for
from hostile_daemon import GB, Hostile, environment
from mail_fixtures import SEPARATOR, deliver, latex, maildir, mbox_bytes, message, nested, raw
from vault_fixtures import write_vault

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not Path("/proc/self/status").exists(),
                                 reason="reads the daemon's peak memory from /proc")]

@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory, shared_models: Path
            ) -> Iterator[Hostile]:
    import daemon_proc

    root = tmp_path_factory.mktemp("hostile-mail")
    vault = write_vault(root / "vault")
    mail = maildir(root / "Mail")
    home = root / "home"
    (home / "data").mkdir(parents=True, mode=0o700)
    (home / "data" / "models").symlink_to(shared_models, target_is_directory=True)
    # A conversion time limit of 2 s keeps the slow-attachment case to seconds.
    with environment(RAGD_EMAIL_PATHS=str(mail), RAGD_DOCUMENTS_TIMEOUT_S="2"):
        d = DaemonProc(home, vault, root / "daemon.log").start()
    daemon_proc.STARTED.remove(d)  # lives for the module
    try:
        d.wait_idle(timeout=300)
        yield Hostile(d, vault, home, mail)
    finally:
        d.stop()


def _mail(h: Hostile) -> Path:
    return h.root


def check(h: Hostile, key: str, code: str, *, skipped: bool = False) -> dict[str, object]:
    """The message's row carries ``code`` (a warning, or its skip code), and the daemon's
    peak memory is under 1 GB."""
    row = h.source(key)
    h.settle()
    if skipped:
        assert (row["status"], row["skip_code"]) == ("skipped", code), row
    else:
        assert row["status"] == "ok" and code in row["warnings"].split(","), row
    assert h.peak_rss() < GB, f"peak RSS {h.peak_rss() / 2**20:.0f} MB"
    return row


def deliver_and_save(h: Hostile, data: bytes) -> float:
    """Deliver a message, wait until the daemon works on mail, save a note: its seconds."""
    deliver(_mail(h), data)
    h.busy_with("email")
    return h.save_note()


def test_row1_three_million_nested_tags(hostile: Hostile) -> None:
    """Was: the daemon peaked at 3.2 GB turning the HTML into text in process (3 million
    nested <b>: 803 MB more in process, and the mail is 20 MB)."""
    html = nested("<b>", "</b>", 3_000_000, "The quetzal nests deep inside.")
    seconds = deliver_and_save(hostile, raw("Deep tags", "deep-tags",
                                            "text/html; charset=utf-8", html))
    check(hostile, "mid:deep-tags@example.org", "html_body_stripped")
    assert [r["title"] for r in hostile.keyword("quetzal")] == ["Deep tags"]
    print(f"row 1: save {seconds:.2f} s, peak {hostile.peak_rss() / 2**20:.0f} MB")


def test_row4_nested_table_cells(hostile: Hostile) -> None:
    """Was: 2 million nested cells took the daemon to 1.7 GB; 1 million here, left open as
    a parser sees them (1 GB more in process, and the mail is 15 MB)."""
    html = nested("<table><tr><td>", "", 1_000_000, "Okapi in a cell.")
    seconds = deliver_and_save(hostile, raw("Deep table", "deep-table",
                                            "text/html; charset=utf-8", html))
    check(hostile, "mid:deep-table@example.org", "html_body_stripped")
    print(f"row 4: save {seconds:.2f} s, peak {hostile.peak_rss() / 2**20:.0f} MB")


def test_row3_huge_bodies(hostile: Hostile) -> None:
    """Was: a 40 MB body kept a note saved meanwhile waiting 48 s. Over 25 MB a message is
    not read at all; a 20 MB body is decoded up to the 2M-character cut."""
    line = b"The capybara log goes on and on, line after line of it.\n"
    seconds = deliver_and_save(hostile, raw("Huge body", "huge-body",
                                            "text/plain; charset=utf-8", line * 360_000))
    check(hostile, "mid:huge-body@example.org", "body_truncated")
    path = deliver(_mail(hostile), raw("Huger body", "huger-body",
                                       "text/plain; charset=utf-8", line * 720_000))
    check(hostile, "skip:" + str(path.relative_to(_mail(hostile))), "message_too_large",
          skipped=True)
    print(f"row 3: save {seconds:.2f} s, peak {hostile.peak_rss() / 2**20:.0f} MB")


def test_row3_row19_punycode_charset(hostile: Hostile) -> None:
    """Was: decoding 2.9 MB as punycode took 186 s (quadratic) before any cut; 1 MB here
    (about 15 s the old way)."""
    body = (("ü" + "a" * 3) * 250_000).encode("punycode")
    seconds = deliver_and_save(hostile, raw("Punycode list", "punycode",
                                            "text/plain; charset=punycode", body))
    check(hostile, "mid:punycode@example.org", "unknown_charset")
    print(f"row 19: save {seconds:.2f} s")


def test_row3b_large_text_attachment(hostile: Hostile) -> None:
    """Was: a 30 MB text attachment became 35,840 chunks; a note saved meanwhile was not
    searchable after 800 s. 8 MB here: cut with the message's budget."""
    log = b"The axolotl tank log, one reading per line, temperature normal.\n" * 125_000
    seconds = deliver_and_save(hostile, message("Tank logs", "Logs attached.",
                                                msgid="tank-logs",
                                                attachment=("tank.txt", "text/plain", log)))
    check(hostile, "mid:tank-logs@example.org", "attachment_truncated")
    print(f"row 3b: save {seconds:.2f} s")


def test_row3c_several_slow_attachments(hostile: Hostile) -> None:
    """Was: five attachments that each hit the conversion limit held the writer in turn
    (600 s). Here the limit is 2 s: the first times out, the others share its budget."""
    from email.message import EmailMessage

    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = "Mallory <m@example.org>", "ada@example.org", "Papers"
    m["Message-ID"] = "<papers@example.org>"
    m.set_content("Five papers attached; the pangolin abstract is in the body.")
    for n in range(5):
        m.add_attachment(latex(n), maintype="application", subtype="x-tex",
                         filename=f"paper{n}.tex")
    seconds = deliver_and_save(hostile, m.as_bytes())
    row = check(hostile, "mid:papers@example.org", "attachment_time_budget")
    assert "attachment_convert_timeout" in str(row["warnings"])
    assert [r["title"] for r in hostile.keyword("pangolin")] == ["Papers"]
    print(f"row 3c: save {seconds:.2f} s")


def moved_in(h: Hostile, tmp: Path, name: str, write: object) -> Path:
    """Write a file beside the mail folder, then move it in (one event, whole)."""
    assert callable(write)
    path = tmp / name
    write(path)
    dest = _mail(h) / name
    os.rename(path, dest)
    return dest


def test_row2_mbox_with_one_very_long_line(hostile: Hostile, tmp_path: Path) -> None:
    """Was: the daemon read the line whole and peaked at 3.35 GB. A 700 MB line here
    (sparse): the message is skipped as too_large and the next one is read."""
    after = SEPARATOR + raw("After the long line", "after-long", "text/plain",
                            b"The quokka comes after the long line.\n")

    def write(path: Path) -> None:
        with open(path, "wb") as fh:
            fh.write(SEPARATOR + b"Subject: long\nMessage-ID: <long@example.org>\n\n")
            fh.truncate(700 * 2**20)  # one line of NUL bytes, no disk used
        with open(path, "ab") as fh:
            fh.write(b"\n\n" + after)

    moved_in(hostile, tmp_path, "long.mbox", write)
    hostile.busy_with("email")
    seconds = hostile.save_note()
    check(hostile, "skip:long.mbox#0", "message_too_large", skipped=True)
    hostile.source("mid:after-long@example.org")
    assert [r["title"] for r in hostile.keyword("quokka")] == ["After the long line"]
    print(f"row 2: save {seconds:.2f} s, peak {hostile.peak_rss() / 2**20:.0f} MB")


def test_row13_large_mbox_resumes_where_it_yielded(hostile: Hostile, tmp_path: Path) -> None:
    """Was: a 1 GB mbox of 607,600 messages kept a saved note waiting over 900 s (a job over
    one file is small work, and small work never gave way to small work) and was parsed again
    from its start after every yield. 2,500 messages here (enough to be read in several
    passes; the yield comes after the first 200)."""
    words = ("river", "stone", "lantern", "orbit", "copper", "meadow", "signal", "harbor")
    messages = [message(f"Archive {n}", " ".join(words[(n + i) % 8] for i in range(60)),
                        msgid=f"archive-{n}") for n in range(2500)]
    moved_in(hostile, tmp_path, "archive.mbox",
              lambda p: p.write_bytes(mbox_bytes(messages)))
    hostile.busy_with("email")
    wait_for(lambda: len(hostile.sources("path LIKE 'mid:archive-%'")) > 200, 60,
             "the archive to be under way", interval=0.1)
    seconds = hostile.save_note()
    # The yield recorded how far the mbox was read; the resumed pass goes on from there.
    size = (_mail(hostile) / "archive.mbox").stat().st_size
    partial = wait_for(lambda: [r for p, (s, r) in hostile.containers().items()
                                if p == "archive.mbox" and 0 < r < size],
                       30, "the archive's partial record", interval=0.05)
    assert partial
    wait_for(lambda: len(hostile.sources("path LIKE 'mid:archive-%'")) == 2500, 300,
             "every archived message", interval=0.5)
    assert hostile.containers()["archive.mbox"] == (size, size)
    assert hostile.peak_rss() < GB
    print(f"row 13: save {seconds:.2f} s, peak {hostile.peak_rss() / 2**20:.0f} MB")


def test_row21_utf16_declared_over_ascii(hostile: Hostile) -> None:
    deliver(_mail(hostile), raw("Wide claim", "wide-claim", "text/plain; charset=utf-16",
                                b"The aardwolf text is plain ASCII.\n"))
    check(hostile, "mid:wide-claim@example.org", "charset_mismatch")
    assert [r["title"] for r in hostile.keyword("aardwolf")] == ["Wide claim"]


def test_row21_unquoted_from_line_stays_in_its_message(hostile: Hostile,
                                                        tmp_path: Path) -> None:
    one = SEPARATOR + raw("Letter one", "letter-one", "text/plain",
                          b"First letter.\n\nFrom the archive we learned of the numbat.\n"
                          b"Note: it eats termites.\n\n")
    two = SEPARATOR + raw("Letter two", "letter-two", "text/plain", b"The second letter.\n")
    moved_in(hostile, tmp_path, "letters.mbox", lambda p: p.write_bytes(one + two))
    check(hostile, "mid:letter-one@example.org", "mbox_unquoted_from")
    hostile.source("mid:letter-two@example.org")
    assert [r["title"] for r in hostile.keyword("numbat termites")] == ["Letter one"]


def test_row21_maildir_file_swapped_for_a_link_out(hostile: Hostile, tmp_path: Path) -> None:
    mail = _mail(hostile)
    path = deliver(mail, message("Wallaby notes", "The wallaby count is forty.",
                                 msgid="wallaby"))
    hostile.source("mid:wallaby@example.org")
    # The catalog row commits a moment before the keyword index has it.
    wait_for(lambda: hostile.keyword("wallaby"), 2, "the message to be searchable")
    outside = tmp_path / "elsewhere.eml"
    outside.write_bytes(message("Dingo notes", "The dingo secret stays outside.",
                                msgid="dingo"))
    link = path.with_name(path.name + ".swap")
    link.symlink_to(outside)
    os.replace(link, path)  # the message file is now a link out of the mail folder
    rel = str(path.relative_to(mail))
    wait_for(lambda: hostile.sources("path = ? AND skip_code = 'outside_root'", rel), 30,
             "the link to be recorded as outside_root")
    wait_for(lambda: not hostile.sources("path = 'mid:wallaby@example.org'"), 30,
             "the old message to be dropped")
    assert hostile.keyword("wallaby") == [] and hostile.keyword("dingo") == []
