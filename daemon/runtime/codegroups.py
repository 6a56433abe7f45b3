"""Code groups in the running daemon: registered from ``[code] groups``, grown by rag_index,
synced with ``CodeKind``, watched at their work trees and their ``.git`` refs (decision 0030).

A group is one collection (type ``code``, kind ``code``) whose root is its first repository;
its repositories are the configured ones, then those rag_index added (catalog meta
``code_added:<group>``), each under an alias (its folder's name).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragd.daemon.errors import InvalidArgument
from ragd.daemon.settings.policy import check_new_name, check_root
from ragd.daemon.sources.code import COMMITS, CodeKind, repo_aliases
from ragd.daemon.stores.catalog import Collection

if TYPE_CHECKING:
    from ragd.daemon.runtime.surface import Registrar

log = logging.getLogger(__name__)

_ADDED = "code_added:"  # catalog meta: repositories rag_index added to a group (JSON list)
_SEP = "\x1f"  # in a watch key: group<SEP>alias
DESCRIPTION = "Code group {name}: symbols and commits of {repos}"


def _guarded(app: Registrar) -> tuple[Path, ...]:
    return (app.paths.data_dir, app.paths.state_dir, app.paths.config_dir)


def _checked(app: Registrar, group: str, raw: str) -> str | None:
    """A configured repository, resolved and put through the folder policy (None: refused,
    with a warning in the log)."""
    try:
        return check_root(os.path.expanduser(raw), guarded=_guarded(app))
    except InvalidArgument as exc:
        log.warning("[code] groups.%s: %s; skipped", group, exc.message)
        return None


def group_repos(app: Registrar, name: str) -> dict[str, str]:
    """alias -> folder of every repository of a group, configured ones first."""
    said = [r for r in (_checked(app, name, raw)
                        for raw in app.config.code.groups.get(name, [])) if r]
    added = json.loads(app.catalog.get_meta(_ADDED + name) or "[]")
    repos = list(dict.fromkeys([*said, *added]))
    return repo_aliases(repos)


def register_code_groups(app: Registrar) -> list[Collection]:
    """Each configured group with at least one repository the policy allows is a collection."""
    out: list[Collection] = []
    for name in app.config.code.groups:
        try:
            check_new_name(name, "code.groups")
        except InvalidArgument as exc:
            log.warning("[code] groups: %s; skipped", exc.message)
            continue
        existing = app.catalog.collection(name)
        if existing is not None and existing.type != "code":
            log.warning("[code] groups: %r is already a %s collection; skipped", name,
                        existing.type)
            continue
        repos = group_repos(app, name)
        if repos:
            out.append(_ensure(app, name, repos))
    return out


def _ensure(app: Registrar, name: str, repos: Mapping[str, str]) -> Collection:
    first = next(iter(repos.values()))
    return app.catalog.ensure_collection(
        name, type="code", kind="code", root=first,
        description=DESCRIPTION.format(name=name, repos=", ".join(repos)))


def is_code_group(app: Registrar, name: str) -> bool:
    coll = app.catalog.collection(name)
    return (coll is not None and coll.type == "code") or name in app.config.code.groups


def add_repository(app: Registrar, name: str, path: str) -> Collection:
    """rag_index(collection=GROUP, path=REPO): the repository joins the group (the folder
    policy was applied by the caller; here it is applied again, resolved)."""
    repo = check_root(path, guarded=_guarded(app))
    if not os.path.isdir(repo):
        raise InvalidArgument("path", f"{path!r} is not an existing folder",
                              "pass the absolute path of a git repository")
    added = json.loads(app.catalog.get_meta(_ADDED + name) or "[]")
    if repo not in added and repo not in group_repos(app, name).values():
        added.append(repo)
        app.catalog.set_meta(_ADDED + name, json.dumps(added))
    return _ensure(app, name, group_repos(app, name))


def code_kind(app: Registrar, coll: Collection, paths: Sequence[str] | None) -> CodeKind:
    known = frozenset(r.path for r in app.catalog.container_records(coll.id))
    return CodeKind(group_repos(app, coll.name), app.config.code, known=known, scope=paths)


# -- watching -----------------------------------------------------------------------------------


def watch_roots(app: Registrar) -> dict[str, str]:
    """group<SEP>alias -> repository folder, for every code group."""
    out: dict[str, str] = {}
    for coll in app.catalog.collections():
        if coll.type == "code":
            for alias, repo in group_repos(app, coll.name).items():
                out[f"{coll.name}{_SEP}{alias}"] = repo
    return out


def _git_trigger(rel: str) -> bool:
    """Whether a change under ``.git`` moves what HEAD names: HEAD, a ref, packed refs."""
    if rel.endswith(".lock"):
        return False
    return rel in (".git/HEAD", ".git/packed-refs") or rel.startswith(".git/refs/")


def hints(raw: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Watch hints by group<SEP>alias -> hints by group, as container paths: a source file
    is ``alias/path``; HEAD or a ref changing is ``alias/@commits`` (the history is looked at
    again); anything else under ``.git`` (objects, the index) is no hint."""
    out: dict[str, set[str]] = {}
    for key, rels in raw.items():
        group, _, alias = key.partition(_SEP)
        for rel in rels:
            if rel == ".git" or rel.startswith(".git/"):
                if _git_trigger(rel):
                    out.setdefault(group, set()).add(f"{alias}/{COMMITS}")
                continue
            out.setdefault(group, set()).add(f"{alias}/{rel}" if rel else alias)
    return out


def start_watcher(app: Registrar, on_hints: Any, exclude: Sequence[str], debounce_ms: int) -> Any:
    """A watcher of its own over the repositories of every code group (their ``.git`` refs
    included, which the collections' watcher ignores as hidden)."""
    from ragd.daemon.runtime.watch import Watcher

    def roots() -> dict[str, str]:
        return watch_roots(app)

    def deliver(raw: Mapping[str, set[str]], weights: Mapping[str, int]) -> None:
        by_group = hints(raw)
        if by_group:
            sizes: dict[str, int] = {}
            for key, size in weights.items():
                group = key.partition(_SEP)[0]
                sizes[group] = sizes.get(group, 0) + size
            on_hints(by_group, sizes)

    watcher = Watcher(roots, [e for e in exclude if e != ".git"], deliver, debounce_ms,
                      lambda: set(roots()))
    watcher.start()
    return watcher
