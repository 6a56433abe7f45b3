"""What rag_collection_info says of an rss collection: its feeds, entry counts and dates.

Read from the catalog's sources (decision 0029): no table of its own. An entry's feed is its
``feed_name`` and the file (or reader store) it was read from; a subscription recorded from an
OPML list is counted apart.
"""

from __future__ import annotations

from typing import Any

from ragd.daemon.stores.catalog import Catalog


def _day(value: int | None) -> str | None:
    if not value:
        return None
    return f"{value // 10000:04d}-{value // 100 % 100:02d}-{value % 100:02d}"


_PER_CONTAINER = (
    "SELECT container, feed, MAX(sub) AS sub, COUNT(*) AS n, MIN(date) AS first,"
    " MAX(date) AS last FROM ("
    " SELECT s.container AS container, json_extract(s.metadata, '$.feed_name') AS feed,"
    " json_extract(s.metadata, '$.subscription') AS sub, s.date AS date FROM sources s"
    " WHERE s.collection_id=? AND s.status='ok' AND s.container IS NOT NULL"
    " UNION ALL"
    " SELECT c.container, json_extract(s.metadata, '$.feed_name'),"
    " json_extract(s.metadata, '$.subscription'), s.date FROM source_copies c"
    " JOIN sources s ON s.id = c.source_id WHERE s.collection_id=? AND s.status='ok')"
    " GROUP BY container, feed ORDER BY feed, container")


def feed_stats(catalog: Catalog, collection_id: int) -> dict[str, Any]:
    """``{"feeds": [{feed_name, feed_file, count, date_from, date_to}], "entry_count",
    "subscription_count", "date_from", "date_to"}`` for one rss collection. An entry found in
    two files (a feed saved as RSS and as Atom) counts in each; ``entry_count`` counts it
    once."""
    with catalog._lock:  # short reads, as the catalog's own stats do
        rows = catalog._db.execute(_PER_CONTAINER, (collection_id, collection_id)).fetchall()
        total = catalog._db.execute(
            "SELECT COALESCE(json_extract(metadata, '$.subscription'), 0) AS sub, COUNT(*),"
            " MIN(date), MAX(date) FROM sources WHERE collection_id=? AND status='ok'"
            " GROUP BY sub", (collection_id,)).fetchall()
    feeds = [{"feed_name": r[1] or "", "feed_file": r[0], "count": r[3],
              "date_from": _day(r[4]), "date_to": _day(r[5])} for r in rows if not r[2]]
    entries = [t for t in total if not t[0]]
    return {"feeds": feeds, "entry_count": sum(t[1] for t in entries),
            "subscription_count": sum(t[1] for t in total if t[0]),
            "date_from": _day(min((t[2] for t in entries if t[2]), default=None)),
            "date_to": _day(max((t[3] for t in entries if t[3]), default=None))}
