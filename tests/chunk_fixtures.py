"""Catalog chunk rows for the store tests, without a catalog."""

from __future__ import annotations

from ragd.daemon.stores.catalog import ChunkRow


def row(i: int, text: str = "alpha beta", path: str = "a/b/n.md", *, title: str = "",
        collection: str = "obsidian", date: int | None = 20240101, tags: tuple[str, ...] = (),
        sender: str = "") -> ChunkRow:
    """Chunk ``i`` of source ``i``, titled "T<i>" under the heading "H"."""
    return ChunkRow(id=i, source_id=i, ordinal=0, text=text, embed_hash=str(i),
                    heading_path=("H",), collection=collection, collection_type="system",
                    root="/v", path=path, title=title or f"T{i}", source_type="markdown",
                    date=date, metadata={"sender": sender} if sender else {}, tags=tags)
