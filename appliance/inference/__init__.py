"""Model adapters: embeddings (ONNX), later chat generation (llama.cpp) and redaction (spaCy)."""
