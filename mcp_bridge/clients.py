"""`ragd mcp-config CLIENT [--install]`: the MCP server entry for each desktop AI client.

Each client has its own file, location and shape:

============== ================================================ ============== ==============
client         user-level config file                           servers under  entry
============== ================================================ ============== ==============
claude-desktop macOS ~/Library/Application Support/Claude/       mcpServers     command, args,
               claude_desktop_config.json; Windows %APPDATA%\\                   env
               Claude\\...; Linux ~/.config/Claude/...
claude-code    ~/.claude.json (user scope; a project's          mcpServers     type "stdio",
               .mcp.json has the same shape)                                   command, ...
cursor         ~/.cursor/mcp.json                               mcpServers     command, ...
vscode         Code/User/mcp.json in the user config dir        servers        type "stdio",
               (~/.config, ~/Library/Application Support,                      command, ...
               %APPDATA%)
============== ================================================ ============== ==============

The command is the absolute path of the ``ragd-mcp`` script installed next to this Python:
desktop apps do not see a shell's PATH. ``RAGD_HOME`` is passed on only when it is set.
``--install`` merges the entry into the file, keeping every other server and key, after
copying the file to ``<file>.bak``; a file that is not plain JSON is left alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragd.daemon.errors import ConfigError

SERVER_NAME = "ragd"
GENERIC_COMMAND = "ragd-mcp"


@dataclass(frozen=True)
class ClientTarget:
    """Where and how one MCP client keeps its server list."""

    name: str
    label: str
    servers_key: str  # the top-level object that maps server names to entries
    typed: bool  # whether entries carry "type": "stdio"
    restart: str  # what the user does after an install

    def config_path(self, platform: str = sys.platform, home: Path | None = None,
                    environ: Mapping[str, str] | None = None) -> Path:
        """The user-level config file on ``platform``."""
        env = os.environ if environ is None else environ
        home = home or Path.home()
        appdata = Path(env.get("APPDATA") or home / "AppData" / "Roaming")
        xdg = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
        mac = home / "Library" / "Application Support"
        if self.name == "claude-desktop":
            base = appdata if platform == "win32" else mac if platform == "darwin" else xdg
            return base / "Claude" / "claude_desktop_config.json"
        if self.name == "claude-code":
            return home / ".claude.json"
        if self.name == "cursor":
            return home / ".cursor" / "mcp.json"
        base = appdata if platform == "win32" else mac if platform == "darwin" else xdg
        return base / "Code" / "User" / "mcp.json"


CLIENTS: dict[str, ClientTarget] = {
    "claude-desktop": ClientTarget("claude-desktop", "Claude Desktop", "mcpServers", False,
                                   "quit Claude Desktop completely and start it again"),
    "claude-code": ClientTarget("claude-code", "Claude Code", "mcpServers", True,
                                "start a new Claude Code session; `/mcp` lists ragd"),
    "cursor": ClientTarget("cursor", "Cursor", "mcpServers", False,
                           "reload Cursor; Settings > MCP lists ragd"),
    "vscode": ClientTarget("vscode", "VS Code", "servers", True,
                           "run `MCP: List Servers` in VS Code and start ragd"),
}


def bridge_command() -> tuple[str, list[str]]:
    """The absolute command that starts this installation's bridge, and its arguments."""
    scripts = Path(os.path.abspath(sys.executable)).parent  # not resolved: keep the venv
    for name in ("ragd-mcp.exe", "ragd-mcp") if os.name == "nt" else ("ragd-mcp",):
        if (scripts / name).exists():
            return str(scripts / name), []
    # Not installed as a script (a source checkout): run the module with this interpreter.
    return os.path.abspath(sys.executable), ["-m", "ragd.mcp_bridge.server"]


def server_entry(client: str, command: str, args: list[str] | None = None,
                 env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One client's entry for the ragd server."""
    target = CLIENTS[client]
    entry: dict[str, Any] = {"type": "stdio"} if target.typed else {}
    entry["command"] = command
    entry["args"] = list(args or [])
    if env:
        entry["env"] = dict(env)
    return entry


def snippet(client: str, command: str | None = None, args: list[str] | None = None,
            env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The JSON a user pastes into the client's config file.

    Without ``command``, this installation's absolute ``ragd-mcp`` and, when set, its
    ``RAGD_HOME``.
    """
    if command is None:
        command, args = bridge_command()
        if env is None and os.environ.get("RAGD_HOME"):
            env = {"RAGD_HOME": os.environ["RAGD_HOME"]}
    target = CLIENTS[client]
    return {target.servers_key: {SERVER_NAME: server_entry(client, command, args, env)}}


def generic_snippet(client: str) -> dict[str, Any]:
    """The snippet shipped in packaging/mcp/: `ragd-mcp` on PATH, no environment."""
    return snippet(client, command=GENERIC_COMMAND, args=[], env={})


def merge(config: Mapping[str, Any], client: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the ragd entry set, every other key and server kept as it was."""
    key = CLIENTS[client].servers_key
    merged = dict(config)
    servers = merged.get(key)
    if servers is None:
        servers = {}
    if not isinstance(servers, Mapping):
        raise ConfigError(f"{key!r} in the client's config is not an object",
                          "fix that file by hand, then run the command again")
    merged[key] = {**servers, SERVER_NAME: dict(entry)}
    return merged


def _read_config(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}",
                          "check its permissions") from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not plain JSON ({exc}); it was left unchanged",
                          "it may contain comments: add the printed entry by hand") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a JSON object; it was left unchanged",
                          "add the printed entry by hand")
    return data


def install(client: str, path: Path | None = None,
            entry: Mapping[str, Any] | None = None) -> tuple[Path, Path | None]:
    """Merge the ragd entry into the client's config file; returns (file, backup or None)."""
    target = CLIENTS[client]
    path = path or target.config_path()
    if entry is None:
        entry = snippet(client)[target.servers_key][SERVER_NAME]
    merged = merge(_read_config(path), client, entry)
    backup = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            backup = path.with_name(path.name + ".bak")
            shutil.copy2(path, backup)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
            if backup is not None:
                shutil.copymode(backup, tmp)  # ~/.claude.json is private: keep it so
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}",
                          "check the folder's permissions, or add the entry by hand") from exc
    return path, backup


def claude_code_command(entry: Mapping[str, Any]) -> str:
    """The `claude mcp add` line that registers the same entry at user scope."""
    import shlex

    env = "".join(f" -e {shlex.quote(f'{k}={v}')}" for k, v in (entry.get("env") or {}).items())
    command = " ".join(shlex.quote(part) for part in [entry["command"], *entry["args"]])
    return f"claude mcp add --scope user{env} {SERVER_NAME} -- {command}"


def cmd_mcp_config(args: argparse.Namespace) -> int:
    """Print the client's snippet (stdout, pure JSON); with --install, merge it in too."""
    client = args.client
    target = CLIENTS[client]
    data = snippet(client)
    print(json.dumps(data, indent=2, ensure_ascii=False))
    entry = data[target.servers_key][SERVER_NAME]
    if getattr(args, "install", False):
        path, backup = install(client, entry=entry)
        saved = f" (the previous version is in {backup})" if backup else ""
        print(f"added the {SERVER_NAME!r} server to {path}{saved}; "
              f"now {target.restart}.", file=sys.stderr)
    else:
        hint = f"; or run: {claude_code_command(entry)}" if client == "claude-code" else ""
        print(f"{target.label} reads {target.config_path()}: put this entry under "
              f"{target.servers_key!r} there, or run `ragd mcp-config {client} --install`"
              f"{hint}.", file=sys.stderr)
    return 0
