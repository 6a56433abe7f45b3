"""Creating and renaming vault files without ever replacing one (decision 0045).

The per-path lock (``ragd.daemon.notes.locks``) keeps two ragd calls apart; these primitives
keep ragd from replacing a file that anything else (Obsidian, a sync client) put under the
same name in the meantime, by asking the file system to refuse instead of checking first:

- **create**: the complete temporary file is hard-linked in under its name; ``link`` fails
  when the name exists. Without hard links (FAT, exFAT, some shares) the name is claimed with
  ``O_CREAT | O_EXCL`` and the temporary file renamed over the claim.
- **rename**: hard link to the new name, then unlink the old one. Without hard links:
  ``renameat2(RENAME_NOREPLACE)`` on Linux, ``renamex_np(RENAME_EXCL)`` on macOS, and
  ``os.rename`` on Windows, which never replaces; elsewhere a check just before the rename,
  under the lock (only a program outside ragd, in that instant, could be overwritten).

Every expected failure is a refusal with a code: ``exists`` (the name is taken), ``not_found``
(the source is gone: another call moved or deleted it first), ``name_too_long``, ``disk_full``,
``unwritable``; never an internal error.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import sys

from ragd.daemon.errors import PathRefused
from ragd.daemon.notes.locks import lock_key
from ragd.daemon.notes.places import WriteRefused
from ragd.daemon.notes.writing import FATAL, Target, new_file_mode, os_refusal, temp_with

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1  # Linux renameat2
_RENAME_EXCL = 0x4  # macOS renamex_np


def exists(param: str, rel: str) -> WriteRefused:
    return WriteRefused(param, f"{rel!r} already exists (another call or program created it "
                        "first); nothing was written", "read it and replace it with if_match, "
                        "or choose another path", code="exists")


def gone(param: str, rel: str) -> PathRefused:
    return PathRefused(param, f"{rel!r} no longer exists (another call moved or deleted it "
                       "first); nothing was changed", "list the vault again and retry on what "
                       "is there now", code="not_found")


def create(t: Target, data: bytes, param: str = "path") -> None:
    """Create ``t`` holding ``data``, or refuse with ``exists`` if its name is taken now."""
    folder, name = os.path.split(t.real)
    tmp = temp_with(folder, name, data, new_file_mode())
    try:
        try:
            os.link(tmp, t.real)
        except FileExistsError:
            raise exists(param, t.rel) from None
        except OSError as exc:
            if exc.errno in FATAL:
                raise os_refusal(param, t.rel, exc) from None
            _claim_then_replace(tmp, t, param)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _claim_then_replace(tmp: str, t: Target, param: str) -> None:
    try:
        fd = os.open(t.real, os.O_WRONLY | os.O_CREAT | os.O_EXCL, new_file_mode())
    except FileExistsError:
        raise exists(param, t.rel) from None
    except OSError as exc:
        raise os_refusal(param, t.rel, exc) from None
    os.close(fd)
    os.replace(tmp, t.real)


def move(old: Target, new: Target) -> None:
    """Rename ``old`` to ``new``, never over an existing file: ``exists`` when the new name is
    taken, ``not_found`` when ``old`` is gone. A change of letter case only, on a file system
    that ignores case, is a plain rename of the file onto itself."""
    if lock_key(old.real) == lock_key(new.real) and _same_file(old.real, new.real):
        try:
            os.rename(old.real, new.real)
        except OSError as exc:
            raise os_refusal("new_path", new.rel, exc) from None
        return
    try:
        os.link(old.real, new.real)
    except FileExistsError:
        raise exists("new_path", new.rel) from None
    except FileNotFoundError:
        raise gone("old_path", old.rel) from None
    except OSError as exc:
        if exc.errno in FATAL:
            raise os_refusal("new_path", new.rel, exc) from None
        _rename_no_replace(old, new)
        return
    with contextlib.suppress(FileNotFoundError):  # deleted from outside meanwhile: moved
        os.unlink(old.real)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _rename_no_replace(old: Target, new: Target) -> None:
    """Rename where there are no hard links, asking the system not to replace (see the doc)."""
    try:
        if sys.platform == "win32":
            os.rename(old.real, new.real)  # never replaces on Windows
        elif not _native_no_replace(old.real, new.real):
            if os.path.lexists(new.real):
                raise exists("new_path", new.rel)
            os.rename(old.real, new.real)
    except FileExistsError:
        raise exists("new_path", new.rel) from None
    except FileNotFoundError:
        raise gone("old_path", old.rel) from None
    except OSError as exc:
        raise os_refusal("new_path", new.rel, exc) from None


def _native_no_replace(src: str, dst: str) -> bool:
    """Rename with the system's own no-replace flag; False where there is none (nothing was
    done). Raises the ``OSError`` of a refusal (``FileExistsError`` when ``dst`` exists)."""
    libc = _libc()
    if sys.platform.startswith("linux"):
        fn = getattr(libc, "renameat2", None)
        args: tuple[object, ...] = (_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst),
                                    _RENAME_NOREPLACE)
    elif sys.platform == "darwin":
        fn = getattr(libc, "renamex_np", None)
        args = (os.fsencode(src), os.fsencode(dst), _RENAME_EXCL)
    else:
        return False
    if fn is None:
        return False
    if fn(*args) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):  # the file system lacks the flag
        return False
    raise OSError(err, os.strerror(err), dst)


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    """The C library the daemon runs on (its own symbols: no search for a file)."""
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
