"""The Windows pipe's lock-down (decision 0032), as far as Linux allows: the flags and names
computed, and the hello token checked by the real server over a real (Unix) socket."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragd.daemon.errors import AccessDenied, RagdError
from ragd.daemon.ipc import discovery, pipes
from ragd.daemon.ipc.address import validate_pipe_name
from ragd.daemon.ipc.client import Client
from ragd.daemon.settings.paths import Paths


def test_every_instance_rejects_remote_clients_and_the_first_is_exclusive() -> None:
    first, later = pipes.open_mode(True), pipes.open_mode(False)
    assert first & pipes.FILE_FLAG_FIRST_PIPE_INSTANCE
    assert not later & pipes.FILE_FLAG_FIRST_PIPE_INSTANCE
    for mode in (first, later):  # duplex, and overlapped as the proactor needs
        assert mode & pipes.PIPE_ACCESS_DUPLEX == pipes.PIPE_ACCESS_DUPLEX
        assert mode & pipes.FILE_FLAG_OVERLAPPED
    mode = pipes.pipe_mode()
    assert mode & pipes.PIPE_REJECT_REMOTE_CLIENTS
    assert mode & pipes.PIPE_TYPE_MESSAGE and mode & pipes.PIPE_READMODE_MESSAGE  # asyncio's


def test_the_constants_are_windows_own() -> None:
    if sys.platform != "win32":
        pytest.skip("_winapi exists only on Windows; the values are winbase.h's")
    import _winapi  # type: ignore[import-not-found]

    assert pipes.FILE_FLAG_FIRST_PIPE_INSTANCE == _winapi.FILE_FLAG_FIRST_PIPE_INSTANCE
    assert pipes.PIPE_ACCESS_DUPLEX == _winapi.PIPE_ACCESS_DUPLEX
    assert pipes.FILE_FLAG_OVERLAPPED == _winapi.FILE_FLAG_OVERLAPPED
    assert pipes.PIPE_TYPE_MESSAGE == _winapi.PIPE_TYPE_MESSAGE
    assert pipes.PIPE_READMODE_MESSAGE == _winapi.PIPE_READMODE_MESSAGE


def windows_paths(user: str, data: str = r"C:\Users\x\AppData\Local\ragd") -> Paths:
    return Paths(Path("c"), Path(data), Path("s"), Path("r"), platform="win32", user=user)


def test_the_pipe_name_is_per_user_and_new_at_each_start() -> None:
    alice, bob = windows_paths("alice").socket_path, windows_paths("bob").socket_path
    assert alice.startswith("\\\\.\\pipe\\ragd-alice-") and alice != bob
    assert windows_paths("a\\b c").socket_path.startswith("\\\\.\\pipe\\ragd-a_b_c-")
    names = {pipes.pipe_name(alice) for _ in range(50)}
    assert len(names) == 50  # nobody can create the name before the daemon picks it
    for name in names:
        assert name.startswith(alice + "-") and validate_pipe_name(name) == name
    long_user = windows_paths("u" * 200).socket_path
    assert len(pipes.pipe_name(long_user)) <= 256 or pytest.fail("too long for Windows")


def test_the_token_check() -> None:
    token = pipes.new_token()
    assert len(token) >= 40 and token != pipes.new_token()
    assert pipes.token_accepted(None, None)  # a Unix socket asks for none
    assert pipes.token_accepted(token, token)
    for wrong in (None, "", token[:-1], token + "x", 42, [token], token.upper()):
        assert not pipes.token_accepted(token, wrong), wrong


def test_a_hello_without_the_token_is_refused(make_server: Callable[..., Any],
                                              tmp_path: Path) -> None:
    token = pipes.new_token()
    srv = make_server(token=token)
    pipes.remember_token(srv.address, None)
    with pytest.raises(AccessDenied, match="did not give the daemon's token"):
        Client(srv.address, timeout=5)
    pipes.remember_token(srv.address, "not-" + token)
    with pytest.raises(AccessDenied):
        Client(srv.address, timeout=5)
    pipes.remember_token(srv.address, token)
    try:
        with Client(srv.address, timeout=5) as client:
            assert client.call("status", {"i": 1})["echo"] == {"i": 1}
    finally:
        pipes.remember_token(srv.address, None)


def test_a_refused_hello_leaves_the_connection_unusable(make_server: Callable[..., Any]) -> None:
    from ragd.daemon.ipc import protocol as p
    from ragd.daemon.ipc.client import _SocketStream

    srv = make_server(token=pipes.new_token())
    stream = _SocketStream(srv.address, 5)
    try:
        for method in ("hello", "status"):
            params = {"client": "x", "protocol": p.PROTOCOL_VERSION}
            stream.send(p.encode({"jsonrpc": "2.0", "id": 1, "method": method,
                                  "params": params}), 5)
            reply = p.decode(stream.recv(5).split(b"\n")[0])
            assert "error" in reply, reply
    finally:
        stream.close()


def test_clients_take_the_token_from_the_status_file(
        paths: Paths, make_server: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon writes the token beside the address; find_daemon hands it to the clients."""
    # The status file names this test process, whose command line need not say "ragd".
    monkeypatch.setattr(discovery, "daemon_alive", lambda status: True)
    token = pipes.new_token()
    srv = make_server(token=token)
    discovery.write_status(paths, pid=os.getpid(), socket=srv.address, version="t",
                           protocol=1, started_at=0.0, token=token)
    try:
        assert discovery.find_daemon(paths) == srv.address
        assert pipes.token_for(srv.address) == token
        with Client(srv.address, timeout=5) as client:
            assert client.call("status", {})["echo"] == {}
        if os.name != "nt":
            assert paths.status_file.stat().st_mode & 0o077 == 0  # the user's alone
    finally:
        pipes.remember_token(srv.address, None)
        discovery.remove_status(paths)


def test_a_status_file_without_a_token_forgets_an_old_one(paths: Paths) -> None:
    pipes.remember_token("addr", "old")
    pipes.remember_token("addr", None)
    assert pipes.token_for("addr") is None
    with pytest.raises(RagdError):  # a token is never an empty string
        raise AccessDenied("x")
