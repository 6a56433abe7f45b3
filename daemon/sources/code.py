"""The code collection kind: a group of git repositories as symbols and commits (decision 0030).

A group is one collection. Its containers (decision 0015) are, for each repository (named by
an alias, its folder's name):
- each source file git lists (``.gitignore`` respected), ``<alias>/<path>``: its documents are
  its symbols (``ragd.daemon.text.symbols``), keyed by file, kind and qualified name, so an edit
  re-reads one file and an unchanged symbol costs no embedding;
- each of the last ``history_commits`` commits reachable from HEAD (and of the last
  ``history_months`` when set), ``<alias>/@commits/<sha>``:
  its documents are one per file it touched. A commit never changes, so a pass reads only the
  new ones; one a rebase or a force-push dropped is a container gone, and its documents go too.

Vendored folders, generated and minified files, files over ``max_file_kb``, binaries with a
source name, links out of the repository and submodules are skipped with a code; a repository
git cannot read (a corrupt ``.git``, or none: git never looks above the folder) is read as a
plain folder, its history skipped with ``git_unreadable``. A repository whose ``.git`` file
names a git folder outside the group's repositories is skipped whole with ``git_outside``, and
git is never run on it (decision 0042). The git work runs on the entry reader thread, never on
the writer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragd.daemon.errors import Interrupted, TooManyFiles
from ragd.daemon.models import Document, FileState, Skip
from ragd.daemon.settings.codegroups import CodeConfig
from ragd.daemon.sources.entry import Entry
from ragd.daemon.sources.files import WalkResult, read_bytes, walk_vault
from ragd.daemon.sources.gitlog import (
    Commit,
    FileChange,
    GitError,
    GitOutside,
    Repo,
    list_commits,
    list_files,
    locate,
    read_commits,
)
from ragd.daemon.text.symbols import (
    DOC_EXTENSIONS,
    EXTENSIONS,
    FALLBACK_EXTENSIONS,
    Symbol,
    language_of,
    nl_summary,
    split_source,
)

log = logging.getLogger(__name__)

# Part of every symbol's content hash: bump when what a file gives changes.
# 2: one document per commit (issue 36), where each file of a commit was one.
CODE_VERSION = "2"
# A commit's document lists at most this many of its files, and quotes at most this much of
# their diffs: its message and file list come first, in its first chunk.
COMMIT_FILES_LISTED = 50
COMMIT_DIFF_CHARS = 4000
COMMITS = "@commits"  # containers <alias>/@commits/<sha>
MAX_COMMITS = 50_000  # per repository and pass, whatever the window holds
COMMIT_BATCH = 256  # commits named to one git log
MONTH_S = 30.44 * 86400
MINIFIED_LINE = 1000  # a line this long in a file whose lines average 200 or more
_GENERATED_NAMES = re.compile(
    r"(?:\.min\.(?:js|css|mjs)|\.bundle\.js|\.pb\.go|_pb2(?:_grpc)?\.pyi?|\.pb\.(?:cc|h)|"
    r"\.g\.dart|\.designer\.cs|\.generated\.\w+|-lock\.json|\.lock|\.map)$", re.I)
_GENERATED_MARK = re.compile(
    rb"(?:code generated .{0,80}do not edit|@generated|auto-?generated (?:file|code|by)|"
    rb"this file (?:was|is) (?:automatically )?generated)", re.I)
_SUFFIXES = tuple(EXTENSIONS) + tuple(FALLBACK_EXTENSIONS) + DOC_EXTENSIONS


def repo_aliases(repos: Sequence[str]) -> dict[str, str]:
    """alias -> repository folder: the folder's name, ``-2``, ``-3`` for a name seen before."""
    out: dict[str, str] = {}
    for repo in repos:
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(repo).name).strip("-.") or "repo"
        alias, n = base, 2
        while alias in out:
            alias, n = f"{base}-{n}", n + 1
        out[alias] = repo
    return out


def split_container(rel: str) -> tuple[str, str]:
    alias, _, path = rel.partition("/")
    return alias, path


