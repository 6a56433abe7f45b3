"""Build ``dist/ragd-<version>.mcpb``, the MCP bundle a desktop client installs in one click.

``make mcpb`` runs it after ``make wheel``. The bundle is a zip (MCPB manifest 0.4) whose
server type is ``uv``: the host creates the environment from the bundle's ``pyproject.toml``,
which depends on the ragd wheel carried inside the bundle (compiled dependencies such as
faiss and onnxruntime come from the package index for the user's platform; a ``python``
bundle could carry pure-Python packages only). ``user_config`` asks for the vault folder and
hands it to the bridge, and so to the daemon the bridge starts, as ``RAGD_OBSIDIAN_VAULTS``;
left empty, ragd finds the vault Obsidian has open (decision 0034).

    python packaging/mcpb/build.py dist/ragd-0.1.0-py3-none-any.whl [--out dist]
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MANIFEST_VERSION = "0.4"
ENTRY_POINT = "server.py"
SERVER = '''"""The ragd MCP bridge, as the bundle's host runs it (`uv run server.py`)."""

from ragd.mcp_bridge.server import main

raise SystemExit(main())
'''


def project() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def tools() -> list[dict[str, str]]:
    """The tools a client sees with the default toolsets, as the manifest lists them."""
    from ragd.daemon.settings.config import McpConfig
    from ragd.mcp_bridge.tools import select_tools

    chosen, _ = select_tools(McpConfig().toolsets)
    return [{"name": t.name, "description": t.title} for t in chosen]


def manifest(version: str) -> dict[str, Any]:
    meta = project()
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": "ragd",
        "display_name": "ragd: local search over your notes, mail and books",
        "version": version,
        "description": meta["description"],
        "long_description": (
            "ragd keeps a local hybrid (keyword + semantic) index of your Obsidian vault, "
            "documents, mail and Calibre library in sync as files change, and answers AI "
            "clients' searches from it. Everything runs on your machine: the embedding model "
            "ships inside the package, and nothing is sent anywhere."),
        "author": {"name": "The ragd developers"},
        "license": meta["license"],
        "icon": "icon.png",
        "keywords": ["obsidian", "search", "rag", "notes", "email", "calibre", "local"],
        "server": {
            "type": "uv",
            "entry_point": ENTRY_POINT,
            "mcp_config": {
                "command": "uv",
                "args": ["run", "--directory", "${__dirname}", ENTRY_POINT],
                "env": {"RAGD_OBSIDIAN_VAULTS": "${user_config.vault}", "HF_HUB_OFFLINE": "1"},
            },
        },
        "tools": tools(),
        "user_config": {
            "vault": {
                "type": "directory",
                "title": "Obsidian vault",
                "description": "The vault folder to index. Leave empty to use the vault "
                               "Obsidian has open.",
                "required": False,
            },
        },
        "compatibility": {
            "platforms": ["darwin", "win32", "linux"],
            "runtimes": {"python": meta["requires-python"]},
        },
    }


def pyproject(version: str, wheel_name: str) -> str:
    """The bundle's own project: no code to build (``package = false``), one dependency, the
    wheel beside it."""
    return (
        "[project]\n"
        'name = "ragd-bundle"\n'
        f'version = "{version}"\n'
        f'requires-python = "{project()["requires-python"]}"\n'
        'dependencies = ["ragd"]\n\n'
        "[tool.uv]\n"
        "package = false\n\n"
        "[tool.uv.sources]\n"
        f'ragd = {{ path = "wheels/{wheel_name}" }}\n'
    )


def build(wheel: Path, out: Path) -> Path:
    name, version = wheel.name.split("-")[:2]
    if name != "ragd":
        raise SystemExit(f"error: {wheel} is not a ragd wheel")
    out.mkdir(parents=True, exist_ok=True)
    bundle = out / f"ragd-{version}.mcpb"
    tmp = bundle.with_suffix(".mcpb.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(manifest(version), indent=2) + "\n")
        z.writestr("pyproject.toml", pyproject(version, wheel.name))
        z.writestr(ENTRY_POINT, SERVER)
        z.write(REPO / "packaging" / "icons" / "ragd.png", "icon.png")
        z.write(REPO / "LICENSE", "LICENSE")
        # The wheel is already compressed: stored as it is.
        z.write(wheel, f"wheels/{wheel.name}", compress_type=zipfile.ZIP_STORED)
    tmp.replace(bundle)
    return bundle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--out", type=Path, default=REPO / "dist")
    args = parser.parse_args(argv)
    bundle = build(args.wheel, args.out)
    print(f"{bundle} ({bundle.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
