"""Tests of the Obsidian vault source: listing (walk_vault), reading/parsing notes, URIs."""

from __future__ import annotations

import collections
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import shared_data

from ragd.daemon.errors import InvalidArgument, NotFound
from ragd.daemon.models import Document, Skip
from ragd.daemon.skips import SKIP_CODES, WARNING_CODES
from ragd.daemon.sources.files import walk_vault
from ragd.daemon.sources.vault import obsidian_uri, parse_note, read_note

MB = 1024 * 1024
AWKWARD = "🗂️ Plugins \"quoted\" & it's.md"
posix_only = pytest.mark.skipif(os.name != "posix", reason="needs POSIX symlinks, FIFOs and modes")


def write(root: Path, rel: str, text: str | bytes = "Some text.\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def paths(root: Path, **kwargs: Any) -> list[str]:
    return [f.path for f in walk_vault(root, **kwargs).files]


def skips(root: Path) -> dict[str, str]:
    return {rel: skip.code for rel, skip in walk_vault(root).skipped}


def code(result: Document | Skip) -> str:
    """The skip code, or "document" when the note was parsed."""
    return result.code if isinstance(result, Skip) else "document"


def doc(text: str | bytes, rel: str = "Folder/Note.md") -> Document:
    result = parse_note(rel, text.encode("utf-8") if isinstance(text, str) else text)
    assert isinstance(result, Document), result
    return result


# ------------------------------------------------------------------------------ walk: listing


def test_walk_lists_notes_in_nested_folders_sorted_with_posix_paths_and_stat(tmp_path: Path) -> None:
    write(tmp_path, "b.md")
    write(tmp_path, "a/z.md")
    write(tmp_path, "a/b/c/deep.md", "x" * 123)
    write(tmp_path, "UPPER.MD")
    write(tmp_path, "Mixed.Md")
    write(tmp_path, "image.png", b"\x89PNG")
    write(tmp_path, "notes.txt")

    result = walk_vault(tmp_path)

    assert [f.path for f in result.files] == ["Mixed.Md", "UPPER.MD", "a/b/c/deep.md", "a/z.md", "b.md"]
    deep = next(f for f in result.files if f.path == "a/b/c/deep.md")
    st = os.stat(tmp_path / "a" / "b" / "c" / "deep.md")
    assert (deep.size, deep.mtime_ns) == (123, st.st_mtime_ns)
    assert result.skipped == []


def test_walk_custom_suffixes_match_case_insensitively(tmp_path: Path) -> None:
    write(tmp_path, "a.md")
    write(tmp_path, "b.TXT")
    write(tmp_path, "c.pdf")
    assert paths(tmp_path, suffixes=(".txt", ".MD")) == ["a.md", "b.TXT"]


def test_walk_ignores_excluded_and_hidden_folders_and_files(tmp_path: Path) -> None:
    for rel in [
        ".obsidian/workspace.md", ".trash/deleted.md", ".git/x.md", "node_modules/pkg/readme.md",
        ".hidden/note.md", ".hidden-note.md", "a/.note.md.XXXX", "a/node_modules/n.md",
        "Templates/Private/secret.md",
    ]:
        write(tmp_path, rel)
    write(tmp_path, "a/kept.md")
    write(tmp_path, "Templates/kept.md")

    assert paths(tmp_path) == ["Templates/Private/secret.md", "Templates/kept.md", "a/kept.md"]
    # exclude takes names and vault-relative paths; it replaces the defaults.
    assert paths(tmp_path, exclude=("Templates/Private", "kept.md")) == [
        "a/node_modules/n.md", "node_modules/pkg/readme.md",
    ]


def test_walk_ignores_editor_temp_and_backup_files(tmp_path: Path) -> None:
    for name in ["note.md~", ".note.md.swp", "note.swp", "note.swo", "draft.tmp", "#note.md#",
                 ".#note.md", "download.md.crdownload", "x.MD~"]:
        write(tmp_path, name)
    write(tmp_path, "note.md")

    assert paths(tmp_path) == ["note.md"]
    # Even when the suffixes would take them, temp files stay out.
    assert paths(tmp_path, suffixes=(".md", ".swp", ".swo", ".tmp", "~", "#")) == ["note.md"]


def test_walk_and_read_names_with_emoji_quotes_ampersands_commas_apostrophes(tmp_path: Path) -> None:
    names = [f"01 - Community/{AWKWARD}", "Commas, and more.md", "Rock'n'roll & Jazz/naïve résumé.md"]
    for name in names:
        write(tmp_path, name, f"# {name}\n")

    assert paths(tmp_path) == sorted(names)
    for name in names:
        note = read_note(tmp_path, name, max_bytes=MB)
        assert isinstance(note, Document)
        assert note.text == f"# {name}\n"
    assert doc("x", f"01 - Community/{AWKWARD}").title == AWKWARD[:-3]


@posix_only
def test_colons_and_backslashes_are_ordinary_characters_in_posix_names(tmp_path: Path) -> None:
    names = ["Meeting: notes.md", "back\\slash.md"]
    for name in names:
        write(tmp_path, name, "text")
    assert paths(tmp_path) == sorted(names)
    assert all(isinstance(read_note(tmp_path, n, max_bytes=MB), Document) for n in names)


def test_walk_treats_a_directory_named_like_a_note_as_a_directory(tmp_path: Path) -> None:
    write(tmp_path, "x.md/inner.md")
    result = walk_vault(tmp_path)
    assert [f.path for f in result.files] == ["x.md/inner.md"]
    assert result.skipped == []


def test_walk_missing_or_file_root_raises_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        walk_vault(tmp_path / "nope")
    with pytest.raises(NotFound):
        walk_vault(write(tmp_path, "file.md"))


# ----------------------------------------------------------------------------- walk: symlinks


@posix_only
def test_walk_follows_links_inside_the_root_once_and_skips_those_outside(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(tmp_path, "outside/shared.md")
    write(vault, "own.md")
    (vault / "linked").symlink_to(tmp_path / "outside", target_is_directory=True)
    (vault / "note-link.md").symlink_to(vault / "own.md")  # the same note: listed once

    assert paths(vault) == ["own.md"]
    assert skips(vault) == {"linked": "outside_root"}


@posix_only
def test_walk_records_directory_symlink_loops_and_goes_on(tmp_path: Path) -> None:
    write(tmp_path, "a/note.md")
    write(tmp_path, "b/note.md")
    (tmp_path / "a" / "up").symlink_to("..", target_is_directory=True)
    (tmp_path / "self").symlink_to(".", target_is_directory=True)

    result = walk_vault(tmp_path)

    assert [f.path for f in result.files] == ["a/note.md", "b/note.md"]
    assert {rel: s.code for rel, s in result.skipped} == {"a/up": "symlink_loop", "self": "symlink_loop"}


@posix_only
def test_walk_records_file_symlink_loops_and_broken_links(tmp_path: Path) -> None:
    write(tmp_path, "ok.md")
    (tmp_path / "ping.md").symlink_to("pong.md")
    (tmp_path / "pong.md").symlink_to("ping.md")
    (tmp_path / "me.md").symlink_to("me.md")
    (tmp_path / "dangling.md").symlink_to("missing.md")
    (tmp_path / "Projects").symlink_to("/nonexistent/drive/Projects")  # probably a folder
    (tmp_path / "photo.png").symlink_to("missing.png")  # not a note: not worth a report

    assert paths(tmp_path) == ["ok.md"]
    assert skips(tmp_path) == {
        "Projects": "broken_link",
        "dangling.md": "broken_link",
        "me.md": "symlink_loop",
        "ping.md": "symlink_loop",
        "pong.md": "symlink_loop",
    }
    assert code(read_note(tmp_path, "dangling.md", max_bytes=MB)) == "broken_link"
    assert code(read_note(tmp_path, "me.md", max_bytes=MB)) == "symlink_loop"


# ------------------------------------------------------------------------ walk: special files


@posix_only
@pytest.mark.timeout(20)  # opening a FIFO would block forever
def test_fifo_and_socket_named_like_notes_are_not_regular_and_never_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "ok.md")
    os.mkfifo(tmp_path / "pipe.md")
    (tmp_path / "pipe-link.md").symlink_to("pipe.md")
    os.mkfifo(tmp_path / "pipe.txt")  # not a note name: ignored
    monkeypatch.chdir(tmp_path)  # a relative socket path stays under the AF_UNIX length limit
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind("sock.md")
        result = walk_vault(tmp_path)
    finally:
        sock.close()

    assert [f.path for f in result.files] == ["ok.md"]
    assert {rel: s.code for rel, s in result.skipped} == {
        "pipe-link.md": "not_regular", "pipe.md": "not_regular", "sock.md": "not_regular",
    }
    assert read_note(tmp_path, "pipe.md", max_bytes=MB) == Skip("not_regular", "not a regular file")


def _run_unprivileged(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a forked child that drops to uid/gid 65534 when we are root; return its
    JSON-encoded result. Root ignores file modes, so only an unprivileged process can show
    what a permission error does."""
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        status = 1
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            with os.fdopen(write_end, "w", encoding="utf-8") as out:
                json.dump(fn(), out)
            status = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as inp:
        payload = inp.read()
    _, wait_status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(wait_status) == 0, "child failed (traceback on stderr)"
    return json.loads(payload)


@pytest.fixture
def world_tmp() -> Iterator[Path]:
    """A temp folder that uid 65534 can traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="ragd-vault-test-"))
    path.chmod(0o755)
    yield path
    for dirpath, dirnames, _ in os.walk(path):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
    shutil.rmtree(path)


