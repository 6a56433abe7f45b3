"""Find the user's local mail: Thunderbird profiles' folders, offered, never indexed unasked.

Thunderbird lists its profiles in ``profiles.ini`` inside its data folder, which moves with the
platform and the packaging (native, Flatpak, Snap). Each profile keeps local folders under
``Mail/`` (``Mail/Local Folders`` and POP accounts) and the offline copies of IMAP accounts under
``ImapMail/``: mbox files without an extension, beside ``.msf`` summaries. ``ragd doctor`` and
the config comments name what was found; only ``[email] paths`` is ever indexed. Discovery is best
effort: a missing or broken ``profiles.ini`` is skipped, never raised.
"""

from __future__ import annotations

import configparser
import logging
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

FLATPAK_APP_ID = "org.mozilla.Thunderbird"


def thunderbird_roots(platform: str, env: Mapping[str, str], home: Path) -> list[Path]:
    """Where Thunderbird's data folder (holding ``profiles.ini``) may be, for ``platform``."""
    if platform == "win32":
        appdata = env.get("APPDATA", "").strip()
        base = Path(appdata) if appdata else home / "AppData" / "Roaming"
        return [base / "Thunderbird"]
    if platform == "darwin":
        return [home / "Library" / "Thunderbird"]
    return [home / ".thunderbird",
            home / ".var" / "app" / FLATPAK_APP_ID / ".thunderbird",
            home / "snap" / "thunderbird" / "common" / ".thunderbird"]


def _profiles(root: Path) -> list[Path]:
    ini = root / "profiles.ini"
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(ini.read_text(encoding="utf-8", errors="replace"))
    except (OSError, configparser.Error) as exc:
        if not isinstance(exc, FileNotFoundError):
            log.warning("ignoring Thunderbird's profile list %s: %s", ini, exc)
        return []
    out = []
    for section in parser.sections():
        if not section.lower().startswith("profile") or "path" not in parser[section]:
            continue
        raw = parser[section]["path"].strip()
        relative = parser[section].get("isrelative", "1").strip() != "0"
        path = root / raw if relative else Path(raw)
        out.append(path)
    return list(dict.fromkeys(out))


def discover_mail_folders(platform: str, env: Mapping[str, str], home: Path) -> list[Path]:
    """Local mail folders of every Thunderbird profile found: each account folder under
    ``Mail/`` and ``ImapMail/`` that exists, in a stable order."""
    found: list[Path] = []
    for root in thunderbird_roots(platform, env, home):
        for profile in _profiles(root):
            for area in ("Mail", "ImapMail"):
                try:
                    accounts = sorted(p for p in (profile / area).iterdir() if p.is_dir())
                except OSError:
                    continue
                found.extend(accounts)
    return list(dict.fromkeys(found))
