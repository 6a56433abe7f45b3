"""rag_convert / `ragd convert` while the daemon starts (decision 0032).

A conversion needs the doc store and its own worker, never the embedding model, so it is
answered while the model loads (the first start in a new data folder exports the ONNX graph
for ~15 s) and even when the model could not load. Until the app is open, where a restricted
caller may read comes from the collections the catalog already holds, read through a
read-only connection (the writer thread may be creating or migrating the catalog meanwhile).
A path outside that reach is refused only once start-up is over: the collections registered
then (a first vault, a new code group) may hold it.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

log = logging.getLogger(__name__)


def catalog_roots(catalog_path: Path) -> list[str]:
    """The roots of the catalog's collections that hold documents (every kind but mail), as
    recorded; [] when there is no catalog yet or it cannot be read now."""
    if not catalog_path.is_file():
        return []
    try:
        db = sqlite3.connect(f"{catalog_path.resolve().as_uri()}?mode=ro", uri=True,
                             timeout=2.0)
    except sqlite3.Error as exc:
        log.debug("catalog not readable yet: %s", exc)
        return []
    try:
        rows = db.execute("SELECT root FROM collections WHERE kind != 'mail'").fetchall()
    except sqlite3.Error as exc:  # no table yet: the writer is creating the catalog
        log.debug("catalog not readable yet: %s", exc)
        return []
    finally:
        db.close()
    return [str(r[0]) for r in rows]


def refused_for_now(code: str, *, restricted: bool, starting: bool) -> bool:
    """Is a refusal answered before start-up ended worth asking again once it ends? Only a
    restricted caller's ``outside_reach``: the collections registered at start-up may hold
    the path. Every other refusal (hidden, not found, unsupported) stands as it is."""
    return restricted and starting and code == "outside_reach"
