"""A conversion needs no model, so it is answered while the daemon loads one (issue 27 item 5,
decision 0032): in a new data folder the first start exports the ONNX graph for ~15 s, and
`ragd convert` and rag_convert answer meanwhile. A restricted caller's path outside the
collections the catalog holds already waits for start-up, which may register its folder."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc, wait_for
from document_fixtures import pdf_bytes
from vault_fixtures import write_vault

from ragd.daemon.ipc.client import Client
from ragd.daemon.ipc.discovery import find_daemon
from ragd.daemon.ipc.protocol import USER_CLIENT
from ragd.daemon.settings.paths import resolve_paths
from ragd.daemon.stores.catalog import Catalog

pytestmark = pytest.mark.slow


def brief(d: DaemonProc) -> dict[str, Any]:
    status: dict[str, Any] = d.call("status", {"brief": True}, timeout=10)
    return status


def convert_as(d: DaemonProc, client_name: str, path: Path) -> tuple[dict[str, Any], str]:
    """The answer to one convert, and the daemon's state the moment it arrived."""
    address = find_daemon(resolve_paths({"RAGD_HOME": str(d.home)}))
    assert address, "daemon not running"
    with Client(address, timeout=120, client_name=client_name) as client:
        answer: dict[str, Any] = client.call("convert", {"file_path": str(path)}, timeout=120)
    return answer, brief(d)["state"]


def test_convert_answers_while_the_model_is_exported(ragd_home: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (ragd_home / "data" / "models").unlink()  # a new data folder: the graph is exported
    vault = write_vault(tmp_path / "vault")
    (vault / "guide.pdf").write_bytes(pdf_bytes(["Ostrich lantern guide."]))
    later = tmp_path / "later"  # a second vault, registered only when start-up opens the app
    later.mkdir()
    (later / "late.pdf").write_bytes(pdf_bytes(["Pelican ledger page."]))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "memo.pdf").write_bytes(pdf_bytes(["Walrus memo for the command line."]))
    # The catalog of an earlier run knows the first vault (its models/ folder was wiped).
    catalog = Catalog(ragd_home / "data" / "catalog.sqlite")
    catalog.ensure_collection("obsidian", type="system", kind="vault", root=str(vault.resolve()))
    catalog.close()
    monkeypatch.setenv("RAGD_OBSIDIAN_VAULTS", f"{vault}:{later}")

    d = DaemonProc(ragd_home, None, tmp_path / "daemon.log").start()
    try:
        assert brief(d)["state"] == "starting"
        t0 = time.monotonic()
        # The command line reads any path; an MCP client a collection's.
        cli, cli_state = convert_as(d, USER_CLIENT, outside / "memo.pdf")
        mcp, mcp_state = convert_as(d, "test", vault / "guide.pdf")
        print(f"two conversions answered {time.monotonic() - t0:.1f} s into start-up")
        assert "Walrus memo" in cli["markdown"] and "Ostrich lantern" in mcp["markdown"]
        assert (cli_state, mcp_state) == ("starting", "starting"), \
            "a conversion waited for the model"

        # A path in a folder start-up has yet to register waits for it, then is answered.
        late: list[tuple[dict[str, Any], str]] = []
        call = threading.Thread(target=lambda: late.append(
            convert_as(d, "test", later / "late.pdf")))
        call.start()
        call.join(180)
        assert late, "the conversion in the second vault never answered"
        answer, state = late[0]
        assert "Pelican ledger" in answer["markdown"]
        assert state != "starting"
        ready = wait_for(lambda: brief(d)["ready_s"], 10, "ready_s")
        print(f"start-up (ONNX export included) took {ready:.1f} s")
    finally:
        d.stop()
