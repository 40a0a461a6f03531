"""The Litestar admin API: thin controllers over the services, one map from domain errors to HTTP."""
