"""Install footprint and first start: the lean wheel against the development install.

    python bench/install.py [--wheel dist/ragd-X-py3-none-any.whl] [--before-tree DIR]

Measures, in one run (decision 0034):
- the wheel's size, and a fresh venv with it installed by pip (size, install seconds,
  whether torch/transformers/nvidia-* came along);
- the development venv's size (this interpreter's venv: `make setup`, torch included);
- the first start in a new data folder, as `ragd index` with no vault anywhere (the sample
  vault): the lean venv (int8 graph derived from the shipped one), the development venv on
  this tree (the same), and, with ``--before-tree`` (a checkout from before decision 0034,
  e.g. ``git worktree add /tmp/before bbf18da``), the development venv on that tree, which
  exported the graph with torch at that moment. Rounds alternate the three.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from install_env import BIN, clean_env, run  # noqa: E402

from bench.common import table, write_json  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "sentence-transformers", "triton", "scipy")


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def build_wheel(out: Path) -> Path:
    run([sys.executable, "-m", "ragd.daemon.embed.model_pack", "build", "--if-stale"])
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
         "--wheel-dir", out, REPO], cwd=REPO)
    return next(out.glob("ragd-*.whl"))


def first_start(cmd: list[str | Path], root: Path, cwd: Path | None = None) -> float:
    """Seconds of `ragd index` in an empty HOME (no vault: the sample vault)."""
    home = Path(tempfile.mkdtemp(prefix="home-", dir=root))
    env = clean_env(home, Path(str(cmd[0])).parent)
    started = time.perf_counter()
    run([*cmd, "index", "--json"], env=env, cwd=cwd or home)
    seconds = time.perf_counter() - started
    shutil.rmtree(home, ignore_errors=True)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path)
    parser.add_argument("--before-tree", type=Path)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ragd-install-"))
    try:
        wheel = args.wheel.resolve() if args.wheel else build_wheel(root)
        venv = root / "lean"
        run([sys.executable, "-m", "venv", venv])
        env = clean_env(root, venv / BIN)
        started = time.perf_counter()
        run([venv / BIN / "python", "-m", "pip", "install", "--quiet", wheel], env=env)
        install_s = time.perf_counter() - started
        listed = json.loads(run([venv / BIN / "python", "-m", "pip", "list", "--format", "json"],
                                env=env).stdout)
        heavy = sorted(p["name"] for p in listed
                       if p["name"].lower() in HEAVY or p["name"].lower().startswith("nvidia"))
        sizes = {"wheel_mb": wheel.stat().st_size / 1e6, "lean_venv_mb": du(venv) / 1e6,
                 "dev_venv_mb": du(Path(sys.prefix)) / 1e6}
        starts: dict[str, list[float]] = {"lean (shipped graph)": [], "dev, this tree": []}
        if args.before_tree:
            starts["dev, before tree (export)"] = []
        for _ in range(args.rounds):
            starts["lean (shipped graph)"].append(first_start([venv / BIN / "ragd"], root))
            starts["dev, this tree"].append(first_start([Path(sys.prefix) / BIN / "ragd"], root))
            if args.before_tree:
                # `python -m daemon...` from the old tree's folder: its top-level packages.
                old = [sys.executable, "-m", "daemon.cli.main"]
                starts["dev, before tree (export)"].append(
                    first_start(old, root, cwd=args.before_tree))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base = statistics.median(starts["lean (shipped graph)"])
    print(table("Install footprint", [
        ("wheel", f"{sizes['wheel_mb']:.1f} MB"),
        ("lean venv (pip install of the wheel)", f"{sizes['lean_venv_mb']:.0f} MB"),
        ("lean venv install time", f"{install_s:.1f} s"),
        ("heavy packages in the lean venv", ", ".join(heavy) or "none"),
        ("development venv (make setup)", f"{sizes['dev_venv_mb']:.0f} MB"),
    ], ["what", "value"]))
    print()
    print(table("First start in a new data folder (`ragd index`, sample vault)", [
        (name, f"{statistics.median(v):.1f} s", ", ".join(f"{x:.1f}" for x in v),
         f"{statistics.median(v) / base:.2f}") for name, v in starts.items()
    ], ["install", "median", "rounds", "x lean"]))
    path = write_json("install", {"wheel": wheel.name, "sizes_mb": sizes,
                                  "lean_install_s": install_s, "heavy_in_lean": heavy,
                                  "first_start_s": starts})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
