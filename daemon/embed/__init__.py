"""Embedders: the factory, the ONNX runtime embedder and the one-time ONNX export."""
