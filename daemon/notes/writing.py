"""Safe writes to a vault (decision 0028): contained, atomic, and never over someone's change.

- **Where**: the path's text is checked first (``ragd.daemon.notes.places``: relative, no '..', no
  hidden or excluded component, so never ``.obsidian/``); then the parent folder's real path
  must lie inside the vault's real root, and an existing target must be a regular file whose
  real path lies inside it too (a link out of the vault is refused as ``outside_root``).
- **How**: the new bytes go to a temporary file in the same folder, are flushed to disk, and
  replace the note with one rename, as Obsidian's own saves do: a reader (the indexer, the
  user's editor) sees the old note or the new one, never half of it.
- **Over what**: every write takes ``if_match``, the etag (SHA-256 of the bytes) a read gave.
  A mismatch is refused and nothing changes. Replacing a whole existing note requires it.
- **Edit** replaces text found exactly once; none or several matches change nothing, and the
  refusal says how many there were and where the closest near-miss is.
- **Rename** moves the file, then rewrites the links that resolved to it in every other note
  (each with its own if-unchanged check), keeping ``|alias``, ``#heading`` and embeds.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import difflib
import os
import posixpath
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ragd.daemon.errors import InvalidArgument, PathRefused
from ragd.daemon.notes.places import WriteRefused
from ragd.daemon.notes.reading import etag_of
from ragd.daemon.sources.containment import inside, real_root
from ragd.daemon.stores import links

MAX_WRITE_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class Target:
    """Where a write lands: the vault-relative path and the real path written."""

    rel: str
    real: str
    exists: bool


def target(root: str, rel: str, param: str, *, create_dirs: bool = True) -> Target:
    """The real place ``rel`` names inside the vault ``root``; refused if any link on the
    way (a parent folder, the file itself) leads outside it, or it is not a regular file."""
    root_real = real_root(root)
    path = os.path.join(root, *rel.split("/"))
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
        if not os.path.isfile(real):
            raise PathRefused(param, f"{rel!r} is not a regular file", "name a note",
                              code="not_regular")
        return Target(rel, real, True)
    if not os.path.isdir(parent_real):
        if not create_dirs:
            raise PathRefused(param, f"the folder of {rel!r} does not exist",
                              "pass create_dirs=true or write into an existing folder",
                              code="not_found")
        os.makedirs(parent_real, exist_ok=True)
        if not inside(root_real, os.path.realpath(parent_real)):  # a race with a link
            raise PathRefused(param, f"{rel!r} lies outside the vault", "write inside the vault",
                              code="outside_root")
    return Target(rel, os.path.join(parent_real, os.path.basename(path)), False)


def current(t: Target) -> bytes | None:
    if not t.exists:
        return None
    with open(t.real, "rb") as fh:
        return fh.read(MAX_WRITE_BYTES + 1)


def check_etag(rel: str, data: bytes | None, if_match: str | None, *,
               required: bool = False) -> None:
    """Refuse (``etag_mismatch``) when the note is not what ``if_match`` says it was read as;
    with ``required``, also when an existing note is replaced without one (``exists``)."""
    if if_match is None:
        if required and data is not None:
            raise WriteRefused("if_match", f"{rel!r} exists; replacing it needs the etag of "
                               "a read, so that no change made since is lost",
                               "read the note (its etag), then write again with if_match, "
                               "or use edit for a targeted change", code="exists")
        return
    now = etag_of(data) if data is not None else None
    if now != if_match.strip().lower():
        state = "no longer exists" if now is None else "changed since it was read"
        raise WriteRefused("if_match", f"{rel!r} {state} (etag {now or 'none'}, not "
                           f"{if_match.strip()[:64]}); nothing was written",
                           "read the note again and redo the change on what it says now",
                           code="etag_mismatch")


def atomic_write(real: str, data: bytes) -> None:
    """Write ``data`` to ``real`` through a temporary file in its folder and one rename."""
    if len(data) > MAX_WRITE_BYTES:
        raise InvalidArgument("content", f"is {len(data):,} bytes; a note may have at most "
                              f"{MAX_WRITE_BYTES:,}", "split it into several notes")
    folder, name = os.path.split(real)
    mode = None
    with contextlib.suppress(OSError):
        mode = os.stat(real).st_mode & 0o777
    fd, tmp = tempfile.mkstemp(prefix=f".{name[:80]}.", suffix=".ragd-tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
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


def near_miss(text: str, old: str) -> str:
    """Where the text most like ``old`` is, and what differs: a hint for the retry."""
    if not old.strip() or not text:
        return ""
    low = text.lower()
    at = low.find(old.lower())
    if at >= 0:
        return (f" It occurs at line {text.count(chr(10), 0, at) + 1} with other letter case:"
                f" {text[at:at + len(old)][:200]!r}.")
    squeezed = " ".join(old.split())
    lines = text.split("\n")
    width = max(1, old.count("\n") + 1)
    best, best_line, best_ratio = "", 0, 0.0
    for i in range(len(lines)):
        window = "\n".join(lines[i:i + width])
        ratio = difflib.SequenceMatcher(None, " ".join(window.split()), squeezed).ratio()
        if ratio > best_ratio:
            best, best_line, best_ratio = window, i + 1, ratio
    if best_ratio < 0.5:
        return ""
    return f" The closest text is at line {best_line} ({best_ratio:.0%} alike): {best[:200]!r}."


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


def move(root: str, old: Target, new: Target) -> None:
    """Rename ``old`` to ``new`` inside the vault; never over an existing file."""
    if os.path.lexists(new.real):
        raise WriteRefused("new_path", f"{new.rel!r} already exists", "choose another name",
                           code="exists")
    Path(new.real).parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(old.real, new.real)  # fails if new_path appeared meanwhile: never overwrites
    except FileExistsError:
        raise WriteRefused("new_path", f"{new.rel!r} already exists", "choose another name",
                           code="exists") from None
    except (OSError, AttributeError):  # no hard links here (FAT, some network drives)
        os.rename(old.real, new.real)
    else:
        os.unlink(old.real)
