"""Where the import packages live (decision 0034); everything else is in pyproject.toml.

The project keeps its folders at the top (daemon/, tray/, mcp_bridge/) and installs them under
one distribution-owned name, ``ragd``: ``ragd.daemon``, ``ragd.tray``, ``ragd.mcp_bridge``. A
top-level ``daemon`` would overwrite python-daemon, and ``mcp_bridge`` is the mcp-bridge package.
``package_dir`` maps each folder, and every subpackage (and folder of package data) is listed
from the folders here, so a new one needs no edit. ``ragd`` itself is packaging/ragd/, one
``__init__.py``: with a file of its own, ``pip uninstall`` removes its folder whole.

The autostart templates and the icon install under ``<prefix>/share/ragd/``, where
``ragd.tray.autostart`` looks for them outside a source tree; its README.txt, a file of the
folder itself, makes uninstall remove the folder too (pip removes a folder only where a file
it installed sits directly in it).
"""

from pathlib import Path

from setuptools import find_namespace_packages, find_packages, setup

FOLDERS = ("daemon", "tray", "mcp_bridge")

packages = ["ragd"] + [f"ragd.{name}" for folder in FOLDERS
            for name in (folder, *(f"{folder}.{sub}" for sub in find_packages(folder)))]
# Folders of data inside the packages (the sample vault, the shipped graph, the window's
# page) are listed too, as namespace packages: left out, setuptools warns that it would
# ignore them, and a later setuptools would.
packages += [f"ragd.{folder}.{sub}" for folder in FOLDERS
             for sub in find_namespace_packages(folder, exclude=["*__pycache__*"])
             if f"ragd.{folder}.{sub}" not in packages]
shared = [(f"share/ragd/{folder}", sorted(str(p) for p in Path("packaging", folder).iterdir()
                                         if p.is_file()))
          for folder in ("autostart", "icons", "mcp")]
shared.append(("share/ragd", ["packaging/share/README.txt"]))
setup(packages=packages,
      package_dir={"ragd": "packaging/ragd", **{f"ragd.{folder}": folder for folder in FOLDERS}},
      data_files=shared)