@posix_only
def test_walk_records_an_unreadable_directory_and_goes_on(world_tmp: Path) -> None:
    write(world_tmp, "a/one.md")
    write(world_tmp, "locked/inside/hidden.md")
    write(world_tmp, "z/two.md")
    (world_tmp / "locked").chmod(0)

    def walk() -> dict[str, Any]:
        result = walk_vault(world_tmp)
        return {"files": [f.path for f in result.files], "euid": os.geteuid(),
                "skipped": [[rel, s.code] for rel, s in result.skipped]}

    assert _run_unprivileged(walk) == {
        "files": ["a/one.md", "z/two.md"], "skipped": [["locked", "unreadable"]],
        "euid": 65534 if os.geteuid() == 0 else os.geteuid(),
    }


@posix_only
def test_read_note_of_an_unreadable_file_is_unreadable(world_tmp: Path) -> None:
    write(world_tmp, "secret.md").chmod(0)
    write(world_tmp, "open.md", "hello")

    def read() -> list[Any]:
        listed = [f.path for f in walk_vault(world_tmp).files]  # listing needs no read access
        secret = read_note(world_tmp, "secret.md", max_bytes=MB)
        other = read_note(world_tmp, "open.md", max_bytes=MB)
        return [listed, secret.code if isinstance(secret, Skip) else "read!", type(other).__name__]

    assert _run_unprivileged(read) == [["open.md", "secret.md"], "unreadable", "Document"]


