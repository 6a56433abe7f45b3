"""The README (and the hand-written pages of docs/) stay in step with the code, as the generated
docs/cli.md and docs/configuration.md do (issue 39).

- the README has at most MAX_LINES lines: the rest belongs in docs/;
- every `ragd COMMAND` it shows, in a code block or in backticks, is a real subcommand, with
  real options and, where the subcommand takes a fixed set of words (`autostart on`), one of them;
- every MCP tool it names in backticks (`rag_*`, `coderag_*`, `*_search`, or a call such as
  `rag_search(query, collection)`) is a registered tool, and a call's parameters are the tool's;
- every configuration key it names as `[section] key` or `section.key` exists (with a valid
  value when it shows one), and every `RAGD_*` variable is a key's or one the code reads;
- every relative link in the README and in docs/*.md points to an existing file, and an anchor
  into a markdown page to one of its headings (GitHub's slugs).

Only clearly-marked mentions are read: code blocks and inline code for names, links outside
code. Fast: no daemon, no model.
"""

from __future__ import annotations

import argparse
import re
import shlex
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))  # the pages, not docs/decisions/ (a record)
# The README and the hand-written pages are checked for names; cli.md and configuration.md
# are generated from the code itself.
GENERATED = {"cli.md", "configuration.md"}
NAMED = [README, *(p for p in DOCS if p.name not in GENERATED)]
MAX_LINES = 250

# Secrets (`ragd secret set NAME`) are named like configuration keys but are not keys.
SECRET_NAMES = {"mcp.http_token", "embedding.api_key"}
# `daemon.json` and the like: a file, not the key `json` of [daemon].
FILE_SUFFIXES = {"json", "toml", "sqlite", "md", "py", "log", "lock", "sock", "txt", "html",
                 "png", "db", "whl", "mcpb", "tsv", "yaml", "yml"}


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


# -- reading markdown ---------------------------------------------------------------------------
def _split(text: str) -> tuple[list[str], str]:
    """(the lines of fenced code blocks, the prose: everything else, code blocks blanked)."""
    code: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        mark = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence is None and mark:
            fence = mark.group(1)[0] * len(mark.group(1))
            prose.append("")
        elif fence is not None and line.strip().startswith(fence):
            fence = None
            prose.append("")
        elif fence is not None:
            code.append(line)
            prose.append("")
        else:
            prose.append(line)
    return code, "\n".join(prose)


SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def _spans(prose: str) -> list[str]:
    """Inline code, a span broken over two lines joined again."""
    return [" ".join(m.group(2).split()) for m in SPAN.finditer(prose)]


def _without_code(prose: str) -> str:
    return SPAN.sub("", prose)


@cache
def _parts(path: Path) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    code, prose = _split(path.read_text(encoding="utf-8"))
    return tuple(code), tuple(_spans(prose)), _without_code(prose)


# -- the code's own lists -----------------------------------------------------------------------
@cache
def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    from ragd.daemon.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, dict(sub.choices)


@cache
def _tools() -> dict[str, dict[str, Any]]:
    from ragd.mcp_bridge.tools import registered_tools

    return {t.name: t.input_schema for t in registered_tools()}


@cache
def _config_keys() -> dict[str, set[str]]:
    from ragd.daemon.settings.config import Config, config_keys

    keys: dict[str, set[str]] = {section: set() for section in Config.model_fields}
    for key in config_keys():
        keys[key.section].add(key.name)
    return keys


@cache
def _env_vars() -> set[str]:
    """Every key's variable, and every RAGD_* name the code, tests or benchmarks spell out."""
    from ragd.daemon.settings.config import config_keys

    names = {key.env_var for key in config_keys()}
    for folder in ("daemon", "mcp_bridge", "tray", "tests", "bench"):
        for source in (REPO / folder).rglob("*.py"):
            if source.resolve() != Path(__file__).resolve():
                names |= set(re.findall(r"RAGD_[A-Z0-9_]*[A-Z0-9]", source.read_text("utf-8")))
    return names


# -- (a) length ---------------------------------------------------------------------------------
def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, (
        f"README.md has {len(lines)} lines, at most {MAX_LINES}: move detail to docs/")


# -- (b) commands -------------------------------------------------------------------------------
def _placeholder(word: str) -> bool:
    """NAME, PATH, <client>, [PATH], an ellipsis: words that stand for the reader's own."""
    bare = word.strip("[]<>.,:")
    return (not bare or word.startswith(("<", "[", "{")) or "…" in word or "..." in word
            or bare.isupper() or not re.fullmatch(r"[\w.:/@~-]+", bare))


