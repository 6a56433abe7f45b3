"""Safe writes to a vault (decisions 0028, 0045): contained, atomic, one writer per path, and
never over someone's change nor shorter than meant.

- **Where**: the path's text is checked first (``ragd.daemon.notes.places``: relative, no '..', no
  hidden or excluded component, so never ``.obsidian/``); a name the write creates must be one
  every common file system holds (``ragd.daemon.notes.names``); then the parent folder's real
  path must lie inside the vault's real root, and an existing target must be a regular file
  whose real path lies inside it too (a link out of the vault is refused as ``outside_root``).
- **Who**: every write is one step under the lock of each path it touches
  (``ragd.daemon.notes.locks``, taken by ``ragd.daemon.notes.steps``): the file as it is on disk
  is read, compared with ``if_match`` and replaced without another ragd call in between.
- **How**: the new bytes go to a temporary file in the same folder, are flushed to disk, and
  replace the note with one rename, as Obsidian's own saves do: a reader (the indexer, the
  user's editor) sees the old note or the new one, never half of it. A new file is linked in
  under its name, which fails if that name exists (whoever made it, ragd or not), and gets the
  mode the user's umask gives (0644 usually), as the vault's other files have.
- **Over what**: every write takes ``if_match``, the etag (SHA-256 of the bytes) a read gave.
  A mismatch is refused and nothing changes. Replacing a whole existing note requires it.
- **Never shorter**: a note is loaded whole or not at all. One over ``MAX_WRITE_BYTES`` is
  refused for edit and append (``too_large``, with the limit), never cut and written back.
- **Edit** replaces text found exactly once; none or several matches change nothing, and the
  refusal says how many there were and where the closest near-miss is
  (``ragd.daemon.notes.nearmiss``: linear in the note, capped by a time budget).
- **Rename** moves the file without ever replacing one (a hard link, or ``renameat2``'s
  no-replace), then rewrites the links and embeds that resolved to it in every other note
  (each with its own if-unchanged check), keeping ``|alias``, ``#heading`` and embeds.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import functools
import hashlib
import os
import posixpath
import tempfile
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ragd.daemon.errors import InvalidArgument, PathRefused
from ragd.daemon.notes import names
from ragd.daemon.notes.nearmiss import near_miss
from ragd.daemon.notes.places import WriteRefused
from ragd.daemon.notes.reading import MAX_NOTE_BYTES
from ragd.daemon.sources.containment import inside, real_root
from ragd.daemon.stores import links

MAX_WRITE_BYTES = MAX_NOTE_BYTES  # what a write may load and change: what a read may load
# Errors that no other way of writing would avoid; any other failure of a hard link means the
# file system has none (FAT, exFAT, some network shares: EPERM, ENOTSUP, EINVAL on Windows).
FATAL = frozenset({errno.ENAMETOOLONG, errno.ENOSPC, errno.EROFS,
                   getattr(errno, "EDQUOT", errno.ENOSPC)})


@dataclass(frozen=True)
class Target:
    """Where a write lands: the vault-relative path and the real path written."""

    rel: str
    real: str
    exists: bool


def target(root: str, rel: str, param: str, *, create_dirs: bool = True,
           creating: bool = False) -> Target:
    """The real place ``rel`` names inside the vault ``root``; refused if any link on the
    way (a parent folder, the file itself) leads outside it, or it is not a regular file.
    With ``creating``, the names the write would create are checked first
    (``ragd.daemon.notes.names``), before any folder is made."""
    root_real = real_root(root)
    path = os.path.join(root, *rel.split("/"))
    if creating:
        names.check_new(root, rel, param)
    parent = os.path.dirname(path)
    parent_real = os.path.realpath(parent)
    if not inside(root_real, parent_real):
        raise PathRefused(param, f"{rel!r} lies in a folder that leads outside the vault "
                          f"({parent_real})", "write inside the vault", code="outside_root")
    if os.path.lexists(path):
        real = os.path.realpath(path)
        if not inside(root_real, real):
            raise PathRefused(param, f"{rel!r} is a link to {real}, outside the vault",
                              "write inside the vault", code="outside_root")
        if os.path.isfile(real):
            return Target(rel, real, True)
        if os.path.lexists(real):
            raise PathRefused(param, f"{rel!r} is not a regular file", "name a note",
                              code="not_regular")
        # Gone since the look above (another call moved it): absent, as the step will see.
    if not os.path.isdir(parent_real):
        if not create_dirs:
            raise PathRefused(param, f"the folder of {rel!r} does not exist",
                              "pass create_dirs=true or write into an existing folder",
                              code="not_found")
        try:
            os.makedirs(parent_real, exist_ok=True)
        except OSError as exc:
            raise os_refusal(param, rel, exc) from None
        if not inside(root_real, os.path.realpath(parent_real)):  # a race with a link
            raise PathRefused(param, f"{rel!r} lies outside the vault", "write inside the vault",
                              code="outside_root")
    return Target(rel, os.path.join(parent_real, os.path.basename(path)), False)


def os_refusal(param: str, rel: str, exc: OSError) -> PathRefused:
    """An expected OS refusal as a tool error with a code, never an internal error."""
    if exc.errno == errno.ENAMETOOLONG:
        return PathRefused(param, f"{rel!r} is longer than the file system allows",
                           "choose a shorter name or a shallower folder", code="name_too_long")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return PathRefused(param, f"{rel!r} cannot be written here: {exc.strerror}",
                           "check the vault folder's permissions", code="unwritable")
    if exc.errno == errno.ENOSPC:
        return PathRefused(param, "the disk is full; nothing was written", "free some space",
                           code="disk_full")
    return PathRefused(param, f"{rel!r} cannot be written: {exc.strerror or exc}",
                       "check the vault folder", code="unwritable")


def _too_large(t: Target, param: str, size: int) -> WriteRefused:
    return WriteRefused(param, f"{t.rel!r} is {size:,} bytes, over the {MAX_WRITE_BYTES:,} "
                        "a tool may load and change; nothing was written (a note is never "
                        "written back cut short)", "edit it in Obsidian, or split it into "
                        "smaller notes there", code="too_large")


def current(t: Target, param: str = "path") -> bytes | None:
    """The file's bytes as they are on disk now, whole; None when it does not exist. A file
    over ``MAX_WRITE_BYTES`` is refused (``too_large``): a prefix is never returned, so an
    edit can never write back less than it read."""
    try:
        with open(t.real, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_WRITE_BYTES:
                raise _too_large(t, param, size)
            data = fh.read(MAX_WRITE_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise PathRefused(param, f"{t.rel!r} cannot be read: {exc.strerror or exc}",
                          "check the file's permissions", code="unreadable") from None
    if len(data) > MAX_WRITE_BYTES:  # grew after the fstat
        raise _too_large(t, param, len(data))
    return data


def disk_etag(real: str) -> str | None:
    """The etag of the file at ``real`` now (streamed: any size), or None if it is gone."""
    digest = hashlib.sha256()
    try:
        with open(real, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise PathRefused("path", f"{real!r} cannot be read: {exc.strerror or exc}",
                          "check the file's permissions", code="unreadable") from None
    return digest.hexdigest()


def check_etag(rel: str, now: str | None, if_match: str | None, *,
               required: bool = False) -> None:
    """Refuse (``etag_mismatch``) when the note, whose etag on disk is ``now`` (None: absent),
    is not what ``if_match`` says it was read as; with ``required``, also when an existing
    note is replaced without one (``exists``)."""
    if if_match is None:
        if required and now is not None:
            raise WriteRefused("if_match", f"{rel!r} exists; replacing it needs the etag of "
                               "a read, so that no change made since is lost",
                               "read the note (its etag), then write again with if_match, "
                               "or use edit for a targeted change", code="exists")
        return
    if now != if_match.strip().lower():
        state = "no longer exists" if now is None else "changed since it was read"
        raise WriteRefused("if_match", f"{rel!r} {state} (etag {now or 'none'}, not "
                           f"{if_match.strip()[:64]}); nothing was written",
                           "read the note again and redo the change on what it says now",
                           code="etag_mismatch")


@functools.lru_cache(maxsize=1)
def umask() -> int:
    """The daemon's umask, read once. Linux tells it in /proc; elsewhere it is set and put
    back, and set to 0o077 meanwhile, so a file another thread creates in that instant is
    made more private, never less."""
    with contextlib.suppress(OSError, ValueError), \
            open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    old = os.umask(0o077)
    os.umask(old)
    return old


def new_file_mode() -> int:
    """The mode of a new note: what any program's new file gets here (0666 less the umask)."""
    return 0o666 & ~umask()


