"""The MCP bundle (`make mcpb`): valid against the MCPB manifest schema, and runnable as a
desktop host runs it (`uv run --directory <bundle> server.py`, the vault from user_config)."""

from __future__ import annotations

import io
import json
import shutil
import sys
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import anyio
import jsonschema
import mcp.types as types
import pytest
from install_env import REPO, clean_env, run
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from vault_fixtures import write_vault

pytestmark = pytest.mark.slow

TOOLS = Path(sys.executable).parent
# The schema ships in the official bundle tool's npm package (MIT); pinned for repeatable runs.
MCPB_PACKAGE = "https://registry.npmjs.org/@anthropic-ai/mcpb/-/mcpb-2.1.2.tgz"


@pytest.fixture(scope="module")
def schema() -> dict[str, object]:
    try:
        with urllib.request.urlopen(MCPB_PACKAGE, timeout=60) as response:
            data = response.read()
    except (urllib.error.URLError, TimeoutError) as exc:
        pytest.skip(f"the npm registry is not reachable for the MCPB schema: {exc}")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.extractfile("package/schemas/mcpb-manifest-v0.4.schema.json")
        assert member is not None
        return json.loads(member.read())


@pytest.fixture(scope="module")
def bundle(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mcpb")
    run([sys.executable, REPO / "packaging" / "mcpb" / "build.py", wheel, "--out", out])
    (built,) = out.glob("ragd-*.mcpb")
    return built


def test_the_manifest_is_valid(bundle: Path, schema: dict[str, object]) -> None:
    with zipfile.ZipFile(bundle) as z:
        manifest = json.loads(z.read("manifest.json"))
        names = set(z.namelist())
    jsonschema.validate(manifest, schema, format_checker=jsonschema.FormatChecker())
    assert manifest["server"]["type"] == "uv" and manifest["manifest_version"] == "0.4"
    assert {"manifest.json", "pyproject.toml", "server.py", "icon.png", "LICENSE"} <= names
    assert any(n.startswith("wheels/ragd-") and n.endswith(".whl") for n in names)
    # A manifest that breaks the schema is refused: the check can fail.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**manifest, "server": {"type": "docker"}}, schema)


@pytest.mark.skipif(shutil.which("uv", path=str(TOOLS)) is None, reason="uv not installed")
def test_the_host_runs_it_on_the_configured_vault(bundle: Path, tmp_path: Path) -> None:
    where = tmp_path / "installed"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(where)
        manifest = json.loads(z.read("manifest.json"))
    vault = write_vault(tmp_path / "My Vault")
    home = tmp_path / "home"
    home.mkdir()
    config = manifest["server"]["mcp_config"]
    # What the host does: substitute the bundle folder and the user's answers, then spawn.
    values = {"${__dirname}": str(where), "${user_config.vault}": str(vault)}
    args = [values.get(a, a) for a in config["args"]]
    # uv on PATH, as on the host; this Python rather than one uv would download.
    env = clean_env(home, TOOLS, UV_PYTHON=sys.executable, UV_PYTHON_DOWNLOADS="never",
                    **{k: values.get(v, v) for k, v in config["env"].items()})

    async def session() -> tuple[list[str], str]:
        params = StdioServerParameters(command=str(TOOLS / config["command"]), args=args, env=env,
                                       cwd=str(home))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            listed = [t.name for t in (await s.list_tools()).tools]
            with anyio.fail_after(180):
                while True:
                    result = await s.call_tool("rag_search", {"query": "watering tomatoes"})
                    block = result.content[0]
                    assert isinstance(block, types.TextContent) and not result.isError, result
                    if "Garden/Tomatoes.md" in block.text:
                        return listed, block.text
                    await anyio.sleep(1)

    try:
        listed, found = anyio.run(session)
    finally:
        run([where / ".venv" / "bin" / "ragd", "stop"], env=env)
    assert listed == [t["name"] for t in manifest["tools"]]
    assert "Garden/Tomatoes.md" in found
