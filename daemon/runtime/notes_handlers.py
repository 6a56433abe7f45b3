"""The note methods over IPC (decision 0028): read, list, link, suggest and (opt-in) write.

Reads run on worker threads against the catalog and the files as saved now; a read of an
attachment gives a document's markdown or a file's base64 (decision 0045). Writes change the
file on disk in one step under the locks of its paths (``ragd.daemon.notes.steps``, decision
0045) and then, outside every lock, queue the path as an explicit job for the one writer,
waiting until it is committed: the note is searchable when the answer comes, and the index
stays the writer's alone. The watcher sees the same save and finds nothing
new to do. A method that waits for the writer holds one of its waiting places from the start,
or is answered busy before it writes anything (``_waits``, decision 0043).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ragd.daemon.errors import InvalidArgument, PathRefused
from ragd.daemon.ipc.protocol import speaks_for_user
from ragd.daemon.notes import attachments, listing, reading, steps, suggest, writing
from ragd.daemon.notes.places import WriteRefused, clean_rel, vault_collection
from ragd.daemon.runtime.handlers import convert_reach
from ragd.daemon.runtime.scheduler import EXPLICIT, Job
from ragd.daemon.runtime.surface import Handler, Service

if TYPE_CHECKING:
    from ragd.daemon.ipc.server import Connection

log = logging.getLogger(__name__)
INDEX_WAIT_S = 600.0  # a write's own path is small work: it runs before any bulk job


def _waits(handler: Handler) -> Handler:
    """``handler`` holds one of the places of the requests that wait for the writer
    (``WriterWaits``), taken before it reads or writes anything."""
    async def waiting(d: Service, params: dict[str, Any], conn: Connection) -> Any:
        async with d.writer_waits.place(d):
            return await handler(d, params, conn)

    waiting.__doc__ = handler.__doc__
    return waiting


def _exclude(d: Service) -> tuple[str, ...]:
    return tuple(d.config.index.exclude)


async def _vault(d: Service, params: dict[str, Any]) -> tuple[Any, Any]:
    app = await d._ready()
    coll = await asyncio.to_thread(vault_collection, app.catalog, params.get("vault"))
    return app, coll


async def note_read(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """A note (or one section) with its properties, tags, links, backlinks and etag; an
    attachment as its markdown, text or base64 (``ragd.daemon.notes.attachments``)."""
    app, coll = await _vault(d, params)
    cap = params.get("max_chars") or 200_000
    if not speaks_for_user(conn.client):
        cap = min(cap, d.config.convert.max_reply_chars)
    rel = await asyncio.to_thread(reading.locate, app.catalog, coll, params["path"], "path",
                                  _exclude(d))
    if not attachments.is_note(rel):
        return await _read_attachment(d, app, coll, rel, conn, cap)
    return await asyncio.to_thread(reading.read, app.catalog, coll, rel,
                                   section=params.get("section"), exclude=_exclude(d),
                                   max_chars=cap)


async def _read_attachment(d: Service, app: Any, coll: Any, rel: str, conn: Connection,
                           cap: int) -> dict[str, Any]:
    """A document through the doc store (as rag_convert reads it: same reach, same worker),
    anything else inline."""
    if attachments.kind(rel) != "document":
        return await asyncio.to_thread(attachments.read_inline, coll, rel, cap)
    from ragd.daemon.sources.on_request import convert_file

    restricted = not speaks_for_user(conn.client)
    reach = await asyncio.to_thread(convert_reach, d, app, restricted)
    docs = d.on_demand
    real = os.path.join(coll.root, *rel.split("/"))

    def run() -> dict[str, Any]:
        try:  # contained like every read (the reach is the collections' folders)
            converted = convert_file(docs.store, real, max_bytes=docs.settings.max_file_bytes,
                                     reach=reach, keep_outside=False, max_chars=cap)
        except PathRefused as exc:  # file_path is not this tool's parameter: path is
            raise PathRefused("path", exc.message.partition(": ")[2] or exc.message,
                              exc.hint, code=exc.code) from None
        st = os.stat(converted["file_path"])
        out = attachments.base(coll, rel, st.st_size, st.st_mtime,
                               writing.disk_etag(converted["file_path"]) or "")
        return attachments.from_conversion(out, converted)

    return await asyncio.to_thread(run)


async def note_chunks(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """A search hit's chunk and its neighbours in the note."""
    app = await d._ready()
    return await asyncio.to_thread(reading.neighbours, app.catalog, params["chunk_id"],
                                   params.get("before", 1), params.get("after", 1))


