"""The ragd daemon: one per user, owner of every index, served over a local socket.

Threads: the asyncio loop (IPC) on the main thread; one writer thread that owns all index
writes; one watcher thread. Searches run on worker threads against the last committed state
and never wait for the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import logging.handlers
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from ragd.daemon import __version__
from ragd.daemon.errors import Interrupted, RagdError
from ragd.daemon.indexer.pipeline import IndexReport, Progress
from ragd.daemon.indexer.timings import SMALL_JOBS_KEPT, job_timing, summary
from ragd.daemon.ipc import discovery
from ragd.daemon.ipc.protocol import PROTOCOL_VERSION
from ragd.daemon.ipc.server import Connection, IpcServer
from ragd.daemon.runtime.embedding import EmbeddingThread
from ragd.daemon.runtime.methods import HANDLERS
from ragd.daemon.runtime.scheduler import EXPLICIT, HINT, SWEEP, Job, JobQueue
from ragd.daemon.runtime.stopping import GRACE_S, StopDeadline, force_exit
from ragd.daemon.runtime.watch import Watcher
from ragd.daemon.runtime.writer_waits import WriterWaits
from ragd.daemon.settings.config import Config
from ragd.daemon.settings.paths import Paths
from ragd.daemon.stores import backlog
from ragd.daemon.stores.projection import index_names

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 180.0  # how long a request waits for the model to load at start-up
# What a starting daemon is doing (status `phase`): requests wait until these are over.
LOADING_MODEL = "loading model"
OPENING_INDEX = "opening index"
# Once it answers: the first sweep, over what changed while the daemon was off.
CATCHING_UP = "catching up"
SAVE_INTERVAL_S = 30.0  # FAISS is persisted at most this often while indexing


def setup_logging(paths: Paths, *, stderr: bool, verbose: bool = False) -> None:
    """A rotating log file in the state dir, plus stderr for `ragd daemon` in a terminal."""
    paths.state_dir.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    fh = logging.handlers.RotatingFileHandler(paths.log_file, maxBytes=5_000_000,
                                              backupCount=3, encoding="utf-8")
    fh.setFormatter(fmt)
    root.addHandler(fh)
    if stderr:
        sh = logging.StreamHandler()
        sh.setFormatter(fmt)
        root.addHandler(sh)
    for noisy in ("httpx", "sentence_transformers", "transformers", "watchfiles", "faiss"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _brief(report: IndexReport) -> dict[str, Any]:
    """A sync report without its file lists (those are served by the `skipped` method)."""
    d = report.as_dict()
    for key in ("skipped_files", "warnings", "errors"):
        d[key] = len(d[key])  # type: ignore[arg-type]
    return d


class Daemon:
    def __init__(self, paths: Paths, config: Config, *,
                 on_ready: Callable[[dict[str, Any]], None] | None = None,
                 window: Callable[[Daemon, asyncio.AbstractEventLoop], Any] | None = None
                 ) -> None:
        """``on_ready`` is called once, from the writer thread, when start-up is over (with
        :meth:`ready_info`): the foreground CLI prints its "ready" line from it. ``window``
        makes ragd's window (``ragd.daemon.web.server.WebServer``: given, as the window
        imports the daemon's handlers); without it the daemon serves with no window."""
        self.paths = paths
        self.config = config
        from ragd.daemon.runtime.power import power_gate

        self.power = power_gate(config)  # bulk work waits on battery (decision 0044)
        self.queue = JobQueue(hold_bulk=self.power.reason)
        self._writer_bulk = False  # the writer's priority: bulk mode (low) or normal
        self.app: Any = None
        self.ready = threading.Event()
        self.fatal: str | None = None
        self.started_at = time.time()
        self._started_mono = time.monotonic()
        self.phase = LOADING_MODEL  # the start-up step under way (the failed one on error)
        self.ready_s: float | None = None  # how long start-up took
        self.address: str | None = None
        self._on_ready = on_ready
        self._catch_up: list[Job] = []
        self.progress: Progress | None = None
        self.recent_errors: list[dict[str, Any]] = []
        self.last_reports: dict[str, dict[str, Any]] = {}
        # The last small jobs (saved notes, a few files), each split into phases (issue 21).
        self.small_jobs: deque[dict[str, Any]] = deque(maxlen=SMALL_JOBS_KEPT)
        self.retrying: dict[str, dict[str, Any]] = {}  # busy sources synced again later
        self._stop = threading.Event()
        self._deadline = StopDeadline(lambda: discovery.remove_status(paths, pid=os.getpid()))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._subscribers: set[Connection] = set()
        self._server: IpcServer | None = None
        self._writer = threading.Thread(target=self._writer_main, name="ragd-writer",
                                        daemon=True)
        self._watcher: Watcher | None = None
        self._code_watcher: Watcher | None = None
        self._embedding: EmbeddingThread | None = None
        # `ragd pause --embedding`: files are read and keyword-indexed, vectors wait.
        self.embedding_paused = False
        self.concepts: Any = None  # the concept thread (decision 0033)
        self._last_event = 0.0
        self.on_demand: Any = None  # a client's conversions: open before the model (0032)
        self.writer_waits = WriterWaits()  # requests that wait for the writer (0043)
        self._window = window
        self.web: Any = None  # ragd's window (decision 0053)

    # -- lifecycle ----------------------------------------------------------------------------
    def run(self) -> int:
        """Serve until shutdown; returns the exit code."""
        lock = discovery.acquire_instance_lock(self.paths)
        try:
            code = asyncio.run(self._main())
        finally:
            lock.release()
        if self._writer.is_alive():  # still busy past its grace: do not wait (decision 0024)
            force_exit(lambda: None, code)
        return code

    async def _main(self) -> int:
        self._loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            # Windows has no loop signal handlers; nor does a loop off the main thread.
            with contextlib.suppress(NotImplementedError, RuntimeError):
                self._loop.add_signal_handler(sig, self.request_stop)
        from ragd.daemon.convert.documents import DocumentSettings
        from ragd.daemon.runtime.app import on_demand_documents

        self.paths.ensure()
        self.on_demand = on_demand_documents(self.paths.docstore_dir,
                                             DocumentSettings.from_config(self.config))
        from ragd.daemon.ipc.pipes import new_token

        token = new_token() if self.paths.is_windows else None  # decision 0032
        self._server = IpcServer(self._dispatch, version=__version__,
                                 max_frame_bytes=int(self.config.daemon.max_frame_mb * 2**20),
                                 token=token)
        address = self.address = await self._server.start(self.paths)
        self.web = await self._start_window()
        discovery.write_status(self.paths, pid=os.getpid(), socket=address,
                               version=__version__, protocol=PROTOCOL_VERSION,
                               started_at=self.started_at, token=token,
                               window=self.web.url if self.web is not None else None)
        log.info("ragd %s listening on %s (pid %d)", __version__, address, os.getpid())
        self._writer.start()
        sweeper = asyncio.create_task(self._sweeper())
        try:
            while not self._stop.is_set():
                await asyncio.sleep(0.2)
        finally:
            sweeper.cancel()
            await self._shutdown()
        return 0 if self.fatal is None else 1

    async def _start_window(self) -> Any:
        """ragd's own window on loopback (decision 0053); a daemon without it still serves."""
        if self._window is None or not self.config.daemon.window:
            return None
        try:
            web = self._window(self, asyncio.get_running_loop())
            await asyncio.to_thread(web.start)
        except Exception:
            log.exception("ragd's window could not start; search over MCP and the CLI go on")
            return None
        log.info("ragd's window at http://127.0.0.1:%d/ (`ragd open` opens it)", web.port)
        return web

    def request_stop(self) -> None:
        log.info("stopping")
        self._stop.set()
        self.queue.close()
        if self._loop is not None:  # serving: conversions cancelled now, out within 3.5 s
            self._deadline.start()

    async def _shutdown(self) -> None:
        self.queue.close()
        if self._watcher is not None:
            await asyncio.to_thread(self._watcher.stop)
        if self._code_watcher is not None:
            await asyncio.to_thread(self._code_watcher.stop)
        await asyncio.to_thread(self._writer.join, GRACE_S)
        if self.web is not None:
            await asyncio.to_thread(self.web.stop)
        if self._server is not None:
            await self._server.close()
        if self.on_demand is not None:
            await asyncio.to_thread(self.on_demand.close)
        discovery.remove_status(self.paths, pid=os.getpid())
        log.info("stopped")

    async def _sweeper(self) -> None:
        """Catch what events miss: a full reconcile every sweep_interval_s."""
        while True:
            await asyncio.sleep(self.config.daemon.sweep_interval_s)
            if self.ready.is_set():
                self.enqueue_all(SWEEP)

    # -- the writer ---------------------------------------------------------------------------
    def _writer_main(self) -> None:
        try:
            started = self._start_up()
        finally:
            # Ready only now: a status taken before the catch-up is queued would say "idle",
            # and a client waiting for idle would search an index not yet built.
            self.ready_s = round(time.monotonic() - self._started_mono, 2)
            self.ready.set()
            self._announce()
        if not started:
            return
        last_save = time.monotonic()
        try:
            while not self._stop.is_set():
                job = self.queue.get(timeout=1.0)
                if job is not None:
                    self._run_job(job)
                if (time.monotonic() - last_save > SAVE_INTERVAL_S or (
                        job is not None and self.queue.idle())) \
                        and not self.queue.small_queued():  # a saved note first
                    self.app.indexer.save()
                    last_save = time.monotonic()
        finally:
            if self._embedding is not None:
                self._embedding.stop()
            self.app.close()

    def _start_up(self) -> bool:
        """Load the model, open the index, start watching and queue the catch-up sweep.

        The model comes first: it is the slow part, and it is what a waiting request is told
        about. False (with ``fatal`` set and ``phase`` left at the failed step) on failure.
        """
        from ragd.daemon.embed.embedding import make_embedder
        from ragd.daemon.runtime.app import App

        try:
            self._set_phase(LOADING_MODEL)
            self.paths.ensure()
            embedder = make_embedder(self.config.embedding, self.paths.data_dir)
            warm_up = getattr(embedder, "warm_up", None)
            if warm_up is not None:
                # The batch session's thread pool is made here: on a lowered thread, so that
                # its threads run bulk embedding at low priority too (decision 0044).
                from ragd.daemon.priority import run_lowered

                run_lowered(warm_up, name="ragd-model")
            # And the query path, at the user's priority, before "ready": the first search
            # after ready made the query session (0.25 s here, 3.7 s on a busy machine).
            embedder.embed_query("ragd")
            self._set_phase(OPENING_INDEX)
            self.app = App(self.paths, self.config, embedder=embedder,
                           on_progress=self._on_progress, indexing=self.indexing,
                           should_stop=self._should_stop, on_demand=self.on_demand)
            self.app.indexer.give_way = self.queue.fresh_small_queued  # decision 0025
        except Exception as exc:
            log.exception("could not start (%s)", self.phase)
            self.fatal = str(exc)
            return False
        try:
            self._watcher = Watcher(self.watch_roots, self.config.index.exclude, self.on_hints,
                                    self.config.daemon.debounce_ms, self.mail_collections)
            self._watcher.start()
            from ragd.daemon.runtime.codegroups import start_watcher  # decision 0030

            self._code_watcher = start_watcher(self.app, self.on_hints,
                                               self.config.index.exclude,
                                               self.config.daemon.debounce_ms)
            self._embedding = EmbeddingThread(self.app.indexer, hold=self._hold_embedding,
                                              on_slice=self._on_embedded)
            self._embedding.start()
            from ragd.daemon.runtime.concept_thread import start_concepts  # decision 0033

            self.concepts = start_concepts(self)
            # Catch up with what changed while the daemon was off.
            self._catch_up = self.enqueue_all(SWEEP)
        except Exception as exc:
            log.exception("could not start watching")
            self.fatal = f"could not start watching: {exc}"
            self.app.close()
            return False
        return True

    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        log.info("start-up: %s (%.1f s so far)", phase, time.monotonic() - self._started_mono)

    def ready_info(self) -> dict[str, Any]:
        """What the "ready" line says: where to connect, and how start-up ended."""
        return {"version": __version__, "pid": os.getpid(), "socket": self.address,
                "seconds": self.ready_s, "fatal": self.fatal,
                "phase": self.phase if self.fatal else None, "log": str(self.paths.log_file),
                "sample_vault": str(getattr(self.app, "sample_vault", None) or "") or None}

    def _announce(self) -> None:
        if self.fatal is None:
            log.info("start-up took %.1f s", self.ready_s or 0.0)
        if self._on_ready is not None:
            try:
                self._on_ready(self.ready_info())
            except Exception:  # a closed terminal must not stop the daemon
                log.exception("could not announce readiness")

    def _should_stop(self) -> bool:
        return self._stop.is_set() or self.queue.paused or self.queue.preempted()

    def _hold_embedding(self) -> bool:
        """The embedding thread waits between slices while paused, while small work (a
        saved note) is queued or running, and while bulk work reads, unless a user's own edit
        waits for its vectors: the cores go to what the user is waiting for, and a bulk
        collection is keyword-searchable whole before its vectors start (decision 0022)."""
        if (self._stop.is_set() or self.queue.paused or self.embedding_paused
                or self.queue.small_waiting()):
            return True
        running = self.queue.running
        bulk = (running is not None and running.bulk) or self.queue.bulk_held()  # 0044
        return bulk and not self.app.catalog.backlog_urgent()

    def wake_embedding(self) -> None:
        if self._embedding is not None:
            self._embedding.wake()

    def _on_embedded(self) -> None:
        now = time.monotonic()
        if now - self._last_event >= 0.5:
            self._last_event = now
            self._emit(self.indexing_event("indexing" if self.indexing()["active"]
                                           else "idle"))
    def _requeued(self, job: Job) -> bool:
        """Put an interrupted job back: first after a resume, or behind the request that
        preempted it. False when the daemon is stopping."""
        if self._stop.is_set():
            return False
        if self.queue.paused:
            self.queue.requeue_front(job)
            return True
        if self.queue.preempted() or (not job.bulk and self.queue.small_queued()):
            self.queue.requeue(job)  # a small job that gave way goes behind (decision 0025)
            return True
        return False

    def _run_job(self, job: Job) -> None:
        app = self.app
        self._emit({"type": "job", "state": "started", "collection": job.collection})
        # What the user edits or asks for is embedded before bulk work, and bulk work of
        # every collection takes turns, explicit or not (decision 0022).
        app.indexer.urgency = backlog.BULK if job.bulk else backlog.URGENT
        if job.bulk != self._writer_bulk:  # a save at normal priority, bulk work low (0044)
            from ragd.daemon.priority import bulk_mode

            self._writer_bulk = job.bulk
            bulk_mode(job.bulk)
        started = time.monotonic()
        try:
            if job.kind == "rebuild":
                job.finish(app.rebuild(index_names(job.collection or "all")))
            elif job.kind == "remove":  # a project folder the window removes (0053)
                job.finish(app.remove_project(str(job.collection)))
            else:
                names = [job.collection] if job.collection else [c.name for c in
                                                                 app.catalog.collections()]
                reports = []
                for name in names:
                    coll = app.collection(name)
                    paths = None if job.paths is None or "" in job.paths else sorted(job.paths)
                    reports.append(app.sync_collection(coll, paths=paths, force=job.force))
                    self._note_errors(reports[-1])
                    self.retrying.pop(name, None)
                    self.last_reports[name] = _brief(reports[-1])
                job.finish(reports)
        except Interrupted:
            if not self._requeued(job):
                job.finish(error=Interrupted("the daemon is shutting down"))
        except RagdError as exc:
            log.warning("indexing %s: %s", job.collection, exc)
            self.recent_errors.append({"time": time.time(), "error": str(exc)})
            retry = getattr(exc, "retry_after_s", None)  # a busy source (a locked library)
            if retry and job.kind == "sync":
                self._retry_later(job, float(retry), str(exc))
            job.finish(error=exc)
        except Exception as exc:
            log.exception("indexing %s failed", job.collection)
            self.recent_errors.append({"time": time.time(), "error": repr(exc)})
            job.finish(error=exc)
        finally:
            if not job.bulk and job.kind == "sync":
                self._time_small(job, started)
            self.queue.task_done(job)
            self.progress = None
            del self.recent_errors[:-20]
            self._emit(self.indexing_event("idle" if self.queue.idle() else "indexing"))

    def _time_small(self, job: Job, started: float) -> None:
        """Record a small job's phases: what it waited for in the queue, and its run."""
        indexer = self.app.indexer
        self.small_jobs.append(job_timing(
            collection=job.collection, paths=sorted(job.paths or ()), queued=job.queued_at,
            started=started, visible=indexer.visible_at, ended=time.monotonic(),
            spans=indexer.spans, finished=job.done.is_set() and job.alias is None))
        if log.isEnabledFor(logging.DEBUG):
            log.debug("small job: %s", summary(list(self.small_jobs)[-1:]))

    def _retry_later(self, job: Job, delay: float, why: str) -> None:
        """Sync again after ``delay`` (a Calibre library being saved is locked for a moment);
        `status` shows it under ``retrying`` until a sync of the collection succeeds."""
        self.retrying[job.collection or "all"] = {"error": why, "retry_at": time.time() + delay}

        def again() -> None:
            if not self._stop.is_set():
                self.queue.put(Job("sync", job.collection, HINT, paths=job.paths))

        timer = threading.Timer(delay, again)
        timer.daemon = True
        timer.start()

    def _note_errors(self, report: IndexReport) -> None:
        for path, err in report.errors:
            self.recent_errors.append({"time": time.time(), "path": path, "error": err})

    # -- scheduling ---------------------------------------------------------------------------
    def watch_roots(self) -> dict[str, str]:
        if self.app is None:
            return {}
        return self.app.watch_roots()

    def mail_collections(self) -> set[str]:
        if self.app is None:
            return set()
        return {c.name for c in self.app.catalog.collections() if c.kind == "mail"}

    def on_hints(self, hints: Mapping[str, set[str]],
                 weights: Mapping[str, int] | None = None) -> None:
        for name, rels in hints.items():
            self.queue.put(Job("sync", name, HINT, paths=set(rels), estimate=len(rels),
                               weight=(weights or {}).get(name, 0)))

    def enqueue_all(self, priority: int, force: bool = False) -> list[Job]:
        return [self.enqueue(c.name, priority, force=force)
                for c in self.app.catalog.collections()]

    def enqueue(self, name: str | None, priority: int = EXPLICIT, *, force: bool = False) -> Job:
        estimate = 1
        if name is not None and self.app is not None:
            coll = self.app.catalog.collection(name)
            if coll is not None:
                estimate = max(1, self.app.catalog.collection_stats(coll.id)["source_count"])
        return self.queue.put(Job("sync", name, priority, force=force, estimate=estimate))

    # -- progress -----------------------------------------------------------------------------
    def _on_progress(self, p: Progress) -> None:
        self.progress = p
        if p.phase == "index":
            self.queue.progress_left = max(0, p.total - p.done)
        now = time.monotonic()
        if now - self._last_event >= 0.2 or p.phase == "done":
            self._last_event = now
            self._emit(self.indexing_event("indexing"))

    def indexing(self) -> dict[str, Any]:
        """`indexing` of every search answer: remaining = sources queued or in progress, and
        sources read but not embedded yet (keyword-searchable; semantic search to follow)."""
        remaining, waiting = self.queue.remaining(), 0
        if self.app is not None:
            remaining += self.app.indexer.backlog.sources
            waiting = self.app.indexer.backlog.chunks
        active = remaining > 0 or self.queue.running is not None
        # unembedded_chunks: chunks found by their words only until their vectors come.
        return {"active": active, "remaining": remaining if active else 0,
                "unembedded_chunks": waiting}

    def follow_up(self, what: str) -> dict[str, Any]:
        """The fields of an admin tool's bounded answer whose work goes on (issue 37): that
        it is queued, how far it is, and how to follow it."""
        return {"queued": True, "indexing": self.indexing(),
                "follow": f"{what} goes on in the background: rag_search's indexing.remaining,"
                          " the vault tools' stats (unembedded_chunks) or `ragd status` show "
                          "how far it is; searches meanwhile find new text by its words"}

    def backlog_status(self) -> dict[str, Any]:
        """`status` ``embedding``: chunks and sources waiting for vectors, and chunks embedded
        by the embedding thread since start."""
        if self.app is None:
            return {"chunks": 0, "sources": 0, "embedded": 0}
        counts = self.app.indexer.backlog
        return {"chunks": counts.chunks, "sources": counts.sources,
                "embedded": self._embedding.embedded if self._embedding else 0}

    def unembedded(self, names: list[str] | None) -> int:
        """Chunks of these collections (None: all) still waiting for their vectors."""
        if self.app is None:
            return 0
        counts = self.app.indexer.refresh_backlog()
        if names is None:
            return counts.chunks
        ids = [c.id for c in self.app.catalog.collections() if c.name in names]
        return sum(counts.of(i)[0] for i in ids)

    def indexing_event(self, state: str) -> dict[str, Any]:
        p = self.progress
        return {"type": "progress", "state": self.state() if state != "idle" else "idle",
                **self.indexing(),
                "collection": p.collection if p else None, "phase": p.phase if p else None,
                "done": p.done if p else 0, "total": p.total if p else 0,
                "embedded": p.chunks_embedded if p else 0}

    def _emit(self, event: dict[str, Any]) -> None:
        loop = self._loop
        if loop is None or not self._subscribers:
            return
        loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._broadcast(event)))

    async def _broadcast(self, event: dict[str, Any]) -> None:
        for conn in list(self._subscribers):
            if conn.closed:
                self._subscribers.discard(conn)
            else:
                await conn.notify("progress", event)

    def state(self) -> str:
        if self.fatal:
            return "error"
        if not self.ready.is_set():
            return "starting"
        if self.queue.paused:
            return "paused"
        return "indexing" if self.indexing()["active"] else "idle"

    def startup(self) -> dict[str, Any]:
        """The start-up fields of `status`: ``phase`` (what a ``starting`` daemon is doing, the
        step that failed on ``error``, ``catching up`` during the first sweep, else None),
        ``starting_s`` (seconds so far, while starting) and ``ready_s`` (once ready)."""
        phase: str | None = None
        starting_s = None
        if not self.ready.is_set():
            phase = self.phase
            starting_s = round(time.monotonic() - self._started_mono, 1)
        elif self.fatal:
            phase = self.phase
        elif any(not job.done.is_set() for job in self._catch_up):
            phase = CATCHING_UP
        return {"phase": phase, "starting_s": starting_s, "ready_s": self.ready_s}

    # -- requests -----------------------------------------------------------------------------
    async def _ready(self) -> Any:
        # Polled, not waited for on a thread: requests arriving during start-up must not
        # hold the threads that `status` needs (decision 0043).
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.ready.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if not self.ready.is_set():
            raise RagdError(f"the daemon is still starting ({self.phase}) after "
                            f"{READY_TIMEOUT_S:.0f} s",
                            f"see the log at {self.paths.log_file}")
        if self.fatal or self.app is None:
            raise RagdError(f"the daemon could not start ({self.phase}): {self.fatal}",
                            f"see the log at {self.paths.log_file}; `ragd doctor` checks it")
        return self.app

    async def _dispatch(self, method: str, params: Any, conn: Connection) -> Any:

        if hasattr(params, "model_dump"):
            params = params.model_dump()
        return await HANDLERS[method](self, dict(params or {}), conn)

    def subscribe(self, conn: Connection) -> None:
        self._subscribers.add(conn)
        conn.on_close.append(lambda *_: self._subscribers.discard(conn))

    def brief_status(self) -> dict[str, Any]:
        """`status` with ``brief``: what a client checks before a request (no catalog reads)."""
        return {"state": self.state(), "version": __version__, "pid": os.getpid(),
                "paused": self.queue.paused, "indexing": self.indexing(), **self.startup()}

    def status(self) -> dict[str, Any]:
        """Everything `ragd status` and the tray show."""
        out: dict[str, Any] = {
            "state": self.state(), "version": __version__, "protocol": PROTOCOL_VERSION,
            "pid": os.getpid(), "started_at": self.started_at,
            "uptime_s": round(time.time() - self.started_at, 1),
            "paused": self.queue.paused, "indexing": self.indexing(),
            "embedding_paused": self.embedding_paused,
            # Bulk work waits for this reason ("battery"), saves do not (decision 0044).
            "paused_for": self.queue.held_for, "power": self.power.status(),
            "queue": self.queue.snapshot(), "errors": list(self.recent_errors[-10:]),
            # Requests waiting for the writer, and those answered busy (decision 0043).
            "writer_waits": {"waiting": self.writer_waits.waiting,
                             "places": self.writer_waits.places,
                             "refused": self.writer_waits.refused},
            "paths": {"config": str(self.paths.config_file), "log": str(self.paths.log_file),
                      "data": str(self.paths.data_dir)},
            "watching": sorted(self._watcher.watching) if self._watcher else [],
            "fatal": self.fatal, "collections": [], "retrying": dict(self.retrying),
            "reembedding": bool(self.app is not None and self.app.reembed_needed),
            "embedding": self.backlog_status(),
            "small_jobs": list(self.small_jobs),
            # The concept analysis is work too (issue 37): busy, and documents still to come.
            "concepts": self.concepts.status() if self.concepts is not None else None,
            **self.startup(),
        }
        p = self.progress
        if p is not None:
            out["current"] = {"collection": p.collection, "phase": p.phase, "done": p.done,
                              "total": p.total, "embedded": p.chunks_embedded}
        if self.ready.is_set() and self.app is not None:
            colls = self.app.list_collections()
            for c in colls:
                coll = self.app.catalog.collection(c["name"])
                st = self.app.catalog.collection_stats(coll.id)
                c["skipped_count"], c["skips"] = st["skipped_count"], st["skips"]
                c["unembedded_chunks"] = self.app.indexer.backlog.of(coll.id)[0]
                c["last_report"] = self.last_reports.get(c["name"])
            out["collections"] = colls
            out["embedded_total"] = getattr(self.app.embedder, "calls", None)
        return out
