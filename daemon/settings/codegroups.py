"""The ``[code]`` settings: named groups of git repositories (decision 0030).

``groups`` maps a group name (a collection name) to repository folders. In ``config.toml``::

    [code]
    groups = { work = ["/home/me/src/api", "/home/me/src/web"], oss = ["/home/me/src/ragd"] }

In the environment, ``RAGD_CODE_GROUPS`` holds ``name=path`` entries separated by the path
separator (``:``, or ``;`` on Windows); an entry without ``name=`` adds a path to the group
before it, and a name given twice adds to that group::

    RAGD_CODE_GROUPS="work=/src/api:/src/web:oss=/src/ragd"

A JSON object (``{"work": ["/src/api"]}``) is read too.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

VENDORED = ("vendor", "vendors", "node_modules", "bower_components", "third_party",
            "third-party", "thirdparty", "external", "externals", ".venv", "venv",
            "site-packages", "Pods", "Carthage", "jspm_packages", "__pycache__", "dist",
            "build", "target", "out", ".yarn", ".pnpm-store")


def parse_groups(raw: str) -> dict[str, list[str]]:
    """``RAGD_CODE_GROUPS`` as a table: ``work=/a:/b:oss=/c`` -> {work: [/a, /b], oss: [/c]}."""
    raw = raw.strip()
    if raw.startswith("{"):
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("RAGD_CODE_GROUPS: a JSON value must be an object")
        return {str(k): [v] if isinstance(v, str) else list(v) for k, v in data.items()}
    out: dict[str, list[str]] = {}
    current: str | None = None
    for entry in raw.split(os.pathsep):
        entry = entry.strip()
        if not entry:
            continue
        name, eq, path = entry.partition("=")
        if eq and name and os.sep not in name and "/" not in name:
            current = name.strip()
            entry = path.strip()
        if current is None:
            raise ValueError(f"{entry!r} has no group: write name=path (e.g. work=/src/api)")
        out.setdefault(current, [])
        if entry:
            out[current].append(entry)
    return out


class CodeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    groups: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Code groups: a group name (a collection) -> its git repositories, e.g. "
        '{ work = ["/src/api", "/src/web"] }. RAGD_CODE_GROUPS takes name=path entries '
        "separated by the path separator; an entry without name= adds to the group before it "
        "(work=/src/api:/src/web:oss=/src/ragd). rag_index(collection=GROUP, path=REPO) adds "
        "a repository",
    )
    history_commits: int = Field(
        default=2000, ge=0, le=50000,
        description="The last this many commits reachable from HEAD are indexed, whatever "
        "their age (0: no commits)")
    history_months: int = Field(
        default=0, ge=0, le=600,
        description="Also leave out commits older than this many months (0: no age bound; "
        "history_commits alone decides)")
    max_file_kb: int = Field(
        default=1024, ge=1, le=102400,
        description="Source files larger than this (in KB) are skipped as too_large")
    max_commit_files: int = Field(
        default=300, ge=1, le=100000,
        description="At most this many files of one commit are indexed (one document each); "
        "the rest are counted in the commit's metadata")
    vendored: list[str] = Field(
        default_factory=lambda: list(VENDORED),
        description="Folder names whose files are skipped as vendored (third-party or build "
        "output)")
    backlog: str = Field(
        default="",
        description="A folder of markdown backlog notes (frontmatter id, type, state, tags) "
        "that coderag_backlog reads; empty: no backlog")

    @field_validator("groups", mode="before")
    @classmethod
    def _groups(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_groups(value)
        if isinstance(value, dict):  # a single path is a group of one
            return {k: [v] if isinstance(v, str) else v for k, v in value.items()}
        return value
