"""The sample vault (issue 27 item 6, decision 0032): on a machine with no vault, `make run`
indexes a getting-started guide shipped in the package and says so; a vault named or found
later replaces it."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc, wait_for
from feed_fixtures import CountingEmbedder

from ragd.daemon.ipc.discovery import find_daemon
from ragd.daemon.runtime import sample
from ragd.daemon.runtime.app import App
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths

REPO = Path(__file__).resolve().parents[2]
PACKAGED = REPO / "daemon" / "sample_vault"


@pytest.fixture
def empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with no Obsidian, no Documents folder and no XDG settings."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for key in list(os.environ):
        if key.startswith("XDG_"):
            monkeypatch.delenv(key)
    return home


def test_the_packaged_sample_has_notes_links_tags_and_a_pdf() -> None:
    files = sorted(p.relative_to(PACKAGED).as_posix() for p in PACKAGED.rglob("*")
                   if p.is_file())
    notes = [f for f in files if f.endswith(".md")]
    assert len(notes) >= 5 and "Attachments/ragd-cheatsheet.pdf" in files, files
    text = "\n".join((PACKAGED / n).read_text(encoding="utf-8") for n in notes)
    assert text.count("[[") >= 10 and "tags:" in text and "#sample" in text
    # Every wikilink names a note or file of the sample.
    stems = {Path(f).stem for f in files} | {Path(f).name for f in files}
    import re

    for target in re.findall(r"\[\[([^\]|#]+)", text):
        assert target in stems, f"[[{target}]] leads nowhere"
    assert sum((PACKAGED / f).stat().st_size for f in files) < 20_000  # small


def test_the_pdf_is_what_the_script_writes() -> None:
    spec = importlib.util.spec_from_file_location("sample_pdf", REPO / "packaging" /
                                                  "sample_pdf.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.pdf_bytes() == (PACKAGED / "Attachments" / "ragd-cheatsheet.pdf").read_bytes()


def test_the_wheel_ships_every_file_of_the_sample() -> None:
    """pyproject's package-data patterns cover each file (the wheel test of issue 27 item 3
    builds the wheel itself)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["ragd.daemon"]
    shipped = {p for pattern in patterns for p in (REPO / "daemon").glob(pattern)}
    for path in PACKAGED.rglob("*"):
        if path.is_file():
            assert path in shipped, f"{path.relative_to(REPO)} is not shipped"


def test_install_copies_once_and_keeps_the_users_edits(tmp_path: Path) -> None:
    dest = sample.install(tmp_path / "copy")
    welcome = dest / "Welcome to ragd.md"
    assert (dest / "Attachments" / "ragd-cheatsheet.pdf").is_file()
    welcome.write_text("# Mine now\n", encoding="utf-8")
    (dest / "Search" / "Sources.md").unlink()
    sample.install(dest)
    assert welcome.read_text(encoding="utf-8") == "# Mine now\n"
    assert (dest / "Search" / "Sources.md").is_file()  # a deleted note comes back


def open_app(overrides: dict[str, Any] | None = None, *, sample_wanted: bool) -> App:
    paths = resolve_paths()
    return App(paths, load_config(paths, overrides), embedder=CountingEmbedder(),
               sample=sample_wanted)


def test_nothing_to_index_registers_the_sample_and_a_vault_found_later_replaces_it(
        empty_home: Path, tmp_path: Path) -> None:
    with open_app(sample_wanted=False) as app:  # the daemon, the bridge: never unasked
        assert app.catalog.collections() == [] and app.sample_vault is None
    with open_app(sample_wanted=True) as app:  # `ragd index` with nothing to index
        folder = empty_home / "Documents" / sample.FOLDER_NAME
        assert app.sample_vault == folder.resolve()
        assert [c.name for c in app.catalog.collections()] == ["obsidian"]
        assert (folder / "Welcome to ragd.md").is_file()
    with open_app(sample_wanted=False) as app:  # the daemon keeps it, as any vault before
        assert app.sample_vault == folder.resolve()
    # Obsidian lists a vault now: it replaces the sample (a real vault would stay).
    vault = tmp_path / "Real Vault"
    vault.mkdir()
    (vault / "note.md").write_text("# Real\n", encoding="utf-8")
    obsidian = empty_home / ".config" / "obsidian" / "obsidian.json"
    obsidian.parent.mkdir(parents=True)
    obsidian.write_text(json.dumps({"vaults": {"a": {"path": str(vault), "ts": 1,
                                                     "open": True}}}), encoding="utf-8")
    with open_app(sample_wanted=True) as app:
        assert app.sample_vault is None
        assert app.catalog.collection("obsidian").root == str(vault.resolve())


