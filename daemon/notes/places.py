"""Which vault a note tool works on, and which vault-relative paths it may name.

Paths are vault-relative and '/'-separated, as in the tool references (001, 004). A path is
refused by its text before anything is looked at when it is absolute, climbs out with ``..``,
names a hidden file or folder (``.obsidian/``, ``.trash/``, ``.git/``) or one of ``[index]
exclude``: none of those are notes of the vault, and nothing is ever written there. Where a
path leads once links are followed is checked against the vault's real root by the reader
(``ragd.daemon.sources.containment``) and the writer (``ragd.daemon.notes.writing``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import Any

from ragd.daemon.errors import InvalidArgument, PathRefused
from ragd.daemon.ipc.protocol import MAX_PATH_CHARS

VAULT_HINT = "call without `vault` to use the default vault, or name one rag_list_collections " \
             "lists with type system and a vault description (obsidian, obsidian-<name>)"


class WriteRefused(PathRefused):
    """A write that would lose someone's change or cannot be done as asked: ``code`` says
    which (``etag_mismatch``, ``exists``, ``no_match``, ``many_matches``, ``writes_off``,
    ``too_large``, ``not_text``; decisions 0028 and 0045)."""

    code = "write_refused"


def vault_collection(catalog: Any, name: str | None) -> Any:
    """The vault collection named ``name``, or the default one: ``obsidian`` if it is a vault,
    else the first vault registered."""
    vaults = [c for c in catalog.collections() if c.kind == "vault"]
    if name:
        found = next((c for c in vaults if c.name == name), None)
        if found is None:
            known = ", ".join(c.name for c in vaults) or "none"
            raise InvalidArgument("vault", f"{name!r} is not an indexed vault (vaults: {known})",
                                  VAULT_HINT)
        return found
    if not vaults:
        raise InvalidArgument("vault", "no Obsidian vault is indexed",
                              "add the vault folder to [obsidian] vaults in config.toml "
                              "(or RAGD_OBSIDIAN_VAULTS) and restart ragd")
    return next((c for c in vaults if c.name == "obsidian"), vaults[0])


def clean_rel(value: Any, param: str, exclude: Sequence[str] = (), *, allow_root: bool = False
              ) -> str:
    """A vault-relative path as the tools take it: '/'-separated, no '..', not absolute, no
    hidden or excluded component. '' (the vault's root) only with ``allow_root``."""
    if not isinstance(value, str):
        raise InvalidArgument(param, f"must be a string, got {type(value).__name__}",
                              "pass a path relative to the vault, e.g. \"Projects/Plan.md\"")
    if len(value) > MAX_PATH_CHARS:
        raise InvalidArgument(param, f"is too long ({len(value):,} characters; at most "
                              f"{MAX_PATH_CHARS:,})", "pass a shorter path")
    if "\x00" in value:
        raise PathRefused(param, "contains a NUL character", "pass a plain path",
                          code="nul_in_path")
    raw = value.strip().replace("\\", "/")
    hint = "pass a path relative to the vault's root, e.g. \"Projects/Plan.md\""
    if raw.startswith(("/", "~")) or (len(raw) > 1 and raw[1] == ":"):
        raise PathRefused(param, f"{value!r} is absolute; note paths are relative to the vault",
                          hint, code="outside_vault")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PathRefused(param, f"{value!r} climbs out with '..'", hint, code="outside_vault")
    for part in parts:
        if part.startswith("."):
            raise PathRefused(param, f"{value!r} is in a hidden folder or file ({part}); "
                              "Obsidian's settings (.obsidian), its trash and .git are not "
                              "notes", "name a note of the vault", code="hidden_path")
        if part in exclude:
            raise PathRefused(param, f"{value!r} is in {part!r}, which [index] exclude leaves "
                              "out of the vault", "name a note of the vault",
                              code="excluded_path")
    rel = posixpath.join(*parts) if parts else ""
    if not rel and not allow_root:
        raise InvalidArgument(param, "is empty", hint)
    return rel


def note_rel(value: Any, param: str, exclude: Sequence[str] = ()) -> str:
    """A note's path: ``.md`` is added when it does not end so (Obsidian's notes are .md)."""
    rel = clean_rel(value, param, exclude)
    return rel if rel.lower().endswith(".md") else rel + ".md"
