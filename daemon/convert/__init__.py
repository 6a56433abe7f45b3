"""Documents to markdown: the formats, the converters, the worker process and the doc store.

Importing this package is free: ``formats`` uses the standard library only (thin clients use
it to check a path), and every converter library is imported inside the worker process.
"""
