"""The daemon's IPC methods: each maps validated params to the daemon and returns JSON data.

Blocking work (search, catalog reads) runs on worker threads, so one slow request never holds
up another; nothing here waits for the writer unless the caller asked to (index wait=true).
A request that does wait takes one of a few places (``WriterWaits``) and waits on a thread of
their own, never on those that serve status and searches; past them it is answered ``busy``
(decision 0043).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ragd.daemon.errors import IndexFailed, Interrupted, InvalidArgument, RagdError, WriterBusy
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
WRITE_WAITERS = 4  # requests that may wait for the writer at once (decision 0043)
BUSY_AFTER_S = 2.0  # how long one more waits for a place before it is answered `busy`
RETRY_AFTER_S = 5.0  # what a `busy` answer says to wait before sending the request again
_STEP_S = 0.25  # a waiting request looks at its client this often: gone, its place is freed
# `status` reads on threads of its own: it answers whatever searches and conversions hold.
_STATUS_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ragd-status")


class WriterWaits:
    """The requests that wait for the one writer: an index with wait, the note tools' writes
    and reindex, a wait for embeddings. At most ``places`` of them wait at once, each on a
    thread of a pool of their own: six of them used to hold every thread of the event loop's
    default pool (cores + 4), and `status` timed out. One more waits ``patience_s`` for a
    place and is then answered ``busy`` (``WriterBusy``, with ``retry_after_s``) before it has
    changed anything. A wait whose client hung up gives its place back within ``_STEP_S``;
    its job stays queued (decision 0043)."""

    def __init__(self, places: int = WRITE_WAITERS, patience_s: float = BUSY_AFTER_S) -> None:
        self.places = places
        self.patience_s = patience_s
        self.waiting = 0  # requests holding a place now
        self.refused = 0  # requests answered busy since start
        self._free = asyncio.Semaphore(places)
        self._pool = ThreadPoolExecutor(max_workers=places + 1, thread_name_prefix="ragd-wait")

    @contextlib.asynccontextmanager
    async def place(self, d: Daemon) -> AsyncIterator[None]:
        """Hold a place while the request waits for the writer; ``WriterBusy`` when none
        frees within ``patience_s``."""
        try:
            await asyncio.wait_for(self._free.acquire(), self.patience_s)
        except TimeoutError:
            self.refused += 1
            raise self._busy(d) from None
        self.waiting += 1
        try:
            yield
        finally:
            self.waiting -= 1
            self._free.release()

    def _busy(self, d: Daemon) -> WriterBusy:
        paused = d.queue.paused
        return WriterBusy(
            f"ragd is busy: {'indexing is paused and ' if paused else ''}{self.waiting} "
            "requests already wait for its indexer, the most it lets wait at once",
            f"try again in {RETRY_AFTER_S:.0f} seconds; nothing was changed"
            + ("; `ragd resume` resumes indexing" if paused else "")
            + "; `ragd status` shows what is queued", retry_after_s=RETRY_AFTER_S)

    async def job(self, job: Job, conn: Connection, timeout: float) -> Any:
        """What ``job.wait(timeout)`` gives (its result, or its error raised), waited for on
        this pool; ``Interrupted`` if the client hangs up meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        while True:
            if await loop.run_in_executor(self._pool, job.done.wait, _STEP_S):
                if job.alias is None:  # merged into another job: its result is ours
                    break
                job = job.alias
                continue
            _still_asked(conn)
            if time.monotonic() > deadline:
                raise TimeoutError("indexing did not finish in time")
        if job.error is not None:
            raise job.error
        return job.result

    async def embedded(self, d: Daemon, names: list[str] | None, conn: Connection,
                       timeout: float) -> None:
        """Return once these collections' backlog is embedded (rag_index with wait=true
        answers when its collection is searchable in every mode), or at ``timeout``;
        ``Interrupted`` if the client hangs up meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        while not d._stop.is_set() and time.monotonic() <= deadline:
            left: int = await loop.run_in_executor(self._pool, d.unembedded, names)
            if not left:
                return
            _still_asked(conn)
            await asyncio.sleep(0.1)


    async def settled(self, d: Daemon, job: Job, names: list[str] | None, conn: Connection,
                      within: float) -> tuple[Any, bool]:
        """Wait up to ``within`` seconds for ``job`` and then for these collections' vectors
        (an admin tool's bounded answer: issue 37). (the job's result, or None if it has not
        finished; whether the vectors are all there too)."""
        deadline = time.monotonic() + within
        try:
            result = await self.job(job, conn, within)
        except TimeoutError:
            return None, False
        await self.embedded(d, names, conn, max(0.0, deadline - time.monotonic()))
        left = await asyncio.get_running_loop().run_in_executor(self._pool, d.unembedded,
                                                                 names)
        return result, not left


def _still_asked(conn: Connection) -> None:
    if conn.closed:
        raise Interrupted("the client hung up while it waited for the indexer; "
                          "what it asked for stays queued")


async def status(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    """The daemon's state; with brief=true only state, start-up phase and indexing, answered
    without touching the catalog (what the CLI asks before a request that may wait)."""
    if params.get("brief"):
        return d.brief_status()
    return await asyncio.get_running_loop().run_in_executor(_STATUS_POOL, d.status)


async def search(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    from ragd.daemon.search.params import build_request

    app = await d._ready()
    keys = ("query", "collection", "top_k", "source_type", "date_from", "date_to", "sender",
            "author", "mode", "folder", "tags", "explain", "searches")
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
    """Queue an explicit sync (or rebuild); with wait=true, answer when it is done, holding
    one of the places of the requests that wait for the writer (or answered busy)."""
    app = await d._ready()
    if not params.get("wait", True):
        return await _index(d, app, params, conn)
    async with d.writer_waits.place(d):
        return await _index(d, app, params, conn)


async def _index(d: Daemon, app: Any, params: dict[str, Any], conn: Connection) -> Any:
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


async def _index_within(d: Daemon, app: Any, job: Job, name: str | None, conn: Connection,
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
    """Pause indexing; with ``embedding``, only the vectors: files are still read and
    keyword-searchable, and semantic search finds them by their words until resumed."""
    if params.get("embedding"):
        d.embedding_paused = True
        d._emit(d.indexing_event("indexing"))
        return {"paused": d.queue.paused, "embedding_paused": True}
    d.queue.pause()
    d._emit(d.indexing_event("paused"))
    return {"paused": True, "embedding_paused": d.embedding_paused}


async def resume(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    """Resume indexing and embedding."""
    d.queue.resume()
    d.embedding_paused = False
    d.wake_embedding()
    d._emit(d.indexing_event("indexing"))
    return {"paused": False, "embedding_paused": False}


async def shutdown(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    asyncio.get_running_loop().call_later(0.05, d.request_stop)
    return {"stopping": True}


async def subscribe(d: Daemon, params: dict[str, Any], conn: Connection) -> Any:
    d.subscribe(conn)
    status = await asyncio.get_running_loop().run_in_executor(_STATUS_POOL, d.status)
    return {"subscribed": True, "status": status}


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
