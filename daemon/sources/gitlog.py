"""Reading git repositories with the git command: tracked files, and history (decision 0042).

git is on every machine that has repositories (no licence to review, no wheel), and one
streamed ``git log --numstat`` over 300 commits is faster than pygit2 or a ``git show`` per
commit (decision 0030, FIELD-NOTES). A batch of commits is read from two streams keyed by sha:
``git cat-file --batch`` gives each commit object after its length (``<sha> commit <size>``),
and its header and message are parsed here, so no message content can pass for a boundary;
``git log --no-walk --stdin --format=%x00%H --numstat -p`` gives its files and patch, where a
record opens with a NUL, which no numstat or patch line can start with. Both are read in fixed
pieces (``_Pieces``): what lies past a field's bound is dropped as it streams, so a 100 MB
message or a 5 MB author name costs one piece of memory, never the whole field.

git is told where the repository is (``GIT_DIR``, ``GIT_WORK_TREE``) and never looks for one:
a folder without ``.git`` inside another repository does not read that one's history, and a
``.git`` file (a worktree's, a submodule's) is followed only to a git folder inside the
folders the caller allows (``locate``).

A repository is the user's, but its ``.git/config`` may name programs (an fsmonitor hook, an
external diff, a textconv filter): every call turns those off, and never opens a pager or asks
for a password.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import cast

log = logging.getLogger(__name__)

TIMEOUT_S = 120.0
EXCERPT_LINES = 40  # of one file's patch, kept in its commit document
EXCERPT_CHARS = 2000
EXCERPT_LINE_CHARS = 400  # of one line of a patch
MAX_MESSAGE_CHARS = 8000
MAX_NAME_CHARS = 256  # an author's name
MAX_EMAIL_CHARS = 320  # an address: 64 before the @, 255 after (RFC 5321)
MAX_PATH_CHARS = 4096  # a file's path in a commit: PATH_MAX on Linux
MAX_PARENTS = 128
PIECE = 64 * 1024  # bytes read from git at a time
_LINE_BYTES = 4 * 2 * MAX_PATH_CHARS + 64  # of a numstat or patch line: a rename's two paths
_IDENT_BYTES = 4 * (MAX_NAME_CHARS + MAX_EMAIL_CHARS) + 64  # of each end of an author line
_SPACE = b" \t\r\n\x0b\x0c\x1c\x1d\x1e\x1f"  # what str.strip() takes from a message's start
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=" + os.devnull, "-c",
         "core.quotepath=off", "-c", "diff.external=", "-c", "core.pager=cat", "-c",
         "log.showSignature=false", "-c", "diff.renames=true")


class GitError(Exception):
    """git could not read the repository (not one, a corrupt .git, no git installed)."""


class GitOutside(GitError):
    """A ``.git`` file (or a git folder's ``commondir``) names a git folder outside the
    folders allowed: git is never run on it."""


@dataclass(frozen=True)
class Repo:
    """Where git is told a repository is: its work tree and its git folder (real paths)."""

    work_tree: str
    git_dir: str


def locate(folder: str, inside: Iterable[str] = ()) -> Repo:
    """The repository at ``folder``. Its ``.git`` is a folder, or a file naming one
    (``gitdir: ...``, as a worktree's or a submodule's is), which is followed only when the
    folder it names, and that folder's ``commondir``, lie inside ``folder`` or one of
    ``inside``: ``GitOutside`` otherwise, without running git. A folder without ``.git`` is
    ``GitError``: git would look for a repository above it."""
    work = os.path.realpath(folder)
    roots = [work, *(os.path.realpath(p) for p in inside)]
    dot = os.path.join(work, ".git")
    if os.path.isdir(dot):  # a link to a folder too: its real path is checked below
        git_dir = os.path.realpath(dot)
    elif os.path.isfile(dot):
        git_dir = os.path.realpath(os.path.join(work, _pointer(dot, "gitdir:")))
    elif os.path.lexists(dot):
        raise GitError(f"{dot} is neither a folder nor a file")
    else:
        raise GitError(f"{folder} has no .git: not a repository of its own")
    _check_inside(git_dir, roots, dot)
    common = os.path.join(git_dir, "commondir")
    if os.path.isfile(common):  # a worktree's git folder borrows refs and objects from it
        _check_inside(os.path.realpath(os.path.join(git_dir, _pointer(common, ""))), roots,
                      common)
    return Repo(work, git_dir)


def _pointer(path: str, prefix: str) -> str:
    """The one path a ``.git`` file or a ``commondir`` holds (4 KB at most is read)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(4097)
    except OSError as exc:
        raise GitError(f"{path}: {exc}") from exc
    text = os.fsdecode(raw).strip()
    target = text[len(prefix):].strip()
    if len(raw) > 4096 or not text.startswith(prefix) or not target or "\n" in target:
        raise GitError(f"{path} does not name a git folder")
    return target


def _check_inside(path: str, roots: Sequence[str], named_by: str) -> None:
    p = os.path.normcase(path)
    for root in roots:
        r = os.path.normcase(root)
        if p == r or p.startswith(r.rstrip(os.sep) + os.sep):
            return
    raise GitOutside(f"{named_by} names {path}, outside the code group's repositories")


def _repo(repo: str | Repo) -> Repo:
    return repo if isinstance(repo, Repo) else locate(repo)


def _env(repo: Repo) -> dict[str, str]:
    # None of the caller's git variables (GIT_DIR, GIT_INDEX_FILE, GIT_CONFIG_PARAMETERS...)
    # reach git; the ceiling is a second guard should GIT_DIR ever be dropped.
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith("GIT_") or k.upper() == "GIT_EXEC_PATH"}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat",
                "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1", "GIT_DIR": repo.git_dir,
                "GIT_WORK_TREE": repo.work_tree,
                "GIT_CEILING_DIRECTORIES": os.path.dirname(repo.work_tree)})
    return env


