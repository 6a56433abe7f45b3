"""A background thread the daemon can wake and stop: the base of the embedding and concept
threads (each has its own loop in ``_run``)."""

from __future__ import annotations

import threading


class BackgroundThread:
    """A daemon thread running ``_run``, with a wake-up event and a stop event."""

    def __init__(self, name: str) -> None:
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the loop to end (waking it if it waits) and wait up to ``timeout`` for it."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        raise NotImplementedError
