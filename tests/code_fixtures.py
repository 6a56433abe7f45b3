"""Git repositories built by tests with the git command (code groups, decision 0030)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

UPLOAD_PY = '''"""Uploading files to the object store."""
import time

RETRIES = 3


def upload_with_retry(client, path, tries=RETRIES):
    """Send a file, trying again with exponential backoff when the network fails."""
    for attempt in range(tries):
        try:
            return client.put(path)
        except ConnectionError:
            time.sleep(2 ** attempt)
    raise RuntimeError("upload failed")


class Uploader:
    """Keeps a client and uploads batches."""

    def send_batch(self, paths):
        return [upload_with_retry(self.client, p) for p in paths]
'''

STORE_TS = '''import { Client } from "./client";

// Remembers sessions in a local cache so that users stay signed in.
export class SessionCache {
  private entries = new Map<string, string>();

  remember(user: string, token: string): void {
    this.entries.set(user, token);
  }
}

export interface Shape {
  area(): number;
}
'''

MAIN_GO = '''package main

// ParseQuota reads a storage quota like "10GB" into bytes.
func ParseQuota(s string) int64 {
\treturn 0
}
'''

README = "# Uploader\n\nHow we move files.\n\n## Retries\n\nUploads are retried three times.\n"


def git(repo: Path, *args: str, author: str = "Ann Lee <ann@example.org>",
        date: str | None = None) -> str:
    name, _, email = author.partition(" <")
    env = {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email.rstrip(">"),
           "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email.rstrip(">"),
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent)}
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    out = subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def commit_all(repo: Path, message: str, **kw: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-gpg-sign", "-m", message, **kw)
    return git(repo, "rev-parse", "HEAD")


def build_repo(repo: Path) -> dict[str, str]:
    """Several languages, several commits by two authors on known dates, a rename, an
    ignored file and a vendored folder. Returns the commit shas by name."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text(README, encoding="utf-8")
    (repo / "src").mkdir()
    (repo / "src" / "upload.py").write_text(UPLOAD_PY, encoding="utf-8")
    (repo / ".gitignore").write_text("secret_notes.py\n", encoding="utf-8")
    (repo / "secret_notes.py").write_text("def ignored_helper():\n    pass\n", encoding="utf-8")
    shas = {"first": commit_all(repo, "Add the uploader with retries",
                                date="2026-09-01T10:00:00+00:00")}
    (repo / "web").mkdir()
    (repo / "web" / "session.ts").write_text(STORE_TS, encoding="utf-8")
    (repo / "node_modules" / "left-pad").mkdir(parents=True)
    (repo / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1;\n",
                                                                 encoding="utf-8")
    shas["web"] = commit_all(repo, "Cache sessions in the browser",
                             author="Bob Stone <bob@example.org>",
                             date="2026-10-05T09:00:00+00:00")
    (repo / "cmd").mkdir()
    (repo / "cmd" / "quota.go").write_text(MAIN_GO, encoding="utf-8")
    git(repo, "mv", "web/session.ts", "web/sessions.ts")
    shas["rename"] = commit_all(repo, "Parse quotas; rename the session module",
                                date="2026-11-02T08:00:00+00:00")
    return shas
