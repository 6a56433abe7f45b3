"""How a bulk job shares the writer with small work (a saved note): its turn, its group size.

The writer runs one job at a time; small work that arrives meanwhile waits for the job's next
boundary. ``_yield_now`` says whether a job stops at a boundary (``should_stop``, or small work
waiting once the job has had its turn, decision 0025); ``_quiet`` whether small work has been
away long enough for big work (big groups, big keyword slices, Whoosh merges); ``_window``
how many chunks a group holds, which bounds what a saved note waits for (decision 0022).
"""

from __future__ import annotations

import time
from collections.abc import Callable

# Chunks read ahead and committed together (one catalog transaction, one write to each index).
# With an embedding thread (the daemon) a group is smaller: a bulk job yields to a saved note
# only once its current group is written, so the group bounds that wait (decision 0022).
WINDOW_CHUNKS = 512
WINDOW_CHUNKS_BACKGROUND = 128
# How long after the last small work a bulk job keeps committing small groups: saves come in
# bursts while someone writes.
SMALL_WINDOW_S = 60.0
GROUP_SOURCES = 200
SMALL_TURN_S = 1.0  # a job's turn before it lets other small work go first


class Pacing:
    """The turns of ``Indexer``'s jobs (``pipeline``): a part of it, using its attributes."""

    should_stop: Callable[[], bool]
    give_way: Callable[[], bool]
    background: bool
    _started: float
    _small_at: float

    def _yield_now(self) -> bool:
        """Whether to stop at this boundary: should_stop, or small work waiting beside a
        job that has had its turn. A job over one mbox names one path, so it is small, yet
        may hold 600,000 messages: after ``SMALL_TURN_S`` it lets the saved note go first
        and resumes where it stopped (decision 0025)."""
        if self.should_stop() or (time.monotonic() - self._started >= SMALL_TURN_S
                                  and self.give_way()):
            self._small_at = time.monotonic()
            return True
        return False

    def _quiet(self) -> bool:
        return time.monotonic() - self._small_at >= SMALL_WINDOW_S

    def _window(self) -> int:
        """Chunks per commit. A group is committed before small work runs, so while someone
        saves notes a bulk job commits small groups (a save waits for little); otherwise big
        ones: Whoosh's cost per commit (a segment, merges) made 128-chunk groups cost twice the
        keyword time of 512-chunk groups (bench/ingest.py: 92 vs 106 chunks/s end to end)."""
        if self.background and not self._quiet():
            return WINDOW_CHUNKS_BACKGROUND
        return WINDOW_CHUNKS
