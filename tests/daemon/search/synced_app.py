"""For the search tests: an App over a generated vault, synced once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragd.daemon.runtime.app import App
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths


@contextmanager
def synced_app(vault: Path, embedder: Any, **overrides: Any) -> Iterator[App]:
    """An App whose only vault is ``vault``, fully indexed (``overrides``: config keys)."""
    config = load_config(resolve_paths(), {"obsidian.vaults": [str(vault)], **overrides})
    with App(resolve_paths(), config, embedder=embedder) as app:
        app.sync_all()
        yield app
