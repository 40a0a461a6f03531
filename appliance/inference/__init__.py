"""Model adapters: the chat models (llama.cpp, an OpenAI-compatible endpoint) and the embedders (ONNX) behind
the ports of ``appliance.core.ports``, the model factory, model installation, and PII redaction (spaCy)."""
