"""Find the user's Calibre library from Calibre's own settings.

Calibre records the library it opens in ``global.py.json`` (key ``library_path``) in its config
folder; Calibre before 1.0 wrote ``global.py``, a Python file of ``name = value`` lines. The
folder moves with the platform, and ``CALIBRE_CONFIG_DIRECTORY`` overrides it. Best effort, as
for Obsidian's vaults: a missing or broken file is logged and skipped, never raised, because the
user can always name the libraries in ``[calibre] libraries``.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

METADATA_DB = "metadata.db"
_OLD_SETTING = re.compile(r"^library_path\s*=\s*(.+?)\s*$", re.M)


def calibre_config_candidates(platform: str, env: Mapping[str, str], home: Path) -> list[Path]:
    """Calibre's config folders for ``platform`` (a sys.platform value), most likely first."""
    override = env.get("CALIBRE_CONFIG_DIRECTORY", "").strip()
    if override:
        return [Path(override).expanduser()]
    if platform == "win32":
        appdata = env.get("APPDATA", "").strip()
        base = Path(appdata) if appdata else home / "AppData" / "Roaming"
        return [base / "calibre"]
    if platform == "darwin":
        return [home / "Library" / "Preferences" / "calibre"]
    xdg = env.get("XDG_CONFIG_HOME", "").strip()
    config_home = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".config"
    return list(dict.fromkeys([config_home / "calibre", home / ".config" / "calibre"]))


def _library_path(folder: Path) -> str | None:
    """``library_path`` from ``global.py.json``, else from the old ``global.py``."""
    new = folder / "global.py.json"
    try:
        data = json.loads(new.read_text(encoding="utf-8"))
        value = data.get("library_path") if isinstance(data, dict) else None
        if isinstance(value, str) and value.strip():
            return value
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.warning("ignoring Calibre's settings %s: %s", new, exc)
    old = folder / "global.py"
    try:
        m = _OLD_SETTING.search(old.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
    if m is None:
        return None
    try:
        value = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        log.warning("ignoring Calibre's settings %s: library_path is not a string", old)
        return None
    return value if isinstance(value, str) and value.strip() else None


def discover_libraries(platform: str | None = None, env: Mapping[str, str] | None = None,
                       home: Path | None = None) -> list[Path]:
    """The library Calibre opens (a folder holding ``metadata.db``), or nothing."""
    platform = platform or sys.platform
    env = os.environ if env is None else env
    home = home or Path.home()
    for folder in calibre_config_candidates(platform, env, home):
        raw = _library_path(folder)
        if raw is None:
            continue
        path = Path(raw).expanduser()
        if (path / METADATA_DB).is_file():
            return [path]
        log.info("Calibre's library %s has no %s; not indexed", path, METADATA_DB)
    return []
