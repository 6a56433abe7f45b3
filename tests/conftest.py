"""Shared fixtures. Every test runs with its own RAGD_HOME, so nothing touches the user's data."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_data import CORPUS, REFERENCE, REPO  # noqa: F401  (RAGD_CORPUS, RAGD_REFERENCE)


@pytest.fixture(scope="session")
def shared_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One models/ folder for every test's data folder: the ONNX graph is exported (in a
    child process) by the first test that needs it, and reused by all the others."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(autouse=True)
def ragd_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
              shared_models: Path) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("ragd-home")
    (home / "data").mkdir(mode=0o700)
    (home / "data" / "models").symlink_to(shared_models, target_is_directory=True)
    monkeypatch.setenv("RAGD_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for key in list(os.environ):
        if key.startswith("RAGD_") and key not in ("RAGD_HOME", "RAGD_CORPUS"):
            monkeypatch.delenv(key)
    yield home
    stop_left_daemon(home)


def _running_in(pid: int, home: Path) -> bool:
    """Whether ``pid`` is a live (not zombie) process with this RAGD_HOME (Linux's /proc)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return False
    return state != "Z" and f"RAGD_HOME={home}".encode() in environ


def stop_left_daemon(home: Path) -> None:
    """Stop a daemon that a test's bridge or CLI started in ``home`` and left running (an MCP
    client's first call starts one): none outlives its test to take the next ones' CPU. The
    status file names it; its environment must name this home (a pid may have been reused)."""
    import signal
    import time

    from ragd.daemon.settings.paths import resolve_paths

    try:
        pid = int(json.loads(resolve_paths({"RAGD_HOME": str(home)}).status_file
                             .read_text(encoding="utf-8"))["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if not _running_in(pid, home):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while _running_in(pid, home) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _running_in(pid, home):
        os.kill(pid, signal.SIGKILL)


def corpus_path(*parts: str) -> Path:
    """A path in ../shared/corpus, or a skip that says why the test cannot run."""
    path = CORPUS.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared corpus not found at {path} (set RAGD_CORPUS to its folder)")
    return path


@pytest.fixture(scope="session")
def real_embedder() -> Iterator[object]:
    """The real default model, loaded once per test session (it takes ~10 s to import)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ragd.daemon.embed.embedding import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder()
    emb.warm_up()
    yield emb


@pytest.fixture(autouse=True)
def no_daemon_left_behind() -> Iterator[None]:
    """Whatever a test does (or fails to do), no daemon it started outlives it."""
    yield
    import daemon_proc

    while daemon_proc.STARTED:
        d = daemon_proc.STARTED.pop()
        if d.proc is not None and d.proc.poll() is None:
            d.kill9()


# The window's daemon, shared by its HTTP and browser tests (one start per session).
from window_fixture import window  # noqa: E402, F401
