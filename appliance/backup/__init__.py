"""Backups of the whole memory: one archive file (graph, index, artifacts, working memory, configuration without
credentials) with a manifest and checksums; online while the appliance serves; restore; scheduled snapshots,
auto-hydrate and the snapshot before a schema upgrade. The format is documented in docs/operations.md."""
