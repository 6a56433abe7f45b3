"""Files under a root, listed and read safely: the part every folder-based source shares.

Nothing here opens a file while listing, follows a symlink loop, blocks on a FIFO or loads an
oversized file; every expected failure comes back as a ``Skip`` with a code from
``daemon.skips``. Only a root that is missing or unreadable raises, because an empty listing
would otherwise look like "every file was deleted".
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from daemon.errors import NotFound, RagdError
from daemon.models import FileState, Skip

DEFAULT_EXCLUDE: tuple[str, ...] = (".obsidian", ".trash", ".git", "node_modules")
DEFAULT_SUFFIXES: tuple[str, ...] = (".md",)

_TEMP_SUFFIXES = ("~", ".swp", ".swo", ".tmp", ".crdownload")


@dataclass(frozen=True)
class WalkResult:
    """The notes found under a vault root, and the entries that could not be listed."""

    files: list[FileState]  # sorted by path
    skipped: list[tuple[str, Skip]]  # (path relative to the root, why)


# --------------------------------------------------------------------------------------- walk


def walk_vault(
    root: Path,
    *,
    exclude: Sequence[str] = DEFAULT_EXCLUDE,
    suffixes: Sequence[str] = DEFAULT_SUFFIXES,
) -> WalkResult:
    """List the notes under ``root`` without opening any file.

    Names in ``exclude`` (a file or folder name, or a '/'-separated path relative to the root),
    hidden names (leading '.') and editor temp/backup files are ignored. Suffixes match
    case-insensitively. Directory symlinks are followed; a link back to a directory already on
    the current path is recorded as ``symlink_loop`` instead of being entered. Raises
    ``NotFound`` if the root is not a directory and ``RagdError`` if it cannot be listed.
    """
    try:
        root_st = os.stat(root)
    except OSError as exc:
        raise NotFound(f"vault folder {root} not found", "check the vault path in config.toml") from exc
    if not stat.S_ISDIR(root_st.st_mode):
        raise NotFound(f"vault path {root} is not a folder", "point the vault path at a folder")
    rules = _Rules(frozenset(e.strip("/") for e in exclude), tuple(s.lower() for s in suffixes))
    files: list[FileState] = []
    skipped: list[tuple[str, Skip]] = []
    stack: list[tuple[str, str, frozenset[tuple[int, int]]]] = [
        (os.fspath(root), "", frozenset({(root_st.st_dev, root_st.st_ino)}))
    ]
    while stack:
        path, rel, ancestors = stack.pop()
        entries = _list_dir(path, rel, skipped)
        for entry in entries:
            _visit(entry, rel, ancestors, rules, files, skipped, stack)
    files.sort(key=lambda f: f.path)
    skipped.sort(key=lambda s: s[0])
    return WalkResult(files=files, skipped=skipped)


@dataclass(frozen=True)
class _Rules:
    exclude: frozenset[str]
    suffixes: tuple[str, ...]

    def ignored(self, name: str, rel: str) -> bool:
        return name.startswith(".") or name in self.exclude or rel in self.exclude

    def is_note(self, name: str) -> bool:
        lower = name.lower()
        if lower.endswith(_TEMP_SUFFIXES) or (name.startswith("#") and name.endswith("#")):
            return False
        return lower.endswith(self.suffixes)

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


def _visit(
    entry: os.DirEntry[str],
    parent_rel: str,
    ancestors: frozenset[tuple[int, int]],
    rules: _Rules,
    files: list[FileState],
    skipped: list[tuple[str, Skip]],
    stack: list[tuple[str, str, frozenset[tuple[int, int]]]],
) -> None:
    name = entry.name
    rel = f"{parent_rel}/{name}" if parent_rel else name
    if rules.ignored(name, rel):
        return
    is_link = False
    try:
        is_link = entry.is_symlink()
        if is_link or entry.is_dir(follow_symlinks=False):
            # os.stat, not entry.stat: on Windows the cached entry has st_ino == 0.
            st = os.stat(entry.path)
        elif rules.is_note(name):
            st = entry.stat(follow_symlinks=False)
        else:
            return
    except OSError as exc:
        if is_link and rules.reports_link(name):
            skipped.append((_safe(rel), _link_skip(exc)))
        elif not is_link and not isinstance(exc, FileNotFoundError):
            skipped.append((_safe(rel), Skip("unreadable", exc.strerror or str(exc))))
        return
    if stat.S_ISDIR(st.st_mode):
        key = (st.st_dev, st.st_ino)
        if key in ancestors:
            skipped.append((_safe(rel), Skip("symlink_loop", "links back to a folder above it")))
        else:
            stack.append((entry.path, rel, ancestors | {key}))
        return
    if not rules.is_note(name):
        return
    if _safe(rel) != rel:
        skipped.append((_safe(rel), Skip("unreadable", "file name is not valid UTF-8")))
    elif stat.S_ISREG(st.st_mode):
        files.append(FileState(path=rel, size=st.st_size, mtime_ns=st.st_mtime_ns))
    else:
        skipped.append((rel, Skip("not_regular", f"file type {stat.filemode(st.st_mode)[0]!r}")))


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


def read_bytes(path: str, max_bytes: int) -> bytes | Skip:
    """Read a file for indexing; every expected failure becomes a Skip."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return Skip("not_regular", "not a regular file")
        if st.st_size > max_bytes:
            return _too_large(st.st_size, max_bytes)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        with os.fdopen(os.open(path, flags), "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # replaced since the stat
                return Skip("not_regular", "not a regular file")
            # Ask for the size stat gave (+1 to notice growth), not max_bytes: read(n) allocates n.
            limit = max_bytes + 1
            data = fh.read(min(st.st_size + 1, limit))
            if st.st_size < len(data) < limit:
                data += fh.read(limit - len(data))
    except (FileNotFoundError, NotADirectoryError):
        if os.path.lexists(path):
            return Skip("broken_link", "symbolic link target does not exist")
        return Skip("vanished", "file disappeared before it could be read")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Skip("symlink_loop", "symbolic link points back at itself")
        return Skip("unreadable", exc.strerror or str(exc))
    if len(data) > max_bytes:  # grew after the stat
        return _too_large(len(data), max_bytes)
    return data


def _too_large(size: int, max_bytes: int) -> Skip:
    return Skip("too_large", f"{size:,} bytes is over the limit of {max_bytes:,}")