async def note_list(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    app, coll = await _vault(d, params)
    folder = params.get("folder")
    if folder:
        folder = clean_rel(folder, "folder", _exclude(d), allow_root=True)
    return await asyncio.to_thread(
        listing.list_notes, app.catalog, coll, folder=folder, tag=params.get("tag"),
        glob=params.get("glob"), regex=params.get("regex"),
        include_attachments=params.get("include_attachments", True),
        limit=params.get("limit", 1000))


async def note_folders(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    app, coll = await _vault(d, params)
    return await asyncio.to_thread(listing.folders, app.catalog, coll)


async def note_tags(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """Tags with counts; with ``field``, the distinct values of that frontmatter field."""
    app, coll = await _vault(d, params)
    field = params.get("field")
    if field:
        values = await asyncio.to_thread(listing.field_values, app.catalog, coll, field)
        if not values and field not in ("tags", "tag"):
            used = await asyncio.to_thread(listing.frontmatter_fields, app.catalog, coll,
                                           1_000_000)
            if field not in used:  # say so: an empty list reads as "no values yet"
                raise InvalidArgument(
                    "field", f"no note of vault {coll.name!r} has the frontmatter field "
                    f"{field!r}", "fields in use, most used first: "
                    + (", ".join(used[:20]) or "none (no note has front matter)"))
        return {"vault": coll.name, "field": field, "values": values}
    return await asyncio.to_thread(listing.tags, app.catalog, coll)


async def note_structure(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    app, coll = await _vault(d, params)
    root = clean_rel(params.get("root_path") or "", "root_path", _exclude(d), allow_root=True)
    if root and not os.path.isdir(os.path.join(coll.root, root)):
        raise PathRefused("root_path", f"no folder {root!r} in vault {coll.name!r}",
                          "call it without root_path to see the vault's folders",
                          code="not_found")
    tree = await asyncio.to_thread(listing.structure, app.catalog, coll, root,
                                   params.get("depth", 2))
    return {"vault": coll.name, "root_path": root, "tree": tree}


async def note_stats(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """A vault's counts, with the embedding model and how far its vectors are."""
    app, coll = await _vault(d, params)

    def run() -> dict[str, Any]:
        out = listing.stats(app.catalog, coll)
        out["frontmatter_fields"] = listing.frontmatter_fields(app.catalog, coll)
        out.update(embedding_info(d, app, coll))
        return out

    return await asyncio.to_thread(run)


def embedding_info(d: Service, app: Any, coll: Any) -> dict[str, Any]:
    """The model, where the vectors live and how many chunks still wait for theirs.
    ``semantic_search_available`` says whether every chunk of the vault has its vector: while
    some wait, a semantic search finds those by their words only (issue 37)."""
    waiting = int(app.indexer.backlog.of(coll.id)[0])
    return {"embedding_model": d.config.embedding.model,
            "embedding_backend": d.config.embedding.backend,
            "fingerprint": app.embedder.fingerprint,
            "index_path": str(d.paths.faiss_dir), "data_dir": str(d.paths.data_dir),
            "unembedded_chunks": waiting, "semantic_search_available": waiting == 0,
            "embedding_paused": d.embedding_paused, "indexing": d.indexing()}


# -- search, index ----------------------------------------------------------------------------
def _frontmatter_match(meta: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Each wanted field equals the note's value or is one of its list items (ignoring case)."""
    fm = meta.get("frontmatter") or {}
    for key, want in wanted.items():
        have = listing._values(fm.get(key)) if isinstance(fm, dict) else []
        wants = listing._values(want)
        if not wants or not {w.lower() for w in wants} <= {h.lower() for h in have}:
            return False
    return True


async def note_search(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """Search one vault, with vault-relative paths, token counts and front matter: what the
    omni and vault tools return. ``filters`` on front matter fields are checked on an
    over-fetched result list; ``tags`` filters go to the engine."""
    from ragd.daemon.search.params import build_request

    app, coll = await _vault(d, params)
    tags = list(params.get("tags") or [])
    wanted: dict[str, Any] = {}
    for key, value in (params.get("filters") or {}).items():
        if key in ("tags", "tag"):
            tags += listing._values(value)
        else:
            wanted[str(key)] = value
    top_k = params.get("top_k", 10)
    folder = params.get("folder")
    if folder:
        folder = clean_rel(folder, "folder", _exclude(d), allow_root=True) or None

    def run() -> dict[str, Any]:
        req = build_request(app.search_engine, query=params["query"], collection=coll.name,
                            top_k=min(100, top_k * 5) if wanted else top_k,
                            mode=params.get("mode") or "hybrid", folder=folder, tags=tags)
        req = dataclasses.replace(req, filters=dataclasses.replace(
            req.filters, collections=(coll.name,)))
        answer = app.search_engine.search(req)
        ids = [r["metadata"].get("chunk_id") for r in answer["results"]]
        extra = _chunk_facts(app.catalog, [i for i in ids if isinstance(i, int)])
        out = []
        for r in answer["results"]:
            facts = extra.get(r["metadata"].get("chunk_id"))
            if facts is None or not _frontmatter_match(facts["meta"], wanted):
                continue
            out.append({**r, "path": facts["path"], "token_count": facts["tokens"],
                        "frontmatter": facts["meta"].get("frontmatter") or {},
                        "folder": facts["path"].rpartition("/")[0]})
            if len(out) >= top_k:
                break
        return {"vault": coll.name, "results": out, "indexing": answer.get("indexing")}

    return await asyncio.to_thread(run)


def _chunk_facts(catalog: Any, ids: list[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    with catalog.reading() as db:
        rows = db.execute(
            "SELECT ch.id, ch.token_count, s.path, s.metadata FROM chunks ch JOIN sources s"
            f" ON s.id=ch.source_id WHERE ch.id IN ({','.join('?' * len(ids))})",
            ids).fetchall()
    return {r[0]: {"tokens": r[1], "path": r[2], "meta": json.loads(r[3])} for r in rows}


async def _index(d: Service, coll: Any, rels: set[str], conn: Connection) -> None:
    """Queue these paths as an explicit job for the writer and wait until it committed them:
    keyword-searchable now, their vectors follow within the embedding backlog's turn."""
    job = d.queue.put(Job("sync", coll.name, EXPLICIT, paths=set(rels), estimate=len(rels)))
    await d.writer_waits.job(job, conn, INDEX_WAIT_S)


def _chunks_of(catalog: Any, coll: Any, rel: str) -> int:
    with catalog.reading() as db:
        row = db.execute("SELECT COUNT(*) FROM chunks ch JOIN sources s ON s.id=ch.source_id"
                         " WHERE s.collection_id=? AND s.path=? AND s.status='ok'",
                         (coll.id, rel)).fetchone()
    return int(row[0])


async def note_index(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """Index one note now and say how many chunks it has (omni's index_note)."""
    app, coll = await _vault(d, params)
    rel = await asyncio.to_thread(reading.locate, app.catalog, coll, params["path"], "path",
                                  _exclude(d))
    await _index(d, coll, {rel}, conn)
    chunks = await asyncio.to_thread(_chunks_of, app.catalog, coll, rel)
    return {"vault": coll.name, "path": rel, "success": chunks > 0, "chunks_indexed": chunks}


async def note_reindex(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """Bring the vault up to date now (vault's reindex): files added, modified, deleted and
    unchanged in this pass."""
    app, coll = await _vault(d, params)
    before = await asyncio.to_thread(lambda: app.catalog.collection_stats(coll.id))
    job = d.enqueue(coll.name, EXPLICIT)
    within = params.get("answer_within_s")
    if within is None:
        reports = await d.writer_waits.job(job, conn, 24 * 3600.0)
    else:  # an MCP client's call answers in bounded time (issue 37)
        try:
            reports = await d.writer_waits.job(job, conn, float(within))
        except TimeoutError:
            return {"vault": coll.name, "added": None, "modified": None, "deleted": None,
                    "unchanged": None, **d.follow_up("the reindex")}
    after = await asyncio.to_thread(lambda: app.catalog.collection_stats(coll.id))
    rep = reports[0] if reports else None
    deleted = rep.deleted if rep else 0
    indexed = (rep.indexed + rep.moved) if rep else 0
    added = max(0, after["source_count"] - before["source_count"] + deleted)
    return {"vault": coll.name, "added": min(added, indexed),
            "modified": max(0, indexed - added), "deleted": deleted,
            "unchanged": rep.unchanged if rep else 0}


async def note_embeddings(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """Wait until the vault's chunks all have vectors; ``force`` rebuilds the vector index
    first (from the vectors cached in the catalog: nothing is embedded twice)."""
    app, coll = await _vault(d, params)
    within = params.get("answer_within_s")
    deadline = time.monotonic() + (24 * 3600.0 if within is None else float(within))
    job: Job | None = None
    if params.get("force"):
        job = d.queue.put(Job("rebuild", "faiss", EXPLICIT))
        with contextlib.suppress(TimeoutError):  # a bounded answer says it goes on
            await d.writer_waits.job(job, conn, max(0.0, deadline - time.monotonic()))
    await d.writer_waits.embedded(d, [coll.name], conn, max(0.0, deadline - time.monotonic()))
    stats = await asyncio.to_thread(app.catalog.collection_stats, coll.id)
    waiting = int(app.indexer.backlog.of(coll.id)[0])
    out = {"vault": coll.name, "chunks_embedded": int(stats["chunk_count"] - waiting),
           "chunk_count": int(stats["chunk_count"]), "unembedded_chunks": waiting}
    if waiting or (job is not None and not job.done.is_set()):
        out.update(d.follow_up("embedding"))
        if d.embedding_paused:
            out["follow"] += "; embedding is paused: `ragd resume` (or the tray) resumes it"
    return out


async def note_suggest(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """Notes this note should link to: see ``ragd.daemon.notes.suggest``."""
    app, coll = await _vault(d, params)
    folder = params.get("folder")
    if folder:
        folder = clean_rel(folder, "folder", _exclude(d), allow_root=True) or None

    def run() -> dict[str, Any]:
        rel = reading.locate(app.catalog, coll, params["path"], "path", _exclude(d))
        row = reading.source_row(app.catalog, coll, rel)
        if row is None:
            raise PathRefused("path", f"{rel!r} is not indexed yet", "index_note it, or wait "
                              "for the watcher to pick it up", code="not_indexed")
        # A note whose own vectors are still to come has no sections to compare yet: the
        # answer says so (a saved note's chunks are embedded first: decision 0022).
        pending = bool(app.catalog.backlog_sources([row["id"]]))
        res = reading.resolver(app.catalog, coll)
        found = suggest.suggestions(
            app.catalog, app.faiss, app.embedder.fingerprint, coll, res, row,
            n=params.get("n", 5), min_similarity=params.get("min_similarity", 0.5),
            exclude_current=params.get("exclude_current", True),
            exclude_linked=params.get("exclude_linked", True), folder=folder,
            tags=params.get("tags") or [])
        return {"vault": coll.name, "path": rel, "suggestions": found, "pending": pending,
                "indexing": d.indexing()}

    return await asyncio.to_thread(run)


# -- writes -----------------------------------------------------------------------------------
def writes_enabled(d: Service) -> bool:
    """``[mcp] writes`` as the config file and the daemon's environment say now (a change
    to the file needs no restart); the settings it started with if the file is unreadable."""
    from ragd.daemon.errors import RagdError
    from ragd.daemon.settings.config import load_config

    try:
        return bool(load_config(d.paths, write_default=False).mcp.writes)
    except RagdError:
        return bool(d.config.mcp.writes)


async def _writable(d: Service, params: dict[str, Any]) -> tuple[Any, Any]:
    if not await asyncio.to_thread(writes_enabled, d):
        raise WriteRefused("path", "writing to the vault is off",
                           "the user can allow it with `writes = true` under [mcp] in "
                           "config.toml (or RAGD_MCP_WRITES=true)", code="writes_off")
    return await _vault(d, params)


async def _after_write(d: Service, conn: Connection, app: Any, coll: Any,
                       done: steps.Written) -> dict[str, Any]:
    """Index what a step wrote (outside its locks) and answer once it is searchable."""
    await _index(d, coll, {done.rel}, conn)
    chunks = await asyncio.to_thread(_chunks_of, app.catalog, coll, done.rel)
    return {"vault": coll.name, "path": done.rel, "etag": done.etag, "created": done.created,
            "size_bytes": done.size, "chunks_indexed": chunks}


async def note_write(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """Create a note or an attachment, or replace one whose etag ``if_match`` gives: one
    step under the path's lock (``ragd.daemon.notes.steps``)."""
    app, coll = await _writable(d, params)
    done = await asyncio.to_thread(steps.write, coll, params, _exclude(d))
    return await _after_write(d, conn, app, coll, done)


async def _change(d: Service, params: dict[str, Any], conn: Connection,
                  how: Callable[[str, bytes], bytes]) -> dict[str, Any]:
    """Read, check ``if_match``, change and write back an existing note, in one step."""
    app, coll = await _writable(d, params)
    done = await asyncio.to_thread(steps.change, app.catalog, coll, params, _exclude(d), how)
    return await _after_write(d, conn, app, coll, done)


async def note_edit(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """Replace text that occurs exactly once (vault's edit)."""
    answer = await _change(d, params, conn, lambda rel, old: writing.edited(
        rel, old, params["old_text"], params["new_text"]))
    return {**answer, "replacements": 1}


async def note_append(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    return await _change(d, params, conn, lambda rel, old: writing.appended(
        rel, old, params["content"]))


async def note_delete(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    app, coll = await _writable(d, params)
    rel = await asyncio.to_thread(steps.delete, app.catalog, coll, params, _exclude(d))
    await _index(d, coll, {rel}, conn)
    return {"vault": coll.name, "path": rel, "deleted": True}


async def note_rename(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """Move a note or an attachment and rewrite the links that resolved to it (see
    ``ragd.daemon.notes.steps``)."""
    app, coll = await _writable(d, params)
    out = await asyncio.to_thread(steps.rename, app.catalog, coll, params, _exclude(d))
    await _index(d, coll, {out.old_rel, out.new_rel, *(c["path"] for c in out.updated)}, conn)
    return {"vault": coll.name, "old_path": out.old_rel, "new_path": out.new_rel,
            "etag": out.etag, "notes_updated": out.updated, "notes_not_updated": out.left,
            "links_updated": sum(c["links"] for c in out.updated)}


NOTE_HANDLERS: dict[str, Handler] = {
    "note_read": note_read, "note_chunks": note_chunks, "note_list": note_list,
    "note_folders": note_folders, "note_tags": note_tags, "note_structure": note_structure,
    "note_stats": note_stats, "note_search": note_search, "note_suggest": note_suggest,
    # These wait for the writer (decision 0043).
    "note_index": _waits(note_index), "note_reindex": _waits(note_reindex),
    "note_embeddings": _waits(note_embeddings), "note_write": _waits(note_write),
    "note_edit": _waits(note_edit), "note_append": _waits(note_append),
    "note_delete": _waits(note_delete), "note_rename": _waits(note_rename),
}
