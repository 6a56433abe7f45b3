"""What may become a collection: its name, and the folder it indexes.

One function per question, used by the CLI, the IPC handlers and the MCP bridge alike, so a name
or a folder refused in one place is refused everywhere. Standard library only: thin clients
import this module.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath

from daemon.errors import InvalidArgument

NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
_NAME = re.compile(NAME_PATTERN)
# Collection types are also `rag_search(collection=...)` filters; system collections are
# configured, never created by a request; "all" means every collection to `index --rebuild`.
COLLECTION_TYPES = ("system", "code", "project")
SYSTEM_COLLECTIONS = ("obsidian", "email", "calibre", "rss")
RESERVED_NAMES = frozenset((*COLLECTION_TYPES, *SYSTEM_COLLECTIONS, "all"))
# Further vaults, mail paths, libraries and feeds: obsidian-<folder>, email-<name>, ...
RESERVED_PREFIXES = ("obsidian-", "email-", "calibre-", "rss-")

NAME_RULE = ("1-64 characters: letters, digits, '_', '-' and '.', starting with a letter or "
             "digit")


def check_name(name: object, param: str = "collection") -> str:
    """``name`` if it is a well-formed collection name; else a clear InvalidArgument."""
    if not isinstance(name, str):
        raise InvalidArgument(param, f"must be a string, not {type(name).__name__}")
    if not _NAME.fullmatch(name):
        shown = name if len(name) <= 70 else name[:64] + "…"
        raise InvalidArgument(param, f"{shown!r} is not a valid collection name",
                              f"use {NAME_RULE}")
    return name


def check_new_name(name: object, param: str = "collection") -> str:
    """A name a request may create a project collection under (not a reserved one)."""
    checked = check_name(name, param)
    lower = checked.lower()
    if lower in RESERVED_NAMES or lower.startswith(RESERVED_PREFIXES):
        raise InvalidArgument(param, f"{checked!r} is reserved for ragd's own collections "
                              "and collection types", "choose another name for the project")
    return checked


# -- folders ----------------------------------------------------------------------------------

# Refused together with everything below them: the system's own files.
_POSIX_SYSTEM = ("/etc", "/proc", "/sys", "/dev", "/boot", "/bin", "/sbin", "/lib", "/lib32",
                 "/lib64", "/libx32", "/usr", "/run", "/System", "/private/etc",
                 "/private/var/db", "/Library")
# Refused themselves (too broad), though a folder below them may be a fine project.
_POSIX_BROAD = ("/", "/home", "/Users", "/var", "/tmp", "/private", "/private/var",
                "/private/tmp", "/mnt", "/media", "/opt", "/srv", "/root", "/Volumes",
                "/Applications")


def _windows_folders(env: dict[str, str]) -> tuple[list[str], list[str]]:
    drive = env.get("SystemDrive", "C:")
    system = [env.get("SystemRoot", drive + "\\Windows"), env.get("ProgramFiles", ""),
              env.get("ProgramFiles(x86)", ""), env.get("ProgramData", ""),
              drive + "\\Windows"]
    broad = [drive + "\\Users", env.get("PUBLIC", "")]
    return [s for s in system if s], [b for b in broad if b]


def check_root(path: str | os.PathLike[str], *, guarded: Iterable[str | os.PathLike[str]] = (),
               home: str | os.PathLike[str] | None = None, windows: bool | None = None,
               env: dict[str, str] | None = None) -> str:
    """Refuse a folder that must never become a collection; return it resolved.

    Refused: a relative path (a client's working directory means nothing to the daemon), the
    filesystem root or a drive root, the home folder itself, system folders, broad folders
    such as ``/home`` or ``/tmp`` themselves, and any folder inside ``guarded`` (ragd's own
    data, state and config folders) or holding one of them. The path need not exist here;
    callers check that it is a folder.
    """
    windows = os.name == "nt" if windows is None else windows
    pure: type[PurePath] = PureWindowsPath if windows else PurePosixPath
    raw = os.fspath(path)
    if not raw or not pure(raw).is_absolute():
        raise InvalidArgument("path", f"{raw!r} is relative",
                              "pass an absolute path: the daemon cannot know which folder a "
                              "relative one meant")
    # Resolved (links and '..' gone) when checking for this platform; the other platform's
    # rules are unit-tested on its pure paths.
    native = windows == (os.name == "nt")
    target = pure(os.path.realpath(raw) if native else raw)
    home_p = pure(os.fspath(home if home is not None else Path.home()))
    if windows:
        system, broad = _windows_folders(env if env is not None else dict(os.environ))
    else:
        system, broad = list(_POSIX_SYSTEM), list(_POSIX_BROAD)
    sep = "\\" if windows else "/"

    def norm(p: PurePath) -> str:
        text = str(p).rstrip("\\/") or str(p)
        return text.casefold() if windows else text

    def within(p: PurePath, base: PurePath) -> bool:
        return norm(p) == norm(base) or norm(p).startswith(norm(base).rstrip(sep) + sep)

    why = ""
    if target == pure(target.anchor):
        why = "is the root of the filesystem"
    elif norm(target) == norm(home_p):
        why = "is your whole home folder"
    elif any(within(target, pure(s)) for s in system):
        why = "is a system folder"
    elif any(norm(target) == norm(pure(b)) for b in broad):
        why = "is too broad to index as one collection"
    else:
        for g in guarded:
            gp = pure(os.fspath(g))
            if within(target, gp) or within(gp, target):
                why = f"holds ragd's own data ({gp})" if within(gp, target) else \
                    "is inside ragd's own data folder"
                break
    if why:
        raise InvalidArgument("path", f"{raw} {why}",
                              "index the folder that holds the documents themselves, e.g. "
                              "~/Documents/Project")
    return str(target)
