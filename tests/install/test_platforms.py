"""The whole dependency tree of the wheel resolves, from wheels only, on every platform ragd
names (issue 40): uv resolves ``[project] dependencies`` with real platform tags (macOS at its
floor version, Linux at glibc 2.28, Windows), for Python 3.11, 3.12 and 3.13,
dependencies of dependencies included (no ``--no-deps``). A release that drops a platform's wheels fails here
before a user on that platform finds out. docs/platforms.md gives the floors this proves.

It asks the package index (PyPI here and in CI); where the index cannot be reached it skips
and says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
# (uv's target, macOS floor or None): the oldest systems the wheels of every dependency cover.
TARGETS = [
    ("aarch64-apple-darwin", "14.0"),   # faiss-cpu >= 1.15: macosx_14_0_arm64
    ("x86_64-apple-darwin", "13.0"),    # onnxruntime <= 1.23.2, faiss-cpu < 1.13 (the Intel pins)
    ("x86_64-pc-windows-msvc", None),
    ("x86_64-manylinux_2_28", None),    # onnxruntime and faiss-cpu: manylinux_2_27/2_28
    ("aarch64-manylinux_2_28", None),
]
# Every Python ragd supports on every target (issue 40): ~2-3 s a resolution.
PYTHONS = ("3.11", "3.12", "3.13")
JOBS = [(t, m, p) for p in PYTHONS for t, m in TARGETS]
# One step older fails: the floors above are the floors.
BELOW = [("aarch64-apple-darwin", "13.0"), ("x86_64-apple-darwin", "12.0"),
         ("x86_64-manylinux_2_17", None)]


def _index_reachable() -> bool:
    url = os.environ.get("UV_INDEX_URL") or os.environ.get("PIP_INDEX_URL") \
        or "https://pypi.org/simple/"
    try:
        urllib.request.urlopen(urllib.request.Request(url.rstrip("/") + "/onnx/",
                                                      method="HEAD"), timeout=10)
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def requirements(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if UV is None:
        pytest.skip("uv is not installed (it comes with the dev extra)")
    if not _index_reachable():
        pytest.skip("the package index cannot be reached: the resolution needs it")
    deps = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]["dependencies"]
    path = tmp_path_factory.mktemp("platforms") / "requirements.in"
    path.write_text("\n".join(deps) + "\n", encoding="utf-8")
    return path


def _resolve(requirements: Path, target: str, macos: str | None, python: str
             ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MACOSX_DEPLOYMENT_TARGET"}
    if macos:
        env["MACOSX_DEPLOYMENT_TARGET"] = macos
    assert UV is not None
    # --python names this interpreter: without it uv looks for a Python of that version on
    # the machine first (10+ s through pyenv's shims here), though it only needs its tags.
    return subprocess.run([UV, "pip", "compile", str(requirements), "--python", sys.executable,
                           "--python-platform", target,
                           "--python-version", python, "--only-binary", ":all:", "--quiet",
                           "--no-header"], capture_output=True, text=True, env=env, timeout=300)


Job = tuple[str, str | None, str]  # uv's target, macOS floor, Python


@pytest.fixture(scope="module")
def resolved(requirements: Path) -> dict[Job, subprocess.CompletedProcess[str]]:
    """Every resolution both tests read, at once: the network is the bound, not the cores."""
    jobs: list[Job] = [*JOBS, *((t, m, "3.11") for t, m in BELOW)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        return dict(zip(jobs, pool.map(lambda j: _resolve(requirements, *j), jobs),
                        strict=True))


def test_every_platform_resolves_the_whole_tree_from_wheels(
        resolved: dict[Job, subprocess.CompletedProcess[str]]) -> None:
    failed = [f"{t} (macOS {m}) Python {p}: {resolved[t, m, p].stderr.strip()[-400:]}"
              for t, m, p in JOBS if resolved[t, m, p].returncode != 0]
    assert not failed, "\n".join(failed)
    first = resolved[JOBS[0]].stdout
    pinned = {line.split("==")[0]: line.split("==")[1].split()[0]
              for line in first.splitlines() if "==" in line}
    assert "onnxruntime" in pinned and "faiss-cpu" in pinned, first


def test_one_step_below_the_floors_does_not(
        resolved: dict[Job, subprocess.CompletedProcess[str]]) -> None:
    below = [t for t, m in BELOW if resolved[t, m, "3.11"].returncode == 0]
    assert not below, f"older systems resolve now: lower the floors in docs/platforms.md " \
                      f"and TARGETS ({below})"
