"""What a conversion may read and how much it answers (decision 0023), on real files.

Pure policy and the doc store with in-process formats (text, markdown) and a counting stand-in
for the worker: the same rules are run against a real daemon and the MCP bridge in
tests/mcp_bridge/test_mcp_reach.py.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import platformdirs
import pytest

from ragd.daemon.convert.docstore import DocStore
from ragd.daemon.errors import InvalidArgument, PathRefused
from ragd.daemon.ipc import client as ipc_client
from ragd.daemon.ipc import protocol as p
from ragd.daemon.models import Skip
from ragd.daemon.settings.policy import Reach, allow_folders, check_root, convert_target
from ragd.daemon.sources.on_request import ConversionFailed, convert_file

pytestmark = pytest.mark.skipif(os.name != "posix", reason="builds POSIX links, FIFOs, sockets")


class CountingConverter:
    """Stands in for the worker process (PDF and friends); counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def convert(self, fmt: str, data: bytes) -> dict[str, Any] | Skip:
        self.calls += 1
        return {"title": "T", "markdown": data.decode("latin-1"), "metadata": {}}

    def close(self) -> None:
        pass


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """A collection, an allowed folder, a place outside both, ragd's own data, secrets."""
    places = {name: tmp_path / name for name in ("vault", "allowed", "outside", "ragd")}
    for folder in places.values():
        folder.mkdir()
    (places["vault"] / "paper.txt").write_text("in the vault\n", encoding="utf-8")
    (places["allowed"] / "notes.txt").write_text("allowed notes\n", encoding="utf-8")
    (places["outside"] / "private.txt").write_text("private\n", encoding="utf-8")
    (places["allowed"] / ".aws").mkdir()
    (places["allowed"] / ".aws" / "credentials.txt").write_text("KEY\n", encoding="utf-8")
    (places["allowed"] / ".secret.txt").write_text("KEY\n", encoding="utf-8")
    (places["ragd"] / "config.txt").write_text("x\n", encoding="utf-8")
    return places


def reach(tree: dict[str, Path], *, restricted: bool = True) -> Reach:
    return Reach.build([tree["vault"]], [tree["allowed"], tree["ragd"]], [tree["ragd"]],
                       restricted=restricted)


def refused(raw: object, r: Reach) -> PathRefused:
    with pytest.raises(PathRefused) as info:
        convert_target(raw, r)
    assert info.value.param == "file_path" and info.value.hint
    return info.value


# -- where an AI client may read ------------------------------------------------------------
def test_inside_a_collection_or_an_allowed_folder_only(tree: dict[str, Path]) -> None:
    r = reach(tree)
    inside = convert_target(str(tree["vault"] / "paper.txt"), r)
    assert (inside.root, inside.rel, inside.in_collection) == (
        os.path.realpath(tree["vault"]), "paper.txt", True)
    allowed = convert_target(str(tree["allowed"] / "notes.txt"), r)
    assert allowed.rel == "notes.txt" and not allowed.in_collection
    out = refused(str(tree["outside"] / "private.txt"), r)
    assert out.code == "outside_reach" and "[convert] allow" in out.message
    assert "RAGD_CONVERT_ALLOW" in out.hint
    # A path outside reveals nothing: missing or not, the same refusal.
    assert refused(str(tree["outside"] / "missing.txt"), r).code == "outside_reach"
    # The command line reads any path the user names.
    free = convert_target(str(tree["outside"] / "private.txt"), reach(tree, restricted=False))
    assert free.rel == "private.txt" and not free.in_collection


def test_hidden_files_folders_and_links_to_them_are_refused(tree: dict[str, Path]) -> None:
    r = reach(tree)
    allowed = tree["allowed"]
    assert refused(str(allowed / ".aws" / "credentials.txt"), r).code == "hidden_path"
    assert "is hidden (.secret.txt)" in refused(str(allowed / ".secret.txt"), r).message
    (allowed / "innocent.txt").symlink_to(allowed / ".aws" / "credentials.txt")
    assert refused(str(allowed / "innocent.txt"), r).code == "hidden_path"
    (allowed / "Archive").symlink_to(allowed / ".aws", target_is_directory=True)
    assert refused(str(allowed / "Archive" / "credentials.txt"), r).code == "hidden_path"


