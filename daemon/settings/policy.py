"""What may become a collection: its name, and the folder it indexes.

One function per question, used by the CLI, the IPC handlers and the MCP bridge alike, so a name
or a folder refused in one place is refused everywhere. Standard library only: thin clients
import this module.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath

from ragd.daemon.errors import InvalidArgument, PathRefused

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


# -- paths as text ----------------------------------------------------------------------------

# PATH_MAX on Linux; Windows' long paths are longer, but no document a person names is.
MAX_PATH_CHARS = 4096


def check_path_text(raw: object, param: str = "path") -> str:
    """``raw`` stripped, if it can name a file at all: a non-empty string of at most
    :data:`MAX_PATH_CHARS` characters without a NUL byte (which no filesystem allows, and which
    Python's ``os`` functions reject with ``ValueError``)."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidArgument(param, "is required and must be a non-empty string",
                              "pass an absolute path")
    if "\x00" in raw:
        raise PathRefused(param, "contains a NUL byte, which no file name can hold",
                          "pass the path as the file system shows it", code="nul_in_path")
    if len(raw) > MAX_PATH_CHARS:
        raise InvalidArgument(param, f"is {len(raw):,} characters long, over the limit of "
                              f"{MAX_PATH_CHARS:,}", "pass a real path")
    return raw.strip()


def hidden_part(path: str | os.PathLike[str], *, windows: bool | None = None) -> str | None:
    """The first hidden component of ``path`` (``.ssh`` in ``~/.ssh/id_rsa``), or None.
    ``.`` and ``..`` are not names; normalise first if the path may hold them."""
    windows = os.name == "nt" if windows is None else windows
    pure: type[PurePath] = PureWindowsPath if windows else PurePosixPath
    for part in pure(os.fspath(path)).parts:
        if part.startswith(".") and part not in (".", ".."):
            return part
    return None


# -- folders ----------------------------------------------------------------------------------

# Refused together with everything below them: the system's own files.
_POSIX_SYSTEM = ("/etc", "/proc", "/sys", "/dev", "/boot", "/bin", "/sbin", "/lib", "/lib32",
                 "/lib64", "/libx32", "/usr", "/run", "/System", "/private/etc",
                 "/private/var/db", "/Library", "/var/log", "/var/lib", "/var/cache",
                 "/var/spool", "/var/run", "/var/db", "/private/var/log")
# Not files but the kernel's view of processes and devices: reading them reads the daemon's
# own environment (/proc/self/environ) or blocks (/dev/zero). Nobody converts them.
_POSIX_PSEUDO = ("/proc", "/sys", "/dev")
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


def _norm(p: PurePath, windows: bool) -> str:
    text = str(p).rstrip("\\/") or str(p)
    return text.casefold() if windows else text


def _within(p: PurePath, base: PurePath, windows: bool) -> bool:
    sep = "\\" if windows else "/"
    return _norm(p, windows) == _norm(base, windows) or \
        _norm(p, windows).startswith(_norm(base, windows).rstrip(sep) + sep)


