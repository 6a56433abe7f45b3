"""What the window's page may ask the daemon: the methods behind ``POST /api/<method>``.

Each runs on the daemon's own event loop, through the same handlers and parameter checks as
the IPC methods, as a caller with an AI client's reach (decision 0023): the page reads and
adds folders under the same policy as ``rag_index``, never as the command line. What only the
page needs is here: the links a result opens with, a skip's reason and hint, the folders
discovery found and nothing indexes yet, a retry, and opening a file with the system's handler.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragd.daemon.errors import InvalidArgument, NotFound, PathRefused
from ragd.daemon.ipc import protocol as p
from ragd.daemon.runtime.methods import HANDLERS
from ragd.daemon.runtime.scheduler import EXPLICIT, Job
from ragd.daemon.skips import describe

if TYPE_CHECKING:
    from ragd.daemon.runtime.service import Daemon

WEB_CLIENT = "ragd-web"  # not the user's command line: an AI client's reach (0023)
SEARCH_TOP_K = 20
Method = Callable[["Daemon", dict[str, Any]], Coroutine[Any, Any, Any]]


class WebCaller:
    """What the IPC handlers read of a connection, for a request from the page."""

    client = WEB_CLIENT
    closed = False

    def __init__(self) -> None:
        self.on_close: list[Any] = []

    def notify(self, method: str, params: Any = None) -> None:
        """The page polls; it subscribes to nothing."""


async def _ipc(d: Daemon, method: str, params: dict[str, Any]) -> Any:
    """An IPC method, its parameters checked as the socket checks them."""
    parsed = p.parse_params(method, params)
    if hasattr(parsed, "model_dump"):
        parsed = parsed.model_dump()
    caller: Any = WebCaller()  # what the handlers read of a Connection
    return await HANDLERS[method](d, dict(parsed or {}), caller)


def _text(params: dict[str, Any], key: str, limit: int = p.MAX_PATH_CHARS) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(key, "is required", f"pass {key} as text")
    if len(value) > limit:
        raise InvalidArgument(key, f"is longer than {limit} characters")
    return value.strip()


# -- reading ----------------------------------------------------------------------------------


async def status(d: Daemon, params: dict[str, Any]) -> Any:
    return await _ipc(d, "status", {})


async def list_collections(d: Daemon, params: dict[str, Any]) -> Any:
    return await _ipc(d, "list_collections", {})


async def search(d: Daemon, params: dict[str, Any]) -> Any:
    asked = {k: v for k, v in params.items() if v not in (None, "", [])}
    asked.setdefault("top_k", SEARCH_TOP_K)
    answer = await _ipc(d, "search", asked)
    for hit in answer.get("results", []):
        hit.pop("content", None)  # the page shows the snippet; a chunk may be 6,000 chars
        hit["open"] = opener(hit)
        hit["wikilink"] = wikilink(hit)
    return answer


def opener(hit: dict[str, Any]) -> dict[str, str]:
    """How the page opens a result: Obsidian's or the web's own link, a file through the
    system's handler (``open``), or nothing (a message inside an mbox)."""
    uri = str(hit.get("source_uri") or "")
    if uri.startswith(("obsidian://", "https://", "http://")):
        return {"kind": "obsidian" if uri.startswith("obsidian://") else "url", "href": uri}
    path = str(hit.get("source_path") or "")
    if path and Path(path).is_file():
        return {"kind": "file"}
    return {"kind": "none"}


def wikilink(hit: dict[str, Any]) -> str | None:
    """``[[Note name]]`` for a vault note (the name Obsidian resolves), else None."""
    if not str(hit.get("source_uri") or "").startswith("obsidian://"):
        return None
    name = Path(str(hit.get("source_path") or "")).name
    stem = name[:-3] if name.lower().endswith(".md") else name
    return f"[[{stem}]]" if stem else None


async def skipped(d: Daemon, params: dict[str, Any]) -> Any:
    rows = await _ipc(d, "skipped", {k: v for k, v in params.items() if v})
    for row in rows:
        code = row.get("skip_code") or ""
        row["hint"] = describe(code) if code else ""
        row["reason"] = row.get("skip_detail") or row["hint"] or row.get("warnings") or ""
    return rows


async def sources(d: Daemon, params: dict[str, Any]) -> Any:
    """What is watched, and what discovery found on this machine that nothing indexes."""
    app = await d._ready()

    def run() -> dict[str, Any]:
        watched = []
        roots = set()
        for c in app.catalog.collections():
            st = app.catalog.collection_stats(c.id)
            roots.add(os.path.normcase(os.path.realpath(c.root)))
            watched.append({"name": c.name, "type": c.type, "root": c.root,
                            "source_count": st["source_count"],
                            "stopped": app.root_problem(c),
                            "removable": c.type == "project"})
        found = [f for f in discovered() if os.path.normcase(os.path.realpath(f["path"]))
                 not in roots]
        return {"watched": watched, "discovered": found}

    return await asyncio.to_thread(run)


