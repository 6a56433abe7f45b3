"""A root that moves is checked again (issue 28, row 12; decision 0024): a collection's folder
replaced by a link to a system folder is refused before anything is read, the collection says
why, and what was indexed stays searchable; put back, it is indexed again."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc
from vault_fixtures import write_vault

from ragd.daemon.cli.remote import format_status
from ragd.daemon.errors import RagdError, RootRefused
from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search.engine import SearchRequest
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.name != "posix", reason="builds POSIX links")]


def system_folder() -> Path:
    for candidate in ("/usr/share/doc", "/usr/share", "/usr/lib"):
        if Path(candidate).is_dir():
            return Path(candidate)
    pytest.skip("no system folder with files to link to")


def write_project(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "plan.md").write_text("# Plan\n\nThe quixotrel milestone ships in May.\n",
                                  encoding="utf-8")
    (root / "notes.txt").write_text("Meeting notes about the budget.\n", encoding="utf-8")


def swap_for_link(folder: Path, target: Path) -> Path:
    """Replace ``folder`` by a link to ``target``; return where the folder went."""
    kept = folder.with_name(folder.name + ".orig")
    folder.rename(kept)
    folder.symlink_to(target, target_is_directory=True)
    return kept


def collection(d: DaemonProc, name: str) -> dict[str, Any]:
    return next(c for c in d.call("list_collections") if c["name"] == name)


def test_a_project_swapped_for_a_link_to_a_system_folder_is_refused(ragd_home: Path,
                                                                     tmp_path: Path) -> None:
    target = system_folder()
    vault = write_vault(tmp_path / "vault")
    project = tmp_path / "project"
    write_project(project)
    d = DaemonProc(ragd_home, vault, tmp_path / "daemon.log").start()
    try:
        d.call("index", {"collection": "proj", "path": str(project)}, timeout=120)
        before = collection(d, "proj")
        assert before["source_count"] == 2 and before["stopped"] is None

        kept = swap_for_link(project, target)
        with pytest.raises(RagdError) as refused:
            d.call("index", {"collection": "proj"}, timeout=60)
        assert refused.value.code == "root_refused"
        assert str(target) in str(refused.value) and "system folder" in str(refused.value)

        after = collection(d, "proj")  # what rag_list_collections gives an MCP client
        assert after["source_count"] == 2 and after["chunk_count"] == before["chunk_count"]
        assert "indexing stopped" in after["description"] and str(target) in after["stopped"]
        status = d.call("status")
        assert any(c["name"] == "proj" and c["stopped"] for c in status["collections"])
        assert f"indexing stopped: collection 'proj': its folder {project} now leads to " \
            f"{target}" in format_status(status)  # what `ragd status` prints
        hits = d.call("search", {"query": "quixotrel", "mode": "keyword"})["results"]
        assert [Path(h["source_path"]).name for h in hits] == ["plan.md"]  # kept
        assert str(target) not in str(d.call("skipped", {"collection": "proj"}))

        project.unlink()
        kept.rename(project)
        report = d.call("index", {"collection": "proj"}, timeout=60)
        assert report["errors"] == 0 and collection(d, "proj")["stopped"] is None
    finally:
        d.stop()


@pytest.fixture
def vault_app(tmp_path: Path, real_embedder: Any) -> Iterator[tuple[Path, Any]]:
    vault = write_vault(tmp_path / "vault")
    yield vault, real_embedder


def open_app(vault: Path, embedder: Any) -> App:
    paths = resolve_paths()
    return App(paths, load_config(paths, {"obsidian.vaults": [str(vault)]}), embedder=embedder)


def keyword(app: App, query: str) -> list[str]:
    req = SearchRequest(query=query, mode="keyword", top_k=5, filters=Filters())
    return [r["title"] for r in app.search_engine.search(req)["results"]]


def test_a_vault_swapped_for_a_link_stays_refused_across_a_restart(
        vault_app: tuple[Path, Any], tmp_path: Path) -> None:
    """A configured folder is registered resolved at every start: a swapped link must not
    become the vault's new root there, unchecked."""
    vault, embedder = vault_app
    with open_app(vault, embedder) as app:
        assert app.sync_all()[0].indexed == 8
    target = system_folder()
    kept = swap_for_link(vault, target)
    with open_app(vault, embedder) as app:
        coll = app.collection("obsidian")
        assert coll.root == str(vault)  # as configured, not the link's target
        with pytest.raises(RootRefused):
            app.sync_collection(coll)
        assert app.catalog.collection_stats(coll.id)["source_count"] == 8
        assert keyword(app, "xylofrabic") == ["Xylofrabic protocol"]
        assert app.list_collections()[0]["stopped"]
        assert "obsidian" not in app.watch_roots()

    # A link to a folder the policy accepts is the user's move: indexed from there.
    vault.unlink()
    moved = tmp_path / "synced" / "vault"
    moved.parent.mkdir()
    shutil.move(str(kept), moved)
    (moved / "New.md").write_text("# New\n\nA gravimorph note written after the move.\n",
                                  encoding="utf-8")
    vault.symlink_to(moved, target_is_directory=True)
    with open_app(vault, embedder) as app:
        coll = app.collection("obsidian")
        report = app.sync_collection(coll)
        assert report.indexed == 1 and app.list_collections()[0]["stopped"] is None
        assert keyword(app, "gravimorph") == ["New"]
        assert app.consistency()["ok"]