# --------------------------------------------------------------------------------- read_note


_opened: list[str] = []
_watched: set[str] = set()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    path = args[0] if event == "open" and args else None
    if isinstance(path, str | bytes | os.PathLike) and os.fsdecode(path) in _watched:
        _opened.append(os.fsdecode(path))


sys.addaudithook(_audit)  # audit hooks cannot be removed; this one only watches listed paths


def test_too_large_is_decided_by_stat_without_opening_the_file(tmp_path: Path) -> None:
    big = tmp_path / "big.md"
    with big.open("wb") as fh:
        fh.truncate(50 * MB)  # sparse: instant, and takes no disk
    small = write(tmp_path, "small.md", "x" * 100)
    _watched.update({str(big), str(small)})

    result = read_note(tmp_path, "big.md", max_bytes=10 * MB)
    at_limit = read_note(tmp_path, "small.md", max_bytes=100)
    over = read_note(tmp_path, "small.md", max_bytes=99)

    assert isinstance(result, Skip) and result.code == "too_large"
    assert "52,428,800" in result.detail
    assert isinstance(at_limit, Document)
    assert isinstance(over, Skip) and over.code == "too_large"
    assert _opened == [str(small)]  # opened once (at the limit), the big one never


def test_read_note_of_a_missing_file_is_vanished_and_a_directory_not_regular(tmp_path: Path) -> None:
    (tmp_path / "dir.md").mkdir()
    assert read_note(tmp_path, "gone.md", max_bytes=MB) == Skip(
        "vanished", "file disappeared before it could be read"
    )
    assert code(read_note(tmp_path, "gone/deeper.md", max_bytes=MB)) == "vanished"
    assert code(read_note(tmp_path, "dir.md", max_bytes=MB)) == "not_regular"


