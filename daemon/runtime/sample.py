"""The sample vault: what `make run` indexes on a machine with no vault (decision 0032).

A getting-started guide to ragd (notes with properties, tags and wikilinks, and a PDF) ships
in the package (``daemon/sample_vault``). `ragd index` with no vault configured, none found in
Obsidian's list and nothing else to index copies it to the user's Documents folder (a folder
the user can open in Obsidian and edit, and that the path policy accepts, which an installed
package's folder under ``/usr`` or a hidden ``.venv`` is not) and registers it as the
`obsidian` collection. The daemon keeps it as it keeps any vault indexed before; a vault the
user names, or one Obsidian lists later, replaces it.
"""

from __future__ import annotations

import logging
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragd.daemon.runtime.surface import Registrar
    from ragd.daemon.stores.catalog import Collection

log = logging.getLogger(__name__)

FOLDER_NAME = "ragd-sample-vault"
DESCRIPTION = ("ragd's sample vault, a getting-started guide (no vault was found: name yours "
               "with VAULT= or [obsidian] vaults)")
_META = "sample_vault"  # catalog meta: the root the sample was registered with


def packaged() -> Traversable:
    """The sample vault as the package ships it."""
    return resources.files("ragd.daemon").joinpath("sample_vault")


def default_folder() -> Path:
    """Where the sample is copied: ``ragd-sample-vault`` in the user's Documents folder."""
    import platformdirs

    return Path(platformdirs.user_documents_dir()) / FOLDER_NAME


def install(dest: Path) -> Path:
    """Copy the packaged sample to ``dest``, file by file, leaving every file already there
    as it is (the user's edits are kept; a deleted note comes back). Returns ``dest``."""
    def copy(src: Traversable, to: Path) -> None:
        for entry in src.iterdir():
            if entry.is_dir():
                copy(entry, to / entry.name)
            elif not (to / entry.name).exists():
                to.mkdir(parents=True, exist_ok=True)
                (to / entry.name).write_bytes(entry.read_bytes())

    copy(packaged(), dest)
    return dest


def is_sample(app: Registrar, coll: Collection | None) -> bool:
    """Is ``coll`` the sample vault registered by :func:`register`?"""
    return coll is not None and app.catalog.get_meta(_META) == coll.root


def register(app: Registrar, folder: Path | None = None) -> Collection:
    """Copy the sample (to ``folder``, default :func:`default_folder`) and register it as
    the `obsidian` collection."""
    root = install(folder or default_folder()).resolve()
    log.warning("no vault found: indexing ragd's sample vault at %s", root)
    # As a configured vault: a vault found or named later replaces it like any setting.
    coll = app.ensure_system("obsidian", root, root, kind="vault", description=DESCRIPTION)
    app.catalog.set_meta(_META, coll.root)
    return coll
