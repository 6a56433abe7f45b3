"""Which names a write may give a new note, attachment or folder (decision 0045).

A vault moves between machines (a sync service, a git remote, a backup restored on another
system), so a name is refused when *any* common file system refuses or mangles it, not only
the one ragd runs on:

- longer than 255 bytes of UTF-8 (ext4, APFS, NTFS and exFAT all stop near there), or than
  the vault's own file system takes (``PC_NAME_MAX``: 143 bytes on eCryptfs): ``name_too_long``;
- a Windows device name (``CON``, ``PRN``, ``AUX``, ``NUL``, ``COM0-9``, ``LPT0-9``, with
  Windows 11's superscript digits, ``CONIN$``, ``CONOUT$``), with any extension and in any case:
  ``reserved_name``;
- one of ``< > : " | ? *`` (Windows refuses them; ``:`` opens an NTFS stream): ``bad_character``;
- a control character (category Cc): ``control_character``;
- a trailing dot or space (Windows drops it, so two names become one): ``trailing_dot_or_space``;
- a format character (category Cf): the bidirectional overrides and isolates (U+202A-202E,
  U+2066-2069), the direction marks (U+200E/F), zero-width spaces, soft hyphens, a BOM. They
  are invisible and can make ``txt.md`` display as ``dm.txt``: ``format_character``. The two
  joiners (U+200C ZWNJ, U+200D ZWJ) are kept: Persian and Indic names and emoji sequences
  need them, and neither reorders text.

Only names a write *creates* are checked: an existing file is read, edited and renamed away
from whatever it is called.
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata

from ragd.daemon.errors import PathRefused

MAX_NAME_BYTES = 255
_RESERVED = re.compile(r"(?:CON|PRN|AUX|NUL|COM[0-9¹²³]|LPT[0-9¹²³]|CONIN\$|CONOUT\$)",
                       re.IGNORECASE)
_WINDOWS_BAD = frozenset('<>:"|?*')
_JOINERS = frozenset("\u200c\u200d")
HINT = "choose a name that every system can hold: letters, digits, spaces, - _ . ( ) and so on"


@functools.lru_cache(maxsize=64)
def name_max(folder: str) -> int:
    """The most bytes a name may have in ``folder``'s file system: 255, or less where the
    file system says so (``os.pathconf``; absent on Windows)."""
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (AttributeError, ValueError, OSError):
        return MAX_NAME_BYTES
    return min(MAX_NAME_BYTES, limit) if limit and limit > 0 else MAX_NAME_BYTES


def check_component(name: str, param: str, limit: int = MAX_NAME_BYTES) -> None:
    """Refuse ``name`` (one path component) with a code when a common file system cannot
    hold it as written (see the module doc)."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise PathRefused(param, f"the name {name[:40]!r}... is {size} bytes long; a file "
                          f"system here takes at most {limit}", "choose a shorter name",
                          code="name_too_long")
    if _RESERVED.fullmatch(name.partition(".")[0].rstrip(" ")):
        raise PathRefused(param, f"{name!r} is a device name on Windows (with any extension), "
                          "where the vault could not hold it", HINT, code="reserved_name")
    for ch in name:
        category = unicodedata.category(ch)
        if ch in _WINDOWS_BAD:
            raise PathRefused(param, f"{name!r} holds {ch!r}, which Windows does not allow "
                              "in a file name", HINT, code="bad_character")
        if category == "Cc":
            raise PathRefused(param, f"{name!r} holds the control character U+{ord(ch):04X}",
                              HINT, code="control_character")
        if category == "Cf" and ch not in _JOINERS:
            raise PathRefused(param, f"the name holds the invisible format character "
                              f"U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')}), which can "
                              "disguise a name or reorder how it is shown", HINT,
                              code="format_character")
    if name.endswith((".", " ")):
        raise PathRefused(param, f"{name!r} ends with a dot or a space, which Windows drops "
                          "(two names would become one)", "remove the trailing dot or space",
                          code="trailing_dot_or_space")


def check_new(root: str, rel: str, param: str) -> None:
    """Check the components of ``rel`` a write would create under ``root``: the first that
    does not exist yet, and every one after it (a folder that exists is the user's own)."""
    parts = rel.split("/")
    here = root
    for i, part in enumerate(parts):
        below = os.path.join(here, part)
        if not os.path.lexists(below):  # False for a name too long to look up, too
            limit = name_max(here if os.path.isdir(here) else root)
            for new in parts[i:]:
                check_component(new, param, limit)
            return
        here = below
