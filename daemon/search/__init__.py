"""Hybrid search: a keyword leg (Whoosh BM25F) and a semantic leg (FAISS), fused with RRF."""
