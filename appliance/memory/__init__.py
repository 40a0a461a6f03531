"""Session memory: the persisted working-memory buffer and session identity."""