def check_root(path: str | os.PathLike[str], *, guarded: Iterable[str | os.PathLike[str]] = (),
               home: str | os.PathLike[str] | None = None, windows: bool | None = None,
               env: dict[str, str] | None = None, hidden: bool = False) -> str:
    """Refuse a folder that must never become a collection; return it resolved.

    Refused: a relative path (a client's working directory means nothing to the daemon), the
    filesystem root or a drive root, the home folder itself, system folders (log folders
    included), broad folders such as ``/home`` or ``/tmp`` themselves, and any folder inside
    ``guarded`` (ragd's own data, state and config folders) or holding one of them. System
    folders are refused as named and as resolved: ``/proc/self/cwd`` is in ``/proc`` whatever
    it leads to. With ``hidden`` (a request from an AI client), a hidden folder or one inside
    a hidden folder (``~/.ssh``, ``~/.aws``, any dot-folder) is refused too. The path need not
    exist here; callers check that it is a folder.
    """
    windows = os.name == "nt" if windows is None else windows
    pure: type[PurePath] = PureWindowsPath if windows else PurePosixPath
    raw = os.fspath(path)
    if raw:
        raw = check_path_text(raw, "path")
    if not raw or not pure(raw).is_absolute():
        raise InvalidArgument("path", f"{raw!r} is relative",
                              "pass an absolute path: the daemon cannot know which folder a "
                              "relative one meant")
    # Resolved (links and '..' gone) when checking for this platform; the other platform's
    # rules are unit-tested on its pure paths.
    native = windows == (os.name == "nt")
    home_p = pure(os.fspath(home if home is not None else Path.home()))
    if windows:
        system, broad = _windows_folders(env if env is not None else dict(os.environ))
    else:
        system, broad = list(_POSIX_SYSTEM), list(_POSIX_BROAD)
    named = pure(os.path.normpath(raw) if native else raw)
    try:
        target = pure(os.path.realpath(raw) if native else raw)
    except OSError as exc:  # a link it may not read (/proc/1/root): decided by its name
        target = named
        if not any(_within(named, pure(s), windows) for s in system):
            raise PathRefused("path", f"{raw} cannot be resolved: {exc.strerror or exc}",
                              "pass a folder of yours", code="unreadable") from None

    def norm(p: PurePath) -> str:
        return _norm(p, windows)

    def within(p: PurePath, base: PurePath) -> bool:
        return _within(p, base, windows)

    why = ""
    if target == pure(target.anchor):
        why = "is the root of the filesystem"
    elif norm(target) == norm(home_p):
        why = "is your whole home folder"
    elif any(within(target, pure(s)) or within(named, pure(s)) for s in system):
        why = "is a system folder"
    elif hidden and (hidden_part(named, windows=windows) or hidden_part(target, windows=windows)):
        part = hidden_part(named, windows=windows) or hidden_part(target, windows=windows)
        raise PathRefused("path", f"{raw} is or lies in a hidden folder ({part})",
                          "hidden folders hold settings and keys (~/.ssh, ~/.aws, ~/.gnupg), so "
                          "an AI client may not index them; the user can, at a terminal: "
                          "`ragd index --collection NAME PATH`", code="hidden_path")
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


# -- what rag_convert may read ----------------------------------------------------------------

# `[convert] allow` names these folders by their place, not their path: platformdirs knows
# what each system (and each language: ~/Dokumente) calls them.
ALLOW_PLACES = ("<documents>", "<downloads>", "<desktop>")


def allow_folders(entries: Iterable[str]) -> list[str]:
    """``[convert] allow`` as absolute folders: ``<documents>``, ``<downloads>`` and
    ``<desktop>`` become the user's own folders (platformdirs), ``~`` is expanded, relative
    entries are dropped (nothing anchors them)."""
    import platformdirs  # the bridge never needs it; the daemon has it loaded already

    places = {"<documents>": platformdirs.user_documents_dir,
              "<downloads>": platformdirs.user_downloads_dir,
              "<desktop>": platformdirs.user_desktop_dir}
    out: list[str] = []
    for entry in entries:
        text = entry.strip()
        place = places.get(text.lower())
        folder = place() if place is not None else os.path.expanduser(text)
        if folder and os.path.isabs(folder) and "\x00" not in folder:
            out.append(os.path.normpath(folder))
    return out


@dataclass(frozen=True)
class Reach:
    """Where a conversion may read. ``restricted`` (an MCP client, or any caller but the
    command line) limits it to ``collections`` and ``allow`` (folders, links resolved), never
    a hidden file or folder, never ``guarded`` (ragd's own folders)."""

    collections: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    guarded: tuple[str, ...] = ()
    restricted: bool = True

    @classmethod
    def build(cls, collections: Iterable[str | os.PathLike[str]],
              allow: Iterable[str | os.PathLike[str]],
              guarded: Iterable[str | os.PathLike[str]], *, restricted: bool) -> Reach:
        """Roots resolved once per request. A collection root the folder policy refuses now
        (a link swapped in to a system folder) gives no reach."""
        guarded_real = tuple(os.path.realpath(g) for g in guarded)
        roots = []
        for root in collections:
            try:
                roots.append(check_root(root, guarded=guarded_real))
            except InvalidArgument:
                continue
        allowed = [os.path.realpath(a) for a in allow]
        return cls(tuple(roots), tuple(a for a in allowed if not _system_place(a)),
                   guarded_real, restricted)


def _system_place(real: str) -> bool:
    """The filesystem root, or a system folder: never a folder to allow (a user who writes
    "/" in [convert] allow still does not open /etc to an AI client)."""
    if real == os.path.dirname(real):
        return True
    if os.name == "nt":
        system, _ = _windows_folders(dict(os.environ))
    else:
        system = list(_POSIX_SYSTEM)
    return any(_inside(os.path.realpath(s), real) or _inside(s, real) for s in system)


