"""`make setup` takes the Python it is given (``PYTHON=``) and checks its version before
anything is installed (issue 40): Ubuntu 22.04's python3 is 3.10 and macOS's own is 3.9, and
`make setup` used to make a venv and install torch into it before pip refused ragd."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make here")


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-s", "-C", str(REPO), *args], capture_output=True,
                          text=True, timeout=60)


def test_a_python_new_enough_passes_the_check() -> None:
    done = make("check-python", f"PYTHON={sys.executable}")
    assert done.returncode == 0, done.stderr


def test_an_old_python_stops_setup_before_anything_is_installed(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    done = make("setup", f"VENV={venv}", f"PYTHON={sys.executable}", "PYTHON_MIN=3.99")
    assert done.returncode != 0
    assert "ragd needs Python 3.99 or newer" in done.stderr
    assert "make PYTHON=" in done.stderr and "uv python install" in done.stderr
    assert not venv.exists(), "a venv was made with a Python ragd refuses"


def test_a_missing_python_says_how_to_name_one(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    done = make("setup", f"VENV={venv}", f"PYTHON={tmp_path / 'python3.12'}")
    assert done.returncode != 0 and "there is no" in done.stderr
    assert "make PYTHON=/path/to/python3.12" in done.stderr and not venv.exists()