def _ragd_commands(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(the text, the words after `ragd`) of every ragd command in code blocks and spans."""
    code, spans, _ = _parts(path)
    pieces = [re.sub(r"(^|\s)#.*", "", line) for line in code] + list(spans)
    for piece in pieces:
        piece = piece.replace("\\|", "|")
        for command in re.split(r"&&|\|\||;|\s\|\s|\$\(|`", piece):
            try:
                words = shlex.split(command)
            except ValueError:
                words = command.split()
            while words and (re.match(r"[A-Z_][A-Z0-9_]*=", words[0]) or words[0] == "sudo"):
                words = words[1:]
            if words and words[0].rsplit("/", 1)[-1] == "ragd":
                yield command.strip(), words[1:]


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings}


def _command_errors(text: str, words: list[str]) -> list[str]:
    top, subs = _parser()
    if not words or _placeholder(words[0]):
        return []
    if words[0].startswith("-"):
        return [] if words[0] in _options(top) else [f"`{text}`: no option {words[0]}"]
    name = words[0]
    if name not in subs:
        return [f"`{text}`: `ragd {name}` is not a command (ragd has {', '.join(sorted(subs))})"]
    sub = subs[name]
    options = _options(sub) | _options(top)
    positionals = [a for a in sub._actions if not a.option_strings]
    choices = positionals[0].choices if positionals else None
    errors, first, rest = [], True, words[1:]
    while rest:
        word = rest.pop(0).strip("[]")
        if word.startswith("-"):
            for flag in word.split("=")[0].split("/"):
                if flag not in options:
                    errors.append(f"`{text}`: `ragd {name}` has no option {flag}")
                elif options[flag].nargs is None and "=" not in word and rest:
                    rest.pop(0)  # its value (`--method systemd`), not a positional
            continue
        if first and choices is not None and not _placeholder(word):
            wrong = [w for w in word.split("|") if w not in choices]
            if wrong:
                errors.append(f"`{text}`: `ragd {name}` takes {', '.join(map(str, choices))}, "
                              f"not {', '.join(wrong)}")
        first = False
    return errors


@pytest.mark.parametrize("path", NAMED, ids=_rel)
def test_every_ragd_command_shown_exists(path: Path) -> None:
    found = list(_ragd_commands(path))
    errors = [e for text, words in found for e in _command_errors(text, words)]
    assert not errors, "\n".join(errors)
    if path == README:
        assert {w[0] for _, w in found if w} >= {"search", "status", "open", "doctor",
                                                 "mcp-config"}, "the README lost its commands"


def test_the_command_check_catches_a_stale_command() -> None:
    assert _command_errors("ragd serach x", ["serach", "x"])
    assert _command_errors("ragd search --frobnicate", ["search", "--frobnicate"])
    assert _command_errors("ragd autostart maybe", ["autostart", "maybe"])
    assert _command_errors("ragd mcp-config emacs", ["mcp-config", "emacs"])
    assert not _command_errors("ragd autostart on|off", ["autostart", "on|off"])
    assert not _command_errors("ragd autostart --method systemd on",
                               ["autostart", "--method", "systemd", "on"])
    assert not _command_errors("ragd mcp-config CLIENT [--install]",
                               ["mcp-config", "CLIENT", "[--install]"])


# -- (c) MCP tools ------------------------------------------------------------------------------
CALL = re.compile(r"([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\((.*)\)$")
TOOL_LIKE = re.compile(r"(?:(?:rag|coderag)_[a-z0-9_]*\*?|[a-z][a-z0-9_]*_search)")


def _arguments(text: str) -> list[str]:
    """The names of a call's arguments: `query`, `collection="work"`, `section?`."""
    parts, depth, quote, current = [], 0, "", ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += ch
    parts.append(current)
    names = []
    for part in parts:
        m = re.match(r"\s*([a-z_][a-z0-9_]*)\s*(?:=|\?|$)", part)
        if m:
            names.append(m.group(1))
    return names


def _tool_errors(span: str) -> list[str]:
    tools = _tools()
    call = CALL.match(span)
    if call:
        name, args = call.groups()
        if name not in tools:
            return [f"`{span}`: no MCP tool {name}"]
        known = set(tools[name].get("properties", {}))
        return [f"`{span}`: {name} has no parameter {arg}"
                for arg in _arguments(args) if arg not in known]
    if not TOOL_LIKE.fullmatch(span):
        return []
    if span.endswith("*"):
        return [] if any(t.startswith(span[:-1]) for t in tools) else [f"`{span}`: no such tools"]
    return [] if span in tools else [f"`{span}`: no MCP tool {span}"]


@pytest.mark.parametrize("path", NAMED, ids=_rel)
def test_every_mcp_tool_named_exists(path: Path) -> None:
    errors = [e for span in _parts(path)[1] for e in _tool_errors(span)]
    assert not errors, "\n".join(errors)


def test_the_tool_check_catches_a_stale_tool() -> None:
    assert _tool_errors("rag_find")
    assert _tool_errors("vector_search")
    assert _tool_errors("rag_search(query, colection)")
    assert _tool_errors("foo_*") == [] and _tool_errors("coderag_*") == []
    assert _tool_errors("zz_*") == [] and _tool_errors("rag_zz*")
    assert not _tool_errors('rag_search("budget", source_type="email", sender="ada")')
    assert not _tool_errors("rag_read_note(path, section?)")


# -- (d) configuration --------------------------------------------------------------------------
BRACKETED = re.compile(r"\[([a-z_]+)\](?:\s+([a-z_]+))?(?:\s*=\s*(.+))?")
DOTTED = re.compile(r"([a-z_]+)\.([a-z_]+)(?:\s*=\s*(.+))?")
ENV = re.compile(r"(RAGD_[A-Z0-9_]*[A-Z0-9])(?:=.*)?")


def _check_value(section: str, key: str, value: str) -> str | None:
    from pydantic import ValidationError

    from ragd.daemon.settings.config import Config

    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return f"{value!r} is not a TOML value"
    try:
        Config.model_validate({section: {key: parsed}})
    except ValidationError as exc:
        return str(exc).splitlines()[-1].strip()
    return None


def _config_errors(span: str) -> list[str]:
    keys = _config_keys()
    m = BRACKETED.fullmatch(span)
    if m:
        section, key, value = m.groups()
        if section not in keys:
            return [f"`{span}`: no section [{section}] in config.toml"]
    else:
        m = DOTTED.fullmatch(span)
        if not m or m.group(1) not in keys or m.group(2) in FILE_SUFFIXES \
                or f"{m.group(1)}.{m.group(2)}" in SECRET_NAMES:
            env = ENV.fullmatch(span)
            if env and env.group(1) not in _env_vars():
                return [f"`{span}`: ragd reads no variable {env.group(1)}"]
            return []
        section, key, value = m.groups()
    if key is None:
        return []
    if key not in keys[section]:
        return [f"`{span}`: [{section}] has no key {key} ({', '.join(sorted(keys[section]))})"]
    problem = _check_value(section, key, value) if value else None
    return [f"`{span}`: {problem}"] if problem else []


@pytest.mark.parametrize("path", NAMED, ids=_rel)
def test_every_configuration_key_named_exists(path: Path) -> None:
    errors = [e for span in _parts(path)[1] for e in _config_errors(span)]
    assert not errors, "\n".join(errors)


def test_the_key_check_catches_a_stale_key() -> None:
    assert _config_errors("[mcp] write")
    assert _config_errors("[mpc] writes")
    assert _config_errors("search.fusion_mode")
    assert _config_errors('[embedding] backend = "torch"')
    assert _config_errors("RAGD_MCP_WRITE")
    assert not _config_errors('index.keyword_backend = "tantivy"')
    assert not _config_errors("[mcp] writes = true")
    assert not _config_errors("daemon.json") and not _config_errors("mcp.http_token")
    assert not _config_errors("RAGD_HOME") and not _config_errors("RAGD_MCP_WRITES")


# -- (e) links ----------------------------------------------------------------------------------
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def _anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _split(path.read_text(encoding="utf-8"))[1].splitlines():
        m = re.match(r"#{1,6}\s+(.+?)\s*#*\s*$", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return frozenset(out)


def _link_errors(path: Path) -> list[str]:
    errors = []
    for m in LINK.finditer(_parts(path)[2]):
        target = m.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, …
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            errors.append(f"{_rel(path)}: ({target}) points to no file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            errors.append(f"{_rel(path)}: ({target}) names no heading of {dest.name}")
        elif not dest.is_relative_to(REPO):
            errors.append(f"{_rel(path)}: ({target}) leaves the repository")
    return errors


@pytest.mark.parametrize("path", [README, *DOCS], ids=_rel)
def test_every_relative_link_resolves(path: Path) -> None:
    errors = _link_errors(path)
    assert not errors, "\n".join(errors)


def test_anchors_are_githubs() -> None:
    assert _slug("Code tools (toolset `code`)") == "code-tools-toolset-code"
    assert _slug("What is read, what is skipped") == "what-is-read-what-is-skipped"
    assert _slug("History of runs (moved from the README)") == \
        "history-of-runs-moved-from-the-readme"
