"""What may become a collection: names and folders (daemon/settings/policy.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragd.daemon.errors import InvalidArgument
from ragd.daemon.settings.policy import check_name, check_new_name, check_root


@pytest.mark.parametrize("name", ["notes", "My-Project_2", "v1.2", "a", "x" * 64])
def test_good_names_pass(name: str) -> None:
    assert check_name(name) == name == check_new_name(name)


@pytest.mark.parametrize("name", ["..", ".hidden", "a/b", "a\\b", "nul\x00", "x" * 65, "",
                                  " lead", "tab\t", "é", "-dash"])
def test_bad_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        check_name(name)
    assert err.value.param == "collection" and "letters, digits" in err.value.hint
    assert len(str(err.value)) < 300  # a 500-character name is not echoed whole


def test_a_name_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="must be a string"):
        check_name(42)


@pytest.mark.parametrize("name", ["system", "project", "code", "obsidian", "Email", "calibre",
                                  "rss", "all", "obsidian-work", "email-work", "Calibre-2",
                                  "rss-news"])
def test_reserved_names_cannot_be_created(name: str) -> None:
    assert check_name(name) == name  # may still be named, e.g. to re-index "obsidian"
    with pytest.raises(InvalidArgument, match="reserved"):
        check_new_name(name)


@pytest.mark.parametrize(("path", "why"), [
    ("relative/notes", "relative"), ("./notes", "relative"), ("", "relative"),
    ("/", "root of the filesystem"), ("/etc", "system folder"), ("/etc/ssh", "system folder"),
    ("/usr/share/doc", "system folder"), ("/proc/self", "system folder"),
    ("/home", "too broad"), ("/tmp", "too broad"), ("/Users", "too broad"),
])
def test_posix_folders_that_are_refused(path: str, why: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        check_root(path, windows=False, home="/home/ada")
    assert err.value.param == "path" and why in err.value.message and err.value.hint


def test_home_itself_and_ragd_data_are_refused_but_folders_below_home_are_fine(
        tmp_path: Path) -> None:
    data = tmp_path / "home" / ".local" / "share" / "ragd"
    data.mkdir(parents=True)
    home = tmp_path / "home"
    with pytest.raises(InvalidArgument, match="whole home folder"):
        check_root(str(home), home=home, windows=False)
    with pytest.raises(InvalidArgument, match="inside ragd's own data"):
        check_root(str(data / "whoosh"), home=home, guarded=[data], windows=False)
    with pytest.raises(InvalidArgument, match="holds ragd's own data"):
        check_root(str(home / ".local"), home=home, guarded=[data], windows=False)
    (home / "Documents").mkdir()
    assert check_root(str(home / "Documents"), home=home, guarded=[data],
                      windows=False) == str(home / "Documents")


def test_a_link_to_a_system_folder_is_refused_by_what_it_resolves_to(tmp_path: Path) -> None:
    (tmp_path / "innocent").symlink_to("/etc", target_is_directory=True)
    with pytest.raises(InvalidArgument, match="system folder"):
        check_root(str(tmp_path / "innocent"), windows=False)
    with pytest.raises(InvalidArgument, match="system folder"):
        check_root(str(tmp_path.joinpath(*[".."] * 30, "etc")), windows=False)


@pytest.mark.parametrize(("path", "why"), [
    ("notes", "relative"), ("C:notes", "relative"), ("C:\\", "root of the filesystem"),
    ("D:\\", "root of the filesystem"), ("C:\\Windows\\System32", "system folder"),
    ("c:\\program files\\App", "system folder"), ("C:\\ProgramData", "system folder"),
    ("C:\\Users", "too broad"), ("C:\\Users\\ada", "whole home folder"),
])
def test_windows_folders_that_are_refused(path: str, why: str) -> None:
    env = {"SystemDrive": "C:", "SystemRoot": "C:\\Windows", "ProgramFiles": "C:\\Program Files",
           "ProgramData": "C:\\ProgramData"}
    with pytest.raises(InvalidArgument) as err:
        check_root(path, windows=True, home="C:\\Users\\ada", env=env)
    assert why in err.value.message


def test_windows_project_folders_pass() -> None:
    assert check_root("D:\\Work\\Notes", windows=True, home="C:\\Users\\ada",
                      env={}) == "D:\\Work\\Notes"
    assert check_root("C:\\Users\\ada\\Documents", windows=True, home="C:\\Users\\ada",
                      env={}) == "C:\\Users\\ada\\Documents"
