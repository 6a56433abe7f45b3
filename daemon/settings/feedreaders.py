"""The ``[rss]`` settings, and the feed readers' local stores found on this machine.

``paths`` names feed files (RSS, Atom, JSON Feed), folders of them, OPML subscription lists and
feed readers' stores (Newsboat's ``cache.db``). The first is the collection ``rss``, the others
``rss-<name>``. Readers' stores are found the way Thunderbird's folders are
(``ragd.daemon.settings.mailfolders``): ``ragd doctor`` and the comments of a new ``config.toml``
offer them; only ``[rss] paths`` is ever indexed. Standard library and pydantic only: the CLI
reads the config before anything heavy is loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)

NEWSBOAT_DB = "cache.db"
NETNEWSWIRE_DB = "DB.sqlite3"
READER_DBS = (NEWSBOAT_DB,)  # the stores ragd reads (NetNewsWire's is only offered)


class RssConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    paths: list[str] = Field(
        default_factory=list,
        description="Feed files (RSS, Atom, JSON Feed), folders of them, OPML lists and feed "
        "readers' stores (Newsboat's cache.db) to index as the rss collection; empty: no "
        "feeds are indexed. `ragd doctor` lists the readers' stores it finds",
    )
    max_entries: int = Field(
        default=10_000, gt=0,
        description="Entries read from one feed file at most (a real feed holds tens to a few "
        "thousand); past it the rest is skipped as too_many_entries",
    )
    max_feed_mb: float = Field(
        default=64.0, gt=0,
        description="Feed files larger than this (in MB) are skipped as too_large",
    )
    enabled: bool = Field(default=True, description="Index the feeds in [rss] paths at all")


@dataclass(frozen=True)
class ReaderStore:
    """A feed reader's local store found on this machine."""

    reader: str
    path: Path
    readable: bool  # whether ragd reads it (else it is only named)


def reader_stores(platform: str, env: Mapping[str, str], home: Path) -> list[ReaderStore]:
    """The feed readers' stores that exist here: Newsboat's ``cache.db`` (XDG data folder or
    ``~/.newsboat``), and NetNewsWire's local account on macOS (named, not read yet)."""
    found: list[ReaderStore] = []
    data = Path(env.get("XDG_DATA_HOME", "").strip() or home / ".local" / "share")
    for folder in (data / "newsboat", home / ".newsboat"):
        if (folder / NEWSBOAT_DB).is_file():
            found.append(ReaderStore("Newsboat", folder / NEWSBOAT_DB, True))
    if platform == "darwin":
        support = "Data/Library/Application Support/NetNewsWire/Accounts"
        for app in ("com.ranchero.NetNewsWire-Evergreen", "com.ranchero.NetNewsWire"):
            accounts = home / "Library" / "Containers" / app / support
            try:
                for account in sorted(p for p in accounts.iterdir() if p.is_dir()):
                    if (account / NETNEWSWIRE_DB).is_file():
                        found.append(ReaderStore("NetNewsWire", account / NETNEWSWIRE_DB,
                                                 False))
            except OSError:
                continue
    return list(dict.fromkeys(found))


def offered_stores(platform: str, env: Mapping[str, str], home: Path) -> list[str]:
    """The stores ragd can read, as paths to offer in a new config file; never raises."""
    try:
        return [str(s.path) for s in reader_stores(platform, env, home) if s.readable]
    except Exception:  # discovery is a courtesy: never a reason not to start
        log.debug("feed reader discovery failed", exc_info=True)
        return []


def rss_checks(config: object, platform: str, env: Mapping[str, str], home: Path,
               config_file: str) -> list[tuple[str, str, str, str]]:
    """``ragd doctor``'s lines (name, status, detail, hint): the configured feeds, or the
    readers' stores found, offered (never indexed unasked)."""
    rss = getattr(config, "rss", RssConfig())
    configured = [Path(p).expanduser() for p in rss.paths]
    if configured and rss.enabled:
        return [("rss", "ok", str(p), "") if p.exists() else
                ("rss", "fail", f"{p} does not exist", "fix [rss] paths in config.toml")
                for p in configured]
    found = reader_stores(platform, env, home)
    if not found:
        return [("rss", "ok", "no feeds configured ([rss] paths is empty)", "")]
    readable = [s for s in found if s.readable]
    shown = ", ".join(f'{s.reader} "{s.path}"' + ("" if s.readable else " (not read yet)")
                      for s in found)
    hint = (f"to search them, add them to [rss] paths in {config_file}" if readable else
            "ragd does not read this reader's store yet; export its subscriptions as OPML "
            "or save its feeds, and add those to [rss] paths")
    return [("rss", "ok", f"not indexed; feed readers' stores found: {shown}", hint)]
