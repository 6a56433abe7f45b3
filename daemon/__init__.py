"""ragd: a local search daemon over notes, mail and books.

Keep this module free of heavy imports: thin clients import ``ragd.daemon.ipc`` through it.
"""

__version__ = "0.1.0"
