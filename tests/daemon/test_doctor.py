"""`ragd doctor`'s model check loads the configured backend, as the daemon does."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragd.daemon.cli.doctor import _model_checks
from ragd.daemon.embed import embedding
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths


class FakeEmbedder:
    """A deterministic stand-in for a loaded model (no weights): 4 dimensions."""

    max_tokens = 128
    threads = 2

    def __init__(self, backend: str | None) -> None:
        if backend is not None:
            self.backend = backend

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32)


def _config(monkeypatch: pytest.MonkeyPatch, backend: str) -> Any:
    monkeypatch.setenv("RAGD_EMBEDDING_BACKEND", backend)
    return load_config(resolve_paths())


def test_names_the_backend_it_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def make(config: Any, data_dir: Path) -> FakeEmbedder:
        seen.append((config.backend, data_dir))
        return FakeEmbedder("onnx-int8/matmul-qint8-perchannel")

    monkeypatch.setattr(embedding, "make_embedder", make)
    config = _config(monkeypatch, "onnx-int8")
    [check] = _model_checks(config, resolve_paths())
    assert check["status"] == "ok", check
    assert check["detail"] == ("all-MiniLM-L6-v2 on onnx-int8/matmul-qint8-perchannel: "
                               "4 dimensions, 128 tokens, 2 threads")
    assert seen == [("onnx-int8", resolve_paths().data_dir)]


def test_a_fallback_is_a_warning_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(config: Any, data_dir: Path) -> FakeEmbedder:
        logging.getLogger("ragd.daemon.embed.embedding").warning(
            "embedding backend %s is not available: %s", config.backend, "no onnxruntime")
        return FakeEmbedder(None)  # the sentence-transformers embedder names no backend

    monkeypatch.setattr(embedding, "make_embedder", make)
    [check] = _model_checks(_config(monkeypatch, "onnx-int8"), resolve_paths())
    assert check["status"] == "warn"
    assert "on sentence-transformers" in check["detail"]
    assert "(configured: onnx-int8)" in check["detail"]
    assert check["hint"] == "embedding backend onnx-int8 is not available: no onnxruntime"


def test_a_model_that_cannot_load_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(config: Any, data_dir: Path) -> FakeEmbedder:
        raise OSError("no such model folder")

    monkeypatch.setattr(embedding, "make_embedder", make)
    [check] = _model_checks(_config(monkeypatch, "sentence-transformers"), resolve_paths())
    assert check["status"] == "fail"
    assert check["detail"] == "all-MiniLM-L6-v2 on sentence-transformers: no such model folder"


# -- the tray check -----------------------------------------------------------------------------
def _desktop(**changes: Any) -> Any:
    from dataclasses import replace

    from ragd.tray.backend_choice import Desktop

    full = Desktop(platform="linux", display=True, x11=True, sni_host=True, xembed_tray=False,
                   gi=True, gtk=True, appindicator=True, family="apt")
    return replace(full, **changes)


def test_tray_without_the_libraries_warns_with_the_install_command() -> None:
    from ragd.daemon.cli.doctor import tray_checks

    bare = {"gi": False, "gtk": False, "appindicator": False}
    [check] = tray_checks("auto", _desktop(**bare))
    assert check["status"] == "warn"
    assert check["detail"] == (
        "xorg (PyGObject is not installed: the icon has no menu; [tray] backend = auto): "
        "missing libgirepository1.0-dev, libcairo2-dev, pkg-config, python3-dev, gcc, "
        "gir1.2-gtk-3.0, gir1.2-ayatanaappindicator3-0.1, PyGObject in this Python")
    assert check["hint"].startswith("sudo apt install libgirepository1.0-dev libcairo2-dev "
                                    "pkg-config python3-dev gcc gir1.2-gtk-3.0 "
                                    "gir1.2-ayatanaappindicator3-0.1 && ")
    assert check["hint"].endswith(" -m pip install 'PyGObject>=3.42,<3.51'")
    # Fedora's names, and the same warning on a server without a display.
    [check] = tray_checks("auto", _desktop(family="dnf", display=False, x11=False, **bare))
    assert check["status"] == "warn"
    assert "no menu: missing gobject-introspection-devel" in check["detail"]
    assert check["hint"].startswith("sudo dnf install gobject-introspection-devel ")
    # The system has it all; only ragd's environment lacks PyGObject.
    [check] = tray_checks("auto", _desktop(gi=False, buildable=True))
    assert check["detail"].endswith(": missing PyGObject in this Python")
    assert check["hint"].endswith(" -m pip install 'PyGObject>=3.42,<3.51'")
    assert "sudo" not in check["hint"]


def test_tray_with_a_host_and_the_libraries_is_ok() -> None:
    from ragd.daemon.cli.doctor import tray_checks

    assert tray_checks("auto", _desktop()) == [{
        "name": "tray", "status": "ok", "hint": "",
        "detail": "appindicator (a StatusNotifier host is running; [tray] backend = auto)"}]
    [check] = tray_checks("gtk", _desktop(xembed_tray=True))
    assert check["detail"].startswith("gtk (set in the configuration")
    [check] = tray_checks("xorg", _desktop())
    assert (check["status"], check["hint"]) == ("warn", "set [tray] backend = auto for a menu")
    [check] = tray_checks("auto", _desktop(platform="darwin", gi=False))
    assert (check["status"], check["detail"]) == ("ok", "darwin: menu available")


def test_doctor_runs_the_tray_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragd.daemon.cli import doctor

    monkeypatch.setattr(doctor, "_model_checks", lambda config, paths: [])
    monkeypatch.setenv("RAGD_TRAY_BACKEND", "gtk")
    checks = doctor.run_checks()
    [tray] = [c for c in checks if c["name"] == "tray"]
    assert "[tray] backend = gtk" in tray["detail"]


def _mcp_check(tmp_path: Path, config: str) -> dict[str, Any]:
    from ragd.daemon.cli.doctor import mcp_check

    paths = resolve_paths()
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(config.replace("REPO", str(tmp_path)), encoding="utf-8")
    return mcp_check(load_config(paths).mcp)


def test_says_which_tools_a_client_sees_and_why(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    code = '[code]\ngroups = { work = ["REPO"] }\n'
    check = _mcp_check(tmp_path, code)
    assert check["status"] == "ok", check
    assert check["detail"].startswith("an MCP client sees 18 tools: search (a default of "
                                      "[mcp] toolsets); index (a default"), check
    assert "code (a [code] group is configured)" in check["detail"]
    assert "5 write tools hidden ([mcp] writes = false)" in check["detail"]

    # A list the user wrote is taken as written: no code tools, whatever is configured.
    check = _mcp_check(tmp_path, code + '[mcp]\ntoolsets = ["search"]\n'
                       'tools_deny = ["rag_convert"]\n')
    assert check["detail"] == ("an MCP client sees 4 tools: search (named in [mcp] toolsets). "
                               "left out by tools_allow/tools_deny: rag_convert"), check

    check = _mcp_check(tmp_path, '[mcp]\ntoolsets = ["serach"]\n')
    assert check["status"] == "warn" and "unknown toolsets ignored: serach" in check["detail"]
    assert "[mcp] toolsets" in check["hint"]
