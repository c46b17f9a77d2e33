"""The request log: each member's own model requests, metadata only (issue 30)."""