def test_links_out_system_files_and_ragd_data_are_refused(tree: dict[str, Path]) -> None:
    r = reach(tree)
    allowed = tree["allowed"]
    for name, target in [("out.txt", tree["outside"] / "private.txt"),
                         ("passwd.txt", Path("/etc/passwd")),
                         ("shadow.txt", Path("/etc/shadow"))]:
        (allowed / name).symlink_to(target)
        assert refused(str(allowed / name), r).code == "outside_reach", name
    (allowed / "environ.txt").symlink_to("/proc/self/environ")
    for restricted in (True, False):  # /proc, /sys, /dev: for the command line too
        one = reach(tree, restricted=restricted)
        assert refused(str(allowed / "environ.txt"), one).code == "system_file"
        assert "character device" in refused("/dev/null", one).message
    assert refused(str(tree["ragd"] / "config.txt"), r).code == "ragd_data"
    assert refused("/tmp/a\x00b.txt", r).code == "nul_in_path"
    with pytest.raises(InvalidArgument, match="5,001 characters"):
        convert_target("/" + "a" * 5000, r)
    with pytest.raises(InvalidArgument, match="relative"):
        convert_target("notes.txt", r)


def test_allow_places_and_what_may_never_be_allowed(tree: dict[str, Path]) -> None:
    assert allow_folders(["<documents>", "<Downloads>", "<desktop>", "~/Papers", "rel/x"]) == [
        os.path.normpath(platformdirs.user_documents_dir()),
        os.path.normpath(platformdirs.user_downloads_dir()),
        os.path.normpath(platformdirs.user_desktop_dir()),
        os.path.join(os.path.expanduser("~"), "Papers")]
    (tree["outside"] / "sys").symlink_to("/usr/share", target_is_directory=True)
    r = Reach.build([tree["outside"] / "sys", tree["vault"]], ["/", "/etc", tree["allowed"]],
                    [], restricted=True)
    # "/" and system folders are never allowed; a collection whose folder now leads into a
    # system folder gives no reach.
    assert r.allow == (os.path.realpath(tree["allowed"]),)
    assert r.collections == (os.path.realpath(tree["vault"]),)


# -- what an AI client may index ------------------------------------------------------------
def test_rag_index_refuses_system_log_and_hidden_folders(tmp_path: Path) -> None:
    for path in ("/proc/self/cwd", "/proc/1/root", "/var/log", "/var/log/apt", "/run/user"):
        with pytest.raises(InvalidArgument, match="system folder"):
            check_root(path, home=tmp_path / "home")
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (tmp_path / "keys").symlink_to(ssh, target_is_directory=True)
    for path in (ssh, tmp_path / "keys", ssh / "sub"):
        with pytest.raises(PathRefused) as info:
            check_root(str(path), home=tmp_path / "home", hidden=True)
        assert info.value.code == "hidden_path" and "ragd index" in info.value.hint
    # The command line may (a vault kept in ~/.notes is the user's choice).
    assert check_root(str(ssh), home=tmp_path / "home") == str(ssh)
    with pytest.raises(PathRefused) as nul:
        check_root("/home/a\x00b", home=tmp_path / "home")
    assert nul.value.code == "nul_in_path"


# -- reading, keeping and bounding ----------------------------------------------------------
def test_kept_only_inside_a_collection(tree: dict[str, Path], tmp_path: Path) -> None:
    store = DocStore(tmp_path / "ds", CountingConverter())
    r = reach(tree)
    inside = convert_file(store, str(tree["vault"] / "paper.txt"), max_bytes=1 << 20, reach=r)
    allowed = convert_file(store, str(tree["allowed"] / "notes.txt"), max_bytes=1 << 20,
                           reach=r)
    assert inside["kept"] and not allowed["kept"]
    assert allowed["markdown"] == "allowed notes\n" and allowed["truncated"] is False
    assert [d["source_path"] for d in store.info()] == [str(tree["vault"] / "paper.txt")]
    objects = sorted(f.name for f in (tmp_path / "ds" / "objects").rglob("*.json"))
    assert objects == [f"{inside['content_hash']}.txt-1.json"]
    kept = convert_file(store, str(tree["allowed"] / "notes.txt"), max_bytes=1 << 20, reach=r,
                        keep_outside=True)
    assert kept["kept"] and len(store.info()) == 2


def test_a_long_document_is_answered_in_bounded_pieces(tree: dict[str, Path],
                                                       tmp_path: Path) -> None:
    conv = CountingConverter()
    store = DocStore(tmp_path / "ds", conv)
    text = "".join(f"Paragraph {i} " + "word " * 30 + "\n\n" for i in range(2_000))
    doc = tree["allowed"] / "long.pdf"  # through the stand-in worker, not kept
    doc.write_text(text, encoding="latin-1")
    r = reach(tree)
    pieces, offset, answer = [], 0, None
    while True:
        answer = convert_file(store, str(doc), max_bytes=1 << 20, reach=r, offset=offset,
                              max_chars=50_000)
        assert answer["chars"] <= 50_000 and answer["total_chars"] == len(text)
        pieces.append(answer["markdown"])
        if not answer["truncated"]:
            assert answer["next_offset"] is None
            break
        offset = answer["next_offset"]
        assert text[offset:].startswith("\n\nParagraph")  # cut at a paragraph
    assert "".join(pieces) == text and len(text) // 50_000 < len(pieces) <= len(text) // 45_000 + 1
    assert conv.calls == 1  # not kept, yet converted once: the last one stays in memory
    assert store.info() == []


