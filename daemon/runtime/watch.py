"""File-system events as hints for reconcile.

Events are never trusted as the truth: they only say *where* to look. A folder moved in
arrives as one event for the folder, so a hint is a path prefix as much as a file.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath

log = logging.getLogger(__name__)


def is_ignored(rel: str, exclude: Sequence[str], *, hidden: bool = False) -> bool:
    """Hidden names (unless ``hidden``: Maildir++ folders are '.Sent'), excluded names and
    editor temp files never produce hints."""
    for part in PurePosixPath(rel).parts:
        if (part.startswith(".") and not hidden) or part in exclude:
            return True
    name = PurePosixPath(rel).name
    return (name.endswith(("~", ".swp", ".swo", ".tmp", ".crdownload"))
            or (name.startswith("#") and name.endswith("#")))


def hints_from_changes(changes: Iterable[tuple[object, str]], roots: Mapping[str, str],
                       exclude: Sequence[str], hidden_ok: Collection[str] = ()
                       ) -> dict[str, set[str]]:
    """Map raw (change, absolute path) events to {collection: {relative path or folder}}.

    ``roots`` maps collection name to its absolute root. The longest matching root wins, so
    a project folder inside the vault gets its own hints. Collections in ``hidden_ok`` (mail)
    get hints for hidden names too.
    """
    ordered = sorted(roots.items(), key=lambda kv: len(kv[1]), reverse=True)
    out: dict[str, set[str]] = {}
    for _change, raw in changes:
        path = os.path.abspath(raw)
        for name, root in ordered:
            if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                if rel == ".":
                    rel = ""
                if rel and not is_ignored(rel, exclude, hidden=name in hidden_ok):
                    out.setdefault(name, set()).add(rel)
                elif not rel:
                    out.setdefault(name, set()).add("")  # the root itself: look at everything
                break
    return out


class Watcher:
    """A thread running watchfiles over every collection root, restarted when roots change."""

    def __init__(self, roots: Callable[[], dict[str, str]], exclude: Sequence[str],
                 on_hints: Callable[[dict[str, set[str]]], None], debounce_ms: int,
                 hidden_ok: Callable[[], set[str]] = set) -> None:
        self._roots = roots
        self._hidden_ok = hidden_ok
        self._exclude = tuple(exclude)
        self._on_hints = on_hints
        self._debounce = max(1, debounce_ms)
        self._stop = threading.Event()
        self._restart = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ragd-watch", daemon=True)
        self.watching: dict[str, str] = {}
        self.ready = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def roots_changed(self) -> None:
        self._restart.set()

    def _run(self) -> None:
        from watchfiles import watch

        stop, restart = self._stop, self._restart

        class _Either:
            def is_set(self) -> bool:
                return stop.is_set() or restart.is_set()

        while not stop.is_set():
            restart.clear()
            roots = {n: str(Path(r).resolve()) for n, r in self._roots().items()
                     if Path(r).is_dir()}
            self.watching = roots
            hidden = self._hidden_ok()
            if not roots:
                self.ready.set()
                restart.wait(timeout=5)
                continue
            try:
                # Signals are the daemon's to handle; watchfiles must not install its own.
                events = watch(*sorted(set(roots.values())), stop_event=_Either(),
                               debounce=self._debounce, step=50, raise_interrupt=False,
                               ignore_permission_denied=True, yield_on_timeout=True,
                               rust_timeout=500, watch_filter=None)
                for changes in events:
                    # The first (empty) yield comes once the OS watches are in place.
                    self.ready.set()
                    if not changes:
                        continue
                    hints = hints_from_changes(changes, roots, self._exclude, hidden)
                    if hints:
                        self._on_hints(hints)
            except Exception:  # a watcher failure must not take the daemon down
                log.exception("file watcher failed; sweeps still catch changes; retrying")
                stop.wait(timeout=5)
