"""`ragd mcp-config`: each client's snippet and file, and --install's careful merge."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from ragd.daemon.errors import ConfigError
from ragd.mcp_bridge import clients
from ragd.mcp_bridge.clients import (
    CLIENTS,
    bridge_command,
    claude_code_command,
    cmd_mcp_config,
    generic_snippet,
    install,
    snippet,
)

REPO = Path(__file__).resolve().parents[2]
HOME = Path("/home/u")


def test_the_command_is_the_ragd_mcp_next_to_this_python() -> None:
    command, args = bridge_command()
    assert Path(command).is_absolute()
    assert Path(command).parent == Path(os.path.abspath(sys.executable)).parent
    assert (Path(command).name, args) == ("ragd-mcp", [])  # installed by `pip install -e`


def test_each_client_gets_its_own_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGD_HOME")
    command, _ = bridge_command()
    assert snippet("claude-desktop") == {"mcpServers": {"ragd": {"command": command,
                                                                "args": []}}}
    assert snippet("cursor") == {"mcpServers": {"ragd": {"command": command, "args": []}}}
    assert snippet("claude-code") == {"mcpServers": {"ragd": {
        "type": "stdio", "command": command, "args": []}}}
    assert snippet("vscode") == {"servers": {"ragd": {
        "type": "stdio", "command": command, "args": []}}}


def test_ragd_home_is_passed_on_only_when_set(ragd_home: Path) -> None:
    for client in CLIENTS:
        entry = next(iter(snippet(client).values()))["ragd"]
        assert entry["env"] == {"RAGD_HOME": str(ragd_home)}
    assert "-e RAGD_HOME=" in claude_code_command(snippet("claude-code")["mcpServers"]["ragd"])


@pytest.mark.parametrize(("client", "platform", "expected"), [
    ("claude-desktop", "darwin",
     HOME / "Library/Application Support/Claude/claude_desktop_config.json"),
    ("claude-desktop", "win32", Path("C:/Users/u/AppData/Roaming/Claude/"
                                     "claude_desktop_config.json")),
    ("claude-desktop", "linux", HOME / ".config/Claude/claude_desktop_config.json"),
    ("claude-code", "linux", HOME / ".claude.json"),
    ("claude-code", "win32", HOME / ".claude.json"),
    ("cursor", "darwin", HOME / ".cursor/mcp.json"),
    ("vscode", "linux", HOME / ".config/Code/User/mcp.json"),
    ("vscode", "darwin", HOME / "Library/Application Support/Code/User/mcp.json"),
    ("vscode", "win32", Path("C:/Users/u/AppData/Roaming/Code/User/mcp.json")),
])
def test_config_file_locations(client: str, platform: str, expected: Path) -> None:
    env = {"APPDATA": "C:/Users/u/AppData/Roaming"} if platform == "win32" else {}
    assert CLIENTS[client].config_path(platform, home=HOME, environ=env) == expected


def test_packaged_snippets_match_the_generated_ones() -> None:
    for client in CLIENTS:
        shipped = json.loads((REPO / "packaging" / "mcp" / f"{client}.json").read_text(
            encoding="utf-8"))
        assert shipped == generic_snippet(client), client
    docs = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
    for client in CLIENTS:
        assert f"ragd mcp-config {client}" in docs
        assert f"packaging/mcp/{client}.json" in docs


def test_install_keeps_other_servers_and_keys_and_writes_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    original = {"mcpServers": {"other": {"command": "other-mcp", "args": ["-x"]},
                               "ragd": {"command": "/old/ragd-mcp"}},
                "globalShortcut": "Ctrl+Space"}
    path.write_text(json.dumps(original), encoding="utf-8")
    path.chmod(0o600)
    entry = {"command": "/new/ragd-mcp", "args": []}
    written, backup = install("claude-desktop", path, entry)
    assert written == path and backup == tmp_path / "claude_desktop_config.json.bak"
    assert json.loads(backup.read_text(encoding="utf-8")) == original
    merged = json.loads(path.read_text(encoding="utf-8"))
    assert merged == {"mcpServers": {"other": {"command": "other-mcp", "args": ["-x"]},
                                     "ragd": entry},
                      "globalShortcut": "Ctrl+Space"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_install_creates_a_missing_file_and_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "Code" / "User" / "mcp.json"
    written, backup = install("vscode", path, {"type": "stdio", "command": "/x/ragd-mcp",
                                               "args": []})
    assert backup is None
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "servers": {"ragd": {"type": "stdio", "command": "/x/ragd-mcp", "args": []}}}
    # VS Code keeps "inputs" next to "servers": a second install leaves them alone.
    data = json.loads(path.read_text(encoding="utf-8"))
    data["inputs"] = [{"id": "key", "type": "promptString"}]
    path.write_text(json.dumps(data), encoding="utf-8")
    install("vscode", path, {"type": "stdio", "command": "/y/ragd-mcp", "args": []})
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["inputs"] and data["servers"]["ragd"]["command"] == "/y/ragd-mcp"


@pytest.mark.parametrize("content", ['{"servers": {} // a comment\n}', "[1, 2]",
                                     '{"mcpServers": []}'])
def test_install_refuses_files_it_cannot_merge_safely(tmp_path: Path, content: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        install("cursor", path, {"command": "/x/ragd-mcp", "args": []})
    assert caught.value.hint
    assert path.read_text(encoding="utf-8") == content  # untouched
    assert not (tmp_path / "mcp.json.bak").exists()


def test_the_command_prints_pure_json_and_installs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(clients.ClientTarget, "config_path",
                        lambda self, *a, **k: tmp_path / f"{self.name}.json")
    assert cmd_mcp_config(argparse.Namespace(client="cursor", install=False)) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == snippet("cursor")
    assert "cursor.json" in err and "--install" in err
    assert not (tmp_path / "cursor.json").exists()
    assert cmd_mcp_config(argparse.Namespace(client="cursor", install=True)) == 0
    out, err = capsys.readouterr()
    assert json.loads((tmp_path / "cursor.json").read_text(encoding="utf-8")) == snippet(
        "cursor")
    assert "added" in err and "reload Cursor" in err


def test_the_ragd_cli_dispatches_mcp_config(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from ragd.daemon.cli.main import main

    assert main(["mcp-config", "claude-code"]) == 0
    assert "mcpServers" in json.loads(capsys.readouterr().out)