class CodeKind:
    """The repositories of one code group."""

    kind = "code"

    def __init__(self, repos: Mapping[str, str], settings: CodeConfig, *,
                 known: frozenset[str] = frozenset(), scope: Sequence[str] | None = None,
                 now: Callable[[], float] = time.time) -> None:
        self.repos = dict(repos)  # alias -> folder
        self.settings = settings
        self.known = known  # containers the catalog has: not worth asking git about again
        self.scope = _scope(scope)  # (alias, "files"|"commits") a hint names; None: all
        self.now = now
        self._order: dict[str, list[str]] = {}  # alias -> commits in the order they are read
        self._located: dict[str, Repo | GitError] = {}  # alias -> where git is told to look
        self._streams: dict[str, tuple[Iterator[Commit], dict[str, Commit]]] = {}

    # -- containers -----------------------------------------------------------------------------
    def walk(self, root: Path, *, should_stop: Callable[[], bool] | None = None,
             max_entries: int | None = None) -> WalkResult:
        stop = should_stop or (lambda: False)
        files: list[FileState] = []
        skipped: list[tuple[str, Skip]] = []
        self._located.clear()  # a .git file may have changed since the last pass
        for alias, repo in self.repos.items():
            if stop():
                raise Interrupted(f"listing {repo} was interrupted")
            if not os.path.isdir(repo):
                skipped.append((alias, Skip("unreadable", f"{repo} is not a folder now")))
                continue
            where = self._git(alias)
            if isinstance(where, GitOutside):
                skipped.append((alias, Skip("git_outside", str(where))))
                continue
            unreadable = where if isinstance(where, GitError) else None
            if self._wants(alias, "files"):
                rels: list[str] | None = None
                if isinstance(where, Repo):
                    try:
                        rels = list_files(where)
                    except GitError as exc:
                        unreadable = exc
                if rels is None:
                    rels = [f.path for f in walk_vault(Path(repo), exclude=(".git",),
                                                       suffixes=_SUFFIXES,
                                                       should_stop=stop,
                                                       max_entries=max_entries).files]
                self._files(alias, repo, rels, files, skipped, stop)
                if max_entries is not None and len(files) > max_entries:
                    raise TooManyFiles.at(repo, max_entries)
            if unreadable is not None:
                skipped.append((f"{alias}/{COMMITS}", Skip("git_unreadable", str(unreadable))))
            elif isinstance(where, Repo) and self._wants(alias, "commits") \
                    and self.settings.history_commits > 0:
                months = self.settings.history_months
                since = int(self.now() - months * MONTH_S) if months else 0
                try:
                    commits = list_commits(where, since,
                                           min(MAX_COMMITS, self.settings.history_commits), stop)
                except GitError as exc:
                    skipped.append((f"{alias}/{COMMITS}", Skip("git_unreadable", str(exc))))
                    continue
                commits.sort(key=lambda c: -c[1])  # the order the pipeline reads them in
                self._order[alias] = [sha for sha, _ in commits]
                files.extend(FileState(f"{alias}/{COMMITS}/{sha}", 0, ts * 1_000_000_000)
                             for sha, ts in commits)
        return WalkResult(files, skipped)

    def _git(self, alias: str) -> Repo | GitError:
        """Where git is told the repository is, or why it is not run on it: a ``.git`` file
        is followed only into the group's own repositories (worktrees and submodules of
        them), and git never looks above the folder."""
        where = self._located.get(alias)
        if where is None:
            try:
                where = locate(self.repos[alias], inside=self.repos.values())
            except GitError as exc:
                where = exc
            self._located[alias] = where
        return where

    def _wants(self, alias: str, what: str) -> bool:
        return self.scope is None or (alias, what) in self.scope or (alias, "") in self.scope

    def _files(self, alias: str, repo: str, rels: Sequence[str], files: list[FileState],
               skipped: list[tuple[str, Skip]], stop: Callable[[], bool]) -> None:
        """The source files of one repository as containers; the others as skips."""
        vendored = set(self.settings.vendored)
        limit = self.settings.max_file_kb * 1024
        folders: set[str] = set()
        real_repo = os.path.realpath(repo)
        for n, rel in enumerate(rels):
            if n % 512 == 0 and stop():
                raise Interrupted(f"listing {repo} was interrupted")
            parts = rel.split("/")
            cut = next((i for i, p in enumerate(parts[:-1]) if p in vendored), None)
            if cut is not None:
                folder = "/".join(parts[: cut + 1])
                if folder not in folders:
                    folders.add(folder)
                    skipped.append((f"{alias}/{folder}", Skip(
                        "vendored", f"{folder}/ holds third-party or built code")))
                continue
            if language_of(rel) is None:
                if "." not in parts[-1] and os.path.isdir(os.path.join(repo, *parts)):
                    skipped.append((f"{alias}/{rel}", Skip("submodule",
                                                           f"{rel} is a git submodule")))
                continue  # not source: images, archives, data
            name = f"{alias}/{rel}"
            if _GENERATED_NAMES.search(parts[-1]):
                code = "minified" if ".min." in parts[-1].lower() else "generated"
                skipped.append((name, Skip(code, f"{parts[-1]} is {code} by its name")))
                continue
            path = os.path.join(repo, *parts)
            try:
                st = os.lstat(path)
            except OSError:
                continue  # in the index, not on disk (deleted, not committed)
            if stat.S_ISLNK(st.st_mode):
                real = os.path.realpath(path)
                if not (real == real_repo or real.startswith(real_repo + os.sep)):
                    skipped.append((name, Skip("outside_root", f"{rel} links to {real}")))
                continue  # a link inside: its target is listed under its own name
            if stat.S_ISDIR(st.st_mode):
                skipped.append((name, Skip("submodule", f"{rel} is a git submodule")))
                continue
            if not stat.S_ISREG(st.st_mode):
                skipped.append((name, Skip("not_regular", f"{rel} is not a regular file")))
                continue
            if st.st_size > limit:
                skipped.append((name, Skip("too_large", f"{st.st_size:,} bytes, over "
                                           f"code.max_file_kb ({self.settings.max_file_kb})")))
                continue
            files.append(FileState(name, st.st_size, st.st_mtime_ns))

    def appendable(self, rel: str) -> bool:
        return False

    def walk_state(self, paths: Sequence[str]) -> dict[str, Any]:
        """The order the walk put the commits of ``paths`` in (one ``git log`` reads a batch
        of them): an extraction worker reads them with a kind of its own (decision 0041)."""
        order: dict[str, list[str]] = {}
        for rel in paths:
            alias, path = split_container(rel)
            if path.startswith(COMMITS + "/"):
                order.setdefault(alias, []).append(path.split("/", 1)[1])
        return {"order": order}

    def take_walk_state(self, state: dict[str, Any]) -> None:
        self._order = {alias: list(shas) for alias, shas in state.get("order", {}).items()}

    def entries(self, root: Path, rel: str, start: int) -> Iterator[Entry]:
        alias, path = split_container(rel)
        repo = self.repos.get(alias)
        if repo is None:
            return
        where = self._git(alias)
        if isinstance(where, GitOutside):  # nothing of it is read, its files neither
            skip = Skip("git_outside", str(where))
            yield Entry(f"skip:{rel}", "", "", 0, lambda: skip)
            return
        if path.startswith(COMMITS + "/"):
            yield from self._commit_entries(alias, repo, path.split("/", 1)[1])
        else:
            yield from self._file_entries(alias, repo, rel, path)

    def location_metadata(self, root: Path, key: str, container: str,
                          locator: str) -> dict[str, Any]:
        return {}

    # -- source files ---------------------------------------------------------------------------
    def _file_entries(self, alias: str, repo: str, rel: str, path: str) -> Iterator[Entry]:
        data = read_bytes(repo, path, self.settings.max_file_kb * 1024)
        skip = data if isinstance(data, Skip) else source_skip(data, path)
        if skip is not None:
            yield Entry(f"skip:{rel}", "", "", 0, lambda: skip)
            return
        assert isinstance(data, bytes)
        text = data.decode("utf-8", "replace")
        language = language_of(path) or "text"
        seen: Counter[str] = Counter()
        for sym in split_source(text, path, language):
            base = f"{sym.symbol_type}:{sym.qualified}:{sym.part}"
            key = f"code:{rel}#{base}" + (f"~{seen[base]}" if seen[base] else "")
            seen[base] += 1
            digest = hashlib.sha256(json.dumps(
                [CODE_VERSION, language, sym.text, sym.start_line, sym.end_line, sym.signature,
                 sym.doc, sym.parent], ensure_ascii=False).encode("utf-8")).hexdigest()
            yield Entry(key, "", digest, len(data),
                        _later(symbol_document, sym, alias, repo, path, language))

    # -- commits --------------------------------------------------------------------------------
    def _commit_entries(self, alias: str, repo: str, sha: str) -> Iterator[Entry]:
        where = self._git(alias)  # a folder that lost its .git: its commits are gone
        commit = self._commit(alias, where, sha) if isinstance(where, Repo) else None
        if commit is None:
            return
        vendored = set(self.settings.vendored)
        changes: list[FileChange | None] = [  # not the vendored or generated files it touched
            f for f in commit.files if not vendored.intersection(f.path.split("/")[:-1])
            and not _GENERATED_NAMES.search(f.path)] or [None]
        files = [c for c in changes if c is not None]
        digest = hashlib.sha256(json.dumps(
            [CODE_VERSION, sha, [f.path for f in files], commit.files_total]).encode()
        ).hexdigest()
        yield Entry(f"commit:{alias}:{sha}", "", digest, 1,
                    _later(commit_document, commit, files, alias, repo))

    def _commit(self, alias: str, where: Repo, sha: str) -> Commit | None:
        """One commit, from the git log streaming the batch it is in (started at it, with
        the commits after it that the catalog does not have)."""
        stream = self._streams.get(alias)
        for attempt in range(2):
            if stream is not None:
                commits, held = stream
                if sha in held:
                    return held.pop(sha)
                for c in commits:
                    if c.sha == sha:
                        return c
                    if len(held) < COMMIT_BATCH:
                        held[c.sha] = c
            if attempt:
                return None
            stream = self._batch(alias, where, sha)
        return None

    def _batch(self, alias: str, where: Repo,
               sha: str) -> tuple[Iterator[Commit], dict[str, Commit]]:
        order = self._order.get(alias, [])
        try:
            at = order.index(sha)
        except ValueError:
            batch = [sha]
        else:
            batch = [sha] + [s for s in order[at + 1:]
                             if f"{alias}/{COMMITS}/{s}" not in self.known][: COMMIT_BATCH - 1]
        old = self._streams.pop(alias, None)
        if old is not None:
            _close(old[0])
        stream: tuple[Iterator[Commit], dict[str, Commit]] = (
            read_commits(where, batch, max_files=self.settings.max_commit_files), {})
        self._streams[alias] = stream
        return stream

    def close(self) -> None:
        for commits, _ in self._streams.values():
            _close(commits)
        self._streams.clear()


