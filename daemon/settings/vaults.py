"""Find the user's Obsidian vaults from Obsidian's own list of them.

Obsidian records every vault it has opened in ``obsidian.json`` inside its config dir, which
moves with the platform and the packaging (native, Flatpak, Snap). Discovery is best effort:
a missing, broken or unreadable file is logged and skipped, never raised, because the user can
always name the vaults in ``config.toml`` instead.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

OBSIDIAN_JSON = "obsidian.json"
FLATPAK_APP_ID = "md.obsidian.Obsidian"


@dataclass(frozen=True)
class _Entry:
    path: Path
    ts: int  # last opened, milliseconds since the epoch
    open: bool  # a window on it was open when Obsidian last saved the file


def obsidian_config_candidates(platform: str, env: Mapping[str, str], home: Path) -> list[Path]:
    """Where ``obsidian.json`` may be, most likely first, for ``platform`` (a sys.platform)."""
    if platform == "win32":
        appdata = env.get("APPDATA", "").strip()
        base = Path(appdata) if appdata else home / "AppData" / "Roaming"
        candidates = [base / "obsidian" / OBSIDIAN_JSON]
    elif platform == "darwin":
        candidates = [home / "Library" / "Application Support" / "obsidian" / OBSIDIAN_JSON]
    else:
        xdg = env.get("XDG_CONFIG_HOME", "").strip()
        # The XDG spec says a relative value is invalid and must be ignored.
        config_home = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".config"
        candidates = [
            config_home / "obsidian" / OBSIDIAN_JSON,
            home / ".var" / "app" / FLATPAK_APP_ID / "config" / "obsidian" / OBSIDIAN_JSON,
            home / "snap" / "obsidian" / "current" / ".config" / "obsidian" / OBSIDIAN_JSON,
        ]
    return list(dict.fromkeys(candidates))  # XDG_CONFIG_HOME may equal ~/.config


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.warning("ignoring Obsidian's vault list %s: %s", path, exc)
        return None
    vaults = data.get("vaults") if isinstance(data, dict) else None
    if not isinstance(vaults, dict):
        log.warning("ignoring Obsidian's vault list %s: no 'vaults' object in it", path)
        return None
    return vaults


def _entries(config_file: Path) -> list[_Entry]:
    vaults = _load(config_file)
    if vaults is None:
        return []
    entries = []
    for vault_id, record in vaults.items():
        raw_path = record.get("path") if isinstance(record, dict) else None
        if not isinstance(raw_path, str) or not raw_path:
            log.debug("%s: vault %s has no path; skipped", config_file, vault_id)
            continue
        ts = record.get("ts")
        # bool is an int subclass; a malformed ts should sort last rather than fail.
        ts = int(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else 0
        entries.append(_Entry(Path(raw_path), ts, record.get("open") is True))
    return entries


def _identity(path: Path) -> str:
    # The same vault can be listed by two installs (native and Flatpak) or through a symlink.
    try:
        resolved = path.resolve()
    except OSError:
        resolved = path
    return os.path.normcase(str(resolved))


def discover_vaults(
    platform: str | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[Path]:
    """The vault folders Obsidian knows about that exist, open ones first, then most recent.

    Defaults: the running platform, ``os.environ`` and the user's home. Never raises: broken
    config files are logged and skipped, vaults whose folder is gone are dropped, and a vault
    listed twice is returned once.
    """
    platform = sys.platform if platform is None else platform
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    listed = [
        entry
        for candidate in obsidian_config_candidates(platform, env, home)
        if candidate.is_file()
        for entry in _entries(candidate)
    ]
    found: dict[str, _Entry] = {}  # insertion order = discovery order, the last tie-breaker
    for entry in listed:
        # Relative paths would be read against our working directory, not Obsidian's.
        if not entry.path.is_absolute() or not entry.path.is_dir():
            log.debug("Obsidian vault %s does not exist here; skipped", entry.path)
            continue
        key = _identity(entry.path)
        if (known := found.get(key)) is not None:
            # Keep the first path seen, with the freshest facts from either listing.
            entry = _Entry(known.path, max(known.ts, entry.ts), known.open or entry.open)
        found[key] = entry
    # sorted() is stable, so equal (open, ts) keep their discovery order.
    ordered = sorted(found.values(), key=lambda e: (not e.open, -e.ts))
    return [entry.path for entry in ordered]


def vault_name(path: Path) -> str:
    """The vault's name as Obsidian shows it and uses in ``obsidian://`` URIs: its folder name."""
    return path.name or str(path)
