"""Hostile git repositories built by tests (decision 0042): a commit message that imitates git
log's separators, an author and a message too big to hold, a ``.git`` file naming another
repository. Big fields go through ``git fast-import``, whose objects are zlib-compressed: the
100 MB message is a few hundred kilobytes on disk."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from code_fixtures import commit_all, git

# The victim's record as ragd's old ``--format`` (\x1e sha \x1f name \x1f email \x1f date
# \x1f parents \x1f message \x1f, then numstat lines) would print it.
_FORGED = ("Tidy the imports\x1f\n\x1e{sha}\x1fMallory Forge\x1fmallory@evil.example\x1f"
           "2001-01-01T00:00:00+00:00\x1f\x1fForged: the uploader leaks tokens\x1f\n"
           "7\t0\tstolen/secrets.py\n")


def _env(repo: Path) -> dict[str, str]:
    return {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent)}


def forged_message_repo(repo: Path) -> dict[str, str]:
    """Two commits: ``victim``, then ``forger``, whose message ends a line with the old field
    separator and goes on with a whole record for the victim (another author, message and
    file). Returns the shas and the forger's exact message under ``message``."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "victim.py").write_text("def victim():\n    return 1\n", encoding="utf-8")
    victim = commit_all(repo, "Add the victim module", date="2026-09-01T10:00:00+00:00")
    message = _FORGED.format(sha=victim)
    (repo / "forger.py").write_text("import os\n", encoding="utf-8")
    (repo / "message.txt").write_bytes(message.encode("utf-8"))
    git(repo, "add", "forger.py")
    git(repo, "commit", "-q", "--no-gpg-sign", "--cleanup=verbatim", "-F", "message.txt",
        author="Bob Stone <bob@example.org>", date="2026-09-02T10:00:00+00:00")
    (repo / "message.txt").unlink()
    return {"victim": victim, "forger": git(repo, "rev-parse", "HEAD"), "message": message}


def forged_header_repo(repo: Path) -> str:
    """One commit written as a raw object whose ``gpgsig`` header goes on over lines that read
    like another author and parent (a header's continuation lines start with a space), and
    whose message is in ISO-8859-1 (an ``encoding`` header). Returns its sha."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("A = 1\n", encoding="utf-8")
    git(repo, "add", "a.py")
    tree = git(repo, "write-tree")
    raw = (f"tree {tree}\nauthor Ann Lee <ann@example.org> 1790000000 +0000\n"
           "committer Ann Lee <ann@example.org> 1790000000 +0000\nencoding ISO-8859-1\n"
           "gpgsig -----BEGIN PGP SIGNATURE-----\n author Mallory Forge <m@evil.example> 1 +0000"
           f"\n parent {'e' * 40}\n \n -----END PGP SIGNATURE-----\n\nCaf\xe9 cr\xe8me\n"
           ).encode("latin-1")
    proc = subprocess.run(["git", "-C", str(repo), "hash-object", "-t", "commit", "-w",
                           "--stdin"], input=raw, capture_output=True, check=True,
                          env=_env(repo))
    sha = proc.stdout.decode().strip()
    git(repo, "update-ref", "refs/heads/main", sha)
    return sha


def huge_author_repo(repo: Path, author_mb: float = 5, message_mb: float = 100,
                     email_mb: float = 0, line_mb: float = 0) -> str:
    """One commit whose author name is ``author_mb`` MB (and e-mail ``email_mb`` MB) and whose
    message is ``message_mb`` MB, streamed to ``git fast-import`` in 1 MB pieces; it adds
    ``big.py``, whose second line is ``line_mb`` MB long (a line of its patch). Returns its
    sha."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    name = b"Huge " + b"n" * int(author_mb * 2**20)
    email = b"huge" + b"e" * int(email_mb * 2**20) + b"@example.org"
    subject = b"A subject before a flood\n\n"
    filler = b"All work and no play makes Jack a dull boy.\n" * 24_000  # ~1 MB
    size = int(message_mb * 2**20)
    content = b"def big():\n    return '" + b"b" * int(line_mb * 2**20) + b"'\n"
    proc = subprocess.Popen(["git", "-C", str(repo), "fast-import", "--quiet"],
                            stdin=subprocess.PIPE, env=_env(repo))
    assert proc.stdin is not None
    with proc.stdin as out:
        out.write(b"commit refs/heads/main\nauthor " + name + b" <" + email +
                  b"> 1790000000 +0200\ncommitter Ann Lee <ann@example.org> 1790000000 +0200\n")
        out.write(b"data %d\n" % (len(subject) + size) + subject)
        left = size
        while left > 0:
            piece = filler[:left]
            out.write(piece)
            left -= len(piece)
        out.write(b"\nM 100644 inline big.py\ndata %d\n" % len(content) + content + b"\n")
    assert proc.wait(timeout=300) == 0
    git(repo, "reset", "-q", "--hard", "main")
    return git(repo, "rev-parse", "HEAD")


def gitfile_pointing_out(folder: Path, other_repo: Path) -> Path:
    """A folder whose ``.git`` is a file naming ``other_repo``'s git folder (``gitdir: ...``),
    as a worktree's or a submodule's is, with a source file of its own."""
    folder.mkdir(parents=True)
    (folder / ".git").write_text(f"gitdir: {other_repo / '.git'}\n", encoding="utf-8")
    (folder / "inside.py").write_text("def inside_the_folder():\n    pass\n", encoding="utf-8")
    return folder
