"""For the search tests: an App over a generated vault, synced once."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ragd.daemon.models import Filters
from ragd.daemon.runtime.app import App
from ragd.daemon.search import engine as engine_module
from ragd.daemon.search.engine import SearchRequest
from ragd.daemon.settings.config import load_config
from ragd.daemon.settings.paths import resolve_paths


@contextmanager
def synced_app(vault: Path, embedder: Any, **overrides: Any) -> Iterator[App]:
    """An App whose only vault is ``vault``, fully indexed (``overrides``: config keys)."""
    config = load_config(resolve_paths(), {"obsidian.vaults": [str(vault)], **overrides})
    with App(resolve_paths(), config, embedder=embedder) as app:
        app.sync_all()
        yield app


def fused_legs(app: App, query: str, monkeypatch: pytest.MonkeyPatch
               ) -> tuple[Mapping[str, Sequence[tuple[Hashable, float]]], Mapping[str, float]]:
    """The per-note legs and weights a hybrid search for ``query`` fused."""
    seen: list[tuple[Any, Any]] = []
    original = engine_module.zscore_fusion

    def spy(legs: Any, weights: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append((legs, weights))
        return original(legs, weights, *args, **kwargs)

    monkeypatch.setattr(engine_module, "zscore_fusion", spy)
    results = app.search_engine.search(SearchRequest(query=query, filters=Filters()))["results"]
    assert results and seen
    return seen[-1]


def source_of(app: App, name: str) -> Hashable:
    """The source id of the note named ``name``."""
    rows = app.catalog.chunks_by_id(sorted(app.catalog.all_chunk_ids())).values()
    return next(r.source_id for r in rows if Path(r.path).name == name)
