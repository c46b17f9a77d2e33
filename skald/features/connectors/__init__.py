"""Connectors (MCP servers) as a product: the catalogue and grants (`store`), the
marketplace feed and installer (`feed`, `install`), the access rules (`service`) and
the routes (`routes`). The MCP client itself is `skald.mcp`. See docs/dev/connectors.md.
"""
