"""The composition root: the only place that opens and closes resources, in a fixed order.

catalog -> embedder -> FAISS -> Whoosh -> indexer -> search; closed in reverse.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragd.daemon.convert.docstore import DocStore
from ragd.daemon.convert.documents import Documents, DocumentSettings, open_documents
from ragd.daemon.convert.process import ConversionCancelled, ConversionWorker
from ragd.daemon.embed.embedding import Embedder, make_embedder
from ragd.daemon.errors import ConfigError, Interrupted, InvalidArgument, RootRefused
from ragd.daemon.extract.pool import open_pool
from ragd.daemon.indexer.pipeline import Indexer, IndexReport, Progress
from ragd.daemon.search.engine import SearchEngine, SearchSettings
from ragd.daemon.settings.config import Config
from ragd.daemon.settings.paths import Paths
from ragd.daemon.settings.policy import check_name, check_new_name, check_root
from ragd.daemon.settings.vaults import discover_vaults
from ragd.daemon.sources.base import kind_for
from ragd.daemon.stores.catalog import Catalog, Collection
from ragd.daemon.stores.feeds import feed_stats
from ragd.daemon.stores.fulltext import open_keyword_store, record_backend
from ragd.daemon.stores.vectors import FaissStore

log = logging.getLogger(__name__)

SYSTEM_DESCRIPTIONS = {
    "obsidian": "Obsidian vault notes (markdown with tags, aliases and wikilinks)",
    "email": "Mail messages (Maildir, mbox, .eml) with sender, recipients, date and folder",
    "calibre": "Calibre books with authors, tags, series, publisher and page or chapter",
    "rss": "Feed entries (RSS, Atom, JSON Feed, OPML, Newsboat) with feed name, link and date",
}
_MAIL_ONLY = "mail_only:"  # catalog meta key prefix: the one file a mail collection reads
_CONFIGURED = "configured_root:"  # catalog meta key prefix: a system collection's setting
# Conversions a client asks for (rag_convert, `ragd convert`) have their own worker: one
# converting, two waiting, more refused (decision 0024).
ON_DEMAND_MAX_CALLS = 3


def vault_roots(config: Config) -> list[Path]:
    """Configured vaults, else the ones Obsidian itself lists (open vault first)."""
    if config.obsidian.vaults:
        return [Path(v).expanduser() for v in config.obsidian.vaults]
    return discover_vaults()


def iso_time(ts: float | None) -> str | None:
    """Seconds since the epoch -> ISO 8601 in UTC (what the tools return)."""
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).isoformat(timespec="seconds")


_NO_FILE_LIMIT = "no_file_limit:"  # catalog meta key prefix: index.max_files lifted
_OCR_PDFS = "ocr_pdfs:"  # catalog meta key prefix: documents.ocr_pdfs at the last full sync


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:48].strip("-") or "vault"


class App:
    """Everything the daemon (or the in-process CLI) needs, opened once."""

    def __init__(self, paths: Paths, config: Config, *, embedder: Embedder | None = None,
                 on_progress: Callable[[Progress], None] | None = None,
                 indexing: Callable[[], dict[str, Any] | None] = lambda: None,
                 should_stop: Callable[[], bool] | None = None,
                 on_demand: Documents | None = None, sample: bool = False) -> None:
        """``on_demand``: the doc store a client's conversions use, when the caller opened it
        before (the daemon does, to convert while the model loads) and closes it itself.
        ``sample``: with nothing to index, index the sample vault (`ragd index`, 0032)."""
        self.paths = paths
        self._sample_wanted = sample
        self.sample_vault: Path | None = None  # the `obsidian` collection is the sample
        self.config = config
        self.on_close: list[Callable[[], None]] = []
        paths.ensure()
        self.catalog = Catalog(paths.catalog_path)
        try:
            self.embedder = embedder or make_embedder(config.embedding, paths.data_dir)
            fp = self.embedder.fingerprint
            self.faiss = FaissStore(paths.faiss_dir, fp, self.embedder.dimension,
                                    approx_from=config.index.approx_vectors_from)
            backend = config.index.keyword_backend
            self.whoosh, rebuild_keywords = open_keyword_store(
                backend, paths.data_dir, paths.whoosh_dir, self.catalog)
            # Documents convert in a worker process started on first use (decision 0013);
            # a client's requests in a worker of their own, so indexing never waits for
            # them (decision 0024).
            settings = DocumentSettings.from_config(config)
            self.documents = open_documents(paths.docstore_dir, settings)
            self._own_on_demand = on_demand is None
            self.on_demand = on_demand or on_demand_documents(paths.docstore_dir, settings)
        except BaseException:
            if hasattr(self, "documents"):
                self.documents.close()
            self.catalog.close()
            raise
        self.indexer = Indexer(self.catalog, self.embedder, [self.faiss, self.whoosh],
                               max_file_bytes=int(config.index.max_file_mb * 1024 * 1024),
                               on_progress=on_progress, should_stop=should_stop)
        # Files are read, parsed and chunked in worker processes under a deadline and a memory
        # limit; the daemon only commits (decision 0041).
        x = config.extract
        self.indexer.extract = open_pool(self.embedder, timeout_s=x.timeout_s,
                                         memory_mb=x.memory_mb, workers=x.workers)
        s = config.search
        self.search_engine = SearchEngine(
            self.catalog, self.embedder, self.faiss, self.whoosh,
            SearchSettings(rrf_k=s.rrf_k, keyword_weight=s.keyword_weight,
                           semantic_weight=s.semantic_weight, exact_weight=s.exact_weight,
                           overfetch=s.overfetch, max_per_source=s.max_per_source,
                           fusion=s.fusion, z_semantic_weight=s.z_semantic_weight,
                           z_note_weight=s.z_note_weight, z_keyword_weight=s.z_keyword_weight,
                           z_keyword_note_weight=s.z_keyword_note_weight,
                           rare_first=s.rare_first),
            indexing)
        self._reembedded: set[str] = set()
        self.reembed_needed = self._check_fingerprint()
        if rebuild_keywords:  # a new index, a new schema, or the other backend served last
            self.indexer.rebuild([self.whoosh.name])
            record_backend(self.catalog, backend)
        self.register_system_collections()
        # Replay what a crash left between the catalog commit and the index writes.
        self.indexer.catch_up()

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        try:
            self.indexer.save()
        finally:
            self.indexer.close_parked()
            if self.indexer.extract is not None:
                self.indexer.extract.close()
            self.documents.close()
            if self._own_on_demand:
                self.on_demand.close()
            self.whoosh.close()
            self.catalog.close()
            for callback in self.on_close:
                callback()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_fingerprint(self) -> bool:
        """A changed model or chunker means a visible full re-embed, never mixed vectors."""
        fp = self.embedder.fingerprint
        stored = self.catalog.get_meta("fingerprint")
        has_chunks = bool(self.catalog.last_op()) or bool(self.catalog.collections())
        if stored is not None and stored != fp and has_chunks:
            log.warning("embedding fingerprint changed (%s -> %s): every source will be "
                        "re-chunked and re-embedded", stored, fp)
            self.faiss.reset(fp)
            return True
        if self.faiss.stale:
            # Vectors are cached in the catalog: rebuilding FAISS costs no embedding.
            self.indexer.rebuild(["faiss"])
        self.catalog.set_meta("fingerprint", fp)
        return False

    # -- collections --------------------------------------------------------------------------
    def register_system_collections(self) -> list[Collection]:
        """Register the configured (or discovered) vaults, the first as `obsidian`, and the
        configured mail paths, the first as `email`."""
        from ragd.daemon.runtime import sample
        from ragd.daemon.runtime.codegroups import register_code_groups
        from ragd.daemon.runtime.feeds import register_rss

        out = (self._register_vaults() + self._register_mail() + self._register_calibre()
               + register_rss(self) + register_code_groups(self))
        if self._sample_wanted and self.config.obsidian.enabled \
                and not self.catalog.collections():
            out.append(sample.register(self))
        known = self.catalog.collection("obsidian")
        self.sample_vault = Path(known.root) if known and sample.is_sample(self, known) else None
        return out

    def _register_calibre(self) -> list[Collection]:
        """Each library of ``[calibre] libraries`` (else the one Calibre's own settings name)
        is a collection: `calibre`, then `calibre-<name>`."""
        from ragd.daemon.settings.calibrelib import METADATA_DB, discover_libraries

        out: list[Collection] = []
        if not self.config.calibre.enabled:
            return out
        raw = self.config.calibre.libraries
        said = [Path(p).expanduser() for p in raw] if raw else discover_libraries()
        for n, configured in enumerate(said):
            root = configured.resolve()
            if not (root / METADATA_DB).is_file():
                log.warning("[calibre] libraries: %s holds no %s; skipped", root, METADATA_DB)
                continue
            name = "calibre" if n == 0 else f"calibre-{_slug(root.name)}"
            out.append(self.ensure_system(
                name, configured, root, kind="calibre",
                description=f"{SYSTEM_DESCRIPTIONS['calibre']}: {root}"))
        return out

    def _register_mail(self) -> list[Collection]:
        """Each path of ``[email] paths`` is a collection: `email`, then `email-<name>`. A path
        that is a file (an mbox, an .eml) is read alone from its folder. Thunderbird folders
        found on the machine are only offered (``ragd doctor``), never indexed unasked."""
        out: list[Collection] = []
        if not self.config.email.enabled:
            return out
        for n, raw in enumerate(self.config.email.paths):
            configured = Path(raw).expanduser()
            path = configured.resolve()
            if not path.exists():
                log.warning("[email] paths: %s does not exist; skipped", path)
                continue
            name = "email" if n == 0 else f"email-{_slug(path.name)}"
            desc = f"{SYSTEM_DESCRIPTIONS['email']}: {path}"
            if path.is_dir():
                out.append(self.ensure_system(name, configured, path, kind="mail",
                                              description=desc))
            else:  # one file, read alone from its folder
                out.append(self.catalog.ensure_collection(
                    name, type="system", kind="mail", root=str(path.parent), description=desc))
            self.catalog.set_meta(_MAIL_ONLY + name, "" if path.is_dir() else path.name)
        return out

    def _register_vaults(self) -> list[Collection]:
        from ragd.daemon.runtime import sample

        out: list[Collection] = []
        if not self.config.obsidian.enabled:
            return out
        roots = [Path(v).expanduser() for v in self.config.obsidian.vaults]
        known = self.catalog.collection("obsidian")
        if not roots and known is not None and not sample.is_sample(self, known):
            # The vault indexed before stays the vault until the user configures another:
            # Obsidian opening a different vault must not silently swap the index (the
            # sample vault is no one's: a vault found replaces it, decision 0032).
            return out
        for n, root in enumerate(roots or discover_vaults()):
            name = "obsidian" if n == 0 else f"obsidian-{_slug(root.name)}"
            desc = SYSTEM_DESCRIPTIONS["obsidian"] + f": {root.name}"
            out.append(self.ensure_system(name, root, root.resolve(), kind="vault",
                                          description=desc))
        return out

    def ensure_system(self, name: str, configured: Path, resolved: Path, *, kind: str,
                      description: str) -> Collection:
        """Register a configured folder. Its setting is the user's hand, so its target is
        taken as it resolves, except when the setting is the one registered before and
        resolves elsewhere now (a link swapped in, a folder replaced by a link): then the
        root is kept as configured, links and all, and the next sync puts its new target
        through the folder policy (:meth:`checked_root`) instead of indexing it unasked."""
        said = os.path.abspath(configured)
        root = str(resolved)
        existing = self.catalog.collection(name)
        if existing is not None and not _same_path(existing.root, root) \
                and self.catalog.get_meta(_CONFIGURED + name) in (None, said):
            log.warning("%s: %s leads to %s now, not %s; checked before it is read", name,
                        said, root, existing.root)
            root = said
        self.catalog.set_meta(_CONFIGURED + name, said)
        return self.catalog.ensure_collection(name, type="system", kind=kind, root=root,
                                              description=description)

    def create_project(self, name: str, path: str, *, allow_large: bool = False) -> Collection:
        """A user-named project collection over a folder the path policy allows
        (``ragd.daemon.settings.policy``); ``allow_large`` lifts ``index.max_files`` for it."""
        existing = self.catalog.collection(name)
        if existing is not None and existing.type != "project":
            raise InvalidArgument("collection", f"{name!r} is a {existing.type} collection",
                                  "choose another name for the project")
        if existing is None:
            check_new_name(name)
        guarded = (self.paths.data_dir, self.paths.state_dir, self.paths.config_dir)
        root = Path(check_root(path, guarded=guarded))
        if not root.is_dir():
            raise InvalidArgument("path", f"{path!r} is not an existing folder",
                                  "pass the absolute path of a folder to index")
        coll = self.catalog.ensure_collection(
            name, type="project", kind="folder", root=str(root),
            description=f"Project folder {root}")
        if allow_large:
            self.catalog.set_meta(_NO_FILE_LIMIT + name, "1")
        return coll

    def remove_project(self, name: str) -> dict[str, Any]:
        """Stop indexing a project folder and drop what it put in the indexes (the writer's
        job: its chunks leave the catalog through the journal, the indexes catch up). A
        configured collection (a vault, mail) is changed in config.toml instead."""
        coll = self.collection(name)
        if coll.type != "project":
            raise InvalidArgument("collection", f"{name!r} is a {coll.type} collection",
                                  "remove it from config.toml; only project folders added "
                                  "with rag_index or the window are removed here")
        paths = [r.path for r in self.catalog.source_records(coll.id)]
        chunks = self.catalog.delete_sources(coll.id, paths)
        self.catalog.drop_collection(coll.id)
        self.catalog.set_meta(_NO_FILE_LIMIT + name, "")
        self.indexer.catch_up()
        return {"removed": name, "sources": len(paths), "chunks": chunks}

    def max_files(self, coll: Collection) -> int | None:
        """The walk limit of a collection: index.max_files unless lifted for it."""
        if self.catalog.get_meta(_NO_FILE_LIMIT + coll.name):
            return None
        return self.config.index.max_files

    def list_collections(self) -> list[dict[str, Any]]:
        """The rag_list_collections answer. A collection whose indexing is stopped (its folder
        leads to a refused place) says so in ``stopped`` and in its description, which is
        what an MCP client reads."""
        out = []
        for c in self.catalog.collections():
            st = self.catalog.collection_stats(c.id)
            stopped = self.root_problem(c)
            out.append({"name": c.name, "type": c.type,
                        "description": _with_problem(c.description, stopped),
                        "stopped": stopped,
                        "source_count": st["source_count"], "chunk_count": st["chunk_count"],
                        "body_source_count": st["body_source_count"],
                        "metadata_only_count": st["metadata_only_count"],
                        "last_indexed": iso_time(c.last_indexed),
                        "created_at": iso_time(c.created_at)})
        return out

    def collection_info(self, name: str) -> dict[str, Any]:
        """The rag_collection_info answer, plus skip counts."""
        c = self.collection(name)
        st = self.catalog.collection_stats(c.id)
        stopped = self.root_problem(c)
        return {"name": c.name, "type": c.type,
                "description": _with_problem(c.description, stopped), "stopped": stopped,
                "created_at": iso_time(c.created_at), "source_count": st["source_count"],
                "chunk_count": st["chunk_count"], "last_indexed": iso_time(c.last_indexed),
                "body_source_count": st["body_source_count"],
                "metadata_only_count": st["metadata_only_count"],
                "source_types": st["source_types"],
                "sample_titles": self.catalog.sample_titles(c.id),
                "root": c.root, "skipped_count": st["skipped_count"], "skips": st["skips"],
                **(self._mail_info(c) if c.kind == "mail" else {}),
                **({"book_count": st["source_count"]} if c.kind == "calibre" else {}),
                **(feed_stats(self.catalog, c.id) if c.kind == "rss" else {})}

    def _mail_info(self, c: Collection) -> dict[str, Any]:
        """What rag_collection_info adds for mail: folders, message counts, the date range."""
        stats = self.catalog.container_stats(c.id)
        return {"message_count": sum(f["count"] for f in stats["folders"]), **stats}

    def collection(self, name: str) -> Collection:
        coll = self.catalog.collection(check_name(name))
        if coll is None:
            known = ", ".join(c.name for c in self.catalog.collections()) or "none yet"
            raise InvalidArgument("collection", f"unknown collection {name!r}",
                                  f"known collections: {known} (rag_list_collections lists "
                                  "them); to index a new folder, give rag_index a path too")
        return coll

    # -- indexing -----------------------------------------------------------------------------
    def sync_collection(self, coll: Collection, *, paths: Sequence[str] | None = None,
                        force: bool = False) -> IndexReport:
        """Bring one collection in line with its folder. Raises ``RootRefused`` (nothing read,
        nothing changed) when its folder now resolves to a place the folder policy refuses,
        and ``Interrupted`` when the daemon stops under it."""
        root = self.checked_root(coll)
        if not root.is_dir():
            raise ConfigError(f"the folder of collection {coll.name!r} does not exist: {root}",
                              "check the path in config.toml, or remount the drive")
        # Read from the target just checked, not from a path a link may turn elsewhere.
        coll = dataclasses.replace(coll, root=str(root))
        only = self.catalog.get_meta(_MAIL_ONLY + coll.name) or None
        if coll.kind == "code":  # a group of repositories (decision 0030)
            from ragd.daemon.runtime.codegroups import code_kind

            kind: Any = code_kind(self, coll, paths)
        else:
            kind = kind_for(coll.kind, self.config.index.exclude, self.documents, root,
                            only=only, formats=self.config.calibre.formats, rss=self.config.rss)
        reembed = self.reembed_needed and paths is None
        if force and paths is None and self.indexer.extract is not None:
            self.indexer.extract.retire_idle()  # fresh workers see tools installed since
        try:
            report = self.indexer.sync(coll, kind, paths=paths, force=force or reembed,
                                       max_entries=self.max_files(coll))
            if paths is None and coll.kind != "code":
                self._read_scans_again(coll, kind)
        except ConversionCancelled:  # the daemon is stopping (decision 0024)
            raise Interrupted(f"indexing {coll.name} was interrupted: the daemon is "
                              "stopping") from None
        if reembed and not self.indexer.should_stop():
            self._reembedded.add(coll.name)
            if self._reembedded >= {c.name for c in self.catalog.collections()}:
                # Every collection is in the new vector space: record it, drop the old one.
                self.reembed_needed = False
                self.catalog.set_meta("fingerprint", self.embedder.fingerprint)
                self.catalog.prune_embeddings(self.embedder.fingerprint)
        return report

    def _read_scans_again(self, coll: Collection, kind: Any) -> None:
        """Once ``[documents] ocr_pdfs`` is on, the PDFs this collection skipped as
        ``no_text`` while it was off (scans) are read again, once: a skip for no text is not
        retried otherwise, as the file did not change (decision 0044)."""
        key = _OCR_PDFS + coll.name
        now = "1" if self.config.documents.ocr_pdfs else "0"
        if self.catalog.get_meta(key) == now or self.indexer.should_stop():
            return
        if now == "1":
            scans = sorted(r.path for r in self.catalog.source_records(coll.id)
                           if r.skip_code == "no_text" and r.path.lower().endswith(".pdf"))
            if scans:
                log.info("%s: reading %d PDF(s) without text again, by OCR", coll.name,
                         len(scans))
                self.indexer.sync(coll, kind, paths=scans, force=True)
                if self.indexer.should_stop():
                    return
        self.catalog.set_meta(key, now)

    def checked_root(self, coll: Collection) -> Path:
        """The folder a sync of ``coll`` reads: its root, resolved. Roots are registered
        resolved, so a root that resolves elsewhere now had a link swapped in (or its folder
        replaced by one): its new target goes through the folder policy again, as rag_index
        would put it, before anything is read (decision 0024). ``RootRefused`` if it fails."""
        real = os.path.realpath(coll.root)
        if _same_path(real, coll.root):
            return Path(real)
        problem = self._refusal(real)
        if problem is not None:
            fix = ("remove the link or put the folder back; to index another folder under "
                   f"this name, `ragd index --collection {coll.name} PATH`"
                   if coll.type == "project" else
                   "remove the link or put the folder back, or change its path in config.toml")
            raise RootRefused(f"collection {coll.name!r}: its folder {coll.root} now leads to "
                              f"{problem}; its indexing is stopped and what was indexed stays "
                              "searchable", fix)
        return Path(real)

    def root_problem(self, coll: Collection) -> str | None:
        """Why ``coll`` is not indexed now (its folder leads to a refused place), else None:
        what `ragd status` and rag_list_collections show."""
        try:
            self.checked_root(coll)
        except RootRefused as exc:
            return exc.message
        return None

    def watch_roots(self) -> dict[str, str]:
        """The roots to watch: every collection's but those stopped by the folder policy."""
        return {c.name: c.root for c in self.catalog.collections()  # code: codegroups
                if c.kind != "code" and self.root_problem(c) is None}

    def _refusal(self, real: str) -> str | None:
        guarded = (self.paths.data_dir, self.paths.state_dir, self.paths.config_dir)
        try:
            check_root(real, guarded=guarded)
        except InvalidArgument as exc:
            return exc.message.removeprefix("path: ")
        return None

    def sync_all(self, names: Sequence[str] | None = None) -> list[IndexReport]:
        colls = [self.collection(n) for n in names] if names else self.catalog.collections()
        return [self.sync_collection(c) for c in colls]

    def rebuild(self, which: Sequence[str]) -> dict[str, int]:
        return self.indexer.rebuild(which)

    def consistency(self) -> dict[str, Any]:
        """Do the catalog, FAISS and the keyword index hold exactly the same chunk ids? (FAISS
        holds every chunk but those still waiting in the embedding backlog.)"""
        with self.indexer.lock:  # not between a commit and its projection
            cat = self.catalog.all_chunk_ids()
            waiting = self.catalog.backlog_ids()
            fai = self.faiss.ids()
            who = self.whoosh.ids()
        embedded = cat - waiting
        return {
            "catalog": len(cat), "faiss": len(fai), "keyword": len(who),
            "unembedded": len(waiting),
            "missing_in_faiss": len(embedded - fai), "orphans_in_faiss": len(fai - embedded),
            "missing_in_keyword": len(cat - who), "orphans_in_keyword": len(who - cat),
            "ok": embedded == fai and cat == who and waiting <= cat,
        }


def _with_problem(description: str, problem: str | None) -> str:
    return f"{description} [indexing stopped: {problem}]" if problem else description


def _same_path(a: str, b: str) -> bool:
    return os.path.normcase(os.path.normpath(a)) == os.path.normcase(os.path.normpath(b))


def on_demand_documents(docstore_dir: Path, settings: DocumentSettings) -> Documents:
    """The doc store as a client's requests use it (rag_convert, `ragd convert`): the same
    cache, a worker of its own, bounded to ``ON_DEMAND_MAX_CALLS`` requests at a time. A
    document that always times out, asked for again and again, holds this worker, never the
    one indexing needs (decision 0024). A stop answers a request under way ``Interrupted``."""
    worker = ConversionWorker(
        timeout_s=settings.timeout_s, memory_mb=settings.max_memory_mb,
        max_calls=ON_DEMAND_MAX_CALLS, name="on-demand",
        cancel_error=lambda: Interrupted("the conversion was stopped: the daemon is stopping"))
    return Documents(DocStore(docstore_dir, worker, pdf_ocr=settings.pdf_ocr), settings)
