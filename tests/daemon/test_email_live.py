"""Mail as a user meets it: a real daemon watching a Maildir, real deliveries, and an AI client
asking through the real MCP bridge (the SDK's ClientSession over stdio)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from daemon_proc import DaemonProc, catalog_progress, duplicate_chunks, settle, wait_for
from mail_fixtures import deliver, maildir, mark_seen, message
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.slow

BRIDGE = Path(sys.executable).parent / "ragd-mcp"


def search(d: DaemonProc, query: str, **params: Any) -> list[dict[str, Any]]:
    return d.call("search", {"query": query, "mode": "keyword", **params})["results"]


def test_delivered_mail_is_searchable_by_sender_and_date_over_mcp(
        ragd_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = maildir(tmp_path / "Maildir")
    deliver(root, message("Kickoff", "Agenda for the kickoff.", date="2024-01-08 09:00"))
    monkeypatch.setenv("RAGD_EMAIL_PATHS", str(root))
    monkeypatch.setenv("RAGD_OBSIDIAN_ENABLED", "false")
    d = DaemonProc(ragd_home, None, tmp_path / "daemon.log").start()
    try:
        status = d.wait_idle()
        assert [c["name"] for c in status["collections"]] == ["email"]

        # Delivered while the daemon runs, into a Maildir++ folder: found on its own.
        work = maildir(root / ".Work")
        started = time.monotonic()
        path = deliver(work, message(
            "Budget review", "The tamarind budget needs sign-off by Friday.",
            sender="Grace Hopper <grace@navy.example>", date="2024-03-05 14:30"))
        (hit,) = wait_for(lambda: search(d, "tamarind"), 30, "the delivered message")
        print(f"delivery to searchable: {time.monotonic() - started:.2f} s")
        # Read in the mail program: a rename that keeps the message's chunks (same ids).
        mark_seen(path)
        (moved,) = wait_for(lambda: [h for h in search(d, "tamarind")
                                     if h["source_path"].endswith(":2,S")], 30, "the new place")
        assert moved["metadata"]["chunk_id"] == hit["metadata"]["chunk_id"]

        async def ask() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
            env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
            env.update(RAGD_HOME=str(ragd_home), HF_HUB_OFFLINE="1")
            params = StdioServerParameters(command=str(BRIDGE), env=env)
            async with stdio_client(params) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                found = await session.call_tool("rag_search", {
                    "query": "budget sign-off", "source_type": "email", "sender": "HOPPER",
                    "date_from": "2024-03-01", "date_to": "2024-03-31"})
                none = await session.call_tool("rag_search", {
                    "query": "budget sign-off", "source_type": "email", "sender": "hopper",
                    "date_to": "2024-02-29"})
                info = await session.call_tool("rag_collection_info", {"collection": "email"})
            return (found.structuredContent or {}, none.structuredContent or {},
                    info.structuredContent or {})

        found, none, info = anyio.run(ask)
        hits = found["results"]
        assert hits and {h["title"] for h in hits} == {"Budget review"}
        meta = hits[0]["metadata"]
        assert meta["sender"] == "Grace Hopper <grace@navy.example>"
        assert meta["folder"] == "Work" and meta["date"].startswith("2024-03-05T14:30")
        assert hits[0]["source_uri"] == "mid:budget-review@example.org"
        assert none["results"] == []
        assert info["message_count"] == 2
        assert {(f["folder"], f["count"]) for f in info["folders"]} == {("Inbox", 1), ("Work", 1)}
        assert (info["date_from"], info["date_to"]) == ("2024-01-08", "2024-03-05")
    finally:
        d.stop()



def test_kill_nine_while_mail_is_indexed_then_restart_is_consistent(
        ragd_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kill -9 at random instants while an mbox (growing between kills) and a Maildir are
    indexed: after a restart every message is indexed exactly once, with its container read
    to the end, and the catalog, FAISS and Whoosh agree."""
    import random

    from mail_fixtures import mbox_bytes

    from ragd.daemon.runtime.app import App
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    root = maildir(tmp_path / "Mail")
    text = "A sentence about the migration of birds over the northern sea. " * 12
    box = root / "Lists.mbox"
    box.write_bytes(mbox_bytes([message(f"List {n}", f"{text} Number {n}.", msgid=f"l{n}")
                                for n in range(150)]))
    for n in range(30):
        deliver(root, message(f"Direct {n}", f"{text} Direct {n}.", msgid=f"d{n}"))
    monkeypatch.setenv("RAGD_EMAIL_PATHS", str(root))
    monkeypatch.setenv("RAGD_OBSIDIAN_ENABLED", "false")
    log = tmp_path / "kills.log"
    rng = random.Random(13)
    d = DaemonProc(ragd_home, None, log).start()
    added = 0
    for point in range(6):
        wait_for(lambda d=d: d.call("status", timeout=5)["state"] != "starting", 60, "the model")
        before = catalog_progress(ragd_home)
        wait_for(lambda b=before, d=d: catalog_progress(ragd_home) > b
                 or d.call("status")["state"] == "idle", 180, "progress", interval=0.05)
        time.sleep(rng.uniform(0, 1.0))
        d.kill9()
        with box.open("ab") as fh:  # mail arrives while the daemon is down
            fh.write(mbox_bytes([message(f"Late {point}", f"{text} Late {point}.",
                                         msgid=f"late{point}")]))
        added += 1
        d = DaemonProc(ragd_home, None, log).start()
    settle(d)
    paths = resolve_paths()
    with App(paths, load_config(paths)) as app:
        assert app.consistency()["ok"], app.consistency()
        coll = app.collection("email")
        keys = {r.path for r in app.catalog.source_records(coll.id) if r.status == "ok"}
        want = ({f"mid:l{n}@example.org" for n in range(150)}
                | {f"mid:d{n}@example.org" for n in range(30)}
                | {f"mid:late{n}@example.org" for n in range(added)})
        assert keys == want
        dupes = duplicate_chunks(app)
        assert dupes == []
        containers = {c.path: c for c in app.catalog.container_records(coll.id)}
        assert containers["Lists.mbox"].read_to == box.stat().st_size
        assert len(containers) == 31