@pytest.mark.parametrize("rel", ["../outside.md", "/etc/passwd", "a/../../x.md", ""])
def test_read_note_refuses_paths_outside_the_vault(tmp_path: Path, rel: str) -> None:
    with pytest.raises(InvalidArgument):
        read_note(tmp_path, rel, max_bytes=MB)


def test_empty_and_whitespace_only_notes_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, "zero.md", b"")
    assert read_note(tmp_path, "zero.md", max_bytes=MB) == Skip("empty", "file has zero bytes")
    for data in [b" \n\t\r\n", b"\xef\xbb\xbf", b"\xef\xbb\xbf  \n"]:
        result = parse_note("n.md", data)
        assert isinstance(result, Skip) and result.code == "empty"


def test_nul_byte_in_the_first_8_kib_is_binary() -> None:
    assert code(parse_note("n.md", b"%PDF-1.4\n\x00\x01\x02")) == "binary"
    late = doc(b"a" * 9000 + b"\x00tail")  # only the start is sniffed
    assert late.text.endswith("\x00tail")


def test_invalid_utf8_is_read_as_windows_1252_with_a_warning() -> None:
    note = doc(b"caf\xe9 is French \x93quoted\x94 #cafe\n")
    assert note.warnings == ("invalid_utf8",)
    assert note.text == "caf\u00e9 is French \u201cquoted\u201d #cafe\n"
    assert note.metadata["tags"] == ["cafe"]
    # Bytes undefined in Windows-1252 fall back to Latin-1: never a decode error.
    assert doc(b"\x81\x8d caf\xe9").text == "\x81\x8d caf\u00e9"


def test_bom_and_crlf_frontmatter_with_body_offset() -> None:
    raw = "---\r\ntitle: From Frontmatter\r\n---\r\nBody line\r\n"
    note = doc(b"\xef\xbb\xbf" + raw.encode("utf-8"))
    assert note.title == "From Frontmatter"
    assert note.text == "Body line\r\n"
    assert raw[note.body_offset :] == note.text
    assert note.warnings == ()


def test_every_warning_and_skip_code_used_is_a_stable_code() -> None:
    for data in [b"", b"\x00", b"\xff", b"---\n[a\n---\nx"]:
        result = parse_note("n.md", data)
        codes = [result.code] if isinstance(result, Skip) else list(result.warnings)
        assert all(code in SKIP_CODES or code in WARNING_CODES for code in codes)


# ------------------------------------------------------------------------------- frontmatter


@pytest.mark.parametrize(
    "frontmatter",
    ["title: [unclosed\n", "aliases:\n- @kepano\n"],
    ids=["unclosed-list", "reserved-at-sign"],
)
def test_bad_yaml_frontmatter_warns_strips_the_block_and_indexes_the_rest(frontmatter: str) -> None:
    raw = f"---\n{frontmatter}---\n# Body #kept\n[[Link]]\n"
    note = doc(raw, "Notes/My note.md")
    assert note.warnings == ("bad_frontmatter",)
    assert note.text == "# Body #kept\n[[Link]]\n"
    assert raw[note.body_offset :] == note.text
    assert note.title == "My note"
    assert note.metadata["frontmatter"] == {}
    assert note.metadata["tags"] == ["kept"]
    assert note.metadata["wikilinks"] == ["Link"]