def temp_with(folder: str, name: str, data: bytes, mode: int | None) -> str:
    """A temporary file in ``folder`` (hidden: the watcher passes it by) holding ``data``,
    flushed to disk, with ``mode``; its path."""
    if len(data) > MAX_WRITE_BYTES:
        raise InvalidArgument("content", f"is {len(data):,} bytes; a note may have at most "
                              f"{MAX_WRITE_BYTES:,}", "split it into several notes")
    stem = name.encode("utf-8", "surrogatepass")[:80].decode("utf-8", "ignore")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=".ragd-tmp", dir=folder)
    except OSError as exc:
        raise os_refusal("path", name, exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):  # a full disk, a quota: nothing was changed
            raise os_refusal("path", name, exc) from None
        raise
    return tmp


def atomic_write(real: str, data: bytes) -> None:
    """Replace the file at ``real`` with ``data`` through a temporary file in its folder and
    one rename, keeping its mode (a file gone meanwhile gets a new note's mode)."""
    folder, name = os.path.split(real)
    try:
        mode = os.stat(real).st_mode & 0o777
    except OSError:
        mode = new_file_mode()
    tmp = temp_with(folder, name, data, mode)
    try:
        os.replace(tmp, real)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise os_refusal("path", name, exc) from None
        raise


