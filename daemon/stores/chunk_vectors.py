"""The chunks a search filter selects, listed from the catalog no further than a bound.

A filtered semantic search needs to know whether its filter is narrow before choosing how to
search (decision 0020): a narrow one is searched exactly over every matching chunk, a broad
one through the unfiltered neighbours. Listing at most ``limit + 1`` ids answers that with one
evaluation of the filter, and gives the narrow case its ids; a broad filter (a collection
holding most of a large index) stops after ``limit`` rows instead of listing a million.

The query uses the catalog's connection under its lock, like its own reads; it lives here
while ``catalog.py`` is being changed by other work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from daemon.stores.catalog import Catalog


def matching_ids(catalog: Catalog, where: str, args: Sequence[Any], limit: int) -> list[int]:
    """Ids of the chunks matching the SQL condition over ``s`` (sources) and ``c``
    (collections), as ``Catalog.filter_chunk_ids`` takes it, at most ``limit`` of them."""
    sql = ("SELECT ch.id FROM chunks ch JOIN sources s ON s.id=ch.source_id"
           f" JOIN collections c ON c.id=s.collection_id WHERE {where} LIMIT ?")
    with catalog._lock:
        rows = catalog._db.execute(sql, (*args, limit)).fetchall()
    return [r[0] for r in rows]