def test_a_templates_placeholders_are_no_fault() -> None:
    """Obsidian's templates hold `created: {{date}}`, which is not YAML (a flow mapping):
    kepano's vault printed 28 bad_frontmatter warnings on its first index (issue 40). A
    template is indexed by its text, without a warning and without its placeholder
    properties (decision 0054)."""
    raw = ("---\ncreated: {{date}}\ntags:\n  - {{title}}\nstep: <% tp.file.title %>\n"
           "kind: meeting\n---\n# Meeting\n")
    note = doc(raw, "Templates/Meeting.md")
    assert note.warnings == () and note.metadata["frontmatter"] == {}
    assert note.text == "# Meeting\n" and raw[note.body_offset:] == note.text
    broken = doc("---\ncreated: {{date}}\nother: [unclosed\n---\nBody\n")
    assert broken.warnings == ("bad_frontmatter",)  # a real error stays one


@pytest.mark.parametrize("frontmatter", ["- a\n- b\n", "just a sentence\n", "42\n"])
def test_frontmatter_that_is_not_a_mapping_warns(frontmatter: str) -> None:
    note = doc(f"---\n{frontmatter}---\nBody\n")
    assert note.warnings == ("bad_frontmatter",)
    assert note.text == "Body\n"
    assert note.metadata["frontmatter"] == {}


def test_frontmatter_edge_cases_that_are_not_errors() -> None:
    empty = doc("---\n---\nBody\n")
    assert (empty.text, empty.warnings, empty.metadata["frontmatter"]) == ("Body\n", (), {})
    unclosed = doc("---\ntitle: x\nno closing line\n")  # a thematic break, as Obsidian sees it
    assert unclosed.text == "---\ntitle: x\nno closing line\n"
    assert (unclosed.body_offset, unclosed.title, unclosed.warnings) == (0, "Note", ())
    late = doc("\n---\ntitle: late\n---\nx")  # frontmatter must start on the first line
    assert late.title == "Note" and late.body_offset == 0
    only = doc("---\ntitle: Only metadata\ntags: [a]\n---\n")
    assert (only.text, only.title, only.metadata["tags"]) == ("", "Only metadata", ["a"])


@pytest.mark.parametrize(
    ("frontmatter", "title"),
    [('title: "Real Title"', "Real Title"), ("title: '  '", "Note"), ("title: 42", "Note"),
     ("other: x", "Note")],
)
def test_title_is_frontmatter_title_else_file_stem(frontmatter: str, title: str) -> None:
    assert doc(f"---\n{frontmatter}\n---\nx", "Folder/Note.md").title == title


def test_title_of_a_dotted_name_keeps_everything_but_the_suffix() -> None:
    assert doc("x", "v1.2 release notes.md").title == "v1.2 release notes"


def test_frontmatter_is_made_json_safe() -> None:
    note = doc(
        "---\nwhen: 2024-01-05\nat: 2024-01-05 10:30:00\nnested: {list: [1, 2.5, true, null], "
        "day: 2023-02-03}\nbad: .nan\n2024-06-01: dated key\n1: int key\n---\nx"
    )
    fm = note.metadata["frontmatter"]
    assert fm == {
        "when": "2024-01-05", "at": "2024-01-05T10:30:00",
        "nested": {"list": [1, 2.5, True, None], "day": "2023-02-03"},
        "bad": "nan", "2024-06-01": "dated key", "1": "int key",
    }
    json.dumps(note.metadata, allow_nan=False)


def test_self_referencing_yaml_alias_does_not_blow_up() -> None:
    note = doc("---\nloop: &x [1, *x]\n---\nx")
    json.dumps(note.metadata, allow_nan=False)
    assert note.metadata["frontmatter"]["loop"][0] == 1