def _close(it: Iterator[Commit]) -> None:
    close = getattr(it, "close", None)
    if close is not None:
        close()


def _later(fn: Callable[..., Document | Skip], *args: Any) -> Callable[[], Document | Skip]:
    return lambda: fn(*args)


def _scope(paths: Sequence[str] | None) -> set[tuple[str, str]] | None:
    """What a hint asks to look at: a repository's files, its commits, or all of it."""
    if paths is None:
        return None
    out: set[tuple[str, str]] = set()
    for p in paths:
        alias, rest = split_container(p)
        if not alias:
            return None
        out.add((alias, "commits" if rest.startswith(COMMITS) else "files" if rest else ""))
    return out


def source_skip(data: bytes, path: str) -> Skip | None:
    """Why a source file is not indexed though its name says code: binary, minified,
    generated; None to index it."""
    head = data[:8192]
    if b"\0" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return Skip("binary", f"{path} holds NUL bytes")
    if _GENERATED_MARK.search(data[:2048]):
        return Skip("generated", f"{path} says it is generated")
    if len(data) > 4096:
        lines = data.count(b"\n") + 1
        longest = max((len(ln) for ln in data.split(b"\n", 200)[:200]), default=0)
        if len(data) / lines >= 200 and longest >= MINIFIED_LINE:
            return Skip("minified", f"{path}: {lines:,} lines for {len(data):,} bytes")
    return None


