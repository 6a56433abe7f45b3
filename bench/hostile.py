"""Hostile mail and books against a real daemon (issue 28, rows 1-4, 13, 15, 16, 19).

    python bench/hostile.py [--tree PATH] [--case row1 ...] [--name hostile]

One fresh daemon per case (from this checkout, or from --tree: another checkout, e.g. the one
before decision 0025, to measure "before"), on a temp folder with a vault and a mail folder or a
Calibre library. Each case delivers its hostile input, waits until the daemon works on it,
saves a note and times how long until a keyword search finds it, then waits until the writer
is done and reads the daemon's peak memory (VmHWM) and the codes the catalog recorded. Prints a
table and writes bench/results/NAME.json. The inputs are those of
tests/daemon/test_hostile_mail.py and test_hostile_calibre.py, which assert the same bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]


def _paths(tree: Path) -> None:
    """The daemon and its client from ``tree``; the inputs' builders from this checkout."""
    sys.path[:0] = [str(tree), str(HERE / "tests"), str(tree / "tests")]
    os.chdir(tree)  # the daemon runs as `python -m ragd.daemon.cli.main` from here


def mail_case(name: str) -> Callable[[Any, Path], str]:
    """Deliver the case's input; the catalog path (key) of what it becomes."""
    from mail_fixtures import SEPARATOR, deliver, latex, mbox_bytes, message, nested, raw

    line = b"The capybara log goes on and on, line after line of it.\n"
    words = ("river", "stone", "lantern", "orbit", "copper", "meadow", "signal", "harbor")

    def one(data: bytes, key: str) -> Callable[[Any, Path], str]:
        def run(h: Any, tmp: Path) -> str:
            deliver(h.root, data)
            return key
        return run

    if name == "row1":
        return one(raw("Deep tags", "deep-tags", "text/html; charset=utf-8",
                       nested("<b>", "</b>", 3_000_000, "quetzal")), "mid:deep-tags@example.org")
    if name == "row4":
        return one(raw("Deep table", "deep-table", "text/html; charset=utf-8",
                       nested("<table><tr><td>", "", 1_000_000, "okapi")),
                   "mid:deep-table@example.org")
    if name in ("row3-20mb", "row3-40mb"):
        lines = 360_000 if name == "row3-20mb" else 720_000
        return one(raw("Huge body", "huge-body", "text/plain; charset=utf-8", line * lines),
                   "%")
    if name == "row19":
        return one(raw("Punycode", "punycode", "text/plain; charset=punycode",
                       (("ü" + "a" * 3) * 250_000).encode("punycode")), "mid:punycode@example.org")
    if name == "row3b":
        log = b"The axolotl tank log, one reading per line, temperature normal.\n" * 125_000
        return one(message("Tank logs", "Logs attached.", msgid="tank-logs",
                           attachment=("tank.txt", "text/plain", log)),
                   "mid:tank-logs@example.org")
    if name == "row3c":
        m = EmailMessage()
        m["From"], m["To"], m["Subject"] = "m@example.org", "a@example.org", "Papers"
        m["Message-ID"] = "<papers@example.org>"
        m.set_content("pangolin")
        for n in range(5):
            m.add_attachment(latex(n), maintype="application", subtype="x-tex",
                             filename=f"paper{n}.tex")
        return one(m.as_bytes(), "mid:papers@example.org")
    if name == "row2":
        def long_line(h: Any, tmp: Path) -> str:
            path = tmp / "long.mbox"
            with open(path, "wb") as fh:
                fh.write(SEPARATOR + b"Subject: long\nMessage-ID: <long@example.org>\n\n")
                fh.truncate(700 * 2**20)
            with open(path, "ab") as fh:
                fh.write(b"\n\n" + SEPARATOR + raw("After", "after-long", "text/plain",
                                                   b"The quokka.\n"))
            os.rename(path, h.root / "long.mbox")
            return "skip:long.mbox#0"
        return long_line
    if name == "row13":
        def archive(h: Any, tmp: Path) -> str:
            msgs = [message(f"Archive {n}", " ".join(words[(n + i) % 8] for i in range(200)),
                            msgid=f"archive-{n}") for n in range(6000)]
            (tmp / "a.mbox").write_bytes(mbox_bytes(msgs))
            os.rename(tmp / "a.mbox", h.root / "archive.mbox")
            return "mid:archive-%"
        return archive
    raise SystemExit(f"unknown case {name}")