def test_a_named_vault_or_other_sources_mean_no_sample(empty_home: Path,
                                                       tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    with open_app({"obsidian.vaults": [str(project)]}, sample_wanted=True) as app:
        assert app.sample_vault is None
        assert [c.root for c in app.catalog.collections()] == [str(project.resolve())]
    with open_app({"obsidian.enabled": False}, sample_wanted=True) as app:
        assert app.sample_vault is None
    assert not (empty_home / "Documents").exists()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None or sys.platform == "win32",
                    reason="needs make and a POSIX shell")
def test_make_run_with_no_vault_serves_the_sample(ragd_home: Path, empty_home: Path,
                                                  tmp_path: Path) -> None:
    """The Makefile's own `run` recipe (its `setup` taken as done: this venv), in an empty
    home: the daemon answers a search over the sample vault, its PDF included."""
    log = tmp_path / "make-run.log"
    venv = Path(sys.executable).parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    with open(log, "wb") as out:
        proc = subprocess.Popen(["make", "-s", "-C", str(REPO), "-o", "setup", "run",
                                 f"VENV={venv}"], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    d = DaemonProc(ragd_home, None, log)
    d.proc = proc  # type: ignore[assignment]
    import daemon_proc

    daemon_proc.STARTED.append(d)
    try:
        wait_for(lambda: find_daemon(resolve_paths({"RAGD_HOME": str(ragd_home)})), 240,
                 "make run to reach a running daemon")
        status = d.wait_idle(timeout=120)
        folder = (empty_home / "Documents" / sample.FOLDER_NAME).resolve()
        assert [c["name"] for c in status["collections"]] == ["obsidian"]
        info = d.call("collection_info", {"collection": "obsidian"})
        assert info["root"] == str(folder) and info["source_count"] == 7, info
        hits = d.call("search", {"query": "how are keyword and semantic results fused",
                                 "top_k": 3})["results"]
        assert hits and hits[0]["title"] == "How search works", hits
        pdf = d.call("search", {"query": "command cheat sheet", "mode": "keyword",
                                "source_type": "pdf", "top_k": 3})["results"]
        assert pdf and pdf[0]["source_path"].endswith("ragd-cheatsheet.pdf"), pdf
        said = log.read_text(encoding="utf-8", errors="replace")
        assert "no vault found, so this indexes ragd's sample vault" in said, said
        assert "serving the sample vault" in said, said
    finally:
        d.stop()


def test_the_ready_line_says_the_sample_is_served() -> None:
    from ragd.daemon.cli.remote import ready_line

    info = {"version": "0.1.0", "pid": 42, "socket": "/s", "seconds": 1.0, "fatal": None,
            "phase": None, "log": "/l", "sample_vault": "/home/a/Documents/ragd-sample-vault"}
    assert "serving the sample vault at /home/a/Documents/ragd-sample-vault" in ready_line(info)
    assert "sample" not in ready_line({**info, "sample_vault": None})


def test_the_sample_vault_says_what_the_code_does() -> None:
    """The notes a newcomer reads first match the code (issue 40): the tools a client gets by
    default, the default fusion, and an install that does not claim a published package."""
    import re

    from ragd.daemon.settings.config import McpConfig, SearchConfig
    from ragd.mcp_bridge.server import choose_tools, offered_toolsets

    connect = (PACKAGED / "Getting started" / "Connect an AI client.md").read_text("utf-8")
    named = set(re.findall(r"`(rag_\w+)`", connect))
    defaults = McpConfig()
    assert named == {t.name for t in choose_tools(offered_toolsets(defaults), defaults)}
    assert SearchConfig().fusion == "zscore"
    search = (PACKAGED / "Search" / "How search works.md").read_text("utf-8")
    assert "z-score" in search and "reciprocal rank" not in search.lower()
    install = (PACKAGED / "Getting started" / "Install.md").read_text("utf-8")
    assert "make wheel" in install and "not on PyPI" in install
