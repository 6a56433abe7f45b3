"""The `ragd` command line. The only module that prints.

Errors from ragd.daemon.errors are translated here once: a message, a hint, a non-zero exit.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from ragd.daemon import __version__
from ragd.daemon.errors import RagdError
from ragd.daemon.skips import describe

log = logging.getLogger("ragd")

EXIT_ERROR = 1
EXIT_USAGE = 2
# Another daemon holds this RAGD_HOME: a client that started this one waits for that one.
EXIT_ALREADY_RUNNING = 3


def _add_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collection", "-c", help="collection name or type (system, code, project)")
    p.add_argument("--source-type", help="markdown, pdf, epub, email, rss, code, ...")
    p.add_argument("--date-from", help="only sources dated on or after YYYY-MM-DD")
    p.add_argument("--date-to", help="only sources dated on or before YYYY-MM-DD")
    p.add_argument("--folder", help="only notes under this folder of the vault")
    p.add_argument("--tag", action="append", default=[], help="only notes with this tag "
                   "(repeat for several; a parent tag matches nested ones)")
    p.add_argument("--sender", help="email sender contains this text")
    p.add_argument("--author", help="book author contains this text")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragd", description="Local hybrid search over your notes, mail and books.")
    parser.add_argument("--version", action="version", version=f"ragd {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("index", help="index the vault (or a folder) now, with a progress bar")
    p.add_argument("path", nargs="?", help="vault folder (default: from config, else the vault "
                   "Obsidian has open); with --collection, a project folder")
    p.add_argument("--collection", "-c", help="index only this collection; with PATH, "
                   "create or update a project collection of that name")
    p.add_argument("--rebuild", nargs="?", const="all",
                   choices=["all", "faiss", "keyword", "whoosh", "tantivy"],
                   help="rebuild the vector (faiss) and/or keyword index from the catalog "
                   "(no file is read, nothing is embedded again); whoosh and tantivy "
                   "name the keyword index too")
    p.add_argument("--allow-large", action="store_true",
                   help="with --collection and PATH: lift index.max_files for this project")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")

    p = sub.add_parser("convert", help="convert a document (PDF, DOCX, EPUB, ...) to markdown")
    p.add_argument("file", help="the document; a relative path is taken from this folder")
    p.add_argument("--json", action="store_true",
                   help="print the whole answer (title, source_type, cached, metadata) as JSON")

    p = sub.add_parser("search", help="search the indexed sources")
    p.add_argument("query", nargs="+", help="words or a question (quotes keep a phrase)")
    p.add_argument("--top-k", "-k", type=int, default=10, help="results to show (1-100)")
    p.add_argument("--mode", choices=["hybrid", "keyword", "semantic"], default="hybrid")
    _add_filters(p)
    p.add_argument("--explain", action="store_true", help="show each leg's rank")
    p.add_argument("--json", action="store_true", help="print the rag_search JSON")
    # rag_search's `searches` (decision 0048): phrasings fused with the query, up to 8 in all.
    p.add_argument("--lex", action="append", default=[], metavar="TEXT",
                   help="more keywords for the keyword leg (names, codes, the notes' words); "
                   "repeatable")
    p.add_argument("--vec", action="append", default=[], metavar="TEXT",
                   help="a paraphrase of the question for the semantic leg; repeatable")
    p.add_argument("--hyde", action="append", default=[], metavar="TEXT",
                   help="a short passage that would answer the question, for the semantic "
                   "leg; repeatable")

    p = sub.add_parser("doctor", help="check configuration, vault paths, model and indexes")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("daemon", help="run the daemon in the foreground (logs to stderr)")
    p.add_argument("--vault", help="vault folder to index and watch (default: from config)")
    sub.add_parser("start", help="start the daemon in the background and wait until it answers")
    sub.add_parser("stop", help="ask the daemon to stop cleanly")
    p = sub.add_parser("status", help="what the daemon is doing: state, collections, queue")
    p.add_argument("--json", action="store_true")
    pause = sub.add_parser("pause", help="pause indexing (the queue is kept)")
    pause.add_argument("--embedding", action="store_true",
                       help="pause only the vectors: files are still read and keyword-"
                       "searchable (semantic search finds them by their words meanwhile)")
    sub.add_parser("resume", help="resume indexing")
    p = sub.add_parser("open", help="open ragd's window (search, status, skipped files, "
                       "sources) in the browser")
    p.add_argument("--print", dest="print_only", action="store_true",
                   help="print the URL only (it carries this start's token)")

    p = sub.add_parser("mcp", help="run the MCP server on stdio (what AI clients launch), or "
                       "over HTTP with --http")
    from ragd.mcp_bridge.flags import add_http_flags

    add_http_flags(p)
    p = sub.add_parser("mcp-config", help="print (or install) the MCP config for a client")
    p.add_argument("client", choices=["claude-desktop", "claude-code", "cursor", "vscode"])
    p.add_argument("--install", action="store_true",
                   help="merge the entry into the client's config file (a backup is kept)")
    sub.add_parser("tray", help="run the system-tray app")
    p = sub.add_parser("autostart", help="start ragd at login: on, off or status")
    p.add_argument("action", choices=["on", "off", "status"])
    p.add_argument("--method", choices=["desktop", "systemd"], default=None,
                   help="Linux only: XDG autostart entry (default) or a systemd user unit")
    p = sub.add_parser("secret", help="store a credential in the OS keyring")
    p.add_argument("action", choices=["set", "delete", "status", "show"],
                   help="show prints only mcp.http_token (the token of `ragd mcp --http`)")
    p.add_argument("name", nargs="?", help="e.g. embedding.api_key, imap.password, "
                   "mcp.http_token")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(COMMANDS[args.command](args) or 0)
    except RagdError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return EXIT_ALREADY_RUNNING if exc.code == "already_running" else EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


# -- in-process commands ------------------------------------------------------------------------
def _open_app(args: argparse.Namespace, overrides: dict[str, Any] | None = None,
              on_progress: Any = None, sample: bool = False) -> Any:
    from ragd.daemon.ipc.discovery import acquire_instance_lock
    from ragd.daemon.runtime.app import App
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    paths = resolve_paths()
    config = load_config(paths, overrides)
    # Holding the daemon's lock keeps a daemon from opening the same index meanwhile.
    lock = acquire_instance_lock(paths)
    try:
        app = App(paths, config, on_progress=on_progress, sample=sample)
    except BaseException:
        lock.release()
        raise
    app.on_close.append(lock.release)
    return app


def cmd_index(args: argparse.Namespace) -> int:
    if args.path:
        # At a terminal a relative path means the user's folder: resolve it here, where the
        # working directory is the user's, before the daemon (elsewhere) sees it.
        args.path = os.path.abspath(os.path.expanduser(args.path))
    if _daemon_running() and args.path and not args.collection:
        from ragd.daemon.errors import AlreadyRunning

        raise AlreadyRunning("the ragd daemon is running and owns the index",
                             "stop it first (`ragd stop`), or set the vault in config.toml")
    if _daemon_running():
        # The daemon owns the index: ask it, and draw its live progress.
        from ragd.daemon.cli.remote import remote_index

        params = {"collection": args.collection, "path": args.path, "wait": True,
                  "rebuild": args.rebuild, "allow_large": args.allow_large}
        result = remote_index(params, show_progress=not args.json and sys.stderr.isatty()
                              or os.environ.get("RAGD_PROGRESS") == "1")
        print(json.dumps(result, indent=2) if args.json else
              "\n".join(f"{k}: {v}" for k, v in result.items()))
        return 0
    overrides: dict[str, Any] = {}
    if args.path and not args.collection:
        overrides["obsidian.vaults"] = [args.path]
    from ragd.daemon.cli.progress import IndexBar

    bar = IndexBar(enabled=not args.json and sys.stderr.isatty()
                   or os.environ.get("RAGD_PROGRESS") == "1")
    # With nothing to index, the sample vault rather than an error (decision 0032).
    sample = not (args.path or args.collection or args.rebuild)
    with _open_app(args, overrides, on_progress=bar, sample=sample) as app:
        if app.sample_vault is not None and not args.json:
            print(sample_notice(app.sample_vault), file=sys.stderr, flush=True)
        if args.rebuild:
            from ragd.daemon.stores.projection import index_names

            which = index_names(args.rebuild)
            t0 = time.perf_counter()
            counts = app.rebuild(which)
            out = {"rebuilt": counts, "seconds": round(time.perf_counter() - t0, 3)}
            print(json.dumps(out) if args.json else
                  "rebuilt " + ", ".join(f"{k} ({v:,} chunks)" for k, v in counts.items())
                  + f" in {out['seconds']} s; nothing was embedded")
            return 0
        if args.collection and args.path:
            names = [app.create_project(args.collection, args.path,
                                        allow_large=args.allow_large).name]
        elif args.collection:
            names = [args.collection]
        else:
            names = None
        if not app.catalog.collections():
            from ragd.daemon.errors import ConfigError

            raise ConfigError("no vault found to index",
                              "pass its folder: `ragd index ~/path/to/vault`, or set "
                              "[obsidian] vaults in " + str(app.paths.config_file))
        if app.reembed_needed:
            print("The embedding model or chunker changed: every source is re-chunked and "
                  "re-embedded once (the old vectors are not mixed in).", file=sys.stderr)
        reports = app.sync_all(names)
        bar.close(complete=True)
        consistency = app.consistency()
    if args.json:
        print(json.dumps({"reports": [r.as_dict() for r in reports],
                          "consistency": consistency}, indent=2))
    else:
        for r in reports:
            print(format_report(r))
    return 0


def sample_notice(folder: Any) -> str:
    """What `ragd index` says when it indexes the sample vault."""
    return (f"ragd: no vault found, so this indexes ragd's sample vault, a getting-started "
            f"guide copied to {folder}. Search it, edit it, or index your own: "
            "`make run VAULT=~/path/to/vault`, or [obsidian] vaults in config.toml.")


def format_report(r: Any) -> str:
    if getattr(r, "containers", False):  # mail: files that hold messages
        head = [f"{r.collection}: {r.total_found:,} mail files found in {r.seconds:.1f} s "
                f"({r.unchanged:,} unchanged)",
                f"  messages indexed {r.indexed:,}  moved {r.moved:,}  deleted {r.deleted:,}"]
    else:
        head = [f"{r.collection}: {r.total_found:,} files found in {r.seconds:.1f} s",
                f"  indexed {r.indexed:,}  unchanged {r.unchanged:,}  moved {r.moved:,}  "
                f"deleted {r.deleted:,}",
                f"  notes read {r.body_notes + r.metadata_only_notes:,}: {r.body_notes:,} "
                f"with body chunks, {r.metadata_only_notes:,} with properties only"]
    lines = [*head,
             f"  chunks written {r.chunks_written:,}  embedded {r.embedded:,}  "
             f"removed {r.chunks_deleted:,}"]
    if r.skipped_files:
        lines.append(f"  skipped {len(r.skipped_files):,}:")
        lines += [f"    {code:<13} {path}  ({detail})" for path, code, detail in r.skipped_files]
    if r.warnings:
        lines.append(f"  indexed with warnings {len(r.warnings):,}:")
        lines += [f"    {code:<13} {path}  ({describe(code)})" for path, code in r.warnings]
    if r.errors:
        lines.append(f"  errors {len(r.errors):,} (see the log):")
        lines += [f"    {path}: {err}" for path, err in r.errors]
    return "\n".join(lines)


def search_params(args: argparse.Namespace) -> dict[str, Any]:
    """The rag_search-style parameters of `ragd search` (sent to the daemon as they are)."""
    params: dict[str, Any] = {"query": " ".join(args.query), "collection": args.collection,
                              "top_k": args.top_k, "source_type": args.source_type,
                              "date_from": args.date_from, "date_to": args.date_to,
                              "sender": args.sender, "author": args.author, "mode": args.mode,
                              "folder": args.folder, "tags": args.tag, "explain": args.explain}
    searches = [{"type": kind, "query": text} for kind in ("lex", "vec", "hyde")
                for text in getattr(args, kind)]
    if searches:  # left out otherwise: a daemon from before decision 0048 refuses the key
        params["searches"] = searches
    return params


CONVERT_PIECE_CHARS = 2_000_000  # asked of the daemon per call (its most, protocol's limit)


def cmd_convert(args: argparse.Namespace) -> int:
    """The markdown of one document, whole, through the daemon's doc store when it runs
    (cached by content either way). The command line reads any path the user names; a long
    document comes from the daemon in pieces, each a bounded reply."""
    path = os.path.abspath(os.path.expanduser(args.file))
    if _daemon_running():
        answer = _remote_convert_whole(path)
    else:
        from ragd.daemon.convert.documents import DocumentSettings, open_documents
        from ragd.daemon.settings.config import load_config
        from ragd.daemon.settings.paths import resolve_paths
        from ragd.daemon.sources.on_request import convert_file

        paths = resolve_paths()
        paths.ensure()
        config = load_config(paths)
        settings = DocumentSettings.from_config(config)
        docs = open_documents(paths.docstore_dir, settings)
        try:
            answer = convert_file(docs.store, path, max_bytes=settings.max_file_bytes,
                                  keep_outside=config.convert.keep_outside,
                                  max_chars=sys.maxsize - 1)
        finally:
            docs.close()
    print(json.dumps(answer, indent=2, ensure_ascii=False) if args.json else answer["markdown"])
    return 0


def _remote_convert_whole(path: str) -> dict[str, Any]:
    """Every piece of a conversion, joined; the same bytes throughout, or a clear error."""
    from ragd.daemon.errors import RagdError
    from ragd.daemon.runtime.launch import connect

    params: dict[str, Any] = {"file_path": path, "max_chars": CONVERT_PIECE_CHARS}
    with connect(call_timeout=300.0) as client:  # answered while the model loads (0032)
        answer: dict[str, Any] = client.call("convert", params)
        pieces = [answer["markdown"]]
        while answer.get("truncated") and answer.get("next_offset") is not None:
            more = client.call("convert", {**params, "offset": answer["next_offset"]})
            if more.get("content_hash") != answer.get("content_hash"):
                raise RagdError(f"{path} changed while it was read", "run the command again")
            pieces.append(more["markdown"])
            answer = {**more, "offset": answer.get("offset", 0)}
    markdown = "".join(pieces)
    return {**answer, "markdown": markdown, "chars": len(markdown), "truncated": False,
            "next_offset": None}


def cmd_search(args: argparse.Namespace) -> int:
    from ragd.daemon.search.params import build_request

    if _daemon_running():
        from ragd.daemon.cli.remote import remote_search

        answer = remote_search(search_params(args))
        print(json.dumps(answer, indent=2, ensure_ascii=False) if args.json
              else format_results(answer, args.explain))
        return 0
    with _open_app(args) as app:
        if args.mode != "keyword":
            # A search with no daemon pays for the model itself: say why it takes a while.
            print("ragd: no daemon is running: loading the model in this process (`ragd start` "
                  "keeps one loaded)...", file=sys.stderr, flush=True)
        answer = app.search_engine.search(build_request(app.search_engine,
                                                        **search_params(args)))
    print(json.dumps(answer, indent=2, ensure_ascii=False) if args.json
          else format_results(answer, args.explain))
    return 0


def format_results(answer: dict[str, Any], explain: bool = False) -> str:
    results = answer.get("results") or []
    out: list[str] = [] if results else ["no results"]
    for n, r in enumerate(results, 1):
        meta = r.get("metadata", {})
        heading = " › ".join(meta.get("heading_path") or [])
        head = f"{n:>2}. {r['score']:.2f}  {r['title']}" + (f" › {heading}" if heading else "")
        out.append(f"{head}  [{r['collection']}]")
        out.append(f"    {r['source_path']}")
        out.append(f"    {meta.get('snippet', '')}")
        if explain and "explain" in meta:
            ranks = ", ".join(f"{k} #{v}" for k, v in meta["explain"]["ranks"].items())
            out.append(f"    ranks: {ranks}")
    idx = answer.get("indexing")
    if idx and idx.get("active"):
        out.append(f"(indexing: {idx.get('remaining', 0):,} sources remaining; "
                   "results may be partial)")
    return "\n".join(out)


def cmd_doctor(args: argparse.Namespace) -> int:
    from ragd.daemon.cli.doctor import run_checks

    checks = run_checks()
    if args.json:
        print(json.dumps(checks, indent=2))
    else:
        for c in checks:
            mark = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}[c["status"]]
            print(f"[{mark}] {c['name']}: {c['detail']}")
            if c.get("hint"):
                print(f"       hint: {c['hint']}")
    return 1 if any(c["status"] == "fail" for c in checks) else 0


def _remote(name: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        from ragd.daemon.cli import remote as cli_remote

        return int(getattr(cli_remote, name)(args))

    return run


def _daemon_running() -> bool:
    from ragd.daemon.ipc.discovery import find_daemon
    from ragd.daemon.settings.paths import resolve_paths

    return find_daemon(resolve_paths()) is not None


def _lazy(module: str, name: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        import importlib

        return int(getattr(importlib.import_module(module), name)(args) or 0)

    return run


COMMANDS = {"index": cmd_index, "search": cmd_search, "convert": cmd_convert, "doctor": cmd_doctor,
            "daemon": _remote("cmd_daemon"), "start": _remote("cmd_start"),
            "stop": _remote("cmd_stop"), "status": _remote("cmd_status"),
            "pause": _remote("cmd_pause"), "resume": _remote("cmd_resume"),
            "open": _remote("cmd_open"),
            "mcp": _lazy("ragd.mcp_bridge.server", "cmd_mcp"),
            "mcp-config": _lazy("ragd.mcp_bridge.clients", "cmd_mcp_config"),
            "tray": _lazy("ragd.tray.app", "cmd_tray"),
            "autostart": _lazy("ragd.tray.autostart", "cmd_autostart"),
            "secret": _lazy("ragd.daemon.settings.secrets", "cmd_secret")}

if __name__ == "__main__":
    sys.exit(main())