def calibre_case(name: str, tmp: Path) -> tuple[Path, str]:
    """Build the case's library; (library, key of the hostile book)."""
    import sqlite3 as sq

    from calibre_fixtures import add_book, epub_bytes, odt_bytes, repeated_spine_epub

    lib = tmp / "Library"
    if name == "row15":
        (tmp / "b.epub").write_bytes(repeated_spine_epub(chapter_mb=40, times=20, word="gannet"))
        book = add_book(lib, tmp / "b.epub", title="Spine Bomb", authors="Mallory")
    elif name == "row16":
        (tmp / "b.odt").write_bytes(odt_bytes(15_000, "bittern"))
        book = add_book(lib, tmp / "b.odt", title="Slow Story", authors="Mallory")
    else:  # a description of 3 million nested tags
        (tmp / "b.epub").write_bytes(epub_bytes("Plain", "A. Writer", [("One", "A curlew.")]))
        book = add_book(lib, tmp / "b.epub", title="Described", authors="Mallory")
        db = sq.connect(lib / "metadata.db")
        with db:
            db.execute("INSERT OR REPLACE INTO comments (book, text) VALUES (?, ?)",
                       (book, "<b>" * 3_000_000 + "The ptarmigan blurb." + "</b>" * 3_000_000))
        db.close()
    return lib, f"calibre:{book}"


def ebook_convert_running() -> bool:
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
        except OSError:
            continue
        if b"ebook-convert" in cmd and b"ragd-calibre-" in cmd:
            return True
    return False


def run(name: str, models: Path) -> dict[str, Any]:
    import hostile_daemon
    from daemon_proc import DaemonProc, wait_for
    from hostile_daemon import Hostile, environment
    from mail_fixtures import maildir
    from vault_fixtures import write_vault

    hostile_daemon.SAVE_LIMIT_S = 900.0  # measure, do not fail
    tmp = Path(tempfile.mkdtemp(prefix=f"ragd-hostile-{name}-"))
    home = tmp / "home"
    (home / "data").mkdir(parents=True, mode=0o700)
    (home / "data" / "models").symlink_to(models, target_is_directory=True)
    env = {"RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1", "RAGD_DOCUMENTS_TIMEOUT_S": "2"}
    calibre = name in ("row15", "row16", "description")
    if calibre:
        root, key = calibre_case(name, tmp)
        env["RAGD_CALIBRE_LIBRARIES"] = str(root)
        env.pop("RAGD_DOCUMENTS_TIMEOUT_S")
    else:
        root = maildir(tmp / "Mail")
        env["RAGD_EMAIL_PATHS"] = str(root)
    with environment(**env):
        d = DaemonProc(home, write_vault(tmp / "vault"), tmp / "daemon.log").start()
    h = Hostile(d, tmp / "vault", home, root)
    out: dict[str, Any] = {"case": name}
    try:
        if not calibre:
            d.wait_idle(600)
            key = mail_case(name)(h, tmp)
        t0 = time.monotonic()
        if name == "row16":
            wait_for(ebook_convert_running, 300, "ebook-convert", interval=0.05)
        else:
            try:
                h.busy_with("calibre" if calibre else "email", 120)
            except AssertionError:
                out["busy_seen"] = False
        if name == "row13":
            wait_for(lambda: len(h.sources("path LIKE ?", key)) > 200, 300, "the archive")
        out["save_s"] = round(h.save_note(), 2)
        wait_for(lambda: h.sources("path LIKE ?", key), 900, key, interval=0.2)
        if name == "row13":
            wait_for(lambda: len(h.sources("path LIKE ?", key)) >= 6000, 900, "all",
                     interval=0.5)
        h.settle(900)
        out["done_s"] = round(time.monotonic() - t0, 1)
        out["codes"] = sorted({r["skip_code"] or w for r in h.sources("path LIKE ?", key)
                               for w in (r["warnings"] or "").split(",") + [""]
                               if r["skip_code"] or w})
        out["peak_mb"] = h.peak_rss() >> 20
    except Exception as exc:  # a case that fails is a figure too
        out["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        out["peak_mb"] = h.peak_rss() >> 20
    finally:
        d.stop()
    return out


CASES = ("row1", "row4", "row3-20mb", "row3-40mb", "row19", "row3b", "row3c", "row2",
         "row13", "row15", "row16", "description")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=HERE, help="the checkout to run")
    parser.add_argument("--case", action="append", choices=CASES, help="default: all")
    parser.add_argument("--name", default="hostile", help="results file name")
    parser.add_argument("--models", type=Path,
                        default=Path(tempfile.gettempdir()) / "ragd-bench-models",
                        help="models folder shared by the runs (the ONNX export is made once)")
    args = parser.parse_args()
    _paths(args.tree.resolve())
    args.models.mkdir(parents=True, exist_ok=True)
    from bench.common import table, write_json

    results = []
    for name in args.case or CASES:
        results.append(run(name, args.models))
        print(json.dumps(results[-1]), flush=True)
    print(table(f"hostile input, {args.tree}", [
        (r["case"], r.get("save_s", "-"), r.get("peak_mb", "-"), r.get("done_s", "-"),
         ",".join(r.get("codes", [])) or r.get("error", "")) for r in results],
        ["case", "save→searchable s", "peak RSS MB", "case done s", "codes"]))
    write_json(args.name, {"tree": str(args.tree), "results": results})


if __name__ == "__main__":
    main()
