"""The containment rule, in one place: a file is read only if its real path lies inside the
resolved root of its collection.

Every source kind (vault, folder, and later mail, Calibre and attachments) opens files through
:func:`open_inside`, and listings decide about symbolic links with :func:`inside`. A link that
resolves outside the root is skipped as ``outside_root``; a link that resolves inside it is read
as the file it points at. The check is made again after the file is opened, against the opened
descriptor itself, so a link or folder swapped between the walk and the read (or between the
check and the open) cannot smuggle a file from outside in. See docs/decisions/0010.
"""

from __future__ import annotations

import errno
import os
import stat

from ragd.daemon.models import Skip

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def real_root(root: str | os.PathLike[str]) -> str:
    """The collection root with every symbolic link resolved (what containment compares to)."""
    return os.path.realpath(root)


def inside(root_real: str, real: str) -> bool:
    """Whether the resolved path ``real`` is ``root_real`` or lies below it."""
    if os.name == "nt":
        root_real, real = os.path.normcase(root_real), os.path.normcase(real)
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def outside_skip(target: str) -> Skip:
    return Skip("outside_root", f"resolves to {target}, outside the collection's folder")


def resolve_inside(root: str | os.PathLike[str], rel: str, root_real: str | None = None
                   ) -> str | Skip:
    """The real path of ``root/rel`` if it exists and lies inside the root (whose real path
    is ``root_real``, resolved here when not given), else a Skip."""
    path = os.path.join(root, *rel.split("/"))
    try:
        real = os.path.realpath(path, strict=True)
    except (FileNotFoundError, NotADirectoryError):
        if os.path.lexists(path):
            return Skip("broken_link", "symbolic link target does not exist")
        return Skip("vanished", "file disappeared before it could be read")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Skip("symlink_loop", "symbolic link points back at itself")
        return Skip("unreadable", exc.strerror or str(exc))
    if not inside(root_real or real_root(root), real):
        return outside_skip(real)
    return real


def open_inside(root: str | os.PathLike[str], rel: str, *, max_bytes: int | None = None
                ) -> tuple[int, os.stat_result] | Skip:
    """Open ``root/rel`` for reading if, and only if, it is a regular file inside the root.

    Returns the open descriptor and its ``fstat``; the caller closes it. The size limit and the
    file type are decided by ``stat`` before anything is opened (a FIFO is never opened, an
    oversized file never loaded). Never raises for a bad file.
    """
    root_real = real_root(root)
    real = resolve_inside(root, rel, root_real)
    if isinstance(real, Skip):
        return real
    try:
        st = os.stat(real)
        if not stat.S_ISREG(st.st_mode):
            return Skip("not_regular", "not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            return too_large(st.st_size, max_bytes)
        # The real path has no link left to follow; one that appears now is a swap.
        fd = os.open(real, _OPEN_FLAGS | _NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return Skip("vanished", "file disappeared before it could be read")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Skip("outside_root", "a symbolic link was swapped in while it was read")
        return Skip("unreadable", exc.strerror or str(exc))
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            os.close(fd)
            return Skip("not_regular", "not a regular file")
        # What we opened must be what the (re-resolved, contained) path names now: a parent
        # folder swapped for a link between the check and the open shows up here.
        again = resolve_inside(root, rel, root_real)
        if isinstance(again, Skip) or not _same(os.stat(again), opened):
            os.close(fd)
            return again if isinstance(again, Skip) and again.code == "outside_root" else Skip(
                "outside_root", "the file changed into a link while it was read")
    except OSError as exc:
        os.close(fd)
        return Skip("unreadable", exc.strerror or str(exc))
    return fd, opened


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def too_large(size: int, max_bytes: int) -> Skip:
    return Skip("too_large", f"{size:,} bytes is over the limit of {max_bytes:,}")