# ------------------------------------------------------------------------------- tags, links


TAGGED = """---
tags:
  - Project/Alpha
  - "#Inbox"
  - 2024
  -
tag: single, other  spaced
---
# Heading is not a tag
##NoSpaceIsNotAHeadingButFollowsAHash
#StartOfLine tag, then #Inline and #nested/deep/tag and #kebab-case and #snake_case, #café.
Digits: #1984 and #2024 are not tags but #y1984 is.
Not tags: foo#bar, [[Note#Heading]], [x](#anchor), https://e.com/p#frag, (#paren)
`#inline-code` and ``#double `tick` code`` stay out.
```python
#comment-in-fence
```
~~~
#tilde-fence
~~~
> ```
> #quoted-fence
> ```
#UPPER and #upper are one tag.
"""


def test_tags_from_frontmatter_and_inline_follow_obsidian_rules() -> None:
    assert doc(TAGGED).metadata["tags"] == [
        "café", "inbox", "inline", "kebab-case", "nested/deep/tag", "other", "project/alpha",
        "single", "snake_case", "spaced", "startofline", "upper", "y1984",
    ]


@pytest.mark.parametrize(
    ("frontmatter", "tags"),
    [("tags: a, b", ["a", "b"]), ("tags: one two", ["one", "two"]), ("tags: [x, '#y']", ["x", "y"]),
     ("tag: solo", ["solo"]), ("tags:", []), ("tags: 2024", []), ("tags: {a: 1}", [])],
)
def test_frontmatter_tags_as_list_or_string(frontmatter: str, tags: list[str]) -> None:
    assert doc(f"---\n{frontmatter}\n---\nbody").metadata["tags"] == tags


def test_html_blocks_comments_and_tag_markup_hide_tags_and_links() -> None:
    note = doc(
        "<table>\n<tr><td>--background: #1a1a1a [[In HTML]]</td></tr>\n</table>\n\n"
        "#after-the-blank-line and <span style=\"color: #ff0000\">#inside-span</span>\n"
        "<!-- #commented\n[[Commented]] -->\n#last\n"
    )
    assert note.metadata["tags"] == ["after-the-blank-line", "inside-span", "last"]
    assert note.metadata["wikilinks"] == []


def test_masking_never_alters_the_indexed_text() -> None:
    body = "a `#x` <b>#y</b>\n```\n#z\n```\n<div>\n#w\n</div>\n\n#v é\n>#quoted\n"
    note = doc(body)
    assert note.text == body and note.metadata["tags"] == ["quoted", "v", "y"]


def test_unclosed_fence_hides_the_rest_of_the_note() -> None:
    assert doc("#before\n```\n#after\n").metadata["tags"] == ["before"]


@pytest.mark.parametrize(
    ("frontmatter", "aliases"),
    [("aliases: [One, Two, One]", ["One", "Two"]), ("aliases:\n  - A b\n  -\n  - 7", ["A b", "7"]),
     ("aliases: Just One", ["Just One"]), ("alias: Solo", ["Solo"]), ("other: 1", [])],
)
def test_aliases(frontmatter: str, aliases: list[str]) -> None:
    assert doc(f"---\n{frontmatter}\n---\nbody").metadata["aliases"] == aliases


def test_wikilinks_and_embeds_keep_only_the_target() -> None:
    note = doc(
        "[[Plain]] [[Target|Shown text]] [[Heading Note#Section]] [[Block#^abc123]]\n"
        "[[#Local heading]] [[ Spaced ]] [[Folder/Deep Note]]\n"
        "![[image.png]] ![[Embedded note#Part|alias]] ![[Plain]] ![[photo.jpg|300]]\n"
        "| col | [[Table Link\\|alias]] |\n"
        "`[[In code]]`\n```\n![[In fence]]\n```\n"
    )
    assert note.metadata["wikilinks"] == [
        "Block", "Folder/Deep Note", "Heading Note", "Plain", "Spaced", "Table Link", "Target",
    ]
    assert note.metadata["embeds"] == ["Embedded note", "Plain", "image.png", "photo.jpg"]


