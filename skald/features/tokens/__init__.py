"""API tokens: a member's keys for scripts, phone apps and Home Assistant
(docs/dev/api.md). A token signs a request in through `Authorization: Bearer` only,
acts with its member's role and approval rules, and reaches only the routes its scopes
name (`skald/features/tokens/auth.py`)."""
