"""A hostile user against a real daemon: bad files, links out of the vault, bad requests.

The daemon must stay up, read nothing outside a collection's root, record every bad file with a
code, keep answering searches while it chews on them, and stop promptly when asked.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc, wait_for
from vault_fixtures import write_vault

from ragd.daemon.errors import RagdError
from ragd.daemon.settings.paths import resolve_paths

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix",
                                                   reason="builds POSIX links and FIFOs")]

SECRET_WORD = "zanzibarquokka"
BAD_NAME = "bad-\\udcff-name.md"  # how an undecodable name byte is reported


def merge_bomb() -> str:
    lines = ["l0: &l0 {a: 1, b: 2}"]
    for i in range(1, 9):
        lines.append(f"l{i}: &l{i}\n  <<: [{', '.join([f'*l{i - 1}'] * 10)}]\n  c: {i}")
    return "---\n" + "\n".join(lines) + "\n---\n# Merge bomb\nThe body survives.\n"


def build_hostile_vault(root: Path, outside: Path) -> dict[str, str]:
    """Write the vault; return {path: what it tests} for every file that should be looked at
    (indexed, or skipped with a code)."""
    vault = write_vault(root)
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.md").write_text(f"# Secret\n{SECRET_WORD} must never be indexed\n",
                                       encoding="utf-8")
    (outside / "dir").mkdir(exist_ok=True)
    (outside / "dir" / "more.md").write_text(f"{SECRET_WORD} in a folder\n", encoding="utf-8")
    kinds: dict[str, str] = {}

    def put(rel: str, data: str | bytes, kind: str) -> Path:
        path = vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
        kinds[rel] = kind
        return path

    def link(rel: str, target: str | Path, kind: str, *, folder: bool = False) -> None:
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).symlink_to(target, target_is_directory=folder)
        kinds[rel] = kind

    link("passwd.md", "/etc/passwd", "link to a system file")
    link("secret.md", outside / "secret.md", "link to a file outside")
    link("Outside", outside / "dir", "link to a folder outside", folder=True)
    link("Sub/escape.md", "../../outside/secret.md", "'..' in a link target")
    link("self.md", "self.md", "a link to itself")
    link("Sub/up", "..", "a folder link to its ancestor", folder=True)
    link("dangling.md", "nowhere.md", "a broken link")
    os.mkfifo(vault / "pipe.md")
    kinds["pipe.md"] = "a FIFO"
    (vault / "folder.md").mkdir()
    kinds["folder.md"] = "a folder named like a note (ignored), walked as a folder"
    put("bomb.md", merge_bomb(), "a YAML merge-key bomb")
    put("many-tags.md", "---\ntags: [" + ", ".join(f"t{i}" for i in range(640_000))
        + "]\n---\n# Many tags\nfrontmatter of 640k tags\n", "640k frontmatter tags")
    put("some-tags.md", "---\ntags:\n" + "".join(f"  - tag{i}\n" for i in range(15_000))
        + "---\n# Some tags\nfifteen thousand tags\n", "15k tags (under the block limit)")
    put("long-line.md", "# Long line\n\n" + "Z" * 200_000 + "\n", "a 200 kB line, no spaces")
    put("wide16.md", "# Wide sixteen\nutf sixteen ptarmigan\n".encode("utf-16"), "UTF-16 BOM")
    put("wide32.md", "# Wide thirty-two\nutf thirty two\n".encode("utf-32"), "UTF-32 BOM")
    put("latin1.md", "# Crème brûlée\nLatin-1 text\n".encode("latin-1"), "Latin-1")
    put("binary.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00" + os.urandom(2000), "binary data")
    put("empty.md", b"", "an empty file")
    put("blank.md", "  \n\t\n", "whitespace only")
    put("bad-yaml.md", "---\ntitle: [unclosed\n---\nbody of bad yaml\n", "bad YAML")
    put("list-fm.md", "---\n- a\n- b\n---\nbody\n", "frontmatter that is a list")
    put("alias-loop.md", "---\nloop: &x [1, *x]\n---\nself-referencing alias\n", "alias loop")
    with open(put("huge.md", b"", "over max_file_mb"), "r+b") as fh:
        fh.truncate(9 * 1024 * 1024)  # sparse: 9 MB, over the 8 MB limit set for this test
    put("crlf.md", "---\r\ntags: [crlf]\r\n---\r\n# CRLF\r\nwindows line ends\r\n", "CRLF")
    put("Emoji 🎉 \"quotes\" & 'apostrophes'.md", "# Party\nemoji name\n", "odd name")
    put("/".join(f"d{i}" for i in range(60)) + "/deep.md", "# Deep\nsixty levels\n", "deep")
    put("headings.md", "".join(f"# H{i}\ntext {i}\n" for i in range(100)), "100 headings")
    put("links.md", " ".join(f"[[Target {i}]]" for i in range(5_000)), "5k wikilinks")
    put("fence.md", "# Fence\n```\nunclosed #notatag\n", "an unclosed code fence")
    put("hashes.md", "#" * 100_000 + "\n", "100k '#'")
    put("Only properties.md", "---\ntitle: Blade Runner\ndirector: Ridley Scott\n---\n",
        "frontmatter only")
    put(".hidden/ignored.md", "hidden", "hidden folder (ignored)")
    put("draft.md.swp", "swap", "editor swap file (ignored)")
    bad_name = os.fsencode(vault) + b"/bad-\xff-name.md"
    with open(bad_name, "wb") as fh:
        fh.write(b"# Bad name\n")
    kinds[BAD_NAME] = "a file name that is not UTF-8"
    return kinds


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    import daemon_proc

    root = tmp_path_factory.mktemp("hostile")
    kinds = build_hostile_vault(root / "vault", root / "outside")
    home = root / "home"
    os.environ["RAGD_INDEX_MAX_FILE_MB"] = "8"
    try:
        d = DaemonProc(home, root / "vault", root / "daemon.log").start()
    finally:
        del os.environ["RAGD_INDEX_MAX_FILE_MB"]
    daemon_proc.STARTED.remove(d)  # lives for the module, not one test
    timings: list[float] = []
    wait_for(lambda: d.call("status")["state"] in ("indexing", "idle"), 120,
             "the daemon to open its index")
    # While it indexes the hostile vault, searches still answer quickly. Paced, not a tight
    # loop: a search embeds its query on the same two cores as the indexer.
    while d.call("status")["state"] == "indexing":
        t0 = time.perf_counter()
        d.call("search", {"query": "levain flour", "mode": "hybrid"}, timeout=30)
        timings.append(time.perf_counter() - t0)
        time.sleep(0.25)
    try:
        d.wait_idle(300)
        yield {"daemon": d, "kinds": kinds, "home": home, "root": root, "timings": timings}
    finally:
        d.stop()


def catalog_rows(home: Path) -> dict[str, tuple[str, str | None, str]]:
    db = sqlite3.connect(f"file:{resolve_paths({'RAGD_HOME': str(home)}).catalog_path}?mode=ro",
                         uri=True)
    try:
        return {p: (s, c, w) for p, s, c, w in db.execute(
            "SELECT path, status, skip_code, warnings FROM sources")}
    finally:
        db.close()


def test_every_hostile_file_is_indexed_or_skipped_with_a_code(hostile: dict[str, Any]) -> None:
    rows = catalog_rows(hostile["home"])
    kinds = hostile["kinds"]
    looked_at = {rel for rel, kind in kinds.items() if "(ignored)" not in kind}
    assert len(looked_at) >= 25
    missing = {rel: kinds[rel] for rel in looked_at if rel not in rows}
    assert not missing, f"neither indexed nor skipped: {missing}"
    assert not ({".hidden/ignored.md", "draft.md.swp"} & set(rows))
    skipped = {p: c for p, (s, c, _) in rows.items() if s == "skipped"}
    assert skipped == {
        "passwd.md": "outside_root", "secret.md": "outside_root", "Outside": "outside_root",
        "Sub/escape.md": "outside_root", "self.md": "symlink_loop", "Sub/up": "symlink_loop",
        "dangling.md": "broken_link", "pipe.md": "not_regular", "binary.md": "binary",
        "empty.md": "empty", "blank.md": "empty", "huge.md": "too_large",
        BAD_NAME: "unreadable",
    }
    warnings = {p: w for p, (s, _, w) in rows.items() if w}
    assert warnings["bomb.md"] == "frontmatter_too_large"
    assert warnings["many-tags.md"] == "frontmatter_too_large"
    assert warnings["some-tags.md"] == "metadata_truncated"
    assert warnings["latin1.md"] == "invalid_utf8"
    assert rows["wide16.md"][0] == rows["wide32.md"][0] == rows["long-line.md"][0] == "ok"


def test_nothing_outside_the_root_is_ever_found(hostile: dict[str, Any]) -> None:
    d = hostile["daemon"]
    for query in (SECRET_WORD, "nologin", "root:x:0:0", "/bin/bash"):
        for mode in ("keyword", "semantic", "hybrid"):
            answer = d.call("search", {"query": query, "mode": mode, "top_k": 100})
            for r in answer["results"]:
                assert SECRET_WORD not in r["content"] and "nologin" not in r["content"], r
                rel = os.path.relpath(r["source_path"], hostile["root"] / "vault")
                assert not rel.startswith(("passwd", "secret", "Outside", "Sub/", "..")), rel
    cli = subprocess.run([sys.executable, "-m", "ragd.daemon.cli.main", "search", "--mode", "keyword",
                          "nologin"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "RAGD_HOME": str(hostile["home"])})
    assert cli.returncode == 0 and "passwd" not in cli.stdout, cli.stdout + cli.stderr


def test_searches_answer_within_two_seconds_while_it_indexes(hostile: dict[str, Any]) -> None:
    timings = hostile["timings"]
    assert len(timings) >= 3  # searches made while the state said "indexing"
    assert max(timings) < 2.0, timings


def test_hostile_notes_are_searchable_and_results_stay_small(hostile: dict[str, Any]) -> None:
    d = hostile["daemon"]

    def top(query: str, **extra: Any) -> dict[str, Any]:
        results = d.call("search", {"query": query, "top_k": 5, **extra})["results"]
        assert results, query
        return results[0]

    assert top("utf sixteen ptarmigan", mode="keyword")["source_path"].endswith("/wide16.md")
    assert top("Merge bomb body survives", mode="keyword")["source_path"].endswith("/bomb.md")
    tagged = top("fifteen thousand tags", mode="keyword")
    assert tagged["source_path"].endswith("/some-tags.md")
    assert len(tagged["metadata"]["tags"]) == 200
    for query in ("tags", "many tags", "t5000"):
        answer = d.call("search", {"query": query, "top_k": 20})
        assert len(str(answer)) < 200_000, (query, len(str(answer)))
    long = d.call("search", {"query": "Long line", "mode": "keyword", "top_k": 20})
    assert all(len(r["content"]) <= 2048 for r in long["results"])
    assert d.call("status")["state"] == "idle"


def test_requests_with_bad_names_and_types_are_invalid_params_never_internal(
        hostile: dict[str, Any], tmp_path: Path) -> None:
    d = hostile["daemon"]
    (tmp_path / "proj").mkdir()
    bad = [
        ("skipped", {"collection": 5}), ("skipped", {"collection": ".."}),
        ("collection_info", {"collection": ["obsidian"]}),
        ("collection_info", {"collection": "a/b"}),
        ("collection_info", {"collection": "x" * 500}),
        ("index", {"collection": "nul\x00", "path": str(tmp_path / "proj")}),
        ("index", {"collection": "..", "path": str(tmp_path / "proj")}),
        ("index", {"collection": "system", "path": str(tmp_path / "proj")}),
        ("index", {"collection": "project", "path": str(tmp_path / "proj")}),
        ("index", {"collection": "p", "path": "relative/proj"}),
        ("index", {"collection": "p", "path": "/"}),
        ("index", {"collection": "p", "path": "/etc"}),
        ("index", {"collection": "p", "path": str(Path.home())}),
        ("index", {"collection": "p", "path": str(hostile["home"])}),
        ("index", {"rebuild": "everything"}),
        ("index", {"collection": 7}), ("search", {"query": 3}),
        ("search", {"query": "x", "collection": {"a": 1}}), ("search", {"query": "x", "top_k": "9"}),
        ("search", {"query": "x", "tags": "not-a-list"}),
    ]
    for method, params in bad:
        with pytest.raises(RagdError) as err:
            d.call(method, params)
        assert err.value.code in ("invalid_argument", "not_found"), (method, params, err.value)
        assert "internal" not in str(err.value).lower()
    names = {c["name"] for c in d.call("list_collections")}
    assert names == {"obsidian"}


@pytest.mark.timeout(300)
def test_ragd_stop_during_a_walk_of_100000_entries_returns_within_five_seconds(
        ragd_home: Path, tmp_path: Path) -> None:
    big = tmp_path / "big"
    for d in range(100):
        folder = big / f"d{d:03d}"
        folder.mkdir(parents=True)
        for f in range(1000):
            (folder / f"{f}.md").touch()  # empty notes: listed, hashed, skipped one by one
    d = DaemonProc(ragd_home, None, tmp_path / "daemon.log").start()
    queued = d.call("index", {"collection": "big", "path": str(big), "wait": False})
    assert queued["queued"]

    def busy() -> bool:
        st = d.call("status")
        return bool(st.get("current"))

    wait_for(busy, 60, "the writer to start on the big folder")
    started = time.perf_counter()
    stop = subprocess.run([sys.executable, "-m", "ragd.daemon.cli.main", "stop"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "RAGD_HOME": str(ragd_home)})
    elapsed = time.perf_counter() - started
    assert stop.returncode == 0, stop.stderr
    assert elapsed < 5.0, elapsed
    assert d.proc is not None and d.proc.wait(timeout=5) == 0


def test_a_folder_over_the_file_limit_is_refused_with_the_setting_named(
        ragd_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(60):
        (folder / f"{n}.md").write_text(f"note {n}\n", encoding="utf-8")
    os.environ["RAGD_INDEX_MAX_FILES"] = "50"
    try:
        d = DaemonProc(ragd_home, None, tmp_path / "daemon.log").start()
    finally:
        del os.environ["RAGD_INDEX_MAX_FILES"]
    with pytest.raises(RagdError) as err:
        d.call("index", {"collection": "many", "path": str(folder)})
    assert err.value.code == "too_many_files" and "index.max_files" in err.value.hint
    done = d.call("index", {"collection": "many", "path": str(folder), "allow_large": True})
    assert done["indexed"] == 60
    assert d.call("status")["state"] in ("idle", "indexing")
    d.stop()