def test_wikilinks_in_frontmatter_properties_count_as_links() -> None:
    note = doc(
        '---\ncategories:\n  - "[[Posts]]"\nauthor: "[[Steph Ango|Steph]]"\n'
        'nested: {cover: "![[cover.jpg]]"}\nplain: no link\n---\nSee [[Body Link]].\n'
    )
    assert note.metadata["wikilinks"] == ["Body Link", "Posts", "Steph Ango"]
    assert note.metadata["embeds"] == ["cover.jpg"]


@pytest.mark.parametrize(
    ("rel", "folder"), [("Note.md", ""), ("a/Note.md", "a"), ("a/b c/Note.md", "a/b c")]
)
def test_folder_is_the_posix_parent(rel: str, folder: str) -> None:
    assert doc("x", rel).metadata["folder"] == folder


# ------------------------------------------------------------------------------------- dates


@pytest.mark.parametrize(
    ("frontmatter", "expected"),
    [
        ("date: 2024-01-05", "2024-01-05"),
        ("date: 2024-01-05 10:30:00", "2024-01-05"),
        ("date: 2024-01-05T23:30:00+02:00", "2024-01-05"),
        ('date: "2024-01-05"', "2024-01-05"),
        ('date: "2024-01-05T10:00"', "2024-01-05"),
        ("date: 2024/01/05", "2024-01-05"),
        ("date: 2024/1/5", "2024-01-05"),
        ("created: 2023-09-12", "2023-09-12"),
        ("updated: 2022-02-03", "2022-02-03"),
        ("updated: 2022-02-03\ncreated: 2021-01-01", "2021-01-01"),
        ('date: "someday"\ncreated: 2021-01-02', "2021-01-02"),
        ('date: "{{date}}"', None),
        ('date: "2024-13-40"', None),
        ("date: 20240105", None),
        ("date: [2024-01-05]", None),
        ("other: 2024-01-05", None),
    ],
)
def test_date_from_date_created_or_updated(frontmatter: str, expected: str | None) -> None:
    assert doc(f"---\n{frontmatter}\n---\nbody").date == expected


# --------------------------------------------------------------------------------------- uri


def test_obsidian_uri_percent_encodes_everything() -> None:
    assert obsidian_uri("My Vault", f"01 - Community/{AWKWARD}") == (
        "obsidian://open?vault=My%20Vault&file=01%20-%20Community%2F"
        "%F0%9F%97%82%EF%B8%8F%20Plugins%20%22quoted%22%20%26%20it%27s"
    )
    assert obsidian_uri("v&1", "a b/c#d?.MD") == "obsidian://open?vault=v%261&file=a%20b%2Fc%23d%3F"
    assert obsidian_uri("v", "doc.pdf") == "obsidian://open?vault=v&file=doc.pdf"


# ------------------------------------------------------------------------------------ corpus


def _corpus() -> Path:
    return shared_data.CORPUS


@pytest.mark.corpus
def test_shared_vaults_walk_and_parse_without_exceptions() -> None:
    root = _corpus() / "vault"
    if not root.is_dir():
        pytest.skip(f"shared corpus not found at {root} (set RAGD_CORPUS)")
    vaults = sorted(p for p in root.iterdir() if p.is_dir())
    assert vaults, f"no vaults under {root}"
    for vault in vaults:
        started = time.perf_counter()
        listing = walk_vault(vault)
        walked = time.perf_counter()
        codes: collections.Counter[str] = collections.Counter(s.code for _, s in listing.skipped)
        for state in listing.files:
            result = read_note(vault, state.path, max_bytes=10 * MB)
            if isinstance(result, Skip):
                codes[result.code] += 1
                continue
            codes.update(result.warnings)
            codes["indexed"] += 1
            json.dumps(result.metadata, allow_nan=False)
            assert result.date is None or len(result.date) == 10
        done = time.perf_counter()
        print(
            f"\n{vault.name}: {len(listing.files)} notes, walk {walked - started:.3f}s, "
            f"walk+parse {done - started:.2f}s, {dict(sorted(codes.items()))}"
        )
        assert listing.files and codes["parse_error"] == 0
        assert walked - started < 5, "walking a few thousand notes should take well under a second"
    if (root / "obsidian-hub").is_dir():
        assert "🗂️ hub.md" in {f.path for f in walk_vault(root / "obsidian-hub").files}



