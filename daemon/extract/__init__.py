"""Extraction outside the daemon (decision 0041).

Everything that reads a user's file into sections and chunks (a note's markdown, a mail, a
feed, a commit log, a source file's symbols, a book's record) runs in worker processes under a
per-item deadline and a memory limit. The daemon keeps the catalog, the indexes, the embedder
and the writer; what comes back is already chunked and bounded.

- ``wire``: the frames between the daemon and a worker, and the bounds every field is cut to.
- ``kinds``: a source kind as a plain description a worker rebuilds it from.
- ``work``: what a worker does with one item or one container stream (pure of processes).
- ``worker``: the worker process itself (``python -m ragd.daemon.extract.worker``).
- ``pool``: the daemon's side: start, feed, time and kill workers; lanes for small work.
- ``stream``: a container's entries read in a worker, seen by the writer as an entry stream.
- ``readahead``: the next file or entry read on a thread while the writer commits (the writer's
  side of ``stream``; the indexer uses it, so it sits here, below the indexer).
"""
