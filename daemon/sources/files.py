"""Files under a root, listed and read safely: the part every folder-based source shares.

Nothing here opens a file while listing, reads a file outside the root, follows a symlink
loop, blocks on a FIFO or loads an oversized file; every expected failure comes back as a ``Skip`` with a code from
``ragd.daemon.skips``. Only a root that is missing or unreadable raises, because an empty listing
would otherwise look like "every file was deleted".
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragd.daemon.errors import Interrupted, NotFound, RagdError, TooManyFiles
from ragd.daemon.models import FileState, Skip
from ragd.daemon.sources.containment import inside, open_inside, outside_skip, real_root, too_large

DEFAULT_EXCLUDE: tuple[str, ...] = (".obsidian", ".trash", ".git", "node_modules")
DEFAULT_SUFFIXES: tuple[str, ...] = (".md",)

_TEMP_SUFFIXES = ("~", ".swp", ".swo", ".tmp", ".crdownload")


@dataclass(frozen=True)
class WalkResult:
    """The notes found under a vault root, and the entries that could not be listed."""

    files: list[FileState]  # sorted by path
    skipped: list[tuple[str, Skip]]  # (path relative to the root, why)


# --------------------------------------------------------------------------------------- walk

DEFAULT_MAX_ENTRIES = 200_000
_CHECK_EVERY = 512  # entries between two looks at the stop flag


class _Walk:
    """State of one listing: what was found, what was seen, and the links still to decide."""

    def __init__(self, root: Path, rules: _Rules, should_stop: Callable[[], bool] | None,
                 max_entries: int | None) -> None:
        self.root = os.fspath(root)
        self.real_root = real_root(root)
        self.rules = rules
        self.should_stop = should_stop
        self.max_entries = max_entries
        self.entries = 0
        self.files: list[FileState] = []
        self.skipped: list[tuple[str, Skip]] = []
        self.seen_dirs: set[tuple[int, int]] = set()
        self.seen_files: set[tuple[int, int]] = set()
        # (rel of the link, folder identities from the root down to the link's folder)
        self.links: list[tuple[str, tuple[tuple[int, int], ...]]] = []

    def count(self, n: int) -> None:
        before, self.entries = self.entries, self.entries + n
        if self.max_entries is not None and self.entries > self.max_entries:
            raise TooManyFiles.at(self.root, self.max_entries)
        if before // _CHECK_EVERY != self.entries // _CHECK_EVERY or n == 0:
            self.check()

    def check(self) -> None:
        """Raise ``Interrupted`` if the walk should stop now."""
        if self.should_stop is not None and self.should_stop():
            raise Interrupted(f"listing {self.root} was interrupted")

    def folder(self, path: str, rel: str, ancestors: tuple[tuple[int, int], ...]) -> None:
        """List a real folder and everything below it, links queued for later."""
        stack = [(path, rel, ancestors)]
        while stack:
            path, rel, ancestors = stack.pop()
            entries = _list_dir(path, rel, self.skipped)
            self.count(len(entries))
            for n, entry in enumerate(entries, 1):
                if n % _CHECK_EVERY == 0:  # a flat folder of 100,000 files: a stat each
                    self.check()
                sub = self._visit(entry, rel, ancestors)
                if sub is not None:
                    stack.append(sub)

    def _visit(self, entry: os.DirEntry[str], parent_rel: str,
               ancestors: tuple[tuple[int, int], ...]
               ) -> tuple[str, str, tuple[tuple[int, int], ...]] | None:
        name = entry.name
        rel = f"{parent_rel}/{name}" if parent_rel else name
        rules = self.rules
        if rules.ignored(name, rel):
            return None
        try:
            if entry.is_symlink():
                self.links.append((rel, ancestors))
                return None
            if entry.is_dir(follow_symlinks=False):
                # os.stat, not entry.stat: on Windows the cached entry has st_ino == 0.
                st = os.stat(entry.path, follow_symlinks=False)
                key = (st.st_dev, st.st_ino)
                self.seen_dirs.add(key)
                return entry.path, rel, (*ancestors, key)
            if not rules.is_note(name):
                return None
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            if not isinstance(exc, FileNotFoundError):
                self.skipped.append((_safe(rel), Skip("unreadable", exc.strerror or str(exc))))
            return None
        self._file(rel, st)
        return None

    def _file(self, rel: str, st: os.stat_result) -> None:
        if _safe(rel) != rel:
            self.skipped.append((_safe(rel), Skip("unreadable", "file name is not valid UTF-8")))
        elif stat.S_ISREG(st.st_mode):
            self.seen_files.add((st.st_dev, st.st_ino))
            self.files.append(FileState(path=rel, size=st.st_size, mtime_ns=st.st_mtime_ns))
        else:
            self.skipped.append((rel, Skip("not_regular",
                                           f"file type {stat.filemode(st.st_mode)[0]!r}")))

    def follow_links(self) -> None:
        """Decide every symbolic link, after the real tree: outside the root is skipped; a
        target already listed under its own name is not listed twice; the rest is followed."""
        while self.links:
            # Shallow links first, so a target reached by several links keeps the shortest name.
            self.links.sort(key=lambda link: (link[0].count("/"), link[0]), reverse=True)
            rel, ancestors = self.links.pop()
            self.count(0)
            self._link(rel, ancestors)

    def _link(self, rel: str, ancestors: tuple[tuple[int, int], ...]) -> None:
        name = rel.rpartition("/")[2]
        path = os.path.join(self.root, *rel.split("/"))
        reports = self.rules.reports_link(name)
        try:
            real = os.path.realpath(path, strict=True)
            st = os.stat(real)
        except OSError as exc:
            if reports:
                self.skipped.append((_safe(rel), _link_skip(exc)))
            return
        if not inside(self.real_root, real):
            if reports:
                self.skipped.append((_safe(rel), outside_skip(real)))
            return
        key = (st.st_dev, st.st_ino)
        if stat.S_ISDIR(st.st_mode):
            if key in ancestors:
                self.skipped.append((_safe(rel), Skip("symlink_loop",
                                                      "links back to a folder above it")))
            elif key not in self.seen_dirs:  # else: listed already under its own name
                self.seen_dirs.add(key)
                self.folder(path, rel, (*ancestors, key))
        elif self.rules.is_note(name) and key not in self.seen_files:
            self._file(rel, st)


def walk_vault(
    root: Path,
    *,
    exclude: Sequence[str] = DEFAULT_EXCLUDE,
    suffixes: Sequence[str] = DEFAULT_SUFFIXES,
    should_stop: Callable[[], bool] | None = None,
    max_entries: int | None = DEFAULT_MAX_ENTRIES,
    hidden: bool = False,
    accept: Callable[[str], bool] | None = None,
) -> WalkResult:
    """List the notes under ``root`` without opening any file.

    Names in ``exclude`` (a file or folder name, or a '/'-separated path relative to the root),
    hidden names (leading '.') and editor temp/backup files are ignored. Suffixes match
    case-insensitively. Symbolic links are decided after the real tree is listed
    (``ragd.daemon.sources.containment``): one that resolves outside the root is recorded as
    ``outside_root``, one back to a folder above it as ``symlink_loop``; one whose target is
    already listed under its own name is not listed twice; the others are followed.

    ``hidden`` lists dot-names too (Maildir++ keeps folders as ``.Sent``); ``accept``, when
    given, decides by name which files are listed instead of ``suffixes``.

    Raises ``NotFound`` if the root is not a directory, ``RagdError`` if it cannot be listed,
    ``TooManyFiles`` past ``max_entries`` entries, and ``Interrupted`` as soon as
    ``should_stop()`` says so (checked every few hundred entries).
    """
    try:
        root_st = os.stat(root)
    except OSError as exc:
        raise NotFound(f"vault folder {root} not found", "check the vault path in config.toml") from exc
    if not stat.S_ISDIR(root_st.st_mode):
        raise NotFound(f"vault path {root} is not a folder", "point the vault path at a folder")
    rules = _Rules(frozenset(e.strip("/") for e in exclude), tuple(s.lower() for s in suffixes),
                   hidden, accept)
    walk = _Walk(root, rules, should_stop, max_entries)
    key = (root_st.st_dev, root_st.st_ino)
    walk.seen_dirs.add(key)
    walk.folder(os.fspath(root), "", (key,))
    walk.follow_links()
    walk.files.sort(key=lambda f: f.path)
    walk.skipped.sort(key=lambda s: s[0])
    return WalkResult(files=walk.files, skipped=walk.skipped)


@dataclass(frozen=True)
class _Rules:
    exclude: frozenset[str]
    suffixes: tuple[str, ...]
    hidden: bool = False
    accept: Callable[[str], bool] | None = None

    def ignored(self, name: str, rel: str) -> bool:
        return ((name.startswith(".") and not self.hidden) or name in self.exclude
                or rel in self.exclude)

    def is_note(self, name: str) -> bool:
        lower = name.lower()
        if lower.endswith(_TEMP_SUFFIXES) or (name.startswith("#") and name.endswith("#")):
            return False
        return self.accept(name) if self.accept is not None else lower.endswith(self.suffixes)

    def reports_link(self, name: str) -> bool:
        """Whether a link we cannot resolve is worth reporting: a note, or probably a folder."""
        return self.is_note(name) or not os.path.splitext(name)[1]


def _list_dir(path: str, rel: str, skipped: list[tuple[str, Skip]]) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as it:
            return list(it)
    except FileNotFoundError:
        return []  # removed while we walked: its notes are gone, which is the truth
    except OSError as exc:
        if not rel:
            raise RagdError(f"cannot list the vault folder {path}: {exc.strerror}",
                            "check the folder's permissions") from exc
        skipped.append((rel, Skip("unreadable", f"cannot list folder: {exc.strerror}")))
        return []


def _link_skip(exc: OSError) -> Skip:
    if exc.errno == errno.ELOOP:
        return Skip("symlink_loop", "symbolic link points back at itself")
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return Skip("broken_link", "symbolic link target does not exist")
    return Skip("unreadable", exc.strerror or str(exc))


def _safe(rel: str) -> str:
    """``rel`` if it is valid UTF-8, else a printable stand-in (names from undecodable bytes)."""
    try:
        rel.encode("utf-8")
        return rel
    except UnicodeEncodeError:
        return rel.encode("utf-8", "backslashreplace").decode("utf-8")


def read_bytes(root: str | os.PathLike[str], rel: str, max_bytes: int) -> bytes | Skip:
    """Read ``root/rel`` for indexing, inside the root only; every expected failure is a Skip."""
    opened = open_inside(root, rel, max_bytes=max_bytes)
    if isinstance(opened, Skip):
        return opened
    fd, st = opened
    try:
        with os.fdopen(fd, "rb") as fh:
            # Ask for the size stat gave (+1 to notice growth), not max_bytes: read(n) allocates n.
            limit = max_bytes + 1
            data = fh.read(min(st.st_size + 1, limit))
            if st.st_size < len(data) < limit:
                data += fh.read(limit - len(data))
    except OSError as exc:
        return Skip("unreadable", exc.strerror or str(exc))
    if len(data) > max_bytes:  # grew after the stat
        return too_large(len(data), max_bytes)
    return data


def sha256_inside(root: str | os.PathLike[str], rel: str) -> str | None:
    """Content hash of ``root/rel`` for reconcile (inside the root only); None when it cannot
    be read now."""
    opened = open_inside(root, rel)
    if isinstance(opened, Skip):
        return None
    h = hashlib.sha256()
    try:
        with os.fdopen(opened[0], "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


FINGERPRINT_WINDOW = 64 * 1024


def prefix_fingerprint(root: str | os.PathLike[str], rel: str, upto: int) -> str | None:
    """A hash of the first ``upto`` bytes of ``root/rel``, from its first and last 64 KiB only:
    whether a file that grew kept what was read before (an mbox appended to) or was rewritten
    (compacted, a message deleted: every later byte shifts). Reading a whole multi-GB mailbox
    on every delivery would cost more than re-reading it. None when it cannot be read."""
    opened = open_inside(root, rel)
    if isinstance(opened, Skip):
        return None
    h = hashlib.sha256(str(upto).encode())
    try:
        with os.fdopen(opened[0], "rb") as fh:
            h.update(fh.read(min(upto, FINGERPRINT_WINDOW)))
            if upto > FINGERPRINT_WINDOW:
                fh.seek(max(FINGERPRINT_WINDOW, upto - FINGERPRINT_WINDOW))
                tail = fh.read(upto - fh.tell())
                h.update(tail)
                if fh.tell() < upto:
                    return None  # shorter than it was
            elif fh.tell() < upto:
                return None
    except OSError:
        return None
    return h.hexdigest()
