"""`ragd doctor`: check each part a user can get wrong, and say how to fix it."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from ragd.daemon import __version__


def _check(name: str, status: str, detail: str, hint: str = "") -> dict[str, Any]:
    return {"name": name, "status": status, "detail": detail, "hint": hint}


def run_checks() -> list[dict[str, Any]]:
    """Every check, in the order a person would debug: config, vaults, model, indexes."""
    from ragd.daemon.errors import RagdError
    from ragd.daemon.settings.paths import resolve_paths

    checks = [_check("ragd", "ok", f"ragd {__version__}, Python {sys.version.split()[0]}")]
    paths = resolve_paths()
    try:
        from ragd.daemon.settings.config import load_config

        config = load_config(paths)
        checks.append(_check("config", "ok", str(paths.config_file)))
    except RagdError as exc:
        return checks + [_check("config", "fail", exc.message, exc.hint)]
    checks += _vault_checks(config, paths)
    checks += _mail_checks(config)
    from ragd.daemon.settings.feedreaders import rss_checks

    checks += [_check(*c) for c in rss_checks(config, sys.platform, os.environ, Path.home(),
                                              config_hint())]
    checks += _model_checks(config, paths)
    checks += _index_checks(paths, config)
    checks.append(mcp_check(config.mcp))
    checks += tray_checks(config.tray.backend)
    return checks


def mcp_check(mcp: Any) -> dict[str, Any]:
    """Which tools an MCP client sees and why (issue 37): the bridge's own choice."""
    from ragd.mcp_bridge.offer import describe, offer

    o = offer(mcp)
    hint = ("choose with [mcp] toolsets, writes, tools_allow and tools_deny in config.toml "
            "(docs/mcp.md, Choosing the tools); a client reads them when it starts ragd-mcp")
    status = "warn" if o.unknown or not o.tools else "ok"
    return _check("mcp tools", status, describe(o), hint if status == "warn" else "")


def _indexed_vaults(paths: Any) -> list[Path]:
    """The vaults the catalog already indexes (they stay in use until configured otherwise)."""
    import sqlite3

    if not Path(paths.catalog_path).exists():
        return []
    db = sqlite3.connect(f"file:{paths.catalog_path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT root FROM collections WHERE kind='vault' ORDER BY id").fetchall()
    except sqlite3.Error:
        return []
    finally:
        db.close()
    return [Path(r[0]) for r in rows]


def _vault_checks(config: Any, paths: Any) -> list[dict[str, Any]]:
    from ragd.daemon.runtime.app import vault_roots

    roots = ([Path(v).expanduser() for v in config.obsidian.vaults]
             or _indexed_vaults(paths) or vault_roots(config))
    if not roots:
        return [_check("vault", "warn", "no vault configured and none found in obsidian.json",
                       "run `ragd index /path/to/vault` or set [obsidian] vaults in config.toml")]
    out = []
    for root in roots:
        if root.is_dir():
            notes = sum(1 for _ in root.rglob("*.md"))
            out.append(_check("vault", "ok", f"{root} ({notes:,} notes)"))
        else:
            out.append(_check("vault", "fail", f"{root} does not exist",
                              "fix [obsidian] vaults in config.toml"))
    return out


def _mail_checks(config: Any) -> list[dict[str, Any]]:
    """Configured mail folders, or the Thunderbird folders found, offered (never indexed)."""
    from ragd.daemon.settings.mailfolders import discover_mail_folders

    configured = [Path(p).expanduser() for p in config.email.paths]
    if configured and config.email.enabled:
        out = []
        for path in configured:
            if path.exists():
                out.append(_check("email", "ok", str(path)))
            else:
                out.append(_check("email", "fail", f"{path} does not exist",
                                  "fix [email] paths in config.toml"))
        return out
    found = discover_mail_folders(sys.platform, os.environ, Path.home())
    if not found:
        return [_check("email", "ok", "no mail configured ([email] paths is empty)")]
    shown = ", ".join(f'"{p}"' for p in found[:5]) + (" …" if len(found) > 5 else "")
    return [_check("email", "ok", f"not indexed; Thunderbird folders found: {shown}",
                   f"to search them, add them to [email] paths in {config_hint()}")]


