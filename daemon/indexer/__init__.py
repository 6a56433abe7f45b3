"""Indexing: reconcile the disk with the catalog, then convert, chunk, embed and commit."""
