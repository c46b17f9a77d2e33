"""HTTP and WebSocket API: thin handlers that parse, authorise, call the core, serialise."""
