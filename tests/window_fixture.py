"""One daemon with its window for the window's tests (``test_window.py``, the browser's
``test_window_browser.py``): a copy of the shared kepano vault plus a file that is skipped,
started once per session, since both modules only read it or add what they name."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import daemon_proc
import httpx
import pytest
from daemon_proc import DaemonProc, wait_for

from ragd.daemon.settings.paths import resolve_paths

BROKEN = "Inbox/Broken.md"  # NUL bytes in a note: skipped as `binary`


@dataclass
class Window:
    daemon: DaemonProc
    home: Path
    vault: Path
    url: str  # the opening URL, with this start's token
    broken: str = BROKEN
    _session: httpx.Client | None = field(default=None, repr=False)

    @property
    def port(self) -> int:
        return int(self.url.split(":")[2].split("/")[0])

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def session(self) -> httpx.Client:
        """An HTTP client holding the session's cookie, as the browser does."""
        if self._session is None:
            self._session = httpx.Client(timeout=30)
            assert self._session.get(self.url, follow_redirects=True).status_code == 200
        return self._session

    def api(self, method: str, params: dict[str, Any]) -> Any:
        answer = self.session().post(f"{self.base}/api/{method}", json=params,
                                     headers={"Origin": self.base})
        assert answer.status_code == 200, answer.text
        return answer.json()["result"]


@pytest.fixture(scope="session")
def window(tmp_path_factory: pytest.TempPathFactory, shared_models: Path) -> Iterator[Window]:
    from conftest import corpus_path  # here: conftest imports this module

    root = tmp_path_factory.mktemp("window")
    vault = root / "vault"
    shutil.copytree(corpus_path("vault", "kepano-obsidian"), vault)
    (vault / BROKEN).parent.mkdir(exist_ok=True)
    (vault / BROKEN).write_bytes(b"# Broken\n\x00\x00\x00 not text\n")
    home = root / "home"
    (home / "data").mkdir(parents=True, mode=0o700)
    (home / "data" / "models").symlink_to(shared_models, target_is_directory=True)
    d = DaemonProc(home, vault, root / "daemon.log").start()
    daemon_proc.STARTED.remove(d)  # lives for the session
    try:
        d.wait_idle(timeout=300)
        status_file = resolve_paths({"RAGD_HOME": str(home)}).status_file
        url = wait_for(lambda: json.loads(status_file.read_text()).get("window"), 10,
                       "the window's URL in the status file")
        w = Window(d, home, vault, url)
        yield w
        if w._session is not None:
            w._session.close()
    finally:
        d.stop()
