"""The daemon's IPC methods: each maps validated params to the daemon and returns JSON data.

Blocking work (search, catalog reads) runs on worker threads, so one slow request never holds
up another; nothing here waits for the writer unless the caller asked to (index wait=true).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ragd.daemon.errors import IndexFailed, InvalidArgument, RagdError
from ragd.daemon.ipc.protocol import speaks_for_user
from ragd.daemon.runtime.scheduler import EXPLICIT, Job
from ragd.daemon.settings.policy import Reach, allow_folders, check_name, check_root
from ragd.daemon.stores import index_names

if TYPE_CHECKING:
    from ragd.daemon.indexer.pipeline import IndexReport
    from ragd.daemon.ipc.server import Connection
    from ragd.daemon.runtime.service import Daemon

Handler = Callable[["Daemon", dict[str, Any], "Connection"], Awaitable[Any]]

INDEX_WAIT_S = 24 * 3600.0


async def status(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    """The daemon's state; with brief=true only state, start-up phase and indexing, answered
    without touching the catalog (what the CLI asks before a request that may wait)."""
    if params.get("brief"):
        return d.brief_status()
    return await asyncio.to_thread(d.status)


async def search(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    from ragd.daemon.search.params import build_request

    app = await d._ready()
    keys = ("query", "collection", "top_k", "source_type", "date_from", "date_to", "sender",
            "author", "mode", "folder", "tags", "explain")
    args = {k: params[k] for k in keys if k in params and params[k] is not None}

    def run() -> Any:
        return app.search_engine.search(build_request(app.search_engine, **args))

    return await asyncio.to_thread(run)


async def list_collections(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    app = await d._ready()
    return await asyncio.to_thread(app.list_collections)


async def collection_info(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    app = await d._ready()
    return await asyncio.to_thread(app.collection_info, params["collection"])


async def skipped(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    app = await d._ready()
    name = params.get("collection")
    coll_id = (await asyncio.to_thread(app.collection, name)).id if name else None
    return await asyncio.to_thread(app.catalog.skipped_sources, coll_id)


async def index(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    """Queue an explicit sync (or rebuild); with wait=true, answer when it is done."""

    app = await d._ready()
    name, path = params.get("collection"), params.get("path")
    if name is not None:
        check_name(name)
    if params.get("rebuild"):
        try:
            index_names(str(params["rebuild"]))
        except ValueError:
            raise InvalidArgument("rebuild", f"{params['rebuild']!r} is not an index",
                                  "rebuild one of: all, faiss, keyword") from None
        job = d.queue.put(Job("rebuild", params["rebuild"], EXPLICIT))
        return await asyncio.to_thread(job.wait, INDEX_WAIT_S) if params.get("wait", True) \
            else {"queued": True}
    if path:
        if not name:
            raise InvalidArgument("collection", "is required with path",
                                  "name the project collection to create or update")
        # An AI client may not make a hidden folder (~/.ssh, ~/.aws) searchable; the folder
        # policy that holds for everyone (system and log folders, ragd's data) follows.
        check_root(path, guarded=guarded(d), hidden=not speaks_for_user(conn.client))
        from ragd.daemon.runtime.codegroups import add_repository, is_code_group

        if is_code_group(app, name):  # a repository joins a code group (decision 0030)
            coll = await asyncio.to_thread(add_repository, app, name, path)
        else:
            coll = await asyncio.to_thread(_project, app, name, path,
                                           bool(params.get("allow_large")))
        for watcher in (d._watcher, d._code_watcher):
            if watcher is not None:
                watcher.roots_changed()
        name = coll.name
    elif name:
        await asyncio.to_thread(app.collection, name)  # unknown name: a clear NotFound
    job = d.enqueue(name, EXPLICIT) if name else _all(d)
    if not params.get("wait", True):
        return {"collection": name, "queued": True, "remaining": d.queue.remaining()}
    try:
        reports = await asyncio.to_thread(job.wait, INDEX_WAIT_S)
    except (RagdError, TimeoutError):
        raise
    except Exception as exc:
        # The writer logged the traceback and `ragd status` lists the error: say the same
        # here rather than "internal error" (a corrupt Calibre metadata.db was one).
        raise IndexFailed(f"indexing {name or 'every collection'} failed: {exc!r}",
                          "`ragd status` lists it under errors and the daemon log has the "
                          "details; fix the source, then index again") from exc
    # Committed means keyword-searchable; the answer waits for the vectors too.
    await asyncio.to_thread(d.wait_embedded, [name] if name else None, INDEX_WAIT_S)
    return index_summary(reports, name)


def guarded(d: Daemon) -> tuple[str, ...]:
    """ragd's own folders: never a collection, never read for a client."""
    paths = d.paths
    home = os.environ.get("RAGD_HOME", "").strip()
    return tuple(str(f) for f in (paths.data_dir, paths.state_dir, paths.config_dir,
                                  paths.runtime_dir, *([home] if home else [])))


