"""Hostile input against a real daemon: mail and books (issue 28), files read by extraction
workers (issue 34).

    python bench/hostile.py [--tree PATH] [--case NAME ... | --issue 28|34] [--name NAME]
                            [--cap SECONDS] [--min-free-gb GB] [--max-saves N] [--keep]

One fresh daemon per case, with default settings, from this checkout or from --tree: another
checkout (from decision 0034 on, where the folders install as ragd.*), e.g. the one before a
change, to measure "before". The tree's daemon/, tray/ and mcp_bridge/ are put under a ``ragd``
package of symlinks (a "view", on PYTHONPATH), since the editable install maps ``ragd`` to this
checkout; the inputs' builders and the test helpers come from this checkout's tests/.

Issue 28 (rows 1-4, 13, 15, 16, 19; the default): a vault and a mail folder or a Calibre
library; the case delivers its input, waits until the daemon works on it, saves one note and
times how long until a keyword search finds it, waits until the writer is done and reads the
daemon's peak memory (VmHWM) and the codes the catalog recorded. The inputs are those of
tests/daemon/test_hostile_mail.py and test_hostile_calibre.py.

Issue 34 (``--issue 34``; the rows of tests/daemon/test_hostile_extraction.py, with the
default [extract] timeout_s of 30 s): a vault, a code group (one small repository), an [rss]
paths folder and a project (added with the ``index`` call). The case drops its item in and,
while the daemon works on it, saves a note into the vault every ~1 s (at least 5) and times each
until keyword-searchable (given up at 30 s: ">30"); a thread samples the daemon's memory and the
extraction workers' (the sum of their VmHWM, ``ragd.daemon.extract.worker``). It records the
catalog's outcome for the item (ok and warnings, or the skip code) and the seconds until the
daemon is idle again, up to --cap ("> cap"), then times `ragd stop` and lists any process of
the daemon that outlived it. Results go to bench/results/NAME.json (hostile-34 for issue 34);
a case that hit its cap keeps its temp folder and the daemon's status every 0.5 s
(``timeline``). Saves every second keep small work queued, which bulk work yields to: with
``--max-saves 5`` the saves stop after five and the item's own time is measured. A case stops
when the machine's available memory falls under --min-free-gb (``memory_guard``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]


def _view(tree: Path) -> Path:
    """A folder holding ``ragd/`` (an empty ``__init__.py`` and symlinks to ``tree``'s daemon,
    tray and mcp_bridge): on PYTHONPATH it imports ``ragd.*`` from ``tree``, ahead of the
    editable install's hook."""
    tag = hashlib.sha256(str(tree).encode()).hexdigest()[:10]
    pkg = Path(tempfile.gettempdir()) / f"ragd-view-{tag}" / "ragd"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").touch()
    for name in ("daemon", "tray", "mcp_bridge"):
        link = pkg / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(tree / name, target_is_directory=True)
    return pkg.parent


def _paths(tree: Path) -> None:
    """The daemon and its client from ``tree``; the inputs' builders, the test helpers and
    bench.common from this checkout (results are written here)."""
    sys.path[:0] = [str(HERE), str(HERE / "tests"), str(HERE / "tests" / "daemon")]
    if tree != HERE:
        view = _view(tree)
        sys.path.insert(0, str(view))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(view)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    probe = "import ragd.daemon; print(ragd.daemon.__file__)"
    child = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           check=True).stdout.strip()
    import ragd.daemon

    want = (tree / "daemon").resolve()
    for where in (str(ragd.daemon.__file__), child):
        if Path(where).resolve().parent != want:
            raise SystemExit(f"ragd.daemon imports from {where}, not from {want}")
    print(f"ragd.daemon from {want} (here and in the daemon)", flush=True)


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

# -- issue 34: files read by extraction workers ------------------------------------------------

WORKER = "ragd.daemon.extract.worker"
SAVE_GIVE_UP_S = 30.0
MIN_SAVES = 5