def test_what_is_not_a_readable_document_gets_its_code(tree: dict[str, Path],
                                                       tmp_path: Path) -> None:
    store = DocStore(tmp_path / "ds", CountingConverter())
    r = reach(tree)
    allowed = tree["allowed"]
    os.mkfifo(allowed / "pipe.txt")
    server = socket.socket(socket.AF_UNIX)
    short = Path(os.path.relpath(allowed / "sock.txt"))  # sun_path is short
    try:
        server.bind(str(short) if len(str(short)) < 100 else str(allowed / "sock.txt"))
    except OSError:
        pytest.skip("cannot bind a socket in the test folder")
    (allowed / "folder.txt").mkdir()
    (allowed / "dangling.txt").symlink_to(allowed / "nowhere.txt")
    (allowed / "notes.xyz").write_text("x", encoding="utf-8")
    (allowed / "empty.txt").write_bytes(b"")
    cases = {"pipe.txt": ("not_regular", "named pipe"), "sock.txt": ("not_regular", "socket"),
             "folder.txt": ("not_regular", "a folder"),
             "missing.txt": ("not_found", "does not exist"),
             "dangling.txt": ("broken_link", "link to nothing"),
             "notes.xyz": ("unsupported", "not a supported")}
    try:
        for name, (code, words) in cases.items():
            with pytest.raises(PathRefused) as info:
                convert_file(store, str(allowed / name), max_bytes=1 << 20, reach=r)
            assert (info.value.code, info.value.param) == (code, "file_path"), name
            assert words in info.value.message, info.value.message
    finally:
        server.close()
    with pytest.raises(ConversionFailed, match="empty"):
        convert_file(store, str(allowed / "empty.txt"), max_bytes=1 << 20, reach=r)
    with pytest.raises(ConversionFailed, match="too_large"):
        convert_file(store, str(allowed / "notes.txt"), max_bytes=3, reach=r)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod-0 file")
def test_an_unreadable_file_says_so(tree: dict[str, Path], tmp_path: Path) -> None:
    secret = tree["allowed"] / "locked.txt"
    secret.write_text("x", encoding="utf-8")
    secret.chmod(0)
    with pytest.raises(PathRefused) as info:
        convert_file(DocStore(tmp_path / "ds", CountingConverter()), str(secret),
                     max_bytes=1 << 20, reach=reach(tree))
    assert info.value.code == "unreadable"


# -- parameters and replies -----------------------------------------------------------------
@pytest.mark.parametrize(("method", "params", "field"), [
    ("search", {"query": "x", "author": "a" * 100_000}, "author"),
    ("search", {"query": "x", "sender": "a" * 1_001}, "sender"),
    ("search", {"query": "q" * 200_001}, "query"),
    ("search", {"query": "x", "tags": ["t"] * 101}, "tags"),
    ("search", {"query": "x", "collection": "c" * 257}, "collection"),
    ("convert", {"file_path": "/" + "a" * 4096}, "file_path"),
    ("convert", {"file_path": "/a.txt", "max_chars": 2_000_001}, "max_chars"),
    ("index", {"collection": "p", "path": "/" + "p" * 4096}, "path"),
])
def test_overlong_parameters_are_refused_by_length(method: str, params: dict[str, Any],
                                                   field: str) -> None:
    with pytest.raises(p.InvalidParams) as info:
        p.parse_params(method, params)
    assert info.value.param == field
    assert len(info.value.message) < 200  # never the value itself
    reply = p.error_from_exception(1, info.value)
    assert reply["error"]["code"] == p.INVALID_PARAMS


def test_who_speaks_for_the_user_and_the_reply_limit() -> None:
    assert p.speaks_for_user("ragd-cli")
    assert not any(p.speaks_for_user(n) for n in ("ragd-mcp", "ragd-tray", "test", None, ""))
    assert p.MAX_REPLY_BYTES == ipc_client.MAX_REPLY_BYTES
    # A refusal crosses the socket with its code and parameter.
    sent = p.error_from_exception(3, PathRefused("file_path", "no", "ask", code="hidden_path"))
    back = p.exception_from_error(sent["error"])
    assert isinstance(back, PathRefused)
    assert (back.code, back.param, back.hint) == ("hidden_path", "file_path", "ask")
