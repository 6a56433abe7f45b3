"""The daemon and its App as their parts see them: protocols, not the classes.

The handler modules and the concept thread take a ``Service``; ``service.Daemon`` is the one
that satisfies it (mypy checks that wherever the daemon is handed to a handler). The
modules that register a kind of collection (``feeds``, ``sample``, ``codegroups``) take a
``Registrar``, which ``app.App`` satisfies. So no module that the daemon or the App imports
imports them back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import threading
    from pathlib import Path

    from ragd.daemon.indexer.pipeline import Progress
    from ragd.daemon.ipc.server import Connection
    from ragd.daemon.runtime.scheduler import Job, JobQueue
    from ragd.daemon.runtime.watch import Watcher
    from ragd.daemon.runtime.writer_waits import WriterWaits
    from ragd.daemon.settings.config import Config
    from ragd.daemon.settings.paths import Paths
    from ragd.daemon.stores.catalog import Catalog, Collection


class Service(Protocol):
    """What the handlers read and steer of the daemon."""

    paths: Paths
    config: Config
    queue: JobQueue
    ready: threading.Event  # set when start-up is over (failed or not)
    app: Any  # the open App once start-up succeeded
    progress: Progress | None
    embedding_paused: bool
    concepts: Any  # the concept thread (decision 0033)
    on_demand: Any  # a client's conversions, open before the model (decision 0032)
    writer_waits: WriterWaits
    _stop: threading.Event
    _watcher: Watcher | None
    _code_watcher: Watcher | None

    async def _ready(self) -> Any: ...

    def _emit(self, event: dict[str, Any]) -> None: ...

    def status(self) -> dict[str, Any]: ...

    def brief_status(self) -> dict[str, Any]: ...

    def indexing(self) -> dict[str, Any]: ...

    def indexing_event(self, state: str) -> dict[str, Any]: ...

    def follow_up(self, what: str) -> dict[str, Any]: ...

    def unembedded(self, names: list[str] | None) -> int: ...

    def enqueue(self, name: str | None, priority: int = ..., *, force: bool = ...) -> Job: ...

    def subscribe(self, conn: Connection) -> None: ...

    def request_stop(self) -> None: ...

    def wake_embedding(self) -> None: ...


class Registrar(Protocol):
    """What registering a kind of collection reads of the App."""

    paths: Paths
    config: Config
    catalog: Catalog

    def ensure_system(self, name: str, configured: Path, resolved: Path, *, kind: str,
                      description: str) -> Collection: ...


Handler = Callable[[Service, dict[str, Any], "Connection"], Awaitable[Any]]