@dataclass(frozen=True)
class Target:
    """A document a conversion may read: ``root`` (resolved) and ``rel`` inside it, as
    ``ragd.daemon.sources.containment.open_inside`` takes them, and whether the root is a
    collection's (its conversion is then kept in the doc store)."""

    named: str  # the absolute path as the caller named it (for messages and the answer)
    root: str
    rel: str
    in_collection: bool


def _inside(base: str, path: str) -> bool:
    if os.name == "nt":
        base, path = os.path.normcase(base), os.path.normcase(path)
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


def _rel(root: str, real: str) -> str:
    return "/".join(Path(os.path.relpath(real, root)).parts)


def _first_root(roots: Sequence[str], real: str) -> str | None:
    inside = [r for r in roots if _inside(r, real)]
    return max(inside, key=len) if inside else None


def path_kind(path: str) -> str:
    """What a non-document is, in words ("a character device", "a named pipe", ...)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return "a system file"
    if stat.S_ISDIR(mode):
        return "a folder"
    return {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
            stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket"}.get(
                stat.S_IFMT(mode), "a system file")


def named_document(raw: object, param: str = "file_path", *, hidden: bool = True) -> str:
    """The checks a path's text allows, made before anything is looked up (the MCP bridge
    makes them; the daemon again): a string without NUL of sensible length, absolute once
    ``~`` is expanded, not under /proc, /sys or /dev as written, and (``hidden``) without a
    hidden component. Returns it expanded and normalised."""
    text = check_path_text(raw, param)
    named = os.path.expanduser(text)
    if not os.path.isabs(named):
        raise InvalidArgument(param, f"{text!r} is relative",
                              "pass the absolute path of the document (the MCP server's "
                              "working directory is not yours)")
    named = os.path.normpath(named)
    _check_not_pseudo(param, named, named)
    if hidden:
        _check_not_hidden(param, named, named)
    return named


def _check_not_pseudo(param: str, named: str, real: str) -> None:
    if os.name != "nt" and any(_inside(p, x) for p in _POSIX_PSEUDO for x in (named, real)):
        raise PathRefused(param, f"{named} is {path_kind(real)} under /proc, /sys or /dev, "
                          "not a document", "pass the path of a document", code="system_file")


def _check_not_hidden(param: str, named: str, real: str) -> None:
    part = hidden_part(named) or hidden_part(real)
    if part:
        where = f"is hidden ({part})" if part in (os.path.basename(named),
                                                   os.path.basename(real)) \
            else f"lies in the hidden folder {part}"
        raise PathRefused(param, f"{named} {where}",
                          "hidden files and folders hold settings and keys, so an AI client "
                          "may not read them; the user can, at a terminal: `ragd convert "
                          "PATH`", code="hidden_path")


def convert_target(raw: object, reach: Reach, param: str = "file_path") -> Target:
    """Decide whether a conversion may read ``raw``; the refusals are ``PathRefused`` with a
    code. Decided on the path as named and as resolved (links followed, non-strict), before
    anything about the file is looked at, so a refused path reveals nothing, not even
    whether it exists. Whether it is a readable regular file is the reader's question
    (``open_inside``), which resolves it again and checks it is still inside ``root``."""
    named = named_document(raw, param, hidden=False)
    try:
        real = os.path.realpath(named)
    except OSError as exc:  # a link it may not read
        raise PathRefused(param, f"{named} cannot be resolved: {exc.strerror or exc}",
                          "pass the path of a document of yours", code="unreadable") from None
    _check_not_pseudo(param, named, real)
    collection = _first_root(reach.collections, real)
    if not reach.restricted:
        return Target(named, os.path.dirname(real), os.path.basename(real),
                      collection is not None)
    _check_not_hidden(param, named, real)
    if any(_inside(g, real) or _inside(g, named) for g in reach.guarded):
        raise PathRefused(param, f"{named} is in ragd's own data", "pass a document of yours",
                          code="ragd_data")
    root = collection or _first_root(reach.allow, real)
    if root is None:
        shown = ", ".join(reach.allow) or "none"
        raise PathRefused(
            param, f"{named} is outside the folders an AI client may read: ragd's "
            f"collections and [convert] allow ({shown})",
            "add its folder to `allow` under [convert] in config.toml (RAGD_CONVERT_ALLOW), "
            "or convert it at a terminal with `ragd convert PATH`", code="outside_reach")
    return Target(named, root, _rel(root, real), collection is not None)