# ------------------------------------------------------------------------- hostile metadata


def merge_bomb(levels: int = 8, width: int = 10) -> str:
    """Frontmatter where each level merges the one below ``width`` times: PyYAML's eager
    merge expansion would build width**levels pairs (10^8 from ~600 bytes)."""
    lines = ["l0: &l0 {a: 1, b: 2}"]
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i}\n  <<: [{', '.join([f'*l{i - 1}'] * width)}]\n  c: {i}")
    return "\n".join(lines) + "\n"


@pytest.mark.timeout(20)
def test_a_yaml_merge_key_bomb_is_refused_quickly_and_the_body_indexed() -> None:
    fm = merge_bomb()
    assert len(fm) < 700
    started = time.perf_counter()
    note = doc(f"---\n{fm}---\n# Body\nstill here\n")
    assert time.perf_counter() - started < 2.0
    assert note.warnings == ("frontmatter_too_large",)
    assert note.metadata["frontmatter"] == {} and note.text == "# Body\nstill here\n"


def test_ordinary_merge_keys_still_work() -> None:
    note = doc("---\nbase: &b {lang: en, kind: book}\nthis:\n  <<: *b\n  kind: film\n---\nx")
    assert note.metadata["frontmatter"]["this"] == {"lang": "en", "kind": "film"}
    assert note.warnings == ()


def test_an_oversized_frontmatter_block_is_dropped_with_a_warning() -> None:
    big = "tags:\n" + "".join(f"  - tag{i}\n" for i in range(40_000))  # ~450 KB
    note = doc(f"---\n{big}---\nbody #inline\n")
    assert note.warnings == ("frontmatter_too_large",)
    assert note.metadata["tags"] == ["inline"]


def test_lists_and_strings_in_metadata_are_capped_and_say_so() -> None:
    tags = "".join(f"  - t{i:05d}\n" for i in range(5_000))
    note = doc(f"---\ntags:\n{tags}aliases: [{', '.join(f'a{i}' for i in range(300))}]\n"
               f"summary: {'word ' * 2000}\n---\n" + " ".join(f"[[L{i}]]" for i in range(900)))
    meta = note.metadata
    assert "metadata_truncated" in note.warnings
    assert len(meta["tags"]) == 200 and meta["tags"][0] == "t00000"
    assert len(meta["aliases"]) == 50 and len(meta["wikilinks"]) == 500
    assert len(meta["frontmatter"]["tags"]) == 100
    assert len(meta["frontmatter"]["summary"]) == 4000
    assert len(json.dumps(meta)) < 60_000


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-32-be"])
def test_utf16_and_utf32_with_a_bom_are_text(encoding: str) -> None:
    text = "---\ntags: [unicode]\n---\n# Grüße\nNaïve café text\n"
    bom = {"utf-16-be": b"\xfe\xff", "utf-32-be": b"\x00\x00\xfe\xff"}.get(encoding, b"")
    note = parse_note("Wide.md", bom + text.encode(encoding))
    assert isinstance(note, Document), note
    assert note.text == "# Grüße\nNaïve café text\n"
    assert note.metadata["tags"] == ["unicode"] and note.warnings == ()


def test_utf16_without_a_bom_and_a_bom_over_garbage_stay_binary() -> None:
    assert code(parse_note("a.md", "no bom".encode("utf-16-le"))) == "binary"
    assert code(parse_note("b.md", b"\xff\xfe" + b"\x00\xd8")) == "binary"  # lone surrogate
