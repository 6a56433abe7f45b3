"""One document found in a container: what a container kind yields and the indexer reads.

Apart from ``base`` (the kinds' protocols and ``kind_for``, which makes each kind) so that a
kind's module, importing this, does not import the module that imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ragd.daemon.models import Document, Skip


@dataclass(frozen=True)
class Entry:
    """One document found in a container (decision 0015).

    ``key`` is its lasting identity (a Message-ID), ``locator`` where it is in the container
    (an mbox byte offset; "" for a one-document file), ``content_hash`` what decides whether it
    changed. ``load`` builds the ``Document`` (or says why not) and is called only for new and
    changed documents: converting attachments costs more than reading. ``location`` is the
    metadata that depends on where it was found (its folder), refreshed on a move.
    """

    key: str
    locator: str
    content_hash: str
    end: int  # the byte offset just after it in its container
    load: Callable[[], Document | Skip]
    location: dict[str, Any] = field(default_factory=dict)