def config_hint() -> str:
    from ragd.daemon.settings.paths import resolve_paths

    return str(resolve_paths().config_file)


class _Warnings(logging.Handler):
    """Collects the warnings a logger gives meanwhile (the embedder's fallback reason)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _model_checks(config: Any, paths: Any) -> list[dict[str, Any]]:
    """Load the model as the daemon does (``make_embedder``: the configured backend, its
    fallback included) and embed one text; name the backend that answered."""
    from ragd.daemon.embed.embedding import make_embedder
    from ragd.daemon.embed.model import REFERENCE_HINT, SENTENCE_TRANSFORMERS

    model, configured = config.embedding.model, config.embedding.backend
    caught = _Warnings()
    logger = logging.getLogger("ragd.daemon.embed.embedding")
    logger.addHandler(caught)
    try:
        emb = make_embedder(config.embedding, paths.data_dir)
        vec = emb.embed(["ragd doctor"])
    except Exception as exc:  # any failure to load is the finding itself
        return [_check("model", "fail", f"{model} on {configured}: {exc}",
                       "install ragd with `make setup`, or set [embedding] model to a local "
                       f"sentence-transformers folder; {REFERENCE_HINT}")]
    finally:
        logger.removeHandler(caught)
    backend = str(getattr(emb, "backend", SENTENCE_TRANSFORMERS))
    detail = (f"{model} on {backend}: {vec.shape[1]} dimensions, {emb.max_tokens} tokens, "
              f"{getattr(emb, 'threads', '?')} threads")
    if backend.split("/")[0] != configured:
        why = caught.messages[-1] if caught.messages else f"see {paths.log_file}"
        return [_check("model", "warn", f"{detail} (configured: {configured})", why)]
    return [_check("model", "ok", detail)]


def _index_checks(paths: Any, config: Any) -> list[dict[str, Any]]:
    if not Path(paths.catalog_path).exists():
        return [_check("index", "warn", "nothing indexed yet", "run `ragd index`")]
    from ragd.daemon.runtime.app import App

    with App(paths, config) as app:
        c = app.consistency()
        colls = app.catalog.collections()
        out = []
        for coll in colls:
            st = app.catalog.collection_stats(coll.id)
            out.append(_check(f"collection {coll.name}", "ok",
                              f"{st['source_count']:,} sources, {st['chunk_count']:,} chunks, "
                              f"{st['skipped_count']:,} skipped ({coll.root})"))
    if c["ok"]:
        out.append(_check("indexes", "ok", f"catalog, FAISS and Whoosh agree on "
                          f"{c['catalog']:,} chunks"))
    else:
        out.append(_check("indexes", "fail", f"indexes disagree with the catalog: {c}",
                          "run `ragd index --rebuild`"))
    return out


def tray_checks(configured: str, desktop: Any = None) -> list[dict[str, Any]]:
    """The tray backend this session would get, and the system packages a menu still needs."""
    from ragd.tray import backend_choice

    desktop = desktop or backend_choice.probe()
    choice = backend_choice.choose(configured, desktop)
    if desktop.platform in ("darwin", "win32"):
        return [_check("tray", "ok", f"{choice.backend}: menu available")]
    setting = f"[tray] backend = {configured}"
    lacking = ", ".join([*choice.missing] + ([] if desktop.gi else ["PyGObject in this Python"]))
    if not desktop.display:
        where = "no display here: the tray chooses when it starts in a desktop session"
        if choice.install:
            return [_check("tray", "warn", f"{where}; it would have no menu: missing "
                           f"{lacking} ({setting})", choice.install)]
        return [_check("tray", "ok", f"{where}; menus available ({setting})")]
    detail = f"{choice.backend} ({choice.reason}; {setting})"
    if choice.menus:
        return [_check("tray", "ok", detail)]
    return [_check("tray", "warn", f"{detail}: missing {lacking}" if lacking else detail,
                   choice.install or ("set [tray] backend = auto for a menu"
                                      if configured == "xorg" else
                                      "start a panel with a system tray"))]
