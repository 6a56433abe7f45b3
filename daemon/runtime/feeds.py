"""The rss collections of ``[rss] paths`` (decision 0029): registered like mail's.

The first path is the collection ``rss``, the others ``rss-<name>``; a path that is a file (a
feed, an OPML list, a reader's ``cache.db``) is read alone from its folder. Readers' stores
found on the machine are only offered (``ragd doctor``), never indexed unasked.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ragd.daemon.settings.feedreaders import READER_DBS
from ragd.daemon.stores.catalog import Collection

if TYPE_CHECKING:
    from ragd.daemon.runtime.surface import Registrar

log = logging.getLogger(__name__)

DESCRIPTION = "Feed entries (RSS, Atom, JSON Feed, OPML, Newsboat) with feed name, link and date"
ONLY = "mail_only:"  # the catalog meta key of the one file a collection reads (app._MAIL_ONLY)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:48].strip("-") or "feeds"


def register_rss(app: Registrar) -> list[Collection]:
    """Each path of ``[rss] paths`` as a collection: ``rss``, then ``rss-<name>``."""
    out: list[Collection] = []
    if not app.config.rss.enabled:
        return out
    for n, raw in enumerate(app.config.rss.paths):
        configured = Path(raw).expanduser()
        path = configured.resolve()
        if not path.exists():
            log.warning("[rss] paths: %s does not exist; skipped", path)
            continue
        label = path.parent.name if path.name in READER_DBS else (
            path.stem if path.is_file() else path.name)
        name = "rss" if n == 0 else f"rss-{_slug(label)}"
        desc = f"{DESCRIPTION}: {path}"
        if path.is_dir():
            out.append(app.ensure_system(name, configured, path, kind="rss", description=desc))
        else:  # one file, read alone from its folder
            out.append(app.catalog.ensure_collection(
                name, type="system", kind="rss", root=str(path.parent), description=desc))
        app.catalog.set_meta(ONLY + name, "" if path.is_dir() else path.name)
    return out
