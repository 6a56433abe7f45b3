"""The built wheel, once per session (tests/install_env.py)."""

from install_env import wheel

__all__ = ["wheel"]
