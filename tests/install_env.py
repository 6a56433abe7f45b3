"""Installing the built wheel as users do (issue 27, decision 0034): helpers, and the wheel.

The wheel is built once per session from this tree, with the shipped model graph (exported
first if the tree has none: ~30 s). Every install resolves its dependencies from the package
index, as a user's would; nothing comes from the development venv.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = "Scripts" if os.name == "nt" else "bin"


# The download caches stay the machine's (they are only caches: a HOME of its own would make
# every install download its ~200 MB of wheels again).
CACHES = {"PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or platformdirs.user_cache_dir("pip"),
          "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or platformdirs.user_cache_dir("uv")}


def clean_env(home: Path, *path: Path, **extra: str) -> dict[str, str]:
    """An environment that knows nothing of the development venv or the source tree: its own
    HOME (no vault, no Documents), its own RAGD_HOME, and ``path`` before the system's PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RAGD_", "XDG_", "PYTHON", "VIRTUAL_ENV", "PIPX_", "UV_"))}
    system = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                             if not p.startswith(sys.prefix))
    env.update({"HOME": str(home), "RAGD_HOME": str(home / "ragd"), "HF_HUB_OFFLINE": "1",
                "PATH": os.pathsep.join([*map(str, path), system]), **CACHES})
    env.update(extra)
    return env


def run(cmd: list[str | Path], env: dict[str, str] | None = None, timeout: float = 600,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``cmd``; on failure, the command's own output is the assertion message.

    With a clean ``env``, in its HOME: from the source tree, ``python -c`` would import the
    tree's ``daemon/`` folder as the top-level ``daemon`` instead of python-daemon."""
    if cwd is None and env is not None:
        cwd = Path(env["HOME"])
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=cwd, check=False)
    assert done.returncode == 0, (f"{' '.join(map(str, cmd))} exited {done.returncode}\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def other_python() -> tuple[str, str] | None:
    """A Python other than this one that ragd supports (3.13, else 3.12), and its version:
    the classifiers claim 3.11 to 3.13, and CI tests one more than the venv's own."""
    import glob
    import shutil

    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    for version in ("3.13", "3.12"):
        if version == mine:
            continue
        found = [shutil.which(f"python{version}"),
                 *sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/"
                                                      f"python{version}")))]
        for exe in filter(None, found):
            # A pyenv shim exists whether or not that version is selected: ask it.
            done = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2])"],
                                  capture_output=True, text=True, check=False)
            if done.returncode == 0 and done.stdout.strip() == str(tuple(map(int,
                                                                             version.split(".")))):
                return exe, version
    return None


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragd.daemon.embed.model_pack import DEFAULT_MODEL, packaged

    if packaged(DEFAULT_MODEL) is None:
        run([sys.executable, "-m", "ragd.daemon.embed.model_pack", "build"])
    out = tmp_path_factory.mktemp("dist")
    # Verbose, so that setuptools' own warnings are kept (build.log, read by test_wheel.py).
    done = run([sys.executable, "-m", "pip", "wheel", "--verbose", "--no-deps",
                "--wheel-dir", out, REPO], cwd=REPO)
    (out / "build.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    (built,) = out.glob("ragd-*.whl")
    return built
