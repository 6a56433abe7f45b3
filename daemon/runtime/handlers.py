"""The daemon's IPC methods: each maps validated params to the daemon and returns JSON data.

Blocking work (search, catalog reads) runs on worker threads, so one slow request never holds
up another; nothing here waits for the writer unless the caller asked to (index wait=true).
A request that does wait takes one of a few places (``WriterWaits``) and waits on a thread of
their own, never on those that serve status and searches; past them it is answered ``busy``
(decision 0043). These are the core methods; ``methods`` adds the note, code and concept tools'.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ragd.daemon.errors import IndexFailed, InvalidArgument, RagdError
from ragd.daemon.ipc.protocol import speaks_for_user
from ragd.daemon.runtime.scheduler import EXPLICIT, Job
from ragd.daemon.runtime.surface import Handler, Service
from ragd.daemon.settings.policy import Reach, allow_folders, check_name, check_root
from ragd.daemon.stores.projection import index_names

if TYPE_CHECKING:
    from ragd.daemon.indexer.pipeline import IndexReport
    from ragd.daemon.ipc.server import Connection

INDEX_WAIT_S = 24 * 3600.0
# `status` reads on threads of its own: it answers whatever searches and conversions hold.
_STATUS_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ragd-status")


async def status(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """The daemon's state; with brief=true only state, start-up phase and indexing, answered
    without touching the catalog (what the CLI asks before a request that may wait)."""
    if params.get("brief"):
        return d.brief_status()
    return await asyncio.get_running_loop().run_in_executor(_STATUS_POOL, d.status)


async def search(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    from ragd.daemon.search.params import build_request

    app = await d._ready()
    keys = ("query", "collection", "top_k", "source_type", "date_from", "date_to", "sender",
            "author", "mode", "folder", "tags", "explain", "searches")
    args = {k: params[k] for k in keys if k in params and params[k] is not None}

    def run() -> Any:
        return app.search_engine.search(build_request(app.search_engine, **args))

    return await asyncio.to_thread(run)


async def list_collections(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    app = await d._ready()
    return await asyncio.to_thread(app.list_collections)


async def collection_info(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    app = await d._ready()
    return await asyncio.to_thread(app.collection_info, params["collection"])


async def skipped(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    app = await d._ready()
    name = params.get("collection")
    coll_id = (await asyncio.to_thread(app.collection, name)).id if name else None
    return await asyncio.to_thread(app.catalog.skipped_sources, coll_id)


async def index(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """Queue an explicit sync (or rebuild); with wait=true, answer when it is done, holding
    one of the places of the requests that wait for the writer (or answered busy)."""
    app = await d._ready()
    if not params.get("wait", True):
        return await _index(d, app, params, conn)
    async with d.writer_waits.place(d):
        return await _index(d, app, params, conn)


async def _index(d: Service, app: Any, params: dict[str, Any], conn: Connection) -> Any:
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
        return await d.writer_waits.job(job, conn, INDEX_WAIT_S) if params.get("wait", True) \
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
    if params.get("answer_within_s") is not None:
        return await _index_within(d, app, job, name, conn, float(params["answer_within_s"]))
    try:
        reports = await d.writer_waits.job(job, conn, INDEX_WAIT_S)
    except (RagdError, TimeoutError):
        raise
    except Exception as exc:
        raise _failed(name, exc) from exc
    # Committed means keyword-searchable; the answer waits for the vectors too.
    await d.writer_waits.embedded(d, [name] if name else None, conn, INDEX_WAIT_S)
    return index_summary(reports, name)


def _failed(name: str | None, exc: Exception) -> IndexFailed:
    # The writer logged the traceback and `ragd status` lists the error: say the same here
    # rather than "internal error" (a corrupt Calibre metadata.db was one).
    return IndexFailed(f"indexing {name or 'every collection'} failed: {exc!r}",
                       "`ragd status` lists it under errors and the daemon log has the "
                       "details; fix the source, then index again")


async def _index_within(d: Service, app: Any, job: Job, name: str | None, conn: Connection,
                        within: float) -> dict[str, Any]:
    """rag_index's bounded answer: the summary if the sync and its vectors are done within
    ``within`` seconds; else what is known (the summary without its vectors, or the files
    done so far of the sync under way) with how to follow the rest."""
    try:
        reports, embedded = await d.writer_waits.settled(d, job, [name] if name else None,
                                                          conn, within)
    except RagdError:
        raise
    except Exception as exc:
        raise _failed(name, exc) from exc
    if reports is not None:
        summary = index_summary(reports, name)
        return summary if embedded else {**summary, **d.follow_up("embedding")}
    p = d.progress
    mine = p is not None and (name is None or p.collection == name) and p.phase == "index"
    total = p.total if mine and p is not None else 0
    if not total and name:
        total = await asyncio.to_thread(_source_count, app, name)
    return {"collection": name or "all", "indexed": p.done if mine and p is not None else 0,
            "skipped": 0, "errors": 0, "total_found": total, **d.follow_up("indexing")}


def _source_count(app: Any, name: str) -> int:
    coll = app.catalog.collection(name)
    return int(app.catalog.collection_stats(coll.id)["source_count"]) if coll else 0


def guarded(d: Service) -> tuple[str, ...]:
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


def _all(d: Service) -> Job:
    return d.queue.put(Job("sync", None, EXPLICIT, estimate=max(
        1, sum(c["source_count"] for c in d.app.list_collections()))))


async def pause(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """Pause indexing; with ``embedding``, only the vectors: files are still read and
    keyword-searchable, and semantic search finds them by their words until resumed."""
    if params.get("embedding"):
        d.embedding_paused = True
        d._emit(d.indexing_event("indexing"))
        return {"paused": d.queue.paused, "embedding_paused": True}
    d.queue.pause()
    d._emit(d.indexing_event("paused"))
    return {"paused": True, "embedding_paused": d.embedding_paused}


async def resume(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """Resume indexing and embedding."""
    d.queue.resume()
    d.embedding_paused = False
    d.wake_embedding()
    d._emit(d.indexing_event("indexing"))
    return {"paused": False, "embedding_paused": False}


async def shutdown(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    asyncio.get_running_loop().call_later(0.05, d.request_stop)
    return {"stopping": True}


async def subscribe(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    d.subscribe(conn)
    status = await asyncio.get_running_loop().run_in_executor(_STATUS_POOL, d.status)
    return {"subscribed": True, "status": status}


async def convert(d: Service, params: dict[str, Any], conn: Connection) -> Any:
    """rag_convert: one document as markdown, through the doc store (cached by content).

    Any caller but the command line reads only inside the collections and ``[convert]
    allow`` (decision 0023), and gets at most ``[convert] max_reply_chars`` per answer.
    """
    from ragd.daemon.errors import PathRefused
    from ragd.daemon.runtime.convert_early import refused_for_now
    from ragd.daemon.sources.on_request import convert_file

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


def convert_reach(d: Service, app: Any, restricted: bool) -> Reach:
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


async def doc_store_info(d: Service, params: dict[str, Any], conn: Connection) -> Any:
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


CORE_HANDLERS: dict[str, Handler] = {
    "status": status, "search": search, "list_collections": list_collections,
    "collection_info": collection_info, "index": index, "pause": pause, "resume": resume,
    "shutdown": shutdown, "subscribe": subscribe, "skipped": skipped, "convert": convert,
    "doc_store_info": doc_store_info,
}