def _proc_kb(pid: int, field_name: str) -> int:
    """``field_name`` (VmHWM, VmRSS) of /proc/<pid>/status in kB; 0 when the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _mem_available_mb() -> int:
    for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) >> 10
    return 0


def _processes(home: Path) -> dict[int, str]:
    """The live processes whose environment names this RAGD_HOME (the daemon, its workers and
    their children, a `ragd stop` while it runs): pid -> command line."""
    from slow_documents import alive, processes_of

    out = {}
    for pid in processes_of(home, ""):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if alive(pid):
            out[pid] = cmd.decode("utf-8", "replace").strip()[:160]
    return out


class Sampler:
    """Every 0.25 s: the daemon's resident memory, the sum of the extraction workers' VmHWM
    (and of its other children's: conversion workers, git), and the machine's available memory;
    ``low`` is set when that falls under ``min_free_mb`` (the case is then stopped)."""

    def __init__(self, home: Path, daemon_pid: int, min_free_mb: int) -> None:
        self.home, self.pid, self.min_free_mb = home, daemon_pid, min_free_mb
        self.daemon_rss_mb = self.workers_mb = self.worker_max_mb = self.others_mb = 0.0
        self.workers_seen: set[int] = set()
        self.min_available_mb = _mem_available_mb()
        self.low = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.25):
            procs = _processes(self.home)
            workers = [p for p, cmd in procs.items() if WORKER in cmd]
            others = [p for p in procs if p != self.pid and p not in workers
                      and "cli.main stop" not in procs[p]]
            self.workers_seen.update(workers)
            hwm = [_proc_kb(p, "VmHWM") / 1024 for p in workers]
            self.workers_mb = max(self.workers_mb, sum(hwm))
            self.worker_max_mb = max([self.worker_max_mb, *hwm])
            self.others_mb = max(self.others_mb,
                                 sum(_proc_kb(p, "VmHWM") for p in others) / 1024)
            self.daemon_rss_mb = max(self.daemon_rss_mb, _proc_kb(self.pid, "VmRSS") / 1024)
            available = _mem_available_mb()
            self.min_available_mb = min(self.min_available_mb, available)
            if available < self.min_free_mb:
                self.low.set()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=15)


class Timeline:
    """The daemon's ``status`` every 0.5 s while a case runs, compact: seconds since the drop,
    the state, the running job (collection and phase), the queued jobs (collection, priority,
    size) and the chunks waiting for vectors. Kept in the results of a case that hit its cap."""

    def __init__(self, d: Any, t0: float) -> None:
        self.samples: list[list[Any]] = []
        self._d, self._t0 = d, t0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.5):
            st = _status(self._d, timeout=5)
            at = round(time.monotonic() - self._t0, 1)
            if st is None:
                self.samples.append([at, "no answer"])
                continue
            cur = st.get("current") or {}
            self.samples.append([
                at, st.get("state"), f"{cur.get('collection')}:{cur.get('phase')}" if cur
                else None, [f"{j.get('collection')}:{j.get('priority')}:{j.get('size')}"
                            for j in st.get("queue") or [] if isinstance(j, dict)],
                (st.get("embedding") or {}).get("chunks")])

    def stop(self) -> list[list[Any]]:
        self._done.set()
        self._thread.join(timeout=15)
        return self.samples


@dataclass
class Setup:
    """The temp folder of a case and what the daemon was started on."""

    tmp: Path
    vault: Path
    repo: Path  # the code group's repository ("grp")
    feeds: Path  # the [rss] paths folder
    project: Path  # the project collection ("proj")
    daemon: Any = None
    vault_name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Item:
    """A case: ``prepare`` builds the input (not timed), ``drop`` hands it to the daemon (on a
    thread: an ``index`` call blocks until it is done), ``where`` selects its catalog rows
    (SQL over sources, ``?`` filled by ``args``)."""

    prepare: Callable[[Setup], None]
    drop: Callable[[Setup], None]
    where: str
    args: Callable[[Setup], tuple[Any, ...]] = lambda s: ()


def _prepared(name: str, build: Callable[[], bytes]) -> Callable[[Setup], None]:
    def prepare(s: Setup) -> None:
        (s.tmp / "prepared").mkdir(exist_ok=True)
        (s.tmp / "prepared" / name).write_bytes(build())
    return prepare


def _moved(name: str, folder: Callable[[Setup], Path]) -> Callable[[Setup], None]:
    """Drop a prepared file in with one rename (the daemon never sees half of it)."""
    def drop(s: Setup) -> None:
        os.rename(s.tmp / "prepared" / name, folder(s) / name)
    return drop


def _committed(name: str, text: str) -> Callable[[Setup], None]:
    def drop(s: Setup) -> None:
        from code_fixtures import commit_all

        (s.repo / name).write_text(text, encoding="ascii")
        commit_all(s.repo, f"Add {name}")
    return drop


def _huge_repo(s: Setup) -> None:
    from hostile_git import huge_author_repo

    s.extra["sha"] = huge_author_repo(s.tmp / "code" / "huge", author_mb=5, message_mb=100)


def _index_huge(s: Setup) -> None:
    s.daemon.call("index", {"collection": "grp", "path": str(s.tmp / "code" / "huge")},
                  timeout=3600)


def _ascii_note() -> bytes:
    return ("# Long log\n\nThe first line names the narwhal.\n"
            + "Another line of an ordinary but very long log file.\n" * 120_000).encode()


def _cjk_note() -> bytes:
    return ("# 长笔记\n\n独角鲸在第一行。\n\n" + "这是一个很长的中文笔记没有空格" * 150_000).encode()


def _feed() -> bytes:
    from test_hostile_extraction import big_feed

    return big_feed(20_000, 63 * 2**20)  # under the 64 MB cap of [rss] max_feed_mb


def _pdf() -> bytes:
    from test_hostile_extraction import many_page_pdf

    return many_page_pdf(100_000)


def _nothing(s: Setup) -> None:
    pass


ITEMS: dict[str, Item] = {
    # rows 1-2: a 5 MB author name and a 100 MB message, one commit, added to the code group
    "git-huge": Item(_huge_repo, _index_huge,
                     "path LIKE 'commit:%' || ? || '%' OR path LIKE 'code:huge/%'"
                     " OR path LIKE 'skip:huge%'", lambda s: (s.extra["sha"],)),
    # row 3: 900 KB of nested template<, 1 MB of ( lines, committed into the group's repository
    "cpp-templates": Item(_nothing, _committed("deep.cpp", "template<\n" * 90_000),
                          "path = 'skip:repo/deep.cpp' OR path LIKE 'code:repo/deep.cpp#%'"),
    "js-parens": Item(_nothing, _committed("deep.js", "(\n" * 500_000),
                      "path = 'skip:repo/deep.js' OR path LIKE 'code:repo/deep.js#%'"),
    # row 4: 6 MB notes in a project
    "note-6mb-ascii": Item(_prepared("long-ascii.md", _ascii_note),
                           _moved("long-ascii.md", lambda s: s.project),
                           "path = 'long-ascii.md'"),
    "note-6mb-cjk": Item(_prepared("long-cjk.md", _cjk_note),
                         _moved("long-cjk.md", lambda s: s.project), "path = 'long-cjk.md'"),
    # row 5: a 63 MB feed of 20,000 entries in the [rss] paths folder
    "feed-63mb": Item(_prepared("flood.xml", _feed), _moved("flood.xml", lambda s: s.feeds),
                      "container = 'flood.xml' OR path LIKE 'skip:flood.xml%'"),
    # row 6: a 100,000-page PDF in a project
    "pdf-100k-pages": Item(_prepared("endless.pdf", _pdf),
                           _moved("endless.pdf", lambda s: s.project),
                           "path = 'endless.pdf' OR path LIKE 'skip:endless.pdf%'"),
}
CASES_34 = tuple(ITEMS)
ISSUES = {28: CASES, 34: CASES_34}


def _setup(tmp: Path, models: Path) -> tuple[Setup, Path]:
    """A daemon with default settings on a vault, a code group, a feed folder and a project
    (tests/daemon/test_hostile_extraction.py's fixture, without its lowered limits)."""
    from code_fixtures import commit_all, git
    from daemon_proc import DaemonProc
    from hostile_daemon import environment
    from vault_fixtures import write_vault

    s = Setup(tmp, write_vault(tmp / "vault"), tmp / "code" / "repo", tmp / "feeds",
              tmp / "project")
    s.repo.mkdir(parents=True)
    git(s.repo, "init", "-q", "-b", "main")
    (s.repo / "ok.py").write_text('def fine():\n    """An ordinary kiwiword function."""\n',
                                  encoding="utf-8")
    commit_all(s.repo, "An ordinary first commit")
    s.feeds.mkdir()
    (s.feeds / "calm.xml").write_text(
        '<?xml version="1.0"?><rss version="2.0"><channel><title>Calm</title><item>'
        "<title>A calm entry</title><guid>urn:calm:1</guid><description>The marmot sleeps."
        "</description></item></channel></rss>", encoding="ascii")
    s.project.mkdir()
    (s.project / "start.md").write_text("# Start\n\nThe project's first note.\n",
                                        encoding="utf-8")
    home = tmp / "home"
    (home / "data").mkdir(parents=True, mode=0o700)
    (home / "data" / "models").symlink_to(models, target_is_directory=True)
    with environment(HF_HUB_OFFLINE="1", RAGD_CODE_GROUPS=f"grp={s.repo}",
                     RAGD_RSS_PATHS=str(s.feeds)):
        s.daemon = DaemonProc(home, s.vault, tmp / "daemon.log").start()
    return s, home


def _collection_of(home: Path, root: Path) -> str:
    """The name of the collection at ``root`` (the catalog, read-only)."""
    import sqlite3

    db = sqlite3.connect(f"file:{home / 'data' / 'catalog.sqlite'}?mode=ro", uri=True,
                         timeout=10)
    try:
        for name, where in db.execute("SELECT name, root FROM collections"):
            if Path(where).resolve() == root.resolve():
                return str(name)
    finally:
        db.close()
    raise LookupError(f"no collection at {root}")


def _status(d: Any, timeout: float = 10.0) -> dict[str, Any] | None:
    try:
        return dict(d.call("status", timeout=timeout))
    except Exception:  # a daemon that does not answer is a figure too
        return None


def _save(d: Any, vault: Path, n: int) -> float:
    """Save note ``n`` into the vault; seconds until a keyword search finds it, inf past
    SAVE_GIVE_UP_S."""
    word = f"zqv{n}savedword"
    t0 = time.monotonic()
    (vault / "Inbox").mkdir(exist_ok=True)
    (vault / "Inbox" / f"Saved {n}.md").write_text(
        f"# Saved {n}\n\nA {word} note saved during a hostile case.\n", encoding="utf-8")
    deadline = t0 + SAVE_GIVE_UP_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            if d.call("search", {"query": word, "mode": "keyword", "top_k": 3},
                      timeout=max(1.0, left))["results"]:
                return time.monotonic() - t0
        except Exception:  # busy, or no answer in time: try again until the deadline
            pass
        time.sleep(0.02)
    return math.inf


def outcome(rows: list[dict[str, Any]]) -> str:
    """What the catalog says about the item: ``ok`` (x rows) with its warnings, skip codes,
    and any other status."""
    if not rows:
        return "no row"
    ok = [r for r in rows if r["status"] == "ok"]
    warnings = sorted({w for r in ok for w in (r["warnings"] or "").split(",") if w})
    parts = []
    if ok:
        parts.append("ok" + (f" x{len(ok)}" if len(ok) > 1 else "")
                     + (f" ({','.join(warnings)})" if warnings else ""))
    skips = Counter(r["skip_code"] for r in rows if r["skip_code"])
    parts += [f"skip {c}" + (f" x{n}" if n > 1 else "") for c, n in sorted(skips.items())]
    other = Counter(r["status"] for r in rows if r["status"] != "ok" and not r["skip_code"])
    parts += [f"{st} x{n}" for st, n in sorted(other.items())]
    return ", ".join(parts)


def _busy_with_item(st: dict[str, Any] | None, vault: str) -> bool:
    """Whether the writer works on, or has queued, anything but the vault's saves."""
    if st is None:
        return True
    if (st.get("current") or {}).get("collection") not in (None, vault):
        return True
    return any(isinstance(j, dict) and j.get("collection") != vault
               for j in st.get("queue") or [])


def _stop(d: Any, home: Path, daemon_pid: int) -> dict[str, Any]:
    """`ragd stop`, timed; the processes of the daemon still alive 5 s after it returned
    (then killed: the next case starts clean)."""
    from daemon_proc import wait_for

    before = _processes(home)
    t0 = time.monotonic()
    try:
        out = subprocess.run([sys.executable, "-m", "ragd.daemon.cli.main", "stop"],
                             env={**os.environ, "RAGD_HOME": str(home)}, capture_output=True,
                             text=True, timeout=120)
        said = (out.stdout + out.stderr).strip()
    except subprocess.TimeoutExpired:
        said = "`ragd stop` did not return in 120 s"
    took = time.monotonic() - t0
    with contextlib.suppress(AssertionError):
        wait_for(lambda: not _processes(home), 5.0, "every process of the daemon gone",
                 interval=0.05)
    survivors = _processes(home)
    for pid in survivors:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if d.proc is not None and d.proc.poll() is None:
        d.kill9()
    return {"stop_s": round(took, 2), "stop_said": said[-300:],
            "children_before_stop": len([p for p in before if p != daemon_pid]),
            "survivors": [f"{p} {cmd}" for p, cmd in survivors.items()]}


def _seconds(v: float) -> float | str:
    return f">{SAVE_GIVE_UP_S:g}" if math.isinf(v) else round(v, 2)


def run34(name: str, models: Path, cap: float, min_free_gb: float, keep: bool,
          max_saves: int = 0) -> dict[str, Any]:
    """One issue-34 case on a fresh daemon (see the module's docstring)."""
    from hostile_daemon import Hostile

    from bench.common import pct

    item = ITEMS[name]
    tmp = Path(tempfile.mkdtemp(prefix=f"ragd-hostile-{name}-"))
    out: dict[str, Any] = {"case": name, "cap_s": cap, "load_before": os.getloadavg(),
                           "tmp": str(tmp)}
    s, home = _setup(tmp, models)
    d = s.daemon
    sampler: Sampler | None = None
    timeline: Timeline | None = None
    daemon_pid = d.proc.pid
    guard = f"MemAvailable under {min_free_gb:g} GB: case stopped"
    try:
        d.wait_idle(600)
        d.call("index", {"collection": "proj", "path": str(s.project)}, timeout=300)
        d.wait_idle(600)
        st = _status(d) or {}
        daemon_pid = int(st.get("pid") or daemon_pid)
        s.vault_name = _collection_of(home, s.vault)
        t_prep = time.monotonic()
        item.prepare(s)
        out["prepare_s"] = round(time.monotonic() - t_prep, 1)
        h = Hostile(d, s.vault, home, s.project)
        sampler = Sampler(home, daemon_pid, int(min_free_gb * 1024))
        dropped: list[BaseException] = []

        def drop() -> None:
            try:
                item.drop(s)
            except BaseException as exc:  # shown in the results
                dropped.append(exc)

        t0 = time.monotonic()
        thread = threading.Thread(target=drop, daemon=True)
        thread.start()
        timeline = Timeline(d, t0)
        time.sleep(0.3)  # let the daemon see the item
        saves: list[float] = []
        capped = done = False
        while not sampler.low.is_set():
            capped = capped or time.monotonic() - t0 > cap
            if not done and not thread.is_alive() and h.sources(item.where, *item.args(s)):
                done = not _busy_with_item(_status(d), s.vault_name)
            if len(saves) >= MIN_SAVES and (done or capped):
                break
            if max_saves and len(saves) >= max_saves:  # only wait for the item now
                time.sleep(0.2)
                continue
            t_save = time.monotonic()
            saves.append(_save(d, s.vault, len(saves) + 1))
            time.sleep(max(0.0, t_save + 1.0 - time.monotonic()))
        out["item_done_s"] = round(time.monotonic() - t0, 1) if done else None
        idle = False
        while not capped and time.monotonic() - t0 <= cap and not sampler.low.is_set():
            if (_status(d) or {}).get("state") == "idle":
                idle = True
                break
            time.sleep(0.2)
        out["case_s"] = round(time.monotonic() - t0, 1) if idle else f"> {cap:g}"
        if not idle:  # what the daemon was still doing
            st = _status(d) or {}
            out["at_cap"] = {"state": st.get("state"), "current": st.get("current"),
                             "queue": st.get("queue"), "embedding": st.get("embedding"),
                             "item_call_running": thread.is_alive()}
        samples = timeline.stop()
        if not idle:
            out["timeline"] = samples
        if sampler.low.is_set():
            out["memory_guard"] = guard
        rows = h.sources(item.where, *item.args(s))
        out["outcome"] = outcome(rows)
        out["rows"] = len(rows)
        if dropped:
            out["drop_error"] = f"{type(dropped[0]).__name__}: {str(dropped[0])[:200]}"
        if saves:
            out["saves"] = [_seconds(v) for v in saves]
            out["saves_p50"] = _seconds(pct(saves, 50))
            out["saves_p95"] = _seconds(pct(saves, 95))
            out["saves_max"] = _seconds(max(saves))
            out["saves_over_30s"] = sum(math.isinf(v) for v in saves)
    except Exception as exc:  # a case that fails is a figure too
        out["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        if timeline is not None:
            timeline.stop()
        if sampler is not None:
            sampler.stop()
            out["workers_peak_mb"] = round(sampler.workers_mb)
            out["worker_max_mb"] = round(sampler.worker_max_mb)
            out["workers_seen"] = len(sampler.workers_seen)
            out["other_children_peak_mb"] = round(sampler.others_mb)
            out["daemon_rss_sampled_mb"] = round(sampler.daemon_rss_mb)
            out["min_mem_available_mb"] = sampler.min_available_mb
        out["daemon_peak_mb"] = round(_proc_kb(daemon_pid, "VmHWM") / 1024)
        out.update(_stop(d, home, daemon_pid))
        out["load_after"] = os.getloadavg()
        if not keep and "error" not in out and "at_cap" not in out and not out["survivors"]:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def table34(title: str, results: list[dict[str, Any]]) -> str:
    from bench.common import table

    def saves(r: dict[str, Any]) -> str:
        return "/".join(str(r.get(k, "-")) for k in ("saves_p50", "saves_p95", "saves_max"))

    def stop(r: dict[str, Any]) -> str:
        left = r.get("survivors")
        return f"{r.get('stop_s', '-')}" + (f" ({len(left)} survived)" if left else "")

    return table(title, [
        (r["case"], r["tree"], saves(r), r.get("daemon_peak_mb", "-"),
         r.get("workers_peak_mb", "-"), r.get("outcome") or r.get("error", "-"),
         r.get("case_s", "-"), stop(r)) for r in results],
        ["case", "tree", "saves p50/p95/max s", "daemon peak MB", "workers peak MB",
         "outcome", "case s", "stop s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=HERE, help="the checkout to run")
    parser.add_argument("--case", action="append", choices=CASES + CASES_34,
                        help="a case (again for more); default: --issue 28")
    parser.add_argument("--issue", type=int, action="append", choices=sorted(ISSUES),
                        help="every case of an issue")
    parser.add_argument("--name", help="results file name (default: hostile, or hostile-34 "
                        "when only issue 34's cases run)")
    parser.add_argument("--cap", type=float, default=180.0,
                        help="issue 34: seconds a case may take before the daemon is stopped")
    parser.add_argument("--min-free-gb", type=float, default=3.0,
                        help="issue 34: stop a case when the machine's available memory "
                        "falls under this")
    parser.add_argument("--max-saves", type=int, default=0,
                        help="issue 34: stop saving after this many (at least 5; default: "
                        "save until the item is done or the cap)")
    parser.add_argument("--keep", action="store_true",
                        help="keep each case's temp folder (kept anyway when a case hit its "
                        "cap, failed or left a process)")
    parser.add_argument("--models", type=Path,
                        default=Path(tempfile.gettempdir()) / "ragd-bench-models",
                        help="models folder shared by the runs (the ONNX export is made once)")
    args = parser.parse_args()
    tree = args.tree.resolve()
    for key in [k for k in os.environ if k.startswith("RAGD_") and k != "RAGD_CORPUS"]:
        os.environ.pop(key)  # default settings: none of the shell's
    _paths(tree)
    args.models.mkdir(parents=True, exist_ok=True)
    from bench.common import table, write_json

    names = list(args.case or [])
    for issue in args.issue or ([] if names else [28]):
        names += [n for n in ISSUES[issue] if n not in names]
    name = args.name or ("hostile-34" if set(names) <= set(CASES_34) else "hostile")
    print(f"load average {os.getloadavg()}", flush=True)
    results = []
    for case in names:
        if case in ITEMS:
            r = run34(case, args.models, args.cap, args.min_free_gb, args.keep,
                      max(args.max_saves, MIN_SAVES) if args.max_saves else 0)
            r["tree"] = "this" if tree == HERE else tree.name
        else:
            r = run(case, args.models)
        results.append(r)
        print(json.dumps(results[-1]), flush=True)
    old = [r for r in results if r["case"] in CASES]
    if old:
        print(table(f"hostile input, {tree}", [
            (r["case"], r.get("save_s", "-"), r.get("peak_mb", "-"), r.get("done_s", "-"),
             ",".join(r.get("codes", [])) or r.get("error", "")) for r in old],
            ["case", "save→searchable s", "peak RSS MB", "case done s", "codes"]))
    new = [r for r in results if r["case"] in ITEMS]
    if new:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(table34(f"issue 34, {tree}, cap {args.cap:g} s; load average at the end: {load}",
                      new))
    path = write_json(name, {"tree": str(tree), "cap_s": args.cap, "results": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
