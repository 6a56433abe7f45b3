"""Search filters, validated once and translated for each leg (SQL for FAISS, Whoosh query).

``Filters`` itself is in ``ragd.daemon.models``: the keyword stores apply it too, and they sit
below search.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from ragd.daemon.errors import InvalidArgument
from ragd.daemon.models import Filters

MODES = ("hybrid", "keyword", "semantic")
COLLECTION_TYPES = ("system", "code", "project")
SYSTEM_FAMILIES = ("obsidian", "email", "calibre", "rss")


def system_family(value: str, collections: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The collections a name means, from (name, type) pairs: itself, and for a system name
    (``email``) every system collection of its family (``email-work``: a second mail path).
    Empty when no collection has that name."""
    names = [n for n, _ in collections]
    if value not in names:
        return ()
    if value not in SYSTEM_FAMILIES:
        return (value,)
    return (value, *(n for n, t in collections if t == "system" and n.startswith(value + "-")))


def parse_date(param: str, value: str | None) -> int | None:
    """'YYYY-MM-DD' -> YYYYMMDD, or an InvalidArgument that says how to write it."""
    if value is None or value == "":
        return None
    try:
        d = dt.date.fromisoformat(str(value).strip()[:10])
    except ValueError:
        raise InvalidArgument(param, f"{value!r} is not a date",
                              "use the form YYYY-MM-DD, e.g. 2024-05-31") from None
    return d.year * 10000 + d.month * 100 + d.day


def clean_folder(folder: str | None) -> str | None:
    if folder is None:
        return None
    f = folder.replace("\\", "/").strip().strip("/")
    return f or None


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def to_sql(f: Filters) -> tuple[str, list[Any]]:
    """A WHERE condition over ``s`` (sources) and ``c`` (collections)."""
    where: list[str] = ["1=1"]
    args: list[Any] = []
    if f.collections is not None:
        where.append(f"c.name IN ({','.join('?' * len(f.collections))})")
        args += list(f.collections)
    if f.source_type:
        where.append("s.source_type = ?")
        args.append(f.source_type)
    if f.date_from is not None:
        where.append("s.date >= ?")
        args.append(f.date_from)
    if f.date_to is not None:
        where.append("s.date <= ?")
        args.append(f.date_to)
    if f.folder:
        where.append("s.path LIKE ? ESCAPE '\\'")
        args.append(_like_escape(f.folder) + "/%")
    for tag in f.tags:
        where.append("EXISTS (SELECT 1 FROM source_tags t WHERE t.source_id = s.id"
                     " AND (t.tag = ? OR t.tag LIKE ? ESCAPE '\\'))")
        args += [tag, _like_escape(tag) + "/%"]
    for key, value in (("sender", f.sender), ("authors", f.author)):
        if value:
            where.append(f"lower(COALESCE(json_extract(s.metadata, '$.{key}'), '')) LIKE ?"
                         " ESCAPE '\\'")
            args.append("%" + _like_escape(value.lower()) + "%")
    return " AND ".join(where), args


def to_whoosh(f: Filters) -> Any:
    """The same filter as a Whoosh query (None when nothing is filtered)."""
    from whoosh import query as Q

    parts: list[Any] = []
    if f.collections is not None:
        parts.append(Q.Or([Q.Term("collection", c) for c in f.collections])
                     if f.collections else Q.NullQuery)
    if f.source_type:
        parts.append(Q.Term("source_type", f.source_type))
    if f.date_from is not None or f.date_to is not None:
        parts.append(Q.NumericRange("date", f.date_from, f.date_to))
    if f.folder:
        parts.append(Q.Term("folders", f.folder))
    parts.extend(Q.Term("tags", t) for t in f.tags)
    if f.sender:
        parts.append(Q.Wildcard("sender", f"*{f.sender.lower()}*"))
    if f.author:
        parts.append(Q.Wildcard("author", f"*{f.author.lower()}*"))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Q.And(parts)
