"""The MCP front door: the tool catalogue, the server over the services, the stdio shim and the tool docs."""