def symbol_document(sym: Symbol, alias: str, repo: str, path: str, language: str) -> Document:
    """One symbol as the pipeline chunks it: its summary, then its code in a fence (so the
    markdown chunker never takes a ``#`` comment for a heading)."""
    summary = nl_summary(sym, language, path)
    fence = "````" if "```" in sym.text else "```"
    text = f"{summary}\n\n{fence}{language}\n{sym.text}\n{fence}"
    uri = Path(repo, *path.split("/")).as_uri()
    metadata: dict[str, Any] = {
        "language": language, "symbol_name": sym.qualified, "symbol_type": sym.symbol_type,
        "start_line": sym.start_line, "end_line": sym.end_line, "signature": sym.signature,
        "docstring": sym.doc, "nl_summary": summary, "file_path": path, "repository": alias,
        "repository_path": repo, "part": sym.part, "source_uri": f"{uri}#L{sym.start_line}",
        "source_path": str(Path(repo, *path.split("/"))),
    }
    title = f"{sym.qualified} ({sym.symbol_type.replace('_', ' ')}, {path})"
    return Document(title=title, text=text, source_type="code", metadata=metadata)


def commit_document(commit: Commit, changes: Sequence[FileChange], alias: str,
                    repo: str) -> Document:
    """One commit as one document (issue 36): who, when and why (the message) first, then the
    files it changed with their counts, then a diff summary (each file's excerpt, at most
    COMMIT_DIFF_CHARS in all), so its first chunk is what it is about. The files are
    metadata too (``files``: path, change, old_path, additions, deletions; ``file_path``,
    ``change`` and ``old_path`` when it changed one)."""
    subject = commit.message.splitlines()[0] if commit.message else "(no message)"
    message = "\n".join(ln for ln in commit.message.splitlines() if ln.strip())[:1500]
    short = commit.sha[:8]
    head = f"Commit {short} by {commit.author_name} on {commit.author_date[:10]}: {message}"
    lines = [f"- {c.change} {c.path}" + (f" (from {c.old_path})" if c.old_path else "")
             + f" (+{c.additions} -{c.deletions})" for c in changes[:COMMIT_FILES_LISTED]]
    if len(changes) > COMMIT_FILES_LISTED:
        lines.append(f"- and {len(changes) - COMMIT_FILES_LISTED} more files")
    parts = [head]
    if lines:
        parts.append("Files:\n" + "\n".join(lines))
    budget = COMMIT_DIFF_CHARS
    diffs = []
    for c in changes:
        excerpt = "\n".join(c.excerpt).replace("```", "'''")
        if not excerpt or budget <= 0:
            continue
        excerpt = excerpt[:budget]
        budget -= len(excerpt)
        diffs.append(f"```diff\n{excerpt}\n```")
    parts.extend(diffs)
    one = changes[0] if len(changes) == 1 else None
    metadata: dict[str, Any] = {
        "commit_sha": commit.sha, "commit_sha_short": short, "author_name": commit.author_name,
        "author_email": commit.author_email, "author_date": commit.author_date,
        "commit_message": commit.message,
        "files": [{"path": c.path, "change": c.change, "old_path": c.old_path,
                   "additions": c.additions, "deletions": c.deletions}
                  for c in changes[:COMMIT_FILES_LISTED]],
        "file_path": one.path if one is not None else "",
        "additions": sum(c.additions for c in changes),
        "deletions": sum(c.deletions for c in changes),
        "authors": [commit.author_name, commit.author_email],
        "old_path": one.old_path if one is not None else "",
        "change": one.change if one is not None else "",
        "files_in_commit": commit.files_total, "files_indexed": len(commit.files),
        "parents": list(commit.parents), "repository": alias, "repository_path": repo,
        "source_uri": Path(repo).as_uri() + f"#commit={commit.sha}", "source_path": repo,
    }
    warnings = ("commit_files_truncated",) if commit.files_total > len(commit.files) else ()
    where = f", {one.path}" if one is not None else (f", {len(changes)} files" if changes
                                                      else "")
    title = f"{subject[:120]} ({short}{where})"
    return Document(title=title, text="\n\n".join(parts), source_type="commit",
                    metadata=metadata, date=commit.author_date[:10] or None, warnings=warnings)
