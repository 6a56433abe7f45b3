"""The vault writes, each one step under the locks of the paths it touches (decision 0045).

A step resolves its paths (``ragd.daemon.notes.writing.target``), takes their locks
(``ragd.daemon.notes.locks``), and only then reads the file as it is on disk, compares it with
``if_match``, and writes. A second call on the same path waits for the first and then sees what
it wrote: a second create of one path gets ``exists``, a write and an edit carrying one etag
leave one winner and one ``etag_mismatch``, the loser of two renames gets ``not_found``.

A rename holds its two paths together (sorted, so crossed renames cannot deadlock), moves the
file, lets them go, and then rewrites the links of each linking note under that note's lock
alone: no step ever waits for a lock while it holds one.

Run on worker threads; the handlers (``ragd.daemon.runtime.notes_handlers``) index what
changed once a step is done, outside every lock.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ragd.daemon.errors import InvalidArgument, PathRefused
from ragd.daemon.notes import exclusive, reading, writing
from ragd.daemon.notes.locks import VAULT_LOCKS, PathLocks, lock_key
from ragd.daemon.notes.places import WriteRefused, clean_rel, note_rel
from ragd.daemon.stores import links
from ragd.daemon.stores.catalog import Collection

log = logging.getLogger(__name__)
UNINDEXED = -1  # the id a file the catalog does not hold (an image) gets for its links


@dataclass(frozen=True)
class Written:
    """What a step left on disk: the path, the bytes' etag and size, and whether it made
    the file."""

    rel: str
    etag: str
    size: int
    created: bool = False


@dataclass
class Renamed:
    """A rename's outcome: where the file went and which notes' links now point there."""

    old_rel: str
    new_rel: str
    etag: str
    updated: list[dict[str, Any]] = field(default_factory=list)
    left: list[dict[str, Any]] = field(default_factory=list)


def write(coll: Collection, params: dict[str, Any], exclude: tuple[str, ...],
          locks: PathLocks = VAULT_LOCKS) -> Written:
    """Create a note or an attachment, or replace one whose etag ``if_match`` gives."""
    binary = params.get("content_base64") is not None
    rel = clean_rel(params["path"], "path", exclude) if binary else \
        note_rel(params["path"], "path", exclude)
    if binary and rel.lower().endswith(".md"):
        raise InvalidArgument("content_base64", "is for attachments; a .md note takes content",
                              "pass the note's text as content")
    data = writing.attachment_bytes(params["content_base64"]) if binary else \
        writing.note_bytes(params.get("content") or "", params.get("frontmatter"))
    t = writing.target(coll.root, rel, "path", create_dirs=params.get("create_dirs", True),
                       creating=True)
    with locks.hold([t.real]):
        now = writing.disk_etag(t.real)
        if params.get("create_only") and now is not None:
            raise exclusive.exists("path", rel)
        writing.check_etag(rel, now, params.get("if_match"), required=True)
        if now is None:
            exclusive.create(t, data)
        else:
            writing.atomic_write(t.real, data)
    return Written(rel, reading.etag_of(data), len(data), now is None)


def change(catalog: Any, coll: Collection, params: dict[str, Any], exclude: tuple[str, ...],
           how: Callable[[str, bytes], bytes], locks: PathLocks = VAULT_LOCKS) -> Written:
    """Read a note whole, check ``if_match``, change it with ``how`` and write it back, in
    one step. A note too large to load whole is refused (``too_large``), never cut."""
    rel = reading.locate(catalog, coll, params["path"], "path", exclude)
    t = writing.target(coll.root, rel, "path", create_dirs=False)
    with locks.hold([t.real]):
        old = writing.current(t)
        if old is None:
            raise exclusive.gone("path", rel)
        writing.check_etag(rel, reading.etag_of(old), params.get("if_match"))
        data = how(rel, old)
        writing.atomic_write(t.real, data)
    return Written(rel, reading.etag_of(data), len(data))


def delete(catalog: Any, coll: Collection, params: dict[str, Any], exclude: tuple[str, ...],
           locks: PathLocks = VAULT_LOCKS) -> str:
    """Delete a note or an attachment (if it is what ``if_match`` says); its path."""
    rel = reading.locate(catalog, coll, params["path"], "path", exclude)
    t = writing.target(coll.root, rel, "path", create_dirs=False)
    with locks.hold([t.real]):
        now = writing.disk_etag(t.real)
        if now is None:
            raise exclusive.gone("path", rel)
        writing.check_etag(rel, now, params.get("if_match"))
        try:
            os.unlink(t.real)
        except FileNotFoundError:
            raise exclusive.gone("path", rel) from None
        except OSError as exc:
            raise writing.os_refusal("path", rel, exc) from None
    return rel


def rename(catalog: Any, coll: Collection, params: dict[str, Any], exclude: tuple[str, ...],
           locks: PathLocks = VAULT_LOCKS) -> Renamed:
    """Move a note or an attachment (never over a file), then point the links and embeds
    that resolved to it at its new path, each linking note in a step of its own."""
    old_rel = reading.locate(catalog, coll, params["old_path"], "old_path", exclude)
    new_rel = clean_rel(params["new_path"], "new_path", exclude)
    if old_rel.lower().endswith(".md") and not new_rel.lower().endswith(".md"):
        new_rel += ".md"
    old_t = writing.target(coll.root, old_rel, "old_path", create_dirs=False)
    new_t = writing.target(coll.root, new_rel, "new_path", creating=True)
    with locks.hold([old_t.real, new_t.real]):
        now = writing.disk_etag(old_t.real)
        if now is None:
            raise exclusive.gone("old_path", old_rel)
        if os.path.lexists(new_t.real) and lock_key(old_t.real) != lock_key(new_t.real):
            raise WriteRefused("new_path", f"{new_rel!r} already exists", "choose another name",
                               code="exists")
        writing.check_etag(old_rel, now, params.get("if_match"))
        plan = _link_plan(catalog, coll, old_rel) if params.get("update_links", True) else None
        exclusive.move(old_t, new_t)
    out = Renamed(old_rel, new_rel, now)
    if plan is not None:
        _relink_all(coll, plan, out, locks)
    return out


@dataclass(frozen=True)
class _Plan:
    resolver: links.Resolver
    target_id: int
    linking: list[str]  # paths of the notes whose links resolve to the renamed file


def _link_plan(catalog: Any, coll: Collection, rel: str) -> _Plan:
    """Which notes link to ``rel``, resolved as Obsidian does. A file the catalog does not
    hold (an image, when images are not indexed) joins the resolver under ``UNINDEXED``, so
    ``![[photo.jpg]]`` finds it as it finds a note."""
    row = reading.source_row(catalog, coll, rel)
    with catalog.reading() as db:
        if row is not None:
            res = reading.resolver(catalog, coll)
            aliases = json.loads(row["metadata"]).get("aliases") or []
            note = links.NoteName(row["id"], row["path"],
                                  tuple(a for a in aliases if isinstance(a, str)))
        else:
            note = links.NoteName(UNINDEXED, rel)
            res = links.Resolver([*links.names(db, coll.id), note])
        found = links.backlinks(db, coll.id, note, res)
    linking = sorted({res.path_of[lk.source_id] for lk in found if lk.source_id in res.path_of})
    return _Plan(res, note.id, linking)


def _relink_all(coll: Collection, plan: _Plan, out: Renamed, locks: PathLocks) -> None:
    key = links.link_key(out.new_rel)
    named = plan.resolver.by_name.get(key, [])
    unique = all(p == out.old_rel for _, p, _ in named)
    for src_rel in plan.linking:
        from_rel = out.new_rel if src_rel == out.old_rel else src_rel
        try:
            n, data = _relink(coll, from_rel, plan, out.new_rel, unique, locks)
        except PathRefused as exc:  # too large, not text, gone: left as it is, and said so
            out.left.append({"path": from_rel, "reason": exc.code})
            continue
        if n:
            out.updated.append({"path": from_rel, "links": n})
        if data is not None and from_rel == out.new_rel:  # its own links: its etag moved
            out.etag = reading.etag_of(data)


def _relink(coll: Collection, rel: str, plan: _Plan, new_rel: str, unique: bool,
            locks: PathLocks) -> tuple[int, bytes | None]:
    """Point ``rel``'s links to the renamed file at ``new_rel`` under ``rel``'s lock: the
    number rewritten and the bytes written (None: nothing written)."""
    t = writing.target(coll.root, rel, "path", create_dirs=False)
    with locks.hold([t.real]):
        data = writing.current(t)
        if data is None:
            return 0, None
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise WriteRefused("path", f"{rel!r} is not UTF-8", "", code="not_text") from None
        # Links are resolved from where the note was (a note's links to itself moved with it).
        hits = writing.links_to(text, rel, plan.resolver, plan.target_id)
        if not hits:
            return 0, None
        new = writing.rewrite_links(text, rel, hits, new_rel, unique).encode("utf-8")
        if writing.current(t) != data:  # saved from outside meanwhile: the user's save wins
            log.warning("rename: %s changed while its links were rewritten; left as it is", rel)
            return 0, None
        writing.atomic_write(t.real, new)
    return len(hits), new