def _project(app: Any, name: str, path: str, allow_large: bool) -> Any:
    existing = app.catalog.collection(name)
    if existing is not None and existing.type != "project":
        raise InvalidArgument("collection", f"{name!r} is a {existing.type} collection, "
                              "which uses its configured path",
                              f"call rag_index(collection={name!r}) without a path")
    return app.create_project(name, path, allow_large=allow_large)


def _all(d: Daemon) -> Job:
    return d.queue.put(Job("sync", None, EXPLICIT, estimate=max(
        1, sum(c["source_count"] for c in d.app.list_collections()))))


async def pause(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    d.queue.pause()
    d._emit(d.indexing_event("paused"))
    return {"paused": True}


async def resume(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    d.queue.resume()
    d._emit(d.indexing_event("indexing"))
    return {"paused": False}


async def shutdown(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    asyncio.get_running_loop().call_later(0.05, d.request_stop)
    return {"stopping": True}


async def subscribe(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    d.subscribe(conn)
    return {"subscribed": True, "status": await asyncio.to_thread(d.status)}


async def convert(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    """rag_convert: one document as markdown, through the doc store (cached by content).

    Any caller but the command line reads only inside the collections and ``[convert]
    allow`` (decision 0023), and gets at most ``[convert] max_reply_chars`` per answer.
    """
    from ragd.daemon.convert.documents import convert_file
    from ragd.daemon.errors import PathRefused
    from ragd.daemon.runtime.convert_early import refused_for_now

    settings = d.config.convert
    restricted = not speaks_for_user(conn.client)
    cap = settings.max_reply_chars
    asked = params.get("max_chars") or cap
    max_chars = min(asked, cap) if restricted else asked
    docs = d.on_demand  # its own worker: indexing never waits for it (decision 0024)
    # Not d._ready(): a conversion needs no model and is answered while it loads (0032).
    starting = not d.ready.is_set()
    reach = await asyncio.to_thread(convert_reach, d, None if starting else d.app, restricted)

    def run(reach: Reach) -> Any:
        return convert_file(docs.store, params["file_path"],
                            max_bytes=docs.settings.max_file_bytes, reach=reach,
                            keep_outside=settings.keep_outside,
                            offset=params.get("offset") or 0, max_chars=max_chars)

    try:
        return await asyncio.to_thread(run, reach)
    except PathRefused as exc:
        if not refused_for_now(exc.code, restricted=restricted, starting=starting):
            raise
    app = await d._ready()  # the collections registered at start-up may hold the path
    return await asyncio.to_thread(run, await asyncio.to_thread(convert_reach, d, app,
                                                                restricted))


def convert_reach(d: Daemon, app: Any, restricted: bool) -> Reach:
    """Where a conversion may read for this caller: the collections' folders (mail's hold
    no documents) and, for a restricted caller, ``[convert] allow``. Before the app is open
    (``app`` None) the collections are those the catalog holds already (decision 0032)."""
    if app is None:
        from ragd.daemon.runtime.convert_early import catalog_roots

        roots = catalog_roots(d.paths.catalog_path)
    else:
        roots = [c.root for c in app.catalog.collections()  # not one a link turned
                 if c.kind != "mail" and app.root_problem(c) is None]  # elsewhere (0024)
    allow = allow_folders(d.config.convert.allow) if restricted else []
    return Reach.build(roots, allow, guarded(d), restricted=restricted)


async def doc_store_info(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    """rag_doc_store_info: every document the doc store has seen."""
    app = await d._ready()
    return await asyncio.to_thread(app.documents.store.info)


def index_summary(reports: list[IndexReport], collection: str | None) -> dict[str, Any]:
    """The rag_index answer: {collection, indexed, skipped, errors, total_found}."""
    return {
        "collection": collection or ",".join(r.collection for r in reports),
        "indexed": sum(r.indexed + r.moved for r in reports),
        "skipped": sum(len(r.skipped_files) for r in reports),
        "errors": sum(len(r.errors) for r in reports),
        "total_found": sum(r.total_found for r in reports),
    }


HANDLERS: dict[str, Handler] = {
    "status": status, "search": search, "list_collections": list_collections,
    "collection_info": collection_info, "index": index, "pause": pause, "resume": resume,
    "shutdown": shutdown, "subscribe": subscribe, "skipped": skipped, "convert": convert,
    "doc_store_info": doc_store_info,
}

from ragd.daemon.runtime.notes_handlers import NOTE_HANDLERS  # noqa: E402  (decision 0028)

HANDLERS.update(NOTE_HANDLERS)

from ragd.daemon.runtime.code_handlers import CODE_HANDLERS  # noqa: E402  (decision 0030)

HANDLERS.update(CODE_HANDLERS)

from ragd.daemon.runtime.concept_handlers import CONCEPT_HANDLERS  # noqa: E402  (decision 0033)

HANDLERS.update(CONCEPT_HANDLERS)
