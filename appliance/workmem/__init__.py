"""Working memory for Kumiho's stock memory sidecar: its buffer operations on the appliance's own working memory
(``buffer``), served over the Redis protocol (``redis_server``) and the memory-proxy route
(``appliance.admin_api.memory_proxy``)."""
