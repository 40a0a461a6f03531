"""kumiho-ce: an offline, self-hosted Kumiho Community Edition appliance."""

__version__ = "0.1.0"
