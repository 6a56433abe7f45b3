"""The containment rule: nothing outside a collection's resolved root is ever listed or read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragd.daemon.errors import Interrupted, TooManyFiles
from ragd.daemon.models import Skip
from ragd.daemon.sources import containment
from ragd.daemon.sources.base import read_source_bytes, sha256_file
from ragd.daemon.sources.files import walk_vault
from ragd.daemon.sources.vault import read_note

posix_only = pytest.mark.skipif(os.name != "posix", reason="needs POSIX symlinks")
MB = 1 << 20
SECRET = "zanzibarquokka secret outside the vault\n"


def write(root: Path, rel: str, text: str = "A note.\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """A vault and, beside it, a folder with a secret that must never be read."""
    vault, outside = tmp_path / "vault", tmp_path / "outside"
    write(vault, "own.md")
    write(outside, "secret.md", SECRET)
    write(outside, "deep/more.md", SECRET)
    return vault, outside


def listing(vault: Path) -> tuple[list[str], dict[str, str]]:
    result = walk_vault(vault)
    return [f.path for f in result.files], {rel: s.code for rel, s in result.skipped}


@posix_only
def test_a_link_to_a_system_file_is_skipped_and_never_read(world: tuple[Path, Path]) -> None:
    vault, _ = world
    (vault / "passwd.md").symlink_to("/etc/passwd")

    files, skipped = listing(vault)

    assert files == ["own.md"]
    assert skipped == {"passwd.md": "outside_root"}
    result = read_note(vault, "passwd.md", max_bytes=MB)
    assert isinstance(result, Skip) and result.code == "outside_root"
    assert sha256_file(vault, "passwd.md") is None


@posix_only
def test_links_to_a_file_or_folder_outside_are_skipped(world: tuple[Path, Path]) -> None:
    vault, outside = world
    (vault / "secret.md").symlink_to(outside / "secret.md")
    (vault / "Shared").symlink_to(outside, target_is_directory=True)
    (vault / "dotdot.md").symlink_to("../outside/secret.md")  # '..' in the target
    write(vault, "sub/inner.md")
    (vault / "sub" / "up.md").symlink_to("../../outside/deep/more.md")

    files, skipped = listing(vault)

    assert files == ["own.md", "sub/inner.md"]
    assert skipped == {"Shared": "outside_root", "dotdot.md": "outside_root",
                       "secret.md": "outside_root", "sub/up.md": "outside_root"}
    for rel in ("secret.md", "dotdot.md", "Shared/secret.md", "sub/up.md"):
        got = read_source_bytes(vault, rel, MB)
        assert isinstance(got, Skip) and got.code == "outside_root", rel


@posix_only
def test_links_inside_the_root_are_followed_once(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault, "Notes/a.md")
    write(vault, ".archive/old.md")  # hidden: reachable only through the link below
    write(vault, ".private/diary.md")
    (vault / "alias-of-a.md").symlink_to("Notes/a.md")  # already listed as Notes/a.md
    (vault / "Mirror").symlink_to("Notes", target_is_directory=True)  # ditto, a folder
    (vault / "Archive").symlink_to(".archive", target_is_directory=True)
    (vault / "diary.md").symlink_to(".private/diary.md")
    (vault / "Notes" / "sibling.md").symlink_to("../diary.md")  # a link to a link

    files, skipped = listing(vault)

    assert files == ["Archive/old.md", "Notes/a.md", "diary.md"]
    assert skipped == {}
    assert read_source_bytes(vault, "Archive/old.md", MB) == b"A note.\n"


@posix_only
def test_a_root_reached_through_a_link_is_resolved(world: tuple[Path, Path]) -> None:
    vault, outside = world
    alias = vault.parent / "vault-alias"
    alias.symlink_to(vault, target_is_directory=True)
    (vault / "Parent").symlink_to(outside / "deep", target_is_directory=True)

    files, skipped = listing(alias)

    assert files == ["own.md"]
    assert skipped == {"Parent": "outside_root"}
    assert read_source_bytes(alias, "own.md", MB) == b"A note.\n"
    # A watch hint may name a file below a linked parent folder: still outside.
    got = read_source_bytes(alias, "Parent/more.md", MB)
    assert isinstance(got, Skip) and got.code == "outside_root"


@posix_only
def test_a_file_swapped_for_a_link_between_walk_and_read_is_refused(
        world: tuple[Path, Path]) -> None:
    vault, outside = world
    write(vault, "Later/note.md", "harmless\n")
    assert "Later/note.md" in listing(vault)[0]

    (vault / "Later" / "note.md").unlink()
    (vault / "Later" / "note.md").symlink_to(outside / "secret.md")

    got = read_source_bytes(vault, "Later/note.md", MB)
    assert isinstance(got, Skip) and got.code == "outside_root"
    assert sha256_file(vault, "Later/note.md") is None


@posix_only
def test_a_parent_swapped_for_a_link_during_the_open_is_caught_after_it(
        world: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The race the re-check exists for: the path is checked, then a parent folder becomes a
    link to outside before the open. The descriptor is checked against the path again."""
    vault, outside = world
    write(vault, "deep/more.md", "inside\n")
    real_open = os.open

    def swapping_open(path: str, flags: int, *args: int) -> int:
        if path.endswith("more.md"):
            os.rename(vault / "deep", vault / "deep-gone")
            (vault / "deep").symlink_to(outside / "deep", target_is_directory=True)
        return real_open(path, flags, *args)

    monkeypatch.setattr(containment.os, "open", swapping_open)
    got = read_source_bytes(vault, "deep/more.md", MB)

    assert isinstance(got, Skip) and got.code == "outside_root"


def test_inside_compares_whole_path_components() -> None:
    assert containment.inside("/a/vault", "/a/vault/x.md")
    assert containment.inside("/a/vault", "/a/vault")
    assert not containment.inside("/a/vault", "/a/vault-other/x.md")
    assert not containment.inside("/a/vault", "/a")


def test_a_walk_stops_when_asked(tmp_path: Path) -> None:
    for d in range(20):
        for f in range(100):
            (tmp_path / f"d{d}").mkdir(exist_ok=True)
            (tmp_path / f"d{d}" / f"{f}.md").touch()
    calls = []

    def stop_at_the_second_look() -> bool:
        calls.append(1)
        return len(calls) > 1

    with pytest.raises(Interrupted):
        walk_vault(tmp_path, should_stop=stop_at_the_second_look)
    assert len(walk_vault(tmp_path, should_stop=lambda: False).files) == 2000


def test_a_walk_over_the_entry_limit_names_the_limit_and_the_setting(tmp_path: Path) -> None:
    for n in range(30):
        (tmp_path / f"{n}.md").touch()

    with pytest.raises(TooManyFiles) as err:
        walk_vault(tmp_path, max_entries=25)

    assert "25" in err.value.message and "index.max_files" in err.value.hint
    assert "--allow-large" in err.value.hint
    assert len(walk_vault(tmp_path, max_entries=30).files) == 30
