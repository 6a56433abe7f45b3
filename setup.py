"""Where the import packages live (decision 0034); everything else is in pyproject.toml.

The project keeps its folders at the top (daemon/, tray/, mcp_bridge/) and installs them under
one distribution-owned name, ``ragd``: ``ragd.daemon``, ``ragd.tray``, ``ragd.mcp_bridge``. A
top-level ``daemon`` would overwrite python-daemon, and ``mcp_bridge`` is the mcp-bridge package.
``package_dir`` maps each folder, and every subpackage is listed from the folders here, so a new
subpackage needs no edit. ``ragd`` itself is a namespace package (it has no folder of its own).
"""

from setuptools import find_packages, setup

FOLDERS = ("daemon", "tray", "mcp_bridge")

packages = [f"ragd.{name}" for folder in FOLDERS
            for name in (folder, *(f"{folder}.{sub}" for sub in find_packages(folder)))]
setup(packages=packages, package_dir={f"ragd.{folder}": folder for folder in FOLDERS})
