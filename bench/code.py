"""Code groups (decision 0030): files and symbols per second, commits per second, and the time
from `git commit` to keyword-searchable, on a real repository.

    python bench/code.py --repo PATH [--copy-of-folder DIR]

``--copy-of-folder`` turns a folder (a site-packages package, say) into a git repository of
one commit in a temporary place first. Prints a table and writes bench/results/code.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from ragd.daemon.settings.codegroups import CodeConfig  # noqa: E402
from ragd.daemon.sources.code import CodeKind, repo_aliases  # noqa: E402
from ragd.daemon.sources.gitlog import list_commits, read_commits  # noqa: E402


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "b@x",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "b@x"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def symbols_pass(repo: Path) -> dict[str, float]:
    kind = CodeKind(repo_aliases([str(repo)]), CodeConfig(history_months=0))
    t0 = time.perf_counter()
    walked = kind.walk(Path(repo))
    files = [f for f in walked.files if "/@commits/" not in f.path]
    lines = symbols = 0
    for f in files:
        for entry in kind.entries(Path(repo), f.path, 0):
            doc = entry.load()
            if hasattr(doc, "metadata"):
                symbols += 1
                lines += doc.metadata["end_line"] - doc.metadata["start_line"] + 1
    s = time.perf_counter() - t0
    return {"files": len(files), "symbols": symbols, "symbol_lines": lines, "seconds": s,
            "files_per_s": len(files) / s, "symbols_per_s": symbols / s,
            "skipped": len(walked.skipped)}


def commits_pass(repo: Path) -> dict[str, float]:
    t0 = time.perf_counter()
    shas = [s for s, _ in list_commits(str(repo), 1, 100_000)]
    listed = time.perf_counter() - t0
    t1 = time.perf_counter()
    n = files = 0
    for c in read_commits(str(repo), shas, max_files=300):
        n += 1
        files += len(c.files)
    s = time.perf_counter() - t1
    return {"commits": n, "commit_files": files, "list_seconds": listed, "read_seconds": s,
            "commits_per_s": n / s if s else 0.0}


def commit_to_searchable(repo: Path) -> float:
    """A daemon-like App (the sync returns once committed: keyword-searchable, vectors after)
    syncing a group's history after one new commit, as a .git/HEAD hint makes it."""
    os.environ["RAGD_HOME"] = tempfile.mkdtemp(prefix="ragd-bench-code-")
    from ragd.daemon.runtime.app import App
    from ragd.daemon.search.engine import SearchRequest
    from ragd.daemon.search.filters import Filters
    from ragd.daemon.settings.config import load_config
    from ragd.daemon.settings.paths import resolve_paths

    paths = resolve_paths()
    config = load_config(paths, {"code.groups": {"bench": [str(repo)]},
                                 "obsidian.enabled": False})
    with App(paths, config) as app:
        app.indexer.background = True
        app.sync_all()
        (repo / "bench_probe.py").write_text("def zyzzyva_probe():\n    return 1\n",
                                             encoding="utf-8")
        git(repo, "add", "bench_probe.py")
        git(repo, "commit", "-qm", "zyzzyva probe")
        t0 = time.perf_counter()
        alias = next(iter(repo_aliases([str(repo)])))
        app.sync_collection(app.collection("bench"), paths=[f"{alias}/@commits",
                                                            f"{alias}/bench_probe.py"])
        hits = app.search_engine.search(SearchRequest(
            query="zyzzyva probe", mode="keyword", top_k=5,
            filters=Filters(source_type="commit")))["results"]
        took = time.perf_counter() - t0
        assert hits, "the new commit was not found"
    return took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", type=Path)
    ap.add_argument("--copy-of-folder", type=Path)
    args = ap.parse_args()
    tmp = None
    repo = args.repo
    if args.copy_of_folder:
        tmp = Path(tempfile.mkdtemp(prefix="ragd-bench-repo-"))
        repo = tmp / args.copy_of_folder.name
        shutil.copytree(args.copy_of_folder, repo, ignore=shutil.ignore_patterns("__pycache__"))
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "snapshot")
    assert repo is not None, "--repo or --copy-of-folder"
    work = Path(tempfile.mkdtemp(prefix="ragd-bench-clone-")) / repo.name
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
    out = {"repo": str(repo), "symbols": symbols_pass(work), "commits": commits_pass(work),
           "commit_to_searchable_s": commit_to_searchable(work)}
    s, c = out["symbols"], out["commits"]
    print(f"| repo | files | symbols | lines in symbols | files/s | symbols/s | commits | "
          f"commits/s | commit -> searchable |\n|---|---|---|---|---|---|---|---|---|\n"
          f"| {repo.name} | {s['files']} | {s['symbols']} | {s['symbol_lines']} | "
          f"{s['files_per_s']:.0f} | {s['symbols_per_s']:.0f} | {c['commits']} | "
          f"{c['commits_per_s']:.0f} | {out['commit_to_searchable_s']:.2f} s |")
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    (results / "code.json").write_text(json.dumps(out, indent=2), encoding="utf-8")
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