def discovered() -> list[dict[str, str]]:
    """Vaults, mail folders, Calibre libraries and feed readers found here (never raises)."""
    from ragd.daemon.settings.calibrelib import discover_libraries
    from ragd.daemon.settings.feedreaders import reader_stores
    from ragd.daemon.settings.mailfolders import discover_mail_folders
    from ragd.daemon.settings.vaults import discover_vaults

    home, env = Path.home(), os.environ
    finders: list[tuple[str, str, str, Callable[[], list[Path]]]] = [
        ("vault", "Obsidian vault", "obsidian.vaults", discover_vaults),
        ("mail", "Thunderbird mail folder", "email.paths",
         lambda: discover_mail_folders(sys.platform, env, home)),
        ("calibre", "Calibre library", "calibre.libraries", lambda: discover_libraries()),
        ("feeds", "feed reader", "rss.paths",
         lambda: [s.path for s in reader_stores(sys.platform, env, home) if s.readable]),
    ]
    out: list[dict[str, str]] = []
    for kind, label, key, find in finders:
        try:
            found = find()
        except Exception:  # discovery is a courtesy
            continue
        section, _, name = key.partition(".")
        # A configured collection is read with its kind's own rules (a vault's links, a
        # mailbox's threads): config.toml says which; the page shows the line to add.
        out += [{"kind": kind, "path": str(path), "label": label,
                 "config": f"[{section}]\n{name} = [{json.dumps(str(path))}]"}
                for path in found]
    return out


# -- changing ---------------------------------------------------------------------------------


async def pause(d: Daemon, params: dict[str, Any]) -> Any:
    return await _ipc(d, "pause", {})


async def resume(d: Daemon, params: dict[str, Any]) -> Any:
    return await _ipc(d, "resume", {})


async def reindex(d: Daemon, params: dict[str, Any]) -> Any:
    """"Reindex now": every collection, or one; answered at once, the work goes on."""
    asked: dict[str, Any] = {"wait": False}
    if params.get("collection"):
        asked["collection"] = _text(params, "collection", p.MAX_NAME_CHARS)
    await _ipc(d, "index", asked)
    return {"queued": True}


async def retry(d: Daemon, params: dict[str, Any]) -> Any:
    """Read a skipped file again now (its folder's sync, forced for that path)."""
    app = await d._ready()
    name = _text(params, "collection", p.MAX_NAME_CHARS)
    path = _text(params, "path")
    coll = await asyncio.to_thread(app.collection, name)
    rows = await asyncio.to_thread(app.catalog.skipped_sources, coll.id)
    if not any(r["path"] == path for r in rows):
        raise NotFound(f"{path!r} is not a skipped file of {name!r}",
                       "refresh the list: it may have been indexed since")
    d.queue.put(Job("sync", name, EXPLICIT, paths={path}, force=True))
    return {"queued": True}


async def add_source(d: Daemon, params: dict[str, Any]) -> Any:
    """A project folder or a repository for a code group, under ``rag_index``'s policy."""
    path = _text(params, "path")
    if not os.path.isabs(os.path.expanduser(path)):
        raise InvalidArgument("path", "must be an absolute folder path",
                              "paste the folder's full path, e.g. /home/me/projects/site")
    path = os.path.expanduser(path)
    kind = str(params.get("kind") or "project")
    if kind not in ("project", "code"):
        raise InvalidArgument("kind", f"{kind!r} is neither project nor code")
    name = str(params.get("name") or "").strip() or _name_for(path, kind)
    if kind == "code":
        await _ensure_code_group(d, name)
    answer = await _ipc(d, "index", {"collection": name, "path": path, "wait": False})
    return {"collection": answer.get("collection", name), "queued": True}


def _name_for(path: str, kind: str) -> str:
    base = "".join(ch if ch.isalnum() or ch in "-_" else "-"
                   for ch in Path(path).name.lower()).strip("-")
    return base or kind


async def remove_source(d: Daemon, params: dict[str, Any]) -> Any:
    """Stop indexing a project folder; its documents leave the indexes (the writer's job)."""
    app = await d._ready()
    name = _text(params, "name", p.MAX_NAME_CHARS)
    coll = await asyncio.to_thread(app.collection, name)
    if coll.type != "project":
        raise InvalidArgument("name", f"{name!r} is a {coll.type} collection",
                              "change config.toml to stop indexing it")
    job = d.queue.put(Job("remove", name, EXPLICIT))
    answer = await asyncio.to_thread(job.wait, 120)
    for watcher in (d._watcher, d._code_watcher):
        if watcher is not None:
            watcher.roots_changed()
    return answer


async def _ensure_code_group(d: Daemon, name: str) -> None:
    """A code group of this name must exist for a repository to join it."""
    from ragd.daemon.runtime.codegroups import is_code_group

    app = await d._ready()
    if not await asyncio.to_thread(is_code_group, app, name):
        raise InvalidArgument("name", f"{name!r} is not a code group",
                              "add the group in config.toml [code] groups first, or add the "
                              "folder as a project")


async def open_file(d: Daemon, params: dict[str, Any]) -> Any:
    """Open an indexed file with the system's handler. Only a file inside an indexed
    collection's folder is opened, as its real path (no link leads out)."""
    app = await d._ready()
    path = os.path.realpath(_text(params, "source_path"))
    roots = [os.path.realpath(c.root) for c in await asyncio.to_thread(app.catalog.collections)]
    if not any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
        raise PathRefused("source_path", "is not inside an indexed folder",
                          "open results of your own collections only")
    if not os.path.isfile(path):
        raise NotFound(f"{path} is gone", "it was moved or deleted since it was indexed")
    await asyncio.to_thread(system_open, path)
    return {"opened": True}


def system_open(path: str, platform: str | None = None,
                run: Callable[..., Any] = subprocess.Popen) -> None:
    """Hand ``path`` to the desktop's handler for its type."""
    platform = platform or sys.platform
    if platform == "win32":
        os.startfile(path)  # type: ignore[attr-defined]  # Windows only
    elif platform == "darwin":
        run(["open", "--", path], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
    else:
        run(["xdg-open", path], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)


METHODS: dict[str, Method] = {
    "status": status, "list_collections": list_collections, "search": search,
    "skipped": skipped, "sources": sources, "pause": pause, "resume": resume,
    "reindex": reindex, "retry": retry, "add_source": add_source,
    "remove_source": remove_source, "open": open_file,
}
