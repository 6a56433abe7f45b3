"""The note tools through the real MCP client, `ragd-mcp` and one real daemon (decision 0028).

The omni and vault toolsets are compared with references 001 and 004 as written: their tool
names, parameters and defaults are read from the two files, and each tool is called on a
generated vault and must return the fields its reference documents. ragd's own notes tools,
the writes (searchable within 2 s, stale etags, refusals) and the rename's link rewriting are
checked on the same daemon.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
import daemon_proc
import mcp.types as types
import pytest
import shared_data
from daemon_proc import DaemonProc
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from ragd.daemon.errors import RagdError
from ragd.daemon.settings.paths import resolve_paths

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform == "win32", reason="symbolic links")]

BRIDGE = Path(sys.executable).parent / "ragd-mcp"
REFERENCES = shared_data.REFERENCE
ALL_TOOLSETS = "search,index,notes,omni,vault"
EXTRA_PARAMS = {"vault", "if_match"}  # what ragd adds to a reference's parameters

NOTES = {
    "Home.md": "---\ntags: [hub]\naliases: [Start]\nstatus: active\n---\n# Home\n\nWelcome. "
               "See [[Projects/Plan]] and [[Recipes/Sourdough#Levain|levain]].\n\n## Daily\n\n"
               "The journal: [[Journal/2024-01-01]].\n",
    "Projects/Plan.md": "---\nstatus: draft\n---\n# Plan\n\nThe plan for the garden shed. "
                        "#project\n\n## Budget\n\nWood and nails cost 300 euros.\n\n"
                        "## Timeline\n\nBuild it in spring. Back to [[Home]].\n",
    "Recipes/Sourdough.md": "# Sourdough\n\n## Levain\n\nFeed the levain with flour and water "
                            "every day; a ripe levain doubles and smells sour.\n\n## Bake\n\n"
                            "Bake the loaf at 250 degrees in a covered pot.\n",
    "Recipes/Bread notes.md": "# Bread notes\n\nMy levain doubled overnight: feeding the "
                              "starter flour and water daily keeps it sour and strong. #baking\n",
    "Journal/2024-01-01.md": "# 2024-01-01\n\nWorked on the [[Plan]]. Baked bread, see "
                             "![[Sourdough]].\n",
    "Old.md": "# Old\n\n## Heading\n\nThe quokkaoldword lives here.\n",
    "Linker.md": "# Linker\n\n[[Old]] and [[Old|alias]] and [[Old#Heading]] and ![[Old]] "
                 "and [[Plan]] and [o](Old.md).\n",
    "Bystander.md": "# Bystander\n\nNothing here links to that note. [[Plan]]\n",
}


@dataclass
class Env:
    root: Path
    home: Path
    vault: Path
    daemon: DaemonProc

    def set_writes(self, on: bool) -> None:
        config = resolve_paths({"RAGD_HOME": str(self.home)}).config_file
        config.write_text(f"[mcp]\ntoolsets = {json.dumps(ALL_TOOLSETS.split(','))}\n"
                          f"writes = {'true' if on else 'false'}\n", encoding="utf-8")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("notes")
    vault = root / "vault"
    for rel, text in NOTES.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text, encoding="utf-8")
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian" / "app.json").write_text("{}", encoding="utf-8")
    (root / "outside.md").write_text("# Outside\n\nsecret outsideword\n", encoding="utf-8")
    (vault / "Away").symlink_to(root, target_is_directory=True)  # a folder link out
    home = root / "home"
    config = resolve_paths({"RAGD_HOME": str(home)}).config_file
    config.parent.mkdir(parents=True)
    e = Env(root, home, vault, DaemonProc(home, vault, root / "daemon.log"))
    e.set_writes(True)
    e.daemon.start()
    daemon_proc.STARTED.remove(e.daemon)  # stopped at the end of the module
    try:
        e.daemon.wait_idle()
        yield e
    finally:
        e.daemon.stop()


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    path = tmp_path / "bridge.log"
    with open(path, "w+", encoding="utf-8") as log:
        yield log
    assert "Traceback" not in path.read_text(encoding="utf-8")


@asynccontextmanager
async def bridge(env: Env, errlog: TextIO) -> AsyncIterator[ClientSession]:
    variables = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    params = StdioServerParameters(command=str(BRIDGE), env={
        **variables, "RAGD_HOME": str(env.home), "HF_HUB_OFFLINE": "1"})
    async with stdio_client(params, errlog=errlog) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def session_run(env: Env, errlog: TextIO, fn: Any) -> Any:
    async def run() -> Any:
        async with bridge(env, errlog) as session:
            return await fn(session)

    return anyio.run(run)


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def ok(result: types.CallToolResult) -> Any:
    assert not result.isError, text(result)
    return json.loads(text(result))


def refused(result: types.CallToolResult, code: str) -> str:
    message = text(result)
    assert result.isError and f"({code})" in message, message
    assert "internal error" not in message.lower(), message
    return message


# -- the references, as written -----------------------------------------------------------------
_TYPES = {"string": "string", "integer": "integer", "int": "integer", "boolean": "boolean",
          "bool": "boolean", "float": "number", "number": "number", "object": "object"}


def _value(raw: str) -> Any:
    raw = raw.strip().strip("`")
    if raw in ("null", "None"):
        return None
    if raw in ("True", "true", "False", "false"):
        return raw.lower() == "true"
    try:
        return json.loads(raw)
    except ValueError:
        return raw


@dataclass(frozen=True)
class Param:
    type: str
    required: bool
    default: Any


def reference_001() -> tuple[dict[str, dict[str, Param]], dict[str, list[str]]]:
    path = next(REFERENCES.glob("001_*"), None)
    if path is None:
        pytest.skip(f"reference 001 not found in {REFERENCES}")
    tools: dict[str, dict[str, Param]] = {}
    fields: dict[str, list[str]] = {}
    for section in re.split(r"^## ", path.read_text(encoding="utf-8"), flags=re.M)[1:]:
        name = re.match(r"`(\w+)`", section)
        if not name:
            continue
        params, _, returns = section.partition("### Return Structure")
        tools[name.group(1)] = {
            m.group(1): Param(_TYPES[m.group(2)], m.group(3) == "required",
                              _value(d.group(1)) if (d := re.search(r"Default: (`[^`]*`)",
                                                                    m.group(4))) else None)
            for m in re.finditer(r"^- `(\w+)` \((\w+), (required|optional)\): (.*)$", params,
                                 flags=re.M)}
        fields[name.group(1)] = re.findall(r"^- `(\w+)`", returns, flags=re.M)
    return tools, fields


def reference_004() -> tuple[dict[str, dict[str, Param]], dict[str, list[str]]]:
    path = next(REFERENCES.glob("004_*"), None)
    if path is None:
        pytest.skip(f"reference 004 not found in {REFERENCES}")
    tools: dict[str, dict[str, Param]] = {}
    fields: dict[str, list[str]] = {}
    sections = re.split(r"^([a-z_]+)¶$", path.read_text(encoding="utf-8"), flags=re.M)
    for name, body in zip(sections[1::2], sections[2::2], strict=True):
        params: dict[str, Param] = {}
        table = re.search(r"^\| Parameter \|(.*?)\n\|[-|]+\|\n(.*?)\nReturns:", body,
                          flags=re.M | re.S)
        if table:
            columns = ["Parameter", *(c.strip() for c in table.group(1).split("|")
                                      if c.strip())]
            cells = [c.strip() for c in table.group(2).split("|")]
            cells = [c for c in cells if c != ""]
            for row in zip(*[iter(cells)] * len(columns), strict=False):
                cell = dict(zip(columns, row, strict=True))
                default = cell.get("Default")
                optional = default is not None and default != "required" or \
                    re.search(r"\bOptional\b|Required when", cell["Description"]) is not None
                params[cell["Parameter"]] = Param(
                    _TYPES[cell["Type"]], not optional,
                    _value(default) if default not in (None, "required") else None)
        tools[name] = params
        returns = re.split(r"\n(?:Choosing|Example|When to use|Usage pattern|Warning|Danger)",
                           body.partition("Returns:")[2])[0]
        found = re.findall(r'"(\w+)":', returns)
        each = re.search(r"Each contains: ([\w, ]+)", returns)
        found += [f.strip() for f in each.group(1).split(",")] if each else []
        found += ["kind"] if "kind field" in returns else []
        fields[name] = list(dict.fromkeys(found))
    return tools, fields


def _schema_param(prop: dict[str, Any]) -> tuple[str, Any]:
    kind = prop.get("type") or next(p["type"] for p in prop["anyOf"] if p["type"] != "null")
    return kind, prop.get("default")


def test_both_references_are_listed_with_their_parameters_and_defaults(
        env: Env, errlog: TextIO) -> None:
    omni, _ = reference_001()
    vault, _ = reference_004()
    assert len(omni) == 10 and len(vault) == 13  # every tool the references document

    async def listing(session: ClientSession) -> list[types.Tool]:
        return (await session.list_tools()).tools

    tools = {t.name: t for t in session_run(env, errlog, listing)}
    for reference in (omni, vault):
        for name, params in reference.items():
            assert name in tools, f"{name} is not listed"
            schema = tools[name].inputSchema
            assert set(schema["properties"]) - set(params) <= EXTRA_PARAMS, name
            for pname, param in params.items():
                assert pname in schema["properties"], f"{name}.{pname}"
                kind, default = _schema_param(schema["properties"][pname])
                assert kind == param.type, f"{name}.{pname}: {kind} != {param.type}"
                assert (pname in schema["required"]) == param.required, f"{name}.{pname}"
                if not param.required:
                    assert default == param.default, f"{name}.{pname}: {default!r}"
            assert set(schema["required"]) <= set(params), name
    notes = {"rag_read_note", "rag_note_context", "rag_list_notes", "rag_list_folders",
             "rag_list_tags", "rag_suggest_links"}
    assert notes <= set(tools)
    for name, tool in tools.items():  # MCP hygiene: every tool says what it does to the vault
        a = tool.annotations
        assert a is not None and a.readOnlyHint is not None, name
        assert a.destructiveHint is not None and a.idempotentHint is not None, name
    assert tools["read_note"].annotations.readOnlyHint  # type: ignore[union-attr]
    assert tools["delete"].annotations.destructiveHint  # type: ignore[union-attr]
    assert not tools["append_to_note"].annotations.idempotentHint  # type: ignore[union-attr]


def test_every_reference_tool_returns_its_documented_fields(env: Env, errlog: TextIO) -> None:
    _, omni_fields = reference_001()
    _, vault_fields = reference_004()
    calls: list[tuple[str, dict[str, Any]]] = [
        ("semantic_search", {"query": "levain flour water"}),
        ("suggest_links", {"note_path": "Recipes/Bread notes.md", "min_similarity": 0.1}),
        ("index_note", {"note_path": "Projects/Plan.md"}),
        ("search_notes", {"pattern": "recipes/"}),
        ("read_note", {"note_path": "Home.md"}),
        ("write_note", {"note_path": "Compat/Omni new.md", "content": "# Omni\n\nomniword\n"}),
        ("append_to_note", {"note_path": "Compat/Omni new.md", "content": "more omniword"}),
        ("delete_note", {"note_path": "Compat/Omni new.md"}),
        ("get_index_stats", {}),
        ("get_vault_structure", {"depth": 2}),
        ("search", {"query": "garden shed", "filters": {"status": "draft"}}),
        ("read", {"path": "Projects/Plan.md"}),
        ("list_documents", {"folder": "Recipes"}),
        ("list_folders", {}),
        ("list_tags", {}),
        ("stats", {}),
        ("embeddings_status", {}),
        ("reindex", {}),
        ("build_embeddings", {}),
        ("write", {"path": "Compat/Vault new.md", "content": "vaultword body",
                   "frontmatter": {"tags": ["compat"]}}),
        ("edit", {"path": "Compat/Vault new.md", "old_text": "vaultword",
                  "new_text": "vaultword edited"}),
        ("rename", {"old_path": "Compat/Vault new.md", "new_path": "Compat/Vault moved.md"}),
        ("delete", {"path": "Compat/Vault moved.md"}),
    ]

    async def run(session: ClientSession) -> list[Any]:
        return [ok(await session.call_tool(name, args)) for name, args in calls]

    answers = dict(zip([c[0] for c in calls], session_run(env, errlog, run), strict=True))
    documented = {**omni_fields, **vault_fields}
    assert set(answers) == set(documented)  # every tool of both references was called
    for name, answer in answers.items():
        rows = answer if isinstance(answer, list) else [answer]
        if name in ("search_notes", "list_folders", "list_tags"):
            assert rows and all(isinstance(r, str) for r in rows), (name, answer)
            continue
        if name == "get_vault_structure":
            assert answer["Recipes"] == {"Bread notes.md": "file", "Sourdough.md": "file"}
            continue
        assert rows, f"{name} returned nothing"
        for row in rows:
            missing = [f for f in documented[name] if f not in row]
            assert not missing, f"{name} lacks {missing}: {row}"
    assert answers["read_note"]["metadata"]["wikilinks"] == ["Journal/2024-01-01",
                                                             "Projects/Plan",
                                                             "Recipes/Sourdough"]
    assert answers["search"][0]["path"] == "Projects/Plan.md"
    assert answers["search_notes"] == ["Recipes/Bread notes.md", "Recipes/Sourdough.md"]
    assert answers["list_folders"] == ["", "Compat", "Journal", "Projects", "Recipes"] or \
        answers["list_folders"] == ["", "Journal", "Projects", "Recipes"]
    assert "hub" in answers["list_tags"] and "project" in answers["list_tags"]
    assert answers["suggest_links"][0]["file_path"] == "Recipes/Sourdough.md"
    assert answers["suggest_links"][0]["suggested_link"] == "[[Sourdough#Levain]]"
    assert answers["write_note"]["was_created"] and answers["delete_note"]["deleted"]
    assert answers["edit"] == {"path": "Compat/Vault new.md", "replacements": 1}


def test_notes_tools_read_sections_links_backlinks_and_context(env: Env,
                                                               errlog: TextIO) -> None:
    async def run(session: ClientSession) -> list[Any]:
        home = ok(await session.call_tool("rag_read_note", {"path": "Home"}))
        plan = ok(await session.call_tool("rag_read_note", {"path": "projects/plan.md",
                                                            "section": "Budget"}))
        hits = ok(await session.call_tool("rag_search", {"query": "nails cost euros"}))
        chunk = hits["results"][0]["metadata"]["chunk_id"]
        context = ok(await session.call_tool("rag_note_context", {"chunk_id": chunk}))
        tags = ok(await session.call_tool("rag_list_tags", {}))
        folders = ok(await session.call_tool("rag_list_folders", {}))
        listed = ok(await session.call_tool("rag_list_notes", {"tag": "baking"}))
        globbed = ok(await session.call_tool("rag_list_notes", {"glob": "Recipes/*"}))
        return [home, plan, context, tags, folders, listed, globbed]

    home, plan, context, tags, folders, listed, globbed = session_run(env, errlog, run)
    assert home["path"] == "Home.md" and home["frontmatter"]["status"] == "active"
    assert home["aliases"] == ["Start"] and "hub" in home["tags"]
    assert {(lk["target"], lk["heading"], lk["alias"], lk["path"]) for lk in home["links"]} == {
        ("Projects/Plan", "", "", "Projects/Plan.md"),
        ("Recipes/Sourdough", "Levain", "levain", "Recipes/Sourdough.md"),
        ("Journal/2024-01-01", "", "", "Journal/2024-01-01.md")}
    assert [b["path"] for b in home["backlinks"]] == ["Projects/Plan.md"]
    assert len(home["etag"]) == 64
    assert plan["section"]["heading"] == "Budget" and plan["content"].startswith("## Budget")
    assert "Timeline" not in plan["content"]
    assert {b["path"] for b in plan["backlinks"]} >= {"Home.md", "Journal/2024-01-01.md",
                                                      "Linker.md", "Bystander.md"}
    assert context["path"] == "Projects/Plan.md" and any(c["hit"] for c in context["chunks"])
    assert {"tag": "project", "count": 1} in tags["tags"]
    assert {"folder": "Recipes", "notes": 2, "notes_below": 2} in folders["folders"]
    assert [n["path"] for n in listed["notes"]] == ["Recipes/Bread notes.md"]
    assert [n["path"] for n in globbed["notes"]] == ["Recipes/Bread notes.md",
                                                     "Recipes/Sourdough.md"]


def _searchable(env: Env, word: str, present: bool, deadline: float) -> float:
    t0 = time.monotonic()
    while True:
        hits = env.daemon.call("search", {"query": word, "mode": "keyword"})["results"]
        found = any(word in h["content"] for h in hits)
        if found == present:
            return time.monotonic() - t0
        if time.monotonic() - t0 > deadline:
            raise AssertionError(f"{word!r} {'not found' if present else 'still found'}")
        time.sleep(0.05)


def test_writes_are_searchable_within_2_s_and_stale_etags_change_nothing(
        env: Env, errlog: TextIO) -> None:
    async def run(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        t0 = time.monotonic()
        made = ok(await session.call_tool("rag_write_note", {
            "path": "Writes/Fresh", "content": "# Fresh\n\nThe zebrawrite word.\n"}))
        out["write"] = (made, _searchable(env, "zebrawrite", True, 2) + time.monotonic() - t0)
        t0 = time.monotonic()
        edited = ok(await session.call_tool("rag_edit_note", {
            "path": "Writes/Fresh.md", "old_text": "zebrawrite", "new_text": "okapiedit",
            "if_match": made["etag"]}))
        out["edit"] = (_searchable(env, "okapiedit", True, 2) + time.monotonic() - t0,
                       _searchable(env, "zebrawrite", False, 2))
        t0 = time.monotonic()
        ok(await session.call_tool("rag_append_note", {"path": "Writes/Fresh.md",
                                                      "content": "The lemurappend word."}))
        out["append"] = _searchable(env, "lemurappend", True, 2) + time.monotonic() - t0
        before = (env.vault / "Writes" / "Fresh.md").read_bytes()
        out["stale"] = await session.call_tool("rag_edit_note", {
            "path": "Writes/Fresh.md", "old_text": "okapiedit", "new_text": "x",
            "if_match": edited["etag"]})
        out["blind"] = await session.call_tool("rag_write_note", {
            "path": "Writes/Fresh.md", "content": "overwritten"})
        out["twice"] = await session.call_tool("rag_edit_note", {
            "path": "Writes/Fresh.md", "old_text": "word", "new_text": "x"})
        out["near"] = await session.call_tool("rag_edit_note", {
            "path": "Writes/Fresh.md", "old_text": "The Lemurappend  word", "new_text": "x"})
        out["unchanged"] = (env.vault / "Writes" / "Fresh.md").read_bytes() == before
        return out

    out = session_run(env, errlog, run)
    made, seconds = out["write"]
    assert made["created"] and made["chunks_indexed"] >= 1 and seconds < 2.0
    assert out["edit"][0] < 2.0 and out["edit"][1] < 2.0 and out["append"] < 2.0
    refused(out["stale"], "etag_mismatch")
    refused(out["blind"], "exists")
    assert "2 times" in refused(out["twice"], "many_matches")
    assert "other letter case" in refused(out["near"], "no_match") or \
        "closest text" in text(out["near"])
    assert out["unchanged"]
    print(f"write {seconds:.2f} s, edit {out['edit'][0]:.2f} s, append {out['append']:.2f} s")


def test_rename_rewrites_every_link_to_the_note_and_nothing_else(env: Env,
                                                                 errlog: TextIO) -> None:
    bystander = (env.vault / "Bystander.md").read_bytes()

    async def run(session: ClientSession) -> Any:
        t0 = time.monotonic()
        answer = ok(await session.call_tool("rag_rename_note", {
            "old_path": "Old.md", "new_path": "Archive/Renamed.md"}))
        return answer, _searchable(env, "quokkaoldword", True, 2) + time.monotonic() - t0

    answer, seconds = session_run(env, errlog, run)
    linker = (env.vault / "Linker.md").read_text(encoding="utf-8")
    assert linker == ("# Linker\n\n[[Renamed]] and [[Renamed|alias]] and [[Renamed#Heading]] "
                      "and ![[Renamed]] and [[Plan]] and [o](Archive/Renamed.md).\n")
    assert (env.vault / "Bystander.md").read_bytes() == bystander
    assert not (env.vault / "Old.md").exists()
    assert answer["links_updated"] == 5 and answer["notes_updated"] == [
        {"path": "Linker.md", "links": 5}]
    hits = env.daemon.call("search", {"query": "quokkaoldword", "mode": "keyword"})["results"]
    assert [h["source_path"] for h in hits] == [str(env.vault / "Archive" / "Renamed.md")]
    assert seconds < 2.0


def test_paths_out_of_the_vault_and_into_obsidian_are_refused(env: Env,
                                                              errlog: TextIO) -> None:
    cases = [("rag_write_note", {"path": "../escape.md", "content": "x"}, "outside_vault"),
             ("rag_write_note", {"path": str(env.root / "abs.md"), "content": "x"},
              "outside_vault"),
             ("rag_write_note", {"path": "Away/outside.md", "content": "x"}, "outside_root"),
             ("rag_write_note", {"path": ".obsidian/x.md", "content": "x"}, "hidden_path"),
             ("rag_read_note", {"path": "Away/outside.md"}, "outside_root"),
             ("read", {"path": ".obsidian/app.json"}, "hidden_path"),
             ("rename", {"old_path": "Home.md", "new_path": ".obsidian/Home.md"},
              "hidden_path"),
             ("rename", {"old_path": "Home.md", "new_path": "../Home.md"}, "outside_vault")]

    async def run(session: ClientSession) -> list[types.CallToolResult]:
        return [await session.call_tool(name, args) for name, args, _ in cases]

    for (_, _, code), result in zip(cases, session_run(env, errlog, run), strict=True):
        refused(result, code)
    assert not (env.root / "escape.md").exists() and not (env.root / "abs.md").exists()
    assert (env.root / "outside.md").read_text(encoding="utf-8").startswith("# Outside")
    assert sorted(p.name for p in (env.vault / ".obsidian").iterdir()) == ["app.json"]
    assert (env.vault / "Home.md").exists()


def test_with_writes_off_no_write_tool_is_listed_and_a_direct_call_is_refused(
        env: Env, errlog: TextIO) -> None:
    env.set_writes(False)
    try:
        async def listing(session: ClientSession) -> list[types.Tool]:
            return (await session.list_tools()).tools

        names = {t.name for t in session_run(env, errlog, listing)}
        with pytest.raises(RagdError, match="writes_off|writing to the vault is off"):
            env.daemon.call("note_write", {"path": "Off.md", "content": "x"})
    finally:
        env.set_writes(True)
    writes = {"write_note", "append_to_note", "delete_note", "write", "edit", "delete",
              "rename", "rag_write_note", "rag_edit_note", "rag_append_note",
              "rag_rename_note", "rag_delete_note"}
    assert not names & writes and "read_note" in names and "read" in names
    assert not (env.vault / "Off.md").exists()


def test_a_missing_folder_or_an_unknown_field_is_said_not_answered_empty(
        env: Env, errlog: TextIO) -> None:
    """Issue 37: get_vault_structure on a missing folder and list_tags on a field no note
    has answered empty, which reads as "nothing there yet"."""
    async def run(session: ClientSession) -> list[types.CallToolResult]:
        return [await session.call_tool("get_vault_structure", {"root_path": "No/Such"}),
                await session.call_tool("list_tags", {"field": "zqxnosuchfield"}),
                await session.call_tool("list_tags", {}),
                await session.call_tool("get_vault_structure", {})]

    missing, unknown, tags, tree = session_run(env, errlog, run)
    assert "No/Such" in refused(missing, "not_found")
    message = text(unknown)
    assert unknown.isError and "Invalid argument `field` for list_tags" in message, message
    assert "zqxnosuchfield" in message and "fields in use" in message.lower(), message
    assert not tags.isError and not tree.isError


def test_errors_name_the_tools_own_parameters(env: Env, errlog: TextIO) -> None:
    """Issue 37: 001's tools take `note_path` and `root_path`; their errors named the
    daemon's `path` and `folder`."""
    async def run(session: ClientSession) -> list[types.CallToolResult]:
        return [await session.call_tool("read_note", {"note_path": "   "}),
                await session.call_tool("search_notes", {"pattern": "x", "root_path": "../up"}),
                await session.call_tool("rag_read_note", {"path": "   "})]

    note, root, own = (text(r) for r in session_run(env, errlog, run))
    assert "Invalid argument `note_path` for read_note" in note, note
    assert "`root_path`" in root and "folder" not in root, root
    assert "Invalid argument `path` for rag_read_note" in own, own  # ragd's own name