def _cmd(repo: Repo, args: Sequence[str]) -> list[str]:
    return ["git", "-C", repo.work_tree, "-c", f"safe.directory={repo.work_tree}", *_SAFE,
            *args]


def run_git(repo: str | Repo, args: Sequence[str], *, timeout: float = TIMEOUT_S,
            stdin: bytes | None = None) -> bytes:
    """git's output, or ``GitError`` with its message."""
    where = _repo(repo)
    try:
        proc = subprocess.run(_cmd(where, args), input=stdin, capture_output=True,
                              timeout=timeout, env=_env(where), check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]}: {exc}") from exc
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]}: " + (msg[-1] if msg else f"exit {proc.returncode}"))
    return proc.stdout


def list_files(repo: str | Repo) -> list[str]:
    """Tracked files and untracked ones not ignored (``.gitignore`` respected), '/'-separated."""
    out = run_git(repo, ["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
    return sorted({p for p in out.decode("utf-8", "surrogateescape").split("\0") if p})


def head(repo: str | Repo) -> str | None:
    """The commit HEAD names, None for a repository without commits."""
    try:
        return run_git(repo, ["rev-parse", "--verify", "-q", "HEAD^{commit}"]).decode().strip() \
            or None
    except GitError:
        return None


def is_shallow(repo: str | Repo) -> bool:
    try:
        return run_git(repo, ["rev-parse", "--is-shallow-repository"]).strip() == b"true"
    except GitError:
        return False


def list_commits(repo: str | Repo, since_ts: int, limit: int,
                 should_stop: Callable[[], bool] = lambda: False) -> list[tuple[str, int]]:
    """(sha, commit time) of HEAD's history since ``since_ts`` (0: whatever its age), newest
    first, at most ``limit``. git stops walking at the window's edge, so 100k older commits cost nothing."""
    where = _repo(repo)
    if head(where) is None:
        return []
    # git reads a number under 100,000,000 as a day of the month, not as seconds ("--since=1"
    # is the first of this month): a window reaching back before 1973-03-03 starts there.
    args = ["rev-list", "--format=%H %ct", "--no-commit-header", f"--max-count={limit}",
            *([f"--since={max(100_000_000, since_ts)}"] if since_ts > 0 else []), "HEAD"]
    out = run_git(where, args)
    commits: list[tuple[str, int]] = []
    lines = out.decode("ascii", "replace").split()
    if len(lines) % 2:  # an old git without --no-commit-header prints "commit <sha>" lines
        raise GitError("git rev-list: unexpected output")
    for i in range(0, len(lines), 2):
        if i % 8192 == 0 and should_stop():
            break
        commits.append((lines[i], int(lines[i + 1])))
    return commits


@dataclass
class FileChange:
    path: str
    old_path: str  # "" unless renamed
    additions: int
    deletions: int
    binary: bool = False
    excerpt: list[str] = field(default_factory=list)
    excerpt_chars: int = 0

    @property
    def change(self) -> str:
        if self.old_path:
            return "renamed"
        head = "\n".join(self.excerpt[:4])
        if "new file mode" in head:
            return "added"
        if "deleted file mode" in head:
            return "deleted"
        return "modified"


@dataclass
class Commit:
    sha: str
    author_name: str
    author_email: str
    author_date: str  # ISO 8601
    parents: tuple[str, ...]
    message: str
    files: list[FileChange] = field(default_factory=list)
    files_total: int = 0  # all files the commit touched (``files`` holds at most the cap)


def split_rename(path: str) -> tuple[str, str]:
    """numstat's rename forms -> (old, new): ``a => b``, ``src/{a.py => b.py}``,
    ``{old => new}/f``."""
    if " => " not in path:
        return "", path
    if "{" in path and "}" in path:
        pre, rest = path.split("{", 1)
        mid, post = rest.split("}", 1)
        old, new = mid.split(" => ", 1)
        return ((pre + old + post).replace("//", "/"), (pre + new + post).replace("//", "/"))
    old, new = path.split(" => ", 1)
    return old, new


def read_commits(repo: str | Repo, shas: Sequence[str], *, max_files: int,
                 excerpts: bool = True) -> Iterator[Commit]:
    """The named commits, each from two streams keyed by its sha: its object from ``git
    cat-file --batch`` (author, date, parents, message), its files and patch from one ``git
    log --no-walk --stdin --numstat -p``. At most ``max_files`` files of each are kept
    (``files_total`` counts them all), of each file's patch at most ``EXCERPT_LINES`` lines,
    and every field is bounded while it streams: a commit touching 50,000 files, a 100 MB
    message or a 5 MB author name never sits in memory whole."""
    if not shas:
        return
    where = _repo(repo)
    args = ["log", "--no-walk=unsorted", "--stdin", "--no-color", "--no-ext-diff",
            "--no-textconv", "--numstat", "-M", "--format=%x00%H"]
    if excerpts:
        args += ["-p", "-U2"]
    with contextlib.ExitStack() as stack:
        logp = stack.enter_context(_Process(where, args))
        cat = stack.enter_context(_Process(where, ["cat-file", "--batch"]))
        with contextlib.suppress(OSError):  # git gone at once: finish() says why
            logp.stdin.write(("\n".join(shas) + "\n").encode("ascii"))
            logp.stdin.close()
        yield from _parse(_Pieces(logp.stdout.read1), set(shas),
                          lambda sha: _object(cat, sha), max_files)
        logp.finish()


class _Process:
    """One git command on pipes; what it says on stderr goes to a temporary file (a pipe
    nobody reads could fill and stall it). Closing kills it if it still runs."""

    def __init__(self, repo: Repo, args: Sequence[str]) -> None:
        self.what = f"git {args[0]}"
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 (closed by __exit__)
        try:
            self.proc = subprocess.Popen(_cmd(repo, args), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._err,
                                         env=_env(repo))
        except OSError as exc:
            self._err.close()
            raise GitError(f"{self.what}: {exc}") from exc
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.stdout = cast(io.BufferedReader, self.proc.stdout)  # bufsize -1: buffered

    def __enter__(self) -> _Process:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for fh in (self.stdin, self.stdout, self._err):
            with contextlib.suppress(OSError):
                fh.close()

    def finish(self) -> None:
        """Waits for git to end; ``GitError`` with the last line it wrote if it failed."""
        try:
            code = self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise GitError(f"{self.what}: {exc}") from exc
        if code != 0:
            raise GitError(f"{self.what}: {self.error() or f'exit {code}'}")

    def error(self) -> str:
        self._err.seek(0, os.SEEK_END)
        self._err.seek(max(0, self._err.tell() - 4096))
        lines = self._err.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""


class _Pieces:
    """A byte stream read in fixed pieces (``PIECE``) and handed out as lines cut to a bound:
    what lies past a line's bound is read and dropped as it comes, so a 100 MB line costs one
    piece of memory. ``size`` stops it after that many bytes (an object of ``git cat-file``,
    whose length comes first)."""

    def __init__(self, read: Callable[[int], bytes], size: int | None = None) -> None:
        self._read = read
        self._left = size
        self._buf = b""
        self._pos = 0

    def _more(self) -> bool:
        n = PIECE if self._left is None else min(PIECE, self._left)
        piece = self._read(n) if n > 0 else b""
        if self._left is not None:
            if n > 0 and not piece:
                raise GitError("git cat-file: an object ended before its length")
            self._left -= len(piece)
        self._buf, self._pos = piece, 0
        return bool(piece)

    def line(self, keep: int, tail: int = 0) -> tuple[bytes, bytes | None] | None:
        """The next line without its newline, cut to ``keep`` bytes, and for a line longer
        than that its last ``tail`` bytes (else None); None at the end of the stream."""
        buf, pos = self._buf, self._pos
        nl = buf.find(b"\n", pos)
        if 0 <= nl <= pos + keep:
            self._pos = nl + 1
            return buf[pos:nl], None
        head, end, cut, seen = b"", b"", False, False
        while True:
            segment = buf[pos:nl if nl >= 0 else len(buf)]
            if segment:
                seen = True
                room = keep - len(head)
                cut = cut or len(segment) > room
                if room > 0:
                    head += segment[:room]
                if tail:
                    end = (end + segment[-tail:])[-tail:]
            if nl >= 0:
                self._pos = nl + 1
                return head, (end if cut else None)
            if not self._more():
                return (head, end if cut else None) if seen else None
            buf, pos = self._buf, 0
            nl = buf.find(b"\n")

    def skip_to(self, marks: tuple[bytes, ...]) -> None:
        """Drops lines up to the next one starting with one of ``marks`` (a patch's lines
        past its excerpt), searching whole pieces rather than reading line by line."""
        needles = [b"\n" + m for m in marks]
        carry = max(map(len, needles)) - 1
        buf = b"\n" + self._buf[self._pos:]  # called at a line's start
        while True:
            hits = [i for i in (buf.find(n) for n in needles) if i >= 0]
            if hits:
                self._buf, self._pos = buf, min(hits) + 1
                return
            tail = buf[-carry:]
            if not self._more():
                return
            buf = tail + self._buf

    def rest(self, keep: int, skip: bytes = b"") -> bytes:
        """What is left of the stream: its first ``keep`` bytes after any leading bytes in
        ``skip``; the rest is read and dropped."""
        out = b""
        data = self._buf[self._pos:]
        while True:
            if skip and not out:
                data = data.lstrip(skip)
            if len(out) < keep:
                out += data[:keep - len(out)]
            if not self._more():
                return out
            data = self._buf


def _parse(lines: _Pieces, wanted: set[str], commit_of: Callable[[str], Commit],
           max_files: int) -> Iterator[Commit]:
    """Commits from git log's stream: a record opens with a line of NUL and a sha asked for
    (no numstat or patch line can start with NUL: content lines start with ``+``, ``-`` or a
    space, and a path holding a control character is quoted), then numstat lines, then
    ``diff --git`` sections in the numstat's order."""
    current: Commit | None = None
    diff_n = -1  # which file's patch is streaming past
    while (got := lines.line(_LINE_BYTES)) is not None:
        line = got[0]
        if line[:1] == b"\0":
            sha = line[1:].decode("ascii", "replace")
            if sha in wanted:
                wanted.discard(sha)
                if current is not None:
                    yield current
                current, diff_n = commit_of(sha), -1
            continue
        if current is None:
            continue
        if line.startswith(b"diff --git "):
            diff_n += 1
        if diff_n >= 0:
            if diff_n >= len(current.files):  # past max_files: on to the next commit
                lines.skip_to((b"\0",))
                continue
            f = current.files[diff_n]
            if len(f.excerpt) < EXCERPT_LINES and f.excerpt_chars < EXCERPT_CHARS:
                piece = line[:4 * EXCERPT_LINE_CHARS].decode("utf-8", "replace")
                f.excerpt.append(piece[:EXCERPT_LINE_CHARS])
                f.excerpt_chars += len(f.excerpt[-1]) + 1
            else:  # this file's excerpt is full: on to the next file's patch
                lines.skip_to((b"diff --git ", b"\0"))
            continue
        parts = line.split(b"\t", 2)
        if len(parts) == 3 and parts[0] and parts[1]:
            current.files_total += 1
            if len(current.files) < max_files:
                old, new = split_rename(parts[2].decode("utf-8", "replace"))
                binary = parts[0] == b"-"
                current.files.append(FileChange(
                    new[:MAX_PATH_CHARS], old[:MAX_PATH_CHARS],
                    0 if binary else _int(parts[0]), 0 if binary else _int(parts[1]), binary))
    if current is not None:
        yield current


def _int(s: bytes) -> int:
    try:
        return int(s)
    except ValueError:
        return 0


def _object(cat: _Process, sha: str) -> Commit:
    """One commit object from ``git cat-file --batch``, which gives its length first: the
    header and message are parsed here, each field bounded, and the rest read and dropped."""
    try:
        cat.stdin.write(sha.encode("ascii") + b"\n")
        cat.stdin.flush()
        head = cat.stdout.readline(256).split()
    except OSError as exc:
        raise GitError(f"git cat-file: {exc}") from exc
    if len(head) != 3 or head[0] != sha.encode("ascii") or head[1] != b"commit" \
            or not head[2].isdigit():
        raise GitError(f"git cat-file: {sha} is not a commit ({cat.error() or 'no object'})")
    pieces = _Pieces(cat.stdout.read1, int(head[2]))
    commit = _commit_object(sha, pieces)
    pieces.rest(0)
    cat.stdout.read(1)  # the newline after each object
    return commit


def _commit_object(sha: str, pieces: _Pieces) -> Commit:
    """A commit object's header lines (``parent``, ``author``, ``encoding``; the others
    skipped, signatures and all) up to the blank line, then its message."""
    author: tuple[bytes, bytes | None] = (b"", None)
    parents: list[str] = []
    encoding, seen_author = "utf-8", False
    while (got := pieces.line(_IDENT_BYTES, _IDENT_BYTES)) is not None:
        line, end = got
        if not line and end is None:
            break  # the blank line before the message
        key, _, value = line.partition(b" ")
        if key == b"parent" and len(parents) < MAX_PARENTS:
            parents.append(value[:64].decode("ascii", "replace"))
        elif key == b"author" and not seen_author:
            author, seen_author = (value, end), True
        elif key == b"encoding":
            encoding = value[:64].decode("ascii", "replace").strip() or "utf-8"
    message = _text(pieces.rest(4 * MAX_MESSAGE_CHARS, skip=_SPACE), encoding)
    name, email, date = _ident(_text(author[0], encoding),
                               None if author[1] is None else _text(author[1], encoding))
    return Commit(sha, name, email, date, tuple(parents),
                  message.strip()[:MAX_MESSAGE_CHARS])


def _text(raw: bytes, encoding: str) -> str:
    """Bytes in the commit's ``encoding`` (UTF-8 when it names none git or Python knows)."""
    try:
        return raw.decode(encoding, "replace")
    except (LookupError, ValueError):
        return raw.decode("utf-8", "replace")


def _ident(line: str, end: str | None) -> tuple[str, str, str]:
    """An author line's name, address and ISO date, split as git splits it: the name before
    the first ``<``, the address up to the next ``>``, the date after the last ``>``. A line
    too long to hold comes as its start and its ``end``."""
    lt = line.find("<")
    gt = line.find(">", lt + 1) if lt >= 0 else -1
    if end is None:
        if gt < 0:
            return "", "", ""  # git prints nothing of an author it cannot split
        name, email, end = line[:lt], line[lt + 1:gt], line
    elif lt >= 0:  # a long address: its start
        name, email = line[:lt], line[lt + 1:gt if gt >= 0 else len(line)]
    else:  # a long name: the address is at the line's end
        close = end.rfind(">")
        opening = end.rfind("<", 0, max(close, 0))
        name, email = line, end[opening + 1:close] if 0 <= opening < close else ""
    date = _iso(end[end.rfind(">") + 1:]) if ">" in end else ""
    return name.rstrip()[:MAX_NAME_CHARS], email[:MAX_EMAIL_CHARS], date


def _iso(stamp: str) -> str:
    """git's ``%aI`` of an author line's ``<seconds> <+hhmm>``; "" for one it cannot read."""
    parts = stamp.split()
    try:
        seconds, zone = int(parts[0]), parts[1] if len(parts) > 1 else "+0000"
        if len(zone) != 5 or zone[0] not in "+-" or not zone[1:].isdigit():
            zone = "+0000"
        offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[3:5]))
        tz = timezone(-offset if zone[0] == "-" else offset)
        return (_EPOCH + timedelta(seconds=seconds)).astimezone(tz).isoformat()
    except (IndexError, ValueError, OverflowError):
        return ""
