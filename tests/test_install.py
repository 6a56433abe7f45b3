"""The install is CPU-only: no CUDA runtime (nvidia-*) or triton came along with torch.

Also run as a script by ``make setup`` right after installing, so a CUDA build is reported
where it happened (stdlib only).
"""

from __future__ import annotations

import importlib.metadata
import sys

GPU_PREFIXES = ("nvidia-", "nvidia_", "triton")


def gpu_packages() -> list[str]:
    """Installed distributions that only a CUDA build of torch brings."""
    names = {(dist.metadata["Name"] or "").lower() for dist in importlib.metadata.distributions()}
    return sorted(n for n in names if n.startswith(GPU_PREFIXES))


def test_the_install_has_no_cuda_packages() -> None:
    assert gpu_packages() == []


def test_torch_if_installed_is_a_cpu_build() -> None:
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return
    requires = importlib.metadata.requires("torch") or []
    # A CUDA wheel declares nvidia-* runtime packages; a CPU wheel (Linux "+cpu", macOS) none.
    cuda = [r for r in requires if r.lower().startswith(GPU_PREFIXES) and "extra ==" not in r]
    assert cuda == [], f"torch {version} is a CUDA build: {cuda}"


def main() -> int:
    if bad := gpu_packages():
        print(f"error: the install contains CUDA packages: {', '.join(bad)}\n"
              "hint: torch came from PyPI's CUDA build. Delete .venv and run `make setup` "
              "where https://download.pytorch.org/whl/cpu is reachable, or point TORCH_INDEX "
              "at an index that serves the CPU wheel", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
