"""The parts under the note writes' steps (decision 0045), on real files in ``tmp_path``: names,
locks, the exclusive create and rename, whole-or-nothing loads and the near-miss budget. The
same behaviours through a daemon and MCP clients: tests/mcp_bridge/test_note_tools_races.py and
test_note_tools_bounds.py."""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

import pytest

from ragd.daemon.errors import PathRefused
from ragd.daemon.notes import exclusive, names, nearmiss, writing
from ragd.daemon.notes.locks import PathLocks, lock_key


@pytest.mark.parametrize(("name", "code"), [
    ("é" * 128 + ".md", "name_too_long"),  # 259 bytes of UTF-8 in 131 characters
    ("con", "reserved_name"), ("Con.md", "reserved_name"), ("COM9.tar.gz", "reserved_name"),
    ("lpt¹.md", "reserved_name"), ("CONIN$.md", "reserved_name"), ("nul .md", "reserved_name"),
    ("a<b.md", "bad_character"), ('say "hi".md', "bad_character"), ("x*.md", "bad_character"),
    ("tab\there.md", "control_character"), ("del\x7f.md", "control_character"),
    ("exe\u202egnp.md", "format_character"), ("\u2067x.md", "format_character"),
    ("zero\u200bwidth.md", "format_character"), ("bom\ufeff.md", "format_character"),
    ("folder.", "trailing_dot_or_space"), ("folder ", "trailing_dot_or_space"),
])
def test_names_no_common_file_system_holds_are_refused(name: str, code: str) -> None:
    with pytest.raises(PathRefused) as refused:
        names.check_component(name, "path")
    assert refused.value.code == code and refused.value.param == "path"


@pytest.mark.parametrize("name", ["console.md", "Plan (v2).md", "ZWNJ می\u200cخواهم.md",
                                  "Family 👨\u200d👩\u200d👧.md", "é" * 126 + ".md",
                                  "COM10.md", "auxiliary.md"])
def test_ordinary_names_pass(name: str) -> None:
    names.check_component(name, "path")


def test_only_the_names_a_write_creates_are_checked(tmp_path: Path) -> None:
    (tmp_path / "Old folder.").mkdir()  # made on Linux long ago: the user's own
    names.check_new(str(tmp_path), "Old folder./new.md", "path")
    with pytest.raises(PathRefused, match="Windows drops"):
        names.check_new(str(tmp_path), "Old folder./new folder./a.md", "path")


def test_keys_fold_case_and_unicode_form() -> None:
    assert lock_key("/v/Café.md") == lock_key("/v/CAFE\u0301.MD")


def test_crossed_pairs_never_deadlock_and_one_path_has_one_holder() -> None:
    locks = PathLocks()
    inside = {"a": 0, "most": 0}
    guard = threading.Lock()

    def step(paths: list[str]) -> None:
        for _ in range(200):
            with locks.hold(paths):
                with guard:
                    inside["a"] += 1
                    inside["most"] = max(inside["most"], inside["a"])
                with guard:
                    inside["a"] -= 1

    threads = [threading.Thread(target=step, args=(p,)) for p in
               (["/v/a", "/v/b"], ["/v/b", "/v/a"], ["/v/A"], ["/v/b"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not any(t.is_alive() for t in threads)
    assert inside["most"] == 1 and locks.held() == 0  # all share a or b: one at a time


def _target(root: Path, rel: str) -> writing.Target:
    return writing.target(str(root), rel, "path", creating=True)


def test_create_never_replaces_a_file_made_meanwhile(tmp_path: Path) -> None:
    t = _target(tmp_path, "new.md")
    (tmp_path / "new.md").write_text("Obsidian saved this first", encoding="utf-8")
    with pytest.raises(PathRefused) as refused:
        exclusive.create(t, b"ragd's text")
    assert refused.value.code == "exists"
    assert (tmp_path / "new.md").read_text(encoding="utf-8") == "Obsidian saved this first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.md"]  # no temporary left


def test_without_hard_links_create_and_move_stay_exclusive(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    def no_links(src: str, dst: str) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    t = _target(tmp_path, "a.md")
    exclusive.create(t, b"first")
    with pytest.raises(PathRefused, match="already exists"):
        exclusive.create(t, b"second")
    (tmp_path / "b.md").write_bytes(b"b")
    with pytest.raises(PathRefused) as taken:
        exclusive.move(t, writing.target(str(tmp_path), "b.md", "new_path"))
    assert taken.value.code == "exists"
    exclusive.move(t, _target(tmp_path, "c.md"))
    with pytest.raises(PathRefused) as gone:
        exclusive.move(t, _target(tmp_path, "d.md"))
    assert gone.value.code == "not_found"
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == {"b.md": b"b",
                                                                    "c.md": b"first"}


def test_new_files_get_the_umask_mode(tmp_path: Path) -> None:
    mask = os.umask(0o027)
    try:
        writing.umask.cache_clear()
        exclusive.create(_target(tmp_path, "n.md"), b"x")
    finally:
        os.umask(mask)
        writing.umask.cache_clear()
    assert (tmp_path / "n.md").stat().st_mode & 0o777 == 0o640


def test_a_note_over_the_limit_is_refused_never_cut(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writing, "MAX_WRITE_BYTES", 1000)
    (tmp_path / "big.md").write_bytes(b"x" * 1001)
    t = writing.target(str(tmp_path), "big.md", "path")
    with pytest.raises(PathRefused) as refused:
        writing.current(t)
    assert refused.value.code == "too_large" and "1,000" in str(refused.value)
    assert writing.disk_etag(t.real) is not None  # the etag of any size is still known


def test_the_near_miss_is_found_and_bounded() -> None:
    lines = [f"Entry {i}: walked {i % 7} km by the river, {i % 11} herons." for i in
             range(100_000)]
    text = "\n".join(lines)
    typo = "\n".join(lines[60_000:60_040]).replace("herons", "herrons", 1)
    t0 = time.monotonic()
    hint = nearmiss.near_miss(text, typo)
    assert "line 60001" in hint and time.monotonic() - t0 < 1.0
    t0 = time.monotonic()
    hint = nearmiss.near_miss("ab " * 2_000_000, "ab " * 20_000 + "c", budget_s=0.2)
    assert time.monotonic() - t0 < 1.0
    assert nearmiss.near_miss("First line\nsecond LINE", "Second line").startswith(
        " It occurs at line 2 with other letter case")
