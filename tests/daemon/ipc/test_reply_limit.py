"""No frame a client cannot receive: a reply over the limit becomes an error it can read."""

from __future__ import annotations

from typing import Any

import pytest

from ragd.daemon.errors import RagdError
from ragd.daemon.ipc import protocol as p
from ragd.daemon.ipc.client import Client


@pytest.fixture
def server(make_server: Any) -> Any:
    return make_server(max_reply_bytes=4096)


def test_a_reply_over_the_limit_is_an_error_and_the_connection_keeps_serving(
        server: Any) -> None:
    with Client(server.address, timeout=10) as client:
        # The stand-in dispatcher answers `index` with a blob of `path` characters.
        assert len(client.call("index", {"path": "3000"})["blob"]) == 3000
        with pytest.raises(RagdError) as info:
            client.call("index", {"path": "100000"})
        assert info.value.code == "reply_too_large"
        assert "4,096-byte limit" in info.value.message and info.value.hint
        assert client.call("status", {})["echo"] == {}
    assert p.MAX_REPLY_BYTES == 64 * 1024 * 1024
