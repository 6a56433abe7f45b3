"""What an MCP client may read and what a bad parameter does (issue 28, rows 6-18).

    python bench/reach.py [--tree PATH] [--client ragd-mcp]

Starts a real daemon (from this checkout, or from --tree: another checkout, e.g. cac1bee's,
to measure "before") on a temp folder holding a vault, a Documents folder, planted secrets in
a fake home's .aws and .ssh, links to /etc/passwd, /etc/shadow and /proc/self/environ, a
70 MB text file and a corrupt Calibre library. Sends each case as the MCP bridge would
(`--client` is the name the connection gives; `ragd-cli` is the command line) and prints,
per case, the error code or the size of the answer, then the daemon's peak RSS. Writes
bench/results/reach.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import rss_mb, table, write_json  # noqa: E402
from ragd.daemon.errors import RagdError  # noqa: E402
from ragd.daemon.ipc.client import Client  # noqa: E402
from ragd.daemon.ipc.discovery import find_daemon  # noqa: E402
from ragd.daemon.settings.paths import resolve_paths  # noqa: E402

KEY = "plantedkeyquokka"


def build(root: Path) -> dict[str, Path]:
    """The files of every case, under ``root``."""
    vault, user = root / "vault", root / "user"
    docs, cal = user / "Documents", root / "calibre"
    for folder in (vault, docs, user / ".aws", user / ".ssh", cal):
        folder.mkdir(parents=True)
    (vault / "Note.md").write_text("# Note\n\nHerons fish in the shallows.\n", encoding="utf-8")
    (user / ".aws" / "credentials.txt").write_text(f"secret={KEY}\n", encoding="utf-8")
    (user / ".ssh" / "id_rsa.txt").write_text(f"{KEY}\n", encoding="utf-8")
    (user / "notes.txt").write_text("private notes\n", encoding="utf-8")
    for name, target in [("passwd.txt", "/etc/passwd"), ("shadow.txt", "/etc/shadow"),
                         ("environ.txt", "/proc/self/environ")]:
        (user / name).symlink_to(target)
    (docs / "big.txt").write_text(("word " * 20 + "\n") * 700_000, encoding="utf-8")
    (cal / "metadata.db").write_bytes(b"not a database " * 500)
    return {"root": root, "vault": vault, "user": user, "docs": docs, "calibre": cal}


def cases(f: dict[str, Path]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(row, case, method, params) in the issue's order."""
    user = f["user"]
    return [
        ("6", "convert link to /etc/passwd", "convert", {"file_path": str(user / "passwd.txt")}),
        ("6", "convert link to /etc/shadow", "convert", {"file_path": str(user / "shadow.txt")}),
        ("6", "convert link to /proc/self/environ", "convert",
         {"file_path": str(user / "environ.txt")}),
        ("7", "convert ~/.aws/credentials.txt", "convert",
         {"file_path": str(user / ".aws" / "credentials.txt")}),
        ("7", "convert ~/notes.txt", "convert", {"file_path": str(user / "notes.txt")}),
        ("7", "doc_store_info lists", "doc_store_info", {}),
        ("9", "convert a 70 MB text (in Documents)", "convert",
         {"file_path": str(f["docs"] / "big.txt")}),
        ("10", "convert with a NUL byte", "convert", {"file_path": str(user) + "/a\x00b.txt"}),
        ("10", "search, 100,000-character author", "search",
         {"query": "herons", "author": "a" * 100_000}),
        ("10", "index /proc/1~", "index", {"collection": "procone", "path": "/proc/1~"}),
        ("11", "index /proc/self/cwd", "index",
         {"collection": "cwd", "path": "/proc/self/cwd", "wait": False}),
        ("11", "index /var/log", "index", {"collection": "logs", "path": "/var/log",
                                           "wait": False}),
        ("17", "index calibre (corrupt metadata.db)", "index", {"collection": "calibre"}),
        ("18", "index ~/.ssh", "index", {"collection": "ssh", "path": str(user / ".ssh")}),
        ("18", "index ~/.aws", "index", {"collection": "aws", "path": str(user / ".aws")}),
        ("18", "search the planted key", "search", {"query": KEY, "mode": "keyword"}),
    ]


def outcome(address: str, client_name: str, method: str, params: dict[str, Any]
            ) -> tuple[str, float]:
    """The error code, or "ok" and the answer's size, and the seconds it took."""
    t0 = time.perf_counter()
    try:
        with Client(address, timeout=300, client_name=client_name) as client:
            answer = client.call(method, params, timeout=300)
    except RagdError as exc:
        return f"{exc.code}: {exc.message[:70]}", time.perf_counter() - t0
    size = len(json.dumps(answer, ensure_ascii=False).encode())
    if method == "search":
        hits = [r for r in answer["results"] if KEY in r["content"]]
        return f"ok, {len(hits)} hits with the key", time.perf_counter() - t0
    if method == "doc_store_info":
        return f"ok, {len(answer)} documents listed", time.perf_counter() - t0
    return f"ok, {size:,} bytes", time.perf_counter() - t0


def run(tree: Path | None, client_name: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ragd-reach-") as tmp:
        f = build(Path(tmp))
        home = f["root"] / "home"
        config = resolve_paths({"RAGD_HOME": str(home)}).config_file
        config.parent.mkdir(parents=True)
        config.write_text(f"[calibre]\nlibraries = {json.dumps([str(f['calibre'])])}\n",
                          encoding="utf-8")
        env = {**os.environ, "RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1",
               "HOME": str(f["user"])}
        if tree is not None:
            env["PYTHONPATH"] = str(tree)
        with open(f["root"] / "daemon.log", "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "ragd.daemon.cli.main", "daemon",
                                     "--vault", str(f["vault"])], env=env, stdout=log,
                                    stderr=log, start_new_session=True,
                                    cwd=f["root"])  # `-m` puts the cwd first on sys.path
        paths = resolve_paths({"RAGD_HOME": str(home)})
        try:
            deadline = time.monotonic() + 120
            while (address := find_daemon(paths)) is None:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("the daemon did not start; see its log")
                time.sleep(0.1)
            with Client(address, timeout=300) as client:
                while client.call("status", {"brief": True})["state"] == "starting":
                    time.sleep(0.2)
            rows = []
            for row, case, method, params in cases(f):
                said, seconds = outcome(address, client_name, method, params)
                rows.append([row, case, said, seconds])
            peak = rss_mb("VmHWM", proc.pid)
        finally:
            try:
                with Client(find_daemon(paths) or "", timeout=10) as client:
                    client.call("shutdown")
                proc.wait(60)
            except (RagdError, subprocess.TimeoutExpired):
                proc.kill()
    return {"tree": str(tree or "this checkout"), "client": client_name, "rows": rows,
            "peak_rss_mb": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, help="run the daemon from this checkout")
    parser.add_argument("--client", default="ragd-mcp",
                        help="the name the connection gives (ragd-cli: the command line)")
    args = parser.parse_args()
    result = run(args.tree, args.client)
    print(table(f"rag_* calls as {result['client']}, daemon from {result['tree']}",
                result["rows"], ["row", "case", "answer", "s"]))
    print(f"daemon peak RSS: {result['peak_rss_mb']:.0f} MB")
    print(f"wrote {write_json('reach', result)}")


if __name__ == "__main__":
    main()
