"""File-system events as hints for reconcile.

Events are never trusted as the truth: they only say *where* to look. A folder moved in
arrives as one event for the folder, so a hint is a path prefix as much as a file.
"""

from __future__ import annotations

import logging
import os
import stat
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


HINT_WEIGHED = 256  # paths of one hint whose sizes are looked at; a burst weighs its first


def hint_bytes(root: str, rels: Iterable[str]) -> int:
    """What a hint's files hold, in bytes, as they stand (a folder or a missing file weighs
    nothing): the queue lets a saved note go before a 63 MB feed hinted beside it."""
    total = 0
    for n, rel in enumerate(rels):
        if n >= HINT_WEIGHED:
            break
        try:
            st = os.stat(os.path.join(root, rel))
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            total += st.st_size
    return total


class Watcher:
    """watchfiles over every collection root. A root added later (a new project) gets a watch
    of its own beside the running ones, which never stop for it: restarting them lost the
    events of the moment (a note saved while rag_index added a project was never seen)."""

    def __init__(self, roots: Callable[[], dict[str, str]], exclude: Sequence[str],
                 on_hints: Callable[[dict[str, set[str]], dict[str, int]], None],
                 debounce_ms: int,
                 hidden_ok: Callable[[], set[str]] = set) -> None:
        self._roots = roots
        self._hidden_ok = hidden_ok
        self._exclude = tuple(exclude)
        self._on_hints = on_hints
        self._debounce = max(1, debounce_ms)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._groups: dict[frozenset[str], tuple[threading.Thread, threading.Event]] = {}
        self.watching: dict[str, str] = {}
        self.ready = threading.Event()

    def start(self) -> None:
        self.roots_changed()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            groups = list(self._groups.values())
        for thread, _ in groups:
            thread.join(timeout=5)

    def current_roots(self) -> dict[str, str]:
        return {n: str(Path(r).resolve()) for n, r in self._roots().items() if Path(r).is_dir()}

    def roots_changed(self) -> None:
        """Watch the roots not watched yet; stop the watches whose roots are all gone."""
        roots = self.current_roots()
        with self._lock:
            self.watching = roots
            wanted = set(roots.values())
            for paths, (_, stop) in list(self._groups.items()):
                if not paths & wanted:
                    stop.set()
                    del self._groups[paths]
            covered = set().union(*self._groups) if self._groups else set()
            new = frozenset(wanted - covered)
            if not new:
                self.ready.set()
                return
            stop = threading.Event()
            thread = threading.Thread(target=self._run, args=(new, stop), daemon=True,
                                      name="ragd-watch")
            self._groups[new] = (thread, stop)
        thread.start()

    def _run(self, paths: frozenset[str], mine: threading.Event) -> None:
        from watchfiles import watch

        stop = self._stop

        class _Either:
            def is_set(self) -> bool:
                return stop.is_set() or mine.is_set()

        while not _Either().is_set():
            try:
                # Signals are the daemon's to handle; watchfiles must not install its own.
                events = watch(*sorted(paths), stop_event=_Either(),
                               debounce=self._debounce, step=50, raise_interrupt=False,
                               ignore_permission_denied=True, yield_on_timeout=True,
                               rust_timeout=500, watch_filter=None)
                for changes in events:
                    # The first (empty) yield comes once the OS watches are in place.
                    self.ready.set()
                    if not changes:
                        continue
                    roots = self.watching  # the longest root wins: a project in the vault
                    hints = hints_from_changes(changes, roots, self._exclude,
                                               self._hidden_ok())
                    if hints:
                        self._on_hints(hints, {name: hint_bytes(roots[name], rels)
                                               for name, rels in hints.items()})
            except Exception:  # a watcher failure must not take the daemon down
                log.exception("file watcher failed; sweeps still catch changes; retrying")
                stop.wait(timeout=5)
