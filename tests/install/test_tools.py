"""The wheel installed as a command-line tool: pipx, `uv tool install` and `uvx --from`.

Each path gets its own empty HOME and tool folders, installs from the package index, and must
give a `ragd` that indexes (the shipped sample vault, no vault anywhere) and searches, and an
`mcp-config` that names the absolute bridge command of that installation: desktop clients do
not read the shell's PATH.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from install_env import BIN, clean_env, other_python, run

pytestmark = pytest.mark.slow

TOOLS = Path(sys.executable).parent


def works(ragd: list[str | Path], env: dict[str, str], inside: Path) -> None:
    """`ragd` indexes the sample vault and finds its note; mcp-config names a bridge in
    ``inside`` (the tool's own environment) by its absolute path."""
    assert run([*ragd, "--version"], env=env).stdout.startswith("ragd ")
    run([*ragd, "index", "--json"], env=env)
    found = json.loads(run([*ragd, "search", "--json", "--mode", "keyword",
                            "connect an AI client"], env=env).stdout)
    assert any("Connect an AI client" in json.dumps(hit) for hit in found["results"]), found
    entry = json.loads(run([*ragd, "mcp-config", "claude-code"], env=env).stdout)
    command = Path(entry["mcpServers"]["ragd"]["command"])
    assert command.is_absolute() and command.is_file(), command
    assert command.name.startswith("ragd-mcp") and command.is_relative_to(inside), command


@pytest.mark.skipif(shutil.which("pipx", path=str(TOOLS)) is None, reason="pipx not installed")
def test_pipx_install(wheel: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home, PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"),
                    PIPX_MAN_DIR=str(tmp_path / "man"))
    run([TOOLS / "pipx", "install", wheel], env=env)
    works([tmp_path / "bin" / "ragd"], env, tmp_path / "pipx")


@pytest.mark.skipif(shutil.which("uv", path=str(TOOLS)) is None, reason="uv not installed")
def test_uv_tool_install_and_uvx(wheel: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home, UV_TOOL_DIR=str(tmp_path / "tools"),
                    UV_TOOL_BIN_DIR=str(tmp_path / "bin"), UV_PYTHON_DOWNLOADS="never")
    # On another supported Python where the machine has one (3.13 or 3.12).
    python, version = other_python() or (sys.executable, "")
    run([TOOLS / "uv", "tool", "install", "--python", python, wheel], env=env)
    works([tmp_path / "bin" / "ragd"], env, tmp_path / "tools")
    used = run([tmp_path / "tools" / "ragd" / BIN / "python", "--version"], env=env).stdout
    print(f"uv tool install ran on {used.strip()}")
    assert not version or used.split()[1].startswith(version + ".")
    # uvx: a throwaway environment in uv's cache, nothing installed.
    uvx = [TOOLS / "uvx", "--python", sys.executable, "--from", wheel, "ragd"]
    env = clean_env(tmp_path / "uvx-home", UV_PYTHON_DOWNLOADS="never")
    (tmp_path / "uvx-home").mkdir()
    assert run([*uvx, "--version"], env=env).stdout.startswith("ragd ")
    entry = json.loads(run([*uvx, "mcp-config", "cursor"], env=env).stdout)
    command = Path(entry["mcpServers"]["ragd"]["command"])
    assert command.is_absolute() and command.is_file() and command.parent.name == BIN, command