def note_bytes(content: str, frontmatter: dict[str, Any] | None) -> bytes:
    """A note's bytes: optional front matter (YAML) above the body, UTF-8."""
    if frontmatter:
        import yaml

        head = yaml.safe_dump(frontmatter, allow_unicode=True, sort_keys=False).strip()
        content = f"---\n{head}\n---\n{content}"
    return content.encode("utf-8")


def attachment_bytes(encoded: str) -> bytes:
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument("content_base64", "is not valid base64",
                              "encode the file's bytes with standard base64") from None


def _decoded(rel: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise WriteRefused("path", f"{rel!r} is not UTF-8 text; it is left as it is",
                           "edit it in Obsidian", code="not_text") from None


def edited(rel: str, data: bytes, old: str, new: str) -> bytes:
    """The note with ``old`` replaced by ``new``, if ``old`` occurs exactly once."""
    text = _decoded(rel, data)
    count = text.count(old)
    if count == 1:
        return text.replace(old, new, 1).encode("utf-8")
    if count > 1:
        lines = [text.count("\n", 0, i) + 1 for i in _find_all(text, old)][:10]
        raise WriteRefused("old_text", f"occurs {count} times in {rel!r} (lines "
                           f"{', '.join(map(str, lines))}); nothing was changed",
                           "include more of the surrounding text so it occurs once",
                           code="many_matches")
    raise WriteRefused("old_text", f"does not occur in {rel!r}; nothing was changed."
                       + near_miss(text, old), "read the note and copy old_text exactly "
                       "(spaces, line breaks and case count)", code="no_match")


def _find_all(text: str, part: str) -> list[int]:
    out: list[int] = []
    at = text.find(part)
    while at >= 0 and len(out) < 100:
        out.append(at)
        at = text.find(part, at + 1)
    return out


def appended(rel: str, data: bytes, content: str) -> bytes:
    text = _decoded(rel, data)
    sep = "" if not text or text.endswith("\n") else "\n"
    return (text + sep + content).encode("utf-8")


# -- links on rename --------------------------------------------------------------------------
def _wikilink_target(new_rel: str, old_target: str, unique_name: bool) -> str:
    """What a wikilink to the renamed note says now: its new name when that name is unique
    in the vault and the old link was a bare name, else its path (without .md)."""
    stem = new_rel[:-3] if new_rel.lower().endswith(".md") else new_rel
    if unique_name and "/" not in old_target:
        return posixpath.basename(stem)
    return stem


def _md_target(new_rel: str, from_rel: str, old_target: str) -> str:
    """A markdown link's new target: relative to the linking note, as written before, or
    from the vault root when it was so."""
    if old_target.startswith("/"):
        path = "/" + new_rel
    else:
        path = posixpath.relpath(new_rel, posixpath.dirname(from_rel) or ".")
    return quote(path, safe="/.-_~()!'*")


def rewrite_links(text: str, from_rel: str, hits: list[links.Link], new_rel: str,
                  unique_name: bool) -> str:
    """``text`` with each link of ``hits`` pointed at ``new_rel``, alias, heading and embed
    mark kept. Offsets in ``hits`` are offsets in ``text``."""
    out: list[str] = []
    last = 0
    for lk in sorted(hits, key=lambda h: h.start):
        out.append(text[last:lk.start])
        heading = f"#{lk.heading}" if lk.heading else ""
        wiki = text.startswith(("[[", "![["), lk.start)
        if not wiki:
            target = _md_target(new_rel, from_rel, lk.target)
            bang = "!" if text[lk.start] == "!" else ""
            out.append(f"{bang}[{lk.alias}]({target}{heading})")
        else:
            bang = "!" if lk.kind == "embed" else ""
            alias = f"|{lk.alias}" if lk.alias else ""
            piped = "\\|" if "\\|" in text[lk.start:lk.end] else "|"
            alias = alias.replace("|", piped, 1)
            out.append(f"{bang}[[{_wikilink_target(new_rel, lk.target, unique_name)}"
                       f"{heading}{alias}]]")
        last = lk.end
    out.append(text[last:])
    return "".join(out)


def links_to(text: str, from_rel: str, resolver: links.Resolver, target_id: int
             ) -> list[links.Link]:
    """The links of ``text`` (a note at ``from_rel``) that resolve to ``target_id``."""
    return [lk for lk in links.parse_links(text)
            if (lk.target or lk.heading) and lk.target
            and resolver.resolve(lk.target, from_rel) == target_id]
