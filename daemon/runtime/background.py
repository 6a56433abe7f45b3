"""A background thread the daemon can wake and stop: the base of the embedding and concept
threads (each has its own loop in ``_run``). Both are bulk work, so each runs at low CPU and
I/O priority from its first instruction, however the daemon was started (decision 0044)."""

from __future__ import annotations

import threading


class BackgroundThread:
    """A daemon thread running ``_run`` at low priority (``lowered``), with a wake-up event
    and a stop event."""

    def __init__(self, name: str, *, lowered: bool = True) -> None:
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lowered = lowered
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

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

    def _main(self) -> None:
        if self._lowered:
            from ragd.daemon.priority import lower_this_thread

            lower_this_thread()
        self._run()

    def _run(self) -> None:
        raise NotImplementedError
