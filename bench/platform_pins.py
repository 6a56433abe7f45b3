"""Do pyproject's pins have wheels on every platform ragd claims? (issue 27 item 4)

For each platform and Python version, the dependencies whose markers hold there (evaluated
here for that platform: pip evaluates markers against the running machine, whatever
``--platform`` says) go to one ``pip install --dry-run --only-binary=:all: --no-deps
--platform ... --python-version ...``. ``--no-deps``: a dependency's own markers would be
evaluated for this machine too, so transitive wheels are not checked here. Prints a table
and writes bench/results/platform_pins.json.

    python bench/platform_pins.py [--python 3.11 3.12 3.13]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
# name: (pip --platform tags, marker environment)
PLATFORMS = {
    "linux-x86_64": (["manylinux_2_28_x86_64", "manylinux2014_x86_64", "manylinux_2_17_x86_64"],
                     {"sys_platform": "linux", "platform_machine": "x86_64",
                      "platform_system": "Linux", "os_name": "posix"}),
    "linux-aarch64": (["manylinux_2_28_aarch64", "manylinux2014_aarch64",
                       "manylinux_2_17_aarch64"],
                      {"sys_platform": "linux", "platform_machine": "aarch64",
                       "platform_system": "Linux", "os_name": "posix"}),
    "macos-arm64": ([f"macosx_{v}_0_arm64" for v in (26, 15, 14, 13, 12, 11)],
                    {"sys_platform": "darwin", "platform_machine": "arm64",
                     "platform_system": "Darwin", "os_name": "posix"}),
    "macos-x86_64": ([f"macosx_{v}_0_x86_64" for v in (26, 15, 14, 13, 12, 11)]
                     + [f"macosx_10_{v}_x86_64" for v in (15, 14, 13, 12, 9)],
                     {"sys_platform": "darwin", "platform_machine": "x86_64",
                      "platform_system": "Darwin", "os_name": "posix"}),
    "windows-amd64": (["win_amd64"], {"sys_platform": "win32", "platform_machine": "AMD64",
                                      "platform_system": "Windows", "os_name": "nt"}),
}


# What each install brings: the lean runtime (the wheel, decision 0034), and with the
# reference embedder (`ragd[reference]`, which `make setup` installs).
SETS = {"lean": (), "reference": ("reference",)}


def pins(extras: tuple[str, ...] = ()) -> list[Requirement]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [Requirement(r) for r in data["dependencies"]
            + [r for e in extras for r in data["optional-dependencies"][e]]]


def check(platform: str, python: str, out: Path, extras: tuple[str, ...] = ()
          ) -> dict[str, object]:
    tags, env = PLATFORMS[platform]
    full = {**env, "python_version": python, "python_full_version": python + ".0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "extra": ""}
    wanted = [r for r in pins(extras) if r.marker is None or r.marker.evaluate(full)]
    specs = [f"{r.name}{r.specifier}" for r in wanted]
    args = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
            "--no-deps", "--only-binary=:all:", "--python-version", python,
            "--target", str(out / "t"), "--report", "-", "--quiet"]
    for tag in tags:
        args += ["--platform", tag]
    proc = subprocess.run(args + specs, capture_output=True, text=True, encoding="utf-8")
    if proc.returncode != 0:
        missing = [line.split(" (from versions")[0].removeprefix("ERROR: ")
                   for line in proc.stderr.splitlines() if "satisfies" in line][:2]
        return {"platform": platform, "python": python, "ok": False, "why": missing}
    report = json.loads(proc.stdout)
    got = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in report["install"]}
    return {"platform": platform, "python": python, "ok": True, "packages": len(got),
            "torch": got.get("torch"), "faiss-cpu": got.get("faiss-cpu"),
            "onnxruntime": got.get("onnxruntime")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", nargs="+", default=["3.11", "3.12", "3.13"])
    args = ap.parse_args()
    out = Path("/tmp/ragd-platform-pins")
    rows = [{**check(p, v, out, extras), "set": name}
            for p in PLATFORMS for v in args.python for name, extras in SETS.items()]
    print(f"{'platform':<15} {'python':<7} {'set':<10} {'resolves':<9} "
          "torch / faiss-cpu / onnxruntime")
    for r in rows:
        detail = (f"{r['torch']} / {r['faiss-cpu']} / {r['onnxruntime']}" if r["ok"]
                  else "; ".join(r["why"]))  # type: ignore[arg-type]
        print(f"{r['platform']:<15} {r['python']:<7} {r['set']:<10} "
              f"{'yes' if r['ok'] else 'NO':<9} {detail}")
    results = REPO / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "platform_pins.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
